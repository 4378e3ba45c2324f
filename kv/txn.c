/*
 * txn.c — once.v1.KV/Txn: compares, then one branch of ops, over the
 * call's transaction (kv_txn).
 *
 * Owns the order of a Txn: read the totals; evaluate every compare
 * against the keys as they are (compare.c); run the `then` ops when all
 * hold, else the `else` ops, each seeing the ops before it (an emit
 * appends its event to the outbox here, outbox_append); stage the
 * revision and the byte counts (acct.c), refusing the whole Txn when the
 * caller's principal would pass --kv-quota; pack the reply, which the
 * executor records as the call's completion record.
 * Invariant: every key written by one Txn gets the same version, the new
 * revision; a Txn that changes no key leaves the revision where it was;
 * its events are staged with its keys, so the two commit together or not
 * at all, and a refused emit (OUTBOX_FULL) refuses the whole Txn.
 * Never: decides who may touch a key (svc_kv.c asks the policy first);
 * keeps a write when the outcome is not OK.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv/kv_impl.h"
#include "proto/reasons.h"
#include "proto/once.pb-c.h"

/* One op's result and the messages it points to. */
typedef struct op_slot {
    Once__V1__KvOpResult r;
    Once__V1__KvPutResult put;
    Once__V1__KvDeleteResult del;
    Once__V1__KvGetResult get;
    Once__V1__KvEmitResult emit;
    Once__V1__KeyValue kv;
    kv_entry *held; /* get: the entry kv's value points into */
} op_slot;

typedef struct txn_run {
    const kv_env *e;
    kv_acct a;
    kv_outcome *o; /* an emit's refusal lands here */
} txn_run;

static int
row_get_opt(store_txn *t, const ProtobufCBinaryData *key, kv_entry **out)
{
    int rv = kv_row_get(t, key->data, key->len, out);

    if (rv == ENOENT) {
        *out = NULL;
        return 0;
    }
    return rv;
}

static int
op_put(txn_run *x, const Once__V1__KvPut *p, op_slot *s)
{
    kv_entry ne = ONCE__STORE__V1__KV_ENTRY__INIT;
    kv_entry *old;
    int rv;

    if ((rv = row_get_opt(x->e->txn, &p->key, &old)) != 0) {
        return rv;
    }
    ne.value = p->value;
    ne.version = x->a.rev;
    ne.create_revision = old != NULL ? old->create_revision : x->a.rev;
    ne.lease = p->lease ? x->e->client_id : 0;
    ne.principal = (char *)x->e->principal;
    rv = kv_row_apply(x->e->txn, &x->a, p->key.data, p->key.len, old, &ne);
    once__v1__kv_put_result__init(&s->put);
    s->put.version = x->a.rev;
    s->put.prev_version = old != NULL ? old->version : 0;
    s->r.result_case = ONCE__V1__KV_OP_RESULT__RESULT_PUT;
    s->r.put = &s->put;
    kv_entry_free(old);
    return rv;
}

static int
op_delete(txn_run *x, const Once__V1__KvDelete *d, op_slot *s)
{
    kv_entry *old;
    int rv;

    if ((rv = row_get_opt(x->e->txn, &d->key, &old)) != 0) {
        return rv;
    }
    once__v1__kv_delete_result__init(&s->del);
    if (old != NULL) {
        rv = kv_row_apply(x->e->txn, &x->a, d->key.data, d->key.len, old, NULL);
        s->del.deleted = 1;
    }
    s->r.result_case = ONCE__V1__KV_OP_RESULT__RESULT_DELETE;
    s->r.delete_ = &s->del;
    kv_entry_free(old);
    return rv;
}

typedef struct prefix_del {
    txn_run *x;
    uint64_t n;
} prefix_del;

