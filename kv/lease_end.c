/*
 * lease_end.c — the keys bound to a lease go when the lease does
 * (kv_lease_end).
 *
 * Owns the rule of SPEC section 11: a key put with `lease` is deleted in
 * the batch that ends its lease — expiry or close — found through the
 * k/l/<client_id> index, with the revision and the byte counts moved in
 * the same batch. lease/ calls it through the hook server.c sets
 * (lease_table_on_end), so it runs wherever a lease ends.
 * Invariant: after it, no k/d/ entry names client_id and no k/l/ key of
 * client_id is left.
 * Never: moves work or tells anyone (visibility only; the outbox event of
 * section 12 comes with the outbox).
 */
#include <errno.h>
#include <stdlib.h>

#include "kv/kv_impl.h"

typedef struct lease_del {
    store_txn *t;
    kv_acct *a;
    uint64_t n;
} lease_del;

/* store_txn_scan callback: one k/l/<client><key> index key. */
static int
lease_del_one(void *arg, const char *key, size_t klen, const char *val,
              size_t vlen)
{
    lease_del *d = arg;
    const uint8_t *ukey = (const uint8_t *)key + KV_PREFIX_LEN + 8;
    size_t ulen = klen - KV_PREFIX_LEN - 8;
    kv_entry *old;
    int rv;

    (void)val;
    (void)vlen;
    if ((rv = kv_row_get(d->t, ukey, ulen, &old)) == ENOENT) {
        return 0; /* never left behind by kv_row_apply */
    }
    if (rv != 0) {
        return rv;
    }
    rv = kv_row_apply(d->t, d->a, ukey, ulen, old, NULL);
    kv_entry_free(old);
    d->n++;
    return rv;
}

int
kv_lease_end(store_txn *txn, uint64_t client_id, uint64_t *deleted,
             kv_totals *totals)
{
    kv_acct a;
    lease_del d = {.t = txn, .a = &a};
    uint64_t over;
    kv_key k;
    int rv;

    *deleted = 0;
    if ((rv = kv_key_lease_all(&k, client_id)) != 0) {
        return rv;
    }
    if ((rv = kv_acct_begin(txn, &a)) == 0) {
        rv = store_txn_scan(txn, k.b, k.n, k.b, k.n, lease_del_one, &d);
    }
    kv_key_fini(&k);
    if (rv == 0) {
        rv = kv_acct_finish(txn, &a, NULL, 0, &over);
    }
    *deleted = d.n;
    *totals = a.t;
    kv_acct_fini(&a);
    return rv;
}
