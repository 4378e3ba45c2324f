/*
 * acct.c — the revision and the byte counts one transaction changes.
 *
 * Owns k/m (the store's revision, keys and bytes) and k/q/<principal>
 * (the bytes each principal's keys hold, for --kv-quota): read once at
 * the start of a Txn or a lease's end, changed in memory by every
 * kv_row_apply, staged once at the end in the same transaction as the
 * keys.
 * Invariant: the revision grows by exactly one for each transaction that
 * changed at least one key, and never otherwise.
 * Never: lets a principal's count go below zero (a damaged count is
 * clamped, and logged by nobody: Stats shows the totals).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv/kv_impl.h"
#include "proto/wire.h"

static int
meta_read(store_txn *t, kv_totals *out)
{
    char *val;
    size_t vlen;
    int rv =
        store_txn_get(t, KV_META_KEY, sizeof(KV_META_KEY) - 1, &val, &vlen);

    memset(out, 0, sizeof(*out));
    if (rv == ENOENT) {
        return 0;
    }
    if (rv != 0) {
        return rv;
    }
    if (vlen != 24) {
        free(val);
        return EBADMSG;
    }
    out->revision = wire_get_be64((const uint8_t *)val);
    out->keys = wire_get_be64((const uint8_t *)val + 8);
    out->bytes = wire_get_be64((const uint8_t *)val + 16);
    free(val);
    return 0;
}

int
kv_totals_read(store_txn *txn, kv_totals *out)
{
    return meta_read(txn, out);
}

int
kv_acct_begin(store_txn *t, kv_acct *a)
{
    int rv;

    memset(a, 0, sizeof(*a));
    if ((rv = meta_read(t, &a->t)) != 0) {
        return rv;
    }
    a->rev = a->t.revision + 1;
    return 0;
}

int
kv_acct_add(kv_acct *a, const char *principal, int64_t bytes)
{
    kv_delta *nd;

    for (size_t i = 0; i < a->nd; i++) {
        if (strcmp(a->d[i].principal, principal) == 0) {
            a->d[i].bytes += bytes;
            return 0;
        }
    }
    if ((nd = realloc(a->d, (a->nd + 1) * sizeof(*nd))) == NULL) {
        return ENOMEM;
    }
    a->d = nd;
    if ((a->d[a->nd].principal = strdup(principal)) == NULL) {
        return ENOMEM;
    }
    a->d[a->nd++].bytes = bytes;
    return 0;
}

/* The principal's stored bytes after adding delta, read through t. */
static int
quota_next(store_txn *t, const kv_key *k, int64_t delta, uint64_t *out)
{
    char *val;
    size_t vlen;
    uint64_t used = 0;
    int rv = store_txn_get(t, k->b, k->n, &val, &vlen);

    if (rv == 0) {
        used = vlen == 8 ? wire_get_be64((const uint8_t *)val) : 0;
        free(val);
    } else if (rv != ENOENT) {
        return rv;
    }
    if (delta < 0 && (uint64_t)-delta > used) {
        *out = 0;
    } else {
        *out = used + (uint64_t)delta;
    }
    return 0;
}

int
kv_acct_finish(store_txn *t, kv_acct *a, const char *quota_principal,
               uint64_t quota, uint64_t *over)
{
    uint8_t buf[24];
    int rv;

    *over = 0;
    if (!a->wrote) {
        return 0;
    }
    for (size_t i = 0; i < a->nd; i++) {
        kv_key k;
        uint64_t next = 0;
        uint8_t v[8];

        if (a->d[i].bytes == 0) {
            continue;
        }
        if ((rv = kv_key_quota(&k, a->d[i].principal)) != 0) {
            return rv;
        }
        if ((rv = quota_next(t, &k, a->d[i].bytes, &next)) == 0 &&
            quota_principal != NULL && quota != 0 && a->d[i].bytes > 0 &&
            next > quota && strcmp(a->d[i].principal, quota_principal) == 0) {
            /* the caller drops the transaction: nothing of it is kept */
            kv_key_fini(&k);
            *over = next;
            return 0;
        }
        wire_put_be64(v, next);
        if (rv == 0) {
            rv = next == 0 ? store_txn_del(t, k.b, k.n)
                           : store_txn_put(t, k.b, k.n, v, sizeof(v));
        }
        kv_key_fini(&k);
        if (rv != 0) {
            return rv;
        }
    }
    a->t.revision = a->rev;
    wire_put_be64(buf, a->t.revision);
    wire_put_be64(buf + 8, a->t.keys);
    wire_put_be64(buf + 16, a->t.bytes);
    return store_txn_put(t, KV_META_KEY, sizeof(KV_META_KEY) - 1, buf,
                         sizeof(buf));
}

void
kv_acct_fini(kv_acct *a)
{
    for (size_t i = 0; i < a->nd; i++) {
        free(a->d[i].principal);
    }
    free(a->d);
    memset(a, 0, sizeof(*a));
}
