/*
 * range.c — once.v1.KV/Range: one key, or a page of the keys under a
 * prefix, as the call's transaction sees them (kv_range).
 *
 * Owns paging: at most the asked limit (at most KV_RANGE_LIMIT) keys and
 * about KV_RANGE_BYTES_MAX bytes a page (at least one key); the
 * continuation is the key the next page starts at, checked by check.c to
 * lie under the same prefix, so a page never reaches outside the range
 * the policy allowed.
 * Invariant: the page shows the keys as of the executed calls before it
 * (store_txn_scan: own writes, overlay, LevelDB); the executor answers it
 * only after the group commit that holds them.
 * Never: stages a write.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv/kv_impl.h"
#include "proto/once.pb-c.h"

typedef struct range_page {
    const Once__V1__KvRangeRequest *r;
    uint32_t limit;
    size_t bytes;
    Once__V1__KeyValue *kvs; /* limit entries */
    Once__V1__KeyValue **ptrs;
    kv_entry **held; /* the entries kvs' values point into */
    uint8_t **keys;  /* copies of the keys (the scan's are borrowed) */
    size_t n;
    uint8_t *next; /* the first key past the page (malloc'd) */
    size_t next_len;
} range_page;

/* store_txn_scan callback: one k/d/ key into the page, or, past the
 * page's end, its continuation (and stop). */
static int
page_add(void *arg, const char *key, size_t klen, const char *val, size_t vlen)
{
    range_page *p = arg;
    const uint8_t *ukey = (const uint8_t *)key + KV_PREFIX_LEN;
    size_t ulen = klen - KV_PREFIX_LEN;
    Once__V1__KeyValue *kv;
    kv_entry *e;

    if (p->n == p->limit || (p->n > 0 && p->bytes >= KV_RANGE_BYTES_MAX)) {
        if ((p->next = malloc(ulen > 0 ? ulen : 1)) == NULL) {
            return ENOMEM;
        }
        memcpy(p->next, ukey, ulen);
        p->next_len = ulen;
        return 1; /* stop: the page is full */
    }
    if ((e = kv_entry_decode(val, vlen)) == NULL) {
        return EBADMSG;
    }
    if ((p->keys[p->n] = malloc(ulen > 0 ? ulen : 1)) == NULL) {
        kv_entry_free(e);
        return ENOMEM;
    }
    memcpy(p->keys[p->n], ukey, ulen);
    kv = &p->kvs[p->n];
    once__v1__key_value__init(kv);
    kv->key.data = p->keys[p->n];
    kv->key.len = ulen;
    if (!p->r->keys_only) {
        kv->value = e->value;
    }
    kv->version = e->version;
    kv->create_revision = e->create_revision;
    kv->lease = e->lease;
    p->held[p->n] = e;
    p->ptrs[p->n] = kv;
    p->bytes += ulen + (p->r->keys_only ? 0 : e->value.len);
    p->n++;
    return 0;
}

static int
page_alloc(range_page *p)
{
    size_t n = p->limit;

    p->kvs = calloc(n, sizeof(*p->kvs));
    p->ptrs = calloc(n, sizeof(*p->ptrs));
    p->held = calloc(n, sizeof(*p->held));
    p->keys = calloc(n, sizeof(*p->keys));
    return p->kvs && p->ptrs && p->held && p->keys ? 0 : ENOMEM;
}

static void
page_fini(range_page *p)
{
    for (size_t i = 0; i < p->n; i++) {
        kv_entry_free(p->held[i]);
        free(p->keys[i]);
    }
    free(p->kvs);
    free(p->ptrs);
    free(p->held);
    free(p->keys);
    free(p->next);
}

/* Fills the page: the one key, or the prefix from its continuation. */
static int
page_fill(store_txn *t, const Once__V1__KvRangeRequest *r, range_page *p)
{
    kv_key pre, start;
    int rv;

    if ((rv = kv_key_data(&pre, r->key.data, r->key.len)) != 0) {
        return rv;
    }
    if (!r->prefix) {
        char *val;
        size_t vlen;
        rv = store_txn_get(t, pre.b, pre.n, &val, &vlen);
        if (rv == 0) {
            rv = page_add(p, (const char *)pre.b, pre.n, val, vlen);
            free(val);
        }
        kv_key_fini(&pre);
        return rv == ENOENT ? 0 : rv;
    }
    rv = r->continuation.len > 0
             ? kv_key_data(&start, r->continuation.data, r->continuation.len)
             : kv_key_data(&start, r->key.data, r->key.len);
    if (rv == 0) {
        rv = store_txn_scan(t, start.b, start.n, pre.b, pre.n, page_add, p);
        kv_key_fini(&start);
    }
    kv_key_fini(&pre);
    return rv == 1 ? 0 : rv;
}

void
kv_range(const kv_env *e, const Once__V1__KvRangeRequest *r, kv_outcome *o)
{
    Once__V1__KvRangeResponse resp = ONCE__V1__KV_RANGE_RESPONSE__INIT;
    range_page p = {.r = r};
    kv_totals tot;
    int rv;

    memset(o, 0, sizeof(*o));
    p.limit =
        r->limit == 0 || r->limit > KV_RANGE_LIMIT ? KV_RANGE_LIMIT : r->limit;
    if ((rv = page_alloc(&p)) != 0 ||
        (rv = kv_totals_read(e->txn, &tot)) != 0 ||
        (rv = page_fill(e->txn, r, &p)) != 0) {
        o->err = rv;
        page_fini(&p);
        return;
    }
    resp.kvs = p.ptrs;
    resp.n_kvs = p.n;
    resp.more = p.next != NULL;
    resp.continuation.data = p.next;
    resp.continuation.len = p.next_len;
    resp.revision = tot.revision;
    o->resp_len = once__v1__kv_range_response__get_packed_size(&resp);
    if ((o->resp = malloc(o->resp_len > 0 ? o->resp_len : 1)) == NULL) {
        o->err = ENOMEM;
    } else {
        once__v1__kv_range_response__pack(&resp, o->resp);
        o->code = ONCE__V1__CODE__OK;
    }
    page_fini(&p);
}
