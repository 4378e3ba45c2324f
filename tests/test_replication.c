/*
 * test_replication.c — onced --replicate on a real 3-member etcd cluster
 * with 3 real onced replicas (tests/cluster.c; docs/replication.md).
 *
 * Owns: the failover tests of issue 14: the leader SIGKILLed again and
 * again under load; the leader SIGSTOPped past its etcd lease and resumed
 * (it commits nothing and steps down); etcd members lost (one: service
 * goes on; two: UNAVAILABLE, no leader, until one returns); a wiped
 * replica catching up from the log and leading (and, on a cluster with
 * principals and a policy, seeding only with --replicate-key). In each,
 * clients on
 * their own threads increment one counter through every replica's URL
 * (libonce follows NOT_LEADER hints, steer.h, retrying the same rpc id)
 * and the values
 * returned are exactly {1..N} and the counter N: no rpc id ran twice, no
 * acknowledged call was lost. Tests 9 and 10: clients given the leader's
 * URL last reach it after one NOT_LEADER each, and again after a failover
 * (once_client_route counts); a follower's responder keeps answering
 * after many peers hung up on it, without spinning.
 * test_kv_survives_failover: a KV Txn's keys, revision and record ride
 * the same log entry — the new leader serves them and replays the Txn.
 * test_outbox_survives_failover: a receiver reading across a leader
 * SIGKILL applies the exact event sequence; its cursor survives.
 * Invariant: every wait is bounded; workers never call cmocka assertions.
 * Never: sleeps for a fixed time where a condition can be waited for.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include <once/grants.h>
#include <once/kv.h>
#include <once/outbox.h>

#include "tests/certs.h"
#include "tests/cluster.h"
#include "repl/etcd.h"
#include "proto/grants.pb-c.h"
#include "tests/harness.h"
#include "tests/notify_sock.h"
#include "tests/sys_helpers.h"

#define TTL_S     2 /* the replicas' etcd lease */
#define WORKERS   4
#define MAX_CALLS 4096
#define TRIES     20 /* calls of one rpc id before the test gives up */

typedef struct load {
    const char *urls;
    int calls_each;
    int64_t base; /* the counter before this load (set before finishing) */
    pthread_mutex_t mtx; /* protects values, n, error */
    int64_t values[MAX_CALLS];
    size_t n;
    char error[512];
    atomic_int done; /* workers finished */
    pthread_t threads[WORKERS];
} load;

typedef struct fixture {
    etcd_cluster *etcd;
    replica_set *rs;
    char certs[64]; /* setup_tls: the certificates' folder ("" otherwise) */
    bool passed;    /* the test's body ran to its end (CASE below) */
} fixture;

