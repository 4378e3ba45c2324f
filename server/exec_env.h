/*
 * exec_env.h — what the executor, and every call it runs, may use: the
 * store, the lease table, the principals and policy in force, the
 * counters, the free-space floor, the collector's counters, the clock and
 * the settings calls are judged by. Nothing else of the server.
 *
 * Owns nothing: server.c fills it before the executor starts and keeps
 * every part alive until the executor has stopped.
 * Invariant: cfg, leases and the auth tables in force are read and written
 * on the executor thread only (a SIGHUP reaches cfg and the auth tables
 * through executor_post); stats and disk are atomics anyone may read.
 * Never: a handler reaches the listener, the socket or main() through it.
 */
#ifndef SERVER_EXEC_ENV_H
#define SERVER_EXEC_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "kv/kv.h"
#include "outbox/outbox.h"
#include "server/disk_floor.h"
#include "server/stats.h"
#include "store/store.h"

typedef struct lease_table lease_table;
typedef struct auth auth;
typedef struct gc gc;

/* The settings a call is judged by (onced(8); window and the TTLs change
 * on SIGHUP). */
typedef struct exec_config {
    const char *data_dir;         /* services keep their files here */
    uint64_t window;              /* unacknowledged seqs allowed per client */
    uint64_t lease_ttl_ms;        /* default TTL of OpenLease */
    uint64_t lease_ttl_max_ms;    /* largest TTL a client may ask for */
    uint64_t lease_max;           /* live leases in all (0: no cap) */
    uint64_t lease_max_principal; /* live leases of one principal */
    size_t recv_max;              /* largest request (OpenLease says it) */
    kv_limits kv;                 /* once.v1.KV's bounds (kv/kv.h) */
    outbox_limits outbox;         /* the outbox's (outbox/outbox.h) */
    size_t park_max; /* long-poll reads parked at once: half the nng
                        contexts, so parked reads never take every one */
} exec_config;

typedef struct exec_env {
    store *st;
    lease_table *leases; /* executor thread only */
    auth *auth;          /* the checks over the tables in force (auth.h) */
    server_stats *stats;
    disk_floor *disk;
    gc *gc;                   /* its counters, for Admin.Stats */
    uint64_t (*now_ms)(void); /* wall clock, unix ms; injectable */
    exec_config cfg;          /* executor thread only */
} exec_env;

#endif /* SERVER_EXEC_ENV_H */
