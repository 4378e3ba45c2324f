/*
 * http_console.c — the console's pages and token check of http_console.h.
 */
#include "server/http_console.h"

#include <inttypes.h>
#include <string.h>

#include <sodium.h>

#include "base/clock.h"
#include "proto/console_token.h"
#include "proto/names.h"
#include "proto/once.pb-c.h"
#include "proto/reasons.h"
#include "server/console_assets.h"

/* What the console reads; nothing here changes state. Admin/Snapshot is
 * a read too, but a copy of the whole store is not the console's. */
static const char *const console_reads[] = {
    "/once.v1.Admin/Stats",         "/once.v1.Admin/ListRecords",
    "/once.v1.Grants/GetSurface",   "/once.v1.Grants/ListQueue",
    "/once.v1.Grants/GetPublicKey", "/once.v1.Grants/ListSurfaces",
    "/once.v1.Outbox/Topics",       "/once.v1.Lease/LeaseInfo",
    "/once.v1.Counter/Get",         "/once.v1.KV/Range",
    "/once.v1.Grants/ListMachines",
};

bool
http_console_reads(const char *method)
{
    for (size_t i = 0; i < sizeof(console_reads) / sizeof(console_reads[0]);
         i++) {
        if (strcmp(method, console_reads[i]) == 0) {
            return true;
        }
    }
    return false;
}

int
http_console_serve(http_srv *hs)
{
    for (const console_asset *f = console_assets; f->path != NULL; f++) {
        int rv;

        if ((rv = http_srv_static(hs, f->path, f->type, f->data, f->len)) !=
            0) {
            return rv;
        }
    }
    return 0;
}

bool
http_console_auth(const char *token, auth *a, const char *method, http_head *h,
                  char *name, uint8_t key[AUTH_KEY_BYTES], bool *sign,
                  http_outcome *o)
{
    uint8_t tag[AUTH_TAG_BYTES];
    uint64_t expiry_s, now_s;
    bool enabled, op = false, known;
    char shown[64];

    *sign = false;
    if (!http_console_reads(method)) {
        return http_refusal(o, 403, ONCE__V1__CODE__PERMISSION_DENIED,
                            REASON_CONSOLE_READ_ONLY,
                            "a console token authorises reads only, not %s "
                            "(docs/console.md)",
                            method);
    }
    if (!console_token_parse(token, name, &expiry_s, tag)) {
        return http_refusal(o, 0, ONCE__V1__CODE__UNAUTHENTICATED,
                            REASON_CONSOLE_TOKEN_BAD,
                            "Once-Console-Token is not a console token "
                            "(ct1.PRINCIPAL.EXPIRY.TAG, from oncectl "
                            "console-token)");
    }
    known = auth_key_copy(a, name, key, &enabled, &op);
    h->principal = name;
    if (!enabled) {
        sodium_memzero(key, AUTH_KEY_BYTES);
        return true; /* OPEN: the principal is a label */
    }
    name_printable(name, shown, sizeof(shown));
    if (!known || !console_token_verify(name, expiry_s, tag, key)) {
        sodium_memzero(key, AUTH_KEY_BYTES);
        return http_refusal(
            o, 0, ONCE__V1__CODE__UNAUTHENTICATED, REASON_CONSOLE_TOKEN_BAD,
            "the console token does not verify for principal \"%s\" "
            "(unknown principal, wrong key, or altered)",
            shown);
    }
    now_s = clock_wall_ms() / 1000;
    if (expiry_s <= now_s) {
        sodium_memzero(key, AUTH_KEY_BYTES);
        return http_refusal(o, 0, ONCE__V1__CODE__UNAUTHENTICATED,
                            REASON_CONSOLE_TOKEN_EXPIRED,
                            "the console token of \"%s\" expired at %" PRIu64
                            " (Unix seconds); print a new one with oncectl "
                            "console-token",
                            shown, expiry_s);
    }
    /* Short-lived is onced's rule, not only oncectl's (a minute of
     * clock skew allowed). */
    if (expiry_s - now_s > CONSOLE_TOKEN_TTL_MAX_S + 60) {
        sodium_memzero(key, AUTH_KEY_BYTES);
        return http_refusal(o, 0, ONCE__V1__CODE__UNAUTHENTICATED,
                            REASON_CONSOLE_TOKEN_BAD,
                            "the console token of \"%s\" lives longer than "
                            "12 h (expiry %" PRIu64 "); print one with "
                            "oncectl console-token",
                            shown, expiry_s);
    }
    if (!op) {
        sodium_memzero(key, AUTH_KEY_BYTES);
        return http_refusal(o, 403, ONCE__V1__CODE__PERMISSION_DENIED,
                            REASON_CONSOLE_NOT_OPERATOR,
                            "the console is for operators; \"%s\" is not one",
                            shown);
    }
    *sign = true;
    return true;
}
