/*
 * kv.c — libonce's calls of once.v1.KV (once/kv.h): the Txn builder, its
 * execution and results, and Range pages.
 *
 * Owns the builder: a KvTxnRequest whose every key and value is a copy
 * made here, the request bytes packed at the first exec and kept until
 * the builder changes (so a retry sends the same bytes, as the protocol
 * asks: the payload is compared as sent), and the last reply, unpacked.
 * The bounds are checked as things are added, and the first refusal is
 * kept: exec and async send nothing while the builder holds one.
 * Never: keeps a pointer the caller passed; re-packs a request between a
 * call and its retry; sends a builder that refused something.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/status.h"
#include "proto/kv.pb-c.h"
#include <once/kv.h>

#define KV_TXN_METHOD   "/once.v1.KV/Txn"
#define KV_RANGE_METHOD "/once.v1.KV/Range"

struct once_kv_txn {
    Once__V1__KvTxnRequest req; /* every pointer in it is owned here */
    uint8_t *packed;            /* req packed at the last exec; NULL after
                                   a change */
    size_t packed_len;
    Once__V1__KvTxnResponse *resp; /* the last OK reply */
    size_t key_max, value_max, ops_max;
    once_status refused; /* the first refusal; code ONCE_OK: none */
};

struct once_kv_range {
    Once__V1__KvRangeResponse *resp;
};

int
once_kv_txn_new(once_kv_txn **tp)
{
    once_kv_txn *t = calloc(1, sizeof(*t));

    if (t == NULL) {
        return ONCE_RESOURCE_EXHAUSTED;
    }
    once__v1__kv_txn_request__init(&t->req);
    t->key_max = ONCE_KV_KEY_MAX;
    t->value_max = ONCE_KV_VALUE_MAX;
    t->ops_max = ONCE_KV_OPS_MAX;
    *tp = t;
    return ONCE_OK;
}

void
once_kv_txn_limits(once_kv_txn *t, size_t key_max, size_t value_max,
                   size_t ops_max)
{
    if (t != NULL) {
        t->key_max = key_max > 0 ? key_max : t->key_max;
        t->value_max = value_max > 0 ? value_max : t->value_max;
        t->ops_max = ops_max > 0 ? ops_max : t->ops_max;
    }
}

int
once_kv_txn_status(const once_kv_txn *t, once_status *st)
{
    if (t == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "no transaction");
    }
    if (st != NULL) {
        *st = t->refused;
    }
    return t->refused.code;
}

/* Keeps the builder's first refusal (code, reason, message); returns the
 * code kept. */
static int
refuse(once_kv_txn *t, int code, const char *reason, const char *fmt, ...)
{
    va_list ap;

    if (t->refused.code == ONCE_OK) {
        t->refused.code = code;
        snprintf(t->refused.reason, sizeof(t->refused.reason), "%s", reason);
        va_start(ap, fmt);
        vsnprintf(t->refused.message, sizeof(t->refused.message), fmt, ap);
        va_end(ap);
    }
    return t->refused.code;
}

/* An adder's failure rv (not a bound: those say more) kept. */
static int
refuse_rv(once_kv_txn *t, int rv)
{
    if (rv == ONCE_OK) {
        return ONCE_OK;
    }
    return rv == ONCE_RESOURCE_EXHAUSTED
               ? refuse(t, rv, ONCE_REASON_NO_MEMORY,
                        "out of memory building the Txn; nothing is sent")
               : refuse(t, rv, ONCE_REASON_BAD_ARGUMENT,
                        "a NULL key or value with a length, a bad compare "
                        "op or a bad branch; nothing is sent");
}

/* Whether one more compare or op with key (klen bytes; what names it) and
 * value (vlen bytes) may go in: the builder holds no refusal, the key is
 * 1..key_max bytes, the value at most value_max, the count below ops_max.
 * Otherwise the refusal is kept and returned. */
