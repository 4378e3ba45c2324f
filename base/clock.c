/*
 * clock.c — the monotonic and wall clocks, sleep, and monotonic condition
 * deadlines (clock.h).
 */
#include "base/clock.h"

#include <errno.h>

uint64_t
clock_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t
clock_now_ms(void)
{
    return clock_now_us() / 1000u;
}

uint64_t
clock_wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void
clock_sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int
clock_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    int rv;

    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    rv = pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
    return rv;
}

struct timespec
clock_deadline(uint64_t ms)
{
    struct timespec ts;
    uint64_t ns;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ns = (uint64_t)ts.tv_nsec + (ms % 1000) * 1000000u;
    ts.tv_sec += (time_t)(ms / 1000 + ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    return ts;
}
