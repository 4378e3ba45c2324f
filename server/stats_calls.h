/*
 * stats_calls.h — the executor's per-call figures for the metrics endpoint:
 * calls by method and status code, and two histograms (call latency from
 * receipt to reply, calls per group commit).
 *
 * Owns: counters and bucket counts, all atomics, written on the executor
 * thread and read by anyone (metrics.c renders them on nng's
 * threads). Buckets are kept per bucket, not cumulated: a reader sums them,
 * so a histogram's count always equals the sum of its buckets.
 * Invariant: a bucket's bounds never change while onced runs.
 * Never: locks, allocates, or reads a clock other than CLOCK_MONOTONIC.
 */
#ifndef SERVER_STATS_CALLS_H
#define SERVER_STATS_CALLS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/wire.h"

/* Methods counted one by one (wire_methods() order); a call whose method
 * is not known is counted in the slot after them. */
#define STATS_METHODS_MAX 64
/* Status codes 0..16 (gRPC); any other code is counted as 2 (UNKNOWN). */
#define STATS_CODES 17

/* Upper bounds of the latency buckets (microseconds) and of the group
 * size buckets (calls); one more bucket, +Inf, follows the last bound. */
#define STATS_LATENCY_BOUNDS 16
#define STATS_GROUP_BOUNDS   13
extern const uint64_t stats_latency_bounds_us[STATS_LATENCY_BOUNDS];
extern const uint64_t stats_group_bounds[STATS_GROUP_BOUNDS];

typedef struct stats_hist_latency {
    _Atomic uint64_t buckets[STATS_LATENCY_BOUNDS + 1];
    _Atomic uint64_t sum_us;
} stats_hist_latency;

typedef struct stats_hist_group {
    _Atomic uint64_t buckets[STATS_GROUP_BOUNDS + 1];
    _Atomic uint64_t sum;
} stats_hist_group;

typedef struct stats_calls {
    _Atomic uint64_t by_method[STATS_METHODS_MAX + 1][STATS_CODES];
    stats_hist_latency latency; /* receipt -> reply handed to nng */
    stats_hist_group group;     /* transactions per group commit that
                                   fsynced (executor.c: exec_sync) */
} stats_calls;

/* CLOCK_MONOTONIC in microseconds (clock_now_us). */
uint64_t stats_now_us(void);

/* One call answered with code; wm is its method, NULL when not known. */
void stats_calls_count(stats_calls *s, const wire_method *wm, int code);

/* One reply handed to nng, us after its request was received. */
void stats_calls_latency(stats_calls *s, uint64_t us);

/* One group commit (a synced write) answered n transactions. */
void stats_calls_group(stats_calls *s, uint64_t n);

/* The slot of wm in by_method (STATS_METHODS_MAX for unknown), and the
 * method a slot counts (NULL for the unknown slot or past the table). */
size_t stats_calls_slot(const wire_method *wm);
const wire_method *stats_calls_method(size_t slot);

#endif /* SERVER_STATS_CALLS_H */
