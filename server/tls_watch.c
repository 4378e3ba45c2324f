/*
 * tls_watch.c — the log of failed TLS handshakes (tls_watch.h).
 */
#include "server/tls_watch.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nng/supplemental/util/platform.h>

#include "base/endpoint_stats.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/periodic.h"

#define TLS_WATCH_MAX     8      /* tls+tcp:// listeners watched */
#define TLS_WATCH_POLL_MS 1000u  /* how often the counters are read */
#define TLS_WATCH_LOG_MS  10000u /* at most one line per listener per this */

typedef struct tls_entry {
    char *url;
    _Atomic uint32_t listener_id; /* the listener now serving url */
    _Atomic bool moved;           /* a new one since the last read */
    uint64_t seen;                /* the "auth" counter at the last read */
    uint64_t untold;              /* failures not logged yet */
    uint64_t told_ms; /* clock_now_ms() of the last line; 0: none yet */
} tls_entry;

struct tls_watch {
    tls_entry entries[TLS_WATCH_MAX]; /* the thread's alone once started */
    size_t n;
    periodic *thread; /* NULL until started */
};

/* The "auth" counter (NNG_ECRYPTO and NNG_EPEERAUTH of accepted
 * connections) of the listener with id id in the snapshot, or 0. */
static uint64_t
tls_auth_errors(nng_stat *snap, uint32_t id)
{
    nng_stat *ls = endpoint_stats_find(snap, "listener", (uint64_t)id);
    nng_stat *auth = ls != NULL ? endpoint_stats_child(ls, "auth") : NULL;

    return auth != NULL ? nng_stat_value(auth) : 0;
}

static void
tls_tell(tls_entry *e, uint64_t now)
{
    log_warn("%s: %llu TLS handshake(s) rejected by clients since %s: "
             "clients that do not trust this certificate (another CA) or "
             "expect a name it does not carry as a DNS name are told "
             "TLS_UNTRUSTED or TLS_NAME_MISMATCH (docs/security.md)",
             e->url, (unsigned long long)e->untold,
             e->told_ms == 0 ? "onced started" : "the last report");
    e->untold = 0;
    e->told_ms = now;
}

/* The thread, every TLS_WATCH_POLL_MS and once more when stopped: reads
 * the counters; logs what is due (all of it on the last run). */
static void
tls_poll(void *arg, unsigned why)
{
    tls_watch *w = arg;
    bool flush = (why & PERIODIC_LAST) != 0;
    nng_stat *snap;
    uint64_t now = clock_now_ms();

    if (nng_stats_get(&snap) != 0) {
        return; /* no statistics in this libnng: nothing to tell */
    }
    for (size_t i = 0; i < w->n; i++) {
        tls_entry *e = &w->entries[i];
        uint64_t v;

        if (atomic_exchange(&e->moved, false)) {
            e->seen = 0; /* a new listener counts from 0 */
        }
        v = tls_auth_errors(snap, atomic_load(&e->listener_id));
        if (v > e->seen) {
            e->untold += v - e->seen;
        }
        e->seen = v;
        if (e->untold > 0 && (flush || e->told_ms == 0 ||
                              now - e->told_ms >= TLS_WATCH_LOG_MS)) {
            tls_tell(e, now);
        }
    }
    nng_stats_free(snap);
}

int
tls_watch_open(tls_watch **wp)
{
    tls_watch *w;

    if ((w = calloc(1, sizeof(*w))) == NULL) {
        return NNG_ENOMEM;
    }
    *wp = w;
    return 0;
}

int
tls_watch_add(tls_watch *w, const char *url, nng_listener nl)
{
    tls_entry *e;

    if (w->n == TLS_WATCH_MAX) {
        return NNG_EINVAL;
    }
    e = &w->entries[w->n];
    if ((e->url = strdup(url)) == NULL) {
        return NNG_ENOMEM;
    }
    atomic_store(&e->listener_id, (uint32_t)nng_listener_id(nl));
    w->n++;
    return 0;
}

void
tls_watch_moved(tls_watch *w, nng_listener old, nng_listener nl)
{
    for (size_t i = 0; w != NULL && i < w->n; i++) {
        if (atomic_load(&w->entries[i].listener_id) ==
            (uint32_t)nng_listener_id(old)) {
            atomic_store(&w->entries[i].listener_id,
                         (uint32_t)nng_listener_id(nl));
            atomic_store(&w->entries[i].moved, true);
        }
    }
}

int
tls_watch_start(tls_watch *w)
{
    if (w->n == 0) {
        return 0;
    }
    if (periodic_start(&w->thread, tls_poll, w, TLS_WATCH_POLL_MS,
                       PERIODIC_RUN_LAST) != 0) {
        return NNG_ENOMEM;
    }
    return 0;
}

void
tls_watch_stop(tls_watch *w)
{
    if (w != NULL) {
        periodic_stop(&w->thread);
    }
}

void
tls_watch_free(tls_watch *w)
{
    if (w == NULL) {
        return;
    }
    for (size_t i = 0; i < w->n; i++) {
        free(w->entries[i].url);
    }
    free(w);
}
