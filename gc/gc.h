/*
 * gc.h — the collector: reclaims completion records that can never be
 * replayed (docs/spec.md).
 *
 * Owns the collector thread, which only keeps time: every interval it asks
 * the executor to run a pass. A pass has two steps, both on the executor
 * thread (the only thread that touches the lease table and stages
 * transactions):
 *   1. expire: every live lease past its TTL is ended — its EXPIRED state
 *      staged — and an empty transaction is queued behind it as a barrier;
 *   2. reclaim (posted by the barrier's done callback, so everything staged
 *      before it, lease ends and earlier reclamations included, is durable
 *      and visible in LevelDB): for a live lease, delete its records with
 *      seq below the acknowledged watermark and persist that watermark in
 *      the same batch; for an ended lease, delete all its records, then
 *      forget the lease; then outbox events every consumer of their
 *      topic has acknowledged (outbox/reclaim.c), with each topic's new
 *      low-water mark. At most `budget` deletions per pass.
 * Invariant: a record is deleted only if its seq is below the watermark
 * written in the same batch, or its lease's end is already durable. Never
 * for age alone.
 * Never: blocks the executor for long (bounded passes), or reads state that
 * is not yet durable when deciding what to delete.
 */
#ifndef GC_GC_H
#define GC_GC_H

#include <stdint.h>

#include "store/store.h"
#include "lease/table.h"

typedef struct gc gc;

/* Runs task(task_arg) on the executor thread. */
typedef void (*gc_post_fn)(void *post_arg, void (*task)(void *),
                           void *task_arg);

typedef struct gc_config {
    uint64_t interval_ms; /* between passes; 0: passes only on gc_kick */
    uint64_t budget;      /* deletions per pass */
    /* A pass that finds nothing to delete starts a LevelDB compaction
     * (store_compact_start) once the passes before it deleted at least
     * this many keys since the last one: until compacted, every deleted
     * key leaves a tombstone that each later scan steps over, so an idle
     * onced kept spending CPU in proportion to what it had reclaimed.
     * 0: never. */
    uint64_t compact_after;
} gc_config;

typedef struct gc_stats {
    uint64_t passes;
    uint64_t reclaimed_total;
    uint64_t reclaimed_bytes_total;
    uint64_t leases_expired;
    uint64_t leases_forgotten;
    uint64_t events_reclaimed; /* outbox events (outbox_reclaim) */
    uint64_t event_bytes_reclaimed;
    double reclaimed_per_sec; /* over the last ~10 s, or the last 64
                                 passes when those took less */
} gc_stats;

/* Starts the collector thread. now_ms is the (injectable) clock. */
int gc_open(gc **gp, store *st, lease_table *lt, uint64_t (*now_ms)(void),
            gc_post_fn post, void *post_arg, const gc_config *cfg);

/* Stops the thread and waits for a pass in flight to finish; the executor
 * and its store_sync calls must still run. g stays readable
 * (gc_stats_get: an Admin.Stats still queued) until gc_close. Called by
 * one thread; NULL is ok. */
void gc_stop(gc *g);

/* gc_stop, then frees g. NULL is ok. */
void gc_close(gc *g);

/* Asks for a pass now (unless one is in flight). */
void gc_kick(gc *g);

/* Thread-safe snapshot of the counters. */
void gc_stats_get(gc *g, gc_stats *out);

#endif /* GC_GC_H */
