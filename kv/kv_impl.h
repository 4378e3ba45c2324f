/*
 * kv_impl.h — what the files of kv/ share: the key layout (keys.c), the
 * stored entry and the one function that changes a key (rows.c), and the
 * revision and byte accounting of one transaction (acct.c).
 *
 * The LevelDB namespace "k/" (docs/design.md, "What is stored"):
 *   k/d/<key>                    a KvEntry (record.proto)
 *   k/l/<client_id:be64><key>    empty: <key> is bound to that lease
 *   k/q/<principal>              be64: bytes the principal's keys hold
 *   k/m                          be64 x3: revision, keys, bytes
 * Invariant: k/l/ holds exactly the keys whose entry names a lease, and
 * k/q/ and k/m sum the entries; kv_row_apply is the only writer of k/d/
 * and k/l/, kv_acct_finish of k/q/ and k/m.
 * Never: included outside kv/.
 */
#ifndef KV_KV_IMPL_H
#define KV_KV_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv/kv.h"
#include "proto/record.pb-c.h"

typedef Once__Store__V1__KvEntry kv_entry;

#define KV_DATA_PREFIX  "k/d/"
#define KV_LEASE_PREFIX "k/l/"
#define KV_QUOTA_PREFIX "k/q/"
#define KV_META_KEY     "k/m"
#define KV_PREFIX_LEN   4

/* A built LevelDB key (malloc'd b; kv_key_fini frees it). */
typedef struct kv_key {
    uint8_t *b;
    size_t n;
} kv_key;

/* keys.c: each returns 0 or ENOMEM. */
int kv_key_data(kv_key *k, const uint8_t *key, size_t klen);
int kv_key_lease(kv_key *k, uint64_t client_id, const uint8_t *key,
                 size_t klen);
int kv_key_lease_all(kv_key *k, uint64_t client_id); /* the prefix */
int kv_key_quota(kv_key *k, const char *principal);
void kv_key_fini(kv_key *k);

/* One transaction's changes to the counts: per principal byte deltas and
 * the totals, the revision it writes at. */
typedef struct kv_delta {
    char *principal;
    int64_t bytes;
} kv_delta;

typedef struct kv_acct {
    kv_totals t;  /* as read at begin, then as changed */
    uint64_t rev; /* the revision writes are stamped with: t.revision + 1 */
    bool wrote;   /* some key changed: the revision moves */
    kv_delta *d;
    size_t nd;
} kv_acct;

/* acct.c */
int kv_acct_begin(store_txn *t, kv_acct *a);
/* Adds a key's bytes to (or, negative, takes them from) principal. */
int kv_acct_add(kv_acct *a, const char *principal, int64_t bytes);
/* Stages k/m (when something was written) and each changed k/q/. When
 * quota_principal is not NULL and its bytes grew past quota (non-zero),
 * stages nothing and sets *over to its would-be bytes. */
int kv_acct_finish(store_txn *t, kv_acct *a, const char *quota_principal,
                   uint64_t quota, uint64_t *over);
void kv_acct_fini(kv_acct *a);

/* rows.c: key's entry. 0 and *out (kv_entry_free), ENOENT, or an error. */
int kv_row_get(store_txn *t, const uint8_t *key, size_t klen, kv_entry **out);
void kv_entry_free(kv_entry *e);
/* The bytes a stored key counts: its key and its value. */
uint64_t kv_entry_bytes(size_t klen, const kv_entry *e);
/* Changes key from old (NULL: absent) to new (NULL: deleted): the entry,
 * its lease index and the accounting in a. 0 or ENOMEM. */
int kv_row_apply(store_txn *t, kv_acct *a, const uint8_t *key, size_t klen,
                 const kv_entry *old, const kv_entry *new_);
/* Decodes a stored entry (val as read). NULL: damaged (EBADMSG). */
kv_entry *kv_entry_decode(const char *val, size_t vlen);

/* compare.c: whether one compare holds for the key's entry (NULL:
 * absent). Pure. */
bool kv_compare_holds(const Once__V1__KvCompare *c, const kv_entry *e);

#endif /* KV_KV_IMPL_H */
