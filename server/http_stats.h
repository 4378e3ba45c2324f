/*
 * http_stats.h — the HTTP listeners' own figures for the metrics endpoint
 * (docs/metrics.md): each refusal the front door answers before or
 * instead of a call, by reason and HTTP status; connections closed to
 * make room; connections open now.
 *
 * Owns: the counters, all atomics, and the fixed table of the refusals
 * they count (http_stats_row): written by the listener's callbacks
 * (http_srv.c) and the JSON API's handler (http_api.c), on nng's
 * threads, read by anyone (metrics.c renders them).
 * Invariant: every (reason, status) a refusal can carry has a row; one
 * that has none is counted in the last row (reason "OTHER") rather than
 * lost, so the rows sum to every refusal answered.
 * Never: locks, allocates or blocks.
 */
#ifndef SERVER_HTTP_STATS_H
#define SERVER_HTTP_STATS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Rows of the refusal table, the catch-all last. */
#define HTTP_STATS_ROWS 24

typedef struct http_stats {
    _Atomic uint64_t refusals[HTTP_STATS_ROWS]; /* by http_stats_row */
    _Atomic uint64_t evicted; /* closed unanswered to make room */
    _Atomic uint64_t open;    /* HTTP connections open now */
} http_stats;

/* Counts one refusal answered with status and reason (a REASON_*). s
 * may be NULL (nothing counted). */
void http_stats_refused(http_stats *s, const char *reason, unsigned status);

/* Row i's reason and status (i < HTTP_STATS_ROWS). */
void http_stats_row(size_t i, const char **reason, unsigned *status);

#endif /* SERVER_HTTP_STATS_H */
