/*
 * http_head.c — the Once-* headers of http_head.h.
 */
#include "server/http_head.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "proto/names.h"
#include "base/number.h"
#include "proto/once.pb-c.h"
#include "proto/reasons.h"

bool
http_refusal(http_outcome *o, int status, int code, const char *reason,
             const char *fmt, ...)
{
    va_list ap;

    o->status = status;
    o->code = code;
    o->reason = reason;
    va_start(ap, fmt);
    vsnprintf(o->message, sizeof(o->message), fmt, ap);
    va_end(ap);
    return false;
}

/* A refusal of a header: "what how". */
static bool
http_head_refuse(http_outcome *o, int code, const char *reason,
                 const char *what, const char *how)
{
    return http_refusal(o, 0, code, reason, "%s %s", what, how);
}

/* Header name of req, NULL when absent or empty (curl -H "Name;"). */
static const char *
http_head_get(nng_http_req *req, const char *name)
{
    const char *s = nng_http_req_get_header(req, name);

    return s != NULL && s[0] != '\0' ? s : NULL;
}

/* A decimal header into *v (untouched when absent); false when present
 * and not a number. */
static bool
http_head_number(nng_http_req *req, const char *name, uint64_t max, uint64_t *v,
                 const char **text, http_outcome *o)
{
    const char *s = http_head_get(req, name);
    uint64_t n;

    if (text != NULL) {
        *text = s != NULL ? s : "";
    }
    if (s == NULL) {
        return true;
    }
    if (number_parse_u64_all(s, &n) != 0 || n > max) {
        return http_head_refuse(o, ONCE__V1__CODE__INVALID_ARGUMENT,
                                REASON_HTTP_BAD_HEADER, name,
                                "is a decimal number (docs/http.md)");
    }
    *v = n;
    return true;
}

/* Once-Rpc-Id: C:S, two decimal numbers, both non-zero. */
static bool
http_head_rpc_id(nng_http_req *req, http_head *h, http_outcome *o)
{
    const char *s = http_head_get(req, "Once-Rpc-Id");
    const char *end;

    h->rpc_id_text = s != NULL ? s : "";
    if (s == NULL) {
        return true;
    }
    if (number_parse_u64(s, &end, &h->client_id) != 0 || *end != ':' ||
        number_parse_u64_all(end + 1, &h->seq) != 0 || h->client_id == 0 ||
        h->seq == 0) {
        return http_head_refuse(o, ONCE__V1__CODE__INVALID_ARGUMENT,
                                REASON_HTTP_BAD_HEADER, "Once-Rpc-Id",
                                "is CLIENT:SEQ, two non-zero decimal numbers "
                                "(the client id from OpenLease, e.g. 7:1)");
    }
    return true;
}

bool
http_head_read(nng_http_req *req, http_head *h, http_outcome *o)
{
    uint64_t attempt = 0;
    const char *p;

    memset(h, 0, sizeof(*h));
    o->status = 0;
    if (!http_head_rpc_id(req, h, o) ||
        !http_head_number(req, "Once-First-Incomplete", UINT64_MAX,
                          &h->first_incomplete, &h->first_text, o) ||
        !http_head_number(req, "Once-Attempt", UINT32_MAX, &attempt, NULL, o) ||
        !http_head_number(req, "Once-Deadline-Ms", UINT64_MAX, &h->deadline_ms,
                          NULL, o)) {
        return false;
    }
    h->attempt = (uint32_t)attempt;
    p = http_head_get(req, "Once-Principal");
    h->principal = p != NULL ? p : "";
    if (strlen(h->principal) > PRINCIPAL_NAME_MAX) {
        return http_head_refuse(o, ONCE__V1__CODE__INVALID_ARGUMENT,
                                REASON_HTTP_BAD_HEADER, "Once-Principal",
                                "is longer than a principal's name may be");
    }
    h->tag = http_head_get(req, "Once-Tag");
    return true;
}

/* The tag's 32 bytes from 64 hex digits or base64 (padded or not). */
static bool
http_head_tag(const char *text, uint8_t tag[AUTH_TAG_BYTES])
{
    size_t n = strlen(text), got = 0;

    if (n == 2 * AUTH_TAG_BYTES) {
        return sodium_hex2bin(tag, AUTH_TAG_BYTES, text, n, NULL, &got, NULL) ==
                   0 &&
               got == AUTH_TAG_BYTES;
    }
    return (sodium_base642bin(tag, AUTH_TAG_BYTES, text, n, NULL, &got, NULL,
                              sodium_base64_VARIANT_ORIGINAL) == 0 ||
            sodium_base642bin(tag, AUTH_TAG_BYTES, text, n, NULL, &got, NULL,
                              sodium_base64_VARIANT_ORIGINAL_NO_PADDING) ==
                0) &&
           got == AUTH_TAG_BYTES;
}

bool
http_head_auth(const http_head *h, auth *a, const char *method,
               const void *body, size_t blen, uint8_t key[AUTH_KEY_BYTES],
               bool *sign, http_outcome *o)
{
    uint8_t tag[AUTH_TAG_BYTES];
    char shown[64];
    bool enabled, known;
    const auth_tag_part parts[] = {
        {method, strlen(method)},
        {"\n", 1},
        {h->rpc_id_text, strlen(h->rpc_id_text)},
        {"\n", 1},
        {h->first_text, strlen(h->first_text)},
        {"\n", 1},
        {body, blen},
    };

    *sign = false;
    known = auth_key_copy(a, h->principal, key, &enabled, NULL);
    if (!enabled) {
        return true; /* OPEN: the principal is a label */
    }
    o->status = 0;
    if (h->principal[0] == '\0') {
        return http_head_refuse(o, ONCE__V1__CODE__UNAUTHENTICATED,
                                REASON_MISSING_PRINCIPAL, "the request",
                                "names no principal (Once-Principal)");
    }
    if (h->tag == NULL) {
        return http_head_refuse(o, ONCE__V1__CODE__UNAUTHENTICATED,
                                REASON_MISSING_TAG, "onced authenticates:",
                                "sign the request (Once-Tag, docs/http.md "
                                "\"Signing\")");
    }
    if (!http_head_tag(h->tag, tag)) {
        return http_head_refuse(o, ONCE__V1__CODE__INVALID_ARGUMENT,
                                REASON_HTTP_BAD_HEADER, "Once-Tag",
                                "is 64 hex digits or base64 of 32 bytes");
    }
    if (!known || !auth_tag_verify_parts(
                      tag, parts, sizeof(parts) / sizeof(parts[0]), key)) {
        name_printable(h->principal, shown, sizeof(shown));
        /* An unknown principal and a wrong key read the same. */
        return http_refusal(
            o, 0, ONCE__V1__CODE__UNAUTHENTICATED, REASON_BAD_TAG,
            "the request's tag does not verify for principal \"%s\" "
            "(unknown principal, wrong key, or altered in transit)",
            shown);
    }
    *sign = true;
    return true;
}
