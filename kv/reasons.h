/*
 * reasons.h — the status reasons once.v1.KV answers with, in one place.
 *
 * Owns the reason words of the KV service (docs/protocol.md, "The KV
 * service"; SPEC section 11), so a shared reasons table can take them
 * over by including or copying this one list.
 * Invariant: a reason word, once shipped, never changes spelling or code.
 * Never: a reason built at run time, or one that says something the code
 * beside it does not.
 */
#ifndef KV_REASONS_H
#define KV_REASONS_H

/* INVALID_ARGUMENT, refused before anything is read or written (not
 * recorded): */
#define KV_REASON_EMPTY_KEY        "KV_EMPTY_KEY" /* a key or prefix of 0 bytes */
#define KV_REASON_KEY_TOO_LARGE    "KV_KEY_TOO_LARGE"   /* > --kv-key-max */
#define KV_REASON_VALUE_TOO_LARGE  "KV_VALUE_TOO_LARGE" /* > --kv-value-max */
#define KV_REASON_TOO_MANY_OPS     "KV_TOO_MANY_OPS"    /* > --kv-ops-max */
#define KV_REASON_BAD_COMPARE      "KV_BAD_COMPARE"     /* unknown target/op */
#define KV_REASON_BAD_OP           "KV_BAD_OP" /* an op with none set */
#define KV_REASON_BAD_CONTINUATION "KV_BAD_CONTINUATION" /* not of this range  \
                                                          */
/* UNIMPLEMENTED: an emit op before the outbox exists (not recorded). */
#define KV_REASON_EMIT_UNAVAILABLE "KV_EMIT_UNAVAILABLE"
/* PERMISSION_DENIED: no policy rule gives the caller this key or prefix
 * (checked on every attempt, not recorded). */
#define KV_REASON_PREFIX_DENIED "KV_PREFIX_DENIED"
/* RESOURCE_EXHAUSTED: the Txn would take the caller's principal past
 * --kv-quota stored bytes (not recorded: the same rpc id may run once
 * space is freed). */
#define KV_REASON_QUOTA "KV_QUOTA"

#endif /* KV_REASONS_H */
