/*
 * test_reconnect.c — a libonce handle whose nng dialer stopped for good
 * gets its calls through again.
 *
 * Owns: the checks that a handle whose dialer stopped (nng 1.5.2 stops a
 * dialer whose handshake failed with NNG_ECLOSED, which is what a client
 * meets when it redials while onced dies; client/conn.h, conn_redial)
 * starts the dial over by itself, with attempts longer and shorter than the
 * one-second send slice.
 * Invariant: every wait is bounded; the stopped dialer is made with nng's
 * own API (nng_dialer_close on the handle's dialer, found in nng's
 * statistics by the harness's unique url), never by reaching into libonce.
 * Never: relies on the timing race that stops a dialer in the wild (a
 * SIGKILL/restart stress hits it a few times in hundreds of cycles; see
 * tests/README.md).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>

#include "tests/harness.h"

/* A call after a reconnection must be through within this (ms). */
#define RECONNECT_WITHIN_MS 5000

/* A leased handle on h with the given attempt timeout and deadline. */
static once_client *
client_with(const harness *h, uint32_t attempt_ms, uint32_t deadline_ms)
{
    once_options o;
    once_status st;
    once_client *c = NULL;
    int rv;

    once_options_init(&o);
    o.url = h->url;
    o.lease_ttl_ms = 120000;
    o.attempt_timeout_ms = attempt_ms;
    o.deadline_ms = deadline_ms;
    rv = once_client_open(&c, &o, &st);
    if (rv != ONCE_OK) {
        fail_msg("once_client_open: %s %s %s", once_strerror(rv), st.reason,
                 st.message);
    }
    return c;
}

/* Closes every dialer on url that nng still lists: with one handle open,
 * the handle's (the harness's probes closed theirs). Returns how many. */
static int
close_dialers(const char *url)
{
    nng_stat *all, *s, *u, *id;
    int n = 0;

    assert_int_equal(nng_stats_get(&all), 0);
    for (s = nng_stat_child(all); s != NULL; s = nng_stat_next(s)) {
        if (strcmp(nng_stat_name(s), "dialer") != 0 ||
            (u = nng_stat_find(s, "url")) == NULL ||
            (id = nng_stat_find(s, "id")) == NULL ||
            strcmp(nng_stat_string(u), url) != 0) {
            continue;
        }
        nng_dialer d = {.id = (uint32_t)nng_stat_value(id)};
        if (nng_dialer_close(d) == 0) {
            n++;
        }
    }
    nng_stats_free(all);
    return n;
}

/* The handle's dialer stops for good; the next call must still go through
 * (conn_redial), on its first attempt, well within the deadline. */
static void
dialer_stopped(harness *h, uint32_t attempt_ms)
{
    once_client *c = client_with(h, attempt_ms, 8000);
    once_rpc_id id = {0, 0};
    once_status st;
    int64_t v, t0, took;
    int rv;

    assert_int_equal(once_counter_incr(c, "d", 1, &id, &v, &st), ONCE_OK);
    assert_true(close_dialers(h->url) >= 1);
    t0 = harness_now_ms();
    id = (once_rpc_id){0, 0};
    rv = once_counter_incr(c, "d", 1, &id, &v, &st);
    took = harness_now_ms() - t0;
    print_message("  attempts of %u ms: the call after the dialer stopped: "
                  "%s %s after %lld ms, %u sent\n",
                  attempt_ms, once_strerror(rv), st.reason, (long long)took,
                  st.attempts);
    if (rv != ONCE_OK) {
        fail_msg("the call after the dialer stopped: %s %s %s",
                 once_strerror(rv), st.reason, st.message);
    }
    assert_int_equal(v, 2);
    assert_int_equal(st.attempts, 1);
    assert_true(took < RECONNECT_WITHIN_MS);
    once_client_close(c);
}

/* Attempts shorter than the one-second send slice: each send gives up at
 * its attempt's end, never at a slice's. */
static void
t_dialer_stopped_short_attempts(void **state)
{
    dialer_stopped(*state, 300);
}

/* Attempts longer than the call needs (the c19 child's 60 s): the dial
 * starts over after a slice, within the attempt. */
static void
t_dialer_stopped_long_attempts(void **state)
{
    dialer_stopped(*state, 60000);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(t_dialer_stopped_short_attempts,
                                        harness_setup_no_gc, harness_teardown),
        cmocka_unit_test_setup_teardown(t_dialer_stopped_long_attempts,
                                        harness_setup_no_gc, harness_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
