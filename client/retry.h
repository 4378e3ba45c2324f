/*
 * retry.h — when to try again: backoff with full jitter, and the deadline
 * arithmetic of one call.
 *
 * Owns: the exponential backoff schedule (initial, doubling, capped), the
 * per-call random state that jitters it, and the arithmetic of the call
 * deadline (on clock_now_ms, base/clock.h's monotonic clock).
 * Invariant: a backoff never exceeds the cap and never exceeds the time left
 * before the deadline; the random state belongs to one call (one thread), so
 * nothing here is shared or locked.
 * Never: sleeps past the deadline; never decides *whether* to retry (that is
 * the caller's job in call.c).
 */
#ifndef CLIENT_RETRY_H
#define CLIENT_RETRY_H

#include <stdint.h>

typedef struct retry_policy {
    uint32_t max_attempts; /* >= 1 */
    uint32_t initial_ms;   /* first backoff ceiling, >= 1 */
    uint32_t max_ms;       /* cap on every backoff ceiling, >= initial_ms */
} retry_policy;

/* Milliseconds left before deadline_ms (a clock_now_ms() value,
 * base/clock.h), or 0. */
uint64_t retry_remaining_ms(uint64_t deadline_ms);

/* now_ms + span_ms, but never past cap_ms: the end of a window (an
 * attempt, the wait for a reply) that must close by the call's deadline or
 * the attempt's end. */
uint64_t retry_window(uint64_t now_ms, uint64_t span_ms, uint64_t cap_ms);

/* A fresh random state for one call: seeded from the clock, the thread and
 * a process-wide counter, so concurrent calls do not jitter in lockstep. */
uint64_t retry_seed(void);

/* The next pseudo-random number of state *rng (splitmix64). */
uint64_t retry_rand(uint64_t *rng);

/*
 * The backoff to wait after failed attempt number `attempt` (1 = after the
 * first try): the ceiling is min(max_ms, initial_ms * 2^(attempt-1)) and
 * the result is uniform in [0, ceiling] ("full jitter").
 */
uint32_t retry_backoff_ms(const retry_policy *p, uint32_t attempt,
                          uint64_t *rng);

#endif /* CLIENT_RETRY_H */
