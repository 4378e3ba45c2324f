/*
 * chain_methods.c — typed chain steps (once/journal.h): a counter
 * increment as a step, its request for once_chain_commit's next step, and
 * its value read back from a recorded reply.
 *
 * Owns: packing and unpacking of the typed steps' messages.
 * Invariant: a typed step is exactly once_chain_step with the packed
 * request, so it is journaled and resumed like any other.
 * Never: sends or writes anything but through chain.c.
 */
#include <stdlib.h>

#include "client/status.h"
#include "proto/once.pb-c.h"
#include <once/journal.h>

#define INCREMENT "/once.v1.Counter/Increment"

int
once_chain_counter_request(const char *name, int64_t by, void **req,
                           size_t *req_len, once_status *st)
{
    Once__V1__IncrementRequest r = ONCE__V1__INCREMENT_REQUEST__INIT;
    size_t len;

    status_clear(st);
    if (name == NULL || req == NULL || req_len == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "a counter request needs a name and outputs");
    }
    r.name = (char *)name;
    r.by = by;
    len = once__v1__increment_request__get_packed_size(&r);
    if ((*req = malloc(len + 1)) == NULL) {
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "counter request");
    }
    once__v1__increment_request__pack(&r, *req);
    *req_len = len;
    return ONCE_OK;
}

int
once_chain_counter_value(const void *reply, size_t reply_len, int64_t *value,
                         once_status *st)
{
    Once__V1__IncrementResponse *r;

    status_clear(st);
    r = once__v1__increment_response__unpack(NULL, reply_len, reply);
    if (r == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "the reply is not an IncrementResponse");
    }
    if (value != NULL) {
        *value = r->value;
    }
    once__v1__increment_response__free_unpacked(r, NULL);
    return ONCE_OK;
}

int
once_chain_counter_incr(once_chain *ch, const char *name, int64_t by,
                        int64_t *value, once_status *st)
{
    void *req = NULL, *resp = NULL;
    size_t len = 0, resp_len = 0;
    int rv;

    if ((rv = once_chain_counter_request(name, by, &req, &len, st)) !=
        ONCE_OK) {
        return rv;
    }
    rv = once_chain_step(ch, INCREMENT, req, len, NULL, &resp, &resp_len, st);
    free(req);
    if (rv == ONCE_OK) {
        once_status local;
        rv = once_chain_counter_value(resp, resp_len, value, &local);
        if (rv != ONCE_OK && st != NULL) {
            *st = local;
        }
    }
    once_free(resp);
    return rv;
}