/* store_txn_scan callback: deletes one k/d/ key. */
static int
prefix_del_one(void *arg, const char *key, size_t klen, const char *val,
               size_t vlen)
{
    prefix_del *pd = arg;
    kv_entry *old = kv_entry_decode(val, vlen);
    int rv;

    if (old == NULL) {
        return EBADMSG;
    }
    rv = kv_row_apply(pd->x->e->txn, &pd->x->a,
                      (const uint8_t *)key + KV_PREFIX_LEN,
                      klen - KV_PREFIX_LEN, old, NULL);
    kv_entry_free(old);
    pd->n++;
    return rv;
}

static int
op_delete_prefix(txn_run *x, const Once__V1__KvDeletePrefix *d, op_slot *s)
{
    prefix_del pd = {.x = x};
    kv_key k;
    int rv;

    if ((rv = kv_key_data(&k, d->prefix.data, d->prefix.len)) != 0) {
        return rv;
    }
    rv = store_txn_scan(x->e->txn, k.b, k.n, k.b, k.n, prefix_del_one, &pd);
    kv_key_fini(&k);
    once__v1__kv_delete_result__init(&s->del);
    s->del.deleted = pd.n;
    s->r.result_case = ONCE__V1__KV_OP_RESULT__RESULT_DELETE_PREFIX;
    s->r.delete_prefix = &s->del;
    return rv;
}

static int
op_get(txn_run *x, const Once__V1__KvGet *g, op_slot *s)
{
    int rv;

    if ((rv = row_get_opt(x->e->txn, &g->key, &s->held)) != 0) {
        return rv;
    }
    once__v1__kv_get_result__init(&s->get);
    if (s->held != NULL) {
        once__v1__key_value__init(&s->kv);
        s->kv.key = g->key;
        s->kv.value = s->held->value;
        s->kv.version = s->held->version;
        s->kv.create_revision = s->held->create_revision;
        s->kv.lease = s->held->lease;
        s->get.found = true;
        s->get.kv = &s->kv;
    }
    s->r.result_case = ONCE__V1__KV_OP_RESULT__RESULT_GET;
    s->r.get = &s->get;
    return 0;
}

/* Appends the event to the outbox in this transaction; a refusal
 * (OUTBOX_FULL, a payload too large) refuses the whole Txn. */
static int
op_emit(txn_run *x, const Once__V1__KvEmit *m, op_slot *s)
{
    outbox_outcome oo = {0};
    int rv;

    once__v1__kv_emit_result__init(&s->emit);
    rv = outbox_append(x->e->txn, x->e->outbox, x->e->producer, m->topic,
                       m->payload.data, m->payload.len, &s->emit.offset, &oo);
    if (rv == 0 && oo.code != ONCE__V1__CODE__OK) {
        x->o->code = oo.code;
        x->o->reason = oo.reason;
        memcpy(x->o->message, oo.message, sizeof(x->o->message));
        return 0;
    }
    x->o->emitted += rv == 0;
    s->r.result_case = ONCE__V1__KV_OP_RESULT__RESULT_EMIT;
    s->r.emit = &s->emit;
    return rv;
}

static int
op_run(txn_run *x, const Once__V1__KvOp *op, op_slot *s)
{
    once__v1__kv_op_result__init(&s->r);
    switch (op->op_case) {
    case ONCE__V1__KV_OP__OP_PUT:
        return op_put(x, op->put, s);
    case ONCE__V1__KV_OP__OP_DELETE:
        return op_delete(x, op->delete_, s);
    case ONCE__V1__KV_OP__OP_DELETE_PREFIX:
        return op_delete_prefix(x, op->delete_prefix, s);
    case ONCE__V1__KV_OP__OP_GET:
        return op_get(x, op->get, s);
    case ONCE__V1__KV_OP__OP_EMIT:
        return op_emit(x, op->emit, s);
    default:
        return EINVAL; /* check.c refused it */
    }
}

/* The 1-based index of the first compare that does not hold (0: all
 * hold), or a store error in *err. */