static int
admit(once_kv_txn *t, const char *what, size_t klen, size_t vlen)
{
    size_t n = t->req.n_compares + t->req.n_then_ops + t->req.n_else_ops;

    if (t->refused.code != ONCE_OK) {
        return t->refused.code;
    }
    if (n >= t->ops_max) {
        return refuse(t, ONCE_INVALID_ARGUMENT, ONCE_REASON_KV_TOO_MANY_OPS,
                      "more than %zu compares and ops in one Txn (onced "
                      "--kv-ops-max); nothing is sent",
                      t->ops_max);
    }
    if (klen == 0) {
        return refuse(t, ONCE_INVALID_ARGUMENT, ONCE_REASON_KV_EMPTY_KEY,
                      "%s: a key (or prefix) needs at least one byte; "
                      "nothing is sent",
                      what);
    }
    if (klen > t->key_max) {
        return refuse(t, ONCE_INVALID_ARGUMENT, ONCE_REASON_KV_KEY_TOO_LARGE,
                      "%s: key of %zu bytes; at most %zu (onced "
                      "--kv-key-max); nothing is sent",
                      what, klen, t->key_max);
    }
    if (vlen > t->value_max) {
        return refuse(t, ONCE_INVALID_ARGUMENT, ONCE_REASON_KV_VALUE_TOO_LARGE,
                      "%s: value of %zu bytes; at most %zu (onced "
                      "--kv-value-max); nothing is sent",
                      what, vlen, t->value_max);
    }
    return ONCE_OK;
}

/* The builder's copies are freed by protobuf-c's own free: it frees every
 * field through the allocator, which for unpacked messages is malloc. */
static void
op_free(Once__V1__KvOp *op)
{
    protobuf_c_message_free_unpacked(&op->base, NULL);
}

void
once_kv_txn_free(once_kv_txn *t)
{
    if (t == NULL) {
        return;
    }
    for (size_t i = 0; i < t->req.n_compares; i++) {
        protobuf_c_message_free_unpacked(&t->req.compares[i]->base, NULL);
    }
    for (size_t i = 0; i < t->req.n_then_ops; i++) {
        op_free(t->req.then_ops[i]);
    }
    for (size_t i = 0; i < t->req.n_else_ops; i++) {
        op_free(t->req.else_ops[i]);
    }
    free(t->req.compares);
    free(t->req.then_ops);
    free(t->req.else_ops);
    free(t->packed);
    if (t->resp != NULL) {
        once__v1__kv_txn_response__free_unpacked(t->resp, NULL);
    }
    free(t);
}

/* A malloc'd copy of len bytes (len 0: an empty buffer). */
static int
bytes_copy(ProtobufCBinaryData *out, const void *p, size_t len)
{
    if (len > 0 && p == NULL) {
        return ONCE_INVALID_ARGUMENT;
    }
    if ((out->data = malloc(len > 0 ? len : 1)) == NULL) {
        return ONCE_RESOURCE_EXHAUSTED;
    }
    if (len > 0) {
        memcpy(out->data, p, len);
    }
    out->len = len;
    return ONCE_OK;
}

/* Appends item to the array *v of *n pointers. */
static int
array_push(void ***v, size_t *n, void *item)
{
    void **nv = realloc(*v, (*n + 1) * sizeof(*nv));

    if (nv == NULL) {
        return ONCE_RESOURCE_EXHAUSTED;
    }
    nv[(*n)++] = item;
    *v = nv;
    return ONCE_OK;
}

static void
txn_changed(once_kv_txn *t)
{
    free(t->packed);
    t->packed = NULL;
    t->packed_len = 0;
}

