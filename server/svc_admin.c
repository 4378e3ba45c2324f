/*
 * svc_admin.c — once.v1.Admin: Stats, ListRecords, Compact and Snapshot.
 *
 * Retention figures are derived from the lease table when asked (it is the
 * one place that counts records per client), so there is no second counter
 * to drift; bytes on disk by listing the data folder when asked. Runs on
 * the executor thread like every handler.
 * Never: waits for a compaction — Compact hands it to the store's
 * compaction thread (store/compact.c) and answers at once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gc/gc.h"
#include "lease/lease.h"
#include "server/lease_wire.h"
#include "base/log.h"
#include "proto/once.pb-c.h"
#include "proto/reasons.h"
#include "server/service.h"
#include "store/records.h"

#define LIST_LIMIT_DEFAULT 100
#define LIST_LIMIT_MAX     10000

static void
admin_stats(server_call *c)
{
    Once__V1__StatsResponse resp = ONCE__V1__STATS_RESPONSE__INIT;
    server_stats *ss = c->env->stats;
    lease_sum sum;
    store_counters sc;
    gc_stats gs;
    bool compacting;
    uint64_t compactions, disk = 0;

    store_counters_get(c->env->st, &sc);
    store_compact_state(c->env->st, &compacting, &compactions);
    (void)store_disk_bytes(c->env->st, &disk); /* 0 if unreadable */
    gc_stats_get(c->env->gc, &gs);
    lease_table_sum(c->env->leases, c->now_ms, &sum);
    resp.requests = atomic_load(&ss->requests);
    resp.replays = atomic_load(&ss->replays);
    resp.conflicts = atomic_load(&ss->conflicts);
    resp.rejected = atomic_load(&ss->rejected);
    resp.leases_opened = atomic_load(&ss->leases_opened);
    resp.stale = atomic_load(&ss->stale);
    resp.window_full = atomic_load(&ss->window_full);
    resp.lease_expired = atomic_load(&ss->lease_expired);
    resp.unauthenticated = atomic_load(&ss->unauthenticated);
    resp.permission_denied = atomic_load(&ss->permission_denied);
    resp.commits = sc.commits;
    resp.fsyncs = sc.fsyncs;
    resp.records_stored = sum.records;
    resp.records_bytes = sum.bytes;
    resp.oldest_record_age_ms = lease_sum_oldest_age_ms(&sum, c->now_ms);
    resp.leases_live = sum.live;
    resp.leases_ended = sum.ended;
    resp.reclaimed_total = gs.reclaimed_total;
    resp.reclaimed_per_sec = gs.reclaimed_per_sec;
    resp.gc_passes = gs.passes;
    resp.compacting = compacting;
    resp.compactions = compactions;
    resp.disk_bytes = disk;
    resp.listener_restarts = atomic_load(&ss->listener_restarts);
    resp.lease_quota_refused = atomic_load(&ss->lease_quota);
    resp.lease_capacity_refused = atomic_load(&ss->lease_capacity);
    resp.disk_low = disk_floor_refresh(c->env->disk);
    resp.disk_free_bytes = atomic_load(&c->env->disk->free_bytes);
    resp.disk_low_refused = atomic_load(&c->env->disk->refused);
    resp.conn_limit_drops = atomic_load(&ss->conn_limit_drops);
    resp.conns_dropped = atomic_load(&ss->conns_dropped);
    resp.conns_open = atomic_load(&ss->conns_open);
    resp.conns_refused = atomic_load(&ss->conns_refused);
    resp.conns_evicted = atomic_load(&ss->conns_evicted);
    resp.conns_idle_closed = atomic_load(&ss->conns_idle_closed);
    resp.peers_penalised = atomic_load(&ss->peers_penalised);
    resp.auth_disconnects = atomic_load(&ss->auth_disconnects);
    resp.batches = atomic_load(&ss->batches);
    resp.batch_entries = atomic_load(&ss->batch_entries);
    resp.kv_keys = atomic_load(&ss->kv_keys);
    resp.kv_bytes = atomic_load(&ss->kv_bytes);
    resp.kv_revision = atomic_load(&ss->kv_revision);
    resp.kv_txns = atomic_load(&ss->kv_txns);
    resp.kv_compares_failed = atomic_load(&ss->kv_compares_failed);
    resp.kv_lease_deleted = atomic_load(&ss->kv_lease_deleted);
    resp.replicated = store_replicated(c->env->st);
    (void)store_applied_index(c->env->st, &resp.log_index); /* 0 if not */
    call_reply(c, &resp.base);
}

