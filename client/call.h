/*
 * call.h — the call engine as the layers above it see it: one rpc with
 * its attempts, retries, backoff and deadline (call_do, call.c), and the
 * typed form over protobuf-c messages (invoke.c). Async calls start in
 * groups (call_group.h).
 *
 * Owns: declarations only.
 * Invariant: a layer above (lease.c, methods.c, admin.c, grants.c,
 * inputs.c, client.c, async.c) calls down into the engine; the engine
 * never calls up (it only uses conn.h, slot.h, batch.h and lease_gate.h).
 * The engine's own files share call_impl.h.
 * Never: included by conn.c, slot.c, batch.c or lease_gate.c.
 */
#ifndef CLIENT_CALL_H
#define CLIENT_CALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "once/client.h"
#include "client/call_kind.h"

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
int invoke(once_client *c, const ProtobufCServiceDescriptor *svc,
           const char *name, call_kind kind, once_rpc_id *id,
           const ProtobufCMessage *req, ProtobufCMessage **out, once_status *st,
           uint32_t deadline_ms);

#endif /* CLIENT_CALL_H */
