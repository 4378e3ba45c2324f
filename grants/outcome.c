/*
 * outcome.c — filling a grants_outcome: a failure with its reason, an OK
 * with its packed response; and freeing a minted credential.
 *
 * Owns the outcome's strings and the packed response buffer it hands to
 * the caller (rules.h: the caller frees o->resp).
 * Never: reads or stages a row.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "grants/rules_impl.h"

void
grants_vfail(grants_outcome *o, int code, const char *reason, const char *fmt,
             va_list ap)
{
    o->code = code;
    snprintf(o->reason, sizeof(o->reason), "%s", reason);
    vsnprintf(o->message, sizeof(o->message), fmt, ap);
}

void
grants_fail(grants_outcome *o, int code, const char *reason, const char *fmt,
            ...)
{
    va_list ap;

    va_start(ap, fmt);
    grants_vfail(o, code, reason, fmt, ap);
    va_end(ap);
}

void
grants_ok(grants_outcome *o, const ProtobufCMessage *m)
{
    size_t len = protobuf_c_message_get_packed_size(m);

    if ((o->resp = malloc(len > 0 ? len : 1)) == NULL) {
        o->err = ENOMEM;
        return;
    }
    protobuf_c_message_pack(m, o->resp);
    o->resp_len = len;
    o->code = CODE(OK);
}

void
grants_end(grants_outcome *o, int rv, const ProtobufCMessage *m)
{
    if (rv != 0) {
        o->err = rv;
    } else {
        grants_ok(o, m);
    }
}

void
grants_credential_free(Once__V1__Credential *c)
{
    grants_credential_fini(c);
    free(c);
}
