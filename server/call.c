/*
 * call.c — setting a call's outcome.
 */
#include "server/call.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "proto/once.pb-c.h"
#include "proto/reasons.h"

void
call_fail(server_call *c, int code, const char *reason, const char *fmt, ...)
{
    va_list ap;

    c->code = code;
    snprintf(c->reason, sizeof(c->reason), "%s", reason != NULL ? reason : "");
    va_start(ap, fmt);
    vsnprintf(c->message, sizeof(c->message), fmt, ap);
    va_end(ap);
    free(c->resp);
    c->resp = NULL;
    c->resp_len = 0;
}

int
call_reply(server_call *c, const ProtobufCMessage *resp)
{
    size_t len = protobuf_c_message_get_packed_size(resp);
    uint8_t *buf = malloc(len > 0 ? len : 1);

    if (buf == NULL) {
        call_fail(c, ONCE__V1__CODE__INTERNAL, REASON_NO_MEMORY,
                  "out of memory packing the response");
        return ENOMEM;
    }
    protobuf_c_message_pack(resp, buf);
    free(c->resp);
    c->resp = buf;
    c->resp_len = len;
    c->code = ONCE__V1__CODE__OK;
    c->reason[0] = '\0';
    c->message[0] = '\0';
    return 0;
}

void
call_store_error(server_call *c, int err)
{
    if (err == EBADMSG) {
        /* Damaged stored data: never guessed around, never retried into a
         * different answer. */
        log_error("%s (rpc id %llu:%llu): stored data is damaged: answered "
                  "DATA_LOSS; restore the data folder from a backup",
                  c->wm != NULL ? c->wm->full_name : "call",
                  (unsigned long long)c->client_id, (unsigned long long)c->seq);
        call_fail(c, ONCE__V1__CODE__DATA_LOSS, REASON_DATA_CORRUPT,
                  "the stored data this call needs is damaged (a LevelDB "
                  "checksum failed); it is not answered from it");
        c->transient = true; /* not recorded: the rpc id stays unused */
        return;
    }
    call_fail(c, ONCE__V1__CODE__INTERNAL, REASON_STORE, "store error: %s",
              strerror(err));
    c->transient = true;
}
