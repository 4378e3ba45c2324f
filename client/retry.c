/*
 * retry.c — backoff, jitter and deadlines for the retry loop in call.c.
 *
 * Owns: the backoff schedule and a splitmix64 generator whose state lives
 * on the caller's stack (one per call), so jitter is thread-safe without a
 * lock; the only shared datum is an atomic seed counter.
 * Never: blocks; measures a deadline on anything but clock_now_ms
 * (base/clock.h: monotonic, so clock steps cannot stretch a deadline).
 */
#include "client/retry.h"

#include "base/clock.h"

#include <pthread.h>
#include <stdatomic.h>

static atomic_uint_fast64_t retry_seed_counter;

uint64_t
retry_remaining_ms(uint64_t deadline_ms)
{
    uint64_t now = clock_now_ms();

    return now < deadline_ms ? deadline_ms - now : 0;
}

uint64_t
retry_window(uint64_t now_ms, uint64_t span_ms, uint64_t cap_ms)
{
    uint64_t end = now_ms + span_ms;

    return end < cap_ms ? end : cap_ms;
}

uint64_t
retry_rand(uint64_t *rng)
{
    uint64_t z = (*rng += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t
retry_seed(void)
{
    uint64_t s;
    pthread_t self = pthread_self();
    uint64_t tid = 0;

    /* pthread_t is opaque; fold its bytes in. */
    for (size_t i = 0; i < sizeof(self); i++) {
        tid = tid * 131 + ((const unsigned char *)&self)[i];
    }
    /* A seed, not a time: the wall clock's bits (differ across boots and
     * hosts) and the monotonic microseconds (differ call to call). */
    s = (clock_wall_ms() << 20) ^ clock_now_us();
    s ^= tid * 0x9e3779b97f4a7c15ull;
    s ^= atomic_fetch_add(&retry_seed_counter, 1) << 32;
    (void)retry_rand(&s);
    return s;
}

uint32_t
retry_backoff_ms(const retry_policy *p, uint32_t attempt, uint64_t *rng)
{
    uint64_t ceiling = p->initial_ms;

    for (uint32_t i = 1; i < attempt && ceiling < p->max_ms; i++) {
        ceiling *= 2;
    }
    if (ceiling > p->max_ms) {
        ceiling = p->max_ms;
    }
    return (uint32_t)(retry_rand(rng) % (ceiling + 1));
}
