/*
 * auth_tag.h — where the authentication tag sits in a Request envelope,
 * shared by libonce (appends it) and onced (finds and checks it).
 *
 * The tag is libsodium crypto_auth (HMAC-SHA512-256) with the principal's
 * key over the envelope bytes exactly as sent, excluding the tag itself:
 * the client packs the Request without auth_tag (field 8), computes the tag
 * over those bytes and appends field 8 — 0x42, 0x20 and the 32 tag bytes —
 * at the end (protobuf merges appended fields, so the envelope still
 * decodes as one Request). The server verifies the bytes before that
 * trailer as received: nothing is ever re-encoded before hashing.
 * Never: compares tags with memcmp (crypto_auth_verify is constant-time).
 */
#ifndef PROTO_AUTH_TAG_H
#define PROTO_AUTH_TAG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AUTH_KEY_BYTES     32   /* crypto_auth_KEYBYTES */
#define AUTH_TAG_BYTES     32   /* crypto_auth_BYTES */
#define AUTH_TAG_FIELD_KEY 0x42 /* field 8, wire type 2 */
/* The appended field: key byte, length byte (32), tag. */
#define AUTH_TAG_TRAILER (2 + AUTH_TAG_BYTES)

/*
 * Appends the trailer to the len bytes at buf, which must have room for
 * len + AUTH_TAG_TRAILER bytes: buf[len..len+34) becomes field 8 holding
 * crypto_auth(buf[0..len), key).
 */
void auth_tag_append(uint8_t *buf, size_t len,
                     const uint8_t key[AUTH_KEY_BYTES]);

/*
 * Whether the len bytes at buf end with exactly one tag trailer. When they
 * do, *signed_len is the length of what the tag covers (len - 34) and *tag
 * points at the 32 tag bytes inside buf.
 */
bool auth_tag_split(const uint8_t *buf, size_t len, size_t *signed_len,
                    const uint8_t **tag);

/* crypto_auth_verify of tag over buf[0..len) with key: true when valid. */
bool auth_tag_verify(const uint8_t *tag, const uint8_t *buf, size_t len,
                     const uint8_t key[AUTH_KEY_BYTES]);

/* One piece of a message that is signed in pieces, never copied into
 * one buffer (the HTTP front door's tag, docs/http.md). */
typedef struct auth_tag_part {
    const void *buf;
    size_t len;
} auth_tag_part;

/* The same check as auth_tag_verify over the concatenation of the n
 * parts: crypto_auth's HMAC-SHA-512-256, compared in constant time. */
bool auth_tag_verify_parts(const uint8_t *tag, const auth_tag_part *parts,
                           size_t n, const uint8_t key[AUTH_KEY_BYTES]);

#endif /* PROTO_AUTH_TAG_H */
