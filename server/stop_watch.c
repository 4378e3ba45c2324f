/*
 * stop_watch.c — the slow-stop log (stop_watch.h).
 */
#include "server/stop_watch.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/periodic.h"

static periodic *stop_watch_thread;
static _Atomic(const char *) stop_watch_now; /* the step under way */
static uint64_t stop_watch_began_ms;         /* written before the thread */

static void
stop_watch_tick(void *arg, unsigned why)
{
    const char *step = atomic_load(&stop_watch_now);

    (void)arg;
    (void)why;
    log_warn("stopping for %llu ms so far: waiting for %s",
             (unsigned long long)(clock_now_ms() - stop_watch_began_ms),
             step != NULL ? step : "the stop to begin");
}

void
stop_watch_start(void)
{
    stop_watch_began_ms = clock_now_ms();
    if (periodic_start(&stop_watch_thread, stop_watch_tick, NULL,
                       STOP_WATCH_EVERY_MS, 0) != 0) {
        stop_watch_thread = NULL; /* the stop goes on, unwatched */
    }
}

void
stop_watch_step(const char *step)
{
    if (step != NULL) {
        atomic_store(&stop_watch_now, step);
    }
}

void
stop_watch_end(void)
{
    periodic_stop(&stop_watch_thread);
}
