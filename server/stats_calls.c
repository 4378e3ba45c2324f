/*
 * stats_calls.c — counting calls by method and code, and the latency and
 * group-commit histograms (stats_calls.h).
 */
#include "server/stats_calls.h"

#include "base/clock.h"

/* 100 us to 10 s: a synced call costs one fsync (about 1-10 ms on a disk
 * that honours it), a replay or a read at most a group's fsync. */
const uint64_t stats_latency_bounds_us[STATS_LATENCY_BOUNDS] = {
    100,   250,    500,    1000,   2500,    5000,    10000,   25000,
    50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000,
};

/* Powers of two up to the executor's group limit (executor.c) and the
 * store's (store/commit.c). */
const uint64_t stats_group_bounds[STATS_GROUP_BOUNDS] = {
    1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096,
};

uint64_t
stats_now_us(void)
{
    return clock_now_us();
}

size_t
stats_calls_slot(const wire_method *wm)
{
    size_t n;
    const wire_method *all = wire_methods(&n);

    if (wm == NULL || wm < all || wm >= all + n ||
        (size_t)(wm - all) >= STATS_METHODS_MAX) {
        return STATS_METHODS_MAX;
    }
    return (size_t)(wm - all);
}

const wire_method *
stats_calls_method(size_t slot)
{
    size_t n;
    const wire_method *all = wire_methods(&n);

    return slot < n && slot < STATS_METHODS_MAX ? &all[slot] : NULL;
}

void
stats_calls_count(stats_calls *s, const wire_method *wm, int code)
{
    if (code < 0 || code >= STATS_CODES) {
        code = 2; /* UNKNOWN */
    }
    atomic_fetch_add(&s->by_method[stats_calls_slot(wm)][code], 1);
}

static size_t
stats_bucket(const uint64_t *bounds, size_t n, uint64_t v)
{
    size_t i = 0;

    while (i < n && v > bounds[i]) {
        i++;
    }
    return i; /* n: the +Inf bucket */
}

void
stats_calls_latency(stats_calls *s, uint64_t us)
{
    size_t b = stats_bucket(stats_latency_bounds_us, STATS_LATENCY_BOUNDS, us);

    atomic_fetch_add(&s->latency.buckets[b], 1);
    atomic_fetch_add(&s->latency.sum_us, us);
}

void
stats_calls_group(stats_calls *s, uint64_t n)
{
    size_t b = stats_bucket(stats_group_bounds, STATS_GROUP_BOUNDS, n);

    atomic_fetch_add(&s->group.buckets[b], 1);
    atomic_fetch_add(&s->group.sum, n);
}
