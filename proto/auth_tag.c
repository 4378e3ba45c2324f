/*
 * auth_tag.c — the tag trailer of a Request envelope (see auth_tag.h).
 */
#include "proto/auth_tag.h"

#include <sodium.h>

_Static_assert(AUTH_KEY_BYTES == crypto_auth_KEYBYTES, "key size");
_Static_assert(AUTH_TAG_BYTES == crypto_auth_BYTES, "tag size");

void
auth_tag_append(uint8_t *buf, size_t len, const uint8_t key[AUTH_KEY_BYTES])
{
    crypto_auth(buf + len + 2, buf, len, key);
    buf[len] = AUTH_TAG_FIELD_KEY;
    buf[len + 1] = AUTH_TAG_BYTES;
}

bool
auth_tag_split(const uint8_t *buf, size_t len, size_t *signed_len,
               const uint8_t **tag)
{
    size_t at;

    if (buf == NULL || len < AUTH_TAG_TRAILER) {
        return false;
    }
    at = len - AUTH_TAG_TRAILER;
    if (buf[at] != AUTH_TAG_FIELD_KEY || buf[at + 1] != AUTH_TAG_BYTES) {
        return false;
    }
    *signed_len = at;
    *tag = buf + at + 2;
    return true;
}

bool
auth_tag_verify(const uint8_t *tag, const uint8_t *buf, size_t len,
                const uint8_t key[AUTH_KEY_BYTES])
{
    return crypto_auth_verify(tag, buf, len, key) == 0;
}

bool
auth_tag_verify_parts(const uint8_t *tag, const auth_tag_part *parts, size_t n,
                      const uint8_t key[AUTH_KEY_BYTES])
{
    crypto_auth_hmacsha512256_state st;
    uint8_t mac[AUTH_TAG_BYTES];
    bool ok;

    crypto_auth_hmacsha512256_init(&st, key, AUTH_KEY_BYTES);
    for (size_t i = 0; i < n; i++) {
        crypto_auth_hmacsha512256_update(&st, parts[i].buf, parts[i].len);
    }
    crypto_auth_hmacsha512256_final(&st, mac);
    ok = sodium_memcmp(mac, tag, AUTH_TAG_BYTES) == 0;
    sodium_memzero(&st, sizeof(st));
    sodium_memzero(mac, sizeof(mac));
    return ok;
}
