/*
 * methods.c — the typed once.v1 helpers: Counter, Lease, Admin.
 * Lease calls on the handle's own client id also feed its lease health
 * (lost.h): a LEASE_EXPIRED answer or a successful close marks it lost, a
 * successful renewal moves its expiry forward.
 *
 * Owns: packing each method's request message, calling once_call with the
 * method's full name taken from the generated service descriptors (through
 * wire_method_name, so the .proto file stays the only list of names), and
 * unpacking the response message.
 * Invariant: an OK reply whose payload does not unpack as the method's
 * response type ends ONCE_INTERNAL with reason BAD_RESPONSE; st keeps the
 * attempts and replayed of the call.
 * Never: retries or assigns seqs itself (once_call does); never leaks an
 * unpacked message (each is freed with its generated __free_unpacked).
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_impl.h"
#include "lost.h"
#include "retry.h"
#include "status.h"
#include "wire.h"

/*
 * Calls svc/name with the packed req and unpacks the reply as the method's
 * output type. On ONCE_OK *out is the unpacked message; the caller frees it
 * with the generated __free_unpacked of that type.
 */
static int
methods_invoke_d(once_client *c, const ProtobufCServiceDescriptor *svc,
                 const char *name, bool mutating, once_rpc_id *id,
                 const ProtobufCMessage *req, ProtobufCMessage **out,
                 once_status *st, uint32_t deadline_ms)
{
    const ProtobufCMethodDescriptor *md;
    const char *full;
    uint8_t *buf = NULL;
    void *resp = NULL;
    size_t len, resp_len = 0;
    int rv;

    *out = NULL;
    md = protobuf_c_service_descriptor_get_method_by_name(svc, name);
    if (md == NULL || (full = wire_method_name(svc, name)) == NULL ||
        md->input != req->descriptor) {
        return status_set(st, ONCE_INTERNAL, "NO_METHOD",
                          "%s.%s is not in the compiled-in proto", svc->name,
                          name);
    }
    len = protobuf_c_message_get_packed_size(req);
    if ((buf = malloc(len > 0 ? len : 1)) == NULL) {
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, "NO_MEMORY",
                          "out of memory");
    }
    protobuf_c_message_pack(req, buf);

    rv = client_call(c, full, mutating, id, buf, len, &resp, &resp_len, st,
                     deadline_ms);
    if (rv != ONCE_OK) {
        goto out;
    }
    *out = protobuf_c_message_unpack(md->output, NULL, resp_len, resp);
    if (*out == NULL) {
        rv = status_set(st, ONCE_INTERNAL, "BAD_RESPONSE",
                        "%s: the reply payload is not a %s", full,
                        md->output->name);
    }

out:
    free(buf);
    once_free(resp);
    return rv;
}

/* methods_invoke_d with the handle's own deadline. c is not NULL. */
static int
methods_invoke(once_client *c, const ProtobufCServiceDescriptor *svc,
               const char *name, bool mutating, once_rpc_id *id,
               const ProtobufCMessage *req, ProtobufCMessage **out,
               once_status *st)
{
    return methods_invoke_d(c, svc, name, mutating, id, req, out, st,
                            c != NULL ? c->deadline_ms : 1);
}

int
once_counter_incr(once_client *c, const char *name, int64_t by, once_rpc_id *id,
                  int64_t *value, once_status *st)
{
    once_status local;
    Once__V1__IncrementRequest req = ONCE__V1__INCREMENT_REQUEST__INIT;
    ProtobufCMessage *out;
    int rv;

    if (st == NULL) {
        st = &local;
    }
    status_clear(st);
    if (name == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, "BAD_ARGUMENT",
                          "counter name is NULL");
    }
    req.name = (char *)name;
    req.by = by;
    if ((rv = methods_invoke(c, &once__v1__counter__descriptor, "Increment",
                             true, id, &req.base, &out, st)) != ONCE_OK) {
        return rv;
    }
    if (value != NULL) {
        *value = ((Once__V1__IncrementResponse *)out)->value;
    }
    once__v1__increment_response__free_unpacked(
        (Once__V1__IncrementResponse *)out, NULL);
    return ONCE_OK;
}

int
once_counter_get(once_client *c, const char *name, int64_t *value,
                 once_status *st)
{
    once_status local;
    Once__V1__GetRequest req = ONCE__V1__GET_REQUEST__INIT;
    ProtobufCMessage *out;
    int rv;

    if (st == NULL) {
        st = &local;
    }
    status_clear(st);
    if (name == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, "BAD_ARGUMENT",
                          "counter name is NULL");
    }
    req.name = (char *)name;
    if ((rv = methods_invoke(c, &once__v1__counter__descriptor, "Get", false,
                             NULL, &req.base, &out, st)) != ONCE_OK) {
        return rv;
    }
    if (value != NULL) {
        *value = ((Once__V1__GetResponse *)out)->value;
    }
    once__v1__get_response__free_unpacked((Once__V1__GetResponse *)out, NULL);
    return ONCE_OK;
}

