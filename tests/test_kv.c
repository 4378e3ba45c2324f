/*
 * test_kv.c — once.v1.KV against a real onced and a real LevelDB.
 *
 * Owns the checks of issue 23 / SPEC section 11: replay and conflict for
 * every op kind; a compare-and-set resent after its reply was lost
 * returns its first answer, byte for byte, after the key changed;
 * revision and version semantics; Range pages; every bound refused with
 * its reason and nothing written; the quota; key-prefix permissions on
 * every attempt; lease-bound keys gone exactly when their lease ends; and
 * a transfer workload between 8 keys through the lossy proxy with SIGKILL
 * restarts (the sum conserved, each rpc id applied once, every reply
 * truthful).
 * Invariant: every wait is bounded; nothing is checked through onced's
 * own counters alone where a Range can show the keys themselves.
 * Never: mocks onced or the store.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <once/admin.h>
#include <once/kv.h>

#include "proto/kv.pb-c.h"
#include "tests/harness.h"
#include "tests/proxy_proc.h"

#ifndef ONCE_PROXY_PATH
#error "ONCE_PROXY_PATH must name once_proxy (set by tests/CMakeLists.txt)"
#endif

#define TXN "/once.v1.KV/Txn"

/* ---- helpers ------------------------------------------------------------ */

#define S(s) (s), strlen(s)

/* A Txn of one put (a new rpc id, written to *id when not NULL). */
static int
kv_put(once_client *c, const char *key, const char *val, bool lease,
       once_rpc_id *id, once_status *st)
{
    once_kv_txn *t;
    once_rpc_id own = {0, 0};
    int rv;

    assert_int_equal(once_kv_txn_new(&t), ONCE_OK);
    /* A refusal of the builder's (an empty key) is exec's answer too. */
    (void)once_kv_txn_put(t, ONCE_KV_THEN, S(key), S(val), lease);
    rv = once_kv_txn_exec(c, t, id != NULL ? id : &own, st);
    once_kv_txn_free(t);
    return rv;
}

static void
put_ok(once_client *c, const char *key, const char *val)
{
    once_status st;
    int rv = kv_put(c, key, val, false, NULL, &st);

    if (rv != ONCE_OK) {
        fail_msg("put %s: %s %s %s", key, once_strerror(rv), st.reason,
                 st.message);
    }
}

/* The value of key into buf (NUL-terminated) and its version; false when
 * absent. */
static bool
get_key(once_client *c, const char *key, char *buf, size_t cap,
        uint64_t *version)
{
    once_kv_range *r = NULL;
    once_status st;
    once_kv kv;
    bool found;

    assert_int_equal(once_kv_range_get(c, S(key), false, 0, NULL, 0, &r, &st),
                     ONCE_OK);
    found = once_kv_range_count(r) == 1;
    if (found) {
        assert_int_equal(once_kv_range_at(r, 0, &kv), ONCE_OK);
        if (buf != NULL) {
            snprintf(buf, cap, "%.*s", (int)kv.value_len,
                     (const char *)kv.value);
        }
        if (version != NULL) {
            *version = kv.version;
        }
    }
    once_kv_range_free(r);
    return found;
}

/* How many keys start with prefix (every page), and the revision of the
 * last page. */
static size_t
count_prefix(once_client *c, const char *prefix, uint64_t *revision)
{
    once_kv_range *r = NULL;
    once_status st;
    size_t n = 0;
    uint8_t cont[2048];
    size_t clen = 0;
    bool more;

    do {
        const void *cp;
        size_t cl;
        assert_int_equal(once_kv_range_get(c, S(prefix), true, 0,
                                           clen > 0 ? cont : NULL, clen, &r,
                                           &st),
                         ONCE_OK);
        n += once_kv_range_count(r);
        if (revision != NULL) {
            *revision = once_kv_range_revision(r);
        }
        more = once_kv_range_more(r, &cp, &cl);
        if (more) {
            assert_true(cl <= sizeof(cont));
            memcpy(cont, cp, cl);
            clen = cl;
        }
        once_kv_range_free(r);
    } while (more);
    return n;
}

static void
assert_status(int rv, const once_status *st, int code, const char *reason)
{
    if (rv != code || strcmp(st->reason, reason) != 0) {
        fail_msg("wanted %s/%s, got %s/%s (%s)", once_strerror(code), reason,
                 once_strerror(rv), st->reason, st->message);
    }
}

static once_client *
client(const harness *h)
{
    once_client *c = NULL;
    assert_int_equal(harness_client(h, false, &c), ONCE_OK);
    return c;
}

/* ---- replay and conflict, every op kind ----------------------------------
 * A Txn per op kind runs, its keys change, then the same rpc id is sent
 * again from another handle: the reply is the first one (replayed), and
 * nothing was applied a second time. Another Txn under the same id is
 * RPC_ID_CONFLICT and writes nothing. */

typedef void (*build_fn)(once_kv_txn *t);

static void
b_put(once_kv_txn *t)
{
    once_kv_txn_put(t, ONCE_KV_THEN, S("r/put"), S("one"), false);
}
static void
b_del(once_kv_txn *t)
{
    once_kv_txn_del(t, ONCE_KV_THEN, S("r/del"));
}
static void
b_delp(once_kv_txn *t)
{
    once_kv_txn_del_prefix(t, ONCE_KV_THEN, S("r/dp/"));
}
static void
b_get(once_kv_txn *t)
{
    once_kv_txn_get(t, ONCE_KV_THEN, S("r/get"));
}
static void
b_else(once_kv_txn *t)
{
    once_kv_txn_compare_absent(t, S("r/get"));
    once_kv_txn_put(t, ONCE_KV_THEN, S("r/never"), S("x"), false);
    once_kv_txn_get(t, ONCE_KV_ELSE, S("r/get"));
}

/* The results of t as one comparable string. */
static void
results_text(const once_kv_txn *t, char *out, size_t cap)
{
    size_t at = (size_t)snprintf(
        out, cap, "ok=%d rev=%" PRIu64 " fc=%u", once_kv_txn_succeeded(t),
        once_kv_txn_revision(t), once_kv_txn_failed_compare(t));

    for (size_t i = 0; i < once_kv_txn_results(t) && at < cap; i++) {
        once_kv_result r;
        assert_int_equal(once_kv_txn_result(t, i, &r), ONCE_OK);
        at += (size_t)snprintf(out + at, cap - at,
                               " [%d f=%d v=%.*s ver=%" PRIu64 " pv=%" PRIu64
                               " d=%" PRIu64 "]",
                               r.kind, r.found, (int)r.value_len,
                               r.value != NULL ? (const char *)r.value : "",
                               r.version, r.prev_version, r.deleted);
    }
}

