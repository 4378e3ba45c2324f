/*
 * methods.c — the typed once.v1 helpers: Counter, Lease, Admin.
 *
 * Owns: packing each method's request message, calling once_call with the
 * method's full name taken from the generated service descriptors (through
 * wire_methods, so the .proto file stays the only list of names), and
 * unpacking the response message.
 * Invariant: an OK reply whose payload does not unpack as the method's
 * response type ends ONCE_INTERNAL with reason BAD_RESPONSE; st keeps the
 * attempts and replayed of the call.
 * Never: retries or assigns seqs itself (once_call does); never leaks an
 * unpacked message (each is freed with its generated __free_unpacked).
 */
#include <stdlib.h>
#include <string.h>

#include "client_impl.h"
#include "status.h"
#include "wire.h"

/* The full name of svc's method called name, or NULL. Static storage. */
static const char *
methods_name(const ProtobufCServiceDescriptor *svc, const char *name)
{
    size_t n;
    const wire_method *t = wire_methods(&n);

    for (size_t i = 0; i < n; i++) {
        if (t[i].service == svc && strcmp(t[i].method->name, name) == 0) {
            return t[i].full_name;
        }
    }
    return NULL;
}

/*
 * Calls svc/name with the packed req and unpacks the reply as the method's
 * output type. On ONCE_OK *out is the unpacked message; the caller frees it
 * with the generated __free_unpacked of that type.
 */
static int
methods_invoke(once_client *c, const ProtobufCServiceDescriptor *svc,
               const char *name, bool mutating, once_rpc_id *id,
               const ProtobufCMessage *req, ProtobufCMessage **out,
               once_status *st)
{
    const ProtobufCMethodDescriptor *md;
    const char *full;
    uint8_t *buf = NULL;
    void *resp = NULL;
    size_t len, resp_len = 0;
    int rv;

    *out = NULL;
    md = protobuf_c_service_descriptor_get_method_by_name(svc, name);
    if (md == NULL || (full = methods_name(svc, name)) == NULL ||
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

    rv = once_call(c, full, mutating, id, buf, len, &resp, &resp_len, st);
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
    if (client_id != NULL) {
        *client_id = resp->client_id;
    }
    if (granted_ttl_ms != NULL) {
        *granted_ttl_ms = resp->ttl_ms;
    }
    once__v1__open_lease_response__free_unpacked(resp, NULL);
    return ONCE_OK;
}

int
once_admin_stats(once_client *c, once_stats *out_stats, once_status *st)
{
    once_status local;
    Once__V1__StatsRequest req = ONCE__V1__STATS_REQUEST__INIT;
    Once__V1__StatsResponse *r;
    ProtobufCMessage *out;
    int rv;

    if (st == NULL) {
        st = &local;
    }
    status_clear(st);
    if (out_stats == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, "BAD_ARGUMENT",
                          "stats output is NULL");
    }
    if ((rv = methods_invoke(c, &once__v1__admin__descriptor, "Stats", false,
                             NULL, &req.base, &out, st)) != ONCE_OK) {
        return rv;
    }
    r = (Once__V1__StatsResponse *)out;
    out_stats->requests = r->requests;
    out_stats->replays = r->replays;
    out_stats->conflicts = r->conflicts;
    out_stats->commits = r->commits;
    out_stats->fsyncs = r->fsyncs;
    out_stats->records_stored = r->records_stored;
    out_stats->rejected = r->rejected;
    out_stats->leases_opened = r->leases_opened;
    once__v1__stats_response__free_unpacked(r, NULL);
    return ONCE_OK;
}
