/*
 * gc.c — the collector thread and its two-step passes.
 */
#include "gc/gc.h"

#include "base/clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "outbox/outbox.h"
#include "store/fault.h"
#include "lease/lease.h"
#include "store/records.h"
#include "proto/wire.h"

#define GC_RATE_SAMPLES   64
#define GC_RATE_WINDOW_MS 10000

typedef struct gc_sample {
    uint64_t t_ms;
    uint64_t total;
} gc_sample;

struct gc {
    store *st;
    lease_table *lt;       /* executor thread only */
    uint64_t resume_after; /* where the next reclaim walk starts past (the
                              lease that ran out the last budget); executor
                              thread only */
    bool outbox_walked;    /* a pass has run outbox_reclaim (its first walk
                              fences an older store); executor thread only */
    uint64_t (*now_ms)(void);
    gc_post_fn post;
    void *post_arg;
    gc_config cfg;
    pthread_t thread;

    pthread_mutex_t mtx; /* protects everything below */
    pthread_cond_t cv;
    bool stopping;
    bool joined; /* gc_stop joined the thread */
    bool kicked;
    bool in_flight;   /* a pass is between step 1 and its end */
    bool ended_any;   /* step 1 of the pass in flight ended a lease */
    bool deleted_any; /* step 2 of the pass in flight staged deletions */
    bool raised_any;  /* ... and raised a durable watermark */
    bool idle_pass;   /* ... and deleted nothing, forgot no lease */
    uint64_t deleted_since_compact; /* keys deleted since the last
                                       compaction this collector started */
    gc_stats stats;
    gc_sample samples[GC_RATE_SAMPLES];
    size_t nsamples;
    size_t next_sample;
};

/* ---- step 2: reclaim ------------------------------------------------------
 */

typedef struct reclaim_ctx {
    gc *g;
    store_txn *txn;
    lease_entry *e;
    uint64_t limit;   /* delete seqs below this */
    uint64_t budget;  /* deletions left in this pass */
    uint64_t deleted; /* in this lease */
    uint64_t bytes;
    uint64_t next_seq;  /* one past the last deleted seq */
    uint64_t oldest_ms; /* completion time of the first record kept */
    bool out_of_budget;
    bool raised; /* a durable watermark was staged in this pass */
    int err;
} reclaim_ctx;

static int
reclaim_one(void *arg, const char *key, size_t klen, const char *val,
            size_t vlen)
{
    reclaim_ctx *rc = arg;
    uint64_t seq;
    int rv;

    if (klen != RECORD_KEY_LEN) {
        return 0;
    }
    seq = wire_get_be64((const uint8_t *)key + 10);
    if (seq >= rc->limit) {
        record *r = once__store__v1__completion_record__unpack(
            NULL, vlen, (const uint8_t *)val);
        if (r != NULL) {
            rc->oldest_ms = r->completed_unix_ms;
            records_free(r);
        }
        return 1;
    }
    if (rc->budget == 0) {
        rc->out_of_budget = true;
        return 1;
    }
    if ((rv = store_txn_del(rc->txn, key, klen)) != 0) {
        rc->err = rv;
        return 1;
    }
    rc->budget--;
    rc->deleted++;
    rc->bytes += klen + vlen;
    rc->next_seq = seq + 1;
    return 0;
}

/* Deletes e's records with from <= seq < limit. */
static int
reclaim_range(reclaim_ctx *rc, lease_entry *e, uint64_t from, uint64_t limit)
{
    uint8_t start[RECORD_KEY_LEN];
    int rv;

    rc->e = e;
    rc->limit = limit;
    rc->deleted = 0;
    rc->bytes = 0;
    rc->next_seq = from;
    rc->oldest_ms = 0;
    rc->out_of_budget = false;
    records_key(e->client_id, from, start);
    rv = store_scan_from(rc->g->st, start, sizeof(start), start, 10,
                         reclaim_one, rc);
    if (rv == EIO || rv == EBADMSG) { /* EBADMSG: damaged data */
        return rv;
    }
    if (rc->err != 0) {
        return rc->err;
    }
    lease_entry_records_removed(e, rc->deleted, rc->bytes);
    if (e->retained > 0 && rc->oldest_ms != 0) {
        e->oldest_ms = rc->oldest_ms;
    }
    return 0;
}