int
once_lease_open(once_client *c, const char *principal, uint64_t ttl_ms,
                uint64_t *client_id, uint64_t *granted_ttl_ms, once_status *st)
{
    once_status local;
    Once__V1__OpenLeaseRequest req = ONCE__V1__OPEN_LEASE_REQUEST__INIT;
    Once__V1__OpenLeaseResponse *resp;
    ProtobufCMessage *out;
    int rv;

    if (st == NULL) {
        st = &local;
    }
    status_clear(st);
    if (c == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, "BAD_ARGUMENT",
                          "handle is NULL");
    }
    req.principal = (char *)(principal != NULL ? principal : c->principal);
    req.ttl_ms = ttl_ms;
    /* Not mutating: no rpc id exists before the lease does. */
    if ((rv = methods_invoke(c, &once__v1__lease__descriptor, "OpenLease",
                             false, NULL, &req.base, &out, st)) != ONCE_OK) {
        return rv;
    }
    resp = (Once__V1__OpenLeaseResponse *)out;
    if (resp->max_request_bytes != 0) {
        atomic_store(&c->max_request, resp->max_request_bytes);
    }
    if (client_id != NULL) {
        *client_id = resp->client_id;
    }
    if (granted_ttl_ms != NULL) {
        *granted_ttl_ms = resp->ttl_ms;
    }
    once__v1__open_lease_response__free_unpacked(resp, NULL);
    return ONCE_OK;
}

/* Stats into *base and/or *more (either may be NULL). */
static int
methods_stats(once_client *c, once_stats *base, once_collector_stats *more,
              once_status *st)
{
    Once__V1__StatsRequest req = ONCE__V1__STATS_REQUEST__INIT;
    Once__V1__StatsResponse *r;
    ProtobufCMessage *out;
    int rv;

    if ((rv = methods_invoke(c, &once__v1__admin__descriptor, "Stats", false,
                             NULL, &req.base, &out, st)) != ONCE_OK) {
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

    if (st == NULL) {
        st = &local;
    }
    status_clear(st);
    if (out_stats == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, "BAD_ARGUMENT",
                          "stats output is NULL");
    }
    return methods_stats(c, out_stats, NULL, st);
}

int
once_admin_collector_stats(once_client *c, once_stats *base,
                           once_collector_stats *out, once_status *st)
{
    once_status local;

    if (st == NULL) {
        st = &local;
    }
    status_clear(st);
    if (out == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, "BAD_ARGUMENT",
                          "collector stats output is NULL");
    }
    return methods_stats(c, base, out, st);
}

/* The client id a lease call names: 0 means the handle's own. Returns
 * ONCE_OK or fills st. */
static int
methods_lease_id(once_client *c, uint64_t client_id, uint64_t *id,
                 once_status *st)
{
    if (c == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, "BAD_ARGUMENT",
                          "handle is NULL");
    }
    *id = client_id != 0 ? client_id : c->client_id;
    if (*id == 0) {
        return status_set(st, ONCE_INVALID_ARGUMENT, "NO_LEASE",
                          "client id 0 names the handle's own lease, and "
                          "this handle has none");
    }
    return ONCE_OK;
}

/* A lease call on the handle's own id was answered LEASE_EXPIRED. */
static void
methods_lease_gone(once_client *c, uint64_t id, const once_status *st,
                   const char *what)
{
    if (client_tracks(c, id) && st->code == ONCE_FAILED_PRECONDITION &&
        strcmp(st->reason, "LEASE_EXPIRED") == 0) {
        lost_declare(c, "%s was answered LEASE_EXPIRED: %s", what, st->message);
    }
}

int
client_lease_renew(once_client *c, uint64_t client_id, uint64_t *ttl_ms,
                   uint64_t *remaining_ms, once_status *st,
                   uint32_t deadline_ms)
{
    once_status local;
    Once__V1__RenewLeaseRequest req = ONCE__V1__RENEW_LEASE_REQUEST__INIT;
    Once__V1__RenewLeaseResponse *resp;
    ProtobufCMessage *out;
    uint64_t id = 0;
    int rv;

    if (st == NULL) {
        st = &local;
    }
    status_clear(st);
    if ((rv = methods_lease_id(c, client_id, &id, st)) != ONCE_OK) {
        return rv;
    }
    req.client_id = id;
    if ((rv = methods_invoke_d(c, &once__v1__lease__descriptor, "RenewLease",
                               false, NULL, &req.base, &out, st,
                               deadline_ms)) != ONCE_OK) {
        methods_lease_gone(c, id, st, "RenewLease");
        return rv;
    }
    resp = (Once__V1__RenewLeaseResponse *)out;
    if (client_tracks(c, id)) {
        client_lease_renewed(c, retry_now_ms(), resp->remaining_ms);
    }
    if (ttl_ms != NULL) {
        *ttl_ms = resp->ttl_ms;
    }
    if (remaining_ms != NULL) {
        *remaining_ms = resp->remaining_ms;
    }
    once__v1__renew_lease_response__free_unpacked(resp, NULL);
    return ONCE_OK;
}

