/*
 * lease.c — staging lease transitions and loading the table at start-up.
 */
#include "lease/lease.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto/record.pb-c.h"
#include "store/records.h"
#include "proto/wire.h"

static const char lease_next_key[] = "m/next_client_id";

void
lease_key(uint64_t client_id, uint8_t key[LEASE_KEY_LEN])
{
    key[0] = 'l';
    key[1] = '/';
    wire_put_be64(key + 2, client_id);
}

void
lease_watermark_key(uint64_t client_id, uint8_t key[LEASE_KEY_LEN])
{
    key[0] = 'w';
    key[1] = '/';
    wire_put_be64(key + 2, client_id);
}

/* Stages the entry's LeaseRecord as it is now. */
static int
lease_stage(store_txn *txn, const lease_entry *e)
{
    Once__Store__V1__LeaseRecord rec = ONCE__STORE__V1__LEASE_RECORD__INIT;
    uint8_t key[LEASE_KEY_LEN];
    uint8_t *buf;
    size_t len;
    int rv;

    rec.principal = e->principal;
    rec.ttl_ms = e->ttl_ms;
    rec.opened_unix_ms = e->opened_ms;
    rec.ended_unix_ms = e->ended_ms;
    switch (e->state) {
    case LEASE_STATE_LIVE:
        rec.state = ONCE__STORE__V1__LEASE_RECORD__STATE__LIVE;
        break;
    case LEASE_STATE_CLOSED:
        rec.state = ONCE__STORE__V1__LEASE_RECORD__STATE__CLOSED;
        break;
    case LEASE_STATE_EXPIRED:
        rec.state = ONCE__STORE__V1__LEASE_RECORD__STATE__EXPIRED;
        break;
    }
    len = once__store__v1__lease_record__get_packed_size(&rec);
    if ((buf = malloc(len > 0 ? len : 1)) == NULL) {
        return ENOMEM;
    }
    once__store__v1__lease_record__pack(&rec, buf);
    lease_key(e->client_id, key);
    rv = store_txn_put(txn, key, sizeof(key), buf, len);
    free(buf);
    return rv;
}

int
lease_open(lease_table *lt, store_txn *txn, const char *principal,
           uint64_t ttl_ms, uint64_t now, lease_entry **ep)
{
    uint64_t id = lease_table_next_id(lt);
    uint8_t next_buf[8];
    lease_entry *e;
    int rv;

    if ((e = lease_table_add(lt, id, principal, ttl_ms, LEASE_STATE_LIVE,
                             now + ttl_ms)) == NULL) {
        return ENOMEM;
    }
    e->opened_ms = now;
    wire_put_be64(next_buf, id + 1);
    if ((rv = lease_stage(txn, e)) != 0 ||
        (rv = store_txn_put(txn, lease_next_key, sizeof(lease_next_key) - 1,
                            next_buf, sizeof(next_buf))) != 0) {
        /* The caller drops the transaction; the id stays unused. */
        lease_table_remove(lt, e);
        return rv;
    }
    *ep = e;
    return 0;
}

int
lease_end(store_txn *txn, lease_entry *e, lease_state state, uint64_t now)
{
    lease_state was = e->state;
    void *arg;
    lease_end_hook hook = lease_table_end_hook(e->table, &arg);
    int rv;

    /* What ends with the lease goes in the same batch, staged first: a
     * failure leaves the lease live (its keys may be retried). */
    if (hook != NULL && (rv = hook(arg, txn, e->client_id)) != 0) {
        return rv;
    }
    lease_entry_set_state(e, state);
    e->ended_ms = now;
    if ((rv = lease_stage(txn, e)) != 0) {
        lease_entry_set_state(e, was);
        e->ended_ms = 0;
    }
    return rv;
}

int
lease_expire_due(store_txn *txn, lease_entry *e, uint64_t now)
{
    if (e->state != LEASE_STATE_LIVE || lease_entry_live(e, now)) {
        return 0;
    }
    return lease_end(txn, e, LEASE_STATE_EXPIRED, now);
}

int
lease_forget(lease_table *lt, store_txn *txn, lease_entry *e)
{
    uint8_t key[LEASE_KEY_LEN];
    int rv;

    lease_key(e->client_id, key);
    if ((rv = store_txn_del(txn, key, sizeof(key))) != 0) {
        return rv;
    }
    lease_watermark_key(e->client_id, key);
    if ((rv = store_txn_del(txn, key, sizeof(key))) != 0) {
        return rv;
    }
    lease_table_remove(lt, e);
    return 0;
}

/* ---- start-up ------------------------------------------------------------ */

