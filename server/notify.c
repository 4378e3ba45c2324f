/*
 * notify.c — sd_notify messages and the watchdog (notify.h).
 *
 * Owns: the watchdog thread and its beat counter.
 * Invariant: the executor bumps the beat from a posted task; the thread
 * pings only when the beat moved since its previous ping.
 * Never: calls sd_notify from the executor or an nng callback.
 */
#include "server/notify.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "server/executor.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/periodic.h"

#ifdef ONCE_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#define NOTIFY(...) sd_notifyf(0, __VA_ARGS__)
#else
#define NOTIFY(...) ((void)0)
#endif

void
notify_ready(const server *srv)
{
    NOTIFY("READY=1\nSTATUS=serving %zu listener(s), data %s", srv->cfg.nlisten,
           srv->cfg.data_dir);
    (void)srv;
}

void
notify_following(void *arg, const char *status)
{
    static uint64_t interval_ms, last_ms; /* the main thread's */
    uint64_t usec = 0, now = clock_now_ms();

    (void)arg;
    if (status != NULL) {
        NOTIFY("READY=1\nSTATUS=%s", status);
    }
#ifdef ONCE_HAVE_SYSTEMD
    if (interval_ms == 0 && sd_watchdog_enabled(0, &usec) > 0) {
        interval_ms = usec / 2000 > 0 ? usec / 2000 : 1;
    }
#endif
    (void)usec;
    if (interval_ms != 0 && now - last_ms >= interval_ms) {
        last_ms = now;
        NOTIFY("WATCHDOG=1");
    }
}

void
notify_reloading(void)
{
    NOTIFY("RELOADING=1\nSTATUS=reloading the configuration");
}

void
notify_stopping(void)
{
    NOTIFY("STOPPING=1\nSTATUS=stopping: received calls finish and are "
           "synced");
}

static atomic_uint_fast64_t notify_beats; /* bumped on the executor */
static periodic *notify_watchdog;         /* main thread only */
static uint64_t notify_interval_ms;
/* The watchdog thread's alone: */
static server *notify_srv;
static uint64_t notify_last; /* notify_beats at the previous ping */
static bool notify_warned;   /* said so since the executor last ran */

static void
notify_beat(void *arg)
{
    (void)arg;
    atomic_fetch_add(&notify_beats, 1);
}

/* The watchdog thread: at once, a beat posted to the executor; then every
 * interval a ping if the executor ran that beat, and the next beat. */
static void
notify_tick(void *arg, unsigned why)
{
    (void)arg;
    if ((why & PERIODIC_FIRST) == 0) {
        uint64_t now = atomic_load(&notify_beats);

        if (now != notify_last) {
            notify_last = now;
            notify_warned = false;
            NOTIFY("WATCHDOG=1");
        } else if (!notify_warned) {
            notify_warned = true;
            log_warn("watchdog: the executor ran no task in %llu ms; not "
                     "pinging the service manager",
                     (unsigned long long)notify_interval_ms);
        }
    }
    executor_post(notify_srv->ex, notify_beat, NULL);
}

int
notify_watchdog_start(server *srv)
{
    uint64_t usec = 0;
    int rv;

#ifdef ONCE_HAVE_SYSTEMD
    if (sd_watchdog_enabled(0, &usec) <= 0) {
        return 0;
    }
#else
    (void)srv;
    return 0;
#endif
    notify_interval_ms = usec / 2000 > 0 ? usec / 2000 : 1;
    notify_srv = srv;
    notify_last = atomic_load(&notify_beats);
    notify_warned = false;
    if ((rv = periodic_start(&notify_watchdog, notify_tick, NULL,
                             notify_interval_ms, PERIODIC_RUN_FIRST)) != 0) {
        return rv;
    }
    log_info("watchdog: pinging the service manager every %llu ms",
             (unsigned long long)notify_interval_ms);
    return 0;
}

void
notify_watchdog_stop(void)
{
    periodic_stop(&notify_watchdog);
}
