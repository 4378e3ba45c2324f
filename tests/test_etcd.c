/*
 * test_etcd.c — repl/etcd.c, the etcd v3 JSON-gateway client, against a
 * real 3-member etcd cluster (tests/cluster.c).
 *
 * Owns: the client's contract as the replicas use it: a Txn whose
 * compares hold applies and one whose compares fail does not; binary keys
 * and values come back byte for byte; a key on a lease disappears when
 * the lease is not renewed and keepalive/revoke then say ENOENT; a range
 * limit reports more; a dead first endpoint is skipped; nothing answers
 * EAGAIN within the timeout.
 * Invariant: every wait is bounded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "tests/cluster.h"
#include "repl/etcd.h"
#include "tests/harness.h"

static etcd_cluster *cl;

static int
setup(void **state)
{
    return etcd_cluster_start(&cl, 3);
}

static int
teardown(void **state)
{
    etcd_cluster_free(cl);
    return 0;
}

static etcd *
client(void)
{
    etcd *e = NULL;
    assert_int_equal(etcd_open(&e, cl->endpoints, 1000), 0);
    return e;
}

static void
test_txn_compare(void **state)
{
    etcd *e = client();
    const char key[] = "t/k\0bin";
    const char val[] = "v\0\xff\x01";
    etcd_kv *kvs = NULL;
    size_t n = 0;
    int64_t rev = 0, rev2 = 0;
    bool ok = false;

    for (int round = 0; round < 2; round++) {
        etcd_txn *t = etcd_txn_alloc();
        assert_non_null(t);
        etcd_txn_if_created(t, key, sizeof(key), 0);
        etcd_txn_put(t, key, sizeof(key), val, sizeof(val), 0);
        assert_int_equal(etcd_txn_run(e, t, &ok, round == 0 ? &rev : &rev2), 0);
        etcd_txn_free(t);
        /* Absent: applied. Present: the compare fails, nothing written. */
        assert_int_equal(ok, round == 0);
    }
    assert_true(rev > 0);
    assert_int_equal(
        etcd_range(e, key, sizeof(key), NULL, 0, 0, &kvs, &n, NULL, NULL), 0);
    assert_int_equal(n, 1);
    assert_int_equal(kvs[0].klen, sizeof(key));
    assert_memory_equal(kvs[0].key, key, sizeof(key));
    assert_int_equal(kvs[0].vlen, sizeof(val));
    assert_memory_equal(kvs[0].val, val, sizeof(val));
    assert_int_equal(kvs[0].create_rev, rev);
    assert_int_equal(kvs[0].mod_rev, rev); /* the failed Txn wrote nothing */
    etcd_kvs_free(kvs, n);

    /* A compare on the right create_revision holds. */
    {
        etcd_txn *t = etcd_txn_alloc();
        etcd_txn_if_created(t, key, sizeof(key), rev);
        etcd_txn_put(t, "t/other", 7, "x", 1, 0);
        assert_int_equal(etcd_txn_run(e, t, &ok, NULL), 0);
        assert_true(ok);
        etcd_txn_free(t);
    }
    assert_int_equal(etcd_delete(e, key, sizeof(key), NULL, 0), 0);
    assert_int_equal(
        etcd_range(e, key, sizeof(key), NULL, 0, 0, &kvs, &n, NULL, NULL), 0);
    assert_int_equal(n, 0);
    etcd_close(e);
}

