/*
 * keys.c — the LevelDB keys of the "k/" namespace (kv_impl.h).
 *
 * Owns their byte layout: a fixed four-byte prefix, then big-endian ids
 * and the user's key bytes as given, so LevelDB's bytewise order is the
 * user's key order and a lease's keys are one contiguous range.
 * Never: interprets a user key (any bytes are a key).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv/kv_impl.h"
#include "proto/wire.h"

static int
key_build(kv_key *k, const char *prefix, const uint8_t *id8, const void *tail,
          size_t tlen)
{
    size_t n = KV_PREFIX_LEN + (id8 != NULL ? 8 : 0) + tlen;

    if ((k->b = malloc(n)) == NULL) {
        return ENOMEM;
    }
    memcpy(k->b, prefix, KV_PREFIX_LEN);
    k->n = KV_PREFIX_LEN;
    if (id8 != NULL) {
        memcpy(k->b + k->n, id8, 8);
        k->n += 8;
    }
    if (tlen > 0) {
        memcpy(k->b + k->n, tail, tlen);
        k->n += tlen;
    }
    return 0;
}

int
kv_key_data(kv_key *k, const uint8_t *key, size_t klen)
{
    return key_build(k, KV_DATA_PREFIX, NULL, key, klen);
}

int
kv_key_lease(kv_key *k, uint64_t client_id, const uint8_t *key, size_t klen)
{
    uint8_t id[8];

    wire_put_be64(id, client_id);
    return key_build(k, KV_LEASE_PREFIX, id, key, klen);
}

int
kv_key_lease_all(kv_key *k, uint64_t client_id)
{
    return kv_key_lease(k, client_id, NULL, 0);
}

int
kv_key_quota(kv_key *k, const char *principal)
{
    return key_build(k, KV_QUOTA_PREFIX, NULL, principal, strlen(principal));
}

void
kv_key_fini(kv_key *k)
{
    free(k->b);
    k->b = NULL;
    k->n = 0;
}
