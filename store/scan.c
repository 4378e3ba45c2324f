/*
 * scan.c — a key range as one transaction sees it (store_txn_scan).
 *
 * Owns the merge of three layers in key order: the transaction's own
 * staged writes (newest wins), the overlay of executed-but-unsynced
 * writes, and LevelDB. The two pending layers are copied into one sorted
 * array first (they are small: one transaction, one or two commit groups),
 * then walked beside a LevelDB iterator.
 * Invariant: a key is passed once, with the value a store_txn_get of it
 * would return at the start of the scan; a key whose newest write is a
 * delete is not passed.
 * Never: sees writes fn stages during the scan (the pending layers are
 * copied before the first call); runs off the owner's thread.
 */
#include "store/store_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct scan_item {
    char *key;
    size_t klen;
    char *val; /* NULL: deleted */
    size_t vlen;
} scan_item;

typedef struct scan_pending {
    scan_item *v;
    size_t n;
    size_t cap;
    const char *start;
    size_t slen;
    int err;
} scan_pending;

/* LevelDB's bytewise order: memcmp, then the shorter first. */
static int
key_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);

    if (c != 0) {
        return c;
    }
    return alen < blen ? -1 : alen > blen ? 1 : 0;
}

/* Adds (or, for a key already held, replaces) one pending write at or
 * after the scan's start. */
static void
pending_add(void *arg, const char *key, size_t klen, const char *val,
            size_t vlen)
{
    scan_pending *p = arg;
    scan_item *it = NULL;

    if (p->err != 0 || key_cmp(key, klen, p->start, p->slen) < 0) {
        return;
    }
    for (size_t i = 0; i < p->n; i++) {
        if (key_cmp(p->v[i].key, p->v[i].klen, key, klen) == 0) {
            it = &p->v[i];
            free(it->val);
            it->val = NULL;
            break;
        }
    }
    if (it == NULL) {
        if (p->n == p->cap) {
            size_t cap = p->cap > 0 ? p->cap * 2 : 16;
            scan_item *nv = realloc(p->v, cap * sizeof(*nv));
            if (nv == NULL) {
                p->err = ENOMEM;
                return;
            }
            p->v = nv;
            p->cap = cap;
        }
        it = &p->v[p->n];
        if ((it->key = store_dup(key, klen)) == NULL) {
            p->err = ENOMEM;
            return;
        }
        it->klen = klen;
        it->val = NULL;
        p->n++;
    }
    it->vlen = val != NULL ? vlen : 0;
    if (val != NULL && (it->val = store_dup(val, vlen)) == NULL) {
        p->err = ENOMEM;
    }
}

static int
item_cmp(const void *a, const void *b)
{
    const scan_item *x = a, *y = b;
    return key_cmp(x->key, x->klen, y->key, y->klen);
}

static void
pending_fini(scan_pending *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->v[i].key);
        free(p->v[i].val);
    }
    free(p->v);
}

/* The overlay's writes under prefix, then the transaction's own on top,
 * sorted. */
static int
pending_collect(store_txn *t, scan_pending *p, const void *prefix, size_t plen)
{
    overlay_each_prefix(t->s->ov, prefix, plen, pending_add, p);
    for (size_t i = 0; i < t->nwrites && p->err == 0; i++) {
        const txn_write *w = &t->writes[i];
        if (w->klen >= plen && memcmp(w->key, prefix, plen) == 0) {
            pending_add(p, w->key, w->klen, w->val, w->vlen);
        }
    }
    if (p->err == 0 && p->n > 1) {
        qsort(p->v, p->n, sizeof(*p->v), item_cmp);
    }
    return p->err;
}

int
store_txn_scan(store_txn *t, const void *start, size_t slen, const void *prefix,
               size_t plen, store_scan_fn fn, void *arg)
{
    scan_pending p = {.start = start, .slen = slen};
    leveldb_iterator_t *it;
    char *err = NULL;
    size_t next = 0; /* the first pending item not yet passed */
    int rv;

    if ((rv = pending_collect(t, &p, prefix, plen)) != 0) {
        pending_fini(&p);
        return rv;
    }
    it = leveldb_create_iterator(t->s->db, t->s->ropts);
    leveldb_iter_seek(it, start, slen);
    for (;;) {
        size_t klen = 0, vlen = 0;
        const char *k = NULL, *v = NULL;
        int c = 1; /* > 0: the pending item comes first */

        if (leveldb_iter_valid(it)) {
            k = leveldb_iter_key(it, &klen);
            if (klen < plen || memcmp(k, prefix, plen) != 0) {
                k = NULL;
            }
        }
        if (k == NULL && next == p.n) {
            break;
        }
        if (k != NULL && next < p.n) {
            c = key_cmp(k, klen, p.v[next].key, p.v[next].klen);
        } else if (k != NULL) {
            c = -1;
        }
        if (c < 0) {
            v = leveldb_iter_value(it, &vlen);
            rv = fn(arg, k, klen, v, vlen);
            leveldb_iter_next(it);
        } else {
            const scan_item *pi = &p.v[next++];
            if (c == 0) {
                leveldb_iter_next(it); /* the pending write hides it */
            }
            if (pi->val != NULL) {
                rv = fn(arg, pi->key, pi->klen, pi->val, pi->vlen);
            }
        }
        if (rv != 0) {
            break;
        }
    }
    leveldb_iter_get_error(it, &err);
    if (err != NULL && rv == 0) {
        rv = store_leveldb_error("scanning", err);
    } else if (err != NULL) {
        leveldb_free(err);
    }
    leveldb_iter_destroy(it);
    pending_fini(&p);
    return rv;
}
