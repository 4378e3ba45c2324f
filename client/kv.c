/*
 * kv.c — the typed once.v1.KV calls (once/kv.h): the Txn builder, Txn and
 * Range over the call engine, and their results.
 *
 * Owns: the builder's copies (every key, value and topic it was given),
 * its first refusal, and the unpacked replies a result wraps.
 * Invariant: a builder holds only compares and ops that pass the checks
 * onced runs with the builder's limits, or it holds a refusal and nothing
 * built from it is ever sent; a builder is never changed by sending it.
 * Never: keeps a pointer to a caller's buffer; retries or assigns seqs
 * itself (the call engine does).
 * Layer: typed methods, over the call engine (call.h) and async.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/async.h"
#include "client/call.h"
#include "client/status.h"
#include "once/kv.h"
#include "proto/kv.pb-c.h"
#include "proto/wire.h"

typedef Once__V1__KvOp kv_op;

struct once_kv_builder {
    Once__V1__KvCompare **cmps; /* owned, with their bytes */
    size_t ncmps, capc;
    kv_op **ops[2]; /* then, else */
    size_t nops[2], capo[2];
    size_t key_max, value_max, ops_max;
    once_status refused; /* code ONCE_OK: none */
};

struct once_kv_result {
    Once__V1__KvTxnResponse *m;
};

struct once_kv_range_result {
    Once__V1__KvRangeResponse *m;
};

/* ---- the builder ----------------------------------------------------------
 */

int
once_kv_builder_alloc(once_kv_builder **bp)
{
    once_kv_builder *b;

    if (bp == NULL) {
        return ONCE_INVALID_ARGUMENT;
    }
    if ((*bp = b = calloc(1, sizeof(*b))) == NULL) {
        return ONCE_RESOURCE_EXHAUSTED;
    }
    b->key_max = ONCE_KV_KEY_MAX;
    b->value_max = ONCE_KV_VALUE_MAX;
    b->ops_max = ONCE_KV_OPS_MAX;
    return ONCE_OK;
}

static void
bytes_free(ProtobufCBinaryData *d)
{
    free(d->data);
}

static void
op_free(kv_op *op)
{
    switch (op->op_case) {
    case ONCE__V1__KV_OP__OP_PUT:
        bytes_free(&op->put->key);
        bytes_free(&op->put->value);
        free(op->put);
        break;
    case ONCE__V1__KV_OP__OP_DELETE:
        bytes_free(&op->delete_->key);
        free(op->delete_);
        break;
    case ONCE__V1__KV_OP__OP_DELETE_PREFIX:
        bytes_free(&op->delete_prefix->prefix);
        free(op->delete_prefix);
        break;
    case ONCE__V1__KV_OP__OP_GET:
        bytes_free(&op->get->key);
        free(op->get);
        break;
    case ONCE__V1__KV_OP__OP_EMIT:
        free(op->emit->topic);
        bytes_free(&op->emit->payload);
        free(op->emit);
        break;
    default:
        break;
    }
    free(op);
}

void
once_kv_builder_free(once_kv_builder *b)
{
    if (b == NULL) {
        return;
    }
    for (size_t i = 0; i < b->ncmps; i++) {
        bytes_free(&b->cmps[i]->key);
        bytes_free(&b->cmps[i]->value);
        free(b->cmps[i]);
    }
    free(b->cmps);
    for (int br = 0; br < 2; br++) {
        for (size_t i = 0; i < b->nops[br]; i++) {
            op_free(b->ops[br][i]);
        }
        free(b->ops[br]);
    }
    free(b);
}

void
once_kv_builder_limits(once_kv_builder *b, size_t key_max, size_t value_max,
                       size_t ops_max)
{
    if (b == NULL) {
        return;
    }
    b->key_max = key_max > 0 ? key_max : b->key_max;
    b->value_max = value_max > 0 ? value_max : b->value_max;
    b->ops_max = ops_max > 0 ? ops_max : b->ops_max;
}

