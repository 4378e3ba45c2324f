/*
 * console_token.c — making, parsing and checking the console token of
 * console_token.h.
 */
#include "proto/console_token.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "base/number.h"

#define CONSOLE_TOKEN_CONTEXT "once-console-token"

/* The signed text: context LF principal LF expiry. */
static void
console_token_text(const char *principal, uint64_t expiry_s, char *out,
                   size_t outlen)
{
    snprintf(out, outlen, "%s\n%s\n%" PRIu64, CONSOLE_TOKEN_CONTEXT, principal,
             expiry_s);
}

void
console_token_make(const char *principal, uint64_t expiry_s,
                   const uint8_t key[AUTH_KEY_BYTES], char *out, size_t outlen)
{
    char text[CONSOLE_TOKEN_MAX + sizeof(CONSOLE_TOKEN_CONTEXT)];
    uint8_t tag[AUTH_TAG_BYTES];
    char hex[2 * AUTH_TAG_BYTES + 1];

    console_token_text(principal, expiry_s, text, sizeof(text));
    crypto_auth(tag, (const uint8_t *)text, strlen(text), key);
    sodium_bin2hex(hex, sizeof(hex), tag, sizeof(tag));
    snprintf(out, outlen, "%s%s.%" PRIu64 ".%s", CONSOLE_TOKEN_PREFIX,
             principal, expiry_s, hex);
}

bool
console_token_parse(const char *text, char *principal, uint64_t *expiry_s,
                    uint8_t tag[AUTH_TAG_BYTES])
{
    size_t plen = strlen(CONSOLE_TOKEN_PREFIX), n, got = 0;
    const char *name, *dot_tag, *dot_exp;
    char digits[24];

    if (strncmp(text, CONSOLE_TOKEN_PREFIX, plen) != 0 ||
        (dot_tag = strrchr(text, '.')) == NULL || dot_tag < text + plen) {
        return false;
    }
    name = text + plen;
    for (dot_exp = dot_tag - 1; dot_exp >= name && *dot_exp != '.'; dot_exp--) {
    }
    n = (size_t)(dot_tag - dot_exp - 1);
    if (dot_exp <= name || n == 0 || n >= sizeof(digits) ||
        (size_t)(dot_exp - name) > PRINCIPAL_NAME_MAX ||
        strlen(dot_tag + 1) != 2 * AUTH_TAG_BYTES ||
        sodium_hex2bin(tag, AUTH_TAG_BYTES, dot_tag + 1, 2 * AUTH_TAG_BYTES,
                       NULL, &got, NULL) != 0 ||
        got != AUTH_TAG_BYTES) {
        return false;
    }
    memcpy(digits, dot_exp + 1, n);
    digits[n] = '\0';
    if (number_parse_u64_all(digits, expiry_s) != 0) {
        return false;
    }
    memcpy(principal, name, (size_t)(dot_exp - name));
    principal[dot_exp - name] = '\0';
    return true;
}

bool
console_token_verify(const char *principal, uint64_t expiry_s,
                     const uint8_t tag[AUTH_TAG_BYTES],
                     const uint8_t key[AUTH_KEY_BYTES])
{
    char text[CONSOLE_TOKEN_MAX + sizeof(CONSOLE_TOKEN_CONTEXT)];

    console_token_text(principal, expiry_s, text, sizeof(text));
    return crypto_auth_verify(tag, (const uint8_t *)text, strlen(text), key) ==
           0;
}
