/*
 * overlay.c — a chained hash table of pending writes, guarded by one mutex.
 *
 * The owner's thread puts, gets and (in store_sync) settles. Entries
 * are few (bounded by what one or two commit groups hold), so one lock and
 * a table that grows by doubling are enough.
 */
#include "store/overlay.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct ov_entry {
    struct ov_entry *next;
    uint64_t hash;
    uint64_t ticket; /* transaction that wrote the newest value */
    bool deleted;
    size_t klen;
    size_t vlen;
    char *key;
    char *val;
} ov_entry;

struct overlay {
    pthread_mutex_t mtx; /* protects everything below */
    ov_entry **buckets;
    size_t nbuckets; /* a power of two */
    size_t count;
};

static uint64_t
ov_hash(const void *key, size_t len)
{
    /* FNV-1a, 64 bit. */
    const unsigned char *p = key;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

int
overlay_alloc(overlay **op)
{
    overlay *o;

    if ((o = calloc(1, sizeof(*o))) == NULL) {
        return ENOMEM;
    }
    o->nbuckets = 1024;
    if ((o->buckets = calloc(o->nbuckets, sizeof(*o->buckets))) == NULL) {
        free(o);
        return ENOMEM;
    }
    pthread_mutex_init(&o->mtx, NULL);
    *op = o;
    return 0;
}

static void
ov_entry_free(ov_entry *e)
{
    free(e->key);
    free(e->val);
    free(e);
}

void
overlay_free(overlay *o)
{
    if (o == NULL) {
        return;
    }
    for (size_t i = 0; i < o->nbuckets; i++) {
        ov_entry *e = o->buckets[i];
        while (e != NULL) {
            ov_entry *next = e->next;
            ov_entry_free(e);
            e = next;
        }
    }
    free(o->buckets);
    pthread_mutex_destroy(&o->mtx);
    free(o);
}

/* Called with o->mtx held. */
static ov_entry **
ov_find(overlay *o, const void *key, size_t klen, uint64_t h)
{
    ov_entry **pp = &o->buckets[h & (o->nbuckets - 1)];
    while (*pp != NULL) {
        ov_entry *e = *pp;
        if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0) {
            return pp;
        }
        pp = &e->next;
    }
    return pp;
}

/* Called with o->mtx held. Doubling failure is not an error: chains just
 * get longer. */
static void
ov_grow(overlay *o)
{
    size_t n = o->nbuckets * 2;
    ov_entry **b = calloc(n, sizeof(*b));

    if (b == NULL) {
        return;
    }
    for (size_t i = 0; i < o->nbuckets; i++) {
        ov_entry *e = o->buckets[i];
        while (e != NULL) {
            ov_entry *next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
            e = next;
        }
    }
    free(o->buckets);
    o->buckets = b;
    o->nbuckets = n;
}

int
overlay_put(overlay *o, const void *key, size_t klen, const void *val,
            size_t vlen, bool deleted, uint64_t ticket)
{
    uint64_t h = ov_hash(key, klen);
    char *v = NULL;
    ov_entry **pp;
    ov_entry *e;

    if (!deleted) {
        if ((v = malloc(vlen > 0 ? vlen : 1)) == NULL) {
            return ENOMEM;
        }
        memcpy(v, val, vlen);
    }
    pthread_mutex_lock(&o->mtx);
    pp = ov_find(o, key, klen, h);
    if ((e = *pp) == NULL) {
        if ((e = calloc(1, sizeof(*e))) == NULL ||
            (e->key = malloc(klen > 0 ? klen : 1)) == NULL) {
            pthread_mutex_unlock(&o->mtx);
            free(e);
            free(v);
            return ENOMEM;
        }
        memcpy(e->key, key, klen);
        e->klen = klen;
        e->hash = h;
        *pp = e;
        if (++o->count > o->nbuckets) {
            ov_grow(o);
        }
    } else {
        free(e->val);
    }
    e->val = v;
    e->vlen = deleted ? 0 : vlen;
    e->deleted = deleted;
    e->ticket = ticket;
    pthread_mutex_unlock(&o->mtx);
    return 0;
}

int
overlay_get(overlay *o, const void *key, size_t klen, char **val, size_t *vlen,
            bool *deleted)
{
    uint64_t h = ov_hash(key, klen);
    ov_entry *e;
    int rv = 0;

    pthread_mutex_lock(&o->mtx);
    if ((e = *ov_find(o, key, klen, h)) != NULL) {
        rv = 1;
        *deleted = e->deleted;
        if (!e->deleted) {
            if ((*val = malloc(e->vlen > 0 ? e->vlen : 1)) == NULL) {
                rv = -ENOMEM;
            } else {
                memcpy(*val, e->val, e->vlen);
                *vlen = e->vlen;
            }
        }
    }
    pthread_mutex_unlock(&o->mtx);
    return rv;
}

void
overlay_settle(overlay *o, const void *key, size_t klen, uint64_t ticket)
{
    uint64_t h = ov_hash(key, klen);
    ov_entry **pp;
    ov_entry *e;

    pthread_mutex_lock(&o->mtx);
    pp = ov_find(o, key, klen, h);
    if ((e = *pp) != NULL && e->ticket == ticket) {
        *pp = e->next;
        o->count--;
        ov_entry_free(e);
    }
    pthread_mutex_unlock(&o->mtx);
}

void
overlay_each_prefix(overlay *o, const void *prefix, size_t plen,
                    overlay_each_fn fn, void *arg)
{
    pthread_mutex_lock(&o->mtx);
    for (size_t i = 0; i < o->nbuckets; i++) {
        for (ov_entry *e = o->buckets[i]; e != NULL; e = e->next) {
            if (e->klen >= plen && memcmp(e->key, prefix, plen) == 0) {
                fn(arg, e->key, e->klen, e->deleted ? NULL : e->val, e->vlen);
            }
        }
    }
    pthread_mutex_unlock(&o->mtx);
}

size_t
overlay_count(overlay *o)
{
    size_t n;
    pthread_mutex_lock(&o->mtx);
    n = o->count;
    pthread_mutex_unlock(&o->mtx);
    return n;
}