static void
t_replay_every_op(void **state)
{
    harness *h = *state;
    once_client *c = client(h), *c2 = client(h);
    build_fn builds[] = {b_put, b_del, b_delp, b_get, b_else};
    const char *names[] = {"put", "delete", "delete_prefix", "get", "else"};

    for (size_t k = 0; k < sizeof(builds) / sizeof(builds[0]); k++) {
        /* The Txn's own handle makes no later call, so nothing
         * acknowledges its id away before the retry. */
        once_client *x = client(h);
        once_kv_txn *t, *t2, *other;
        once_rpc_id id = {0, 0};
        once_status st;
        char first[1024], again[1024];
        uint64_t rev_before, rev_after;

        put_ok(c, "r/del", "d");
        put_ok(c, "r/dp/a", "1");
        put_ok(c, "r/dp/b", "2");
        put_ok(c, "r/get", "g1");
        assert_int_equal(once_kv_txn_new(&t), ONCE_OK);
        builds[k](t);
        assert_int_equal(once_kv_txn_exec(x, t, &id, &st), ONCE_OK);
        assert_false(st.replayed);
        results_text(t, first, sizeof(first));

        /* The keys change after the first answer. */
        put_ok(c, "r/put", "changed");
        put_ok(c, "r/del", "back");
        put_ok(c, "r/dp/c", "3");
        put_ok(c, "r/get", "g2");
        count_prefix(c, "r/", &rev_before);

        /* The same id again, from another handle: the first answer. */
        assert_int_equal(once_kv_txn_new(&t2), ONCE_OK);
        builds[k](t2);
        if (once_kv_txn_exec(c2, t2, &id, &st) != ONCE_OK) {
            fail_msg("%s: retry: %s %s", names[k], st.reason, st.message);
        }
        assert_true(st.replayed);
        results_text(t2, again, sizeof(again));
        if (strcmp(first, again) != 0) {
            fail_msg("%s: replay differs:\n  %s\n  %s", names[k], first, again);
        }
        /* ... and nothing ran again. */
        count_prefix(c, "r/", &rev_after);
        assert_int_equal(rev_before, rev_after);
        assert_true(get_key(c, "r/del", NULL, 0, NULL));
        assert_true(get_key(c, "r/dp/c", NULL, 0, NULL));
        assert_false(get_key(c, "r/never", NULL, 0, NULL));

        /* Another payload under the id: a conflict, nothing written. */
        assert_int_equal(once_kv_txn_new(&other), ONCE_OK);
        once_kv_txn_put(other, ONCE_KV_THEN, S("r/conflict"), S("x"), false);
        assert_status(once_kv_txn_exec(c2, other, &id, &st), &st,
                      ONCE_ALREADY_EXISTS, "RPC_ID_CONFLICT");
        assert_false(get_key(c, "r/conflict", NULL, 0, NULL));
        count_prefix(c, "r/", &rev_after);
        assert_int_equal(rev_before, rev_after);
        once_kv_txn_free(t);
        once_kv_txn_free(t2);
        once_kv_txn_free(other);
        once_client_close_keep_lease(x, NULL);
    }
    once_client_close(c2);
    once_client_close(c);
}

/* ---- a CAS whose reply was lost ------------------------------------------
 * The same envelope bytes, sent raw twice: the second reply's payload is
 * the first's byte for byte, though the key changed in between; the key
 * keeps the later value (the CAS did not run again). */

static void
t_cas_lost_reply(void **state)
{
    harness *h = *state;
    once_client *c = client(h), *holder = client(h);
    uint64_t cid = once_client_id(holder), v1;
    Once__V1__KvTxnRequest req = ONCE__V1__KV_TXN_REQUEST__INIT;
    Once__V1__KvCompare cmp = ONCE__V1__KV_COMPARE__INIT, *cmps[1] = {&cmp};
    Once__V1__KvOp op = ONCE__V1__KV_OP__INIT, gop = ONCE__V1__KV_OP__INIT;
    Once__V1__KvOp *ops[2] = {&op, &gop};
    Once__V1__KvPut put = ONCE__V1__KV_PUT__INIT;
    Once__V1__KvGet get = ONCE__V1__KV_GET__INIT;
    Once__V1__Response *r1, *r2;
    Once__V1__KvTxnResponse *tr;
    uint8_t payload[256], *env;
    size_t plen, elen;
    char val[64];

    put_ok(c, "cas/k", "v1");
    assert_true(get_key(c, "cas/k", NULL, 0, &v1));
    cmp.key.data = (uint8_t *)"cas/k";
    cmp.key.len = 5;
    cmp.target = ONCE__V1__KV_COMPARE__TARGET__VERSION;
    cmp.version = v1;
    put.key = cmp.key;
    put.value.data = (uint8_t *)"v2";
    put.value.len = 2;
    op.op_case = ONCE__V1__KV_OP__OP_PUT;
    op.put = &put;
    get.key = cmp.key;
    gop.op_case = ONCE__V1__KV_OP__OP_GET;
    gop.get = &get;
    req.n_compares = 1;
    req.compares = cmps;
    req.n_then_ops = 2;
    req.then_ops = ops;
    req.n_else_ops = 1;
    req.else_ops = &ops[1];
    plen = once__v1__kv_txn_request__pack(&req, payload);
    /* The rpc id of a lease no call of this test uses otherwise. */
    assert_int_equal(harness_envelope(TXN, cid, 1, payload, plen, &env, &elen),
                     0);
    assert_int_equal(harness_raw_rpc(h->url, env, elen, &r1, 5000), 0);
    assert_int_equal(r1->status->code, ONCE__V1__CODE__OK);
    assert_false(r1->replayed);
    tr = once__v1__kv_txn_response__unpack(NULL, r1->payload.len,
                                           r1->payload.data);
    assert_non_null(tr);
    assert_true(tr->succeeded);
    assert_int_equal(tr->n_results, 2);
    assert_int_equal(tr->results[1]->get->kv->value.len, 2);
    once__v1__kv_txn_response__free_unpacked(tr, NULL);

    /* "The reply was lost": meanwhile someone else moves the key on. */
    put_ok(c, "cas/k", "v3");
    assert_int_equal(harness_raw_rpc(h->url, env, elen, &r2, 5000), 0);
    assert_int_equal(r2->status->code, ONCE__V1__CODE__OK);
    assert_true(r2->replayed);
    assert_int_equal(r2->payload.len, r1->payload.len);
    assert_memory_equal(r2->payload.data, r1->payload.data, r1->payload.len);
    assert_true(get_key(c, "cas/k", val, sizeof(val), NULL));
    assert_string_equal(val, "v3");
    once__v1__response__free_unpacked(r1, NULL);
    once__v1__response__free_unpacked(r2, NULL);
    free(env);
    once_client_close(holder);
    once_client_close(c);
}

/* ---- revision and versions ---------------------------------------------- */

