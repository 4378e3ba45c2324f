/*
 * test_api.c — libonce's public API as a scheduler author meets it
 * (once/client.h): new calls and retries as two functions, the reused id
 * variable, a one-shot tool leaving its lease alive (library and oncectl),
 * the reason constants and predicates, and the version macros.
 *
 * Owns: one real onced per test (harness.c); every assertion is on what a
 * caller sees through the public header.
 * Invariant: every wait is bounded (the call deadlines below).
 * Never: reads libonce internals or strcmp's a reason the header names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <once/admin.h>
#include <once/client.h>
#include <once/version.h>

#include "tests/harness.h"

/* The loop a new user writes: one once_rpc_id variable for every call.
 * once_counter_incr takes a non-zero seq as a retry, so the second pass
 * must not be sent as a retry of seq 1 under a newer acknowledgement (the
 * server answered INVALID_ARGUMENT "first_incomplete 2 is above the call's
 * own seq 1"): it is refused before sending, in words that say what
 * happened and what to call instead. */
static void
test_reused_id_variable_old_function(void **state)
{
    harness *h = *state;
    once_client *c = NULL;
    once_rpc_id id = {0, 0};
    once_status st;
    int64_t v = 0;

    assert_int_equal(harness_client(h, false, &c), ONCE_OK);
    assert_int_equal(once_counter_incr(c, "loop", 1, &id, &v, &st), ONCE_OK);
    assert_int_equal(v, 1);
    assert_int_equal(id.seq, 1);

    assert_int_equal(once_counter_incr(c, "loop", 1, &id, &v, &st),
                     ONCE_INVALID_ARGUMENT);
    assert_true(once_status_is(&st, ONCE_REASON_RPC_ID_COMPLETED));
    assert_int_equal(st.attempts, 0); /* nothing was sent */
    assert_non_null(strstr(st.message, "already completed"));
    assert_non_null(strstr(st.message, "id.seq = 0"));
    assert_int_equal(harness_get(c, "loop"), 1);

    /* Zeroing the seq, as the message says, makes the next call new. */
    id.seq = 0;
    assert_int_equal(once_counter_incr(c, "loop", 1, &id, &v, &st), ONCE_OK);
    assert_int_equal(v, 2);
    assert_int_equal(id.seq, 2);
    once_client_close(c);
}

/* The same loop with once_counter_incr_new: every pass is a new call. */
static void
test_reused_id_variable_new_function(void **state)
{
    harness *h = *state;
    once_client *c = NULL;
    once_rpc_id id = {0, 0};
    once_status st;
    int64_t v = 0;

    assert_int_equal(harness_client(h, false, &c), ONCE_OK);
    for (int i = 1; i <= 5; i++) {
        assert_int_equal(once_counter_incr_new(c, "loop", 1, &id, &v, &st),
                         ONCE_OK);
        assert_int_equal(v, i);
        assert_int_equal(id.seq, (uint64_t)i);
        assert_false(st.replayed);
    }
    assert_int_equal(harness_get(c, "loop"), 5);
    once_client_close(c);
}

/* once_counter_incr_retry of an id this handle completed replays while the
 * server keeps the result, and after later calls acknowledged it away says
 * so (STALE_RPC, in words naming this handle). */