int
once_kv_builder_status(const once_kv_builder *b, once_status *st)
{
    if (b == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "the builder is NULL");
    }
    if (st != NULL) {
        *st = b->refused;
    }
    return b->refused.code;
}

/* Keeps the builder's first refusal and returns its code. */
static int
refuse(once_kv_builder *b, int code, const char *reason, const char *fmt, ...)
{
    va_list ap;

    if (b->refused.code == ONCE_OK) {
        b->refused.code = code;
        snprintf(b->refused.reason, sizeof(b->refused.reason), "%s", reason);
        va_start(ap, fmt);
        vsnprintf(b->refused.message, sizeof(b->refused.message), fmt, ap);
        va_end(ap);
    }
    return b->refused.code;
}

/* May one more compare or op go in? (b not NULL: the caller checked.) */
static int
room(once_kv_builder *b)
{
    if (b->refused.code != ONCE_OK) {
        return b->refused.code;
    }
    if (b->ncmps + b->nops[0] + b->nops[1] >= b->ops_max) {
        return refuse(b, ONCE_INVALID_ARGUMENT, ONCE_REASON_KV_TOO_MANY_OPS,
                      "more than %zu compares and ops in one Txn (onced "
                      "--kv-ops-max); nothing is sent",
                      b->ops_max);
    }
    return ONCE_OK;
}

static int
key_ok(once_kv_builder *b, const void *key, size_t klen, const char *what)
{
    if (key == NULL || klen == 0) {
        return refuse(b, ONCE_INVALID_ARGUMENT, ONCE_REASON_KV_EMPTY_KEY,
                      "%s: a key needs at least one byte; nothing is sent",
                      what);
    }
    if (klen > b->key_max) {
        return refuse(b, ONCE_INVALID_ARGUMENT, ONCE_REASON_KV_KEY_TOO_LARGE,
                      "%s: key of %zu bytes; at most %zu (onced "
                      "--kv-key-max); nothing is sent",
                      what, klen, b->key_max);
    }
    return ONCE_OK;
}

static int
value_ok(once_kv_builder *b, const void *value, size_t vlen, const char *what)
{
    if (value == NULL && vlen > 0) {
        return refuse(b, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                      "%s: value is NULL with %zu bytes", what, vlen);
    }
    if (vlen > b->value_max) {
        return refuse(b, ONCE_INVALID_ARGUMENT, ONCE_REASON_KV_VALUE_TOO_LARGE,
                      "%s: value of %zu bytes; at most %zu (onced "
                      "--kv-value-max); nothing is sent",
                      what, vlen, b->value_max);
    }
    return ONCE_OK;
}

/* A copy of n bytes into *d (n 0: none). */
static bool
copy_bytes(ProtobufCBinaryData *d, const void *p, size_t n)
{
    d->len = n;
    d->data = NULL;
    if (n == 0) {
        return true;
    }
    if ((d->data = malloc(n)) == NULL) {
        return false;
    }
    memcpy(d->data, p, n);
    return true;
}

static int
no_memory(once_kv_builder *b)
{
    return refuse(b, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                  "out of memory while building the Txn; nothing is sent");
}

/* Appends p to the array *arr of *n (capacity *cap). */
static bool
append(void ***arr, size_t *n, size_t *cap, void *p)
{
    if (*n == *cap) {
        size_t ncap = *cap == 0 ? 8 : *cap * 2;
        void **a = realloc(*arr, ncap * sizeof(*a));
        if (a == NULL) {
            return false;
        }
        *arr = a;
        *cap = ncap;
    }
    (*arr)[(*n)++] = p;
    return true;
}

