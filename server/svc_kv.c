/*
 * svc_kv.c — once.v1.KV: Txn and Range, the thin layer between the
 * executor and the rules in kv/ (docs/kv.md).
 *
 * Each handler checks the request alone and the caller's key prefixes
 * (validate: on every attempt, before the completion record is looked
 * up, never recorded), then runs one kv/ function over the call's
 * transaction. Txn is mutating: its whole reply is the completion record
 * the executor stages with its writes, so a retry gets the same branch
 * and values back. A quota refusal is not recorded (transient, like
 * DISK_LOW): nothing ran, the same rpc id may run once space is freed.
 * Owns the lease-end hook that deletes lease-bound keys and reports the
 * end on the outbox's system topic (set at open on the lease table), and
 * the KV figures of Stats.
 * Never: decides anything about keys itself.
 */
#include <errno.h>
#include <stdlib.h>

#include "kv/kv.h"
#include "proto/reasons.h"
#include "lease/lease.h"
#include "proto/kv.pb-c.h"
#include "proto/outbox.pb-c.h"
#include "proto/once.pb-c.h"
#include "server/auth.h"
#include "server/service.h"

static void
totals_publish(server_stats *ss, const kv_totals *t)
{
    atomic_store(&ss->kv_keys, t->keys);
    atomic_store(&ss->kv_bytes, t->bytes);
    atomic_store(&ss->kv_revision, t->revision);
}

/* The lease table's end hook: the keys bound to the lease go in the
 * batch that ends it, and the end is reported on the outbox's system
 * topic in that batch (past any bound: a lease end is never refused). */
static int
kv_on_lease_end(void *arg, store_txn *txn, uint64_t client_id)
{
    const exec_env *env = arg;
    server_stats *ss = env->stats;
    static const outbox_limits unbounded = {0, UINT64_MAX};
    outbox_producer p = {.client_id = client_id, .method = "lease.end"};
    Once__V1__SystemEvent ev = ONCE__V1__SYSTEM_EVENT__INIT;
    outbox_outcome o = {0};
    kv_totals t;
    uint64_t n;
    int rv = kv_lease_end(txn, client_id, &n, &t);

    if (rv == 0 && n > 0) {
        atomic_fetch_add(&ss->kv_lease_deleted, n);
        totals_publish(ss, &t);
    }
    if (rv == 0) {
        p.now_ms = env->now_ms();
        ev.kind = "lease.ended";
        ev.client_id = client_id;
        ev.kv_keys_deleted = n;
        rv = outbox_system_append(txn, &unbounded, &p, &ev, &o);
        atomic_fetch_add(&ss->outbox_events, rv == 0);
    }
    return rv;
}

static int
svc_kv_open(const exec_env *env, void **state)
{
    store_txn *t = store_txn_begin(env->st);
    kv_totals tot;
    int rv;

    if (t == NULL) {
        return ENOMEM;
    }
    rv = kv_totals_read(t, &tot);
    store_txn_abort(t);
    if (rv != 0) {
        return rv;
    }
    totals_publish(env->stats, &tot);
    lease_table_on_end(env->leases, kv_on_lease_end, (void *)env);
    *state = (void *)env;
    return 0;
}

static void
svc_kv_close(void *state)
{
    const exec_env *env = state;

    if (env != NULL) {
        lease_table_on_end(env->leases, NULL, NULL);
    }
}

static bool
outcome_ok(server_call *c, bool ok, const kv_outcome *o)
{
    if (!ok) {
        call_fail(c, o->code, o->reason, "%s", o->message);
    }
    return ok;
}

/* Turns a kv/ function's outcome into the call's: the packed reply on OK
 * (true), else a store error or the refusal (false). */
static bool
outcome_reply(server_call *c, kv_outcome *o)
{
    if (o->err != 0) {
        free(o->resp);
        call_store_error(c, o->err);
        return false;
    }
    if (o->code != ONCE__V1__CODE__OK) {
        free(o->resp);
        call_fail(c, o->code, o->reason, "%s", o->message);
        return false;
    }
    free(c->resp);
    c->resp = o->resp;
    c->resp_len = o->resp_len;
    return true;
}

/* ---- Txn ------------------------------------------------------------------
 */

/* Whether the caller may do op: write its key (put, delete) or prefix
 * (delete_prefix), read its key (get), or emit to its topic (emit). */
