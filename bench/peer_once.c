/*
 * peer_once.c — once itself, as bench_compare measures it: an onced of its
 * own (bench_onced_start: temp data dir, ipc path) and one once_client per
 * caller, each with its own connection and lease, as separate agents would
 * have.
 *
 * Two more rows share one handle among all callers, as a scheduler
 * process would: once-shared (N threads calling on one once_client) and
 * once-async (one thread keeping N once_counter_incr_async calls in flight
 * on one once_client). Their replay check is left out (replay_last NULL):
 * on a shared handle a caller's last id is acknowledged away by the other
 * callers' later calls, as it should be; test_async checks async replays.
 *
 * once-kv, once-kv-async, once-kv-replicated (--workload job,
 * job_row.h): the job transition as one once.v1.KV Txn — "the row is at
 * the version I read: put the new row, else get it" — whose rpc id is the
 * idempotency key: no key of its own to store or check. The Txn's
 * revision is the row's next version, so while nobody else moves the row
 * a transition is one round trip. Per-caller handles (once-kv, and
 * replicated), or one handle with N async Txns in flight (once-kv-async).
 *
 * Owns: the onced child and the clients. A call is once_counter_incr with
 * an rpc id the library assigns (client_id, seq): the stable per-call id.
 * Invariant: the reply of a call leaves onced only after the synced
 * LevelDB write that holds its effect and its completion record.
 * Never: re-sends a call under a new id.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <once/client.h>
#include <once/kv.h>

#include "bench/bench_env.h"
#include "bench/compare_peer.h"
#include "bench/job_row.h"
#include "tests/etcd_procs.h"

#define ONCE_REPLICAS 3

typedef struct once_env {
    bench_onced srv;
    char url[1100]; /* what clients dial: srv's, or every replica's */
    /* once-replicated: the etcd cluster and the replicas (srv unused) */
    etcd_cluster *cl;
    bench_onced reps[ONCE_REPLICAS];
    int nreps;
    pthread_mutex_t mu;  /* protects shared and shared_refs */
    once_client *shared; /* the one handle of the shared rows */
    int shared_refs;     /* callers open on it */
} once_env;

typedef struct once_conn {
    once_env *e;
    once_client *c;
    once_client *resender; /* no lease: resends an explicit rpc id */
    char counter[96];
    once_rpc_id last; /* the last call that returned OK */
    int64_t last_value;
    once_client *on;  /* the handle calls go to: c, or the env's shared */
    once_future *fut; /* once-async: the call in flight */
    /* once-kv: the row as last seen, the last transition's id and
     * revision (what its replay must answer), a builder for results. */
    job_cache job;
    once_rpc_id job_last;
    uint64_t job_last_rev;
    bool job_resend;   /* the attempt resends job_last (replay_last) */
    once_kv_txn *view; /* async: the reply of the call in flight */
    int64_t job_t;     /* async: the transition in flight */
} once_conn;

static void
say(char *err, int rv, const once_status *st)
{
    snprintf(err, COMPARE_ERR_LEN, "%s %s %s", once_strerror(rv), st->reason,
             st->message);
}

/*
 * Every caller of a level is a handle of its own plus, for the replay
 * check, a resender: at 64 callers 128 connections of one peer, onced's
 * default --conn-max-per-peer; past it the check's reader was reset on
 * every attempt (BENCH_ONCED_MANY_PEERS).
 */
#define ONCE_BENCH_ARGS BENCH_ONCED_MANY_PEERS

static int
once_start(const compare_config *cfg, void **envp)
{
    const char *args[] = {ONCE_BENCH_ARGS, NULL};
    once_env *e = calloc(1, sizeof(*e));

    if (e == NULL) {
        return -1;
    }
    if (bench_onced_start(&e->srv, cfg->onced, args) != 0) {
        free(e);
        return -1;
    }
    pthread_mutex_init(&e->mu, NULL);
    snprintf(e->url, sizeof(e->url), "%s", e->srv.url);
    *envp = e;
    return 0;
}

static void
once_stop(void *env)
{
    once_env *e = env;

    if (e != NULL) {
        bench_onced_stop(&e->srv);
        pthread_mutex_destroy(&e->mu);
        free(e);
    }
}

static int
client_open(once_env *e, bool lease, once_client **cp, char *err)
{
    once_options o;
    once_status st;
    int rv;

    once_options_init(&o);
    o.url = e->url;
    o.no_lease = !lease;
    if ((rv = once_client_open(cp, &o, &st)) != ONCE_OK) {
        say(err, rv, &st);
        return -1;
    }
    return 0;
}

