/*
 * test_lease_table.c — the in-memory lease table (lease/table.h): lookups
 * across growth, expiry at exact times from an explicit clock, monotonic
 * acknowledgements, retention accounting.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "lease/table.h"

static void
test_find_across_growth(void **state)
{
    lease_table *t;
    (void)state;

    assert_int_equal(lease_table_alloc(&t), 0);
    for (uint64_t id = 1; id <= 20000; id++) {
        assert_non_null(
            lease_table_add(t, id, "p", 1000, LEASE_STATE_LIVE, 5000));
    }
    assert_int_equal(lease_table_count(t), 20000);
    assert_int_equal(lease_table_next_id(t), 20001);
    for (uint64_t id = 1; id <= 20000; id++) {
        lease_entry *e = lease_table_find(t, id);
        assert_non_null(e);
        assert_int_equal(e->client_id, id);
    }
    assert_null(lease_table_find(t, 20001));
    lease_table_remove(t, lease_table_find(t, 777));
    assert_null(lease_table_find(t, 777));
    assert_non_null(lease_table_find(t, 778));
    assert_int_equal(lease_table_count(t), 19999);
    /* Removing never lowers the next id: ids are not reused. */
    assert_int_equal(lease_table_next_id(t), 20001);
    lease_table_free(t);
}

static void
test_expiry_is_exact(void **state)
{
    lease_table *t;
    lease_entry *e;
    (void)state;

    assert_int_equal(lease_table_alloc(&t), 0);
    e = lease_table_add(t, 1, "agent", 300, LEASE_STATE_LIVE, 1000 + 300);
    assert_true(lease_entry_live(e, 1000));
    assert_true(lease_entry_live(e, 1299));
    assert_int_equal(lease_entry_remaining(e, 1299), 1);
    assert_false(lease_entry_live(e, 1300));
    assert_int_equal(lease_entry_remaining(e, 1300), 0);

    /* A renewal before expiry extends from the renewal time. */
    lease_entry_renew(e, 1250);
    assert_true(lease_entry_live(e, 1549));
    assert_false(lease_entry_live(e, 1550));

    /* An ended lease is never live, whatever its expiry says. */
    e->state = LEASE_STATE_CLOSED;
    assert_false(lease_entry_live(e, 1251));
    lease_table_free(t);
}

static void
test_ack_is_monotonic(void **state)
{
    lease_table *t;
    lease_entry *e;
    (void)state;

    assert_int_equal(lease_table_alloc(&t), 0);
    e = lease_table_add(t, 9, "", 1000, LEASE_STATE_LIVE, 2000);
    lease_entry_ack(e, 10);
    assert_int_equal(e->watermark, 10);
    lease_entry_ack(e, 4); /* a late, older acknowledgement */
    assert_int_equal(e->watermark, 10);
    lease_entry_ack(e, 0);
    assert_int_equal(e->watermark, 10);
    lease_entry_ack(e, 11);
    assert_int_equal(e->watermark, 11);
    lease_table_free(t);
}

static void
test_retention_accounting(void **state)
{
    lease_table *t;
    lease_entry *e;
    (void)state;

    assert_int_equal(lease_table_alloc(&t), 0);
    e = lease_table_add(t, 3, "", 1000, LEASE_STATE_LIVE, 2000);
    lease_entry_record_added(e, 1, 100, 500);
    lease_entry_record_added(e, 3, 120, 600);
    lease_entry_record_added(e, 2, 110, 700);
    assert_int_equal(e->retained, 3);
    assert_int_equal(e->retained_bytes, 330);
    assert_int_equal(e->max_seq, 3);
    assert_int_equal(e->oldest_ms, 500);
    lease_entry_records_removed(e, 2, 210);
    assert_int_equal(e->retained, 1);
    assert_int_equal(e->retained_bytes, 120);
    lease_entry_records_removed(e, 1, 120);
    assert_int_equal(e->retained, 0);
    assert_int_equal(e->oldest_ms, 0);
    lease_table_free(t);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find_across_growth),
        cmocka_unit_test(test_expiry_is_exact),
        cmocka_unit_test(test_ack_is_monotonic),
        cmocka_unit_test(test_retention_accounting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