static void
load_fail(load *l, const char *fmt, ...)
{
    va_list ap;

    pthread_mutex_lock(&l->mtx);
    if (l->error[0] == '\0') {
        va_start(ap, fmt);
        vsnprintf(l->error, sizeof(l->error), fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&l->mtx);
}

static size_t
load_count(load *l)
{
    size_t n;
    pthread_mutex_lock(&l->mtx);
    n = l->n;
    pthread_mutex_unlock(&l->mtx);
    return n;
}

/* The key file every client signs with while an authenticated fixture
 * (setup_auth) runs; NULL: unsigned. */
static const char *client_key_file;

/* A client of every replica: long deadlines, so a failover (a few etcd
 * lease TTLs) ends inside one call. */
static int
open_client(const char *urls, bool no_lease, once_client **cp)
{
    once_options o;
    once_security sec;
    once_status st;
    int rv = ONCE_UNAVAILABLE;

    once_security_init(&sec);
    sec.key_file = client_key_file;
    once_options_init(&o);
    o.url = urls;
    o.no_lease = no_lease;
    o.lease_ttl_ms = 120000;
    o.deadline_ms = 30000;
    o.attempt_timeout_ms = 1000;
    o.max_attempts = 1000;
    o.backoff_initial_ms = 5;
    o.backoff_max_ms = 100;
    for (int i = 0; i < 5 && rv != ONCE_OK; i++) {
        rv = once_client_open_secure(cp, &o, &sec, &st);
    }
    if (rv != ONCE_OK) {
        fprintf(stderr, "once_client_open(%s): %s %s %s\n", urls,
                once_strerror(rv), st.reason, st.message);
    }
    return rv;
}

static void
load_call(load *l, once_client *c)
{
    once_rpc_id id = {0, 0};
    once_status st;
    int64_t v = -1;
    int rv = ONCE_UNKNOWN;

    for (int i = 0; i < TRIES; i++) {
        rv = once_counter_incr(c, "c", 1, &id, &v, &st);
        if (rv == ONCE_OK || id.seq == 0) {
            break; /* answered, or never sent (then tried anew) */
        }
        if (rv != ONCE_UNKNOWN && rv != ONCE_UNAVAILABLE) {
            break;
        }
    }
    if (rv != ONCE_OK) {
        load_fail(l, "call %llu:%llu ended %s %s (%s)",
                  (unsigned long long)id.client_id, (unsigned long long)id.seq,
                  once_strerror(rv), st.reason, st.message);
        return;
    }
    pthread_mutex_lock(&l->mtx);
    if (l->n < MAX_CALLS) {
        l->values[l->n++] = v;
    }
    pthread_mutex_unlock(&l->mtx);
}

static void *
load_worker(void *arg)
{
    load *l = arg;
    once_client *c = NULL;

    if (open_client(l->urls, false, &c) != ONCE_OK) {
        load_fail(l, "a worker could not open its client");
    } else {
        for (int i = 0; i < l->calls_each; i++) {
            load_call(l, c);
        }
        once_client_close(c);
    }
    atomic_fetch_add(&l->done, 1);
    return NULL;
}

static load *
load_start(const char *urls, int calls_each)
{
    load *l = calloc(1, sizeof(*l));

    assert_non_null(l);
    l->urls = urls;
    l->calls_each = calls_each;
    pthread_mutex_init(&l->mtx, NULL);
    for (int i = 0; i < WORKERS; i++) {
        assert_int_equal(pthread_create(&l->threads[i], NULL, load_worker, l),
                         0);
    }
    return l;
}

static bool
load_running(load *l)
{
    return atomic_load(&l->done) < WORKERS;
}

/* Waits until the workers returned `more` values beyond `from` (or are
 * done), at most ms. */
static void
load_wait_progress(load *l, size_t from, size_t more, int ms)
{
    int64_t until = harness_now_ms() + ms;

    while (load_count(l) < from + more && load_running(l) &&
           harness_now_ms() < until) {
        harness_sleep_ms(20);
    }
}

static int
cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Joins the workers and checks the values are exactly {base+1..base+N},
 * base+N the counter; returns base+N. */
static int64_t
load_finish(load *l, fixture *f)
{
    once_client *c = NULL;
    once_status st;
    int64_t counter = -1;
    size_t n;

    for (int i = 0; i < WORKERS; i++) {
        pthread_join(l->threads[i], NULL);
    }
    if (l->error[0] != '\0') {
        replicas_dump(f->rs);
        fail_msg("%s", l->error);
    }
    n = l->n;
    assert_int_equal(n, (size_t)WORKERS * (size_t)l->calls_each);
    qsort(l->values, n, sizeof(l->values[0]), cmp_i64);
    for (size_t i = 0; i < n; i++) {
        if (l->values[i] != l->base + (int64_t)i + 1) {
            replicas_dump(f->rs);
            fail_msg("value %zu is %lld, not %lld: an rpc id ran twice or an "
                     "acknowledged call was lost",
                     i, (long long)l->values[i],
                     (long long)(l->base + (int64_t)i + 1));
        }
    }
    assert_int_equal(open_client(f->rs->urls, true, &c), ONCE_OK);
    assert_int_equal(once_counter_get(c, "c", &counter, &st), ONCE_OK);
    once_client_close(c);
    assert_int_equal(counter, l->base + (int64_t)n);
    counter = l->base + (int64_t)n;
    pthread_mutex_destroy(&l->mtx);
    free(l);
    return counter;
}

static int fixture_start_tls(void **state, int ttl_s, unsigned retain,
                             bool auth, bool tls);

/* 3 etcd members and 3 replicas with an etcd lease of ttl_s, retain
 * (0: onced's default) and, with auth, principals on every replica, each
 * given --replicate-key (cluster.h). */
static int
fixture_start(void **state, int ttl_s, unsigned retain, bool auth)
{
    return fixture_start_tls(state, ttl_s, retain, auth, false);
}

/* fixture_start, with tls: etcd's client port on TLS with client
 * certificates required (etcd_cluster_start_tls), the replicas given
 * --etcd-cacert/--etcd-cert/--etcd-key. */
static int
fixture_start_tls(void **state, int ttl_s, unsigned retain, bool auth, bool tls)
{
    fixture *f = calloc(1, sizeof(*f));

    if (f != NULL && tls) {
        snprintf(f->certs, sizeof(f->certs), "/tmp/once-etcd-tls-XXXXXX");
        if (mkdtemp(f->certs) == NULL || certs_make(f->certs) != 0) {
            free(f);
            return -1;
        }
    }
    if (f == NULL ||
        etcd_cluster_start_tls(&f->etcd, 3, tls ? f->certs : NULL) != 0 ||
        (auth
             ? replicas_start_auth(&f->rs, f->etcd, 3, ttl_s, retain, true)
             : replicas_start_retain(&f->rs, f->etcd, 3, ttl_s, retain)) != 0) {
        if (f != NULL) {
            etcd_cluster_free(f->etcd);
            if (f->certs[0] != '\0') {
                sys_rm_tree(f->certs);
            }
        }
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int
setup(void **state)
{
    return fixture_start(state, TTL_S, 0, false);
}

/* setup with a 5 s etcd lease: for a test whose appends are large (a
 * sanitizer build base64-encodes 1 MiB slowly). */
static int
setup_ttl5(void **state)
{
    return fixture_start(state, 5, 0, false);
}

static int
teardown(void **state)
{
    fixture *f = *state;
    int rv = replicas_stop(f->rs);

    /* A failed test (its body left by a failed assertion) or an unclean
     * stop: every replica's log and every etcd member's. */
    if (rv != 0 || !f->passed) {
        replicas_dump(f->rs);
        etcd_cluster_dump(f->etcd);
    }
    replicas_free(f->rs);
    etcd_cluster_free(f->etcd);
    if (f->certs[0] != '\0' && getenv("ONCE_TEST_KEEP") == NULL) {
        sys_rm_tree(f->certs);
    }
    free(f);
    return rv;
}

/* setup over TLS to etcd (fixture_start_tls). */
static int
setup_tls(void **state)
{
    return fixture_start_tls(state, TTL_S, 0, false, true);
}

/* Test 1: the leader SIGKILLed again and again under load. */
static void
test_leader_killed_repeatedly(void **state)
{
    fixture *f = *state;
    load *l = load_start(f->rs->urls, 40);
    int kills = 0;

    for (int k = 0; k < 3 && load_running(l); k++) {
        int leader;

        load_wait_progress(l, load_count(l), 10, 30000);
        if ((leader = replicas_leader(f->rs, -1, 30000)) < 0) {
            break;
        }
        replicas_kill(f->rs, leader, SIGKILL);
        kills++;
        assert_int_equal(replicas_restart(f->rs, leader), 0);
    }
    load_finish(l, f);
    assert_true(kills >= 2);
}

/* Test 2: the leader SIGSTOPped past its etcd lease; a follower takes
 * over; the old leader, resumed, commits nothing and steps down. */
static void
test_leader_stopped_past_lease(void **state)
{
    fixture *f = *state;
    load *l = load_start(f->rs->urls, 30);
    int old, next;

    load_wait_progress(l, 0, 10, 30000);
    assert_true((old = replicas_leader(f->rs, -1, 30000)) >= 0);
    replicas_kill(f->rs, old, SIGSTOP);
    assert_true(harness_wait_stopped(f->rs->pid[old]));
    /* Another replica leads once the lease lapsed at etcd. */
    next = replicas_leader(f->rs, old, 30000);
    if (next < 0) {
        replicas_kill(f->rs, old, SIGCONT);
        replicas_dump(f->rs);
        fail_msg("no replica took over from the stopped leader");
    }
    load_wait_progress(l, load_count(l), 10, 30000);
    replicas_kill(f->rs, old, SIGCONT);
    /* It wakes with calls queued, appends nothing, steps down. */
    for (int i = 0; i < 500 && !replicas_log_has(f->rs, old, "stepping down");
         i++) {
        harness_sleep_ms(20);
    }
    if (!replicas_log_has(f->rs, old, "stepping down")) {
        replicas_dump(f->rs);
        fail_msg("the resumed old leader did not step down");
    }
    load_finish(l, f);
}

/* Test 3: one etcd member lost under load: nothing lost, service goes on.
 * Two lost: no replica serves (UNAVAILABLE) until one returns. */
static void
test_etcd_members_lost(void **state)
{
    fixture *f = *state;
    load *l = load_start(f->rs->urls, 20);
    once_client *c = NULL;
    once_status st;
    once_rpc_id id = {0, 0};
    int64_t v = -1, n;
    int rv = ONCE_OK;

    load_wait_progress(l, 0, 10, 30000);
    etcd_member_kill(f->etcd, 0, SIGKILL);
    n = load_finish(l, f);

    etcd_member_kill(f->etcd, 1, SIGKILL);
    /* The leader cannot renew its lease: within about the TTL nobody
     * answers OK any more — first no reply in time (the leader waits on
     * etcd), then, once it stepped down, every replica's clear
     * UNAVAILABLE/ETCD_UNAVAILABLE. */
    assert_int_equal(open_client(f->rs->urls, true, &c), ONCE_OK);
    for (int i = 0; i < 100; i++) {
        once_options o;
        once_client *q = NULL;
        int64_t got;

        /* Few attempts and a long deadline: the read ends on its last
         * reply, not cut short by the deadline (that is
         * DEADLINE_EXCEEDED whatever the replicas said). */
        once_options_init(&o);
        o.url = f->rs->urls;
        o.no_lease = true;
        o.deadline_ms = 10000;
        o.attempt_timeout_ms = 1000;
        o.max_attempts = 3;
        assert_int_equal(once_client_open(&q, &o, &st), ONCE_OK);
        rv = once_counter_get(q, "c", &got, &st);
        once_client_close(q);
        /* A follower's refusal: ETCD_UNAVAILABLE once its own read of
         * etcd timed out, its last NOT_LEADER/NO_LEADER until then. */
        if (rv == ONCE_UNAVAILABLE &&
            (once_status_is(&st, ONCE_REASON_ETCD_UNAVAILABLE) ||
             once_status_is(&st, ONCE_REASON_NOT_LEADER) ||
             once_status_is(&st, ONCE_REASON_NO_LEADER))) {
            break;
        }
        /* Before that: OK from the old leader, or no reply from it
         * while it waits on etcd. */
        assert_true(rv == ONCE_OK || rv == ONCE_UNAVAILABLE ||
                    rv == ONCE_DEADLINE_EXCEEDED);
        rv = ONCE_OK;
        harness_sleep_ms(100);
    }
    assert_int_equal(rv, ONCE_UNAVAILABLE);
    /* The old leader answers OK at most until its local deadline (2/3 of
     * the TTL after its last keepalive); then, and from then on, no
     * replica leads without an etcd quorum. */
    {
        int64_t until = harness_now_ms() + 30000;
        while (replicas_leader(f->rs, -1, 200) >= 0 &&
               harness_now_ms() < until) {
            harness_sleep_ms(100);
        }
    }
    assert_int_equal(replicas_leader(f->rs, -1, 3 * TTL_S * 1000), -1);
    assert_true(replicas_log_has(f->rs, 0, "ETCD_UNAVAILABLE") ||
                replicas_log_has(f->rs, 1, "ETCD_UNAVAILABLE") ||
                replicas_log_has(f->rs, 2, "ETCD_UNAVAILABLE"));
    once_client_close(c);

    /* One member back: a quorum again, a leader, writes resume. */
    assert_int_equal(etcd_member_restart(f->etcd, 1), 0);
    assert_true(replicas_leader(f->rs, -1, 60000) >= 0);
    assert_int_equal(open_client(f->rs->urls, false, &c), ONCE_OK);
    rv = once_counter_incr(c, "c", 1, &id, &v, &st);
    if (rv != ONCE_OK) {
        replicas_dump(f->rs);
        fail_msg("increment after the quorum returned: %s %s %s",
                 once_strerror(rv), st.reason, st.message);
    }
    assert_int_equal(v, n + 1);
    once_client_close(c);
}

/* ---- trimming and snapshots (trim.c, seed.c) -------------------------- */

#define RETAIN 20 /* --replicate-retain of the trimming tests */

static int
setup_retain(void **state)
{
    return fixture_start(state, TTL_S, RETAIN, false);
}

/* setup_retain with authentication on every replica (cluster.h,
 * replicas_start_auth), each given --replicate-key; clients sign as the
 * operator. */
static int
setup_auth(void **state)
{
    if (fixture_start(state, TTL_S, RETAIN, true) != 0) {
        return -1;
    }
    client_key_file = ((fixture *)*state)->rs->op_key;
    return 0;
}

static int
teardown_auth(void **state)
{
    client_key_file = NULL;
    return teardown(state);
}

/* Log keys in etcd, read through the gateway: how many, the first and the
 * last index; *rev the store revision read. */
static void
log_keys(fixture *f, size_t *count, uint64_t *first, uint64_t *last,
         int64_t *rev)
{
    char from[128], to[128];
    etcd *e = NULL;
    etcd_kv *kvs = NULL;
    size_t n = 0;

    snprintf(from, sizeof(from), "/once/%s/log/", f->rs->name);
    snprintf(to, sizeof(to), "/once/%s/log0", f->rs->name);
    assert_int_equal(etcd_cluster_client(f->etcd, 2000, &e), 0);
    assert_int_equal(etcd_range(e, from, strlen(from), to, strlen(to), 0, &kvs,
                                &n, NULL, rev),
                     0);
    *count = n;
    *first = n > 0 ? strtoull(kvs[0].key + strlen(from), NULL, 10) : 0;
    *last = n > 0 ? strtoull(kvs[n - 1].key + strlen(from), NULL, 10) : 0;
    etcd_kvs_free(kvs, n);
    etcd_close(e);
}

/* A decimal key of the cluster (first, applied/<url>); 0 when absent. */
static uint64_t
cluster_u64(fixture *f, const char *suffix)
{
    char key[512];
    etcd *e = NULL;
    etcd_kv *kvs = NULL;
    size_t n = 0;
    uint64_t v = 0;

    snprintf(key, sizeof(key), "/once/%s/%s", f->rs->name, suffix);
    assert_int_equal(etcd_cluster_client(f->etcd, 2000, &e), 0);
    if (etcd_range(e, key, strlen(key), NULL, 0, 1, &kvs, &n, NULL, NULL) ==
            0 &&
        n == 1) {
        v = strtoull(kvs[0].val, NULL, 10);
    }
    etcd_kvs_free(kvs, n);
    etcd_close(e);
    return v;
}

/* Whether etcdctl's read of key at revision rev says it was compacted. */
static bool
revision_compacted(fixture *f, const char *key, int64_t rev)
{
    char cmd[1024], out[4096];
    size_t n;
    FILE *p;

    snprintf(cmd, sizeof(cmd),
             "ETCDCTL_API=3 etcdctl --endpoints=%s --command-timeout=5s get "
             "--rev=%lld '%s' 2>&1",
             f->etcd->endpoints, (long long)rev, key);
    assert_non_null(p = popen(cmd, "r"));
    n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    pclose(p);
    return strstr(out, "compacted") != NULL;
}

/* Test (trimming): with every replica up, the leader deletes what all
 * applied and compacts etcd: after 160 increments (many log entries) the
 * log in etcd is a handful of keys, and a read at the revision before
 * them fails 'compacted'. Fails on a build without trimming: the log
 * keeps every entry and old revisions stay readable. */
static void
test_log_trimmed_and_compacted(void **state)
{
    fixture *f = *state;
    char leader_key[128];
    size_t count = 0;
    uint64_t first = 0, last = 0;
    int64_t rev0 = 0, rev = 0, until;
    load *l;

    log_keys(f, &count, &first, &last, &rev0);
    l = load_start(f->rs->urls, 40);
    load_finish(l, f);
    until = harness_now_ms() + 20000;
    do {
        harness_sleep_ms(100);
        log_keys(f, &count, &first, &last, &rev);
    } while (count > 8 && harness_now_ms() < until);
    fprintf(stderr, "log keys %zu (indexes %llu..%llu) at revision %lld\n",
            count, (unsigned long long)first, (unsigned long long)last,
            (long long)rev);
    if (count > 8 || last < 40) {
        replicas_dump(f->rs);
        fail_msg("the log holds %zu keys up to index %llu: not trimmed", count,
                 (unsigned long long)last);
    }
    assert_true(cluster_u64(f, "first") > 1);
    snprintf(leader_key, sizeof(leader_key), "/once/%s/leader", f->rs->name);
    if (!revision_compacted(f, leader_key, rev0)) {
        fail_msg("revision %lld is still readable: etcd not compacted",
                 (long long)rev0);
    }
}

static int64_t
counter_now(fixture *f)
{
    once_client *c = NULL;
    once_status st;
    int64_t v = -1;

    assert_int_equal(open_client(f->rs->urls, true, &c), ONCE_OK);
    assert_int_equal(once_counter_get(c, "c", &v, &st), ONCE_OK);
    once_client_close(c);
    return v;
}

/* Runs calls (counter at n) until the log starts past applied + 1 — a
 * log starting right after a replica's index is one it can still follow
 * (no snapshot needed), as seen once in CI — failing after 60 s. Returns
 * the counter; *first is where the log starts. */
static int64_t
trim_until(fixture *f, uint64_t applied, int64_t n, uint64_t *first)
{
    int64_t until = harness_now_ms() + 60000;

    while ((*first = cluster_u64(f, "first")) <= applied + 1 &&
           harness_now_ms() < until) {
        load *l = load_start(f->rs->urls, 10);
        l->base = n;
        n = load_finish(l, f);
    }
    if (*first <= applied + 1) {
        replicas_dump(f->rs);
        fail_msg("the log was not trimmed past index %llu (first kept %llu)",
                 (unsigned long long)applied + 1, (unsigned long long)*first);
    }
    return n;
}

/* Stops replica i, runs calls until the log is trimmed past what it
 * applied; returns the counter's value. *last_id / *last_v: one call of a
 * handle left open (its record is not acknowledged, so it is kept). */
static int64_t
trim_past(fixture *f, int i, once_client **keep, once_rpc_id *last_id,
          int64_t *last_v)
{
    uint64_t applied = 0, first = 0;
    size_t count = 0;
    int64_t n, rev = 0;
    once_status st;

    replicas_kill(f->rs, i, SIGKILL);
    /* It applied at most the log's last entry now (its published index
     * may be older). */
    log_keys(f, &count, &first, &applied, &rev);
    n = trim_until(f, applied, counter_now(f), &first);
    fprintf(stderr, "replica %d applied at most %llu; the log starts at %llu\n",
            i, (unsigned long long)applied, (unsigned long long)first);
    assert_int_equal(open_client(f->rs->urls, false, keep), ONCE_OK);
    assert_int_equal(once_counter_incr_new(*keep, "c", 1, last_id, last_v, &st),
                     ONCE_OK);
    assert_int_equal(*last_v, n + 1);
    return *last_v;
}

/* Replica i (seeded) leads once the others are killed: the counter is n,
 * the kept rpc id replays its stored result, a new call is n + 1. */
static void
seeded_leads(fixture *f, int i, int64_t n, once_client *keep,
             once_rpc_id last_id, int64_t last_v)
{
    once_client *c = NULL;
    once_status st;
    int64_t v = -1;

    for (int k = 0; k < 3; k++) {
        if (k != i) {
            replicas_kill(f->rs, k, SIGKILL);
        }
    }
    if (replicas_leader(f->rs, -1, 30000) != i) {
        replicas_dump(f->rs);
        fail_msg("the seeded replica did not take over");
    }
    assert_int_equal(open_client(f->rs->urls, false, &c), ONCE_OK);
    assert_int_equal(once_counter_get(c, "c", &v, &st), ONCE_OK);
    assert_int_equal(v, n);
    v = -1;
    assert_int_equal(once_counter_incr_retry(keep, "c", 1, &last_id, &v, &st),
                     ONCE_OK);
    assert_int_equal(v, last_v); /* the stored result, not a second run */
    assert_true(st.replayed);
    assert_int_equal(once_counter_incr_new(c, "c", 1, NULL, &v, &st), ONCE_OK);
    assert_int_equal(v, n + 1);
    once_client_close(c);
    once_client_close(keep);
}

/* Waits (at most ms) until replica i's log has text. */
static bool
log_wait(fixture *f, int i, const char *text, int ms)
{
    for (int64_t until = harness_now_ms() + ms;
         !replicas_log_has(f->rs, i, text) && harness_now_ms() < until;) {
        harness_sleep_ms(50);
    }
    return replicas_log_has(f->rs, i, text);
}

/* Tests 4: calls, then a follower stopped while the log is trimmed past
 * it (trim_past: *keep, *id and *v are a completed call to replay later)
 * and its folder wiped. Returns that replica; *n is the counter. */
static int
wipe_trimmed(fixture *f, once_client **keep, once_rpc_id *id, int64_t *v,
             int64_t *n)
{
    int leader, wiped;

    load_finish(load_start(f->rs->urls, 10), f);
    assert_true((leader = replicas_leader(f->rs, -1, 30000)) >= 0);
    wiped = (leader + 1) % 3;
    *n = trim_past(f, wiped, keep, id, v);
    replicas_wipe(f->rs, wiped);
    return wiped;
}

/* Test 4: a wiped replica whose entries were trimmed seeds itself from the
 * leader's snapshot, catches up, and leads with every value exact. Fails
 * on a build without trimming (the log is never trimmed past it) and on
 * one without seeding (it cannot follow a log that starts past index 1). */
static void
test_wiped_replica_catches_up(void **state)
{
    fixture *f = *state;
    once_client *keep = NULL;
    once_rpc_id id = {0, 0};
    int64_t v = -1, n;
    int wiped = wipe_trimmed(f, &keep, &id, &v, &n);

    assert_int_equal(replicas_restart(f->rs, wiped), 0);
    if (!log_wait(f, wiped, "seeded from a snapshot", 30000)) {
        replicas_dump(f->rs);
        fail_msg("the wiped replica did not seed from a snapshot");
    }
    seeded_leads(f, wiped, n, keep, id, v);
}

/* Test 4 on an authenticated cluster (principals and policy in every data
 * folder; a "replica" role allowed only Admin.Snapshot): the wiped
 * replica (principals and policy provisioned again, as an operator
 * would) restarted *without* --replicate-key is refused and never seeds;
 * restarted with it, it seeds, catches up and leads with every value
 * exact. Fails on a build without --replicate-key (onced refuses the
 * option, and unsigned seeding is refused for ever). */
static void
test_wiped_replica_seeds_authenticated(void **state)
{
    fixture *f = *state;
    once_client *keep = NULL;
    once_rpc_id id = {0, 0};
    int64_t v = -1, n;
    int wiped = wipe_trimmed(f, &keep, &id, &v, &n);

    /* Without the key: refused, told why, and not seeded. */
    f->rs->replicate_key = false;
    assert_int_equal(replicas_restart(f->rs, wiped), 0);
    if (!log_wait(f, wiped, "give this replica --replicate-key", 30000) ||
        replicas_log_has(f->rs, wiped, "seeded from a snapshot")) {
        replicas_dump(f->rs);
        fail_msg("an unsigned seeding request was not refused");
    }
    replicas_kill(f->rs, wiped, SIGKILL);
    /* With it: seeded. */
    f->rs->replicate_key = true;
    assert_int_equal(replicas_restart(f->rs, wiped), 0);
    if (!log_wait(f, wiped, "seeded from a snapshot", 30000)) {
        replicas_dump(f->rs);
        fail_msg("the wiped replica did not seed with --replicate-key");
    }
    assert_true(
        replicas_log_has(f->rs, wiped, "signed as principal " REPLICAS_REPL));
    seeded_leads(f, wiped, n, keep, id, v);
}

/* Test (lagging): a replica stopped while the log was trimmed past it
 * keeps its folder, yet cannot follow the log from its applied index: it
 * reseeds instead of diverging (or refusing), and can lead. Fails on a
 * build without trimming/seeding as test 4 does. */
static void
test_lagging_replica_reseeds(void **state)
{
    fixture *f = *state;
    once_client *keep = NULL;
    once_rpc_id id = {0, 0};
    int64_t v = -1, n;
    int leader, lagging;

    n = load_finish(load_start(f->rs->urls, 10), f);
    assert_true((leader = replicas_leader(f->rs, -1, 30000)) >= 0);
    lagging = (leader + 2) % 3;
    n = trim_past(f, lagging, &keep, &id, &v);
    assert_int_equal(replicas_restart(f->rs, lagging), 0);
    for (int64_t until = harness_now_ms() + 30000;
         !replicas_log_has(f->rs, lagging, "seeded from a snapshot") &&
         harness_now_ms() < until;) {
        harness_sleep_ms(50);
    }
    if (!replicas_log_has(f->rs, lagging, "needs a snapshot") ||
        !replicas_log_has(f->rs, lagging, "seeded from a snapshot")) {
        replicas_dump(f->rs);
        fail_msg("the lagging replica did not reseed");
    }
    seeded_leads(f, lagging, n, keep, id, v);
}

/* A replica whose folder went back in time after it had published a
 * later applied index, and the log was trimmed on its word: what a machine
 * crash does to a replica (replicated stores do not sync; etcd's log is the
 * durable copy), simulated by putting back a copy of its folder taken
 * earlier. It finds its next entry gone, reseeds from a snapshot and can
 * lead, every value exact. Fails when a replica whose entry was trimmed
 * refuses the log instead of reseeding (tried: it does not restart). */
static void
test_rolled_back_replica_reseeds(void **state)
{
    fixture *f = *state;
    once_client *keep = NULL;
    once_rpc_id id = {0, 0};
    once_status st;
    uint64_t applied = 0, first = 0;
    size_t count = 0;
    int64_t v = -1, n, rev = 0;
    const char *data;
    int leader, back;

    n = load_finish(load_start(f->rs->urls, 10), f);
    assert_true((leader = replicas_leader(f->rs, -1, 30000)) >= 0);
    back = (leader + 1) % 3;
    data = f->rs->data[back];
    replicas_kill(f->rs, back, SIGKILL);
    log_keys(f, &count, &first, &applied, &rev); /* it holds at most this */
    assert_int_equal(harness_sh("cp -a %s %s.old", data, data), 0);
    assert_int_equal(replicas_restart(f->rs, back), 0);
    /* Running, it applies and publishes, and the leader trims past what
     * the copy holds (and past the entry right after it). */
    n = trim_until(f, applied, n, &first);
    replicas_kill(f->rs, back, SIGKILL);
    assert_int_equal(harness_sh("rm -rf %s && mv %s.old %s", data, data, data),
                     0);
    assert_int_equal(open_client(f->rs->urls, false, &keep), ONCE_OK);
    assert_int_equal(once_counter_incr_new(keep, "c", 1, &id, &v, &st),
                     ONCE_OK);
    assert_int_equal(v, n + 1);
    n = v;
    assert_int_equal(replicas_restart(f->rs, back), 0);
    if (!log_wait(f, back, "seeded from a snapshot", 30000) ||
        !replicas_log_has(f->rs, back, "needs a snapshot")) {
        replicas_dump(f->rs);
        fail_msg("the rolled-back replica did not reseed");
    }
    seeded_leads(f, back, n, keep, id, v);
}

/* Restore when etcd's log is lost (docs/replication.md, "Backup and
 * restore"), with the documented commands: `oncectl admin backup` of the
 * running cluster, then a new cluster name whose log starts right after
 * the backup's index (`etcdctl put /once/NEW/first L+1`), one replica on a
 * copy of the backup, two empty ones: the first leads, the others seed
 * from it; the counter is exact. Fails on a build without Admin.Snapshot
 * (no backup) or without the first-index key (the restored replica
 * refuses a log that does not hold its index). */
static void
test_cluster_restored_from_backup(void **state)
{
    fixture *f = *state;
    char backup[400], out[1024], cmd[2048], *p;
    const char *args[] = {"--server", f->rs->urls, "--json", "admin",
                          "backup",   backup,      NULL};
    unsigned long long index;
    once_client *c = NULL;
    once_status st;
    int64_t v = -1, n;

    n = load_finish(load_start(f->rs->urls, 10), f);
    snprintf(backup, sizeof(backup), "%s/backup", f->rs->dir);
    if (harness_oncectl_run(args, out, sizeof(out), NULL) != 0) {
        fail_msg("oncectl admin backup: %s", out);
    }
    assert_non_null(p = strstr(out, "\"log_index\":"));
    index = strtoull(p + strlen("\"log_index\":"), NULL, 10);
    assert_true(index > 0);
    for (int i = 0; i < 3; i++) {
        replicas_kill(f->rs, i, SIGKILL);
    }
    /* The new cluster name stands for a new etcd: its log is empty. */
    snprintf(f->rs->name + strlen(f->rs->name),
             sizeof(f->rs->name) - strlen(f->rs->name), "-restored");
    snprintf(cmd, sizeof(cmd),
             "ETCDCTL_API=3 etcdctl --endpoints=%s put /once/%s/first %llu "
             ">/dev/null && rm -rf '%s' '%s' '%s' && cp -a '%s' '%s'",
             f->etcd->endpoints, f->rs->name, index + 1, f->rs->data[0],
             f->rs->data[1], f->rs->data[2], backup, f->rs->data[0]);
    assert_int_equal(system(cmd), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(replicas_restart(f->rs, i), 0);
    }
    if (replicas_leader(f->rs, -1, 30000) != 0) {
        replicas_dump(f->rs);
        fail_msg("the replica on the backup did not lead");
    }
    assert_int_equal(open_client(f->rs->urls, false, &c), ONCE_OK);
    assert_int_equal(once_counter_get(c, "c", &v, &st), ONCE_OK);
    assert_int_equal(v, n);
    assert_int_equal(once_counter_incr_new(c, "c", 1, NULL, &v, &st), ONCE_OK);
    assert_int_equal(v, n + 1);
    once_client_close(c);
    for (int i = 1; i < 3; i++) {
        for (int64_t until = harness_now_ms() + 30000;
             !replicas_log_has(f->rs, i, "seeded from a snapshot") &&
             harness_now_ms() < until;) {
            harness_sleep_ms(50);
        }
        if (!replicas_log_has(f->rs, i, "seeded from a snapshot")) {
            replicas_dump(f->rs);
            fail_msg("replica %d did not seed from the restored leader", i);
        }
    }
}

/* Calls /once.v1.Grants/<m> (mutating unless a read) under *id (NULL: a
 * new one); on OK *out (if out) is the unpacked reply. */
static int
gcall(once_client *c, const char *m, bool mutating, const void *reqv,
      void *outv, once_rpc_id *id)
{
    const ProtobufCMessage *req = reqv;
    ProtobufCMessage **out = outv;
    const ProtobufCMethodDescriptor *md =
        protobuf_c_service_descriptor_get_method_by_name(
            &once__v1__grants__descriptor, m);
    char full[128];
    uint8_t *buf;
    void *resp = NULL;
    size_t len, rlen = 0;
    once_status st;
    int rv;

    assert_non_null(md);
    snprintf(full, sizeof(full), "/once.v1.Grants/%s", m);
    len = protobuf_c_message_get_packed_size(req);
    buf = malloc(len + 1);
    protobuf_c_message_pack(req, buf);
    rv = once_call(c, full, mutating, id, buf, len, &resp, &rlen, &st);
    free(buf);
    if (rv != ONCE_OK) {
        fprintf(stderr, "%s: %s %s %s\n", full, once_strerror(rv), st.reason,
                st.message);
    }
    if (out != NULL) {
        *out = NULL;
        if (rv == ONCE_OK) {
            *out = protobuf_c_message_unpack(md->output, NULL, rlen, resp);
            assert_non_null(*out);
        }
    }
    once_free(resp);
    return rv;
}

#define FREE(m) protobuf_c_message_free_unpacked(&(m)->base, NULL)

/* Test 5: an open grant and its credential survive failover: the same
 * signing key on the new leader, the surface still owned, a retried
 * RequestGrant (same rpc id, and a new one) answers the same grant. */
static void
test_grant_survives_failover(void **state)
{
    fixture *f = *state;
    Once__V1__SetPlacementRequest pr = ONCE__V1__SET_PLACEMENT_REQUEST__INIT;
    Once__V1__SetPlacementResponse *pl;
    Once__V1__RequestGrantRequest rq = ONCE__V1__REQUEST_GRANT_REQUEST__INIT;
    Once__V1__RequestGrantResponse *g1, *g2, *g3;
    Once__V1__GetSurfaceRequest sr = ONCE__V1__GET_SURFACE_REQUEST__INIT;
    Once__V1__GetSurfaceResponse *sv;
    uint8_t pk1[ONCE_GRANT_PUBLIC_KEY_BYTES], pk2[ONCE_GRANT_PUBLIC_KEY_BYTES];
    once_grant_credential cred;
    once_client *c = NULL, *r = NULL;
    once_status st;
    once_rpc_id id = {0, 0};
    int64_t t0;
    int leader, next;

    assert_int_equal(open_client(f->rs->urls, false, &c), ONCE_OK);
    assert_int_equal(once_grants_public_key(c, pk1, &st), ONCE_OK);
    pr.surface = "s";
    pr.machine = "m1";
    pr.location = "/w";
    assert_int_equal(gcall(c, "SetPlacement", true, &pr, &pl, NULL), ONCE_OK);
    rq.request_id = "r1";
    rq.attempt = 1;
    rq.surface = "s";
    rq.machine = "m1";
    rq.location = "/w";
    rq.generation = pl->generation;
    rq.payload.data = (uint8_t *)"x";
    rq.payload.len = 1;
    rq.credential_ttl_ms = 600000;
    FREE(pl);
    assert_int_equal(gcall(c, "RequestGrant", true, &rq, &g1, &id), ONCE_OK);
    assert_non_null(g1->grant);
    assert_non_null(g1->credential);

    assert_true((leader = replicas_leader(f->rs, -1, 30000)) >= 0);
    t0 = harness_now_ms();
    replicas_kill(f->rs, leader, SIGKILL);
    /* The same key: the credential minted before verifies after. The
     * first call answered after the kill shows the failover time. */
    assert_int_equal(once_grants_public_key(c, pk2, &st), ONCE_OK);
    printf("failover: SIGKILL of the leader to the first answered call: "
           "%lld ms (etcd lease TTL %d s)\n",
           (long long)(harness_now_ms() - t0), TTL_S);
    assert_true((next = replicas_leader(f->rs, leader, 30000)) >= 0);
    assert_int_not_equal(next, leader);
    assert_memory_equal(pk1, pk2, sizeof(pk1));
    assert_int_equal(
        once_grant_credential_verify(
            pk2, g1->credential->body.data, g1->credential->body.len,
            g1->credential->signature.data, g1->credential->signature.len,
            (uint64_t)time(NULL) * 1000, 0, &cred, &st),
        ONCE_OK);
    assert_int_equal(cred.grant_id, g1->grant->grant_id);
    /* The surface is still owned by the grant. */
    sr.surface = "s";
    assert_int_equal(gcall(c, "GetSurface", false, &sr, &sv, NULL), ONCE_OK);
    assert_non_null(sv->open_grant);
    assert_int_equal(sv->open_grant->grant_id, g1->grant->grant_id);
    FREE(sv);
    /* A retry of the same rpc id (as after a lost reply: a handle without
     * a lease of its own sends exactly that id): its stored result. */
    assert_int_equal(open_client(f->rs->urls, true, &r), ONCE_OK);
    assert_int_equal(gcall(r, "RequestGrant", true, &rq, &g2, &id), ONCE_OK);
    assert_int_equal(g2->grant->grant_id, g1->grant->grant_id);
    once_client_close(r);
    /* The same request under a new rpc id: the same grant, existing. */
    assert_int_equal(gcall(c, "RequestGrant", true, &rq, &g3, NULL), ONCE_OK);
    assert_true(g3->existing);
    assert_int_equal(g3->grant->grant_id, g1->grant->grant_id);
    assert_int_equal(g3->grant->epoch, g1->grant->epoch);
    FREE(g1);
    FREE(g2);
    FREE(g3);
    once_client_close(c);
    assert_int_equal(replicas_restart(f->rs, leader), 0);
}

/* KV: a Txn's keys, versions and revision and its completion record ride
 * the same log entry; after the leader is killed, the new leader serves
 * the same keys and revision, replays the Txn under its rpc id (the first
 * answer, though the key moved since), and a CAS on the old version goes
 * on from there. */
static void
kv_range_one(once_client *c, const char *key, char *val, size_t cap,
             uint64_t *version, uint64_t *revision)
{
    once_kv_range *r = NULL;
    once_status st;
    once_kv kv;

    assert_int_equal(
        once_kv_range_get(c, key, strlen(key), false, 0, NULL, 0, &r, &st),
        ONCE_OK);
    assert_int_equal(once_kv_range_count(r), 1);
    assert_int_equal(once_kv_range_at(r, 0, &kv), ONCE_OK);
    snprintf(val, cap, "%.*s", (int)kv.value_len, (const char *)kv.value);
    *version = kv.version;
    *revision = once_kv_range_revision(r);
    once_kv_range_free(r);
}

static void
test_kv_survives_failover(void **state)
{
    fixture *f = *state;
    once_client *c = NULL, *r = NULL, *x = NULL;
    once_kv_txn *t, *t2, *cas;
    once_kv_result res;
    once_rpc_id id = {0, 0}, id2 = {0, 0};
    once_status st;
    uint64_t ver, rev, ver2, rev2;
    char val[32];
    int leader, next;

    assert_int_equal(open_client(f->rs->urls, false, &c), ONCE_OK);
    /* The Txn's own handle makes no later call: nothing acknowledges its
     * id away before the resend. */
    assert_int_equal(open_client(f->rs->urls, false, &x), ONCE_OK);
    assert_int_equal(once_kv_txn_new(&t), ONCE_OK);
    once_kv_txn_compare_absent(t, "jobs/1", 6);
    once_kv_txn_put(t, ONCE_KV_THEN, "jobs/1", 6, "queued", 6, false);
    once_kv_txn_get(t, ONCE_KV_THEN, "jobs/1", 6);
    assert_int_equal(once_kv_txn_exec(x, t, &id, &st), ONCE_OK);
    assert_true(once_kv_txn_succeeded(t));
    once_client_close_keep_lease(x, NULL);
    kv_range_one(c, "jobs/1", val, sizeof(val), &ver, &rev);

    assert_true((leader = replicas_leader(f->rs, -1, 30000)) >= 0);
    replicas_kill(f->rs, leader, SIGKILL);
    assert_true((next = replicas_leader(f->rs, leader, 30000)) >= 0);
    assert_int_not_equal(next, leader);
    kv_range_one(c, "jobs/1", val, sizeof(val), &ver2, &rev2);
    assert_string_equal(val, "queued");
    assert_int_equal(ver2, ver);
    assert_int_equal(rev2, rev);
    /* The key moves on, then the first Txn is resent under its id from a
     * lease-less handle: the first answer, nothing applied again. */
    assert_int_equal(once_kv_txn_new(&cas), ONCE_OK);
    once_kv_txn_compare_version(cas, "jobs/1", 6, ONCE_KV_EQUAL, ver);
    once_kv_txn_put(cas, ONCE_KV_THEN, "jobs/1", 6, "running", 7, false);
    assert_int_equal(once_kv_txn_exec(c, cas, &id2, &st), ONCE_OK);
    assert_true(once_kv_txn_succeeded(cas));
    assert_int_equal(once_kv_txn_revision(cas), rev + 1);
    assert_int_equal(open_client(f->rs->urls, true, &r), ONCE_OK);
    assert_int_equal(once_kv_txn_new(&t2), ONCE_OK);
    once_kv_txn_compare_absent(t2, "jobs/1", 6);
    once_kv_txn_put(t2, ONCE_KV_THEN, "jobs/1", 6, "queued", 6, false);
    once_kv_txn_get(t2, ONCE_KV_THEN, "jobs/1", 6);
    assert_int_equal(once_kv_txn_exec(r, t2, &id, &st), ONCE_OK);
    assert_true(st.replayed);
    assert_true(once_kv_txn_succeeded(t2));
    assert_int_equal(once_kv_txn_revision(t2), rev);
    assert_int_equal(once_kv_txn_result(t2, 1, &res), ONCE_OK);
    assert_int_equal(res.value_len, 6);
    assert_memory_equal(res.value, "queued", 6);
    kv_range_one(c, "jobs/1", val, sizeof(val), &ver2, &rev2);
    assert_string_equal(val, "running");
    assert_int_equal(rev2, rev + 1);
    once_kv_txn_free(t);
    once_kv_txn_free(t2);
    once_kv_txn_free(cas);
    once_client_close(r);
    once_client_close(c);
    assert_int_equal(replicas_restart(f->rs, leader), 0);
}

/* test_outbox_survives_failover: the events, the consumer's side. */
#define OB_EVENTS 60 /* produced in all */
#define OB_BATCH  4  /* events per Read */

typedef struct ob_consumer {
    const char *urls;
    pthread_t thread;
    pthread_mutex_t mtx; /* protects the fields below */
    uint64_t applied;    /* the last offset applied (the "receiver's row") */
    char payloads[OB_EVENTS + 1][16]; /* what offset i carried */
    uint64_t redelivered;             /* events at or below applied, skipped */
    char error[256];
    atomic_bool done;
} ob_consumer;

/* The receiver's callback, pattern 1 of docs/outbox.md: the offset is kept
 * with the effect, so an event at or below it is skipped; the next one
 * must be applied + 1. */
static int
ob_apply(void *arg, const once_outbox_event *ev)
{
    ob_consumer *oc = arg;
    int step = ONCE_CONSUMER_NEXT;

    pthread_mutex_lock(&oc->mtx);
    if (ev->offset <= oc->applied) {
        oc->redelivered++;
    } else if (ev->offset != oc->applied + 1 || ev->offset > OB_EVENTS ||
               ev->payload_len >= sizeof(oc->payloads[0])) {
        snprintf(oc->error, sizeof(oc->error),
                 "offset %llu after %llu (payload %zu bytes)",
                 (unsigned long long)ev->offset,
                 (unsigned long long)oc->applied, ev->payload_len);
        step = -1;
    } else {
        memcpy(oc->payloads[ev->offset], ev->payload, ev->payload_len);
        oc->applied = ev->offset;
        step =
            oc->applied == OB_EVENTS ? ONCE_CONSUMER_STOP : ONCE_CONSUMER_NEXT;
    }
    pthread_mutex_unlock(&oc->mtx);
    return step;
}

static uint64_t
ob_applied(ob_consumer *oc)
{
    pthread_mutex_lock(&oc->mtx);
    uint64_t n = oc->applied;
    pthread_mutex_unlock(&oc->mtx);
    return n;
}

/* The consumer's thread: runs the receiver loop until every event is
 * applied, starting it again after a failed call (a failover), for at most
 * 120 s. */
static void *
ob_consume(void *arg)
{
    ob_consumer *oc = arg;
    once_client *c = NULL;
    once_status st;
    int64_t until = harness_now_ms() + 120000;
    int rv = ONCE_UNAVAILABLE;

    if (open_client(oc->urls, false, &c) != ONCE_OK) {
        snprintf(oc->error, sizeof(oc->error), "no client");
    }
    while (c != NULL && rv != ONCE_OK && oc->error[0] == '\0' &&
           harness_now_ms() < until) {
        /* the long-poll stays below the handle's 1 s attempt timeout */
        rv = once_consumer_run(c, "jobs", "billing", OB_BATCH, 300, ob_apply,
                               oc, &st);
    }
    if (rv != ONCE_OK && oc->error[0] == '\0') {
        snprintf(oc->error, sizeof(oc->error), "consumer: %s %.60s %.120s",
                 once_strerror(rv), st.reason, st.message);
    }
    once_client_close(c);
    atomic_store(&oc->done, true);
    return NULL;
}

/* Event i: a Txn that puts ev/i and emits "ev-i" on topic jobs. */
static void
ob_produce(once_client *c, int i)
{
    once_kv_txn *t;
    once_status st;
    char key[16], val[16];

    snprintf(key, sizeof(key), "ev/%d", i);
    snprintf(val, sizeof(val), "ev-%d", i);
    assert_int_equal(once_kv_txn_new(&t), ONCE_OK);
    once_kv_txn_put(t, ONCE_KV_THEN, key, strlen(key), val, strlen(val), false);
    once_kv_txn_emit(t, ONCE_KV_THEN, "jobs", val, strlen(val));
    assert_int_equal(once_kv_txn_exec(c, t, NULL, &st), ONCE_OK);
    once_kv_txn_free(t);
}

/*
 * A consumer reading across a leader SIGKILL: events are produced by KV
 * Txns through every replica's URL while a receiver thread reads them
 * OB_BATCH at a time; the leader is SIGKILLed once the receiver applied a
 * third of them. The receiver applies offsets 1..OB_EVENTS exactly, each
 * with its Txn's payload (a Txn resent across the failover emits once), it
 * is given again at most one unacknowledged batch (the cursor rode the log:
 * a cursor lost with the leader gives back everything before the kill),
 * and Topics on the new leader says head OB_EVENTS, the consumer acked
 * there.
 */
static void
test_outbox_survives_failover(void **state)
{
    fixture *f = *state;
    ob_consumer oc = {.urls = f->rs->urls};
    once_client *c = NULL;
    once_outbox_topics_list *l = NULL;
    once_outbox_topic_info ti;
    once_outbox_consumer_info ci;
    once_status st;
    int leader, next, topic = -1;
    bool killed = false;

    pthread_mutex_init(&oc.mtx, NULL);
    assert_int_equal(open_client(f->rs->urls, false, &c), ONCE_OK);
    assert_int_equal(
        once_outbox_subscribe(c, "jobs", "billing", NULL, NULL, &st), ONCE_OK);
    assert_int_equal(pthread_create(&oc.thread, NULL, ob_consume, &oc), 0);
    assert_true((leader = replicas_leader(f->rs, -1, 30000)) >= 0);
    /* The kill while both sides run: once a third is applied (at the
     * latest after three quarters are produced). */
    for (int i = 1; i <= OB_EVENTS; i++) {
        ob_produce(c, i);
        if (!killed &&
            (ob_applied(&oc) >= OB_EVENTS / 3 || i == OB_EVENTS * 3 / 4)) {
            replicas_kill(f->rs, leader, SIGKILL);
            killed = true;
            print_message("  leader %d SIGKILLed after %d events produced, "
                          "%llu applied\n",
                          leader, i, (unsigned long long)ob_applied(&oc));
        }
    }
    assert_int_equal(pthread_join(oc.thread, NULL), 0);
    print_message("  applied %llu of %d, %llu given again; %s\n",
                  (unsigned long long)oc.applied, OB_EVENTS,
                  (unsigned long long)oc.redelivered,
                  oc.error[0] != '\0' ? oc.error : "no error");
    assert_string_equal(oc.error, "");
    assert_int_equal(oc.applied, OB_EVENTS);
    for (int k = 1; k <= OB_EVENTS; k++) {
        char want[16];

        snprintf(want, sizeof(want), "ev-%d", k);
        assert_string_equal(oc.payloads[k], want);
    }
    assert_true(oc.redelivered <= OB_BATCH);
    assert_true((next = replicas_leader(f->rs, leader, 30000)) >= 0);
    assert_int_equal(once_outbox_topics(c, &l, &st), ONCE_OK);
    for (size_t k = 0; k < once_outbox_topics_count(l); k++) {
        assert_int_equal(once_outbox_topics_at(l, k, &ti), ONCE_OK);
        topic = strcmp(ti.name, "jobs") == 0 ? (int)k : topic;
    }
    assert_true(topic >= 0); /* beside it: once.system */
    assert_int_equal(once_outbox_topics_at(l, (size_t)topic, &ti), ONCE_OK);
    assert_int_equal(ti.head, OB_EVENTS);
    assert_int_equal(ti.nconsumers, 1);
    assert_int_equal(once_outbox_topics_consumer(l, (size_t)topic, 0, &ci),
                     ONCE_OK);
    assert_int_equal(ci.acked, OB_EVENTS);
    once_outbox_topics_free(l);
    once_client_close(c);
    pthread_mutex_destroy(&oc.mtx);
    assert_int_equal(replicas_restart(f->rs, leader), 0);
}

/* Waits (at most ms) until cid's lease info satisfies done; the last info
 * into *li. */
static bool
wait_lease(once_client *c, uint64_t cid,
           bool (*done)(const struct once_lease_info *),
           struct once_lease_info *li, int ms)
{
    int64_t until = harness_now_ms() + ms;
    once_status st;

    do {
        if (once_lease_info(c, cid, li, &st) == ONCE_OK && done(li)) {
            return true;
        }
        harness_sleep_ms(50);
    } while (harness_now_ms() < until);
    return false;
}

static bool
acked_and_reclaimed(const struct once_lease_info *li)
{
    return li->watermark_durable >= 10 && li->records_retained <= 1;
}

static bool
collected(const struct once_lease_info *li)
{
    return li->state == ONCE_LEASE_STATE_COLLECTED;
}

/* What test 6 expects of whichever replica leads: A's acknowledgements
 * durable (a retry below the watermark is STALE_RPC), B's lease expired
 * and collected (its calls LEASE_EXPIRED, nothing re-executed), the
 * counter `count`. */
static void
expect_lifecycle(const char *urls, uint64_t a, uint64_t b, int64_t count)
{
    once_client *r = NULL;
    struct once_lease_info li;
    once_status st;
    int64_t v;

    assert_int_equal(open_client(urls, true, &r), ONCE_OK);
    assert_int_equal(once_lease_info(r, a, &li, &st), ONCE_OK);
    assert_int_equal(li.state, ONCE_LEASE_STATE_LIVE);
    assert_true(li.watermark_durable >= 10);
    assert_true(li.records_retained <= 1);
    assert_int_equal(harness_incr_id(r, "c", 1, a, 1, &v, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "STALE_RPC");
    assert_int_equal(once_lease_info(r, b, &li, &st), ONCE_OK);
    assert_int_equal(li.state, ONCE_LEASE_STATE_COLLECTED);
    assert_int_equal(harness_incr_id(r, "c", 1, b, 1, &v, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "LEASE_EXPIRED");
    assert_int_equal(harness_incr_id(r, "c", 1, b, 4, &v, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_int_equal(once_counter_get(r, "c", &v, &st), ONCE_OK);
    assert_int_equal(v, count);
    once_client_close(r);
}

/* Test 6: acknowledgements, lease expiry and collection as in the
 * embedded mode, on each replica that leads in turn. */
static void
test_acks_expiry_collection_replicated(void **state)
{
    fixture *f = *state;
    struct once_lease_info li;
    once_client *c = NULL;
    once_status st;
    uint64_t a, b, ttl = 0;
    int64_t v = -1, count = 0;

    assert_int_equal(open_client(f->rs->urls, false, &c), ONCE_OK);
    a = once_client_id(c);
    for (int i = 0; i < 11; i++) {
        once_rpc_id id = {0, 0};
        assert_int_equal(once_counter_incr(c, "c", 1, &id, &v, &st), ONCE_OK);
        count++;
    }
    /* Client B: a short lease, three calls, never renewed. */
    assert_int_equal(once_lease_open(c, NULL, 1000, &b, &ttl, &st), ONCE_OK);
    for (uint64_t seq = 1; seq <= 3; seq++) {
        assert_int_equal(harness_incr_id(c, "c", 1, b, seq, &v, &st), ONCE_OK);
        count++;
    }
    assert_true(wait_lease(c, a, acked_and_reclaimed, &li, 30000));
    assert_true(wait_lease(c, b, collected, &li, 30000));

    for (int k = 0; k < 2; k++) {
        int leader = replicas_leader(f->rs, -1, 30000), next;

        assert_true(leader >= 0);
        expect_lifecycle(f->rs->urls, a, b, count);
        replicas_kill(f->rs, leader, SIGKILL);
        next = replicas_leader(f->rs, leader, 30000);
        if (next < 0) {
            replicas_dump(f->rs);
            fail_msg("no replica took over");
        }
        /* A's lease lives on (a fresh TTL), its next call runs once. */
        {
            once_rpc_id id = {0, 0};
            assert_int_equal(once_counter_incr(c, "c", 1, &id, &v, &st),
                             ONCE_OK);
            count++;
            assert_int_equal(v, count);
        }
        assert_true(wait_lease(c, a, acked_and_reclaimed, &li, 30000));
    }
    expect_lifecycle(f->rs->urls, a, b, count);
    once_client_close(c);
}

/* A replica that applied entries refuses an etcd that does not hold them
 * (another cluster, or a wiped one): following it would diverge. */
static void
test_replica_refuses_other_etcd(void **state)
{
    fixture *f = *state;
    load *l = load_start(f->rs->urls, 5);
    etcd_cluster *other = NULL, *mine = f->rs->etcd;
    int leader, i, status;

    load_finish(l, f);
    assert_true((leader = replicas_leader(f->rs, -1, 30000)) >= 0);
    i = (leader + 1) % 3;
    replicas_kill(f->rs, i, SIGKILL);
    assert_int_equal(etcd_cluster_start(&other, 1), 0);
    f->rs->etcd = other; /* replica i restarts on the empty etcd */
    /* It may answer NO_LEADER for a moment before it reads etcd: its
     * restart's own wait says nothing; its exit does. */
    (void)replicas_restart(f->rs, i);
    f->rs->etcd = mine;
    status = replicas_wait_exit(f->rs, i, 30000);
    if (status == -1 ||
        !replicas_log_has(f->rs, i, "refusing to follow a different log")) {
        replicas_dump(f->rs);
        fail_msg("replica %d followed an etcd without its entries", i);
    }
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    etcd_cluster_free(other);
    assert_int_equal(replicas_restart(f->rs, i), 0);
}

/* A group commit larger than one etcd request (here one Enqueue carrying
 * a 900 KB input, kept in its row and in its completion record) is written
 * as several log keys and still applied as one batch: after a failover the
 * row and the record are there, whole. */
static void
test_large_entry_split(void **state)
{
    fixture *f = *state;
    Once__V1__SetPlacementRequest pr = ONCE__V1__SET_PLACEMENT_REQUEST__INIT;
    Once__V1__SetPlacementResponse *pl;
    Once__V1__EnqueueRequest rq = ONCE__V1__ENQUEUE_REQUEST__INIT;
    Once__V1__EnqueueResponse *w1, *w2;
    size_t big = 900000;
    uint8_t *payload = malloc(big);
    once_client *c = NULL, *r = NULL;
    once_rpc_id id = {0, 0};
    etcd *e = NULL;
    etcd_kv *kvs = NULL;
    size_t n = 0;
    bool parts = false;
    char prefix[128], end[128];
    int leader, down;

    assert_non_null(payload);
    memset(payload, 'p', big);
    assert_int_equal(open_client(f->rs->urls, false, &c), ONCE_OK);
    pr.surface = "big";
    pr.machine = "m1";
    pr.location = "/w";
    assert_int_equal(gcall(c, "SetPlacement", true, &pr, &pl, NULL), ONCE_OK);
    FREE(pl);
    /* A follower down holds the log back from trimming (its published
     * index stays behind), so the parts are still there to look at. */
    assert_true((leader = replicas_leader(f->rs, -1, 30000)) >= 0);
    down = (leader + 1) % 3;
    replicas_kill(f->rs, down, SIGKILL);
    rq.request_id = "r-big";
    rq.attempt = 1;
    rq.surface = "big";
    rq.payload.data = payload;
    rq.payload.len = big;
    assert_int_equal(gcall(c, "Enqueue", true, &rq, &w1, &id), ONCE_OK);
    assert_non_null(w1->row);

    /* The log holds parts ('P' ... 'L'). */
    snprintf(prefix, sizeof(prefix), "/once/%s/log/", f->rs->name);
    snprintf(end, sizeof(end), "/once/%s/log0", f->rs->name);
    assert_int_equal(etcd_cluster_client(f->etcd, 5000, &e), 0);
    assert_int_equal(etcd_range(e, prefix, strlen(prefix), end, strlen(end), 0,
                                &kvs, &n, NULL, NULL),
                     0);
    for (size_t i = 0; i < n; i++) {
        parts = parts || (kvs[i].vlen > 0 && kvs[i].val[0] == 'P');
    }
    etcd_kvs_free(kvs, n);
    etcd_close(e);
    assert_true(parts);
    /* It applies the parts as one batch when it returns. */
    assert_int_equal(replicas_restart(f->rs, down), 0);

    assert_true((leader = replicas_leader(f->rs, -1, 30000)) >= 0);
    replicas_kill(f->rs, leader, SIGKILL);
    assert_true(replicas_leader(f->rs, leader, 30000) >= 0);
    /* The same rpc id: the stored result, the whole input in it. */
    assert_int_equal(open_client(f->rs->urls, true, &r), ONCE_OK);
    assert_int_equal(gcall(r, "Enqueue", true, &rq, &w2, &id), ONCE_OK);
    assert_int_equal(w2->row->work_id, w1->row->work_id);
    assert_int_equal(w2->row->payload.len, big);
    assert_memory_equal(w2->row->payload.data, payload, big);
    FREE(w1);
    FREE(w2);
    once_client_close(r);
    once_client_close(c);
    free(payload);
    assert_int_equal(replicas_restart(f->rs, leader), 0);
}

/* ---- libonce steering (steer.h) and the followers' responder ---------- */

#define STEER_CLIENTS 8
#define STEER_CALLS   10 /* calls of each client per phase */

typedef struct steer_client {
    load *l;           /* values and the first error */
    once_client *c;    /* this client's handle */
    int calls;         /* phase 1: this many calls, then return */
    atomic_int done;   /* calls answered so far */
    atomic_bool *stop; /* phase 2: call until set */
    pthread_t thread;
} steer_client;

static void *
steer_worker(void *arg)
{
    steer_client *sc = arg;

    for (int i = 0; sc->stop != NULL ? !atomic_load(sc->stop) : i < sc->calls;
         i++) {
        load_call(sc->l, sc->c);
        atomic_fetch_add(&sc->done, 1);
        if (sc->l->error[0] != '\0') {
            break;
        }
    }
    return NULL;
}

/* Every replica's URL (tls: its tls+tcp:// one), comma-separated, the
 * leader's last, into buf. */
static void
urls_leader_last(const fixture *f, int leader, bool tls, char *buf, size_t len)
{
    size_t off = 0;

    buf[0] = '\0';
    for (int k = 0; k <= f->rs->n; k++) {
        int i = k < f->rs->n ? k : leader; /* the leader at the end */

        if (k < f->rs->n && i == leader) {
            continue;
        }
        off += (size_t)snprintf(buf + off, off < len ? len - off : 0, "%s%s",
                                off > 0 ? "," : "",
                                tls ? f->rs->tls_url[i] : f->rs->url[i]);
    }
}

/* Replica i's refusal names url as the leader (Status.leader). */
static bool
names_leader(const char *url_i, const char *url)
{
    uint8_t *req = NULL;
    size_t len = 0;
    Once__V1__Response *r = NULL;
    bool yes;

    if (harness_envelope("/once.v1.Admin/Stats", 0, 0, NULL, 0, &req, &len) !=
            0 ||
        harness_raw_rpc(url_i, req, len, &r, 1000) != 0) {
        free(req);
        return false;
    }
    yes = r->status != NULL && r->status->leader != NULL &&
          strcmp(r->status->leader, url) == 0;
    once__v1__response__free_unpacked(r, NULL);
    free(req);
    return yes;
}

/* Test 9: N clients given the three URLs with the leader LAST reach it
 * after at most one NOT_LEADER each (followed: the target is the leader);
 * after the leader is SIGKILLed, each reaches the new leader after at most
 * one more once the followers name it; values exactly {1..N}. */
static void
test_steer_leader_last(void **state)
{
    fixture *f = *state;
    load *l = calloc(1, sizeof(*l));
    steer_client sc[STEER_CLIENTS];
    once_route r1[STEER_CLIENTS], r2[STEER_CLIENTS];
    atomic_bool stop = false;
    char urls[1000] = "";
    int leader, next, other = -1;
    once_client *c = NULL;
    once_status st;
    int64_t counter = -1, until;

    assert_non_null(l);
    pthread_mutex_init(&l->mtx, NULL);
    assert_true((leader = replicas_leader(f->rs, -1, 30000)) >= 0);
    urls_leader_last(f, leader, false, urls, sizeof(urls));

    /* Phase 1: leader last. */
    memset(sc, 0, sizeof(sc));
    for (int i = 0; i < STEER_CLIENTS; i++) {
        sc[i].l = l;
        sc[i].calls = STEER_CALLS;
        assert_int_equal(open_client(urls, false, &sc[i].c), ONCE_OK);
        assert_int_equal(
            pthread_create(&sc[i].thread, NULL, steer_worker, &sc[i]), 0);
    }
    for (int i = 0; i < STEER_CLIENTS; i++) {
        pthread_join(sc[i].thread, NULL);
    }
    if (l->error[0] != '\0') {
        replicas_dump(f->rs);
        fail_msg("%s", l->error);
    }
    for (int i = 0; i < STEER_CLIENTS; i++) {
        assert_int_equal(once_client_route(sc[i].c, &r1[i]), ONCE_OK);
        fprintf(stderr,
                "client %d: %d calls, NOT_LEADER %llu, followed %llu, "
                "target %s\n",
                i, STEER_CALLS + 1, (unsigned long long)r1[i].not_leader,
                (unsigned long long)r1[i].hints_followed, r1[i].url);
        /* The OpenLease and STEER_CALLS increments: one bounce at most. */
        assert_true(r1[i].not_leader <= 1);
        assert_string_equal(r1[i].url, f->rs->url[leader]);
        assert_int_equal(r1[i].index, f->rs->n - 1);
    }

    /* Phase 2: the leader SIGKILLed under load. */
    for (int i = 0; i < STEER_CLIENTS; i++) {
        atomic_store(&sc[i].done, 0);
        sc[i].stop = &stop;
        assert_int_equal(
            pthread_create(&sc[i].thread, NULL, steer_worker, &sc[i]), 0);
    }
    load_wait_progress(l, load_count(l), STEER_CLIENTS, 30000);
    replicas_kill(f->rs, leader, SIGKILL);
    next = replicas_leader(f->rs, leader, 30000);
    for (int i = 0; i < f->rs->n; i++) {
        if (i != leader && i != next) {
            other = i;
        }
    }
    /* Once the remaining follower names the new leader, nothing stale is
     * left to bounce off: count from here. */
    until = harness_now_ms() + 30000;
    while (next >= 0 && !names_leader(f->rs->url[other], f->rs->url[next]) &&
           harness_now_ms() < until) {
        harness_sleep_ms(20);
    }
    for (int i = 0; i < STEER_CLIENTS; i++) {
        once_client_route(sc[i].c, &r1[i]);
        atomic_store(&sc[i].done, 0);
    }
    /* STEER_CALLS more calls of every client from there. */
    until = harness_now_ms() + 60000;
    for (int i = 0; i < STEER_CLIENTS && harness_now_ms() < until; i++) {
        while (atomic_load(&sc[i].done) < STEER_CALLS && l->error[0] == '\0' &&
               harness_now_ms() < until) {
            harness_sleep_ms(20);
        }
    }
    atomic_store(&stop, true);
    for (int i = 0; i < STEER_CLIENTS; i++) {
        pthread_join(sc[i].thread, NULL);
    }
    if (next < 0 || l->error[0] != '\0') {
        replicas_dump(f->rs);
        fail_msg("new leader %d; %s", next, l->error);
    }
    for (int i = 0; i < STEER_CLIENTS; i++) {
        assert_int_equal(once_client_route(sc[i].c, &r2[i]), ONCE_OK);
        fprintf(
            stderr,
            "client %d after the failover: %d calls, NOT_LEADER %llu, "
            "followed %llu, ignored %llu, rotations %llu, target %s\n",
            i, atomic_load(&sc[i].done),
            (unsigned long long)(r2[i].not_leader - r1[i].not_leader),
            (unsigned long long)(r2[i].hints_followed - r1[i].hints_followed),
            (unsigned long long)r2[i].hints_ignored,
            (unsigned long long)r2[i].rotations, r2[i].url);
        assert_true(atomic_load(&sc[i].done) >= STEER_CALLS);
        /* One bounce, plus one reply the follower sent before it named the
         * new leader that this client counted after the snapshot. */
        assert_true(r2[i].not_leader - r1[i].not_leader <= 2);
        assert_string_equal(r2[i].url, f->rs->url[next]);
        once_client_close(sc[i].c);
    }

    /* Exactly {1..N}: no rpc id ran twice across the failover. */
    qsort(l->values, l->n, sizeof(l->values[0]), cmp_i64);
    for (size_t i = 0; i < l->n; i++) {
        if (l->values[i] != (int64_t)i + 1) {
            fail_msg("value %zu is %lld, not %zu", i, (long long)l->values[i],
                     i + 1);
        }
    }
    assert_int_equal(open_client(f->rs->urls, true, &c), ONCE_OK);
    assert_int_equal(once_counter_get(c, "c", &counter, &st), ONCE_OK);
    once_client_close(c);
    assert_int_equal(counter, (int64_t)l->n);
    pthread_mutex_destroy(&l->mtx);
    free(l);
    assert_int_equal(replicas_restart(f->rs, leader), 0);
}

/* utime + stime of pid, in clock ticks. */
static long long
proc_cpu_ticks(pid_t pid)
{
    char path[64], buf[2048];
    unsigned long long ut = 0, stt = 0;
    FILE *fp;
    char *p;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((fp = fopen(path, "r")) == NULL) {
        return -1;
    }
    buf[fread(buf, 1, sizeof(buf) - 1, fp)] = '\0';
    fclose(fp);
    /* Fields 14 and 15, counted after the ")" that ends the name. */
    if ((p = strrchr(buf, ')')) == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
               &ut, &stt) != 2) {
        return -1;
    }
    return (long long)(ut + stt);
}

#define HANGUP_PEERS  64
#define HANGUP_ROUNDS 4
#define HANGUP_SENDS  16

/* Test 10: a follower's NOT_LEADER responder with 64 clients at once that
 * send and hang up without reading, several times over: every later
 * client is still answered at once, and the idle follower does not spin
 * (its CPU over 2 s, printed; nng 1.5.2 re-armed hung-up ipc pipes that
 * rep0 had stopped reading). */
static void
test_follower_hangups(void **state)
{
    fixture *f = *state;
    int leader, fol = -1;
    uint8_t *req = NULL;
    size_t len = 0;
    long long t0, t1;
    int64_t w0, w1;
    Once__V1__Response *r = NULL;

    assert_true((leader = replicas_leader(f->rs, -1, 30000)) >= 0);
    fol = (leader + 1) % f->rs->n;
    assert_int_equal(
        harness_envelope("/once.v1.Admin/Stats", 0, 0, NULL, 0, &req, &len), 0);
    for (int round = 0; round < HANGUP_ROUNDS; round++) {
        nng_socket socks[HANGUP_PEERS];

        for (int i = 0; i < HANGUP_PEERS; i++) {
            assert_int_equal(nng_req0_open(&socks[i]), 0);
            assert_int_equal(nng_dial(socks[i], f->rs->url[fol], NULL, 0), 0);
            /* Each send abandons the request before it (REQ): the
             * follower gets them all, the peer reads none. */
            for (int k = 0; k < HANGUP_SENDS; k++) {
                assert_int_equal(nng_send(socks[i], req, len, 0), 0);
            }
        }
        for (int i = 0; i < HANGUP_PEERS; i++) {
            nng_close(socks[i]);
        }
    }
    /* Answered, with the leader's URL. */
    assert_int_equal(harness_raw_rpc(f->rs->url[fol], req, len, &r, 5000), 0);
    assert_non_null(r->status);
    assert_string_equal(r->status->reason, "NOT_LEADER");
    once__v1__response__free_unpacked(r, NULL);
    /* Idle now: what does it burn? (Polling etcd every 20 ms costs a few
     * percent; a spinning poll thread a whole core.) */
    w0 = harness_now_ms();
    t0 = proc_cpu_ticks(f->rs->pid[fol]);
    harness_sleep_ms(2000);
    t1 = proc_cpu_ticks(f->rs->pid[fol]);
    w1 = harness_now_ms();
    assert_true(t0 >= 0 && t1 >= t0);
    fprintf(stderr, "idle follower after %d hang-ups: %.0f%% of a core\n",
            HANGUP_PEERS * HANGUP_ROUNDS,
            100.0 * (double)(t1 - t0) / (double)sysconf(_SC_CLK_TCK) /
                ((double)(w1 - w0) / 1000.0));
    /* A spin takes all the CPU it gets; even a loaded 2-core machine
     * gives a runnable thread more than this. */
    assert_true((double)(t1 - t0) / (double)sysconf(_SC_CLK_TCK) <
                0.25 * (double)(w1 - w0) / 1000.0);
    /* Still answering, with the leader's URL in Status.leader. */
    assert_int_equal(harness_raw_rpc(f->rs->url[fol], req, len, &r, 5000), 0);
    assert_non_null(r->status);
    assert_string_equal(r->status->leader, f->rs->url[leader]);
    once__v1__response__free_unpacked(r, NULL);
    free(req);
}

/* A follower under a service manager (NOTIFY_SOCKET, as systemd's
 * Type=notify sets it): READY=1 with a STATUS naming the leader once it
 * follows, WATCHDOG=1 while it follows, STOPPING=1 on SIGTERM. */
static void
test_follower_notifies(void **state)
{
    fixture *f = *state;
    notify_sock ns;
    char buf[1024], want[512];
    int leader, i, pings = 0;

    assert_true((leader = replicas_leader(f->rs, -1, 30000)) >= 0);
    i = (leader + 1) % f->rs->n;
    replicas_kill(f->rs, i, SIGTERM);
    assert_int_equal(notify_sock_open(&ns), 0);
    setenv("NOTIFY_SOCKET", ns.path, 1);
    setenv("WATCHDOG_USEC", "400000", 1);
    unsetenv("WATCHDOG_PID");
    assert_int_equal(replicas_restart(f->rs, i), 0);
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");

    assert_true(
        notify_sock_expect(&ns, "READY=1", 30000, &pings, buf, sizeof(buf)));
    fprintf(stderr, "follower %d told: %s\n", i, buf);
    snprintf(want, sizeof(want), "NOT_LEADER, the leader is %s",
             f->rs->url[leader]);
    assert_non_null(strstr(buf, "STATUS=following cluster"));
    assert_non_null(strstr(buf, want));
    pings = 0;
    for (int k = 0; k < 40 && pings < 3; k++) {
        if (notify_sock_recv(&ns, buf, sizeof(buf), 500) > 0 &&
            strstr(buf, "WATCHDOG=1") != NULL) {
            pings++;
        }
    }
    assert_true(pings >= 3);
    replicas_kill(f->rs, i, SIGTERM);
    assert_true(notify_sock_expect(&ns, "STOPPING=1", 10000, NULL, NULL, 0));
    notify_sock_close(&ns);
    assert_int_equal(replicas_restart(f->rs, i), 0);
}

/* ---- TLS to etcd (onced --etcd-cacert/--etcd-cert/--etcd-key) ----------- */

/* Test 1 with etcd's client port on TLS and client certificates required:
 * appends, the follower's watch and reads, the election and the
 * handover's lease renewal all go over https://. */
static void
test_leader_killed_over_tls(void **state)
{
    test_leader_killed_repeatedly(state);
}

/* etcd's refusal of a client, through repl/etcd.c: EAGAIN (no guess), and
 * a message that says what to check. */
static void
etcd_refuses(fixture *f, const char *cacert, const char *cert, const char *key,
             const char *says)
{
    etcd_tls tls = {cacert, cert, key};
    etcd *e = NULL;
    int64_t id = 0;

    assert_int_equal(etcd_open_tls(&e, f->etcd->endpoints, &tls, 2000), 0);
    assert_int_equal(etcd_lease_grant(e, 5, &id), EAGAIN);
    fprintf(stderr, "refused: %s\n", etcd_last_error(e));
    if (strstr(etcd_last_error(e), says) == NULL) {
        fail_msg("\"%s\" does not say \"%s\"", etcd_last_error(e), says);
    }
    etcd_close(e);
}

/* A client without a certificate, with one from another CA, or trusting
 * another CA is refused with a reason that names the option to fix; a
 * replica given another CA's certificate says so in its log, answers
 * UNAVAILABLE/ETCD_UNAVAILABLE, and the cluster keeps serving; given the
 * right one again it follows. */
static void
test_etcd_tls_refusals(void **state)
{
    fixture *f = *state;
    char other_ca[128], other_cert[128], other_key[128], cert[320], key[320];
    char urls[1000];
    int leader, i;
    once_client *c = NULL;
    once_status st;
    int64_t v = 0;
    once_rpc_id id = {0, 0};
    uint8_t *req = NULL;
    size_t len = 0;
    Once__V1__Response *r = NULL;

    snprintf(other_ca, sizeof(other_ca), "%s/other-ca.pem", f->certs);
    snprintf(other_cert, sizeof(other_cert), "%s/other-client.pem", f->certs);
    snprintf(other_key, sizeof(other_key), "%s/other-client.key", f->certs);
    etcd_refuses(f, f->etcd->cacert, NULL, NULL, "--etcd-cert and --etcd-key");
    etcd_refuses(f, f->etcd->cacert, other_cert, other_key,
                 "--etcd-cert signed by its --trusted-ca-file");
    etcd_refuses(f, other_ca, f->etcd->cert, f->etcd->key, "--etcd-cacert");

    /* A follower restarted with another CA's client certificate. */
    assert_true((leader = replicas_leader(f->rs, -1, 30000)) >= 0);
    i = (leader + 1) % f->rs->n;
    replicas_kill(f->rs, i, SIGTERM);
    snprintf(cert, sizeof(cert), "%s", f->etcd->cert);
    snprintf(key, sizeof(key), "%s", f->etcd->key);
    snprintf(f->etcd->cert, sizeof(f->etcd->cert), "%s", other_cert);
    snprintf(f->etcd->key, sizeof(f->etcd->key), "%s", other_key);
    assert_int_equal(replicas_restart(f->rs, i), 0);
    snprintf(f->etcd->cert, sizeof(f->etcd->cert), "%s", cert);
    snprintf(f->etcd->key, sizeof(f->etcd->key), "%s", key);
    if (!log_wait(f, i, "etcd refused the handshake", 30000)) {
        replicas_dump(f->rs);
        fail_msg("replica %d does not say etcd refused it", i);
    }
    assert_int_equal(
        harness_envelope("/once.v1.Admin/Stats", 0, 0, NULL, 0, &req, &len), 0);
    assert_int_equal(harness_raw_rpc(f->rs->url[i], req, len, &r, 2000), 0);
    assert_non_null(r->status);
    assert_int_equal(r->status->code, ONCE__V1__CODE__UNAVAILABLE);
    assert_string_equal(r->status->reason, "ETCD_UNAVAILABLE");
    once__v1__response__free_unpacked(r, NULL);
    free(req);
    /* The others serve meanwhile, to a client that asks this one first:
     * it knows no leader, so the client moves on to the next URL. */
    snprintf(urls, sizeof(urls), "%s,%s,%s", f->rs->url[i],
             f->rs->url[(i + 1) % f->rs->n], f->rs->url[(i + 2) % f->rs->n]);
    assert_int_equal(open_client(urls, false, &c), ONCE_OK);
    assert_int_equal(once_counter_incr(c, "c", 1, &id, &v, &st), ONCE_OK);
    assert_int_equal(v, 1);
    once_client_close(c);
    /* The right certificate again: it follows (and stops cleanly). */
    replicas_kill(f->rs, i, SIGTERM);
    assert_int_equal(replicas_restart(f->rs, i), 0);
    assert_true((leader = replicas_leader(f->rs, i, 30000)) >= 0);
    for (int64_t until = harness_now_ms() + 30000;
         !names_leader(f->rs->url[i], f->rs->url[leader]) &&
         harness_now_ms() < until;) {
        harness_sleep_ms(50);
    }
    assert_true(names_leader(f->rs->url[i], f->rs->url[leader]));
}

/* A client that speaks TLS to the replicas (tls+tcp:// URLs, the
 * followers first): the followers answer NOT_LEADER over TLS too, so it
 * reaches the leader by their answers, not by waiting out attempts. */
static void
test_tls_clients_find_leader(void **state)
{
    fixture *f = *state;
    char urls[400] = "", ca[128];
    once_options o;
    once_security sec;
    once_status st;
    once_route route;
    once_client *c = NULL;
    int64_t v = 0;
    int leader;

    assert_true((leader = replicas_leader(f->rs, -1, 30000)) >= 0);
    urls_leader_last(f, leader, true, urls, sizeof(urls));
    snprintf(ca, sizeof(ca), "%s/ca.pem", f->certs);
    once_options_init(&o);
    once_security_init(&sec);
    o.url = urls;
    o.deadline_ms = 60000;
    /* Longer than a follower's refusal ever takes, so a follower that
     * did not answer over TLS would show as a timeout, not a refusal. */
    o.attempt_timeout_ms = 20000;
    sec.tls_ca_file = ca;
    if (once_client_open_secure(&c, &o, &sec, &st) != ONCE_OK) {
        replicas_dump(f->rs);
        fail_msg("open %s: %s %s", urls, st.reason, st.message);
    }
    for (int k = 1; k <= 5; k++) {
        once_rpc_id id = {0, 0}; /* a new call each time */
        int rv = once_counter_incr(c, "c", 1, &id, &v, &st);

        if (rv != ONCE_OK) {
            replicas_dump(f->rs);
            fail_msg("call %d: %s %s %s", k, once_strerror(rv), st.reason,
                     st.message);
        }
        assert_int_equal(v, k);
    }
    assert_int_equal(once_client_route(c, &route), ONCE_OK);
    fprintf(stderr,
            "TLS client: NOT_LEADER %llu, followed %llu, rotations %llu, "
            "target %s\n",
            (unsigned long long)route.not_leader,
            (unsigned long long)route.hints_followed,
            (unsigned long long)route.rotations, route.url);
    /* The first follower refused over TLS (its hint names the advertised
     * ipc:// URL, not one of ours: the next URL then). */
    assert_true(route.not_leader >= 1);
    assert_string_equal(route.url, f->rs->tls_url[leader]);
    once_client_close(c);
}

/* Each test as cmocka runs it: its body, then a mark that it ran to the
 * end, which the teardown reads (a failed assertion leaves the body
 * before the mark, and the teardown then prints every log). */
#define CASE(fn)                                                               \
    static void fn##_case(void **state)                                        \
    {                                                                          \
        fn(state);                                                             \
        ((fixture *)*state)->passed = true;                                    \
    }
/* A table row under the test's own name (ONCE_TEST_FILTER matches it). */
#define RUN(fn, setup, teardown)                                               \
    {                                                                          \
#fn, fn##_case, setup, teardown, NULL                                  \
    }

CASE(test_leader_killed_repeatedly)
CASE(test_leader_stopped_past_lease)
CASE(test_etcd_members_lost)
CASE(test_wiped_replica_catches_up)
CASE(test_wiped_replica_seeds_authenticated)
CASE(test_log_trimmed_and_compacted)
CASE(test_lagging_replica_reseeds)
CASE(test_rolled_back_replica_reseeds)
CASE(test_cluster_restored_from_backup)
CASE(test_grant_survives_failover)
CASE(test_kv_survives_failover)
CASE(test_outbox_survives_failover)
CASE(test_acks_expiry_collection_replicated)
CASE(test_replica_refuses_other_etcd)
CASE(test_large_entry_split)
CASE(test_steer_leader_last)
CASE(test_follower_hangups)
CASE(test_follower_notifies)
CASE(test_leader_killed_over_tls)
CASE(test_etcd_tls_refusals)
CASE(test_tls_clients_find_leader)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        RUN(test_leader_killed_repeatedly, setup, teardown),
        RUN(test_leader_stopped_past_lease, setup, teardown),
        RUN(test_etcd_members_lost, setup, teardown),
        RUN(test_wiped_replica_catches_up, setup_retain, teardown),
        RUN(test_wiped_replica_seeds_authenticated, setup_auth, teardown_auth),
        RUN(test_log_trimmed_and_compacted, setup, teardown),
        RUN(test_lagging_replica_reseeds, setup_retain, teardown),
        RUN(test_rolled_back_replica_reseeds, setup, teardown),
        RUN(test_cluster_restored_from_backup, setup, teardown),
        RUN(test_grant_survives_failover, setup, teardown),
        RUN(test_kv_survives_failover, setup, teardown),
        RUN(test_outbox_survives_failover, setup, teardown),
        RUN(test_acks_expiry_collection_replicated, setup, teardown),
        RUN(test_replica_refuses_other_etcd, setup, teardown),
        RUN(test_large_entry_split, setup_ttl5, teardown),
        RUN(test_steer_leader_last, setup, teardown),
        RUN(test_follower_hangups, setup, teardown),
        RUN(test_follower_notifies, setup, teardown),
        RUN(test_leader_killed_over_tls, setup_tls, teardown),
        RUN(test_etcd_tls_refusals, setup_tls, teardown),
        RUN(test_tls_clients_find_leader, setup_tls, teardown),
    };
    if (getenv("ONCE_TEST_FILTER") != NULL) { /* e.g. "test_etcd*" */
        cmocka_set_test_filter(getenv("ONCE_TEST_FILTER"));
    }
    return harness_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