/* once-replicated: 3 etcd members and 3 onced --replicate; clients dial
 * all three. Ready when a leader answers. */
static void once_repl_stop(void *env);

static int
once_repl_start(const compare_config *cfg, void **envp)
{
    once_env *e = calloc(1, sizeof(*e));
    size_t off = 0;
    int64_t until;

    if (e == NULL) {
        return -1;
    }
    pthread_mutex_init(&e->mu, NULL);
    if (etcd_cluster_start(&e->cl, 3) != 0) {
        fprintf(stderr, "once-replicated: etcd did not start\n");
        pthread_mutex_destroy(&e->mu);
        free(e);
        return -1;
    }
    for (int i = 0; i < ONCE_REPLICAS; i++) {
        const char *args[] = {"--replicate",     e->cl->endpoints,
                              "--cluster",       "bench",
                              "--replicate-ttl", "2",
                              ONCE_BENCH_ARGS,   NULL};
        if (bench_spawn(&e->reps[i], cfg->onced, args) != 0) {
            once_repl_stop(e);
            return -1;
        }
        e->nreps++;
        off += (size_t)snprintf(e->url + off, sizeof(e->url) - off, "%s%s",
                                i > 0 ? "," : "", e->reps[i].url);
    }
    until = bench_now_ns() / 1000000 + 60000;
    for (;;) {
        once_options o;
        once_client *c = NULL;
        once_status st;
        int64_t v;

        once_options_init(&o);
        o.url = e->url;
        o.no_lease = true;
        o.deadline_ms = 2000;
        if (once_client_open(&c, &o, &st) == ONCE_OK &&
            once_counter_get(c, "ready", &v, &st) == ONCE_OK) {
            once_client_close(c);
            break;
        }
        once_client_close(c);
        if (bench_now_ns() / 1000000 > until) {
            fprintf(stderr, "once-replicated: no leader within 60 s\n");
            once_repl_stop(e);
            return -1;
        }
        bench_sleep_ms(100);
    }
    *envp = e;
    return 0;
}

static void
once_repl_stop(void *env)
{
    once_env *e = env;

    if (e != NULL) {
        for (int i = 0; i < e->nreps; i++) {
            bench_onced_stop(&e->reps[i]);
        }
        etcd_cluster_free(e->cl);
        pthread_mutex_destroy(&e->mu);
        free(e);
    }
}

static int
once_open(void *env, const compare_caller *who, void **connp, char *err)
{
    once_conn *k = calloc(1, sizeof(*k));

    if (k == NULL) {
        snprintf(err, COMPARE_ERR_LEN, "out of memory");
        return -1;
    }
    k->e = env;
    job_cache_init(&k->job);
    snprintf(k->counter, sizeof(k->counter), "%s", who->counter);
    if (client_open(env, true, &k->c, err) != 0) {
        free(k);
        return -1;
    }
    k->on = k->c;
    *connp = k;
    return 0;
}

/* A caller of a shared row: every caller's calls go to one handle. */
static int
shared_open(void *env, const compare_caller *who, void **connp, char *err)
{
    once_env *e = env;
    once_conn *k = calloc(1, sizeof(*k));
    int rv = 0;

    if (k == NULL) {
        snprintf(err, COMPARE_ERR_LEN, "out of memory");
        return -1;
    }
    k->e = e;
    job_cache_init(&k->job);
    snprintf(k->counter, sizeof(k->counter), "%s", who->counter);
    pthread_mutex_lock(&e->mu);
    if (e->shared == NULL) {
        rv = client_open(e, true, &e->shared, err);
    }
    if (rv == 0) {
        e->shared_refs++;
        k->on = e->shared;
    }
    pthread_mutex_unlock(&e->mu);
    if (rv != 0) {
        free(k);
        return -1;
    }
    *connp = k;
    return 0;
}

static void
shared_close(void *conn)
{
    once_conn *k = conn;
    once_client *last = NULL;

    if (k == NULL) {
        return;
    }
    once_future_free(k->fut);
    once_kv_txn_free(k->view);
    once_client_close(k->resender);
    pthread_mutex_lock(&k->e->mu);
    if (--k->e->shared_refs == 0) {
        last = k->e->shared;
        k->e->shared = NULL;
    }
    pthread_mutex_unlock(&k->e->mu);
    once_client_close(last);
    free(k);
}

static int
async_start(void *conn, uint64_t n, char *err)
{
    once_conn *k = conn;
    once_status st;
    int rv;

    (void)n;
    once_future_free(k->fut);
    k->fut = NULL;
    if ((rv = once_counter_incr_async(k->on, k->counter, 1, NULL, NULL, NULL,
                                      &k->fut, &st)) != ONCE_OK) {
        say(err, rv, &st);
        return -1;
    }
    return 0;
}

