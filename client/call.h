/*
 * call.h — the call engine: one rpc with its attempts, retries, backoff
 * and deadline (call.c), and the typed form over protobuf-c messages
 * (invoke.c).
 *
 * Owns: declarations only.
 * Invariant: a layer above (lease.c, methods.c, admin.c, grants.c,
 * inputs.c, client.c) calls down into the engine; the engine never calls
 * up (it only uses conn.h, slot.h and lease_gate.h).
 * Never: included by conn.c, slot.c or lease_gate.c.
 */
#ifndef CLIENT_CALL_H
#define CLIENT_CALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "once/client.h"

/* What kind of call: read-only, or mutating with a new or a known id. */
typedef enum call_kind {
    CALL_READ,   /* not mutating: no rpc id */
    CALL_NEW,    /* a fresh seq of the handle's id, written to *id */
    CALL_RETRY,  /* exactly *id */
    CALL_EITHER, /* once_call's rule: id NULL or seq 0 is NEW, else RETRY,
                    refusing an own id whose reply was delivered */
} call_kind;

/* One call. deadline_ms over all attempts, 0: the handle's. id as kind
 * says (NULL allowed for READ and NEW). resp as once_call. Returns the
 * code; st (may be NULL) filled. */
int call_do(once_client *c, const char *method, call_kind kind, once_rpc_id *id,
            const void *req, size_t req_len, void **resp, size_t *resp_len,
            once_status *st, uint32_t deadline_ms);

/*
 * Calls svc/name with the packed req and unpacks the reply as the method's
 * output type (invoke.c). On ONCE_OK *out is the unpacked message; the
 * caller frees it with the generated __free_unpacked of that type. An OK
 * reply that does not unpack ends ONCE_INTERNAL/BAD_RESPONSE.
 */
/* One call of a group (call_group): its arguments as call_do's (deadline:
 * the handle's), and what became of it. */
typedef struct call_group_entry {
    const char *method;
    call_kind kind;
    once_rpc_id *id;
    const void *req;
    size_t req_len;
    void **resp;
    size_t *resp_len;
    once_status *st;
    int rv;                 /* done: the call's result, as call_do's */
    bool done;              /* finished by call_group */
    struct call_rest *rest; /* not done: the rest, for call_resume */
} call_group_entry;

/*
 * The first attempt of n calls (at most BATCH_ENTRIES_MAX) in as few
 * messages as fit (one batch envelope, or one plain request for one
 * call), on the calling thread. A call that got its final reply is done
 * (rv, *st, *resp); one that must retry (no reply, UNAVAILABLE,
 * WINDOW_FULL, or nothing sent) is left in rest with every rule of call_do
 * intact: call_resume runs the rest of it — backoff, later attempts,
 * OUTCOME_UNKNOWN — as call_do would have after that first attempt.
 */
void call_group(once_client *c, call_group_entry *g, size_t n);

/* The rest of e's call (rest NULL: e->rest), blocking; sets e->rv and
 * e->done and returns rv. */
int call_resume(once_client *c, call_group_entry *e, struct call_rest *rest);

int invoke(once_client *c, const ProtobufCServiceDescriptor *svc,
           const char *name, call_kind kind, once_rpc_id *id,
           const ProtobufCMessage *req, ProtobufCMessage **out, once_status *st,
           uint32_t deadline_ms);

#endif /* CLIENT_CALL_H */