/* A live lease: reclaim below the acknowledged watermark and persist the
 * new durable watermark in the same batch. */
static int
reclaim_acked(reclaim_ctx *rc, lease_entry *e)
{
    uint8_t key[LEASE_KEY_LEN];
    uint8_t val[8];
    uint64_t wd;
    int rv;

    if ((rv = reclaim_range(rc, e, e->watermark_durable, e->watermark)) != 0) {
        return rv;
    }
    /* Every record below wd is now deleted (or never existed). */
    wd = rc->out_of_budget ? rc->next_seq : e->watermark;
    if (wd <= e->watermark_durable) {
        return 0;
    }
    lease_watermark_key(e->client_id, key);
    wire_put_be64(val, wd);
    if ((rv = store_txn_put(rc->txn, key, sizeof(key), val, sizeof(val))) !=
        0) {
        return rv;
    }
    e->watermark_durable = wd;
    rc->raised = true;
    return 0;
}

typedef struct reclaim_pass {
    reclaim_ctx rc;
    lease_entry **forget; /* ended leases with nothing left */
    size_t nforget;
    size_t cap;
    uint64_t ran_out_at; /* the lease that used up the budget, or 0 */
    int err;
} reclaim_pass;

static void
reclaim_lease(void *arg, lease_entry *e)
{
    reclaim_pass *p = arg;
    int rv = 0;

    if (p->err != 0) {
        return;
    }
    if (e->state == LEASE_STATE_LIVE) {
        if (e->watermark > e->watermark_durable && p->rc.budget > 0) {
            rv = reclaim_acked(&p->rc, e);
        }
    } else {
        if (e->retained > 0 && p->rc.budget > 0) {
            /* From seq 0, not the durable watermark: a client that
             * acknowledged a seq before its reply could leave a record
             * below it, and an ended lease must leave nothing. */
            rv = reclaim_range(&p->rc, e, 0, UINT64_MAX);
        }
        if (rv == 0 && e->retained == 0) {
            if (p->nforget == p->cap) {
                size_t cap = p->cap > 0 ? p->cap * 2 : 16;
                lease_entry **nf = realloc(p->forget, cap * sizeof(*nf));
                if (nf == NULL) {
                    p->err = ENOMEM;
                    return;
                }
                p->forget = nf;
                p->cap = cap;
            }
            p->forget[p->nforget++] = e;
        }
    }
    if (rv != 0) {
        p->err = rv;
    }
    if (p->rc.budget == 0 && p->ran_out_at == 0) {
        p->ran_out_at = e->client_id;
    }
}

static void gc_pass_done(void *arg);

static void
gc_step_reclaim(void *arg)
{
    gc *g = arg;
    reclaim_pass p;
    store_txn *txn;
    uint64_t events = 0, event_bytes = 0;

    memset(&p, 0, sizeof(p));
    if ((txn = store_txn_begin(g->st)) == NULL) {
        gc_pass_done(g);
        return;
    }
    p.rc.g = g;
    p.rc.txn = txn;
    p.rc.budget = g->cfg.budget;
    /* Round robin under a backlog: start past the lease where the last
     * pass ran out of budget, so leases late in the table are not starved
     * by early ones that keep acknowledging. */
    lease_table_each_after(g->lt, g->resume_after, reclaim_lease, &p);
    g->resume_after = p.ran_out_at;
    for (size_t i = 0; i < p.nforget && p.err == 0; i++) {
        p.err = lease_forget(g->lt, txn, p.forget[i]);
    }
    free(p.forget);
    /* Outbox events every consumer acknowledged, in the same batch and
     * out of the same budget. */
    if (p.err == 0) {
        p.err = outbox_reclaim(txn, !g->outbox_walked, &p.rc.budget, &events,
                               &event_bytes);
        g->outbox_walked = p.err == 0;
    }
    if (p.err != 0) {
        /* The table may already say "deleted" for some records; a restart
         * recounts from LevelDB. Nothing unsafe was staged on its own. */
        store_txn_abort(txn);
        gc_pass_done(g);
        return;
    }
    pthread_mutex_lock(&g->mtx);
    g->deleted_any = p.rc.budget < g->cfg.budget || p.nforget > 0;
    g->idle_pass = !g->deleted_any;
    g->deleted_since_compact += g->cfg.budget - p.rc.budget;
    g->raised_any = p.rc.raised;
    g->stats.reclaimed_total += g->cfg.budget - p.rc.budget - events;
    g->stats.leases_forgotten += p.nforget;
    g->stats.events_reclaimed += events;
    g->stats.event_bytes_reclaimed += event_bytes;
    pthread_mutex_unlock(&g->mtx);
    /* Reclaimed bytes are counted by the lease entries themselves. */
    store_txn_commit(txn, gc_pass_done, g);
}