/* ---- Compact --------------------------------------------------------------
 */

static void
admin_compact(server_call *c)
{
    Once__V1__CompactResponse resp = ONCE__V1__COMPACT_RESPONSE__INIT;
    bool running, already = false;
    uint64_t finished;
    int rv;

    store_compact_state(c->env->st, &running, &finished);
    if ((rv = store_compact_start(c->env->st, &already)) != 0) {
        call_fail(c, ONCE__V1__CODE__UNAVAILABLE, REASON_COMPACT_NOT_STARTED,
                  "cannot start the compaction thread (error %d)", rv);
        return;
    }
    if (!already) {
        log_info("Compact: full-range compaction started (%llu finished "
                 "before)",
                 (unsigned long long)finished);
    }
    resp.already_running = already;
    resp.compactions = finished;
    call_reply(c, &resp.base);
}

/* ---- Snapshot -------------------------------------------------------------
 * One chunk of a pinned LevelDB snapshot (store/snapshot.c) per request,
 * read on the executor thread: a chunk is at most SNAP_CHUNK_MAX bytes, so
 * a request holds other calls back about as long as a large Enqueue.
 */

#define SNAP_CHUNK_DEFAULT (1u << 20)
#define SNAP_CHUNK_MAX     (2u << 20)

typedef struct admin_snap {
    Once__V1__SnapshotPair *rows;
    Once__V1__SnapshotPair **ptrs;
    size_t n;
    size_t cap;
    bool nomem;
} admin_snap;

static int
admin_snap_one(void *arg, const char *key, size_t klen, const char *val,
               size_t vlen)
{
    admin_snap *a = arg;
    Once__V1__SnapshotPair *row;

    if (a->n == a->cap) {
        size_t cap = a->cap * 2 + 64;
        Once__V1__SnapshotPair *rows = realloc(a->rows, cap * sizeof(*rows));
        if (rows == NULL) {
            a->nomem = true;
            return ENOMEM;
        }
        a->rows = rows;
        a->cap = cap;
    }
    row = &a->rows[a->n++];
    once__v1__snapshot_pair__init(row);
    /* Copies: the iterator's bytes live until its next step only. */
    row->key.data = malloc(klen + 1);
    row->value.data = malloc(vlen + 1);
    if (row->key.data == NULL || row->value.data == NULL) {
        a->nomem = true;
        return ENOMEM;
    }
    memcpy(row->key.data, key, klen);
    memcpy(row->value.data, val, vlen);
    row->key.len = klen;
    row->value.len = vlen;
    return 0;
}

