/*
 * kv.h — once.v1.KV's rules: the user's own keys, changed exactly once
 * (docs/kv.md, SPEC section 11).
 *
 * Owns what a Txn and a Range do to and read from the store, as functions
 * over one store_txn: checking a request alone (check.c), evaluating
 * compares (compare.c), applying ops (txn.c), reading a range (range.c),
 * deleting a lease's keys when it ends (lease_end.c). The server's
 * svc_kv.c is a thin layer over it; nothing here knows nng or the policy.
 * Invariant: every write of a Txn — the keys, their lease index, the
 * revision and the byte counts — is staged in the call's one transaction,
 * which the executor commits with the call's completion record; a non-OK
 * outcome stages nothing that must be kept.
 * Never: reads LevelDB behind the transaction; keeps state between calls.
 */
#ifndef KV_KV_H
#define KV_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "outbox/outbox.h"
#include "proto/kv.pb-c.h"
#include "store/store.h"

/* onced's defaults (--kv-key-max, --kv-value-max, --kv-ops-max,
 * --kv-quota). */
#define KV_KEY_MAX_DEFAULT   1024u
#define KV_VALUE_MAX_DEFAULT (64u * 1024u)
#define KV_OPS_MAX_DEFAULT   128u
#define KV_QUOTA_DEFAULT     (256ull << 20)
/* What one Range page holds at most: keys, and bytes of keys and values
 * (at least one key is returned whatever its size). */
#define KV_RANGE_LIMIT     1000u
#define KV_RANGE_BYTES_MAX (1u << 20)

typedef struct kv_limits {
    uint64_t key_max;   /* bytes of a key or prefix */
    uint64_t value_max; /* bytes of a value */
    uint64_t ops_max;   /* compares and ops of one Txn, together */
    uint64_t quota;     /* stored bytes (keys + values) per principal;
                           0: no cap */
} kv_limits;

/* The store's totals (k/m): what Stats and /metrics show. */
typedef struct kv_totals {
    uint64_t revision;
    uint64_t keys;
    uint64_t bytes; /* keys + values */
} kv_totals;

/* What a function here decided. code OK: the response is packed in
 * *resp. err != 0: a store error — commit nothing, say nothing. */
typedef struct kv_outcome {
    int code; /* once.v1.Code */
    const char *reason;
    char message[256];
    int err;
    uint8_t *resp; /* malloc'd; the caller frees */
    size_t resp_len;
    bool compare_failed; /* Txn: the else branch ran */
    kv_totals totals;    /* Txn, OK: the totals it leaves */
    uint64_t emitted;    /* Txn, OK: events appended to the outbox */
} kv_outcome;

/* The call as the rules see it. */
typedef struct kv_env {
    store_txn *txn;
    const kv_limits *limits;
    const char *principal; /* the caller's lease's principal */
    uint64_t client_id;    /* the Txn's rpc id's client (lease binding) */
    /* emit: the outbox's bounds and the producing call, whose event
     * index grows with each emit of the branch that runs. */
    const outbox_limits *outbox;
    outbox_producer *producer;
} kv_env;

/* check.c: the request alone — sizes, counts, enums, emit. true when it
 * may run; otherwise o says why (nothing is read). */
bool kv_check_txn(const Once__V1__KvTxnRequest *r, const kv_limits *l,
                  kv_outcome *o);
bool kv_check_range(const Once__V1__KvRangeRequest *r, const kv_limits *l,
                    kv_outcome *o);

/* txn.c: runs the Txn over e->txn. */
void kv_txn(const kv_env *e, const Once__V1__KvTxnRequest *r, kv_outcome *o);

/* range.c: reads the range through e->txn (stages nothing). */
void kv_range(const kv_env *e, const Once__V1__KvRangeRequest *r,
              kv_outcome *o);

/* lease_end.c: stages in txn the deletion of every key bound to
 * client_id's lease (and the revision and counts that go with it); sets
 * *deleted and *totals. 0 or a store error. */
int kv_lease_end(store_txn *txn, uint64_t client_id, uint64_t *deleted,
                 kv_totals *totals);

/* The totals as txn sees them. 0 or a store error. */
int kv_totals_read(store_txn *txn, kv_totals *out);

#endif /* KV_KV_H */