static bool
op_permitted(server_call *c, const Once__V1__KvOp *op)
{
    const auth *a = c->env->auth;

    switch (op->op_case) {
    case ONCE__V1__KV_OP__OP_PUT:
        return auth_kv_permit(a, c, op->put->key.data, op->put->key.len, true,
                              "key");
    case ONCE__V1__KV_OP__OP_DELETE:
        return auth_kv_permit(a, c, op->delete_->key.data, op->delete_->key.len,
                              true, "key");
    case ONCE__V1__KV_OP__OP_DELETE_PREFIX:
        return auth_kv_permit(a, c, op->delete_prefix->prefix.data,
                              op->delete_prefix->prefix.len, true, "prefix");
    case ONCE__V1__KV_OP__OP_GET:
        return auth_kv_permit(a, c, op->get->key.data, op->get->key.len, false,
                              "key");
    case ONCE__V1__KV_OP__OP_EMIT:
        return auth_topic_permit(a, c, op->emit->topic, true);
    default:
        return true; /* kv_check_txn refused it */
    }
}

static void
kv_txn_validate(server_call *c)
{
    const Once__V1__KvTxnRequest *r = (const void *)c->req;
    kv_outcome o = {0};

    if (!outcome_ok(c, kv_check_txn(r, &c->env->cfg.kv, &o), &o)) {
        return;
    }
    for (size_t i = 0; i < r->n_compares; i++) {
        if (!auth_kv_permit(c->env->auth, c, r->compares[i]->key.data,
                            r->compares[i]->key.len, false, "key")) {
            return;
        }
    }
    /* Both branches: which one runs depends on state the caller may not
     * be allowed to learn. */
    for (size_t i = 0; i < r->n_then_ops; i++) {
        if (!op_permitted(c, r->then_ops[i])) {
            return;
        }
    }
    for (size_t i = 0; i < r->n_else_ops; i++) {
        if (!op_permitted(c, r->else_ops[i])) {
            return;
        }
    }
}

static void
kv_txn_exec(server_call *c)
{
    const Once__V1__KvTxnRequest *r = (const void *)c->req;
    lease_entry *le = lease_table_find(c->env->leases, c->client_id);
    outbox_producer p = {
        .client_id = c->client_id,
        .seq = c->seq,
        .method = c->wm->full_name,
        .now_ms = c->now_ms,
    };
    kv_env e = {
        .txn = c->txn,
        .limits = &c->env->cfg.kv,
        .principal = le != NULL && le->principal != NULL ? le->principal : "",
        .client_id = c->client_id,
        .outbox = &c->env->cfg.outbox,
        .producer = &p,
    };
    kv_outcome o;

    kv_txn(&e, r, &o);
    if (!outcome_reply(c, &o)) {
        /* A store error (transient already) or KV_QUOTA: not recorded,
         * nothing kept; the same rpc id may run later. */
        c->transient = true;
        return;
    }
    STATS_INC(c->env->stats, kv_txns);
    if (o.emitted > 0) {
        atomic_fetch_add(&c->env->stats->outbox_events, o.emitted);
    }
    if (o.compare_failed) {
        STATS_INC(c->env->stats, kv_compares_failed);
    }
    totals_publish(c->env->stats, &o.totals);
}

/* ---- Range ----------------------------------------------------------------
 */

static void
kv_range_validate(server_call *c)
{
    const Once__V1__KvRangeRequest *r = (const void *)c->req;
    kv_outcome o = {0};

    if (outcome_ok(c, kv_check_range(r, &c->env->cfg.kv, &o), &o)) {
        auth_kv_permit(c->env->auth, c, r->key.data, r->key.len, false,
                       r->prefix ? "prefix" : "key");
    }
}

static void
kv_range_exec(server_call *c)
{
    const Once__V1__KvRangeRequest *r = (const void *)c->req;
    kv_env e = {.txn = c->txn, .limits = &c->env->cfg.kv, .principal = ""};
    kv_outcome o;

    kv_range(&e, r, &o);
    (void)outcome_reply(c, &o);
}

static const service_method svc_kv_methods[] = {
    {"/once.v1.KV/Txn", SERVICE_MUTATING, kv_txn_validate, kv_txn_exec, NULL},
    {"/once.v1.KV/Range", 0, kv_range_validate, kv_range_exec, NULL},
};
const service_ops svc_kv_ops = {
    .name = "once.v1.KV",
    .methods = svc_kv_methods,
    .nmethods = sizeof(svc_kv_methods) / sizeof(svc_kv_methods[0]),
    .open = svc_kv_open,
    .close = svc_kv_close,
};