int
once_lease_renew(once_client *c, uint64_t client_id, uint64_t *ttl_ms,
                 uint64_t *remaining_ms, once_status *st)
{
    return client_lease_renew(c, client_id, ttl_ms, remaining_ms, st,
                              c != NULL ? c->deadline_ms : 1);
}

int
client_lease_close(once_client *c, uint64_t client_id,
                   uint64_t *records_retained, once_status *st,
                   uint32_t deadline_ms)
{
    once_status local;
    Once__V1__CloseLeaseRequest req = ONCE__V1__CLOSE_LEASE_REQUEST__INIT;
    Once__V1__CloseLeaseResponse *resp;
    ProtobufCMessage *out;
    uint64_t id = 0;
    int rv;

    if (st == NULL) {
        st = &local;
    }
    status_clear(st);
    if ((rv = methods_lease_id(c, client_id, &id, st)) != ONCE_OK) {
        return rv;
    }
    req.client_id = id;
    if ((rv = methods_invoke_d(c, &once__v1__lease__descriptor, "CloseLease",
                               false, NULL, &req.base, &out, st,
                               deadline_ms)) != ONCE_OK) {
        return rv;
    }
    resp = (Once__V1__CloseLeaseResponse *)out;
    if (client_tracks(c, id)) {
        lost_declare(c, "it was closed with CloseLease");
    }
    if (records_retained != NULL) {
        *records_retained = resp->records_retained;
    }
    once__v1__close_lease_response__free_unpacked(resp, NULL);
    return ONCE_OK;
}

int
once_lease_close(once_client *c, uint64_t client_id, uint64_t *records_retained,
                 once_status *st)
{
    return client_lease_close(c, client_id, records_retained, st,
                              c != NULL ? c->deadline_ms : 1);
}

/* Copies a protobuf string into a fixed buffer, truncating. */
static void
methods_copy(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src != NULL ? src : "");
}

int
once_lease_info(once_client *c, uint64_t client_id,
                struct once_lease_info *info, once_status *st)
{
    once_status local;
    Once__V1__LeaseInfoRequest req = ONCE__V1__LEASE_INFO_REQUEST__INIT;
    Once__V1__LeaseInfoResponse *r;
    ProtobufCMessage *out;
    uint64_t id = 0;
    int rv;

    if (st == NULL) {
        st = &local;
    }
    status_clear(st);
    if (info == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, "BAD_ARGUMENT",
                          "lease info output is NULL");
    }
    if ((rv = methods_lease_id(c, client_id, &id, st)) != ONCE_OK) {
        return rv;
    }
    req.client_id = id;
    if ((rv = methods_invoke(c, &once__v1__lease__descriptor, "LeaseInfo",
                             false, NULL, &req.base, &out, st)) != ONCE_OK) {
        return rv;
    }
    r = (Once__V1__LeaseInfoResponse *)out;
    memset(info, 0, sizeof(*info));
    info->client_id = r->client_id;
    methods_copy(info->principal, sizeof(info->principal), r->principal);
    info->state = (int)r->state;
    info->ttl_ms = r->ttl_ms;
    info->remaining_ms = r->remaining_ms;
    info->watermark = r->watermark;
    info->watermark_durable = r->watermark_durable;
    info->records_retained = r->records_retained;
    info->bytes_retained = r->bytes_retained;
    info->max_seq = r->max_seq;
    info->oldest_record_age_ms = r->oldest_record_age_ms;
    once__v1__lease_info_response__free_unpacked(r, NULL);
    return ONCE_OK;
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

    if (st == NULL) {
        st = &local;
    }
    status_clear(st);
    if (listp == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, "BAD_ARGUMENT",
                          "record list output is NULL");
    }
    *listp = NULL;
    req.client_id = client_id;
    req.limit = limit;
    if ((rv = methods_invoke(c, &once__v1__admin__descriptor, "ListRecords",
                             false, NULL, &req.base, &out, st)) != ONCE_OK) {
        return rv;
    }
    r = (Once__V1__ListRecordsResponse *)out;
    /* One block: the header, then the client rows, then the records
     * (both arrays are suitably aligned: every member is 8-byte sized). */
    size = sizeof(*l) + r->n_clients * sizeof(once_client_records) +
           r->n_records * sizeof(once_record_info);
    if ((l = calloc(1, size)) == NULL) {
        once__v1__list_records_response__free_unpacked(r, NULL);
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, "NO_MEMORY",
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
        methods_copy(d->method, sizeof(d->method), s->method);
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

    if (st == NULL) {
        st = &local;
    }
    status_clear(st);
    if (c == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, "BAD_ARGUMENT",
                          "handle is NULL");
    }
    if ((rv = methods_invoke(c, &once__v1__admin__descriptor, "Compact", false,
                             NULL, &req.base, &out, st)) != ONCE_OK) {
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
