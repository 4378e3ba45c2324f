/*
 * invoke.c — the typed form of a call (call.h): a protobuf-c request in,
 * the method's response message out.
 *
 * Owns: packing each request message, the method's full name taken from
 * the generated service descriptors (wire_method_name, so the .proto file
 * stays the only list of names), and unpacking the response message.
 * Invariant: an OK reply whose payload does not unpack as the method's
 * response type ends ONCE_INTERNAL with reason BAD_RESPONSE; st keeps the
 * attempts and replayed of the call.
 * Never: retries or assigns seqs itself (call_do does).
 */
#include <stdlib.h>

#include "client/call.h"
#include "client/status.h"
#include "proto/wire.h"

int
invoke(once_client *c, const ProtobufCServiceDescriptor *svc, const char *name,
       call_kind kind, once_rpc_id *id, const ProtobufCMessage *req,
       ProtobufCMessage **out, once_status *st, uint32_t deadline_ms)
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
        return status_set(st, ONCE_INTERNAL, ONCE_REASON_NO_METHOD,
                          "%s.%s is not in the compiled-in proto", svc->name,
                          name);
    }
    len = protobuf_c_message_get_packed_size(req);
    if ((buf = malloc(len > 0 ? len : 1)) == NULL) {
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "out of memory");
    }
    protobuf_c_message_pack(req, buf);

    rv =
        call_do(c, full, kind, id, buf, len, &resp, &resp_len, st, deadline_ms);
    if (rv != ONCE_OK) {
        goto out;
    }
    *out = protobuf_c_message_unpack(md->output, NULL, resp_len, resp);
    if (*out == NULL) {
        rv = status_set(st, ONCE_INTERNAL, ONCE_REASON_BAD_RESPONSE,
                        "%s: the reply payload is not a %s", full,
                        md->output->name);
    }

out:
    free(buf);
    free(resp);
    return rv;
}
