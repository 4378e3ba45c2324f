/*
 * admin.c — the typed once.v1.Admin calls (once/admin.h): Stats,
 * ListRecords, Compact.
 *
 * Owns: each method's request message and the copying of its response
 * into the plain structs of once/admin.h.
 * Invariant: a record list is one malloc'd block the caller frees with
 * once_free; on failure *out is NULL.
 * Never: retries by itself (the call engine does); never leaks an
 * unpacked message.
 * Layer: typed methods, over the call engine (call.h) only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/call.h"
#include "once/admin.h"
#include "client/status.h"
#include "proto/wire.h"

/* Stats into *base and/or *more (either may be NULL). */
static int
admin_stats(once_client *c, once_stats *base, once_collector_stats *more,
            once_status *st)
{
    Once__V1__StatsRequest req = ONCE__V1__STATS_REQUEST__INIT;
    Once__V1__StatsResponse *r;
    ProtobufCMessage *out;
    int rv;

    if ((rv = invoke(c, &once__v1__admin__descriptor, "Stats", CALL_READ, NULL,
                     &req.base, &out, st, 0)) != ONCE_OK) {
        return rv;
    }
    r = (Once__V1__StatsResponse *)out;
    if (base != NULL) {
        base->requests = r->requests;
        base->replays = r->replays;
        base->conflicts = r->conflicts;
        base->commits = r->commits;
        base->fsyncs = r->fsyncs;
        base->records_stored = r->records_stored;
        base->rejected = r->rejected;
        base->leases_opened = r->leases_opened;
    }
    if (more != NULL) {
        more->records_bytes = r->records_bytes;
        more->reclaimed_total = r->reclaimed_total;
        more->reclaimed_per_sec = r->reclaimed_per_sec;
        more->oldest_record_age_ms = r->oldest_record_age_ms;
        more->leases_live = r->leases_live;
        more->leases_ended = r->leases_ended;
        more->gc_passes = r->gc_passes;
        more->stale = r->stale;
        more->window_full = r->window_full;
        more->lease_expired = r->lease_expired;
    }
    once__v1__stats_response__free_unpacked(r, NULL);
    return ONCE_OK;
}

int
once_admin_stats(once_client *c, once_stats *out_stats, once_status *st)
{
    once_status local;
    int rv;

    if ((rv = status_begin(&st, &local, out_stats, "stats output")) !=
        ONCE_OK) {
        return rv;
    }
    return admin_stats(c, out_stats, NULL, st);
}

int
once_admin_collector_stats(once_client *c, once_stats *base,
                           once_collector_stats *out, once_status *st)
{
    once_status local;
    int rv;

    if ((rv = status_begin(&st, &local, out, "collector stats output")) !=
        ONCE_OK) {
        return rv;
    }
    return admin_stats(c, base, out, st);
}

/* Copies a protobuf string into a fixed buffer, truncating. */
static void
admin_copy(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src != NULL ? src : "");
}

int
once_admin_list_records(once_client *c, uint64_t client_id, uint32_t limit,
                        once_record_list **listp, once_status *st)
{
    once_status local;
    Once__V1__ListRecordsRequest req = ONCE__V1__LIST_RECORDS_REQUEST__INIT;
    Once__V1__ListRecordsResponse *r;
    ProtobufCMessage *out;
    once_record_list *l;
    size_t size;
    int rv;

    if ((rv = status_begin(&st, &local, listp, "record list output")) !=
        ONCE_OK) {
        return rv;
    }
    *listp = NULL;
    req.client_id = client_id;
    req.limit = limit;
    if ((rv = invoke(c, &once__v1__admin__descriptor, "ListRecords", CALL_READ,
                     NULL, &req.base, &out, st, 0)) != ONCE_OK) {
        return rv;
    }
    r = (Once__V1__ListRecordsResponse *)out;
    /* One block: the header, then the client rows, then the records
     * (both arrays are suitably aligned: every member is 8-byte sized). */
    size = sizeof(*l) + r->n_clients * sizeof(once_client_records) +
           r->n_records * sizeof(once_record_info);
    if ((l = calloc(1, size)) == NULL) {
        once__v1__list_records_response__free_unpacked(r, NULL);
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "out of memory for %zu rows",
                          r->n_clients + r->n_records);
    }
    l->n_clients = r->n_clients;
    l->clients = (once_client_records *)(void *)(l + 1);
    l->n_records = r->n_records;
    l->records = (once_record_info *)(void *)(l->clients + r->n_clients);
    l->truncated = r->truncated;
    for (size_t i = 0; i < r->n_clients; i++) {
        const Once__V1__ClientRecords *s = r->clients[i];
        once_client_records *d = &l->clients[i];
        d->client_id = s->client_id;
        d->state = (int)s->state;
        d->records = s->records;
        d->bytes = s->bytes;
        d->watermark = s->watermark;
        d->watermark_durable = s->watermark_durable;
        d->watermark_lag = s->watermark_lag;
        d->max_seq = s->max_seq;
        d->oldest_record_age_ms = s->oldest_record_age_ms;
    }
    for (size_t i = 0; i < r->n_records; i++) {
        const Once__V1__RecordInfo *s = r->records[i];
        once_record_info *d = &l->records[i];
        d->client_id = s->client_id;
        d->seq = s->seq;
        admin_copy(d->method, sizeof(d->method), s->method);
        d->code = (int)s->code;
        d->age_ms = s->age_ms;
        d->bytes = s->bytes;
    }
    once__v1__list_records_response__free_unpacked(r, NULL);
    *listp = l;
    return ONCE_OK;
}

int
once_admin_compact(once_client *c, bool *already_running,
                   uint64_t *compactions_before, once_status *st)
{
    Once__V1__CompactRequest req = ONCE__V1__COMPACT_REQUEST__INIT;
    Once__V1__CompactResponse *r;
    ProtobufCMessage *out;
    once_status local;
    int rv;

    if ((rv = status_begin(&st, &local, c, "handle")) != ONCE_OK) {
        return rv;
    }
    if ((rv = invoke(c, &once__v1__admin__descriptor, "Compact", CALL_READ,
                     NULL, &req.base, &out, st, 0)) != ONCE_OK) {
        return rv;
    }
    r = (Once__V1__CompactResponse *)out;
    if (already_running != NULL) {
        *already_running = r->already_running;
    }
    if (compactions_before != NULL) {
        *compactions_before = r->compactions;
    }
    once__v1__compact_response__free_unpacked(r, NULL);
    return ONCE_OK;
}