static int
add_compare(once_kv_builder *b, const void *key, size_t klen, int target,
            int cmp, const void *value, size_t vlen, uint64_t version)
{
    Once__V1__KvCompare *c;
    int rv;

    if (b == NULL) {
        return ONCE_INVALID_ARGUMENT;
    }
    if ((rv = room(b)) != ONCE_OK || (rv = key_ok(b, key, klen, "compare")) ||
        (rv = value_ok(b, value, vlen, "compare"))) {
        return rv;
    }
    if (cmp < ONCE_KV_EQUAL || cmp > ONCE_KV_GREATER) {
        return refuse(b, ONCE_INVALID_ARGUMENT, ONCE_REASON_KV_BAD_COMPARE,
                      "compare: op %d; ops are ONCE_KV_EQUAL, _LESS, "
                      "_GREATER; nothing is sent",
                      cmp);
    }
    if ((c = malloc(sizeof(*c))) == NULL) {
        return no_memory(b);
    }
    once__v1__kv_compare__init(c);
    c->target = (Once__V1__KvCompare__Target)target;
    c->op = (Once__V1__KvCompare__Op)cmp;
    c->version = version;
    if (!copy_bytes(&c->key, key, klen) ||
        !copy_bytes(&c->value, value, vlen) ||
        !append((void ***)&b->cmps, &b->ncmps, &b->capc, c)) {
        bytes_free(&c->key);
        bytes_free(&c->value);
        free(c);
        return no_memory(b);
    }
    return ONCE_OK;
}

int
once_kv_if_value(once_kv_builder *b, const void *key, size_t klen, int cmp,
                 const void *value, size_t vlen)
{
    return add_compare(b, key, klen, ONCE_KV_VALUE, cmp, value, vlen, 0);
}

int
once_kv_if_version(once_kv_builder *b, const void *key, size_t klen, int cmp,
                   uint64_t version)
{
    return add_compare(b, key, klen, ONCE_KV_VERSION, cmp, NULL, 0, version);
}

int
once_kv_if_exists(once_kv_builder *b, const void *key, size_t klen)
{
    return add_compare(b, key, klen, ONCE_KV_EXISTS, ONCE_KV_EQUAL, NULL, 0, 0);
}

int
once_kv_if_absent(once_kv_builder *b, const void *key, size_t klen)
{
    return add_compare(b, key, klen, ONCE_KV_ABSENT, ONCE_KV_EQUAL, NULL, 0, 0);
}

/*
 * One op of kind into branch: key (a prefix for delete_prefix; a topic,
 * NUL-terminated, for emit) and value (put's value, emit's payload)
 * copied. The op struct and its one sub-message come from one calloc each.
 */