static void
admin_snapshot(server_call *c)
{
    const Once__V1__SnapshotRequest *r =
        (const Once__V1__SnapshotRequest *)c->req;
    Once__V1__SnapshotResponse resp = ONCE__V1__SNAPSHOT_RESPONSE__INIT;
    admin_snap a = {0};
    uint64_t id = r->snapshot_id, index = 0;
    bool done = false;
    int rv;

    rv = store_snap_read(c->env->st, &id, c->now_ms, r->after_key.data,
                         r->after_key.len,
                         r->max_bytes == 0 ? SNAP_CHUNK_DEFAULT : r->max_bytes,
                         admin_snap_one, &a, &index, &done);
    if (rv == ENOENT) {
        call_fail(c, ONCE__V1__CODE__NOT_FOUND, REASON_NO_SNAPSHOT,
                  "no snapshot %llu: it was finished, or released after "
                  "%d s without a request; start again with snapshot_id 0",
                  (unsigned long long)r->snapshot_id,
                  STORE_SNAP_IDLE_MS / 1000);
    } else if (rv == EBUSY) {
        call_fail(c, ONCE__V1__CODE__RESOURCE_EXHAUSTED, REASON_SNAPSHOTS_BUSY,
                  "%d snapshots are being read; try again later",
                  STORE_SNAP_SLOTS);
    } else if (rv != 0 || a.nomem) {
        call_store_error(c, a.nomem ? ENOMEM : rv);
    } else {
        if (r->snapshot_id == 0) {
            log_info("Snapshot: snapshot %llx taken at log index %llu",
                     (unsigned long long)id, (unsigned long long)index);
        }
        if ((a.ptrs = calloc(a.n + 1, sizeof(*a.ptrs))) == NULL) {
            call_store_error(c, ENOMEM);
        } else {
            for (size_t i = 0; i < a.n; i++) {
                a.ptrs[i] = &a.rows[i];
            }
            resp.snapshot_id = id;
            resp.log_index = index;
            resp.n_pairs = a.n;
            resp.pairs = a.ptrs;
            resp.done = done;
            call_reply(c, &resp.base);
        }
    }
    for (size_t i = 0; i < a.n; i++) {
        free(a.rows[i].key.data);
        free(a.rows[i].value.data);
    }
    free(a.rows);
    free(a.ptrs);
}

static void
admin_snapshot_validate(server_call *c)
{
    const Once__V1__SnapshotRequest *r =
        (const Once__V1__SnapshotRequest *)c->req;
    if (r->max_bytes > SNAP_CHUNK_MAX) {
        call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_BAD_LIMIT,
                  "max_bytes is at most %u", SNAP_CHUNK_MAX);
    } else if (r->snapshot_id == 0 && r->after_key.len > 0) {
        call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_BAD_SNAPSHOT,
                  "after_key without a snapshot_id");
    }
}

/* ---- ListRecords ----------------------------------------------------------
 */

typedef struct admin_list {
    uint64_t now;
    size_t limit;
    Once__V1__ClientRecords *rows; /* one array, limit long */
    Once__V1__ClientRecords **ptrs;
    size_t n;
    bool truncated;
} admin_list;

static void
admin_client_row(Once__V1__ClientRecords *row, const lease_entry *e,
                 uint64_t now)
{
    once__v1__client_records__init(row);
    row->client_id = e->client_id;
    row->state = lease_wire_state(e, now);
    row->records = e->retained;
    row->bytes = e->retained_bytes;
    row->watermark = e->watermark;
    row->watermark_durable = e->watermark_durable;
    row->max_seq = e->max_seq;
    /* max_seq + 1 would wrap at seq UINT64_MAX */
    row->watermark_lag = e->max_seq >= lease_entry_first_unacked(e)
                             ? e->max_seq - lease_entry_first_unacked(e) + 1
                             : 0;
    row->oldest_record_age_ms =
        e->oldest_ms != 0 && now > e->oldest_ms ? now - e->oldest_ms : 0;
}

static void
admin_list_one(void *arg, lease_entry *e)
{
    admin_list *l = arg;

    if (l->n == l->limit) {
        l->truncated = true;
        return;
    }
    admin_client_row(&l->rows[l->n], e, l->now);
    l->ptrs[l->n] = &l->rows[l->n];
    l->n++;
}

typedef struct admin_recs {
    uint64_t now;
    size_t limit;
    Once__V1__RecordInfo *rows;
    Once__V1__RecordInfo **ptrs;
    record **recs; /* unpacked, freed after the reply is packed */
    size_t n;
    bool truncated;
} admin_recs;