static void
t_revision_version(void **state)
{
    harness *h = *state;
    once_client *c = client(h);
    once_kv_txn *t;
    once_rpc_id id = {0, 0};
    once_status st;
    once_kv_result r;
    uint64_t rev0, va, vb, rev;

    count_prefix(c, "", &rev0);
    put_ok(c, "v/a", "1");
    put_ok(c, "v/b", "1");
    assert_true(get_key(c, "v/a", NULL, 0, &va));
    assert_true(get_key(c, "v/b", NULL, 0, &vb));
    assert_int_equal(va, rev0 + 1);
    assert_int_equal(vb, rev0 + 2);

    /* Two puts in one Txn: one revision, both keys at it. */
    assert_int_equal(once_kv_txn_new(&t), ONCE_OK);
    once_kv_txn_compare_version(t, S("v/a"), ONCE_KV_EQUAL, va);
    once_kv_txn_compare_version(t, S("v/b"), ONCE_KV_GREATER, va);
    once_kv_txn_put(t, ONCE_KV_THEN, S("v/a"), S("2"), false);
    once_kv_txn_put(t, ONCE_KV_THEN, S("v/b"), S("2"), false);
    once_kv_txn_get(t, ONCE_KV_THEN, S("v/a"));
    assert_int_equal(once_kv_txn_exec(c, t, &id, &st), ONCE_OK);
    assert_true(once_kv_txn_succeeded(t));
    assert_int_equal(once_kv_txn_revision(t), rev0 + 3);
    assert_int_equal(once_kv_txn_result(t, 0, &r), ONCE_OK);
    assert_int_equal(r.kind, ONCE_KV_PUT);
    assert_int_equal(r.version, rev0 + 3);
    assert_int_equal(r.prev_version, va);
    assert_int_equal(once_kv_txn_result(t, 2, &r), ONCE_OK);
    assert_int_equal(r.kind, ONCE_KV_GET);
    assert_true(r.found);
    assert_int_equal(r.version, rev0 + 3);
    assert_int_equal(r.create_revision, va);
    assert_int_equal(r.value_len, 1);
    assert_memory_equal(r.value, "2", 1);
    once_kv_txn_free(t);

    /* Reads, failed compares and deletes of absent keys leave it. */
    assert_int_equal(once_kv_txn_new(&t), ONCE_OK);
    once_kv_txn_compare_value(t, S("v/a"), ONCE_KV_LESS, S("2"));
    once_kv_txn_del(t, ONCE_KV_ELSE, S("v/none"));
    once_kv_txn_get(t, ONCE_KV_ELSE, S("v/none"));
    id.seq = 0;
    assert_int_equal(once_kv_txn_exec(c, t, &id, &st), ONCE_OK);
    assert_false(once_kv_txn_succeeded(t));
    assert_int_equal(once_kv_txn_failed_compare(t), 1);
    assert_int_equal(once_kv_txn_revision(t), rev0 + 3);
    assert_int_equal(once_kv_txn_result(t, 0, &r), ONCE_OK);
    assert_int_equal(r.deleted, 0);
    assert_int_equal(once_kv_txn_result(t, 1, &r), ONCE_OK);
    assert_false(r.found);
    once_kv_txn_free(t);

    /* A delete moves it; a re-created key starts a new life. */
    assert_int_equal(once_kv_txn_new(&t), ONCE_OK);
    once_kv_txn_del(t, ONCE_KV_THEN, S("v/a"));
    once_kv_txn_compare_version(t, S("v/a"), ONCE_KV_EQUAL, rev0 + 3);
    id.seq = 0;
    assert_int_equal(once_kv_txn_exec(c, t, &id, &st), ONCE_OK);
    assert_int_equal(once_kv_txn_revision(t), rev0 + 4);
    once_kv_txn_free(t);
    assert_false(get_key(c, "v/a", NULL, 0, NULL));
    assert_int_equal(once_kv_txn_new(&t), ONCE_OK);
    once_kv_txn_compare_version(t, S("v/a"), ONCE_KV_EQUAL, 0);
    once_kv_txn_compare_absent(t, S("v/a"));
    once_kv_txn_put(t, ONCE_KV_THEN, S("v/a"), S("3"), false);
    once_kv_txn_get(t, ONCE_KV_THEN, S("v/a"));
    id.seq = 0;
    assert_int_equal(once_kv_txn_exec(c, t, &id, &st), ONCE_OK);
    assert_true(once_kv_txn_succeeded(t));
    assert_int_equal(once_kv_txn_result(t, 1, &r), ONCE_OK);
    assert_int_equal(r.create_revision, rev0 + 5);
    assert_int_equal(r.version, rev0 + 5);
    once_kv_txn_free(t);
    count_prefix(c, "", &rev);
    assert_int_equal(rev, rev0 + 5);

    /* Stats: Txns executed, compares failed, and the totals. */
    {
        Once__V1__StatsResponse *sr;
        assert_int_equal(harness_stats_all(c, &sr), ONCE_OK);
        assert_int_equal(sr->kv_txns, 6);
        assert_int_equal(sr->kv_compares_failed, 1);
        assert_int_equal(sr->kv_revision, rev0 + 5);
        assert_int_equal(sr->kv_keys, 2);
        assert_int_equal(sr->kv_bytes, (3 + 1) * 2); /* v/a=3, v/b=2 */
        once__v1__stats_response__free_unpacked(sr, NULL);
    }
    /* The revision survives a restart (it is stored with the keys). */
    assert_int_not_equal(harness_kill(h, SIGKILL), -1);
    assert_int_equal(harness_restart(h), 0);
    once_client_close(c);
    c = client(h);
    count_prefix(c, "", &rev);
    assert_int_equal(rev, rev0 + 5);
    put_ok(c, "v/c", "1");
    assert_true(get_key(c, "v/c", NULL, 0, &va));
    assert_int_equal(va, rev0 + 6);
    {
        /* The totals are read from the store at start; the counters
         * start again at 0. */
        Once__V1__StatsResponse *sr;
        assert_int_equal(harness_stats_all(c, &sr), ONCE_OK);
        assert_int_equal(sr->kv_keys, 3);
        assert_int_equal(sr->kv_revision, rev0 + 6);
        assert_int_equal(sr->kv_txns, 1);
        once__v1__stats_response__free_unpacked(sr, NULL);
    }
    once_client_close(c);
}

/* ---- Range pages --------------------------------------------------------- */

static void
t_range_pages(void **state)
{
    harness *h = *state;
    once_client *c = client(h);
    once_kv_range *r;
    once_status st;
    once_kv kv;
    char key[32], seen[26] = {0};
    uint8_t cont[64];
    size_t clen = 0, total = 0;
    int pages = 0;
    bool more;

    for (int i = 0; i < 25; i++) {
        snprintf(key, sizeof(key), "p/%02d", i);
        put_ok(c, key, "x");
    }
    put_ok(c, "p", "not under p/");
    put_ok(c, "q/00", "other");
    do {
        const void *cp;
        size_t cl;
        assert_int_equal(once_kv_range_get(c, S("p/"), true, 10,
                                           clen > 0 ? cont : NULL, clen, &r,
                                           &st),
                         ONCE_OK);
        assert_true(once_kv_range_count(r) <= 10);
        for (size_t i = 0; i < once_kv_range_count(r); i++) {
            int n;
            assert_int_equal(once_kv_range_at(r, i, &kv), ONCE_OK);
            assert_int_equal(kv.key_len, 4);
            assert_memory_equal(kv.key, "p/", 2);
            n = ((const char *)kv.key)[2] * 10 + ((const char *)kv.key)[3] -
                '0' * 11;
            assert_int_equal(n, (int)total); /* in key order, once each */
            seen[n]++;
            total++;
        }
        more = once_kv_range_more(r, &cp, &cl);
        if (more) {
            memcpy(cont, cp, cl);
            clen = cl;
        }
        once_kv_range_free(r);
        pages++;
    } while (more);
    assert_int_equal(total, 25);
    assert_int_equal(pages, 3);

    /* A continuation from outside the range is refused. */
    assert_status(once_kv_range_get(c, S("p/"), true, 10, S("q/00"), &r, &st),
                  &st, ONCE_INVALID_ARGUMENT, "KV_BAD_CONTINUATION");
    /* One key. */
    assert_int_equal(once_kv_range_get(c, S("p"), false, 0, NULL, 0, &r, &st),
                     ONCE_OK);
    assert_int_equal(once_kv_range_count(r), 1);
    assert_false(once_kv_range_more(r, NULL, NULL));
    once_kv_range_free(r);
    once_client_close(c);
}

/* ---- bounds: each refused with its reason, nothing written --------------- */

static const char *const bounds_args[] = {
    "--kv-key-max", "16",           "--kv-value-max",
    "32",           "--kv-ops-max", "4",
    "--kv-quota",   "80",           NULL};

static int
setup_bounds(void **state)
{
    return harness_setup_args(state, bounds_args);
}