static void
test_retry_of_completed_id(void **state)
{
    harness *h = *state;
    once_client *c = NULL;
    once_rpc_id first = {0, 0}, next = {0, 0};
    once_status st;
    int64_t v = 0;

    assert_int_equal(harness_client(h, false, &c), ONCE_OK);
    assert_int_equal(once_counter_incr_new(c, "r", 7, &first, &v, &st),
                     ONCE_OK);
    assert_int_equal(v, 7);

    v = 0;
    assert_int_equal(once_counter_incr_retry(c, "r", 7, &first, &v, &st),
                     ONCE_OK);
    assert_true(st.replayed);
    assert_int_equal(v, 7);
    assert_int_equal(harness_get(c, "r"), 7);

    /* A later call acknowledges seq 1 (first_incomplete 2). */
    assert_int_equal(once_counter_incr_new(c, "r", 1, &next, &v, &st), ONCE_OK);
    assert_int_equal(once_counter_incr_retry(c, "r", 7, &first, &v, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_true(once_status_is(&st, ONCE_REASON_STALE_RPC));
    assert_non_null(strstr(st.message, "completed by this handle"));
    assert_int_equal(harness_get(c, "r"), 8);

    /* A retry with no id at all is a usage error, not a new call. */
    assert_int_equal(once_counter_incr_retry(c, "r", 1, NULL, &v, &st),
                     ONCE_INVALID_ARGUMENT);
    assert_true(once_status_is(&st, ONCE_REASON_BAD_RPC_ID));
    assert_int_equal(harness_get(c, "r"), 8);
    once_client_close(c);
}

/* once_client_close_keep_lease: the lease outlives the handle, so another
 * handle (here without a lease of its own, as another process would) can
 * retry the id and gets the stored result. once_client_close, by contrast,
 * ends the lease: the same retry is LEASE_EXPIRED. */
static void
test_close_keep_lease_then_retry(void **state)
{
    harness *h = *state;
    once_client *c = NULL, *r = NULL;
    once_rpc_id kept = {0, 0}, closed = {0, 0};
    once_status st;
    uint64_t left = 0;
    int64_t v = 0;

    assert_int_equal(harness_client(h, false, &c), ONCE_OK);
    assert_int_equal(once_counter_incr_new(c, "k", 3, &kept, &v, &st), ONCE_OK);
    once_client_close_keep_lease(c, &left);
    assert_true(left > 0);

    assert_int_equal(harness_client(h, true, &r), ONCE_OK);
    v = 0;
    assert_int_equal(once_counter_incr_retry(r, "k", 3, &kept, &v, &st),
                     ONCE_OK);
    assert_true(st.replayed);
    assert_int_equal(v, 3);

    assert_int_equal(harness_client(h, false, &c), ONCE_OK);
    assert_int_equal(once_counter_incr_new(c, "k", 1, &closed, &v, &st),
                     ONCE_OK);
    once_client_close(c);
    assert_int_equal(once_counter_incr_retry(r, "k", 1, &closed, &v, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_true(once_status_lease_expired(&st));
    assert_int_equal(harness_get(r, "k"), 4);
    once_client_close(r);

    /* NULL handle and NULL out-parameter are accepted. */
    once_client_close_keep_lease(NULL, &left);
    assert_int_equal(left, 0);
    once_client_close_keep_lease(NULL, NULL);
}

/* The real oncectl: `counter incr` prints an rpc id and until when it can
 * be retried, and a second oncectl process retrying exactly that id gets
 * the stored result (the README's "resend exactly that call"). */
static void
test_oncectl_printed_id_replays(void **state)
{
    harness *h = *state;
    const char *incr[] = {"counter", "incr", "jobs", "--by", "2", NULL};
    char out[1024], rpc[64], arg[80];
    const char *p, *q;

    assert_int_equal(harness_oncectl(h, NULL, out, sizeof(out), NULL, incr), 0);
    assert_non_null(strstr(out, "\"value\":2"));
    assert_non_null(strstr(out, "\"retry_until\":\""));
    assert_non_null(p = strstr(out, "\"rpc_id\":\""));
    p += strlen("\"rpc_id\":\"");
    assert_non_null(q = strchr(p, '"'));
    assert_true((size_t)(q - p) < sizeof(rpc));
    snprintf(rpc, sizeof(rpc), "%.*s", (int)(q - p), p);
    snprintf(arg, sizeof(arg), "%s", rpc);

    const char *retry[] = {"counter", "incr",     "jobs", "--by",
                           "2",       "--rpc-id", arg,    NULL};
    assert_int_equal(harness_oncectl(h, NULL, out, sizeof(out), NULL, retry),
                     0);
    assert_non_null(strstr(out, "\"replayed\":true"));
    assert_non_null(strstr(out, "\"value\":2"));
}

/* The reason constants are the strings the server and the library send,
 * and the predicates read them: an unanswered call is an unknown outcome
 * that a retry of the same id settles; a conflicting reuse is
 * RPC_ID_CONFLICT. */
static void
test_reason_constants(void **state)
{
    harness *h = *state;
    once_options o;
    once_client *c = NULL, *r = NULL;
    once_rpc_id id = {0, 0};
    once_status st;
    int64_t v = 0;

    once_options_init(&o);
    o.url = h->url;
    o.deadline_ms = 600;
    o.attempt_timeout_ms = 200;
    o.lease_ttl_ms = 60000;
    assert_int_equal(once_client_open(&c, &o, &st), ONCE_OK);

    harness_pause(h);
    assert_int_equal(once_counter_incr_new(c, "u", 1, &id, &v, &st),
                     ONCE_UNKNOWN);
    assert_true(once_status_outcome_unknown(&st));
    assert_true(once_status_is(&st, ONCE_REASON_OUTCOME_UNKNOWN));
    assert_false(once_status_lease_expired(&st));
    assert_true(st.attempts >= 1);
    assert_int_not_equal(id.seq, 0);
    kill(h->pid, SIGCONT);

    /* The same id settles it: run once, whichever attempt got there. The
     * retry goes through a second handle with the default deadline (as
     * another process would), so a slow machine does not end it early. */
    assert_int_equal(harness_client(h, true, &r), ONCE_OK);
    for (int i = 0; i < 5; i++) {
        if (once_counter_incr_retry(r, "u", 1, &id, &v, &st) == ONCE_OK) {
            break;
        }
        assert_true(once_status_outcome_unknown(&st));
    }
    assert_int_equal(st.code, ONCE_OK);
    assert_int_equal(v, 1);
    once_client_close(r);
    assert_int_equal(harness_get(c, "u"), 1);

    assert_int_equal(once_counter_incr_retry(c, "u", 5, &id, &v, &st),
                     ONCE_ALREADY_EXISTS);
    assert_true(once_status_is(&st, ONCE_REASON_RPC_ID_CONFLICT));
    assert_false(once_status_outcome_unknown(&st));

    assert_false(once_status_is(NULL, ONCE_REASON_RPC_ID_CONFLICT));
    assert_false(once_status_is(&st, NULL));
    assert_false(once_status_outcome_unknown(NULL));
    once_client_close(c);
}

/* A handle given two URLs, served by the first; that server is then
 * SIGKILLed (a leader killed): nothing listens there, its dial is refused,
 * and the next call moves to the second URL at once, within its deadline
 * of 700 ms. Before, a send without a connection waited a whole second
 * before moving on (the failover bench's clients sat out that second on a
 * killed leader, and again when followers still named it), so this call
 * ended NOT_SENT. Reads: no lease to open first. */
static void
test_refused_leader_moves_on(void **state)
{
    harness *h = *state, *dead = NULL;
    char urls[400];
    once_options o;
    once_client *c = NULL;
    once_route r;
    once_status st;
    int64_t v = -1;

    assert_int_equal(harness_start(&dead), 0);
    snprintf(urls, sizeof(urls), "%s,%s", dead->url, h->url);
    once_options_init(&o);
    o.url = urls;
    o.no_lease = true;
    o.deadline_ms = 700;
    assert_int_equal(once_client_open(&c, &o, &st), ONCE_OK);
    assert_int_equal(once_counter_get(c, "refused", &v, &st), ONCE_OK);
    assert_int_equal(once_client_route(c, &r), ONCE_OK);
    assert_int_equal(r.index, 0); /* the first URL answered */
    harness_kill(dead, SIGKILL);
    assert_int_equal(once_counter_get(c, "refused", &v, &st), ONCE_OK);
    assert_int_equal(v, 0);
    assert_int_equal(once_client_route(c, &r), ONCE_OK);
    assert_int_equal(r.index, 1);
    assert_int_equal(r.rotations, 1);
    once_client_close(c);
    harness_free(dead);
}

/* Version macros of the installed header, and the library's own. */
static void
test_version(void **state)
{
    char v[32];

    (void)state;
    snprintf(v, sizeof(v), "%d.%d.%d", ONCE_VERSION_MAJOR, ONCE_VERSION_MINOR,
             ONCE_VERSION_PATCH);
    assert_string_equal(v, ONCE_VERSION_STRING);
    assert_string_equal(once_version(), ONCE_VERSION_STRING);
    assert_true(ONCE_VERSION_AT_LEAST(0, 1, 0));
    assert_false(ONCE_VERSION_AT_LEAST(ONCE_VERSION_MAJOR + 1, 0, 0));
    assert_string_equal(once_lease_state_name(ONCE_LEASE_STATE_LIVE),
                        "LEASE_LIVE");
    assert_string_equal(once_lease_state_name(99), "LEASE_STATE_UNSPECIFIED");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reused_id_variable_old_function,
                                        harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_reused_id_variable_new_function,
                                        harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_retry_of_completed_id,
                                        harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_close_keep_lease_then_retry,
                                        harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_oncectl_printed_id_replays,
                                        harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_reason_constants, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_refused_leader_moves_on,
                                        harness_setup, harness_teardown),
        cmocka_unit_test(test_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
