/*
 * once/kv.h — libonce's calls of once.v1.KV: transactions on your own
 * keys, exactly once (docs/kv.md).
 *
 * A Txn is built with an opaque builder that copies every key and value it
 * is given (no buffer of the caller's is kept), then executed under an
 * rpc id like any mutating call: a retry of the same id (a lost reply, a
 * timeout) returns the first answer — the same branch, the same values —
 * even when the keys have changed since. The builder keeps the request
 * bytes it sent, so a retry through it sends exactly those bytes.
 *
 *     once_kv_txn *t;
 *     once_kv_txn_new(&t);
 *     once_kv_txn_compare_version(t, "jobs/42", 7, ONCE_KV_EQUAL, 12);
 *     once_kv_txn_put(t, ONCE_KV_THEN, "jobs/42", 7, "running", 7, false);
 *     once_kv_txn_get(t, ONCE_KV_ELSE, "jobs/42", 7);
 *     rv = once_kv_txn_exec(c, t, &id, &st);   // id.seq 0: a new call
 *     ... once_kv_txn_succeeded(t), once_kv_txn_result(t, 0, &r) ...
 *     once_kv_txn_free(t);
 *
 * Keys and values are bytes; the server bounds them (onced --kv-key-max,
 * --kv-value-max, --kv-ops-max) and answers INVALID_ARGUMENT with a
 * KV_* reason past a bound, nothing written. The builder checks the same
 * bounds as things are added (onced's defaults, or once_kv_txn_limits)
 * and keeps its first refusal — a bound, a bad argument, no memory: the
 * refused compare or op is not added, and every exec of that builder
 * then returns the refusal with nothing sent, so a caller that ignores an
 * adder's return can never send a Txn missing one of its compares.
 */
#ifndef ONCE_KV_H
#define ONCE_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <once/client.h>