/* Sends a hand-made KvTxnRequest (for what the builder cannot say). */
static int
raw_txn(once_client *c, const Once__V1__KvTxnRequest *req, once_status *st)
{
    uint8_t buf[512];
    size_t len = once__v1__kv_txn_request__pack(req, buf);
    once_rpc_id id = {0, 0};

    return once_call(c, TXN, true, &id, buf, len, NULL, NULL, st);
}

static void
t_bounds(void **state)
{
    harness *h = *state;
    once_client *c = client(h), *qx;
    once_kv_txn *t;
    once_rpc_id id = {0, 0}, qid = {0, 0};
    once_status st;
    uint64_t rev0, rev;
    char big[40];

    memset(big, 'k', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    count_prefix(c, "", &rev0);

    assert_status(kv_put(c, "k23456789abcdefgh", "v", false, NULL, &st), &st,
                  ONCE_INVALID_ARGUMENT, "KV_KEY_TOO_LARGE");
    assert_status(kv_put(c, "k", big, false, NULL, &st), &st,
                  ONCE_INVALID_ARGUMENT, "KV_VALUE_TOO_LARGE");
    assert_status(kv_put(c, "", "v", false, NULL, &st), &st,
                  ONCE_INVALID_ARGUMENT, "KV_EMPTY_KEY");
    assert_int_equal(once_kv_txn_new(&t), ONCE_OK);
    for (int i = 0; i < 5; i++) {
        once_kv_txn_put(t, ONCE_KV_THEN, S("many"), S("v"), false);
    }
    assert_status(once_kv_txn_exec(c, t, &id, &st), &st, ONCE_INVALID_ARGUMENT,
                  "KV_TOO_MANY_OPS");
    once_kv_txn_free(t);
    /* A key too large in a compare or the else branch counts too. */
    assert_int_equal(once_kv_txn_new(&t), ONCE_OK);
    once_kv_txn_compare_exists(t, S("k23456789abcdefgh"));
    once_kv_txn_put(t, ONCE_KV_THEN, S("ok"), S("v"), false);
    id.seq = 0;
    assert_status(once_kv_txn_exec(c, t, &id, &st), &st, ONCE_INVALID_ARGUMENT,
                  "KV_KEY_TOO_LARGE");
    once_kv_txn_free(t);
    assert_int_equal(once_kv_txn_new(&t), ONCE_OK);
    once_kv_txn_put(t, ONCE_KV_THEN, S("ok"), S("v"), false);
    once_kv_txn_del_prefix(t, ONCE_KV_ELSE, S(""));
    id.seq = 0;
    assert_status(once_kv_txn_exec(c, t, &id, &st), &st, ONCE_INVALID_ARGUMENT,
                  "KV_EMPTY_KEY");
    once_kv_txn_free(t);
    {
        /* What the builder cannot say: an emit to a topic without a
         * name, an op with nothing set, a compare without a target. */
        Once__V1__KvTxnRequest req = ONCE__V1__KV_TXN_REQUEST__INIT;
        Once__V1__KvOp op = ONCE__V1__KV_OP__INIT, *ops[1] = {&op};
        Once__V1__KvEmit emit = ONCE__V1__KV_EMIT__INIT;
        Once__V1__KvCompare cmp = ONCE__V1__KV_COMPARE__INIT;
        Once__V1__KvCompare *cmps[1] = {&cmp};

        emit.topic = "";
        op.op_case = ONCE__V1__KV_OP__OP_EMIT;
        op.emit = &emit;
        req.n_else_ops = 1;
        req.else_ops = ops;
        assert_status(raw_txn(c, &req, &st), &st, ONCE_INVALID_ARGUMENT,
                      "BAD_NAME");
        op.op_case = ONCE__V1__KV_OP__OP__NOT_SET;
        assert_status(raw_txn(c, &req, &st), &st, ONCE_INVALID_ARGUMENT,
                      "KV_BAD_OP");
        req.n_else_ops = 0;
        cmp.key.data = (uint8_t *)"k";
        cmp.key.len = 1;
        req.n_compares = 1;
        req.compares = cmps;
        assert_status(raw_txn(c, &req, &st), &st, ONCE_INVALID_ARGUMENT,
                      "KV_BAD_COMPARE");
    }
    count_prefix(c, "", &rev);
    assert_int_equal(rev, rev0);
    assert_int_equal(count_prefix(c, "", NULL), 0);

    /* The quota (80 bytes of keys and values per principal). */
    put_ok(c, "q1", "0123456789012345678901234567890"); /* 33 bytes */
    put_ok(c, "q2", "0123456789012345678901234567890"); /* 66 */
    /* (q3 goes through a handle of its own: no later call of it
     * acknowledges the id before the retry below.) */
    qx = client(h);
    assert_status(
        kv_put(qx, "q3", "0123456789012345678901234567890", false, &qid, &st),
        &st, ONCE_RESOURCE_EXHAUSTED, "KV_QUOTA");
    assert_false(get_key(c, "q3", NULL, 0, NULL));
    assert_int_equal(count_prefix(c, "", &rev), 2);
    assert_int_equal(rev, rev0 + 2);
    /* Overwriting within the quota is fine; a delete frees room, and the
     * refused id was not recorded: it runs now. */
    put_ok(c, "q2", "short");
    {
        once_kv_txn *d;
        assert_int_equal(once_kv_txn_new(&d), ONCE_OK);
        once_kv_txn_del(d, ONCE_KV_THEN, S("q1"));
        id.seq = 0;
        assert_int_equal(once_kv_txn_exec(c, d, &id, &st), ONCE_OK);
        once_kv_txn_free(d);
    }
    {
        once_client *c2 = client(h);
        assert_int_equal(kv_put(c2, "q3", "0123456789012345678901234567890",
                                false, &qid, &st),
                         ONCE_OK);
        assert_false(st.replayed);
        once_client_close(c2);
    }
    assert_true(get_key(c, "q3", NULL, 0, NULL));
    once_client_close_keep_lease(qx, NULL);
    once_client_close(c);
}

/* ---- key-prefix permissions, on every attempt ---------------------------- */

#define POLICY_BASE                                                            \
    "operator *\n"                                                             \
    "agent /once.v1.Lease/* /once.v1.KV/*\n"                                   \
    "scheduler /once.v1.Lease/* /once.v1.KV/*\n"                               \
    "scheduler kv-write jobs/\n"                                               \
    "scheduler kv-read agents/\n"

static void
t_prefix_permissions(void **state)
{
    harness *h = *state;
    once_client *agent, *sched, *op;
    once_kv_range *r;
    once_kv_txn *t;
    once_rpc_id id = {0, 0};
    once_status st;

    harness_write_policy(h, POLICY_BASE "agent kv-write agents/{name}/\n");
    harness_add_principal(h, "op", "operator");
    harness_add_principal(h, "m3", "agent");
    harness_add_principal(h, "sched", "scheduler");
    assert_int_equal(harness_client_as(h, "m3", false, &agent, &st), ONCE_OK);
    assert_int_equal(harness_client_as(h, "sched", false, &sched, &st),
                     ONCE_OK);
    assert_int_equal(harness_client_as(h, "op", false, &op, &st), ONCE_OK);

    /* An agent writes and reads under agents/<its name>/ only. */
    assert_int_equal(kv_put(agent, "agents/m3/alive", "1", true, NULL, &st),
                     ONCE_OK);
    assert_status(kv_put(agent, "agents/m4/alive", "1", false, NULL, &st), &st,
                  ONCE_PERMISSION_DENIED, "KV_PREFIX_DENIED");
    assert_status(kv_put(agent, "agents/m3", "1", false, NULL, &st), &st,
                  ONCE_PERMISSION_DENIED, "KV_PREFIX_DENIED");
    assert_status(kv_put(agent, "jobs/1", "1", false, NULL, &st), &st,
                  ONCE_PERMISSION_DENIED, "KV_PREFIX_DENIED");
    assert_status(
        once_kv_range_get(agent, S("agents/"), true, 0, NULL, 0, &r, &st), &st,
        ONCE_PERMISSION_DENIED, "KV_PREFIX_DENIED");
    assert_int_equal(
        once_kv_range_get(agent, S("agents/m3/"), true, 0, NULL, 0, &r, &st),
        ONCE_OK);
    assert_int_equal(once_kv_range_count(r), 1);
    once_kv_range_free(r);
    /* A get or a compare is a read; a delete_prefix needs the whole
     * prefix; the else branch is checked too. */
    assert_int_equal(once_kv_txn_new(&t), ONCE_OK);
    once_kv_txn_compare_exists(t, S("agents/m3/alive"));
    once_kv_txn_del_prefix(t, ONCE_KV_ELSE, S("agents/"));
    assert_status(once_kv_txn_exec(agent, t, &id, &st), &st,
                  ONCE_PERMISSION_DENIED, "KV_PREFIX_DENIED");
    once_kv_txn_free(t);

    /* The scheduler writes jobs/, reads agents/, writes no agents/. */
    assert_int_equal(kv_put(sched, "jobs/1", "queued", false, NULL, &st),
                     ONCE_OK);
    assert_int_equal(count_prefix(sched, "agents/", NULL), 1);
    assert_status(kv_put(sched, "agents/m3/alive", "0", false, NULL, &st), &st,
                  ONCE_PERMISSION_DENIED, "KV_PREFIX_DENIED");
    /* The operator reads every key (no rule needed). */
    assert_int_equal(count_prefix(op, "", NULL), 2);

    /* On every attempt: a Txn that ran, retried after its rule is gone,
     * is refused — the stored answer is not handed out. */
    id.seq = 0;
    assert_int_equal(once_kv_txn_new(&t), ONCE_OK);
    once_kv_txn_put(t, ONCE_KV_THEN, S("agents/m3/load"), S("7"), false);
    assert_int_equal(once_kv_txn_exec(agent, t, &id, &st), ONCE_OK);
    harness_write_policy(h, POLICY_BASE);
    {
        once_client *again;
        int rv = ONCE_OK;
        assert_int_equal(harness_client_as(h, "m3", false, &again, &st),
                         ONCE_OK);
        /* Wait (bounded) until onced has read the new policy. */
        for (int i = 0; i < 100 && rv == ONCE_OK; i++) {
            rv = kv_put(again, "agents/m3/probe", "1", false, NULL, &st);
            if (rv == ONCE_OK) {
                harness_sleep_ms(50);
            }
        }
        assert_status(rv, &st, ONCE_PERMISSION_DENIED, "KV_PREFIX_DENIED");
        assert_status(once_kv_txn_exec(again, t, &id, &st), &st,
                      ONCE_PERMISSION_DENIED, "KV_PREFIX_DENIED");
        assert_false(st.replayed);
        once_client_close(again);
    }
    once_kv_txn_free(t);
    once_client_close(op);
    once_client_close(sched);
    once_client_close(agent);
}

/* ---- lease-bound keys ----------------------------------------------------
 * Closed: gone in the batch that closes the lease. Expired: present while
 * the lease lives; whenever a Range misses the key, the lease has ended
 * (LeaseInfo read after the Range). */

static void
t_lease_bound_close(void **state)
{
    harness *h = *state;
    once_client *c = client(h), *a = client(h);
    once_status st;
    Once__V1__StatsResponse *s;

    assert_int_equal(kv_put(a, "agents/a/alive", "1", true, NULL, &st),
                     ONCE_OK);
    assert_int_equal(kv_put(a, "agents/a/note", "stays", false, NULL, &st),
                     ONCE_OK);
    /* Re-put by another lease without binding: unbound, stays. */
    assert_int_equal(kv_put(a, "agents/a/moved", "1", true, NULL, &st),
                     ONCE_OK);
    put_ok(c, "agents/a/moved", "2");
    assert_true(get_key(c, "agents/a/alive", NULL, 0, NULL));
    once_client_close(a); /* CloseLease */
    assert_false(get_key(c, "agents/a/alive", NULL, 0, NULL));
    assert_true(get_key(c, "agents/a/note", NULL, 0, NULL));
    assert_true(get_key(c, "agents/a/moved", NULL, 0, NULL));
    assert_int_equal(harness_stats_all(c, &s), ONCE_OK);
    assert_int_equal(s->kv_lease_deleted, 1);
    assert_int_equal(s->kv_keys, 2);
    once__v1__stats_response__free_unpacked(s, NULL);
    once_client_close(c);
}

static void
t_lease_bound_expiry(void **state)
{
    harness *h = *state;
    once_client *c = client(h), *a = NULL;
    once_options o;
    once_status st;
    struct once_lease_info li;
    uint64_t cid;
    int64_t start, gone_at = -1;

    once_options_init(&o);
    o.url = h->url;
    o.lease_ttl_ms = 1500;
    assert_int_equal(once_client_open(&a, &o, &st), ONCE_OK);
    cid = once_client_id(a);
    assert_int_equal(kv_put(a, "agents/b/alive", "1", true, NULL, &st),
                     ONCE_OK);
    start = harness_now_ms();
    once_client_close_keep_lease(a, NULL); /* no renewal from here on */
    while (harness_now_ms() - start < 10000) {
        bool present = get_key(c, "agents/b/alive", NULL, 0, NULL);
        harness_lease_info(c, cid, &li);
        if (!present) {
            /* Gone: the lease has ended, never before. */
            assert_int_not_equal(li.state, ONCE_LEASE_STATE_LIVE);
            gone_at = harness_now_ms();
            break;
        }
        harness_sleep_ms(50);
    }
    assert_true(gone_at >= 0);
    /* Not before the TTL (the renewal stopped at most at start). */
    assert_true(gone_at - start >= 1400);
    once_client_close(c);
}

/* ---- transfers between 8 keys through a lossy network and SIGKILLs -------
 * Each worker moves amounts between two accounts by CAS on their versions
 * and, in the same then-branch, writes a log key named after its rpc id.
 * It retries an unanswered Txn under the same id until it gets an answer.
 * At the end: the sum is conserved; the log holds exactly the ids whose
 * answer said succeeded; each account's balance is its start plus the
 * moves the answers reported. A Txn applied twice, or answered with a
 * branch that did not run, breaks one of these. */

#define ACCOUNTS      8
#define START_BALANCE 1000
#define WORKERS       3
#define TRANSFERS     40

typedef struct xfer_worker {
    const char *url;
    pthread_t thread;
    uint64_t seed;
    int64_t delta[ACCOUNTS]; /* as the answers reported */
    uint64_t ok_ids[TRANSFERS];
    size_t nok;
    size_t unknown; /* answers that took more than one call */
    char err[512];
    atomic_bool done;
} xfer_worker;

static once_client *
xfer_open(const char *url)
{
    once_client *c = NULL;
    once_options o;
    once_status st;

    once_options_init(&o);
    o.url = url;
    o.lease_ttl_ms = 120000;
    o.attempt_timeout_ms = 150;
    o.max_attempts = 4;
    o.deadline_ms = 1200;
    o.backoff_initial_ms = 5;
    o.backoff_max_ms = 50;
    for (int i = 0; i < 100; i++) {
        if (once_client_open(&c, &o, &st) == ONCE_OK) {
            return c;
        }
        harness_sleep_ms(100);
    }
    return NULL;
}

static uint64_t
rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The balances and versions of the accounts, through a Range (retried). */
static bool
xfer_read(once_client *c, int64_t bal[ACCOUNTS], uint64_t ver[ACCOUNTS])
{
    for (int tries = 0; tries < 200; tries++) {
        once_kv_range *r = NULL;
        once_status st;
        if (once_kv_range_get(c, S("acct/"), true, 0, NULL, 0, &r, &st) ==
                ONCE_OK &&
            once_kv_range_count(r) == ACCOUNTS) {
            for (size_t i = 0; i < ACCOUNTS; i++) {
                once_kv kv;
                char buf[32];
                once_kv_range_at(r, i, &kv);
                snprintf(buf, sizeof(buf), "%.*s", (int)kv.value_len,
                         (const char *)kv.value);
                bal[i] = strtoll(buf, NULL, 10);
                ver[i] = kv.version;
            }
            once_kv_range_free(r);
            return true;
        }
        once_kv_range_free(r);
        harness_sleep_ms(20);
    }
    return false;
}

static void *
xfer_main(void *arg)
{
    xfer_worker *w = arg;
    once_client *c = xfer_open(w->url);
    uint64_t s = w->seed;

    if (c == NULL) {
        snprintf(w->err, sizeof(w->err), "cannot open a handle");
        atomic_store(&w->done, true);
        return NULL;
    }
    for (int n = 0; n < TRANSFERS && w->err[0] == '\0'; n++) {
        int64_t bal[ACCOUNTS];
        uint64_t ver[ACCOUNTS];
        int from = (int)(rng_next(&s) % ACCOUNTS), to;
        int64_t amt = 1 + (int64_t)(rng_next(&s) % 50);
        char kf[16], kt[16], vf[32], vt[32], logk[64];
        once_kv_txn *t;
        once_rpc_id id = {0, 0};
        once_status st;
        int rv = ONCE_UNAVAILABLE, calls = 0;

        to = (from + 1 + (int)(rng_next(&s) % (ACCOUNTS - 1))) % ACCOUNTS;
        if (!xfer_read(c, bal, ver)) {
            snprintf(w->err, sizeof(w->err), "cannot read the accounts");
            break;
        }
        snprintf(kf, sizeof(kf), "acct/%d", from);
        snprintf(kt, sizeof(kt), "acct/%d", to);
        snprintf(vf, sizeof(vf), "%lld", (long long)(bal[from] - amt));
        snprintf(vt, sizeof(vt), "%lld", (long long)(bal[to] + amt));
        once_kv_txn_new(&t);
        once_kv_txn_compare_version(t, S(kf), ONCE_KV_EQUAL, ver[from]);
        once_kv_txn_compare_version(t, S(kt), ONCE_KV_EQUAL, ver[to]);
        once_kv_txn_put(t, ONCE_KV_THEN, S(kf), S(vf), false);
        once_kv_txn_put(t, ONCE_KV_THEN, S(kt), S(vt), false);
        /* The log key names the transfer, which has one rpc id from
         * its first send on (a transfer never sent is started anew). */
        snprintf(logk, sizeof(logk), "log/%016llx-%03d",
                 (unsigned long long)w->seed, n);
        once_kv_txn_put(t, ONCE_KV_THEN, S(logk), S("1"), false);
        /* Resolve by the id until answered (a crash or lost replies end
         * an attempt OUTCOME_UNKNOWN or UNAVAILABLE). */
        while (calls < 300) {
            calls++;
            rv = once_kv_txn_exec(c, t, &id, &st);
            if (rv == ONCE_OK || id.seq == 0 ||
                !(once_status_outcome_unknown(&st) || rv == ONCE_UNAVAILABLE ||
                  rv == ONCE_DEADLINE_EXCEEDED)) {
                break;
            }
            harness_sleep_ms(20);
        }
        if (rv != ONCE_OK && id.seq == 0) {
            n--; /* never sent: start it anew */
            once_kv_txn_free(t);
            harness_sleep_ms(50);
            continue;
        }
        if (rv != ONCE_OK) {
            snprintf(w->err, sizeof(w->err), "transfer %d: %s %s %s", n,
                     once_strerror(rv), st.reason, st.message);
        } else if (once_kv_txn_succeeded(t)) {
            w->delta[from] -= amt;
            w->delta[to] += amt;
            w->ok_ids[w->nok++] = (uint64_t)n;
        }
        w->unknown += calls > 1;
        once_kv_txn_free(t);
    }
    once_client_close(c);
    atomic_store(&w->done, true);
    return NULL;
}

static void
t_transfer_workload(void **state)
{
    harness *h = *state;
    once_client *c = client(h);
    xfer_worker w[WORKERS];
    const char *const faults[] = {"--drop-rep", "0.2", "--dup-req", "0.05",
                                  NULL};
    char front[160], key[16], plog[400];
    uint64_t rep_in = 0, rep_dropped = 0;
    int64_t total = 0, expect[ACCOUNTS];
    int64_t bal[ACCOUNTS];
    uint64_t ver[ACCOUNTS];
    size_t ok = 0, unknown = 0, logs;
    int kills = 0, status;
    pid_t proxy;
    bool running = true;

    for (int i = 0; i < ACCOUNTS; i++) {
        snprintf(key, sizeof(key), "acct/%d", i);
        put_ok(c, key, "1000");
        expect[i] = START_BALANCE;
    }
    snprintf(front, sizeof(front), "tcp://127.0.0.1:%d", harness_free_port());
    snprintf(plog, sizeof(plog), "%s/once_proxy.log", h->dir);
    assert_true((proxy = proxy_proc_start(ONCE_PROXY_PATH, front, h->url, 23,
                                          faults, plog)) > 0);
    memset(w, 0, sizeof(w));
    for (int i = 0; i < WORKERS; i++) {
        w[i].url = front;
        w[i].seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
        assert_int_equal(pthread_create(&w[i].thread, NULL, xfer_main, &w[i]),
                         0);
    }
    /* SIGKILL onced now and then while the workers run. */
    while (running && kills < 6) {
        harness_sleep_ms(400);
        assert_int_not_equal(harness_kill(h, SIGKILL), -1);
        harness_sleep_ms(50);
        assert_int_equal(harness_restart(h), 0);
        kills++;
        running = false;
        for (int i = 0; i < WORKERS; i++) {
            running = running || !atomic_load(&w[i].done);
        }
    }
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(w[i].thread, NULL);
        if (w[i].err[0] != '\0') {
            fail_msg("worker %d: %s", i, w[i].err);
        }
        for (int a = 0; a < ACCOUNTS; a++) {
            expect[a] += w[i].delta[a];
        }
        ok += w[i].nok;
        unknown += w[i].unknown;
    }
    kill(proxy, SIGTERM);
    waitpid(proxy, &status, 0);
    /* The network did lose replies (else the retries proved nothing). */
    assert_true(proxy_proc_replies(plog, &rep_in, &rep_dropped));
    assert_true(rep_dropped > 0);
    once_client_close(c);
    c = client(h);
    assert_true(xfer_read(c, bal, ver));
    for (int a = 0; a < ACCOUNTS; a++) {
        total += bal[a];
        if (bal[a] != expect[a]) {
            fail_msg("account %d holds %lld; the answers say %lld", a,
                     (long long)bal[a], (long long)expect[a]);
        }
    }
    assert_int_equal(total, ACCOUNTS * START_BALANCE);
    logs = count_prefix(c, "log/", NULL);
    print_message("transfers: %zu succeeded, %zu logged, %zu needed a retry, "
                  "%d kills, %llu of %llu replies dropped\n",
                  ok, logs, unknown, kills, (unsigned long long)rep_dropped,
                  (unsigned long long)rep_in);
    assert_int_equal(logs, ok);
    for (int i = 0; i < WORKERS; i++) {
        for (size_t k = 0; k < w[i].nok; k++) {
            char logk[64];
            snprintf(logk, sizeof(logk), "log/%016llx-%03d",
                     (unsigned long long)w[i].seed, (int)w[i].ok_ids[k]);
            assert_true(get_key(c, logk, NULL, 0, NULL));
        }
    }
    assert_true(ok > 0);
    once_client_close(c);
}