static int
compare_add(once_kv_txn *t, const void *key, size_t key_len,
            Once__V1__KvCompare__Target target, int cmp, const void *value,
            size_t value_len, uint64_t version)
{
    Once__V1__KvCompare *c;
    int rv;

    if (t == NULL) {
        return ONCE_INVALID_ARGUMENT;
    }
    if ((rv = admit(t, "compare", key_len, value_len)) != ONCE_OK) {
        return rv;
    }
    if (cmp < ONCE_KV_EQUAL || cmp > ONCE_KV_GREATER) {
        return refuse(t, ONCE_INVALID_ARGUMENT, ONCE_REASON_KV_BAD_COMPARE,
                      "compare: op %d is not ONCE_KV_EQUAL, _LESS or "
                      "_GREATER; nothing is sent",
                      cmp);
    }
    if ((c = calloc(1, sizeof(*c))) == NULL) {
        return refuse_rv(t, ONCE_RESOURCE_EXHAUSTED);
    }
    once__v1__kv_compare__init(c);
    c->target = target;
    c->op = (Once__V1__KvCompare__Op)cmp;
    c->version = version;
    if ((rv = bytes_copy(&c->key, key, key_len)) != ONCE_OK ||
        (value != NULL &&
         (rv = bytes_copy(&c->value, value, value_len)) != ONCE_OK) ||
        (rv = array_push((void ***)&t->req.compares, &t->req.n_compares, c)) !=
            ONCE_OK) {
        protobuf_c_message_free_unpacked(&c->base, NULL);
        return refuse_rv(t, rv);
    }
    txn_changed(t);
    return ONCE_OK;
}

int
once_kv_txn_compare_value(once_kv_txn *t, const void *key, size_t key_len,
                          int cmp, const void *value, size_t value_len)
{
    return compare_add(t, key, key_len, ONCE__V1__KV_COMPARE__TARGET__VALUE,
                       cmp, value != NULL || value_len > 0 ? value : "",
                       value_len, 0);
}

int
once_kv_txn_compare_version(once_kv_txn *t, const void *key, size_t key_len,
                            int cmp, uint64_t version)
{
    return compare_add(t, key, key_len, ONCE__V1__KV_COMPARE__TARGET__VERSION,
                       cmp, NULL, 0, version);
}

int
once_kv_txn_compare_exists(once_kv_txn *t, const void *key, size_t key_len)
{
    return compare_add(t, key, key_len, ONCE__V1__KV_COMPARE__TARGET__EXISTS,
                       ONCE_KV_EQUAL, NULL, 0, 0);
}

int
once_kv_txn_compare_absent(once_kv_txn *t, const void *key, size_t key_len)
{
    return compare_add(t, key, key_len, ONCE__V1__KV_COMPARE__TARGET__ABSENT,
                       ONCE_KV_EQUAL, NULL, 0, 0);
}

/* Appends op (owned from here on, freed on failure) to branch. */
static int
op_add(once_kv_txn *t, int branch, Once__V1__KvOp *op, int rv)
{
    if (rv == ONCE_OK && branch != ONCE_KV_THEN && branch != ONCE_KV_ELSE) {
        rv = ONCE_INVALID_ARGUMENT;
    }
    if (rv == ONCE_OK) {
        rv = branch == ONCE_KV_THEN ? array_push((void ***)&t->req.then_ops,
                                                 &t->req.n_then_ops, op)
                                    : array_push((void ***)&t->req.else_ops,
                                                 &t->req.n_else_ops, op);
    }
    if (rv != ONCE_OK) {
        op_free(op);
        return refuse_rv(t, rv);
    }
    txn_changed(t);
    return ONCE_OK;
}

/* A new op of case oc holding a new message of type d whose first field
 * (key or prefix: every op message but emit starts with it) is a copy of
 * key. NULL with *rv set, or the op with *rv the copy's outcome. */
static Once__V1__KvOp *
op_new(Once__V1__KvOp__OpCase oc, const ProtobufCMessageDescriptor *d,
       const void *key, size_t key_len, int *rv)
{
    Once__V1__KvOp *op = calloc(1, sizeof(*op));
    ProtobufCMessage *msg = calloc(1, d->sizeof_message);

    if (op == NULL || msg == NULL) {
        free(op);
        free(msg);
        *rv = ONCE_RESOURCE_EXHAUSTED;
        return NULL;
    }
    protobuf_c_message_init(d, msg);
    once__v1__kv_op__init(op);
    op->op_case = oc;
    op->put = (Once__V1__KvPut *)msg; /* the oneof's members share one
                                         pointer */
    *rv = bytes_copy((ProtobufCBinaryData *)((char *)msg + d->fields[0].offset),
                     key, key_len);
    return op;
}

