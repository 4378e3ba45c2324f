/*
 * check.c — a KV request checked alone, before anything is read.
 *
 * Owns the bounds of once.v1.KV (--kv-key-max, --kv-value-max,
 * --kv-ops-max; a request's bytes are bounded by --recv-max already) and
 * the shape of compares and ops. Each refusal names the bound and the
 * offending compare or op (1-based, in the order compares, then, else).
 * Invariant: a request that passes holds only keys of 1..key_max bytes,
 * values of at most value_max, known targets and ops, emit topics named
 * by the name rule.
 * Never: reads the store; a refusal here is never recorded.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kv/kv_impl.h"
#include "outbox/outbox.h"
#include "proto/reasons.h"
#include "proto/once.pb-c.h"

static bool refuse(kv_outcome *o, int code, const char *reason, const char *fmt,
                   ...) __attribute__((format(printf, 4, 5)));

static bool
refuse(kv_outcome *o, int code, const char *reason, const char *fmt, ...)
{
    va_list ap;

    o->code = code;
    o->reason = reason;
    va_start(ap, fmt);
    vsnprintf(o->message, sizeof(o->message), fmt, ap);
    va_end(ap);
    return false;
}

static bool
key_ok(const ProtobufCBinaryData *k, const kv_limits *l, const char *what,
       kv_outcome *o)
{
    if (k->len == 0) {
        return refuse(o, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_KV_EMPTY_KEY,
                      "%s: a key (or prefix) needs at least one byte", what);
    }
    if (k->len > l->key_max) {
        return refuse(o, ONCE__V1__CODE__INVALID_ARGUMENT,
                      REASON_KV_KEY_TOO_LARGE,
                      "%s: key of %zu bytes; at most %llu (onced "
                      "--kv-key-max)",
                      what, k->len, (unsigned long long)l->key_max);
    }
    return true;
}

/* An emit's topic follows the name rule and is not onced's own (no
 * forged system event); its payload's bound is the outbox's
 * (outbox_append). */
static bool
emit_ok(const Once__V1__KvEmit *e, const char *what, kv_outcome *o)
{
    outbox_outcome oo = {0};

    if (!outbox_name_ok(e->topic, "topic", &oo)) {
        return refuse(o, oo.code, oo.reason, "%s: %s", what, oo.message);
    }
    if (strncmp(e->topic, OUTBOX_RESERVED_PREFIX,
                strlen(OUTBOX_RESERVED_PREFIX)) == 0) {
        return refuse(o, ONCE__V1__CODE__PERMISSION_DENIED,
                      REASON_OUTBOX_RESERVED_TOPIC,
                      "%s: topics named \"" OUTBOX_RESERVED_PREFIX
                      "...\" are onced's own (%s); emit to a topic of yours",
                      what, OUTBOX_SYSTEM_TOPIC);
    }
    return true;
}

static bool
compare_ok(const Once__V1__KvCompare *c, const kv_limits *l, const char *what,
           kv_outcome *o)
{
    if (!key_ok(&c->key, l, what, o)) {
        return false;
    }
    if (c->target < ONCE__V1__KV_COMPARE__TARGET__VALUE ||
        c->target > ONCE__V1__KV_COMPARE__TARGET__ABSENT ||
        c->op > ONCE__V1__KV_COMPARE__OP__GREATER) {
        return refuse(o, ONCE__V1__CODE__INVALID_ARGUMENT,
                      REASON_KV_BAD_COMPARE,
                      "%s: target %d / op %d; targets are VALUE, VERSION, "
                      "EXISTS, ABSENT and ops EQUAL, LESS, GREATER",
                      what, (int)c->target, (int)c->op);
    }
    if (c->target == ONCE__V1__KV_COMPARE__TARGET__VALUE &&
        c->value.len > l->value_max) {
        return refuse(o, ONCE__V1__CODE__INVALID_ARGUMENT,
                      REASON_KV_VALUE_TOO_LARGE,
                      "%s: value of %zu bytes; at most %llu (onced "
                      "--kv-value-max)",
                      what, c->value.len, (unsigned long long)l->value_max);
    }
    return true;
}

static bool
op_ok(const Once__V1__KvOp *op, const kv_limits *l, const char *what,
      kv_outcome *o)
{
    switch (op->op_case) {
    case ONCE__V1__KV_OP__OP_PUT:
        if (!key_ok(&op->put->key, l, what, o)) {
            return false;
        }
        if (op->put->value.len > l->value_max) {
            return refuse(
                o, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_KV_VALUE_TOO_LARGE,
                "%s: value of %zu bytes; at most %llu (onced "
                "--kv-value-max)",
                what, op->put->value.len, (unsigned long long)l->value_max);
        }
        return true;
    case ONCE__V1__KV_OP__OP_DELETE:
        return key_ok(&op->delete_->key, l, what, o);
    case ONCE__V1__KV_OP__OP_DELETE_PREFIX:
        return key_ok(&op->delete_prefix->prefix, l, what, o);
    case ONCE__V1__KV_OP__OP_GET:
        return key_ok(&op->get->key, l, what, o);
    case ONCE__V1__KV_OP__OP_EMIT:
        return emit_ok(op->emit, what, o);
    default:
        return refuse(o, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_KV_BAD_OP,
                      "%s: an op must be one of put, delete, delete_prefix, "
                      "get, emit",
                      what);
    }
}

static bool
ops_ok(Once__V1__KvOp *const *ops, size_t n, const char *branch,
       const kv_limits *l, kv_outcome *o)
{
    char what[48];

    for (size_t i = 0; i < n; i++) {
        snprintf(what, sizeof(what), "%s op %zu", branch, i + 1);
        if (!op_ok(ops[i], l, what, o)) {
            return false;
        }
    }
    return true;
}

bool
kv_check_txn(const Once__V1__KvTxnRequest *r, const kv_limits *l, kv_outcome *o)
{
    size_t n = r->n_compares + r->n_then_ops + r->n_else_ops;
    char what[48];

    if (n > l->ops_max) {
        return refuse(o, ONCE__V1__CODE__INVALID_ARGUMENT,
                      REASON_KV_TOO_MANY_OPS,
                      "%zu compares and ops; a Txn holds at most %llu (onced "
                      "--kv-ops-max)",
                      n, (unsigned long long)l->ops_max);
    }
    for (size_t i = 0; i < r->n_compares; i++) {
        snprintf(what, sizeof(what), "compare %zu", i + 1);
        if (!compare_ok(r->compares[i], l, what, o)) {
            return false;
        }
    }
    return ops_ok(r->then_ops, r->n_then_ops, "then", l, o) &&
           ops_ok(r->else_ops, r->n_else_ops, "else", l, o);
}

bool
kv_check_range(const Once__V1__KvRangeRequest *r, const kv_limits *l,
               kv_outcome *o)
{
    if (!r->prefix && !key_ok(&r->key, l, "range", o)) {
        return false;
    }
    if (r->prefix && r->key.len > l->key_max) {
        return key_ok(&r->key, l, "range prefix", o);
    }
    if (r->continuation.len > 0 &&
        (!r->prefix || r->continuation.len < r->key.len ||
         (r->key.len > 0 &&
          memcmp(r->continuation.data, r->key.data, r->key.len) != 0))) {
        return refuse(o, ONCE__V1__CODE__INVALID_ARGUMENT,
                      REASON_KV_BAD_CONTINUATION,
                      "the continuation is not one of this range's: send the "
                      "one its previous page returned, with the same key "
                      "and prefix");
    }
    return true;
}