/* ---- async Txns -----------------------------------------------------------
 * Eight Txns in flight on one handle (they may share messages: batches),
 * each answered into its own builder; one resent under its id from
 * another handle replays the same answer. */

static void
t_async(void **state)
{
    harness *h = *state;
    once_client *c = client(h), *c2 = client(h);
    once_kv_txn *t[8], *again;
    once_future *f[8];
    once_rpc_id id;
    once_status st;
    once_kv_result r;
    char key[16], first[512], second[512];

    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof(key), "a/%d", i);
        assert_int_equal(once_kv_txn_new(&t[i]), ONCE_OK);
        once_kv_txn_compare_absent(t[i], S(key));
        once_kv_txn_put(t[i], ONCE_KV_THEN, S(key), S(key), false);
        assert_int_equal(
            once_kv_txn_exec_async(c, t[i], NULL, NULL, NULL, &f[i], &st),
            ONCE_OK);
    }
    for (int i = 0; i < 8; i++) {
        assert_int_equal(once_kv_txn_finish(t[i], f[i], &st), ONCE_OK);
        assert_true(once_kv_txn_succeeded(t[i]));
        assert_int_equal(once_kv_txn_result(t[i], 0, &r), ONCE_OK);
        assert_int_equal(r.kind, ONCE_KV_PUT);
        assert_int_equal(r.prev_version, 0);
    }
    assert_int_equal(count_prefix(c2, "a/", NULL), 8);
    /* The last one again, under its id, from another handle. */
    once_future_id(f[7], &id);
    results_text(t[7], first, sizeof(first));
    assert_int_equal(once_kv_txn_new(&again), ONCE_OK);
    once_kv_txn_compare_absent(again, S("a/7"));
    once_kv_txn_put(again, ONCE_KV_THEN, S("a/7"), S("a/7"), false);
    assert_int_equal(once_kv_txn_exec(c2, again, &id, &st), ONCE_OK);
    assert_true(st.replayed);
    results_text(again, second, sizeof(second));
    assert_string_equal(first, second);
    once_kv_txn_free(again);
    for (int i = 0; i < 8; i++) {
        once_future_free(f[i]);
        once_kv_txn_free(t[i]);
    }
    once_client_close_keep_lease(c, NULL);
    once_client_close(c2);
}

