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

#include "bench/bench_env.h"
#include "bench/compare_peer.h"
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
} once_conn;

static void
say(char *err, int rv, const once_status *st)
{
    snprintf(err, COMPARE_ERR_LEN, "%s %s %s", once_strerror(rv), st->reason,
             st->message);
}

static int
once_start(const compare_config *cfg, void **envp)
{
    once_env *e = calloc(1, sizeof(*e));

    if (e == NULL) {
        return -1;
    }
    if (bench_onced_start(&e->srv, cfg->onced, NULL) != 0) {
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
        const char *args[] = {"--replicate", e->cl->endpoints,  "--cluster",
                              "bench",       "--replicate-ttl", "2",
                              NULL};
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