static uint32_t
compares_eval(store_txn *t, const Once__V1__KvTxnRequest *r, int *err)
{
    for (size_t i = 0; i < r->n_compares; i++) {
        kv_entry *e;
        bool holds;

        if ((*err = row_get_opt(t, &r->compares[i]->key, &e)) != 0) {
            return 0;
        }
        holds = kv_compare_holds(r->compares[i], e);
        kv_entry_free(e);
        if (!holds) {
            return (uint32_t)(i + 1);
        }
    }
    return 0;
}

static void
reply_pack(kv_outcome *o, const Once__V1__KvTxnResponse *resp)
{
    o->resp_len = once__v1__kv_txn_response__get_packed_size(resp);
    if ((o->resp = malloc(o->resp_len > 0 ? o->resp_len : 1)) == NULL) {
        o->err = ENOMEM;
        return;
    }
    once__v1__kv_txn_response__pack(resp, o->resp);
    o->code = ONCE__V1__CODE__OK;
}

/* Runs the branch's n ops into slots, then stages the counts; sets o's
 * code on a quota refusal. Returns a store error or 0. */
static int
branch_run(txn_run *x, Once__V1__KvOp *const *ops, size_t n, op_slot *slots,
           kv_outcome *o)
{
    uint64_t over = 0;
    int rv = 0;

    for (size_t i = 0; i < n && rv == 0 && o->code == ONCE__V1__CODE__OK; i++) {
        rv = op_run(x, ops[i], &slots[i]);
    }
    if (rv == 0 && o->code == ONCE__V1__CODE__OK) {
        rv = kv_acct_finish(x->e->txn, &x->a, x->e->principal,
                            x->e->limits->quota, &over);
    }
    if (rv == 0 && over != 0) {
        o->code = ONCE__V1__CODE__RESOURCE_EXHAUSTED;
        o->reason = REASON_KV_QUOTA;
        snprintf(o->message, sizeof(o->message),
                 "principal \"%.64s\" would hold %llu bytes of keys and "
                 "values; at most %llu (onced --kv-quota): nothing was "
                 "written — delete keys, then retry the same rpc id",
                 x->e->principal, (unsigned long long)over,
                 (unsigned long long)x->e->limits->quota);
    }
    return rv;
}

void
kv_txn(const kv_env *e, const Once__V1__KvTxnRequest *r, kv_outcome *o)
{
    Once__V1__KvTxnResponse resp = ONCE__V1__KV_TXN_RESPONSE__INIT;
    txn_run x = {.e = e, .o = o};
    Once__V1__KvOp *const *ops;
    Once__V1__KvOpResult **results = NULL;
    op_slot *slots = NULL;
    size_t n;
    int rv;

    memset(o, 0, sizeof(*o));
    if ((rv = kv_acct_begin(e->txn, &x.a)) != 0) {
        o->err = rv;
        return;
    }
    resp.failed_compare = compares_eval(e->txn, r, &rv);
    resp.succeeded = resp.failed_compare == 0;
    ops = resp.succeeded ? r->then_ops : r->else_ops;
    n = resp.succeeded ? r->n_then_ops : r->n_else_ops;
    if (rv == 0 && ((slots = calloc(n + 1, sizeof(*slots))) == NULL ||
                    (results = calloc(n + 1, sizeof(*results))) == NULL)) {
        rv = ENOMEM;
    }
    if (rv == 0) {
        rv = branch_run(&x, ops, n, slots, o);
    }
    o->err = rv;
    if (rv == 0 && o->code == ONCE__V1__CODE__OK) {
        for (size_t i = 0; i < n; i++) {
            results[i] = &slots[i].r;
        }
        resp.results = results;
        resp.n_results = n;
        resp.revision = x.a.t.revision;
        o->compare_failed = !resp.succeeded;
        o->totals = x.a.t;
        reply_pack(o, &resp);
    }
    for (size_t i = 0; slots != NULL && i < n; i++) {
        kv_entry_free(slots[i].held);
    }
    free(slots);
    free(results);
    kv_acct_fini(&x.a);
}