static int
async_end(void *conn, int64_t *value, char *err)
{
    once_conn *k = conn;
    once_status st;
    int rv;

    if (k->fut == NULL) {
        snprintf(err, COMPARE_ERR_LEN, "no call in flight");
        return -1;
    }
    if ((rv = once_wait(k->fut, &st)) != ONCE_OK ||
        (rv = once_future_counter_value(k->fut, value)) != ONCE_OK) {
        say(err, rv, &st);
        return -1;
    }
    once_future_id(k->fut, &k->last);
    k->last_value = *value;
    return 0;
}

static int
async_do(void *conn, uint64_t n, int64_t *value, char *err)
{
    if (async_start(conn, n, err) != 0) {
        return -1;
    }
    return async_end(conn, value, err);
}

static int
once_do(void *conn, uint64_t n, int64_t *value, char *err)
{
    once_conn *k = conn;
    once_rpc_id id = {0, 0}; /* the library assigns the next seq */
    once_status st;
    int rv;

    (void)n;
    if ((rv = once_counter_incr(k->on, k->counter, 1, &id, value, &st)) !=
        ONCE_OK) {
        say(err, rv, &st);
        return -1;
    }
    k->last = id;
    k->last_value = *value;
    return 0;
}

static int
once_replay_last(void *conn, bool *replayed, int64_t *value, char *err)
{
    once_conn *k = conn;
    once_rpc_id id = k->last;
    once_status st;
    int rv;

    if (id.seq == 0) {
        snprintf(err, COMPARE_ERR_LEN, "no call to replay");
        return -1;
    }
    /* Resent the way a restarted client (or oncectl --rpc-id) does: from a
     * handle without a lease, which acknowledges nothing. The caller's own
     * handle counts the call complete and would acknowledge it with the
     * resend (BAD_ACK). */
    if (k->resender == NULL &&
        client_open(k->e, false, &k->resender, err) != 0) {
        return -1;
    }
    if ((rv = once_counter_incr(k->resender, k->counter, 1, &id, value, &st)) !=
        ONCE_OK) {
        say(err, rv, &st);
        return -1;
    }
    *replayed = st.replayed;
    return 0;
}

static void
once_close(void *conn)
{
    once_conn *k = conn;

    if (k != NULL) {
        once_kv_txn_free(k->view);
        once_client_close(k->resender);
        once_client_close(k->c);
        free(k);
    }
}

static int
once_read(void *env, const char *counter, int64_t *value, char *err)
{
    once_client *c = NULL;
    once_status st;
    int rv;

    if (client_open(env, false, &c, err) != 0) {
        return -1;
    }
    if ((rv = once_counter_get(c, counter, value, &st)) != ONCE_OK) {
        say(err, rv, &st);
    }
    once_client_close(c);
    return rv == ONCE_OK ? 0 : -1;
}

static pid_t
once_server_pid(void *env)
{
    return ((once_env *)env)->srv.pid;
}

static uint64_t
once_server_fsyncs(void *env)
{
    return bench_server_fsyncs(((once_env *)env)->url);
}

/* ---- once-kv --------------------------------------------------------------
 */

/* The transition Txn: row at version expect → put row, else get it. */
static int
kv_job_txn(const once_conn *k, int64_t expect, const char *row, size_t rlen,
           once_kv_txn **tp, char *err)
{
    const char *key = k->counter;
    once_kv_txn *t;
    once_status st;

    if (once_kv_txn_new(&t) != ONCE_OK) {
        snprintf(err, COMPARE_ERR_LEN, "out of memory");
        return -1;
    }
    once_kv_txn_compare_version(t, key, strlen(key), ONCE_KV_EQUAL,
                                (uint64_t)expect);
    once_kv_txn_put(t, ONCE_KV_THEN, key, strlen(key), row, rlen, false);
    once_kv_txn_get(t, ONCE_KV_ELSE, key, strlen(key));
    if (once_kv_txn_status(t, &st) != ONCE_OK) {
        say(err, st.code, &st);
        once_kv_txn_free(t);
        return -1;
    }
    *tp = t;
    return 0;
}

/* A Txn's answer as a job outcome: applied (the revision is the row's new
 * version) or moved (the else branch's get says where the row is). */
