/*
 * peer_etcd.c — what a user would build instead of once on etcd: a
 * 3-member etcd cluster (tests/etcd_procs.c, Debian's etcd-server) and an
 * idempotency key per call in one Txn: read the counter, then "if the
 * call's key is absent and the counter is unchanged since the read: put
 * the key (holding the result) and the new counter"; when the Txn fails,
 * the key is read back (a replay) or the counter was moved by another
 * caller (read again and retry).
 *
 * etcd-job (--workload job, job_row.h): the job transition in one Txn,
 * "if the call's key is absent and the job row's mod_revision is the one
 * the caller read: put the key (holding the result) and the new row"; the
 * revision the Txn answers is the row's next version, so while nobody
 * else moves the row a transition is one round trip. A failed Txn reads
 * the key (a replay) or the row (moved: attempt again).
 *
 * Owns: the etcd members (their temp dir) and one etcd handle per caller.
 * Invariant: a call returns only after etcd committed it (a Raft majority,
 * each member fsyncing its WAL); a resend of the same n finds its key and
 * returns the stored value.
 * Never: retries a Txn etcd did not answer under another key.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/compare_peer.h"
#include "bench/job_row.h"
#include "repl/etcd.h"
#include "tests/etcd_procs.h"

/* Txn retries of one call when other callers move the same counter. */
#define ETCD_PEER_TRIES 1000

typedef struct etcdp_env {
    etcd_cluster *cl;
} etcdp_env;

typedef struct etcdp_conn {
    etcdp_env *e;
    etcd *c;
    char counter[128];
    char prefix[64]; /* idem/<level>/<caller>/ */
    uint64_t last_n;
    job_cache job; /* etcd-job */
} etcdp_conn;

static int
etcdp_start(const compare_config *cfg, void **envp)
{
    etcdp_env *e = calloc(1, sizeof(*e));

    (void)cfg;
    if (e == NULL || etcd_cluster_start(&e->cl, 3) != 0) {
        fprintf(stderr, "etcd: the 3-member cluster did not start\n");
        free(e);
        return -1;
    }
    *envp = e;
    return 0;
}

static void
etcdp_stop(void *env)
{
    etcdp_env *e = env;

    if (e != NULL) {
        etcd_cluster_free(e->cl);
        free(e);
    }
}

static int
etcdp_open(void *env, const compare_caller *who, void **connp, char *err)
{
    etcdp_env *e = env;
    etcdp_conn *k = calloc(1, sizeof(*k));

    if (k == NULL || etcd_open(&k->c, e->cl->endpoints, 5000) != 0) {
        snprintf(err, COMPARE_ERR_LEN, "etcd_open failed");
        free(k);
        return -1;
    }
    k->e = e;
    job_cache_init(&k->job);
    snprintf(k->counter, sizeof(k->counter), "ctr/%s", who->counter);
    snprintf(k->prefix, sizeof(k->prefix), "idem/%d/%d/", who->level,
             who->index);
    *connp = k;
    return 0;
}

/* One key's raw value: *found, and the value copied into buf (size bytes,
 * NUL-terminated) with its mod_revision. */
static int
etcdp_get_raw(etcd *c, const char *key, bool *found, char *buf, size_t size,
              int64_t *rev, char *err)
{
    etcd_kv *kvs = NULL;
    size_t n = 0;

    if (etcd_range(c, key, strlen(key), NULL, 0, 1, &kvs, &n, NULL, NULL) !=
        0) {
        snprintf(err, COMPARE_ERR_LEN, "range %s: %s", key, etcd_last_error(c));
        return -1;
    }
    *found = n == 1;
    *rev = n == 1 ? kvs[0].mod_rev : 0;
    snprintf(buf, size, "%.*s", n == 1 ? (int)kvs[0].vlen : 0,
             n == 1 ? kvs[0].val : "");
    etcd_kvs_free(kvs, n);
    return 0;
}

