/*
 * compare_peer.h — one system that bench_compare measures: once, Redis,
 * PostgreSQL, etcd, or one of the raw limits (an nng echo, LevelDB synced
 * puts), on one of two workloads: counter increments or job transitions.
 *
 * Owns: the interface only. Each peer_*.c fills one compare_peer.
 * Invariant: call() returns only after the effect is on disk (or, for the
 * echo, after the reply came back): nothing is acknowledged early, so every
 * peer is measured at the same durability. Calls of one caller carry a
 * stable idempotency key derived from (level, caller, n), so a resend of the
 * same n is a replay, never a second effect.
 * Never: lets a call block for more than its own bounded timeout; a peer's
 * start() never leaves a process behind when it fails.
 */
#ifndef BENCH_COMPARE_PEER_H
#define BENCH_COMPARE_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define COMPARE_ERR_LEN 512

/* Who a connection belongs to. counter is the counter this caller
 * increments (several callers share one with --one-counter). */
typedef struct compare_caller {
    int level; /* index of the concurrency level, from 0 */
    int index; /* caller index within the level, from 0 */
    const char *counter;
} compare_caller;

/* Settings every peer may read; filled by bench_compare from its options. */
typedef struct compare_config {
    const char *dir;       /* this peer's own temp dir (exists, empty) */
    const char *onced;     /* the onced binary */
    const char *pg_bin;    /* PostgreSQL's bin dir (initdb, pg_ctl) */
    const char *pg_mode;   /* "function" or "statements" */
    const char *redis_bin; /* the redis-server binary */
    int max_callers;       /* the largest level: contexts, connections */
    size_t echo_bytes;     /* request size of the echo */
    size_t put_bytes;      /* value size of a LevelDB put */
} compare_config;

typedef struct compare_peer {
    const char *name;  /* "once", "redis", "postgres", "echo", "leveldb" */
    const char *what;  /* one line for --help and the report */
    bool exactly_once; /* counters to read back and a replay to check */
    /* The job-transition workload (job_row.h) instead of increments:
     * call() is one transition of the caller's job row (who->counter names
     * it), *value the row's transitions count after it, and read() reads
     * that count back. Selected by --workload job. */
    bool job;

    /* Starts the system on cfg->dir. *env is the peer's state for the
     * other calls. 0, or -1 after saying why on stderr (nothing left
     * running). */
    int (*start)(const compare_config *cfg, void **env);
    /* Stops what start started and frees env. NULL is accepted. */
    void (*stop)(void *env);

    /* One caller's connection, opened before the clock starts. */
    int (*open)(void *env, const compare_caller *who, void **conn, char *err);
    /* The n-th call of this caller (n from 1): one durable exactly-once
     * increment by 1, *value the counter after it (raw peers: 0). 0 on
     * success, -1 with err filled. */
    int (*call)(void *conn, uint64_t n, int64_t *value, char *err);
    /* Sends the last successful call again (same key, same payload):
     * *replayed says whether the stored result came back, *value what it
     * held. NULL for raw peers. */
    int (*replay_last)(void *conn, bool *replayed, int64_t *value, char *err);
    void (*close)(void *conn);

    /* The value of counter, read on a connection of its own. NULL for raw
     * peers. */
    int (*read)(void *env, const char *counter, int64_t *value, char *err);

    /* Optional, for a peer with an asynchronous API: starts the n-th call
     * of this caller without waiting (0, or -1 with err), and waits for the
     * call started last on conn. With both set, bench_compare drives all
     * callers of a level from ONE thread, each caller keeping one call in
     * flight (N callers: N calls in flight). call() is still used for the
     * warm-up. */
    int (*call_start)(void *conn, uint64_t n, char *err);
    int (*call_end)(void *conn, int64_t *value, char *err);

    /* Optional: the server process whose CPU time and context switches
     * bench_compare counts per call (0: none or unknown), and its fsync
     * count so far (NULL: not counted). */
    pid_t (*server_pid)(void *env);
    uint64_t (*server_fsyncs)(void *env);
} compare_peer;

extern const compare_peer compare_peer_once;
extern const compare_peer compare_peer_redis;
extern const compare_peer compare_peer_postgres;
extern const compare_peer compare_peer_echo;
extern const compare_peer compare_peer_leveldb;
extern const compare_peer compare_peer_etcd;
extern const compare_peer compare_peer_once_repl;
extern const compare_peer compare_peer_once_shared;
extern const compare_peer compare_peer_once_async;
extern const compare_peer compare_peer_once_http;
extern const compare_peer compare_peer_redis_job;
extern const compare_peer compare_peer_postgres_job;
extern const compare_peer compare_peer_etcd_job;
extern const compare_peer compare_peer_once_kv;
extern const compare_peer compare_peer_once_kv_async;
extern const compare_peer compare_peer_once_kv_repl;

#endif /* BENCH_COMPARE_PEER_H */