static int
kv_job_outcome(const once_kv_txn *t, job_outcome *out, int64_t *version,
               int64_t *transitions, char *err)
{
    once_kv_result r;

    if (once_kv_txn_succeeded(t)) {
        *out = JOB_APPLIED;
        *version = (int64_t)once_kv_txn_revision(t);
        return 0;
    }
    *out = JOB_MOVED;
    *version = 0;
    *transitions = 0;
    if (once_kv_txn_result(t, 0, &r) != ONCE_OK || r.kind != ONCE_KV_GET) {
        snprintf(err, COMPARE_ERR_LEN, "Txn: no get in the else branch");
        return -1;
    }
    if (r.found) {
        *version = (int64_t)r.version;
        if (job_row_parse(r.value, r.value_len, transitions) != 0) {
            snprintf(err, COMPARE_ERR_LEN, "the row is not a job row");
            return -1;
        }
    }
    return 0;
}

/* One Txn (job_attempt_fn): a new rpc id, or job_last again on a handle
 * without a lease when replay_last asks. The row's version is not known
 * before the first attempt: compare against 0 then (the else branch reads
 * it). */
static int
kv_job_attempt(void *conn, uint64_t n, int64_t expect, const char *row,
               size_t rlen, int64_t t, job_outcome *out, int64_t *version,
               int64_t *transitions, char *err)
{
    once_conn *k = conn;
    once_rpc_id id = k->job_resend ? k->job_last : (once_rpc_id){0, 0};
    once_client *on = k->on;
    once_kv_txn *tx;
    once_status st;
    int rv;

    (void)n;
    (void)t;
    if (k->job_resend && k->resender == NULL &&
        client_open(k->e, false, &k->resender, err) != 0) {
        return -1;
    }
    if (k->job_resend) {
        on = k->resender;
    }
    if (kv_job_txn(k, expect < 0 ? 0 : expect, row, rlen, &tx, err) != 0) {
        return -1;
    }
    if ((rv = once_kv_txn_exec(on, tx, &id, &st)) != ONCE_OK) {
        say(err, rv, &st);
        once_kv_txn_free(tx);
        return -1;
    }
    rv = kv_job_outcome(tx, out, version, transitions, err);
    once_kv_txn_free(tx);
    if (rv != 0) {
        return -1;
    }
    if (k->job_resend) {
        /* The stored answer: the same branch at the same revision. */
        *out = st.replayed && *out == JOB_APPLIED &&
                       (uint64_t)*version == k->job_last_rev
                   ? JOB_REPLAYED
                   : JOB_MOVED;
        *transitions = k->job.last_t;
    } else if (*out == JOB_APPLIED) {
        k->job_last = id;
        k->job_last_rev = (uint64_t)*version;
    }
    return 0;
}

static int
kv_job_call(void *conn, uint64_t n, int64_t *value, char *err)
{
    once_conn *k = conn;

    return job_transition(k, kv_job_attempt, &k->job, n, value, err);
}

static int
kv_job_replay_last(void *conn, bool *replayed, int64_t *value, char *err)
{
    once_conn *k = conn;
    int rv;

    k->job_resend = true;
    rv = job_replay(k, kv_job_attempt, &k->job, replayed, value, err);
    k->job_resend = false;
    return rv;
}

/* once-kv-async: the transition from the cached version, in flight. */
static int
kv_job_start(void *conn, uint64_t n, char *err)
{
    once_conn *k = conn;
    char row[JOB_ROW_MAX];
    once_kv_txn *tx;
    once_status st;
    size_t rlen;
    int rv;

    (void)n;
    once_future_free(k->fut);
    k->fut = NULL;
    k->job_t = k->job.transitions + 1;
    rlen = job_row_format(row, k->job_t);
    if (k->view == NULL && once_kv_txn_new(&k->view) != ONCE_OK) {
        snprintf(err, COMPARE_ERR_LEN, "out of memory");
        return -1;
    }
    if (kv_job_txn(k, k->job.version < 0 ? 0 : k->job.version, row, rlen, &tx,
                   err) != 0) {
        return -1;
    }
    rv = once_kv_txn_exec_async(k->on, tx, NULL, NULL, NULL, &k->fut, &st);
    once_kv_txn_free(tx); /* its bytes were copied */
    if (rv != ONCE_OK) {
        say(err, rv, &st);
        return -1;
    }
    return 0;
}

/* Ends the call in flight; a row another caller moved (--one-counter)
 * finishes with blocking attempts. */