/* An op that carries a key (or prefix) only. */
static int
op_keyed(once_kv_txn *t, int branch, Once__V1__KvOp__OpCase oc,
         const ProtobufCMessageDescriptor *d, const void *key, size_t key_len)
{
    int rv;
    Once__V1__KvOp *op;

    if (t == NULL) {
        return ONCE_INVALID_ARGUMENT;
    }
    if ((rv = admit(t, d->short_name, key_len, 0)) != ONCE_OK) {
        return rv;
    }
    op = op_new(oc, d, key, key_len, &rv);
    return op == NULL ? refuse_rv(t, rv) : op_add(t, branch, op, rv);
}

int
once_kv_txn_put(once_kv_txn *t, int branch, const void *key, size_t key_len,
                const void *value, size_t value_len, bool lease)
{
    Once__V1__KvOp *op;
    int rv;

    if (t == NULL) {
        return ONCE_INVALID_ARGUMENT;
    }
    if ((rv = admit(t, "KvPut", key_len, value_len)) != ONCE_OK) {
        return rv;
    }
    if ((op = op_new(ONCE__V1__KV_OP__OP_PUT, &once__v1__kv_put__descriptor,
                     key, key_len, &rv)) == NULL) {
        return refuse_rv(t, rv);
    }
    op->put->lease = lease;
    if (rv == ONCE_OK) {
        rv = bytes_copy(&op->put->value, value, value_len);
    }
    return op_add(t, branch, op, rv);
}

int
once_kv_txn_del(once_kv_txn *t, int branch, const void *key, size_t key_len)
{
    return op_keyed(t, branch, ONCE__V1__KV_OP__OP_DELETE,
                    &once__v1__kv_delete__descriptor, key, key_len);
}

int
once_kv_txn_del_prefix(once_kv_txn *t, int branch, const void *prefix,
                       size_t prefix_len)
{
    return op_keyed(t, branch, ONCE__V1__KV_OP__OP_DELETE_PREFIX,
                    &once__v1__kv_delete_prefix__descriptor, prefix,
                    prefix_len);
}

int
once_kv_txn_get(once_kv_txn *t, int branch, const void *key, size_t key_len)
{
    return op_keyed(t, branch, ONCE__V1__KV_OP__OP_GET,
                    &once__v1__kv_get__descriptor, key, key_len);
}

int
once_kv_txn_emit(once_kv_txn *t, int branch, const char *topic,
                 const void *payload, size_t payload_len)
{
    Once__V1__KvEmit *e;
    Once__V1__KvOp *op;
    int rv;

    if (t == NULL) {
        return ONCE_INVALID_ARGUMENT;
    }
    /* The topic stands where a key is checked: 1..key_max bytes. */
    if ((rv = admit(t, "KvEmit", topic != NULL ? strlen(topic) : 0,
                    payload_len)) != ONCE_OK) {
        return rv;
    }
    /* Its first field is the topic (a string), not a key: built here. */
    op = calloc(1, sizeof(*op));
    e = calloc(1, sizeof(*e));
    if (op == NULL || e == NULL) {
        free(op);
        free(e);
        return refuse_rv(t, ONCE_RESOURCE_EXHAUSTED);
    }
    once__v1__kv_op__init(op);
    once__v1__kv_emit__init(e);
    op->op_case = ONCE__V1__KV_OP__OP_EMIT;
    op->emit = e;
    rv = (e->topic = strdup(topic)) == NULL
             ? ONCE_RESOURCE_EXHAUSTED
             : bytes_copy(&e->payload, payload, payload_len);
    return op_add(t, branch, op, rv);
}

/* t's request bytes, packed once while t is unchanged (the bytes of the
 * last exec are still its), or t's kept refusal. */
