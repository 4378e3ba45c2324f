/*
 * table.c — a chained hash table of lease entries keyed by client id, and
 * the live-lease counts (all, and per principal) the lease caps read.
 */
#include "lease/table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define TABLE_OWNER_BUCKETS 4096

/* One principal's entries: shared by them, freed with the last one. */
typedef struct lease_owner {
    char *name;
    size_t live;    /* its entries counted live */
    size_t entries; /* entries pointing here */
    lease_table *t;
    struct lease_owner *next;
} lease_owner;

struct lease_table {
    lease_entry **buckets;
    size_t nbuckets; /* a power of two */
    size_t count;
    size_t live; /* entries counted live */
    uint64_t next_id;
    lease_owner *owners[TABLE_OWNER_BUCKETS];
    lease_end_hook end_hook; /* lease_table_on_end */
    void *end_arg;
};

static size_t
owner_slot(const char *name)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h = (h ^ *p) * 1099511628211ULL;
    }
    return (size_t)(h & (TABLE_OWNER_BUCKETS - 1));
}

static lease_owner *
owner_find(lease_table *t, const char *name)
{
    lease_owner *o = t->owners[owner_slot(name)];
    while (o != NULL && strcmp(o->name, name) != 0) {
        o = o->next;
    }
    return o;
}

static lease_owner *
owner_get(lease_table *t, const char *name)
{
    lease_owner *o = owner_find(t, name);
    size_t s;

    if (o != NULL) {
        return o;
    }
    if ((o = calloc(1, sizeof(*o))) == NULL ||
        (o->name = strdup(name)) == NULL) {
        free(o);
        return NULL;
    }
    o->t = t;
    s = owner_slot(name);
    o->next = t->owners[s];
    t->owners[s] = o;
    return o;
}

static void
owner_put(lease_owner *o)
{
    lease_owner **pp;

    if (--o->entries > 0) {
        return;
    }
    for (pp = &o->t->owners[owner_slot(o->name)]; *pp != o; pp = &(*pp)->next) {
    }
    *pp = o->next;
    free(o->name);
    free(o);
}

static void
entry_count_live(lease_entry *e, bool live)
{
    if (e->counted_live == live) {
        return;
    }
    e->counted_live = live;
    if (live) {
        e->owner->live++;
        e->owner->t->live++;
    } else {
        e->owner->live--;
        e->owner->t->live--;
    }
}

static size_t
table_slot(const lease_table *t, uint64_t id)
{
    /* Fibonacci hashing spreads consecutive ids. */
    return (size_t)((id * 11400714819323198485ULL) >> 20) & (t->nbuckets - 1);
}

int
lease_table_alloc(lease_table **tp)
{
    lease_table *t = calloc(1, sizeof(*t));

    if (t == NULL) {
        return ENOMEM;
    }
    t->nbuckets = 1024;
    if ((t->buckets = calloc(t->nbuckets, sizeof(*t->buckets))) == NULL) {
        free(t);
        return ENOMEM;
    }
    t->next_id = 1;
    *tp = t;
    return 0;
}

static void
entry_free(lease_entry *e)
{
    if (e->owner != NULL) {
        entry_count_live(e, false);
        owner_put(e->owner);
    }
    free(e->principal);
    free(e);
}

void
lease_table_free(lease_table *t)
{
    if (t == NULL) {
        return;
    }
    for (size_t i = 0; i < t->nbuckets; i++) {
        lease_entry *e = t->buckets[i];
        while (e != NULL) {
            lease_entry *next = e->next;
            entry_free(e);
            e = next;
        }
    }
    free(t->buckets);
    free(t);
}

static void
table_grow(lease_table *t)
{
    size_t old = t->nbuckets;
    lease_entry **ob = t->buckets;
    lease_entry **nb = calloc(old * 2, sizeof(*nb));

    if (nb == NULL) {
        return; /* longer chains, still correct */
    }
    t->buckets = nb;
    t->nbuckets = old * 2;
    for (size_t i = 0; i < old; i++) {
        lease_entry *e = ob[i];
        while (e != NULL) {
            lease_entry *next = e->next;
            size_t s = table_slot(t, e->client_id);
            e->next = nb[s];
            nb[s] = e;
            e = next;
        }
    }
    free(ob);
}

lease_entry *
lease_table_add(lease_table *t, uint64_t client_id, const char *principal,
                uint64_t ttl_ms, lease_state state, uint64_t expires_ms)
{
    lease_entry *e = calloc(1, sizeof(*e));
    size_t s;

    if (e == NULL ||
        (e->principal = strdup(principal != NULL ? principal : "")) == NULL) {
        free(e);
        return NULL;
    }
    if ((e->owner = owner_get(t, e->principal)) == NULL) {
        free(e->principal);
        free(e);
        return NULL;
    }
    e->owner->entries++;
    e->table = t;
    e->client_id = client_id;
    e->ttl_ms = ttl_ms;
    e->state = state;
    entry_count_live(e, state == LEASE_STATE_LIVE);
    e->expires_ms = expires_ms;
    s = table_slot(t, client_id);
    e->next = t->buckets[s];
    t->buckets[s] = e;
    if (++t->count > t->nbuckets) {
        table_grow(t);
    }
    if (client_id >= t->next_id) {
        t->next_id = client_id + 1;
    }
    return e;
}