/* ---- backup carries the keys ---------------------------------------------
 * `oncectl admin backup` copies the whole store (Admin.Snapshot reads
 * every key of a pinned LevelDB snapshot): an onced started on the backup
 * serves the same keys, versions and revision, replays a Txn recorded
 * before the backup, and the next write moves the revision on by one. */

static void
t_backup_carries_keys(void **state)
{
    harness *h = *state;
    once_client *c = client(h), *x = client(h);
    once_kv_txn *t, *t2;
    once_rpc_id id = {0, 0};
    once_status st;
    char backup[400], old[420], out[1024], first[512], again[512];
    const char *args[] = {"admin", "backup", backup, NULL};
    uint64_t rev, rev2, ver, ver2;

    put_ok(c, "b/1", "one");
    put_ok(c, "b/2", "two");
    assert_int_equal(once_kv_txn_new(&t), ONCE_OK);
    once_kv_txn_put(t, ONCE_KV_THEN, S("b/3"), S("three"), false);
    once_kv_txn_get(t, ONCE_KV_THEN, S("b/1"));
    assert_int_equal(once_kv_txn_exec(x, t, &id, &st), ONCE_OK);
    results_text(t, first, sizeof(first));
    assert_int_equal(count_prefix(c, "b/", &rev), 3);
    assert_true(get_key(c, "b/2", NULL, 0, &ver));
    snprintf(backup, sizeof(backup), "%s/backup", h->dir);
    assert_int_equal(harness_oncectl(h, NULL, out, sizeof(out), NULL, args), 0);
    once_client_close_keep_lease(x, NULL);
    once_client_close(c);
    /* onced on the backup: the harness's data folder becomes it. */
    assert_int_equal(harness_stop(h), 0);
    snprintf(old, sizeof(old), "%s.old", h->data);
    assert_int_equal(rename(h->data, old), 0);
    assert_int_equal(rename(backup, h->data), 0);
    assert_int_equal(harness_restart(h), 0);
    c = client(h);
    assert_int_equal(count_prefix(c, "b/", &rev2), 3);
    assert_int_equal(rev2, rev);
    assert_true(get_key(c, "b/2", NULL, 0, &ver2));
    assert_int_equal(ver2, ver);
    assert_int_equal(once_kv_txn_new(&t2), ONCE_OK);
    once_kv_txn_put(t2, ONCE_KV_THEN, S("b/3"), S("three"), false);
    once_kv_txn_get(t2, ONCE_KV_THEN, S("b/1"));
    assert_int_equal(once_kv_txn_exec(c, t2, &id, &st), ONCE_OK);
    assert_true(st.replayed);
    results_text(t2, again, sizeof(again));
    assert_string_equal(first, again);
    put_ok(c, "b/4", "four");
    count_prefix(c, "b/", &rev2);
    assert_int_equal(rev2, rev + 1);
    once_kv_txn_free(t);
    once_kv_txn_free(t2);
    once_client_close(c);
}