static int
admin_rec_one(void *arg, const char *key, size_t klen, const char *val,
              size_t vlen)
{
    admin_recs *a = arg;
    Once__V1__RecordInfo *row;
    record *r;

    if (a->n == a->limit) {
        a->truncated = true;
        return 1;
    }
    if (klen != RECORD_KEY_LEN ||
        (r = once__store__v1__completion_record__unpack(
             NULL, vlen, (const uint8_t *)val)) == NULL) {
        return 0;
    }
    row = &a->rows[a->n];
    once__v1__record_info__init(row);
    row->client_id = wire_get_be64((const uint8_t *)key + 2);
    row->seq = wire_get_be64((const uint8_t *)key + 10);
    row->method = r->method;
    row->code = (Once__V1__Code)r->code;
    row->age_ms =
        a->now > r->completed_unix_ms ? a->now - r->completed_unix_ms : 0;
    row->bytes = klen + vlen;
    a->recs[a->n] = r;
    a->ptrs[a->n] = row;
    a->n++;
    return 0;
}

static void
admin_list_records(server_call *c)
{
    const Once__V1__ListRecordsRequest *r =
        (const Once__V1__ListRecordsRequest *)c->req;
    Once__V1__ListRecordsResponse resp = ONCE__V1__LIST_RECORDS_RESPONSE__INIT;
    size_t limit = r->limit == 0 ? LIST_LIMIT_DEFAULT : r->limit;
    admin_list l = {c->now_ms, 0, NULL, NULL, 0, false};
    admin_recs a = {c->now_ms, 0, NULL, NULL, NULL, 0, false};
    uint8_t start[RECORD_KEY_LEN];
    lease_entry *e;

    if (limit > LIST_LIMIT_MAX) {
        limit = LIST_LIMIT_MAX;
    }
    l.limit = r->client_id == 0 ? limit : 1;
    l.rows = calloc(l.limit, sizeof(*l.rows));
    l.ptrs = calloc(l.limit, sizeof(*l.ptrs));
    if (l.rows == NULL || l.ptrs == NULL) {
        call_store_error(c, ENOMEM);
        goto out;
    }
    if (r->client_id == 0) {
        lease_table_each(c->env->leases, admin_list_one, &l);
    } else {
        if ((e = lease_table_find(c->env->leases, r->client_id)) != NULL) {
            admin_list_one(&l, e);
        }
        a.limit = limit;
        a.rows = calloc(limit, sizeof(*a.rows));
        a.ptrs = calloc(limit, sizeof(*a.ptrs));
        a.recs = calloc(limit, sizeof(*a.recs));
        if (a.rows == NULL || a.ptrs == NULL || a.recs == NULL) {
            call_store_error(c, ENOMEM);
            goto out;
        }
        records_key(r->client_id, 0, start);
        store_scan_from(c->env->st, start, sizeof(start), start, 10,
                        admin_rec_one, &a);
    }
    resp.n_clients = l.n;
    resp.clients = l.ptrs;
    resp.n_records = a.n;
    resp.records = a.ptrs;
    resp.truncated = l.truncated || a.truncated;
    call_reply(c, &resp.base);
out:
    for (size_t i = 0; i < a.n; i++) {
        records_free(a.recs[i]);
    }
    free(a.recs);
    free(a.rows);
    free(a.ptrs);
    free(l.rows);
    free(l.ptrs);
}

static void
admin_list_validate(server_call *c)
{
    const Once__V1__ListRecordsRequest *r =
        (const Once__V1__ListRecordsRequest *)c->req;
    if (r->limit > LIST_LIMIT_MAX) {
        call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_BAD_LIMIT,
                  "limit is at most %d", LIST_LIMIT_MAX);
    }
}

static const service_method svc_admin_methods[] = {
    {"/once.v1.Admin/Stats", 0, NULL, admin_stats, NULL},
    {"/once.v1.Admin/ListRecords", 0, admin_list_validate, admin_list_records,
     NULL},
    {"/once.v1.Admin/Compact", 0, NULL, admin_compact, NULL},
    {"/once.v1.Admin/Snapshot", 0, admin_snapshot_validate, admin_snapshot,
     NULL},
};
const service_ops svc_admin_ops = {
    .name = "once.v1.Admin",
    .methods = svc_admin_methods,
    .nmethods = sizeof(svc_admin_methods) / sizeof(svc_admin_methods[0]),
};