static int
kv_job_end(void *conn, int64_t *value, char *err)
{
    once_conn *k = conn;
    int64_t version = 0, tr = 0;
    job_outcome out;
    once_status st;
    int rv;

    if (k->fut == NULL) {
        snprintf(err, COMPARE_ERR_LEN, "no call in flight");
        return -1;
    }
    if ((rv = once_kv_txn_finish(k->view, k->fut, &st)) != ONCE_OK) {
        say(err, rv, &st);
        return -1;
    }
    if (kv_job_outcome(k->view, &out, &version, &tr, err) != 0) {
        return -1;
    }
    if (out == JOB_MOVED) {
        k->job.version = version;
        k->job.transitions = tr;
        return job_transition(k, kv_job_attempt, &k->job, 0, value, err);
    }
    k->job.version = version;
    k->job.transitions = k->job_t;
    *value = k->job_t;
    return 0;
}

static int
kv_job_read(void *env, const char *job, int64_t *value, char *err)
{
    once_client *c = NULL;
    once_kv_range *r = NULL;
    once_status st;
    once_kv e;
    int rv;

    if (client_open(env, false, &c, err) != 0) {
        return -1;
    }
    rv = once_kv_range_get(c, job, strlen(job), false, 1, NULL, 0, &r, &st);
    once_client_close(c);
    if (rv != ONCE_OK) {
        say(err, rv, &st);
        return -1;
    }
    *value = 0;
    if (once_kv_range_at(r, 0, &e) == ONCE_OK &&
        job_row_parse(e.value, e.value_len, value) != 0) {
        snprintf(err, COMPARE_ERR_LEN, "%s is not a job row", job);
        rv = -1;
    }
    once_kv_range_free(r);
    return rv == ONCE_OK ? 0 : -1;
}

const compare_peer compare_peer_once = {
    .name = "once",
    .what = "onced + libonce, one once_client per caller (Increment)",
    .exactly_once = true,
    .start = once_start,
    .stop = once_stop,
    .open = once_open,
    .call = once_do,
    .replay_last = once_replay_last,
    .close = once_close,
    .read = once_read,
    .server_pid = once_server_pid,
    .server_fsyncs = once_server_fsyncs,
};

const compare_peer compare_peer_once_repl = {
    .name = "once-replicated",
    .what = "3 onced --replicate on 3 etcd members, libonce dialing all "
            "three (Increment)",
    .exactly_once = true,
    .start = once_repl_start,
    .stop = once_repl_stop,
    .open = once_open,
    .call = once_do,
    .replay_last = once_replay_last,
    .close = once_close,
    .read = once_read,
};

const compare_peer compare_peer_once_shared = {
    .name = "once-shared",
    .what = "onced + libonce, N threads calling on ONE once_client",
    .exactly_once = true,
    .start = once_start,
    .stop = once_stop,
    .open = shared_open,
    .call = once_do,
    .close = shared_close,
    .read = once_read,
    .server_pid = once_server_pid,
    .server_fsyncs = once_server_fsyncs,
};

const compare_peer compare_peer_once_async = {
    .name = "once-async",
    .what = "onced + libonce, ONE thread, N async calls in flight on one "
            "once_client",
    .exactly_once = true,
    .start = once_start,
    .stop = once_stop,
    .open = shared_open,
    .call = async_do,
    .close = shared_close,
    .read = once_read,
    .call_start = async_start,
    .call_end = async_end,
    .server_pid = once_server_pid,
    .server_fsyncs = once_server_fsyncs,
};

const compare_peer compare_peer_once_kv = {
    .name = "once-kv",
    .what = "onced + libonce, one once_client per caller, one KV Txn per "
            "transition (the rpc id is the key)",
    .exactly_once = true,
    .job = true,
    .start = once_start,
    .stop = once_stop,
    .open = once_open,
    .call = kv_job_call,
    .replay_last = kv_job_replay_last,
    .close = once_close,
    .read = kv_job_read,
    .server_pid = once_server_pid,
    .server_fsyncs = once_server_fsyncs,
};

const compare_peer compare_peer_once_kv_async = {
    .name = "once-kv-async",
    .what = "onced + libonce, ONE thread, N async KV Txns in flight on one "
            "once_client",
    .exactly_once = true,
    .job = true,
    .start = once_start,
    .stop = once_stop,
    .open = shared_open,
    .call = kv_job_call,
    .close = shared_close,
    .read = kv_job_read,
    .call_start = kv_job_start,
    .call_end = kv_job_end,
    .server_pid = once_server_pid,
    .server_fsyncs = once_server_fsyncs,
};

const compare_peer compare_peer_once_kv_repl = {
    .name = "once-kv-replicated",
    .what = "3 onced --replicate on 3 etcd members, one once_client per "
            "caller, one KV Txn per transition",
    .exactly_once = true,
    .job = true,
    .start = once_repl_start,
    .stop = once_repl_stop,
    .open = once_open,
    .call = kv_job_call,
    .replay_last = kv_job_replay_last,
    .close = once_close,
    .read = kv_job_read,
};