/* ---- step 1: expire -------------------------------------------------------
 */

typedef struct expire_ctx {
    store_txn *txn;
    uint64_t now;
    uint64_t ended;
    uint64_t budget; /* most leases ended in one pass (docs/spec.md: bounded) */
    int err;
} expire_ctx;

static void
expire_lease(void *arg, lease_entry *e)
{
    expire_ctx *x = arg;

    bool was_live = e->state == LEASE_STATE_LIVE;

    /* Past the budget the rest wait for the next pass; a call or a
     * LeaseInfo that meets one ends it itself meanwhile. */
    if (x->err != 0 || x->ended >= x->budget) {
        return;
    }
    if ((x->err = lease_expire_due(x->txn, e, x->now)) == 0 && was_live &&
        e->state != LEASE_STATE_LIVE) {
        x->ended++;
    }
}

/* In store_sync: everything staged before the barrier is durable. */
static void
gc_barrier_done(void *arg)
{
    gc *g = arg;
    bool ended;

    pthread_mutex_lock(&g->mtx);
    ended = g->ended_any;
    pthread_mutex_unlock(&g->mtx);
    if (ended) {
        FAULT_POINT(FAULT_LEASE_ENDED);
    }
    g->post(g->post_arg, gc_step_reclaim, g);
}

static void
gc_step_expire(void *arg)
{
    gc *g = arg;
    expire_ctx x = {NULL, g->now_ms(), 0, g->cfg.budget, 0};

    if ((x.txn = store_txn_begin(g->st)) == NULL) {
        gc_pass_done(g);
        return;
    }
    lease_table_each(g->lt, expire_lease, &x);
    pthread_mutex_lock(&g->mtx);
    g->ended_any = x.ended > 0;
    g->stats.leases_expired += x.ended;
    pthread_mutex_unlock(&g->mtx);
    /* Even a failed staging leaves the table consistent: lease_end rolls
     * its own entry back. Whatever was staged is committed. */
    store_txn_commit(x.txn, gc_barrier_done, g);
}

/* ---- the pass and the thread --------------------------------------------- */

/* A pass that deleted nothing after enough deletions: compact now, while
 * onced is quiet (g->mtx held). A compaction already running (an
 * operator's) counts as this one. */
static void
gc_compact_if_due(gc *g)
{
    bool already = false;

    if (!g->idle_pass || g->cfg.compact_after == 0 ||
        g->deleted_since_compact < g->cfg.compact_after) {
        return;
    }
    if (store_compact_start(g->st, &already) != 0) {
        return; /* tried again after the next pass */
    }
    if (!already) {
        log_info("collector: compacting LevelDB after %llu deletions (their "
                 "tombstones cost CPU on every scan until compacted; "
                 "--compact-after)",
                 (unsigned long long)g->deleted_since_compact);
    }
    g->deleted_since_compact = 0;
}