#ifdef __cplusplus
extern "C" {
#endif

/* onced's default bounds (--kv-key-max, --kv-value-max, --kv-ops-max:
 * compares and ops of one Txn together). */
#define ONCE_KV_KEY_MAX   1024u
#define ONCE_KV_VALUE_MAX (64u * 1024u)
#define ONCE_KV_OPS_MAX   128u

/* What a compare looks at, and how. */
enum once_kv_cmp {
    ONCE_KV_EQUAL = 0,
    ONCE_KV_LESS = 1,    /* the key's value/version < the operand */
    ONCE_KV_GREATER = 2, /* the key's value/version > the operand */
};

/* Which branch an op goes to: `then` runs when every compare holds. */
enum once_kv_branch {
    ONCE_KV_THEN = 0,
    ONCE_KV_ELSE = 1,
};

/* The kind of an op's result (once_kv_result.kind). */
enum once_kv_kind {
    ONCE_KV_PUT = 1,
    ONCE_KV_DELETE = 2,
    ONCE_KV_DELETE_PREFIX = 3,
    ONCE_KV_GET = 4,
    ONCE_KV_EMIT = 5,
};

/* The KV reasons (ONCE_REASON_KV_QUOTA, ONCE_REASON_KV_PREFIX_DENIED, ...)
 * are in <once/reasons.h> with every other reason. */

typedef struct once_kv_txn once_kv_txn;

/* A new, empty builder (free with once_kv_txn_free). ONCE_OK or
 * ONCE_RESOURCE_EXHAUSTED (no memory). */
ONCE_API int once_kv_txn_new(once_kv_txn **tp);
/* NULL is accepted. */
ONCE_API void once_kv_txn_free(once_kv_txn *t);

/* The bounds the adders check (0: keep that one; the defaults are
 * onced's), for an onced started with other --kv-* bounds. Things added
 * before are not checked again. */
ONCE_API void once_kv_txn_limits(once_kv_txn *t, size_t key_max,
                                 size_t value_max, size_t ops_max);

/* The builder's kept refusal: ONCE_OK when none, else its code, with the
 * reason and message in *st (may be NULL). */
ONCE_API int once_kv_txn_status(const once_kv_txn *t, once_status *st);

/* Compares: the key's value (bytewise) or version against the operand;
 * the key exists; the key is absent. An absent key has version 0 and
 * fails every value compare. Each returns ONCE_OK, or
 * ONCE_INVALID_ARGUMENT (an empty key or one past the bound, a value past
 * it, too many compares and ops, NULL with a length, bad cmp) /
 * ONCE_RESOURCE_EXHAUSTED; the refusal is kept (see above). */
ONCE_API int once_kv_txn_compare_value(once_kv_txn *t, const void *key,
                                       size_t key_len, int cmp,
                                       const void *value, size_t value_len);
ONCE_API int once_kv_txn_compare_version(once_kv_txn *t, const void *key,
                                         size_t key_len, int cmp,
                                         uint64_t version);
ONCE_API int once_kv_txn_compare_exists(once_kv_txn *t, const void *key,
                                        size_t key_len);
ONCE_API int once_kv_txn_compare_absent(once_kv_txn *t, const void *key,
                                        size_t key_len);

/* Ops, appended to branch (ONCE_KV_THEN or ONCE_KV_ELSE). put with lease
 * binds the key to the executing handle's lease: onced deletes it when
 * that lease ends. Return codes as the compares'. */
ONCE_API int once_kv_txn_put(once_kv_txn *t, int branch, const void *key,
                             size_t key_len, const void *value,
                             size_t value_len, bool lease);
ONCE_API int once_kv_txn_del(once_kv_txn *t, int branch, const void *key,
                             size_t key_len);
ONCE_API int once_kv_txn_del_prefix(once_kv_txn *t, int branch,
                                    const void *prefix, size_t prefix_len);
ONCE_API int once_kv_txn_get(once_kv_txn *t, int branch, const void *key,
                             size_t key_len);
/* An outbox event on topic (docs/outbox.md), committed with the Txn's
 * other ops; the caller's role needs an outbox-emit rule for the topic
 * (PERMISSION_DENIED / OUTBOX_TOPIC_DENIED otherwise). An onced older than
 * the outbox refuses it (UNIMPLEMENTED / KV_EMIT_UNAVAILABLE). */
ONCE_API int once_kv_txn_emit(once_kv_txn *t, int branch, const char *topic,
                              const void *payload, size_t payload_len);

/*
 * Executes the Txn (/once.v1.KV/Txn) under an rpc id, as once_call does:
 * id NULL or id->seq 0 is a new call (the id is written back when id is
 * not NULL), otherwise a retry of exactly *id. The request bytes are
 * packed once and kept while the builder is unchanged, so a retry sends
 * the same bytes. On ONCE_OK the result accessors below read the reply
 * (st->replayed says it was the stored one); a failed compare is ONCE_OK
 * with once_kv_txn_succeeded false. A builder holding a refusal sends
 * nothing and returns it.
 */
ONCE_API int once_kv_txn_exec(once_client *c, once_kv_txn *t, once_rpc_id *id,
                              once_status *st);

/*
 * once_kv_txn_exec as an async call (once_call_async, <once/client.h>):
 * the request bytes are copied, so t may be changed or freed once this
 * returns; id as in once_call_async (NULL or seq 0: a new call, read its id
 * with once_future_id). The answer is read into a builder with
 * once_kv_txn_finish.
 */
ONCE_API int once_kv_txn_exec_async(once_client *c, once_kv_txn *t,
                                    const once_rpc_id *id, once_done_fn done,
                                    void *arg, once_future **fp,
                                    once_status *st);

/* Waits for f (from once_kv_txn_exec_async) and on ONCE_OK makes its reply
 * t's result, read with the accessors below. Returns f's code, st as
 * once_wait fills it. Once per future (the reply is handed over once);
 * the future is still the caller's to free. */
ONCE_API int once_kv_txn_finish(once_kv_txn *t, once_future *f,
                                once_status *st);

/* The last ONCE_OK exec's reply: which branch ran, the store revision,
 * the 1-based index of the first compare that failed (0: none). */
ONCE_API bool once_kv_txn_succeeded(const once_kv_txn *t);
ONCE_API uint64_t once_kv_txn_revision(const once_kv_txn *t);
ONCE_API uint32_t once_kv_txn_failed_compare(const once_kv_txn *t);

/* One op's result. Pointers are the builder's: valid until the next exec
 * or once_kv_txn_free. */
typedef struct once_kv_result {
    int kind;          /* enum once_kv_kind */
    bool found;        /* get: the key exists */
    const void *value; /* get: its value */
    size_t value_len;
    uint64_t version;         /* put: the new version; get: the key's */
    uint64_t prev_version;    /* put: the version before (0: absent) */
    uint64_t create_revision; /* get */
    uint64_t lease;           /* get: the client id it is bound to (0: none) */
    uint64_t deleted;         /* delete, delete_prefix: keys deleted */
    const void *key;          /* get, found: the key */
    size_t key_len;
} once_kv_result;

/* How many results the branch that ran has (one per op), and the i-th.
 * ONCE_OK or ONCE_INVALID_ARGUMENT (no such result). */
ONCE_API size_t once_kv_txn_results(const once_kv_txn *t);
ONCE_API int once_kv_txn_result(const once_kv_txn *t, size_t i,
                                once_kv_result *out);

/* ---- Range ----------------------------------------------------------- */

typedef struct once_kv_range once_kv_range;

/* One stored key. Pointers are the range's: valid until
 * once_kv_range_free. */
typedef struct once_kv {
    const void *key;
    size_t key_len;
    const void *value;
    size_t value_len;
    uint64_t version;
    uint64_t create_revision;
    uint64_t lease;
} once_kv;

/*
 * /once.v1.KV/Range: the key (prefix false), or a page of the keys that
 * start with it (prefix true), at most limit (0: the server's 1000), from
 * cont (the previous page's continuation; NULL for the first page). A
 * read: no rpc id. On ONCE_OK *out is the page (once_kv_range_free).
 */
ONCE_API int once_kv_range_get(once_client *c, const void *key, size_t key_len,
                               bool prefix, uint32_t limit, const void *cont,
                               size_t cont_len, once_kv_range **out,
                               once_status *st);
ONCE_API size_t once_kv_range_count(const once_kv_range *r);
ONCE_API int once_kv_range_at(const once_kv_range *r, size_t i, once_kv *out);
/* Whether more keys follow, and the continuation to ask for them with. */
ONCE_API bool once_kv_range_more(const once_kv_range *r, const void **cont,
                                 size_t *cont_len);
ONCE_API uint64_t once_kv_range_revision(const once_kv_range *r);
/* NULL is accepted. */
ONCE_API void once_kv_range_free(once_kv_range *r);

#ifdef __cplusplus
}
#endif

#endif /* ONCE_KV_H */