static int
txn_pack(once_kv_txn *t, once_status *st)
{
    if (t == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "no transaction");
    }
    if (t->refused.code != ONCE_OK) {
        status_clear(st); /* nothing was sent: no attempts */
        return status_take(st, t->refused.code, t->refused.reason,
                           t->refused.message);
    }
    if (t->packed != NULL) {
        return ONCE_OK;
    }
    t->packed_len = once__v1__kv_txn_request__get_packed_size(&t->req);
    if ((t->packed = malloc(t->packed_len > 0 ? t->packed_len : 1)) == NULL) {
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "packing the transaction");
    }
    once__v1__kv_txn_request__pack(&t->req, t->packed);
    return ONCE_OK;
}

/* Makes the reply payload out (freed here) t's result. */
static int
txn_take(once_kv_txn *t, void *out, size_t out_len, once_status *st)
{
    Once__V1__KvTxnResponse *resp =
        once__v1__kv_txn_response__unpack(NULL, out_len, out);

    once_free(out);
    if (resp == NULL) {
        return status_set(st, ONCE_INTERNAL, ONCE_REASON_BAD_RESPONSE,
                          "Txn's reply is not a KvTxnResponse");
    }
    if (t->resp != NULL) {
        once__v1__kv_txn_response__free_unpacked(t->resp, NULL);
    }
    t->resp = resp;
    return ONCE_OK;
}

int
once_kv_txn_exec(once_client *c, once_kv_txn *t, once_rpc_id *id,
                 once_status *st)
{
    void *out = NULL;
    size_t out_len = 0;
    int rv;

    if ((rv = txn_pack(t, st)) != ONCE_OK ||
        (rv = once_call(c, KV_TXN_METHOD, true, id, t->packed, t->packed_len,
                        &out, &out_len, st)) != ONCE_OK) {
        return rv;
    }
    return txn_take(t, out, out_len, st);
}

int
once_kv_txn_exec_async(once_client *c, once_kv_txn *t, const once_rpc_id *id,
                       once_done_fn done, void *arg, once_future **fp,
                       once_status *st)
{
    int rv;

    if (fp != NULL) {
        *fp = NULL;
    }
    if ((rv = txn_pack(t, st)) != ONCE_OK) {
        return rv;
    }
    return once_call_async(c, KV_TXN_METHOD, true, id, t->packed, t->packed_len,
                           done, arg, fp, st);
}

int
once_kv_txn_finish(once_kv_txn *t, once_future *f, once_status *st)
{
    void *out = NULL;
    size_t out_len = 0;
    int rv;

    if (t == NULL || f == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "a transaction and its future are required");
    }
    if ((rv = once_wait(f, st)) != ONCE_OK) {
        return rv;
    }
    (void)once_future_response(f, &out, &out_len); /* OK: it has ended */
    return txn_take(t, out, out_len, st);
}

bool
once_kv_txn_succeeded(const once_kv_txn *t)
{
    return t != NULL && t->resp != NULL && t->resp->succeeded;
}

uint64_t
once_kv_txn_revision(const once_kv_txn *t)
{
    return t != NULL && t->resp != NULL ? t->resp->revision : 0;
}

uint32_t
once_kv_txn_failed_compare(const once_kv_txn *t)
{
    return t != NULL && t->resp != NULL ? t->resp->failed_compare : 0;
}

size_t
once_kv_txn_results(const once_kv_txn *t)
{
    return t != NULL && t->resp != NULL ? t->resp->n_results : 0;
}

int
once_kv_txn_result(const once_kv_txn *t, size_t i, once_kv_result *out)
{
    const Once__V1__KvOpResult *r;

    if (out == NULL || i >= once_kv_txn_results(t)) {
        return ONCE_INVALID_ARGUMENT;
    }
    memset(out, 0, sizeof(*out));
    r = t->resp->results[i];
    switch (r->result_case) {
    case ONCE__V1__KV_OP_RESULT__RESULT_PUT:
        out->kind = ONCE_KV_PUT;
        out->version = r->put->version;
        out->prev_version = r->put->prev_version;
        break;
    case ONCE__V1__KV_OP_RESULT__RESULT_DELETE:
        out->kind = ONCE_KV_DELETE;
        out->deleted = r->delete_->deleted;
        break;
    case ONCE__V1__KV_OP_RESULT__RESULT_DELETE_PREFIX:
        out->kind = ONCE_KV_DELETE_PREFIX;
        out->deleted = r->delete_prefix->deleted;
        break;
    case ONCE__V1__KV_OP_RESULT__RESULT_GET:
        out->kind = ONCE_KV_GET;
        out->found = r->get->found;
        if (r->get->kv != NULL) {
            out->key = r->get->kv->key.data;
            out->key_len = r->get->kv->key.len;
            out->value = r->get->kv->value.data;
            out->value_len = r->get->kv->value.len;
            out->version = r->get->kv->version;
            out->create_revision = r->get->kv->create_revision;
            out->lease = r->get->kv->lease;
        }
        break;
    case ONCE__V1__KV_OP_RESULT__RESULT_EMIT:
        out->kind = ONCE_KV_EMIT;
        break;
    default:
        return ONCE_INVALID_ARGUMENT;
    }
    return ONCE_OK;
}

