/*
 * renew.c — background lease renewal (docs/spec.md: renew at about TTL/3,
 * report loudly when renewal keeps failing).
 *
 * Owns: the renewal thread and its sleep on renew_cv. Every TTL/3 it sends
 * RenewLease for the handle's client id (client_lease_renew, which also
 * records the new expiry and turns a LEASE_EXPIRED answer into a lost
 * lease). When renewals keep failing it retries sooner, and when none has
 * succeeded by lease_until_ms — the last reply's time plus the TTL it said
 * was left, after which the server has expired the lease — it declares the
 * lease lost itself, so calls in flight end then rather than at their own
 * deadlines.
 * Invariant: the thread only reads read-only handle fields and the
 * lease-health block (under lease_lock); it never touches the seq window;
 * it stops (and is joined) before the handle is freed; it ends once the
 * lease is lost.
 * Never: holds renew_lock across a network call or while declaring the
 * loss (the user callback may run); never logs for a single transient
 * failure; never opens a new lease.
 */
#include "renew.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "duration.h"
#include "lost.h"
#include "retry.h"
#include "status.h"

#define RENEW_INTERVAL_MIN_MS 10u
#define RENEW_DEADLINE_MAX_MS 5000u

void
renew_init(once_client *c)
{
    pthread_mutex_init(&c->renew_lock, NULL);
    duration_cond_init(&c->renew_cv);
}

void
renew_fini(once_client *c)
{
    pthread_mutex_destroy(&c->renew_lock);
    pthread_cond_destroy(&c->renew_cv);
}

/* Waits until ms have passed or renew_stop is set; renew_lock is held.
 * Returns true when stopping. */
static bool
renew_wait(once_client *c, uint64_t ms)
{
    struct timespec ts = duration_deadline(ms);

    while (!c->renew_stop &&
           pthread_cond_timedwait(&c->renew_cv, &c->renew_lock, &ts) !=
               ETIMEDOUT) {
    }
    return c->renew_stop;
}

/* The local time by which the server has expired the lease, unless a
 * renewal succeeds first. */
static uint64_t
renew_until(once_client *c)
{
    uint64_t u;

    pthread_mutex_lock(&c->lease_lock);
    u = c->lease_until_ms;
    pthread_mutex_unlock(&c->lease_lock);
    return u;
}

static void *
renew_main(void *arg)
{
    once_client *c = arg;
    uint64_t interval = c->lease_ttl_ms / 3;
    uint64_t wait = 0;
    unsigned fails = 0;
    once_status st;

    if (interval < RENEW_INTERVAL_MIN_MS) {
        interval = RENEW_INTERVAL_MIN_MS;
    }
    wait = interval;
    status_clear(&st);
    pthread_mutex_lock(&c->renew_lock);
    for (;;) {
        uint64_t now, until, deadline;
        int rv;

        if (renew_wait(c, wait)) {
            break;
        }
        now = retry_now_ms();
        until = renew_until(c);
        if (now >= until) {
            pthread_mutex_unlock(&c->renew_lock);
            lost_declare(c,
                         "no renewal succeeded before its TTL ran out "
                         "(%u failed in a row, last: %s %s %s)",
                         fails, once_strerror(st.code), st.reason, st.message);
            return NULL;
        }
        /* Never wait on one renewal past the moment the lease ends. */
        deadline = until - now;
        if (deadline > interval) {
            deadline = interval;
        }
        if (deadline > RENEW_DEADLINE_MAX_MS) {
            deadline = RENEW_DEADLINE_MAX_MS;
        }
        pthread_mutex_unlock(&c->renew_lock);
        rv = client_lease_renew(c, 0, NULL, NULL, &st, (uint32_t)deadline);
        pthread_mutex_lock(&c->renew_lock);
        if (c->renew_stop || lost_is_lost(c)) {
            break; /* a LEASE_EXPIRED answer was declared a loss already */
        }
        if (rv == ONCE_OK) {
            if (fails >= 2) {
                fprintf(stderr,
                        "libonce: lease of client %" PRIu64
                        " renewed again after %u failures\n",
                        c->client_id, fails);
            }
            fails = 0;
            wait = interval;
            continue;
        }
        fails++;
        lost_set_health(c, false);
        if (rv == ONCE_UNIMPLEMENTED) {
            fprintf(stderr,
                    "libonce: the server does not renew leases (%s: %s); "
                    "the lease of client %" PRIu64 " ends after its TTL\n",
                    st.reason, st.message, c->client_id);
            break;
        }
        if (fails >= 2) {
            fprintf(stderr,
                    "libonce: renewing the lease of client %" PRIu64
                    " failed %u times in a row: %s (%s): %s\n",
                    c->client_id, fails, once_strerror(rv), st.reason,
                    st.message);
        }
        /* Try again sooner, and once more right at the end of the TTL. */
        wait = interval / 2 > 0 ? interval / 2 : 1;
        now = retry_now_ms();
        if (now < until && until - now < wait) {
            wait = until - now;
        }
    }
    pthread_mutex_unlock(&c->renew_lock);
    return NULL;
}

int
renew_start(once_client *c)
{
    int rv;

    if (c->client_id == 0 || c->lease_ttl_ms == 0) {
        return 0;
    }
    c->renew_stop = false;
    if ((rv = pthread_create(&c->renew_thread, NULL, renew_main, c)) != 0) {
        return rv;
    }
    c->renew_running = true;
    return 0;
}

void
renew_stop(once_client *c)
{
    if (!c->renew_running) {
        return;
    }
    pthread_mutex_lock(&c->renew_lock);
    c->renew_stop = true;
    pthread_cond_signal(&c->renew_cv);
    pthread_mutex_unlock(&c->renew_lock);
    nng_close(c->sock);
    pthread_join(c->renew_thread, NULL);
    c->renew_running = false;
}