static int
add_op(once_kv_builder *b, int branch, int kind, const void *key, size_t klen,
       const void *value, size_t vlen, bool lease)
{
    ProtobufCBinaryData *kd = NULL, *vd = NULL;
    kv_op *op;
    int rv;

    if (b == NULL) {
        return ONCE_INVALID_ARGUMENT;
    }
    if (branch != ONCE_KV_THEN && branch != ONCE_KV_ELSE) {
        return refuse(b, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                      "branch %d: ONCE_KV_THEN or ONCE_KV_ELSE", branch);
    }
    if ((rv = room(b)) != ONCE_OK ||
        (kind != ONCE_KV_OP_EMIT && (rv = key_ok(b, key, klen, "op"))) ||
        (rv = value_ok(b, value, vlen, "op"))) {
        return rv;
    }
    if ((op = calloc(1, sizeof(*op))) == NULL) {
        return no_memory(b);
    }
    once__v1__kv_op__init(op);
    op->op_case = (Once__V1__KvOp__OpCase)kind;
    switch (kind) {
    case ONCE_KV_OP_PUT:
        if ((op->put = malloc(sizeof(*op->put))) != NULL) {
            once__v1__kv_put__init(op->put);
            op->put->lease = lease;
            kd = &op->put->key;
            vd = &op->put->value;
        }
        break;
    case ONCE_KV_OP_DELETE:
        if ((op->delete_ = malloc(sizeof(*op->delete_))) != NULL) {
            once__v1__kv_delete__init(op->delete_);
            kd = &op->delete_->key;
        }
        break;
    case ONCE_KV_OP_DELETE_PREFIX:
        if ((op->delete_prefix = malloc(sizeof(*op->delete_prefix))) != NULL) {
            once__v1__kv_delete_prefix__init(op->delete_prefix);
            kd = &op->delete_prefix->prefix;
        }
        break;
    case ONCE_KV_OP_GET:
        if ((op->get = malloc(sizeof(*op->get))) != NULL) {
            once__v1__kv_get__init(op->get);
            kd = &op->get->key;
        }
        break;
    case ONCE_KV_OP_EMIT:
        if ((op->emit = malloc(sizeof(*op->emit))) != NULL) {
            once__v1__kv_emit__init(op->emit);
            op->emit->topic = strdup(key != NULL ? key : "");
            vd = &op->emit->payload;
        }
        break;
    }
    /* Every sub-message pointer shares the oneof's storage: put's is set
     * when any of them was allocated. */
    if (op->put == NULL || (kd != NULL && !copy_bytes(kd, key, klen)) ||
        (vd != NULL && !copy_bytes(vd, value, vlen)) ||
        (kind == ONCE_KV_OP_EMIT && op->emit->topic == NULL) ||
        !append((void ***)&b->ops[branch], &b->nops[branch], &b->capo[branch],
                op)) {
        if (op->put == NULL) {
            free(op);
        } else {
            op_free(op);
        }
        return no_memory(b);
    }
    return ONCE_OK;
}

int
once_kv_put(once_kv_builder *b, int branch, const void *key, size_t klen,
            const void *value, size_t vlen, bool lease)
{
    return add_op(b, branch, ONCE_KV_OP_PUT, key, klen, value, vlen, lease);
}

int
once_kv_delete(once_kv_builder *b, int branch, const void *key, size_t klen)
{
    return add_op(b, branch, ONCE_KV_OP_DELETE, key, klen, NULL, 0, false);
}

int
once_kv_delete_prefix(once_kv_builder *b, int branch, const void *prefix,
                      size_t plen)
{
    return add_op(b, branch, ONCE_KV_OP_DELETE_PREFIX, prefix, plen, NULL, 0,
                  false);
}

int
once_kv_get(once_kv_builder *b, int branch, const void *key, size_t klen)
{
    return add_op(b, branch, ONCE_KV_OP_GET, key, klen, NULL, 0, false);
}

int
once_kv_emit(once_kv_builder *b, int branch, const char *topic,
             const void *payload, size_t plen)
{
    if (b != NULL && (topic == NULL || topic[0] == '\0')) {
        return refuse(b, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                      "emit: a topic is needed; nothing is sent");
    }
    return add_op(b, branch, ONCE_KV_OP_EMIT, topic, 0, payload, plen, false);
}

/* The request b describes, packed into *buf (free), or a refusal. */
static int
builder_pack(const once_kv_builder *b, uint8_t **buf, size_t *len,
             once_status *st)
{
    Once__V1__KvTxnRequest req = ONCE__V1__KV_TXN_REQUEST__INIT;

    if (b == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "the builder is NULL");
    }
    if (b->refused.code != ONCE_OK) {
        return status_take(st, b->refused.code, b->refused.reason,
                           b->refused.message);
    }
    req.compares = b->cmps;
    req.n_compares = b->ncmps;
    req.then_ops = b->ops[0];
    req.n_then_ops = b->nops[0];
    req.else_ops = b->ops[1];
    req.n_else_ops = b->nops[1];
    *len = once__v1__kv_txn_request__get_packed_size(&req);
    if ((*buf = malloc(*len > 0 ? *len : 1)) == NULL) {
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "out of memory; nothing was sent");
    }
    once__v1__kv_txn_request__pack(&req, *buf);
    return ONCE_OK;
}

/* ---- Txn ------------------------------------------------------------------
 */