/* ---- the crash matrix over Txn (SPEC section 7) --------------------------
 * As tests/test_crash_matrix.c does for Increment, with raw envelopes: a
 * Txn (put cm/k, get cm/k) meets each fault point; onced restarts on the
 * same data; the same envelope is sent again. The effects of the one Txn
 * are the store revision's move (each execution that writes moves it by
 * one): exactly 1 at every point for onced, and the resend's reply is the
 * original's byte for byte when the original arrived. The two test-only
 * split builds (effect and record in two synced writes) must be caught:
 * effect first gives 2 at write_between, record first 0. */

#define CM_CALL_MS 3000
#define RANGE      "/once.v1.KV/Range"

typedef struct cm_reply {
    int rv;
    int code;
    bool replayed;
    uint8_t payload[256];
    size_t plen;
} cm_reply;

static cm_reply
cm_send(const harness *h, const char *method, uint64_t cid, uint64_t seq,
        const ProtobufCMessage *msg, int timeout_ms)
{
    uint8_t pl[512], *env = NULL;
    size_t plen = protobuf_c_message_pack(msg, pl), elen;
    Once__V1__Response *resp = NULL;
    cm_reply out;

    memset(&out, 0, sizeof(out));
    assert_int_equal(harness_envelope(method, cid, seq, pl, plen, &env, &elen),
                     0);
    out.rv = harness_raw_rpc(h->url, env, elen, &resp, timeout_ms);
    free(env);
    if (out.rv == 0) {
        out.code = resp->status != NULL ? (int)resp->status->code : 0;
        out.replayed = resp->replayed;
        assert_true(resp->payload.len <= sizeof(out.payload));
        memcpy(out.payload, resp->payload.data, resp->payload.len);
        out.plen = resp->payload.len;
        once__v1__response__free_unpacked(resp, NULL);
    }
    return out;
}

