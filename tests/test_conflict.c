/*
 * test_conflict.c — one rpc id with two payloads is a conflict (docs/spec.md).
 *
 * Owns: the digest checks against a real onced: resending a completed id
 * with another `by`, or another counter name, gets ALREADY_EXISTS /
 * RPC_ID_CONFLICT, executes nothing and commits nothing, and does not spoil
 * the stored result for a true retry.
 * Invariant: the counter value is read back after every conflicting send, so
 * a server that executed the conflicting payload fails the test.
 * Never: resends from the client that received the reply (it has
 * acknowledged that seq); a lease-less second client carries the resends.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "tests/harness.h"

/* Sends Increment(name, by) under a copy of id and expects a conflict. */
static void
expect_conflict(once_client *c, const char *name, int64_t by,
                const once_rpc_id *id)
{
    once_rpc_id again = *id;
    once_status st;
    int64_t v = 12345;
    int rv;

    memset(&st, 0, sizeof(st));
    rv = once_counter_incr(c, name, by, &again, &v, &st);
    print_message("conflicting resend (%s, by %lld): %s reason=\"%s\" "
                  "message=\"%s\"\n",
                  name, (long long)by, once_strerror(rv), st.reason,
                  st.message);
    assert_int_equal(rv, ONCE_ALREADY_EXISTS);
    assert_int_equal(st.code, ONCE_ALREADY_EXISTS);
    assert_string_equal(st.reason, "RPC_ID_CONFLICT");
    assert_false(st.replayed);
}

static void
test_conflicting_payload(void **state)
{
    harness *h = *state;
    once_client *a = NULL, *b = NULL;
    once_rpc_id id = {0, 0};
    once_status st;
    once_stats s0, s1;
    int64_t v;

    assert_int_equal(harness_client(h, false, &a), ONCE_OK);
    assert_int_equal(harness_client(h, true, &b), ONCE_OK);

    assert_int_equal(once_counter_incr(a, "jobs", 1, &id, &v, &st), ONCE_OK);
    assert_int_equal(v, 1);
    assert_int_not_equal(id.seq, 0);

    /* Another counter, so a conflict that executed anywhere shows up. It
     * goes through its own client: a further call from `a` would acknowledge
     * id.seq and let the server answer STALE_RPC instead. */
    once_client *c = NULL;
    once_rpc_id other = {0, 0};
    assert_int_equal(harness_client(h, false, &c), ONCE_OK);
    assert_int_equal(once_counter_incr(c, "other", 100, &other, &v, &st),
                     ONCE_OK);
    assert_int_equal(v, 100);
    once_client_close(c);

    harness_stats(b, &s0);

    expect_conflict(b, "jobs", 2, &id);  /* another by */
    expect_conflict(b, "jobs", -1, &id); /* another sign */
    expect_conflict(b, "other", 1, &id); /* same by, another name */

    assert_int_equal(harness_get(b, "jobs"), 1);
    assert_int_equal(harness_get(b, "other"), 100);

    harness_stats(b, &s1);
    assert_int_equal(s1.commits, s0.commits);
    assert_int_equal(s1.records_stored, s0.records_stored);
    assert_true(s1.conflicts >= s0.conflicts + 3);

    /* The true retry still gets the original result. */
    once_rpc_id again = id;
    assert_int_equal(once_counter_incr(b, "jobs", 1, &again, &v, &st), ONCE_OK);
    assert_int_equal(v, 1);
    assert_true(st.replayed);
    assert_int_equal(harness_get(b, "jobs"), 1);

    once_client_close(b);
    once_client_close(a);
}

/* The conflict is decided from the durable record after a crash too. */
static void
test_conflict_after_sigkill(void **state)
{
    harness *h = *state;
    once_client *a = NULL, *b = NULL;
    once_rpc_id id = {0, 0};
    once_status st;
    int64_t v;

    assert_int_equal(harness_client(h, false, &a), ONCE_OK);
    assert_int_equal(once_counter_incr(a, "jobs", 3, &id, &v, &st), ONCE_OK);
    assert_int_equal(v, 3);
    /* `a` stays open: closing it would end its lease (LEASE_EXPIRED). */

    assert_int_not_equal(harness_kill(h, SIGKILL), -1);
    assert_int_equal(harness_restart(h), 0);

    assert_int_equal(harness_client(h, true, &b), ONCE_OK);
    expect_conflict(b, "jobs", 4, &id);
    assert_int_equal(harness_get(b, "jobs"), 3);
    once_client_close(b);
    once_client_close(a);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_conflicting_payload,
                                        harness_setup_no_gc, harness_teardown),
        cmocka_unit_test_setup_teardown(test_conflict_after_sigkill,
                                        harness_setup_no_gc, harness_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
