/*
 * test_admit.c — the admission rules of lease/admit.h over a real lease
 * table and a real LevelDB (for the expiry a refusal must make durable).
 *
 * Owns: one case per verdict, the order of the checks (stale before a bad
 * acknowledgement, both before the window), and what each leaves behind:
 * an acknowledgement is applied only to a call that is not stale and not
 * malformed; a lease found past its TTL is ended and its end staged in the
 * call's transaction.
 * Never: starts onced; reads a clock (every time is given).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "lease/admit.h"
#include "lease/lease.h"
#include "store/store.h"

#define NOW    10000
#define TTL    1000
#define WINDOW 8

typedef struct fixture {
    char dir[64];
    store *st;
    store_txn *txn;
    lease_table *lt;
    lease_entry *live; /* client 1, live until NOW + TTL */
} fixture;

static int
setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));

    snprintf(f->dir, sizeof(f->dir), "/tmp/once-admit-XXXXXX");
    if (f == NULL || mkdtemp(f->dir) == NULL ||
        store_open(&f->st, f->dir, NULL) != 0 ||
        lease_table_alloc(&f->lt) != 0) {
        return -1;
    }
    f->live =
        lease_table_add(f->lt, 1, "agent", TTL, LEASE_STATE_LIVE, NOW + TTL);
    f->txn = store_txn_begin(f->st);
    *state = f;
    return f->live != NULL && f->txn != NULL ? 0 : -1;
}

static int
teardown(void **state)
{
    fixture *f = *state;
    char cmd[128];

    store_txn_abort(f->txn);
    lease_table_free(f->lt);
    store_close(f->st);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
    (void)system(cmd);
    free(f);
    return 0;
}

static lease_verdict
admit(fixture *f, uint64_t client, uint64_t seq, uint64_t ack, uint64_t now,
      lease_admission *a)
{
    lease_ask ask = {.client_id = client,
                     .seq = seq,
                     .first_incomplete = ack,
                     .window = WINDOW,
                     .now_ms = now};

    return lease_admit(f->lt, lease_table_find(f->lt, client), f->txn, &ask, a);
}

static void
test_admitted_applies_ack(void **state)
{
    fixture *f = *state;
    lease_admission a;

    assert_int_equal(admit(f, 1, 5, 3, NOW, &a), LEASE_ADMITTED);
    assert_ptr_equal(a.entry, f->live);
    assert_int_equal(f->live->watermark, 3);
}

static void
test_not_live(void **state)
{
    fixture *f = *state;
    lease_admission a;

    /* Never issued: at or above the next id. */
    assert_int_equal(admit(f, 2, 1, 1, NOW, &a), LEASE_NOT_LIVE);
    assert_int_equal(a.never_issued, 1);
    /* Ended. */
    f->live->state = LEASE_STATE_CLOSED;
    assert_int_equal(admit(f, 1, 1, 1, NOW, &a), LEASE_NOT_LIVE);
    assert_int_equal(a.never_issued, 0);
}

/* A lease past its TTL is ended by the call that finds it, and the end is
 * staged in that call's transaction. */
static void
test_expired_on_sight(void **state)
{
    fixture *f = *state;
    lease_admission a;
    uint8_t key[LEASE_KEY_LEN];
    char *v = NULL;
    size_t len = 0;

    assert_int_equal(admit(f, 1, 1, 1, NOW + TTL, &a), LEASE_NOT_LIVE);
    assert_int_equal(f->live->state, LEASE_STATE_EXPIRED);
    lease_key(1, key);
    assert_int_equal(
        store_txn_get(f->txn, (const char *)key, sizeof(key), &v, &len), 0);
    assert_true(len > 0);
    free(v);
}

/* Stale comes first: a stale call with a bad acknowledgement is stale, and
 * neither refusal moves the watermark. */
static void
test_stale_then_bad_ack(void **state)
{
    fixture *f = *state;
    lease_admission a;

    assert_int_equal(admit(f, 1, 6, 6, NOW, &a), LEASE_ADMITTED);
    assert_int_equal(admit(f, 1, 4, 9, NOW, &a), LEASE_STALE);
    assert_int_equal(a.watermark, 6);
    assert_int_equal(admit(f, 1, 7, 9, NOW, &a), LEASE_BAD_ACK);
    assert_int_equal(f->live->watermark, 6);
}

/* The window counts from the first unacknowledged seq after this call's
 * acknowledgement is applied. */
static void
test_window(void **state)
{
    fixture *f = *state;
    lease_admission a;

    assert_int_equal(admit(f, 1, 1 + WINDOW, 1, NOW, &a), LEASE_WINDOW_FULL);
    assert_int_equal(a.first_unacked, 1);
    assert_int_equal(admit(f, 1, WINDOW, 1, NOW, &a), LEASE_ADMITTED);
    /* Its own acknowledgement moves the window. */
    assert_int_equal(admit(f, 1, 2 + WINDOW, 3, NOW, &a), LEASE_ADMITTED);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_admitted_applies_ack, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_not_live, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expired_on_sight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_then_bad_ack, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_window, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