typedef struct load_ctx {
    lease_table *lt;
    uint64_t now;
    uint64_t nrec;
    uint64_t nbytes;
    int err;
} load_ctx;

static int
load_lease(void *arg, const char *key, size_t klen, const char *val,
           size_t vlen)
{
    load_ctx *lc = arg;
    Once__Store__V1__LeaseRecord *rec;
    lease_state state;
    lease_entry *e;

    if (klen != LEASE_KEY_LEN) {
        return EBADMSG;
    }
    rec = once__store__v1__lease_record__unpack(NULL, vlen, (uint8_t *)val);
    if (rec == NULL) {
        return EBADMSG;
    }
    switch (rec->state) {
    case ONCE__STORE__V1__LEASE_RECORD__STATE__CLOSED:
        state = LEASE_STATE_CLOSED;
        break;
    case ONCE__STORE__V1__LEASE_RECORD__STATE__EXPIRED:
        state = LEASE_STATE_EXPIRED;
        break;
    default:
        state = LEASE_STATE_LIVE;
        break;
    }
    /* A live lease gets a full TTL from now: the grace period. */
    e = lease_table_add(lc->lt, wire_get_be64((const uint8_t *)key + 2),
                        rec->principal, rec->ttl_ms, state,
                        lc->now + rec->ttl_ms);
    if (e != NULL) {
        e->opened_ms = rec->opened_unix_ms;
        e->ended_ms = rec->ended_unix_ms;
    }
    once__store__v1__lease_record__free_unpacked(rec, NULL);
    return e != NULL ? 0 : ENOMEM;
}

static int
load_watermark(void *arg, const char *key, size_t klen, const char *val,
               size_t vlen)
{
    load_ctx *lc = arg;
    uint64_t id;
    lease_entry *e;

    if (klen != LEASE_KEY_LEN || vlen != 8) {
        return EBADMSG;
    }
    id = wire_get_be64((const uint8_t *)key + 2);
    if ((e = lease_table_find(lc->lt, id)) != NULL) {
        e->watermark_durable = wire_get_be64((const uint8_t *)val);
        e->watermark = e->watermark_durable;
    }
    return 0;
}

static int
load_record(void *arg, const char *key, size_t klen, const char *val,
            size_t vlen)
{
    load_ctx *lc = arg;
    uint64_t id, seq;
    lease_entry *e;
    bool first;

    if (klen != RECORD_KEY_LEN) {
        return EBADMSG;
    }
    id = wire_get_be64((const uint8_t *)key + 2);
    seq = wire_get_be64((const uint8_t *)key + 10);
    if ((e = lease_table_find(lc->lt, id)) == NULL) {
        /* Records without a lease: reclaim them like an expired lease's. */
        e = lease_table_add(lc->lt, id, "", 0, LEASE_STATE_EXPIRED, 0);
        if (e == NULL) {
            return ENOMEM;
        }
        e->ended_ms = lc->now;
    }
    first = e->retained == 0;
    lease_entry_record_added(e, seq, klen + vlen, lc->now);
    if (first) {
        /* Keys sort by seq: the first record seen is the oldest one. */
        record *r = once__store__v1__completion_record__unpack(
            NULL, vlen, (const uint8_t *)val);
        if (r != NULL) {
            e->oldest_ms = r->completed_unix_ms;
            records_free(r);
        }
    }
    lc->nrec++;
    lc->nbytes += klen + vlen;
    return 0;
}

int
lease_load(lease_table *lt, store *st, uint64_t now, uint64_t *nrec,
           uint64_t *nbytes)
{
    load_ctx lc = {lt, now, 0, 0, 0};
    char *val;
    size_t vlen;
    store_txn *txn;
    int rv;

    if ((txn = store_txn_begin(st)) == NULL) {
        return ENOMEM;
    }
    rv = store_txn_get(txn, lease_next_key, sizeof(lease_next_key) - 1, &val,
                       &vlen);
    store_txn_abort(txn);
    if (rv == 0) {
        if (vlen == 8) {
            lease_table_set_next_id(lt, wire_get_be64((uint8_t *)val));
        }
        free(val);
    } else if (rv != ENOENT) {
        return rv;
    }
    if ((rv = store_scan(st, "l/", 2, load_lease, &lc)) != 0 ||
        (rv = store_scan(st, "w/", 2, load_watermark, &lc)) != 0 ||
        (rv = store_scan(st, "r/", 2, load_record, &lc)) != 0) {
        return rv;
    }
    *nrec = lc.nrec;
    *nbytes = lc.nbytes;
    return 0;
}
