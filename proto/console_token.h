/*
 * console_token.h — the operator console's token (docs/console.md),
 * shared by oncectl (console-token prints one) and onced (checks one).
 *
 * Owns: the text form "ct1.PRINCIPAL.EXPIRY.TAG" — EXPIRY decimal Unix
 * seconds, TAG 64 hex digits of crypto_auth (HMAC-SHA-512-256) with the
 * principal's key over
 *   "once-console-token" LF PRINCIPAL LF EXPIRY
 * — its making, parsing (from the right: a principal's name may hold a
 * dot) and tag check.
 * Invariant: a token names its principal and expiry; nothing else is in
 * it, so what it authorises is onced's to decide (read methods only).
 * Never: compares tags with memcmp.
 */
#ifndef PROTO_CONSOLE_TOKEN_H
#define PROTO_CONSOLE_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/auth_tag.h"
#include "proto/principals.h"

#define CONSOLE_TOKEN_PREFIX "ct1."
/* The longest token: prefix, name, dot, 20 digits, dot, tag, NUL. */
#define CONSOLE_TOKEN_MAX                                                      \
    (sizeof(CONSOLE_TOKEN_PREFIX) + PRINCIPAL_NAME_MAX + 22 +                  \
     2 * AUTH_TAG_BYTES + 1)
/* The longest life a token may be given (12 hours). */
#define CONSOLE_TOKEN_TTL_MAX_S (12u * 3600u)

/* Writes principal's token expiring at expiry_s into out (at least
 * CONSOLE_TOKEN_MAX bytes). */
void console_token_make(const char *principal, uint64_t expiry_s,
                        const uint8_t key[AUTH_KEY_BYTES], char *out,
                        size_t outlen);

/* Splits text into principal (PRINCIPAL_NAME_MAX + 1 bytes), *expiry_s
 * and tag; false when it is not a token's form. */
bool console_token_parse(const char *text, char *principal, uint64_t *expiry_s,
                         uint8_t tag[AUTH_TAG_BYTES]);

/* Whether tag is principal's tag over (principal, expiry_s) under key. */
bool console_token_verify(const char *principal, uint64_t expiry_s,
                          const uint8_t tag[AUTH_TAG_BYTES],
                          const uint8_t key[AUTH_KEY_BYTES]);

#endif /* PROTO_CONSOLE_TOKEN_H */
