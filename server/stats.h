/*
 * stats.h — the server's counters, read by Admin.Stats.
 *
 * Plain atomics: written by the executor, the listener, the connection
 * table and the verifier; read by anyone.
 */
#ifndef SERVER_STATS_H
#define SERVER_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include "server/http_stats.h"
#include "server/stats_calls.h"

typedef struct server_stats {
    _Atomic uint64_t requests;  /* envelopes received */
    _Atomic uint64_t replays;   /* stored results returned to retries */
    _Atomic uint64_t conflicts; /* same rpc id, other payload */
    _Atomic uint64_t rejected;  /* answered before execution, not OK */
    _Atomic uint64_t leases_opened;
    _Atomic uint64_t stale;             /* seq below the watermark */
    _Atomic uint64_t window_full;       /* too many unacknowledged seqs */
    _Atomic uint64_t lease_expired;     /* call under an ended lease */
    _Atomic uint64_t unauthenticated;   /* refused UNAUTHENTICATED */
    _Atomic uint64_t permission_denied; /* refused PERMISSION_DENIED */
    _Atomic uint64_t listener_restarts; /* ipc listeners started again
                                           (listen_watch.h) */
    _Atomic uint64_t conn_limit_drops;  /* requests dropped unread: their
                                           connection had --conn-inflight
                                           replies pending (listener.h) */
    _Atomic uint64_t conns_dropped;     /* connections closed after a reply
                                           waited --send-timeout */
    _Atomic uint64_t batches;           /* batch envelopes whose entries ran */
    _Atomic uint64_t batch_entries;     /* entries of those batches */
    _Atomic uint64_t lease_quota;       /* OpenLease refused LEASE_QUOTA */
    _Atomic uint64_t lease_capacity;    /* OpenLease refused LEASE_CAPACITY */
    /* once.v1.KV (svc_kv.c): Txns executed (replays not counted), those
     * whose compares failed (the else branch ran), keys deleted because
     * their lease ended; and, as of the last write staged, the store's
     * keys, their bytes (keys + values) and its revision. */
    _Atomic uint64_t kv_txns;
    _Atomic uint64_t kv_compares_failed;
    _Atomic uint64_t kv_lease_deleted;
    _Atomic uint64_t kv_keys;
    _Atomic uint64_t kv_bytes;
    _Atomic uint64_t kv_revision;
    /* The outbox (svc_kv.c, svc_outbox.c): events appended (replays add
     * none), Reads answered after a wait (long-poll). */
    _Atomic uint64_t outbox_events;
    _Atomic uint64_t outbox_waits;
    /* Connections (conns.h): open now; refused when they opened;
     * closed to make room for a new one; closed after
     * --conn-idle-timeout; peers penalised; connections closed after
     * CONNS_AUTH_FAILS_MAX failed authentications in a row. */
    _Atomic uint64_t conns_open;
    _Atomic uint64_t conns_refused;
    _Atomic uint64_t conns_evicted;
    _Atomic uint64_t conns_idle_closed;
    _Atomic uint64_t peers_penalised;
    _Atomic uint64_t auth_disconnects;
    http_stats http;   /* the HTTP listeners' refusals and connections
                          (http_stats.h) */
    stats_calls calls; /* by method and code, latency, group commit
                          (the metrics endpoint, metrics.h) */
} server_stats;

#define STATS_INC(s, field) atomic_fetch_add(&(s)->field, 1)

#endif /* SERVER_STATS_H */