/* One key's value as an int64 (0 and *rev 0 when absent). */
static int
etcdp_get(etcd *c, const char *key, int64_t *value, int64_t *rev, bool *found,
          char *err)
{
    char buf[64];
    int64_t r;

    if (etcdp_get_raw(c, key, found, buf, sizeof(buf), &r, err) != 0) {
        return -1;
    }
    *value = *found ? strtoll(buf, NULL, 10) : 0;
    if (rev != NULL) {
        *rev = r;
    }
    return 0;
}

/* The value stored for counter (a counter, or a job row) into buf, read
 * on a handle of its own. */
static int
etcdp_read_raw(void *env, const char *counter, bool *found, char *buf,
               size_t size, char *err)
{
    etcdp_env *e = env;
    etcd *c = NULL;
    char key[160];
    int64_t rev;
    int rv;

    if (etcd_open(&c, e->cl->endpoints, 5000) != 0) {
        snprintf(err, COMPARE_ERR_LEN, "etcd_open failed");
        return -1;
    }
    snprintf(key, sizeof(key), "ctr/%s", counter);
    rv = etcdp_get_raw(c, key, found, buf, size, &rev, err);
    etcd_close(c);
    return rv;
}

static int
etcdp_do(void *conn, uint64_t n, int64_t *value, char *err)
{
    etcdp_conn *k = conn;
    char idem[128], v[32];

    snprintf(idem, sizeof(idem), "%s%" PRIu64, k->prefix, n);
    for (int i = 0; i < ETCD_PEER_TRIES; i++) {
        int64_t cur, rev;
        bool found, ok = false;
        etcd_txn *t;
        int rv;

        if (etcdp_get(k->c, k->counter, &cur, &rev, &found, err) != 0) {
            return -1;
        }
        snprintf(v, sizeof(v), "%" PRId64, cur + 1);
        if ((t = etcd_txn_alloc()) == NULL) {
            snprintf(err, COMPARE_ERR_LEN, "out of memory");
            return -1;
        }
        etcd_txn_if_created(t, idem, strlen(idem), 0);
        etcd_txn_if_modified(t, k->counter, strlen(k->counter), rev);
        etcd_txn_put(t, idem, strlen(idem), v, strlen(v), 0);
        etcd_txn_put(t, k->counter, strlen(k->counter), v, strlen(v), 0);
        rv = etcd_txn_run(k->c, t, &ok, NULL);
        etcd_txn_free(t);
        if (rv != 0) {
            snprintf(err, COMPARE_ERR_LEN, "txn: %s", etcd_last_error(k->c));
            return -1;
        }
        if (ok) {
            *value = cur + 1;
            k->last_n = n;
            return 0;
        }
        /* Our key already there (a replay), or the counter moved. */
        if (etcdp_get(k->c, idem, value, NULL, &found, err) != 0) {
            return -1;
        }
        if (found) {
            k->last_n = n;
            return 0;
        }
    }
    snprintf(err, COMPARE_ERR_LEN, "counter contended %d times in a row",
             ETCD_PEER_TRIES);
    return -1;
}

static int
etcdp_replay_last(void *conn, bool *replayed, int64_t *value, char *err)
{
    etcdp_conn *k = conn;
    char idem[128];
    bool found = false;

    if (k->last_n == 0) {
        snprintf(err, COMPARE_ERR_LEN, "no call to replay");
        return -1;
    }
    /* The same Txn again finds its key: the stored value, no effect. */
    if (etcdp_do(conn, k->last_n, value, err) != 0) {
        return -1;
    }
    snprintf(idem, sizeof(idem), "%s%" PRIu64, k->prefix, k->last_n);
    *replayed = etcdp_get(k->c, idem, value, NULL, &found, err) == 0 && found;
    return 0;
}

static void
etcdp_close(void *conn)
{
    etcdp_conn *k = conn;

    if (k != NULL) {
        etcd_close(k->c);
        free(k);
    }
}

static int
etcdp_read(void *env, const char *counter, int64_t *value, char *err)
{
    char buf[64];
    bool found = false;

    if (etcdp_read_raw(env, counter, &found, buf, sizeof(buf), err) != 0) {
        return -1;
    }
    *value = found ? strtoll(buf, NULL, 10) : 0;
    return 0;
}

/* ---- etcd-job ------------------------------------------------------------ */

