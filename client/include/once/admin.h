/*
 * once/admin.h — once.v1.Admin: the operator's calls (server statistics,
 * retained completion records, compaction). Under the default policy they
 * need an operator principal.
 *
 * Same conventions as once/client.h (status codes, once_status, ABI rule).
 * once/client.h includes this header at its end, so programs written when
 * these calls were declared there keep compiling; this header includes no
 * other of libonce but once/export.h (no include circle), and names the
 * handle and status types by their tags.
 */
#ifndef ONCE_ADMIN_H
#define ONCE_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <once/export.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct once_client once_client; /* once/client.h */
typedef struct once_status once_status; /* once/client.h */

/* ---- once.v1.Admin ------------------------------------------------------ */

typedef struct once_stats {
    uint64_t requests;
    uint64_t replays;
    uint64_t conflicts;
    uint64_t commits;
    uint64_t fsyncs;
    uint64_t records_stored;
    uint64_t rejected;
    uint64_t leases_opened;
} once_stats;

ONCE_API int once_admin_stats(once_client *c, once_stats *out, once_status *st);

/* The StatsResponse fields that came with the collector (once_stats keeps
 * its original size: the ABI rule of once/client.h). */
typedef struct once_collector_stats {
    uint64_t records_bytes;
    uint64_t reclaimed_total;
    double reclaimed_per_sec;
    uint64_t oldest_record_age_ms;
    uint64_t leases_live;
    uint64_t leases_ended;
    uint64_t gc_passes;
    uint64_t stale;         /* calls refused STALE_RPC */
    uint64_t window_full;   /* calls refused WINDOW_FULL */
    uint64_t lease_expired; /* calls refused LEASE_EXPIRED */
} once_collector_stats;

/* One Stats call filling both *base (may be NULL) and *out, so the two
 * come from the same snapshot. */
ONCE_API int once_admin_collector_stats(once_client *c, once_stats *base,
                                        once_collector_stats *out,
                                        once_status *st);

/*
 * Compact: has onced compact its LevelDB over the whole key range on a
 * thread of its own (operator-only under the default policy). It answers
 * at once; Stats compacting tells when it has ended. *already_running
 * (may be NULL): one was running and no other started; *compactions_before
 * (may be NULL): compactions finished before this call.
 */
ONCE_API int once_admin_compact(once_client *c, bool *already_running,
                                uint64_t *compactions_before, once_status *st);

/* ListRecords rows: per-client retention (ClientRecords) ... */
typedef struct once_client_records {
    uint64_t client_id;
    int state; /* enum once_lease_state */
    uint64_t records;
    uint64_t bytes;
    uint64_t watermark;
    uint64_t watermark_durable;
    uint64_t watermark_lag; /* seqs issued, not acknowledged: max_seq + 1
                               - the first unacknowledged seq (the
                               watermark, or 1 before any ack) */
    uint64_t max_seq;
    uint64_t oldest_record_age_ms;
} once_client_records;

/* ... and one client's records (RecordInfo). */
typedef struct once_record_info {
    uint64_t client_id;
    uint64_t seq;
    char method[128]; /* truncated if longer */
    int code;         /* enum once_code of the stored result */
    uint64_t age_ms;
    uint64_t bytes;
} once_record_info;

typedef struct once_record_list {
    size_t n_clients;
    once_client_records *clients; /* n_clients rows */
    size_t n_records;
    once_record_info *records; /* n_records rows */
    bool truncated;            /* limit cut the list */
} once_record_list;

/*
 * ListRecords. client_id 0: one row per client holding records or a live
 * lease, no records. Otherwise: that client's row (none once it is
 * collected) and its records in seq order. limit: most rows, 0 means the
 * server's default (100), at most 10000. On ONCE_OK *out is one malloc'd
 * block (the arrays live inside it) that the caller frees with once_free();
 * otherwise *out is NULL.
 */
ONCE_API int once_admin_list_records(once_client *c, uint64_t client_id,
                                     uint32_t limit, once_record_list **out,
                                     once_status *st);

#ifdef __cplusplus
}
#endif

#endif /* ONCE_ADMIN_H */
