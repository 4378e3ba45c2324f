/*
 * methods.c — the typed once.v1.Counter calls, libonce's example service:
 * once_counter_incr (new or retry by id->seq), once_counter_incr_new,
 * once_counter_incr_retry, once_counter_get.
 *
 * Owns: each method's request message and the reading of its response.
 * Invariant: st keeps the attempts and replayed of the call.
 * Never: retries or assigns seqs itself (the call engine does); never
 * leaks an unpacked message (each is freed with its generated
 * __free_unpacked).
 * Layer: typed methods, over the call engine (call.h) only.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/async.h"
#include "client/call.h"
#include "client/status.h"
#include "proto/wire.h"

static int
methods_incr(once_client *c, const char *name, int64_t by, call_kind kind,
             once_rpc_id *id, int64_t *value, once_status *st)
{
    once_status local;
    Once__V1__IncrementRequest req = ONCE__V1__INCREMENT_REQUEST__INIT;
    ProtobufCMessage *out;
    int rv;

    if ((rv = status_begin(&st, &local, name, "counter name")) != ONCE_OK) {
        return rv;
    }
    req.name = (char *)name;
    req.by = by;
    if ((rv = invoke(c, &once__v1__counter__descriptor, "Increment", kind, id,
                     &req.base, &out, st, 0)) != ONCE_OK) {
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
once_counter_incr(once_client *c, const char *name, int64_t by, once_rpc_id *id,
                  int64_t *value, once_status *st)
{
    return methods_incr(c, name, by, CALL_EITHER, id, value, st);
}

int
once_counter_incr_new(once_client *c, const char *name, int64_t by,
                      once_rpc_id *id, int64_t *value, once_status *st)
{
    return methods_incr(c, name, by, CALL_NEW, id, value, st);
}

int
once_counter_incr_retry(once_client *c, const char *name, int64_t by,
                        const once_rpc_id *id, int64_t *value, once_status *st)
{
    once_rpc_id copy;

    if (id != NULL) {
        copy = *id;
    }
    return methods_incr(c, name, by, CALL_RETRY, id != NULL ? &copy : NULL,
                        value, st);
}

int
once_counter_get(once_client *c, const char *name, int64_t *value,
                 once_status *st)
{
    once_status local;
    Once__V1__GetRequest req = ONCE__V1__GET_REQUEST__INIT;
    ProtobufCMessage *out;
    int rv;

    if ((rv = status_begin(&st, &local, name, "counter name")) != ONCE_OK) {
        return rv;
    }
    req.name = (char *)name;
    if ((rv = invoke(c, &once__v1__counter__descriptor, "Get", CALL_READ, NULL,
                     &req.base, &out, st, 0)) != ONCE_OK) {
        return rv;
    }
    if (value != NULL) {
        *value = ((Once__V1__GetResponse *)out)->value;
    }
    once__v1__get_response__free_unpacked((Once__V1__GetResponse *)out, NULL);
    return ONCE_OK;
}

int
once_counter_incr_async(once_client *c, const char *name, int64_t by,
                        const once_rpc_id *id, once_done_fn done, void *arg,
                        once_future **fp, once_status *st)
{
    once_status local;
    Once__V1__IncrementRequest req = ONCE__V1__INCREMENT_REQUEST__INIT;
    const char *full;
    uint8_t *buf;
    size_t len;
    int rv;

    if (fp != NULL) {
        *fp = NULL;
    }
    if ((rv = status_begin(&st, &local, name, "counter name")) != ONCE_OK) {
        return rv;
    }
    full = wire_method_name(&once__v1__counter__descriptor, "Increment");
    req.name = (char *)name;
    req.by = by;
    len = once__v1__increment_request__get_packed_size(&req);
    if ((buf = malloc(len > 0 ? len : 1)) == NULL) {
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "out of memory; nothing was sent");
    }
    once__v1__increment_request__pack(&req, buf);
    rv = once_call_async(c, full, true, id, buf, len, done, arg, fp, st);
    free(buf);
    return rv;
}

int
once_future_counter_value(once_future *f, int64_t *value)
{
    Once__V1__IncrementResponse *r;
    int rv;

    if ((rv = once_wait(f, NULL)) != ONCE_OK) {
        return rv;
    }
    /* The payload stays on the future: read it in place. */
    r = once__v1__increment_response__unpack(NULL, f->resp_len, f->resp);
    if (r == NULL) {
        return ONCE_INTERNAL;
    }
    if (value != NULL) {
        *value = r->value;
    }
    once__v1__increment_response__free_unpacked(r, NULL);
    return ONCE_OK;
}
