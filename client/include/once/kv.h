/*
 * once/kv.h — libonce's calls of once.v1.KV: the user's own keys, changed
 * exactly once (docs/kv.md, SPEC section 11).
 *
 * A Txn is built with a once_kv_builder and sent with once_kv_txn (or
 * once_kv_txn_async). The builder cannot be misused: every adder copies
 * its key and value (the caller's buffers may be reused at once), checks
 * them against the limits (onced's defaults unless once_kv_builder_limits
 * says otherwise) and, when one is broken, keeps that first refusal:
 * sending the builder then returns it, with nothing sent, even when the
 * caller ignored the adder's return. A builder is not changed by sending
 * it, so the same builder resends the same payload (a retry of its rpc id
 * is answered from the completion record, never run twice).
 *
 * Results own their bytes: the pointers in a once_kv_entry stay valid
 * until the result is freed.
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

/* onced's default limits (--kv-key-max, --kv-value-max, --kv-ops-max). */
#define ONCE_KV_KEY_MAX   1024u
#define ONCE_KV_VALUE_MAX (64u * 1024u)
#define ONCE_KV_OPS_MAX   128u /* compares and ops of one Txn, together */

/* The KV service's reasons (docs/protocol.md). */
#define ONCE_REASON_KV_EMPTY_KEY        "KV_EMPTY_KEY"
#define ONCE_REASON_KV_KEY_TOO_LARGE    "KV_KEY_TOO_LARGE"
#define ONCE_REASON_KV_VALUE_TOO_LARGE  "KV_VALUE_TOO_LARGE"
#define ONCE_REASON_KV_TOO_MANY_OPS     "KV_TOO_MANY_OPS"
#define ONCE_REASON_KV_BAD_COMPARE      "KV_BAD_COMPARE"
#define ONCE_REASON_KV_BAD_OP           "KV_BAD_OP"
#define ONCE_REASON_KV_BAD_CONTINUATION "KV_BAD_CONTINUATION"
#define ONCE_REASON_KV_EMIT_UNAVAILABLE "KV_EMIT_UNAVAILABLE"
#define ONCE_REASON_KV_PREFIX_DENIED    "KV_PREFIX_DENIED"
#define ONCE_REASON_KV_QUOTA            "KV_QUOTA"

/* What a compare looks at (once.v1.KvCompare.Target). */
enum once_kv_target {
    ONCE_KV_VALUE = 1,   /* the value, bytewise */
    ONCE_KV_VERSION = 2, /* the version; an absent key has version 0 */
    ONCE_KV_EXISTS = 3,
    ONCE_KV_ABSENT = 4,
};

/* How (once.v1.KvCompare.Op): the key's value or version against the
 * operand. */
enum once_kv_cmp {
    ONCE_KV_EQUAL = 0,
    ONCE_KV_LESS = 1,
    ONCE_KV_GREATER = 2,
};

/* Which branch an op goes to. */
enum once_kv_branch {
    ONCE_KV_THEN = 0, /* every compare held */
    ONCE_KV_ELSE = 1, /* one did not */
};

/* An op's kind, in a result. */
enum once_kv_op_kind {
    ONCE_KV_OP_PUT = 1,
    ONCE_KV_OP_DELETE = 2,
    ONCE_KV_OP_DELETE_PREFIX = 3,
    ONCE_KV_OP_GET = 4,
    ONCE_KV_OP_EMIT = 5,
};

/* ---- building a Txn ----------------------------------------------------- */

typedef struct once_kv_builder once_kv_builder;

/* A new, empty builder (no compares: the `then` ops always run). 0 or
 * ONCE_RESOURCE_EXHAUSTED. Free with once_kv_builder_free. */
ONCE_API int once_kv_builder_alloc(once_kv_builder **bp);

/* Frees b and its copies. NULL is accepted. */
ONCE_API void once_kv_builder_free(once_kv_builder *b);

/* The limits the adders check (0: keep that one), for an onced started
 * with other --kv-* limits. Checks added before are not re-run. */
ONCE_API void once_kv_builder_limits(once_kv_builder *b, size_t key_max,
                                     size_t value_max, size_t ops_max);

/* Compares. Each returns ONCE_OK, or ONCE_INVALID_ARGUMENT (a KV_ reason)
 * / ONCE_RESOURCE_EXHAUSTED (NO_MEMORY), which the builder keeps. */
ONCE_API int once_kv_if_value(once_kv_builder *b, const void *key, size_t klen,
                              int cmp, const void *value, size_t vlen);
ONCE_API int once_kv_if_version(once_kv_builder *b, const void *key,
                                size_t klen, int cmp, uint64_t version);
ONCE_API int once_kv_if_exists(once_kv_builder *b, const void *key,
                               size_t klen);
ONCE_API int once_kv_if_absent(once_kv_builder *b, const void *key,
                               size_t klen);

/* Ops of branch (enum once_kv_branch), run in the order added. lease:
 * bind the key to the lease of the Txn's rpc id (deleted when it ends). */
ONCE_API int once_kv_put(once_kv_builder *b, int branch, const void *key,
                         size_t klen, const void *value, size_t vlen,
                         bool lease);