/* One Txn, and on failure the reads that say why (job_attempt_fn). */
static int
job_attempt(void *conn, uint64_t n, int64_t expect, const char *row,
            size_t rlen, int64_t t, job_outcome *out, int64_t *version,
            int64_t *transitions, char *err)
{
    etcdp_conn *k = conn;
    char idem[128], ts[32], buf[JOB_ROW_MAX + 1];
    bool ok = false, found = false;
    int64_t rev = 0;
    etcd_txn *tx;
    int rv;

    snprintf(idem, sizeof(idem), "%s%" PRIu64, k->prefix, n);
    snprintf(ts, sizeof(ts), "%" PRId64, t);
    if (expect >= 0) { /* -1: not known yet, read it first */
        if ((tx = etcd_txn_alloc()) == NULL) {
            snprintf(err, COMPARE_ERR_LEN, "out of memory");
            return -1;
        }
        etcd_txn_if_created(tx, idem, strlen(idem), 0);
        etcd_txn_if_modified(tx, k->counter, strlen(k->counter), expect);
        etcd_txn_put(tx, idem, strlen(idem), ts, strlen(ts), 0);
        etcd_txn_put(tx, k->counter, strlen(k->counter), row, rlen, 0);
        rv = etcd_txn_run(k->c, tx, &ok, &rev);
        etcd_txn_free(tx);
        if (rv != 0) {
            snprintf(err, COMPARE_ERR_LEN, "txn: %s", etcd_last_error(k->c));
            return -1;
        }
        if (ok) {
            *out = JOB_APPLIED;
            *version = rev;
            return 0;
        }
        if (etcdp_get_raw(k->c, idem, &found, buf, sizeof(buf), &rev, err) !=
            0) {
            return -1;
        }
        if (found) {
            *out = JOB_REPLAYED;
            *transitions = strtoll(buf, NULL, 10);
            return 0;
        }
    }
    if (etcdp_get_raw(k->c, k->counter, &found, buf, sizeof(buf), version,
                      err) != 0) {
        return -1;
    }
    *out = JOB_MOVED;
    *transitions = 0;
    if (found && job_row_parse(buf, strlen(buf), transitions) != 0) {
        snprintf(err, COMPARE_ERR_LEN, "%s is not a job row", k->counter);
        return -1;
    }
    return 0;
}

static int
job_call(void *conn, uint64_t n, int64_t *value, char *err)
{
    return job_transition(conn, job_attempt, &((etcdp_conn *)conn)->job, n,
                          value, err);
}

static int
job_replay_last(void *conn, bool *replayed, int64_t *value, char *err)
{
    return job_replay(conn, job_attempt, &((etcdp_conn *)conn)->job, replayed,
                      value, err);
}

static int
job_read(void *env, const char *job, int64_t *value, char *err)
{
    char buf[JOB_ROW_MAX + 1];
    bool found = false;

    if (etcdp_read_raw(env, job, &found, buf, sizeof(buf), err) != 0) {
        return -1;
    }
    *value = 0;
    if (found && job_row_parse(buf, strlen(buf), value) != 0) {
        snprintf(err, COMPARE_ERR_LEN, "%s is not a job row", job);
        return -1;
    }
    return 0;
}

const compare_peer compare_peer_etcd_job = {
    .name = "etcd-job",
    .what = "3 etcd members, one Txn per transition: key absent and row "
            "at the read mod_revision",
    .exactly_once = true,
    .job = true,
    .start = etcdp_start,
    .stop = etcdp_stop,
    .open = etcdp_open,
    .call = job_call,
    .replay_last = job_replay_last,
    .close = etcdp_close,
    .read = job_read,
};

const compare_peer compare_peer_etcd = {
    .name = "etcd",
    .what = "3 etcd members, an idempotency key + counter in one Txn per "
            "call (JSON gateway)",
    .exactly_once = true,
    .start = etcdp_start,
    .stop = etcdp_stop,
    .open = etcdp_open,
    .call = etcdp_do,
    .replay_last = etcdp_replay_last,
    .close = etcdp_close,
    .read = etcdp_read,
};
