/*
 * lost.c — lease health and the prompt end of calls under a lost lease.
 *
 * Owns: once_client.lease_state and the tracked-call list (both under
 * lease_lock), once_client_lease_state and once_client_on_lease_lost.
 * Invariant: see lost.h — LOST is final, tracked operations start only
 * under lease_lock while not lost, and the loss cancels them under the
 * same lock. Cancelling only wakes the caller's nng_aio_wait: the call
 * itself decides its outcome (call.c), so a reply that already arrived is
 * still delivered.
 * Never: blocks under lease_lock (nng_ctx_send/recv and nng_sleep_aio only
 * start an operation; the aios have no callbacks); never runs the user
 * callback with a lock held.
 */
#include "lost.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "client_impl.h"
#include "status.h"

void
lost_init(once_client *c)
{
    pthread_mutex_init(&c->lease_lock, NULL);
    c->lease_state = ONCE_CLIENT_LEASE_NONE;
    c->calls = NULL;
}

void
lost_fini(once_client *c)
{
    pthread_mutex_destroy(&c->lease_lock);
}

bool
lost_track(once_client *c, lost_call *lc, nng_aio *aio, nng_aio *sleep)
{
    bool ok;

    lc->aio = aio;
    lc->sleep = sleep;
    lc->prev = NULL;
    pthread_mutex_lock(&c->lease_lock);
    if ((ok = c->lease_state != ONCE_CLIENT_LEASE_LOST)) {
        lc->next = c->calls;
        if (c->calls != NULL) {
            c->calls->prev = lc;
        }
        c->calls = lc;
    }
    pthread_mutex_unlock(&c->lease_lock);
    return ok;
}

void
lost_untrack(once_client *c, lost_call *lc)
{
    pthread_mutex_lock(&c->lease_lock);
    if (lc->prev != NULL) {
        lc->prev->next = lc->next;
    } else if (c->calls == lc) {
        c->calls = lc->next;
    }
    if (lc->next != NULL) {
        lc->next->prev = lc->prev;
    }
    lc->prev = lc->next = NULL;
    pthread_mutex_unlock(&c->lease_lock);
}

void
lost_op_start(lost_op op, nng_ctx ctx, nng_aio *aio, nng_duration ms)
{
    switch (op) {
    case LOST_OP_SEND:
        nng_ctx_send(ctx, aio);
        break;
    case LOST_OP_RECV:
        nng_ctx_recv(ctx, aio);
        break;
    case LOST_OP_SLEEP:
        nng_sleep_aio(ms, aio);
        break;
    }
}

bool
lost_start(once_client *c, lost_op op, nng_ctx ctx, nng_aio *aio,
           nng_duration ms)
{
    pthread_mutex_lock(&c->lease_lock);
    if (c->lease_state == ONCE_CLIENT_LEASE_LOST) {
        pthread_mutex_unlock(&c->lease_lock);
        return false;
    }
    lost_op_start(op, ctx, aio, ms);
    pthread_mutex_unlock(&c->lease_lock);
    return true;
}

bool
lost_is_lost(once_client *c)
{
    bool lost;

    pthread_mutex_lock(&c->lease_lock);
    lost = c->lease_state == ONCE_CLIENT_LEASE_LOST;
    pthread_mutex_unlock(&c->lease_lock);
    return lost;
}

void
lost_why(once_client *c, once_status *out)
{
    pthread_mutex_lock(&c->lease_lock);
    *out = c->lost_why;
    pthread_mutex_unlock(&c->lease_lock);
}

void
lost_declare(once_client *c, const char *fmt, ...)
{
    once_status why;
    once_lease_lost_fn fn = NULL;
    void *arg = NULL;
    bool quiet;
    char msg[sizeof(why.message)];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    status_clear(&why);
    status_set(&why, ONCE_FAILED_PRECONDITION, "LEASE_EXPIRED", "%s", msg);

    pthread_mutex_lock(&c->lease_lock);
    if (c->lease_state == ONCE_CLIENT_LEASE_LOST) {
        pthread_mutex_unlock(&c->lease_lock);
        return;
    }
    c->lease_state = ONCE_CLIENT_LEASE_LOST;
    c->lost_why = why;
    for (lost_call *lc = c->calls; lc != NULL; lc = lc->next) {
        /* Both: the call may be waiting for a reply or in its backoff. An
         * aio with nothing in flight ignores the cancel. */
        nng_aio_cancel(lc->aio);
        nng_aio_cancel(lc->sleep);
    }
    quiet = c->closing;
    if (!quiet && c->lost_fn != NULL && !c->lost_notified) {
        fn = c->lost_fn;
        arg = c->lost_arg;
        c->lost_notified = true;
    }
    pthread_mutex_unlock(&c->lease_lock);

    if (!quiet) {
        fprintf(stderr,
                "libonce: the lease of client %" PRIu64
                " is lost: %s; calls in flight under it end "
                "OUTCOME_UNKNOWN, new ones fail LEASE_EXPIRED — open a new "
                "handle\n",
                c->client_id, msg);
    }
    if (fn != NULL) {
        fn(c, c->client_id, &why, arg);
    }
}

void
lost_set_health(once_client *c, bool ok)
{
    pthread_mutex_lock(&c->lease_lock);
    if (c->lease_state != ONCE_CLIENT_LEASE_LOST) {
        c->lease_state =
            ok ? ONCE_CLIENT_LEASE_LIVE : ONCE_CLIENT_LEASE_FAILING;
    }
    pthread_mutex_unlock(&c->lease_lock);
}

void
lost_closing(once_client *c)
{
    pthread_mutex_lock(&c->lease_lock);
    c->closing = true;
    pthread_mutex_unlock(&c->lease_lock);
}

int
once_client_lease_state(const once_client *c)
{
    once_client *m = (once_client *)c; /* the lock is not logical state */
    int s;

    if (c == NULL) {
        return ONCE_CLIENT_LEASE_NONE;
    }
    pthread_mutex_lock(&m->lease_lock);
    s = m->lease_state;
    pthread_mutex_unlock(&m->lease_lock);
    return s;
}

void
once_client_on_lease_lost(once_client *c, once_lease_lost_fn fn, void *arg)
{
    once_status why;
    bool run = false;

    if (c == NULL) {
        return;
    }
    pthread_mutex_lock(&c->lease_lock);
    c->lost_fn = fn;
    c->lost_arg = arg;
    if (fn != NULL && c->lease_state == ONCE_CLIENT_LEASE_LOST &&
        !c->lost_notified && !c->closing) {
        c->lost_notified = true;
        why = c->lost_why;
        run = true;
    }
    pthread_mutex_unlock(&c->lease_lock);
    if (run) {
        fn(c, c->client_id, &why, arg);
    }
}
