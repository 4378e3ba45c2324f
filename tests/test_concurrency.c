/*
 * test_concurrency.c — concurrent calls against a real onced (docs/spec.md).
 *
 * Owns: two concurrency checks. (1) 32 threads, each with its own
 * connection, send ONE rpc id at the same instant (a barrier): exactly one
 * execution, 32 identical values, one commit. (2) 16 threads x 1000 distinct
 * calls on one counter through one shared once_client: the final value is
 * 16000 and the returned values are exactly {1..16000}, each once — so no
 * increment was lost, duplicated, or answered with another call's value.
 * Invariant: worker threads only record outcomes; every cmocka assertion
 * runs on the test's own thread after the workers are joined.
 * Never: asserts from a worker thread (cmocka's longjmp is per thread).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"

#define SAME_THREADS 32
#define SAME_ROUNDS  5
#define SAME_BY      7

#define MANY_THREADS 16
#define MANY_CALLS   1000
#define MANY_TOTAL   (MANY_THREADS * MANY_CALLS)

/* ---- one id, 32 senders ---------------------------------------------------
 */

typedef struct same_arg {
    once_client *c;
    pthread_barrier_t *barrier;
    once_rpc_id id;
    int rv;
    int64_t value;
    once_status st;
} same_arg;

static void *
same_worker(void *p)
{
    same_arg *a = p;

    pthread_barrier_wait(a->barrier);
    a->rv = once_counter_incr(a->c, "one", SAME_BY, &a->id, &a->value, &a->st);
    return NULL;
}

static void
test_one_id_many_senders(void **state)
{
    harness *h = *state;
    once_client *admin = NULL;
    once_client *cs[SAME_THREADS] = {0};
    same_arg args[SAME_THREADS];
    pthread_t th[SAME_THREADS];
    pthread_barrier_t barrier;
    once_status st;
    once_stats s0, s1;
    uint64_t cid = 0, ttl = 0;
    int64_t v;

    assert_int_equal(harness_client(h, true, &admin), ONCE_OK);
    assert_int_equal(once_lease_open(admin, NULL, 120000, &cid, &ttl, &st),
                     ONCE_OK);
    assert_int_not_equal(cid, 0);
    for (int i = 0; i < SAME_THREADS; i++) {
        assert_int_equal(harness_client(h, true, &cs[i]), ONCE_OK);
    }

    for (int round = 1; round <= SAME_ROUNDS; round++) {
        int fresh = 0;

        assert_int_equal(once_admin_stats(admin, &s0, &st), ONCE_OK);
        assert_int_equal(pthread_barrier_init(&barrier, NULL, SAME_THREADS), 0);
        for (int i = 0; i < SAME_THREADS; i++) {
            memset(&args[i], 0, sizeof(args[i]));
            args[i].c = cs[i];
            args[i].barrier = &barrier;
            args[i].id = (once_rpc_id){cid, (uint64_t)round};
            args[i].rv = -1;
            assert_int_equal(
                pthread_create(&th[i], NULL, same_worker, &args[i]), 0);
        }
        for (int i = 0; i < SAME_THREADS; i++) {
            pthread_join(th[i], NULL);
        }
        pthread_barrier_destroy(&barrier);

        for (int i = 0; i < SAME_THREADS; i++) {
            if (args[i].rv != ONCE_OK ||
                args[i].value != (int64_t)round * SAME_BY) {
                print_error("round %d sender %d: %s reason=\"%s\" "
                            "message=\"%s\" value=%lld (want %lld)\n",
                            round, i, once_strerror(args[i].rv),
                            args[i].st.reason, args[i].st.message,
                            (long long)args[i].value,
                            (long long)round * SAME_BY);
            }
            assert_int_equal(args[i].rv, ONCE_OK);
            assert_int_equal(args[i].value, (int64_t)round * SAME_BY);
            assert_int_equal(args[i].id.client_id, cid);
            assert_int_equal(args[i].id.seq, (uint64_t)round);
            fresh += args[i].st.replayed ? 0 : 1;
        }
        /* The one execution is the only reply not marked replayed (zero if
         * its own first attempt timed out and it was answered on a retry). */
        assert_in_range(fresh, 0, 1);

        assert_int_equal(once_counter_get(admin, "one", &v, &st), ONCE_OK);
        assert_int_equal(v, (int64_t)round * SAME_BY);
        assert_int_equal(once_admin_stats(admin, &s1, &st), ONCE_OK);
        assert_int_equal(s1.commits - s0.commits, 1);
    }

    for (int i = 0; i < SAME_THREADS; i++) {
        once_client_close(cs[i]);
    }
    once_client_close(admin);
}