/* The Txn of the matrix, as cid:seq. */
static cm_reply
cm_txn(const harness *h, uint64_t cid, uint64_t seq, const char *val,
       int timeout_ms)
{
    Once__V1__KvTxnRequest req = ONCE__V1__KV_TXN_REQUEST__INIT;
    Once__V1__KvOp op = ONCE__V1__KV_OP__INIT, gop = ONCE__V1__KV_OP__INIT;
    Once__V1__KvOp *ops[2] = {&op, &gop};
    Once__V1__KvPut put = ONCE__V1__KV_PUT__INIT;
    Once__V1__KvGet get = ONCE__V1__KV_GET__INIT;

    put.key.data = (uint8_t *)"cm/k";
    put.key.len = 4;
    put.value.data = (uint8_t *)val;
    put.value.len = strlen(val);
    op.op_case = ONCE__V1__KV_OP__OP_PUT;
    op.put = &put;
    get.key = put.key;
    gop.op_case = ONCE__V1__KV_OP__OP_GET;
    gop.get = &get;
    req.n_then_ops = 2;
    req.then_ops = ops;
    return cm_send(h, TXN, cid, seq, &req.base, timeout_ms);
}

/* The store revision as a Range reads it now. */
static uint64_t
cm_revision(const harness *h)
{
    Once__V1__KvRangeRequest req = ONCE__V1__KV_RANGE_REQUEST__INIT;
    Once__V1__KvRangeResponse *rr;
    cm_reply r;
    uint64_t rev;

    req.key.data = (uint8_t *)"cm/";
    req.key.len = 3;
    req.prefix = true;
    r = cm_send(h, RANGE, 0, 0, &req.base, CM_CALL_MS);
    assert_int_equal(r.rv, 0);
    assert_int_equal(r.code, ONCE__V1__CODE__OK);
    assert_non_null(
        rr = once__v1__kv_range_response__unpack(NULL, r.plen, r.payload));
    rev = rr->revision;
    once__v1__kv_range_response__free_unpacked(rr, NULL);
    return rev;
}

static uint64_t
cm_reply_revision(const cm_reply *r)
{
    Once__V1__KvTxnResponse *tr =
        once__v1__kv_txn_response__unpack(NULL, r->plen, r->payload);
    uint64_t rev;

    assert_non_null(tr);
    rev = tr->revision;
    once__v1__kv_txn_response__free_unpacked(tr, NULL);
    return rev;
}

static void
cm_restart(harness *h, const char *fault)
{
    if (h->pid != 0) {
        assert_int_not_equal(harness_kill(h, SIGKILL), -1);
    }
    assert_int_equal(harness_set_fault(h, fault), 0);
    assert_int_equal(harness_restart(h), 0);
}

static void
cm_same(const cm_reply *a, const cm_reply *b)
{
    assert_int_equal(b->rv, 0);
    assert_int_equal(b->code, a->code);
    assert_int_equal(b->plen, a->plen);
    assert_memory_equal(b->payload, a->payload, a->plen);
}

/* One point: the effects (revision moves) the Txn left. */
static int
cm_point(const char *onced, const char *fault)
{
    const char *args[] = {"--gc-interval", "10m", NULL};
    bool drop = strstr(fault, ":drop") != NULL;
    harness *h = NULL;
    once_client *a = NULL;
    once_status st;
    uint64_t cid = 0, granted, rev0, after;
    cm_reply r1, r2, r2b, r2c;

    assert_int_equal(harness_start_onced(&h, onced, args), 0);
    assert_int_equal(harness_client(h, true, &a), ONCE_OK);
    assert_int_equal(once_lease_open(a, NULL, 600000, &cid, &granted, &st),
                     ONCE_OK);
    once_client_close(a);
    r1 = cm_txn(h, cid, 1, "one", CM_CALL_MS);
    assert_int_equal(r1.code, ONCE__V1__CODE__OK);
    rev0 = cm_revision(h);

    cm_restart(h, fault);
    r2 = cm_txn(h, cid, 2, "two", 1000);
    if (drop) {
        assert_int_equal(r2.rv, NNG_ETIMEDOUT);
        r2b = cm_txn(h, cid, 2, "two", CM_CALL_MS);
        assert_true(r2b.replayed);
        cm_restart(h, NULL);
    } else {
        int status = harness_wait_exit(h, 10000);
        assert_true(status != -1 && WIFSIGNALED(status));
        cm_restart(h, NULL);
    }
    r2b = cm_txn(h, cid, 2, "two", CM_CALL_MS);
    assert_int_equal(r2b.rv, 0);
    assert_int_equal(r2b.code, ONCE__V1__CODE__OK);
    if (r2.rv == 0) {
        cm_same(&r2, &r2b);
    }
    after = cm_revision(h);
    r2c = cm_txn(h, cid, 2, "two", CM_CALL_MS);
    cm_same(&r2b, &r2c);
    assert_true(r2c.replayed);
    assert_int_equal(cm_revision(h), after);
    if (onced == NULL) {
        /* The reply tells the truth: its revision is the store's. */
        assert_int_equal(cm_reply_revision(&r2b), after);
    }
    print_message("  %-20s original %s, resend %s: %d effect(s)\n", fault,
                  r2.rv == 0 ? "arrived" : "lost",
                  r2b.replayed ? "replayed" : "executed", (int)(after - rev0));
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
    return (int)(after - rev0);
}

static const char *const cm_points[] = {
    "request_accepted", "batch_staged", "write_between",
    "batch_written",    "reply_sent",   "batch_written:drop",
    "reply_sent:drop",
};
#define CM_NPOINTS (sizeof(cm_points) / sizeof(cm_points[0]))

static void
t_crash_matrix(void **state)
{
    (void)state;
    print_message("onced (atomic):\n");
    for (size_t i = 0; i < CM_NPOINTS; i++) {
        assert_int_equal(cm_point(NULL, cm_points[i]), 1);
    }
    /* The matrix catches a server that writes effect and record apart. */
    print_message("onced_split_effect_first:\n");
    assert_int_equal(cm_point(ONCED_SPLIT_EFFECT_FIRST, "batch_staged"), 1);
    assert_int_equal(cm_point(ONCED_SPLIT_EFFECT_FIRST, "write_between"), 2);
    assert_int_equal(cm_point(ONCED_SPLIT_EFFECT_FIRST, "batch_written"), 1);
    print_message("onced_split_record_first:\n");
    assert_int_equal(cm_point(ONCED_SPLIT_RECORD_FIRST, "batch_staged"), 1);
    assert_int_equal(cm_point(ONCED_SPLIT_RECORD_FIRST, "write_between"), 0);
    assert_int_equal(cm_point(ONCED_SPLIT_RECORD_FIRST, "batch_written"), 1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(t_replay_every_op, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(t_cas_lost_reply, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(t_revision_version, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(t_range_pages, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(t_bounds, setup_bounds,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(t_prefix_permissions, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(t_lease_bound_close, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(t_lease_bound_expiry, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(t_transfer_workload, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(t_backup_carries_keys, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(t_async, harness_setup,
                                        harness_teardown),
        cmocka_unit_test(t_crash_matrix),
    };

    harness_trap_exit("test_kv");
    return harness_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