/* Runs in store_sync on the executor thread (or directly on failure). */
static void
gc_pass_done(void *arg)
{
    gc *g = arg;
    uint64_t now = clock_now_ms();
    size_t oldest;

    pthread_mutex_lock(&g->mtx);
    if (g->raised_any) {
        /* The new durable watermark and the deletions below it are one
         * batch (docs/spec.md); acknowledged records at or above it that the
         * budget left over are still stored. */
        g->raised_any = false;
        pthread_mutex_unlock(&g->mtx);
        FAULT_POINT(FAULT_WATERMARK_PERSISTED);
        pthread_mutex_lock(&g->mtx);
    }
    if (g->deleted_any) {
        g->deleted_any = false;
        pthread_mutex_unlock(&g->mtx);
        FAULT_POINT(FAULT_RECORDS_DELETED);
        pthread_mutex_lock(&g->mtx);
    }
    gc_compact_if_due(g);
    g->idle_pass = false;
    g->stats.passes++;
    g->samples[g->next_sample].t_ms = now;
    g->samples[g->next_sample].total = g->stats.reclaimed_total;
    g->next_sample = (g->next_sample + 1) % GC_RATE_SAMPLES;
    if (g->nsamples < GC_RATE_SAMPLES) {
        g->nsamples++;
    }
    /* The rate over the oldest sample still inside the window. */
    oldest = (g->next_sample + GC_RATE_SAMPLES - g->nsamples) % GC_RATE_SAMPLES;
    for (size_t i = 0; i < g->nsamples; i++) {
        gc_sample *s = &g->samples[(oldest + i) % GC_RATE_SAMPLES];
        if (now - s->t_ms <= GC_RATE_WINDOW_MS) {
            g->stats.reclaimed_per_sec =
                now > s->t_ms ? (double)(g->stats.reclaimed_total - s->total) *
                                    1000.0 / (double)(now - s->t_ms)
                              : 0.0;
            break;
        }
    }
    g->in_flight = false;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mtx);
}

static void *
gc_main(void *arg)
{
    gc *g = arg;

    pthread_mutex_lock(&g->mtx);
    while (!g->stopping) {
        /* On the monotonic clock: a wall clock set back must not hold the
         * collector off for as long. */
        struct timespec ts = clock_deadline(g->cfg.interval_ms);
        /* Sleep until the tick, a kick or stop; other wake-ups (a pass
         * finishing) go back to sleep. */
        while (!g->kicked && !g->stopping) {
            int rv = g->cfg.interval_ms == 0
                         ? pthread_cond_wait(&g->cv, &g->mtx)
                         : pthread_cond_timedwait(&g->cv, &g->mtx, &ts);
            if (rv == ETIMEDOUT) {
                break;
            }
        }
        while (g->in_flight && !g->stopping) {
            pthread_cond_wait(&g->cv, &g->mtx); /* one pass at a time */
        }
        if (g->stopping) {
            break;
        }
        g->kicked = false;
        g->in_flight = true;
        pthread_mutex_unlock(&g->mtx);
        g->post(g->post_arg, gc_step_expire, g);
        pthread_mutex_lock(&g->mtx);
    }
    while (g->in_flight) {
        pthread_cond_wait(&g->cv, &g->mtx);
    }
    pthread_mutex_unlock(&g->mtx);
    return NULL;
}

int
gc_open(gc **gp, store *st, lease_table *lt, uint64_t (*now_ms)(void),
        gc_post_fn post, void *post_arg, const gc_config *cfg)
{
    gc *g = calloc(1, sizeof(*g));
    int rv;

    if (g == NULL) {
        return ENOMEM;
    }
    g->st = st;
    g->lt = lt;
    g->now_ms = now_ms;
    g->post = post;
    g->post_arg = post_arg;
    g->cfg = *cfg;
    if (g->cfg.budget == 0) {
        g->cfg.budget = 20000;
    }
    pthread_mutex_init(&g->mtx, NULL);
    if ((rv = clock_cond_init(&g->cv)) != 0) {
        pthread_mutex_destroy(&g->mtx);
        free(g);
        return rv;
    }
    if ((rv = pthread_create(&g->thread, NULL, gc_main, g)) != 0) {
        pthread_cond_destroy(&g->cv);
        pthread_mutex_destroy(&g->mtx);
        free(g);
        return rv;
    }
    *gp = g;
    return 0;
}

void
gc_stop(gc *g)
{
    bool joined;

    if (g == NULL) {
        return;
    }
    pthread_mutex_lock(&g->mtx);
    g->stopping = true;
    joined = g->joined;
    g->joined = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mtx);
    if (!joined) {
        pthread_join(g->thread, NULL);
    }
}

void
gc_close(gc *g)
{
    if (g == NULL) {
        return;
    }
    gc_stop(g);
    pthread_mutex_destroy(&g->mtx);
    pthread_cond_destroy(&g->cv);
    free(g);
}

void
gc_kick(gc *g)
{
    pthread_mutex_lock(&g->mtx);
    g->kicked = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mtx);
}

void
gc_stats_get(gc *g, gc_stats *out)
{
    pthread_mutex_lock(&g->mtx);
    *out = g->stats;
    pthread_mutex_unlock(&g->mtx);
}