static void
test_range_limit(void **state)
{
    etcd *e = client();
    etcd_kv *kvs = NULL;
    size_t n = 0;
    bool more = false;

    for (int i = 0; i < 5; i++) {
        char k[16];
        etcd_txn *t = etcd_txn_alloc();
        bool ok;
        snprintf(k, sizeof(k), "r/%d", i);
        etcd_txn_put(t, k, strlen(k), "v", 1, 0);
        assert_int_equal(etcd_txn_run(e, t, &ok, NULL), 0);
        assert_true(ok);
        etcd_txn_free(t);
    }
    assert_int_equal(etcd_range(e, "r/", 2, "r0", 2, 3, &kvs, &n, &more, NULL),
                     0);
    assert_int_equal(n, 3);
    assert_true(more);
    assert_memory_equal(kvs[0].key, "r/0", 3);
    assert_memory_equal(kvs[2].key, "r/2", 3);
    etcd_kvs_free(kvs, n);
    assert_int_equal(etcd_range(e, "r/3", 3, "r0", 2, 3, &kvs, &n, &more, NULL),
                     0);
    assert_int_equal(n, 2);
    assert_false(more);
    etcd_kvs_free(kvs, n);
    etcd_close(e);
}

static void
test_lease_expiry(void **state)
{
    etcd *e = client();
    int64_t id = 0, ttl = 0;
    etcd_kv *kvs = NULL;
    size_t n = 1;
    bool ok = false;
    etcd_txn *t;
    int64_t until;

    assert_int_equal(etcd_lease_grant(e, 2, &id), 0);
    assert_int_equal(etcd_lease_keepalive(e, id, &ttl), 0);
    assert_int_equal(ttl, 2);
    t = etcd_txn_alloc();
    etcd_txn_put(t, "l/k", 3, "v", 1, id);
    assert_int_equal(etcd_txn_run(e, t, &ok, NULL), 0);
    assert_true(ok);
    etcd_txn_free(t);
    /* Not renewed: the key goes with the lease. */
    until = harness_now_ms() + 20000;
    while (n != 0 && harness_now_ms() < until) {
        assert_int_equal(
            etcd_range(e, "l/k", 3, NULL, 0, 0, &kvs, &n, NULL, NULL), 0);
        etcd_kvs_free(kvs, n);
        harness_sleep_ms(100);
    }
    assert_int_equal(n, 0);
    assert_int_equal(etcd_lease_keepalive(e, id, &ttl), ENOENT);
    assert_int_equal(etcd_lease_revoke(e, id), ENOENT);
    /* A put on a gone lease is refused by etcd, not applied. */
    t = etcd_txn_alloc();
    etcd_txn_put(t, "l/k", 3, "v", 1, id);
    assert_int_equal(etcd_txn_run(e, t, &ok, NULL), EPROTO);
    etcd_txn_free(t);
    etcd_close(e);
}

static void
test_dead_endpoint_skipped_then_unavailable(void **state)
{
    etcd *e = client();
    etcd_kv *kvs = NULL;
    size_t n = 0;
    int64_t id = 0;
    int64_t t0;
    int rv;

    etcd_member_kill(cl, 0, SIGKILL); /* the first endpoint */
    /* If it was etcd's leader the others elect one first (about etcd's
     * 1 s election timeout): until then every member says unavailable. */
    t0 = harness_now_ms();
    while ((rv = etcd_range(e, "x", 1, NULL, 0, 0, &kvs, &n, NULL, NULL)) ==
               EAGAIN &&
           harness_now_ms() - t0 < 20000) {
        harness_sleep_ms(100);
    }
    assert_int_equal(rv, 0);
    etcd_kvs_free(kvs, n);
    assert_int_equal(etcd_lease_grant(e, 5, &id), 0);
    assert_int_equal(etcd_lease_revoke(e, id), 0);
    /* No quorum: EAGAIN, within the timeouts (3 endpoints x 1 s). */
    etcd_member_kill(cl, 1, SIGKILL);
    t0 = harness_now_ms();
    assert_int_equal(etcd_range(e, "x", 1, NULL, 0, 0, &kvs, &n, NULL, NULL),
                     EAGAIN);
    assert_true(harness_now_ms() - t0 < 3 * 1000 + 2000);
    etcd_close(e);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_txn_compare),
        cmocka_unit_test(test_range_limit),
        cmocka_unit_test(test_lease_expiry),
        cmocka_unit_test(test_dead_endpoint_skipped_then_unavailable),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
