/*
 * metrics.h — the Prometheus endpoint (--metrics-listen URL): GET /metrics
 * on onced's HTTP listener (http_srv.h), in the text exposition format.
 *
 * Owns: the listener's handler for /metrics, and a publisher thread that keeps
 * time: every METRICS_PUBLISH_MS it reads the figures that need more than
 * an atomic load — bytes on disk (a listing of the data folder), the
 * collector's counters — and asks the executor to publish the lease
 * table's sums (records and bytes retained, oldest record, live leases),
 * which only the executor may read. Everything it publishes lands in
 * atomics.
 * Invariant: the HTTP handler, on nng's threads, reads atomics only — the
 * server's counters (stats.h, stats_calls.h, http_stats.h), the store's
 * counters and the published figures — and renders them; the executor's
 * one extra task is a walk of the lease table, at most one queued at a
 * time.
 * Never: the handler takes a lock, touches LevelDB or the lease table, or
 * waits for the executor. Without --metrics-listen none of this exists.
 */
#ifndef SERVER_METRICS_H
#define SERVER_METRICS_H

#include "server/http_srv.h"
#include "server/server.h"

/* How often the published figures are refreshed. */
#define METRICS_PUBLISH_MS 1000

typedef struct metrics metrics;

/* NULL when url can be served (http://HOST:PORT, path empty, "/" or
 * "/metrics"), else a static sentence saying what is wrong. */
const char *metrics_url_problem(const char *url);

/* Starts the publisher and routes GET /metrics on hs (before it starts)
 * for the running server srv. Returns 0 or an nng error. */
int metrics_open(metrics **mp, http_srv *hs, server *srv);

/* Stops publishing and waits for a publication queued on the executor;
 * after the listener has stopped (no handler runs then). Call before
 * server_close. NULL is ok. */
void metrics_stop(metrics *m);

/* Frees m; after metrics_stop. NULL is ok. */
void metrics_free(metrics *m);

#endif /* SERVER_METRICS_H */
