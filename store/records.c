/*
 * records.c — completion record keys, digests and (de)serialization.
 */
#include "store/records.h"

#include <errno.h>
#include <stdlib.h>

#include <sodium.h>

#include "proto/wire.h"

void
records_digest(const char *method, size_t mlen, const void *payload,
               size_t plen, uint8_t out[RECORD_DIGEST_LEN])
{
    crypto_generichash_state st;
    const unsigned char zero = 0;

    crypto_generichash_init(&st, NULL, 0, RECORD_DIGEST_LEN);
    crypto_generichash_update(&st, (const unsigned char *)method, mlen);
    crypto_generichash_update(&st, &zero, 1);
    crypto_generichash_update(&st, payload, plen);
    crypto_generichash_final(&st, out, RECORD_DIGEST_LEN);
}

void
records_key(uint64_t client_id, uint64_t seq, uint8_t key[RECORD_KEY_LEN])
{
    key[0] = 'r';
    key[1] = '/';
    wire_put_be64(key + 2, client_id);
    wire_put_be64(key + 10, seq);
}

int
records_get(store_txn *t, uint64_t client_id, uint64_t seq, record **recp)
{
    uint8_t key[RECORD_KEY_LEN];
    char *val;
    size_t vlen;
    int rv;

    records_key(client_id, seq, key);
    if ((rv = store_txn_get(t, key, sizeof(key), &val, &vlen)) != 0) {
        return rv;
    }
    *recp =
        once__store__v1__completion_record__unpack(NULL, vlen, (uint8_t *)val);
    free(val);
    return *recp != NULL ? 0 : EBADMSG;
}

int
records_put(store_txn *t, uint64_t client_id, uint64_t seq, const record *rec,
            uint64_t *bytes)
{
    uint8_t key[RECORD_KEY_LEN];
    size_t len = once__store__v1__completion_record__get_packed_size(rec);
    int rv;

    records_key(client_id, seq, key);
    rv = store_txn_put_msg(t, key, sizeof(key), &rec->base);
    if (bytes != NULL) {
        *bytes = sizeof(key) + len;
    }
    return rv;
}

void
records_free(record *rec)
{
    if (rec != NULL) {
        once__store__v1__completion_record__free_unpacked(rec, NULL);
    }
}
