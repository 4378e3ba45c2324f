/*
 * lease.c — allocating client ids and reading lease records.
 */
#include "lease.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

static const char lease_next_key[] = "m/next_client_id";

static void
lease_key(uint64_t client_id, uint8_t key[10])
{
    key[0] = 'l';
    key[1] = '/';
    wire_put_be64(key + 2, client_id);
}

int
lease_open(store_txn *t, const char *principal, uint64_t ttl_ms,
           uint64_t now_ms, uint64_t *client_id)
{
    lease_record rec = ONCE__STORE__V1__LEASE_RECORD__INIT;
    uint8_t next_buf[8];
    uint8_t key[10];
    uint64_t id = 1;
    char *val = NULL;
    size_t vlen = 0;
    uint8_t *packed;
    size_t plen;
    int rv;

    rv = store_txn_get(t, lease_next_key, sizeof(lease_next_key) - 1, &val,
                       &vlen);
    if (rv == 0) {
        if (vlen != 8) {
            free(val);
            return EBADMSG;
        }
        id = wire_get_be64((uint8_t *)val);
        free(val);
    } else if (rv != ENOENT) {
        return rv;
    }

    rec.principal = (char *)(principal != NULL ? principal : "");
    rec.ttl_ms = ttl_ms;
    rec.state = ONCE__STORE__V1__LEASE_RECORD__STATE__LIVE;
    rec.opened_unix_ms = now_ms;
    plen = once__store__v1__lease_record__get_packed_size(&rec);
    if ((packed = malloc(plen > 0 ? plen : 1)) == NULL) {
        return ENOMEM;
    }
    once__store__v1__lease_record__pack(&rec, packed);

    lease_key(id, key);
    wire_put_be64(next_buf, id + 1);
    if ((rv = store_txn_put(t, key, sizeof(key), packed, plen)) == 0) {
        rv = store_txn_put(t, lease_next_key, sizeof(lease_next_key) - 1,
                           next_buf, sizeof(next_buf));
    }
    free(packed);
    if (rv == 0) {
        *client_id = id;
    }
    return rv;
}

int
lease_get(store_txn *t, uint64_t client_id, lease_record **recp)
{
    uint8_t key[10];
    char *val;
    size_t vlen;
    int rv;

    lease_key(client_id, key);
    if ((rv = store_txn_get(t, key, sizeof(key), &val, &vlen)) != 0) {
        return rv;
    }
    *recp = once__store__v1__lease_record__unpack(NULL, vlen, (uint8_t *)val);
    free(val);
    return *recp != NULL ? 0 : EBADMSG;
}

void
lease_record_free(lease_record *rec)
{
    if (rec != NULL) {
        once__store__v1__lease_record__free_unpacked(rec, NULL);
    }
}

int
lease_check_live(store_txn *t, uint64_t client_id)
{
    lease_record *rec;
    int rv;

    if ((rv = lease_get(t, client_id, &rec)) != 0) {
        return rv;
    }
    rv = rec->state == ONCE__STORE__V1__LEASE_RECORD__STATE__LIVE ? 0 : ESTALE;
    lease_record_free(rec);
    return rv;
}