/* ---- 16 threads x 1000 distinct calls ------------------------------------ */

typedef struct many_arg {
    once_client *c;
    pthread_barrier_t *barrier;
    int64_t *values; /* MANY_CALLS slots owned by this worker */
    int failures;
    int first_rv;
    once_status first_st;
} many_arg;

static void *
many_worker(void *p)
{
    many_arg *a = p;

    pthread_barrier_wait(a->barrier);
    for (int i = 0; i < MANY_CALLS; i++) {
        once_rpc_id id = {0, 0};
        once_status st;
        int rv = once_counter_incr(a->c, "many", 1, &id, &a->values[i], &st);
        if (rv != ONCE_OK) {
            a->values[i] = -1;
            if (a->failures++ == 0) {
                a->first_rv = rv;
                a->first_st = st;
            }
        }
    }
    return NULL;
}

static void
test_many_distinct_calls(void **state)
{
    harness *h = *state;
    once_client *c = NULL;
    many_arg args[MANY_THREADS];
    pthread_t th[MANY_THREADS];
    pthread_barrier_t barrier;
    int64_t *values;
    unsigned char *seen;
    once_status st;
    once_stats s0, s1;
    int64_t v;
    int failures = 0;

    values = calloc(MANY_TOTAL, sizeof(*values));
    seen = calloc(MANY_TOTAL + 1, 1);
    assert_non_null(values);
    assert_non_null(seen);

    assert_int_equal(harness_client(h, false, &c), ONCE_OK);
    assert_int_equal(once_admin_stats(c, &s0, &st), ONCE_OK);

    assert_int_equal(pthread_barrier_init(&barrier, NULL, MANY_THREADS), 0);
    for (int t = 0; t < MANY_THREADS; t++) {
        args[t] = (many_arg){.c = c,
                             .barrier = &barrier,
                             .values = values + (size_t)t * MANY_CALLS};
        assert_int_equal(pthread_create(&th[t], NULL, many_worker, &args[t]),
                         0);
    }
    for (int t = 0; t < MANY_THREADS; t++) {
        pthread_join(th[t], NULL);
    }
    pthread_barrier_destroy(&barrier);

    for (int t = 0; t < MANY_THREADS; t++) {
        if (args[t].failures > 0) {
            print_error("worker %d: %d failed calls, first: %s reason=\"%s\" "
                        "message=\"%s\"\n",
                        t, args[t].failures, once_strerror(args[t].first_rv),
                        args[t].first_st.reason, args[t].first_st.message);
        }
        failures += args[t].failures;
    }
    assert_int_equal(failures, 0);

    for (int i = 0; i < MANY_TOTAL; i++) {
        if (values[i] < 1 || values[i] > MANY_TOTAL || seen[values[i]]) {
            print_error("returned value %lld at call %d is out of range or "
                        "was returned before\n",
                        (long long)values[i], i);
            fail();
        }
        seen[values[i]] = 1;
    }
    for (int i = 1; i <= MANY_TOTAL; i++) {
        assert_true(seen[i]);
    }

    assert_int_equal(once_counter_get(c, "many", &v, &st), ONCE_OK);
    assert_int_equal(v, MANY_TOTAL);
    assert_int_equal(once_admin_stats(c, &s1, &st), ONCE_OK);
    assert_true(s1.commits - s0.commits >= MANY_TOTAL);
    print_message("%d calls: %llu commits, %llu fsyncs\n", MANY_TOTAL,
                  (unsigned long long)(s1.commits - s0.commits),
                  (unsigned long long)(s1.fsyncs - s0.fsyncs));

    once_client_close(c);
    free(seen);
    free(values);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_one_id_many_senders, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_many_distinct_calls, harness_setup,
                                        harness_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
