/*
 * notify.c — sd_notify messages and the watchdog (notify.h).
 *
 * Owns: the watchdog thread and its beat counter.
 * Invariant: the executor bumps the beat from a posted task; the thread
 * pings only when the beat moved since its previous ping.
 * Never: calls sd_notify from the executor or an nng callback.
 */
#include "server/notify.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "server/executor.h"
#include "proto/log.h"

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
static pthread_t notify_thread;
static bool notify_running; /* main thread only */
static pthread_mutex_t notify_mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t notify_cv; /* signalled by stop */
static bool notify_stop;         /* notify_mtx */
static uint64_t notify_interval_us;

static void
notify_beat(void *arg)
{
    (void)arg;
    atomic_fetch_add(&notify_beats, 1);
}

static void *
notify_main(void *arg)
{
    server *srv = arg;
    uint64_t last = atomic_load(&notify_beats);
    bool warned = false;

    pthread_mutex_lock(&notify_mtx);
    while (!notify_stop) {
        struct timespec ts;
        uint64_t now;

        pthread_mutex_unlock(&notify_mtx);
        executor_post(srv->ex, notify_beat, NULL);
        pthread_mutex_lock(&notify_mtx);
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += (time_t)(notify_interval_us / 1000000);
        ts.tv_nsec += (long)(notify_interval_us % 1000000) * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        while (!notify_stop &&
               pthread_cond_timedwait(&notify_cv, &notify_mtx, &ts) == 0) {
        }
        if (notify_stop) {
            break;
        }
        now = atomic_load(&notify_beats);
        if (now != last) {
            last = now;
            warned = false;
            NOTIFY("WATCHDOG=1");
        } else if (!warned) {
            warned = true;
            log_warn("watchdog: the executor ran no task in %llu ms; not "
                     "pinging the service manager",
                     (unsigned long long)(notify_interval_us / 1000));
        }
    }
    pthread_mutex_unlock(&notify_mtx);
    return NULL;
}

int
notify_watchdog_start(server *srv)
{
    uint64_t usec = 0;
    pthread_condattr_t ca;
    int rv;

#ifdef ONCE_HAVE_SYSTEMD
    if (sd_watchdog_enabled(0, &usec) <= 0) {
        return 0;
    }
#else
    (void)srv;
    return 0;
#endif
    notify_interval_us = usec / 2 > 0 ? usec / 2 : 1;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&notify_cv, &ca);
    pthread_condattr_destroy(&ca);
    notify_stop = false;
    if ((rv = pthread_create(&notify_thread, NULL, notify_main, srv)) != 0) {
        pthread_cond_destroy(&notify_cv);
        return rv;
    }
    notify_running = true;
    log_info("watchdog: pinging the service manager every %llu ms",
             (unsigned long long)(notify_interval_us / 1000));
    return 0;
}

void
notify_watchdog_stop(void)
{
    if (!notify_running) {
        return;
    }
    pthread_mutex_lock(&notify_mtx);
    notify_stop = true;
    pthread_cond_signal(&notify_cv);
    pthread_mutex_unlock(&notify_mtx);
    pthread_join(notify_thread, NULL);
    pthread_cond_destroy(&notify_cv);
    notify_running = false;
}