/* A result around the reply payload (len bytes), or a refusal. */
static int
txn_result(const void *resp, size_t len, once_kv_result **res, once_status *st)
{
    Once__V1__KvTxnResponse *m =
        once__v1__kv_txn_response__unpack(NULL, len, resp);

    if (m == NULL) {
        return status_set(st, ONCE_INTERNAL, ONCE_REASON_BAD_RESPONSE,
                          "the Txn reply does not unpack");
    }
    if (res == NULL) {
        once__v1__kv_txn_response__free_unpacked(m, NULL);
        return ONCE_OK;
    }
    if ((*res = malloc(sizeof(**res))) == NULL) {
        once__v1__kv_txn_response__free_unpacked(m, NULL);
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "out of memory for the Txn's result (it ran: "
                          "retry its rpc id for the reply)");
    }
    (*res)->m = m;
    return ONCE_OK;
}

int
once_kv_txn(once_client *c, const once_kv_builder *b, once_rpc_id *id,
            once_kv_result **res, once_status *st)
{
    once_status local;
    const char *method = wire_method_name(&once__v1__kv__descriptor, "Txn");
    uint8_t *buf = NULL;
    void *resp = NULL;
    size_t len = 0, rlen = 0;
    int rv;

    if (res != NULL) {
        *res = NULL;
    }
    if ((rv = status_begin(&st, &local, c, "client")) != ONCE_OK ||
        (rv = builder_pack(b, &buf, &len, st)) != ONCE_OK) {
        return rv;
    }
    rv = call_do(c, method, CALL_EITHER, id, buf, len, &resp, &rlen, st, 0);
    free(buf);
    if (rv == ONCE_OK) {
        rv = txn_result(resp, rlen, res, st);
    }
    once_free(resp);
    return rv;
}

int
once_kv_txn_async(once_client *c, const once_kv_builder *b,
                  const once_rpc_id *id, once_done_fn done, void *arg,
                  once_future **fp, once_status *st)
{
    once_status local;
    const char *method = wire_method_name(&once__v1__kv__descriptor, "Txn");
    uint8_t *buf = NULL;
    size_t len = 0;
    int rv;

    if (fp != NULL) {
        *fp = NULL;
    }
    if ((rv = status_begin(&st, &local, c, "client")) != ONCE_OK ||
        (rv = builder_pack(b, &buf, &len, st)) != ONCE_OK) {
        return rv;
    }
    rv = once_call_async(c, method, true, id, buf, len, done, arg, fp, st);
    free(buf);
    return rv;
}

int
once_future_kv_result(once_future *f, once_kv_result **res)
{
    int rv;

    if (res != NULL) {
        *res = NULL;
    }
    if ((rv = once_wait(f, NULL)) != ONCE_OK) {
        return rv;
    }
    /* The payload stays on the future: read it in place. */
    return txn_result(f->resp, f->resp_len, res, NULL);
}

bool
once_kv_result_succeeded(const once_kv_result *r)
{
    return r != NULL && r->m->succeeded;
}

uint64_t
once_kv_result_revision(const once_kv_result *r)
{
    return r != NULL ? r->m->revision : 0;
}

uint32_t
once_kv_result_failed_compare(const once_kv_result *r)
{
    return r != NULL ? r->m->failed_compare : 0;
}

size_t
once_kv_result_count(const once_kv_result *r)
{
    return r != NULL ? r->m->n_results : 0;
}

static void
entry_fill(const Once__V1__KeyValue *kv, once_kv_entry *out)
{
    out->key = kv->key.data;
    out->klen = kv->key.len;
    out->value = kv->value.data;
    out->vlen = kv->value.len;
    out->version = kv->version;
    out->create_revision = kv->create_revision;
    out->lease = kv->lease;
}