/* ---- Range --------------------------------------------------------------
 */

int
once_kv_range_get(once_client *c, const void *key, size_t key_len, bool prefix,
                  uint32_t limit, const void *cont, size_t cont_len,
                  once_kv_range **out, once_status *st)
{
    Once__V1__KvRangeRequest req = ONCE__V1__KV_RANGE_REQUEST__INIT;
    once_kv_range *r;
    uint8_t *buf;
    void *resp = NULL;
    size_t len, resp_len = 0;
    int rv;

    if (out == NULL || (key == NULL && key_len > 0) ||
        (cont == NULL && cont_len > 0)) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "out is required; key and cont NULL only when empty");
    }
    *out = NULL;
    req.key.data = (uint8_t *)key;
    req.key.len = key_len;
    req.prefix = prefix;
    req.limit = limit;
    req.continuation.data = (uint8_t *)cont;
    req.continuation.len = cont_len;
    len = once__v1__kv_range_request__get_packed_size(&req);
    if ((buf = malloc(len > 0 ? len : 1)) == NULL ||
        (r = calloc(1, sizeof(*r))) == NULL) {
        free(buf);
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "packing the range");
    }
    once__v1__kv_range_request__pack(&req, buf);
    rv = once_call(c, KV_RANGE_METHOD, false, NULL, buf, len, &resp, &resp_len,
                   st);
    free(buf);
    if (rv == ONCE_OK && (r->resp = once__v1__kv_range_response__unpack(
                              NULL, resp_len, resp)) == NULL) {
        rv = status_set(st, ONCE_INTERNAL, ONCE_REASON_BAD_RESPONSE,
                        "Range's reply is not a KvRangeResponse");
    }
    once_free(resp);
    if (rv != ONCE_OK) {
        free(r);
        return rv;
    }
    *out = r;
    return ONCE_OK;
}

size_t
once_kv_range_count(const once_kv_range *r)
{
    return r != NULL ? r->resp->n_kvs : 0;
}

int
once_kv_range_at(const once_kv_range *r, size_t i, once_kv *out)
{
    const Once__V1__KeyValue *kv;

    if (out == NULL || i >= once_kv_range_count(r)) {
        return ONCE_INVALID_ARGUMENT;
    }
    kv = r->resp->kvs[i];
    out->key = kv->key.data;
    out->key_len = kv->key.len;
    out->value = kv->value.data;
    out->value_len = kv->value.len;
    out->version = kv->version;
    out->create_revision = kv->create_revision;
    out->lease = kv->lease;
    return ONCE_OK;
}

bool
once_kv_range_more(const once_kv_range *r, const void **cont, size_t *cont_len)
{
    if (r == NULL || !r->resp->more) {
        return false;
    }
    if (cont != NULL) {
        *cont = r->resp->continuation.data;
    }
    if (cont_len != NULL) {
        *cont_len = r->resp->continuation.len;
    }
    return true;
}

uint64_t
once_kv_range_revision(const once_kv_range *r)
{
    return r != NULL ? r->resp->revision : 0;
}

void
once_kv_range_free(once_kv_range *r)
{
    if (r == NULL) {
        return;
    }
    once__v1__kv_range_response__free_unpacked(r->resp, NULL);
    free(r);
}