lease_entry *
lease_table_find(lease_table *t, uint64_t client_id)
{
    lease_entry *e = t->buckets[table_slot(t, client_id)];
    while (e != NULL && e->client_id != client_id) {
        e = e->next;
    }
    return e;
}

void
lease_table_remove(lease_table *t, lease_entry *e)
{
    lease_entry **pp = &t->buckets[table_slot(t, e->client_id)];
    while (*pp != NULL && *pp != e) {
        pp = &(*pp)->next;
    }
    if (*pp == e) {
        *pp = e->next;
        t->count--;
        entry_free(e);
    }
}

void
lease_table_each(lease_table *t, void (*fn)(void *arg, lease_entry *e),
                 void *arg)
{
    lease_table_each_after(t, 0, fn, arg);
}

void
lease_table_each_after(lease_table *t, uint64_t after_id,
                       void (*fn)(void *arg, lease_entry *e), void *arg)
{
    size_t start = after_id != 0 ? table_slot(t, after_id) + 1 : 0;

    for (size_t k = 0; k < t->nbuckets; k++) {
        size_t i = (start + k) & (t->nbuckets - 1);
        for (lease_entry *e = t->buckets[i]; e != NULL; e = e->next) {
            fn(arg, e);
        }
    }
}

size_t
lease_table_count(lease_table *t)
{
    return t->count;
}

typedef struct table_sum_arg {
    uint64_t now;
    lease_sum *out;
} table_sum_arg;

static void
table_sum_one(void *arg, lease_entry *e)
{
    table_sum_arg *a = arg;
    lease_sum *s = a->out;

    s->records += e->retained;
    s->bytes += e->retained_bytes;
    if (e->oldest_ms != 0 &&
        (s->oldest_ms == 0 || e->oldest_ms < s->oldest_ms)) {
        s->oldest_ms = e->oldest_ms;
    }
    if (lease_entry_live(e, a->now)) {
        s->live++;
    } else {
        s->ended++;
    }
}

void
lease_table_sum(lease_table *t, uint64_t now, lease_sum *out)
{
    table_sum_arg a = {now, out};

    memset(out, 0, sizeof(*out));
    lease_table_each(t, table_sum_one, &a);
}

uint64_t
lease_sum_oldest_age_ms(const lease_sum *s, uint64_t now)
{
    return s->oldest_ms != 0 && now > s->oldest_ms ? now - s->oldest_ms : 0;
}

size_t
lease_table_live(lease_table *t)
{
    return t->live;
}

size_t
lease_table_live_of(lease_table *t, const char *principal)
{
    lease_owner *o = owner_find(t, principal != NULL ? principal : "");
    return o != NULL ? o->live : 0;
}

void
lease_entry_set_state(lease_entry *e, lease_state state)
{
    e->state = state;
    entry_count_live(e, state == LEASE_STATE_LIVE);
}

uint64_t
lease_table_next_id(lease_table *t)
{
    return t->next_id;
}

void
lease_table_set_next_id(lease_table *t, uint64_t next)
{
    if (next > t->next_id) {
        t->next_id = next;
    }
}

bool
lease_entry_live(const lease_entry *e, uint64_t now)
{
    return e->state == LEASE_STATE_LIVE && now < e->expires_ms;
}

uint64_t
lease_entry_remaining(const lease_entry *e, uint64_t now)
{
    return lease_entry_live(e, now) ? e->expires_ms - now : 0;
}

void
lease_entry_renew(lease_entry *e, uint64_t now)
{
    e->expires_ms = now + e->ttl_ms;
}

uint64_t
lease_entry_first_unacked(const lease_entry *e)
{
    return e->watermark > 1 ? e->watermark : 1;
}

void
lease_entry_ack(lease_entry *e, uint64_t first_incomplete)
{
    if (first_incomplete > e->watermark && first_incomplete > 1) {
        e->watermark = first_incomplete;
    }
}

void
lease_entry_record_added(lease_entry *e, uint64_t seq, uint64_t bytes,
                         uint64_t now)
{
    if (e->retained == 0 || e->oldest_ms == 0) {
        e->oldest_ms = now;
    }
    e->retained++;
    e->retained_bytes += bytes;
    if (seq > e->max_seq) {
        e->max_seq = seq;
    }
}

void
lease_entry_records_removed(lease_entry *e, uint64_t n, uint64_t bytes)
{
    e->retained = n > e->retained ? 0 : e->retained - n;
    e->retained_bytes =
        bytes > e->retained_bytes ? 0 : e->retained_bytes - bytes;
    if (e->retained == 0) {
        e->oldest_ms = 0;
    }
}

void
lease_table_on_end(lease_table *t, lease_end_hook fn, void *arg)
{
    t->end_hook = fn;
    t->end_arg = arg;
}

lease_end_hook
lease_table_end_hook(const lease_table *t, void **arg)
{
    *arg = t->end_arg;
    return t->end_hook;
}