int
once_kv_result_op(const once_kv_result *r, size_t i, once_kv_op_result *out)
{
    const Once__V1__KvOpResult *o;

    if (r == NULL || out == NULL || i >= r->m->n_results) {
        return ONCE_OUT_OF_RANGE;
    }
    o = r->m->results[i];
    memset(out, 0, sizeof(*out));
    out->kind = (int)o->result_case;
    switch (o->result_case) {
    case ONCE__V1__KV_OP_RESULT__RESULT_PUT:
        out->version = o->put->version;
        out->prev_version = o->put->prev_version;
        break;
    case ONCE__V1__KV_OP_RESULT__RESULT_DELETE:
        out->deleted = o->delete_->deleted;
        break;
    case ONCE__V1__KV_OP_RESULT__RESULT_DELETE_PREFIX:
        out->deleted = o->delete_prefix->deleted;
        break;
    case ONCE__V1__KV_OP_RESULT__RESULT_GET:
        out->found = o->get->found && o->get->kv != NULL;
        if (out->found) {
            entry_fill(o->get->kv, &out->entry);
        }
        break;
    default:
        break;
    }
    return ONCE_OK;
}

void
once_kv_result_free(once_kv_result *r)
{
    if (r != NULL) {
        once__v1__kv_txn_response__free_unpacked(r->m, NULL);
        free(r);
    }
}

/* ---- Range ----------------------------------------------------------------
 */

int
once_kv_range(once_client *c, const void *key, size_t klen, bool prefix,
              uint32_t limit, const void *cont, size_t clen,
              once_kv_range_result **res, once_status *st)
{
    once_status local;
    Once__V1__KvRangeRequest req = ONCE__V1__KV_RANGE_REQUEST__INIT;
    ProtobufCMessage *out;
    int rv;

    if (res != NULL) {
        *res = NULL;
    }
    if ((rv = status_begin(&st, &local, c, "client")) != ONCE_OK) {
        return rv;
    }
    if ((key == NULL && klen > 0) || (cont == NULL && clen > 0)) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "key or continuation is NULL with a length");
    }
    req.key.data = (uint8_t *)key;
    req.key.len = klen;
    req.prefix = prefix;
    req.limit = limit;
    req.continuation.data = (uint8_t *)cont;
    req.continuation.len = clen;
    if ((rv = invoke(c, &once__v1__kv__descriptor, "Range", CALL_READ, NULL,
                     &req.base, &out, st, 0)) != ONCE_OK) {
        return rv;
    }
    if (res == NULL) {
        protobuf_c_message_free_unpacked(out, NULL);
        return ONCE_OK;
    }
    if ((*res = malloc(sizeof(**res))) == NULL) {
        protobuf_c_message_free_unpacked(out, NULL);
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "out of memory for the Range's page");
    }
    (*res)->m = (Once__V1__KvRangeResponse *)out;
    return ONCE_OK;
}

size_t
once_kv_range_count(const once_kv_range_result *r)
{
    return r != NULL ? r->m->n_kvs : 0;
}

int
once_kv_range_entry(const once_kv_range_result *r, size_t i, once_kv_entry *out)
{
    if (r == NULL || out == NULL || i >= r->m->n_kvs) {
        return ONCE_OUT_OF_RANGE;
    }
    entry_fill(r->m->kvs[i], out);
    return ONCE_OK;
}

bool
once_kv_range_more(const once_kv_range_result *r, const void **cont,
                   size_t *clen)
{
    bool more = r != NULL && r->m->more;

    if (cont != NULL) {
        *cont = more ? r->m->continuation.data : NULL;
    }
    if (clen != NULL) {
        *clen = more ? r->m->continuation.len : 0;
    }
    return more;
}

uint64_t
once_kv_range_revision(const once_kv_range_result *r)
{
    return r != NULL ? r->m->revision : 0;
}

void
once_kv_range_result_free(once_kv_range_result *r)
{
    if (r != NULL) {
        once__v1__kv_range_response__free_unpacked(r->m, NULL);
        free(r);
    }
}
