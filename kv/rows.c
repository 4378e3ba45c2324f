/*
 * rows.c — a key's stored entry, and the one function that changes it.
 *
 * Owns k/d/ (the entries) and k/l/ (the lease index): kv_row_apply writes
 * both and hands the byte change to the transaction's accounting, so a
 * put, a delete, a delete-prefix and a lease's end all keep the index and
 * the counts the same way.
 * Invariant: after kv_row_apply, k/l/<lease><key> exists exactly when the
 * key's entry names that lease.
 * Never: decides whether a change is allowed (txn.c and lease_end.c do).
 */
#include <errno.h>
#include <stdlib.h>

#include "kv/kv_impl.h"

kv_entry *
kv_entry_decode(const char *val, size_t vlen)
{
    return once__store__v1__kv_entry__unpack(NULL, vlen, (const uint8_t *)val);
}

void
kv_entry_free(kv_entry *e)
{
    if (e != NULL) {
        once__store__v1__kv_entry__free_unpacked(e, NULL);
    }
}

uint64_t
kv_entry_bytes(size_t klen, const kv_entry *e)
{
    return (uint64_t)klen + e->value.len;
}

int
kv_row_get(store_txn *t, const uint8_t *key, size_t klen, kv_entry **out)
{
    kv_key k;
    char *val;
    size_t vlen;
    int rv;

    if ((rv = kv_key_data(&k, key, klen)) != 0) {
        return rv;
    }
    rv = store_txn_get(t, k.b, k.n, &val, &vlen);
    kv_key_fini(&k);
    if (rv != 0) {
        return rv;
    }
    *out = kv_entry_decode(val, vlen);
    free(val);
    return *out != NULL ? 0 : EBADMSG;
}

/* Stages the lease index entry of key under client_id, or its delete. */
static int
index_set(store_txn *t, uint64_t client_id, const uint8_t *key, size_t klen,
          bool present)
{
    kv_key k;
    int rv;

    if ((rv = kv_key_lease(&k, client_id, key, klen)) != 0) {
        return rv;
    }
    rv = present ? store_txn_put(t, k.b, k.n, "", 0)
                 : store_txn_del(t, k.b, k.n);
    kv_key_fini(&k);
    return rv;
}

int
kv_row_apply(store_txn *t, kv_acct *a, const uint8_t *key, size_t klen,
             const kv_entry *old, const kv_entry *new_)
{
    uint64_t old_lease = old != NULL ? old->lease : 0;
    uint64_t new_lease = new_ != NULL ? new_->lease : 0;
    kv_key k;
    int rv;

    if ((rv = kv_key_data(&k, key, klen)) != 0) {
        return rv;
    }
    rv = new_ != NULL ? store_txn_put_msg(t, k.b, k.n, &new_->base)
                      : store_txn_del(t, k.b, k.n);
    kv_key_fini(&k);
    if (rv == 0 && old_lease != 0 && old_lease != new_lease) {
        rv = index_set(t, old_lease, key, klen, false);
    }
    if (rv == 0 && new_lease != 0 && new_lease != old_lease) {
        rv = index_set(t, new_lease, key, klen, true);
    }
    if (rv == 0 && old != NULL) {
        a->t.keys--;
        a->t.bytes -= kv_entry_bytes(klen, old);
        rv =
            kv_acct_add(a, old->principal, -(int64_t)kv_entry_bytes(klen, old));
    }
    if (rv == 0 && new_ != NULL) {
        a->t.keys++;
        a->t.bytes += kv_entry_bytes(klen, new_);
        rv = kv_acct_add(a, new_->principal,
                         (int64_t)kv_entry_bytes(klen, new_));
    }
    a->wrote = true;
    return rv;
}