ONCE_API int once_kv_delete(once_kv_builder *b, int branch, const void *key,
                            size_t klen);
ONCE_API int once_kv_delete_prefix(once_kv_builder *b, int branch,
                                   const void *prefix, size_t plen);
ONCE_API int once_kv_get(once_kv_builder *b, int branch, const void *key,
                         size_t klen);
/* An outbox event; onced refuses it (UNIMPLEMENTED / KV_EMIT_UNAVAILABLE)
 * until it has the outbox. */
ONCE_API int once_kv_emit(once_kv_builder *b, int branch, const char *topic,
                          const void *payload, size_t plen);

/* The builder's first refusal (ONCE_OK when none) with its reason and
 * message in *st (may be NULL). */
ONCE_API int once_kv_builder_status(const once_kv_builder *b, once_status *st);

/* ---- results ------------------------------------------------------------ */

/* One key as onced returned it; the bytes belong to the result. */
typedef struct once_kv_entry {
    const void *key;
    size_t klen;
    const void *value; /* NULL with vlen 0 for keys_only ranges */
    size_t vlen;
    uint64_t version;         /* the revision of its last write */
    uint64_t create_revision; /* the revision that created it */
    uint64_t lease;           /* the client id it is bound to; 0: none */
} once_kv_entry;

/* One op's result, in the order of the branch that ran. */
typedef struct once_kv_op_result {
    int kind;              /* enum once_kv_op_kind */
    bool found;            /* get: the key exists (entry filled) */
    once_kv_entry entry;   /* get */
    uint64_t version;      /* put: the key's new version */
    uint64_t prev_version; /* put: before (0: it was absent) */
    uint64_t deleted;      /* delete, delete_prefix: keys deleted */
} once_kv_op_result;

typedef struct once_kv_result once_kv_result;

/* true: every compare held and the `then` ops ran. */
ONCE_API bool once_kv_result_succeeded(const once_kv_result *r);
/* The store revision after the Txn (its own when it wrote). */
ONCE_API uint64_t once_kv_result_revision(const once_kv_result *r);
/* 1-based index of the first compare that failed; 0 when all held. */
ONCE_API uint32_t once_kv_result_failed_compare(const once_kv_result *r);
ONCE_API size_t once_kv_result_count(const once_kv_result *r);
/* Result i (from 0) into *out: ONCE_OK, or ONCE_OUT_OF_RANGE. */
ONCE_API int once_kv_result_op(const once_kv_result *r, size_t i,
                               once_kv_op_result *out);
ONCE_API void once_kv_result_free(once_kv_result *r);

/* ---- calls -------------------------------------------------------------- */

/*
 * /once.v1.KV/Txn with b's compares and ops. id as in once_call: NULL or
 * seq 0 a new call (its id written back), else a retry of exactly *id —
 * with the same builder, or the server answers RPC_ID_CONFLICT. On
 * ONCE_OK *res (may be NULL) is the result (once_kv_result_free) and
 * st->replayed says it came from the completion record. A failed compare
 * is ONCE_OK with once_kv_result_succeeded false. A builder holding a
 * refusal sends nothing and returns it.
 */
ONCE_API int once_kv_txn(once_client *c, const once_kv_builder *b,
                         once_rpc_id *id, once_kv_result **res,
                         once_status *st);

/* once_kv_txn as an async call (id as in once_call_async; the builder is
 * packed before this returns and may be freed or changed at once); read
 * the result with once_future_kv_result. */
ONCE_API int once_kv_txn_async(once_client *c, const once_kv_builder *b,
                               const once_rpc_id *id, once_done_fn done,
                               void *arg, once_future **fp, once_status *st);

/* Waits for a once_kv_txn_async future; on ONCE_OK *res is its result
 * (once_kv_result_free). */
ONCE_API int once_future_kv_result(once_future *f, once_kv_result **res);

/* A page of /once.v1.KV/Range. */
typedef struct once_kv_range_result once_kv_range_result;

/*
 * Reads key (prefix false) or every key under it (prefix true; klen 0:
 * every key the caller may read), at most limit keys (0: onced's default,
 * 1000), from cont (clen bytes, a previous page's continuation; NULL for
 * the first). Answered after the commit that holds what it shows. On
 * ONCE_OK *res is the page (once_kv_range_result_free).
 */
ONCE_API int once_kv_range(once_client *c, const void *key, size_t klen,
                           bool prefix, uint32_t limit, const void *cont,
                           size_t clen, once_kv_range_result **res,
                           once_status *st);

ONCE_API size_t once_kv_range_count(const once_kv_range_result *r);
/* Entry i (from 0): ONCE_OK or ONCE_OUT_OF_RANGE. */
ONCE_API int once_kv_range_entry(const once_kv_range_result *r, size_t i,
                                 once_kv_entry *out);
/* More keys follow: *cont (*clen bytes, owned by r) asks for them. */
ONCE_API bool once_kv_range_more(const once_kv_range_result *r,
                                 const void **cont, size_t *clen);
ONCE_API uint64_t once_kv_range_revision(const once_kv_range_result *r);
ONCE_API void once_kv_range_result_free(once_kv_range_result *r);

#ifdef __cplusplus
}
#endif

#endif /* ONCE_KV_H */
