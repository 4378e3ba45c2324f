/*
 * lease_gate.c — the lease's state as the call engine sees it
 * (lease_gate.h): seqs and acknowledgements, health, tracked calls.
 *
 * Owns: struct lease_gate's fields, under the locks named beside them.
 * Invariant: see lease_gate.h — LOST is final, tracked operations start
 * only under lock while not lost, and the loss cancels them under the same
 * lock. Cancelling only wakes the caller's nng_aio_wait: the call itself
 * decides its outcome (call.c), so a reply that already arrived is still
 * delivered.
 * Never: blocks under a lock (nng_ctx_send/recv and nng_sleep_aio only
 * start an operation; the aios have no callbacks); never runs the user
 * callback with a lock held.
 */
#include "client/lease_gate.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "client/status.h"

void
gate_init(lease_gate *g, once_client *owner)
{
    memset(g, 0, sizeof(*g));
    g->owner = owner;
    pthread_mutex_init(&g->win_lock, NULL);
    pthread_mutex_init(&g->lock, NULL);
    window_init(&g->win, 1);
    g->state = ONCE_CLIENT_LEASE_NONE;
}

void
gate_fini(lease_gate *g)
{
    pthread_mutex_destroy(&g->win_lock);
    pthread_mutex_destroy(&g->lock);
    window_fini(&g->win);
}

void
gate_grant(lease_gate *g, uint64_t client_id, uint64_t ttl_ms, uint64_t now_ms)
{
    g->client_id = client_id;
    g->ttl_ms = ttl_ms;
    pthread_mutex_lock(&g->lock);
    g->state = ONCE_CLIENT_LEASE_LIVE;
    g->until_ms = now_ms + ttl_ms;
    pthread_mutex_unlock(&g->lock);
}

void
gate_closing(lease_gate *g)
{
    pthread_mutex_lock(&g->lock);
    g->closing = true;
    pthread_mutex_unlock(&g->lock);
}

bool
gate_tracks(const lease_gate *g, uint64_t client_id)
{
    return g->client_id != 0 && client_id == g->client_id;
}

int
gate_seq_assign(lease_gate *g, uint64_t *seq)
{
    int rv;

    pthread_mutex_lock(&g->win_lock);
    rv = window_assign(&g->win, seq);
    pthread_mutex_unlock(&g->win_lock);
    return rv;
}

void
gate_seq_complete(lease_gate *g, uint64_t client_id, uint64_t seq)
{
    if (!gate_tracks(g, client_id)) {
        return;
    }
    pthread_mutex_lock(&g->win_lock);
    (void)window_complete(&g->win, seq);
    pthread_mutex_unlock(&g->win_lock);
}

bool
gate_seq_completed(lease_gate *g, uint64_t client_id, uint64_t seq)
{
    bool done;

    if (!gate_tracks(g, client_id) || seq == 0) {
        return false;
    }
    pthread_mutex_lock(&g->win_lock);
    done = seq < g->win.next && !window_is_incomplete(&g->win, seq);
    pthread_mutex_unlock(&g->win_lock);
    return done;
}

uint64_t
gate_ack(lease_gate *g, uint64_t client_id, uint64_t seq)
{
    uint64_t fi;

    if (!gate_tracks(g, client_id)) {
        return 0;
    }
    pthread_mutex_lock(&g->win_lock);
    fi = window_first_incomplete(&g->win);
    pthread_mutex_unlock(&g->win_lock);
    return fi <= seq ? fi : 0;
}

uint64_t
gate_first_incomplete(lease_gate *g)
{
    uint64_t fi;

    pthread_mutex_lock(&g->win_lock);
    fi = window_first_incomplete(&g->win);
    pthread_mutex_unlock(&g->win_lock);
    return fi;
}

bool
gate_all_complete(lease_gate *g)
{
    bool all;

    pthread_mutex_lock(&g->win_lock);
    all = window_first_incomplete(&g->win) == g->win.next;
    pthread_mutex_unlock(&g->win_lock);
    return all;
}

int
gate_state(lease_gate *g)
{
    int s;

    pthread_mutex_lock(&g->lock);
    s = g->state;
    pthread_mutex_unlock(&g->lock);
    return s;
}

uint64_t
gate_until(lease_gate *g)
{
    uint64_t u;

    pthread_mutex_lock(&g->lock);
    u = g->until_ms;
    pthread_mutex_unlock(&g->lock);
    return u;
}

void
gate_renewed(lease_gate *g, uint64_t reply_ms, uint64_t remaining_ms)
{
    pthread_mutex_lock(&g->lock);
    if (g->state != ONCE_CLIENT_LEASE_LOST) {
        if (reply_ms + remaining_ms > g->until_ms) {
            g->until_ms = reply_ms + remaining_ms;
        }
        g->state = ONCE_CLIENT_LEASE_LIVE;
    }
    pthread_mutex_unlock(&g->lock);
}

void
gate_failing(lease_gate *g)
{
    pthread_mutex_lock(&g->lock);
    if (g->state != ONCE_CLIENT_LEASE_LOST) {
        g->state = ONCE_CLIENT_LEASE_FAILING;
    }
    pthread_mutex_unlock(&g->lock);
}

bool
gate_track(lease_gate *g, gate_call *gc, nng_aio *aio, nng_aio *sleep)
{
    bool ok;

    gc->aio = aio;
    gc->sleep = sleep;
    gc->prev = NULL;
    pthread_mutex_lock(&g->lock);
    if ((ok = g->state != ONCE_CLIENT_LEASE_LOST)) {
        gc->next = g->calls;
        if (g->calls != NULL) {
            g->calls->prev = gc;
        }
        g->calls = gc;
    }
    pthread_mutex_unlock(&g->lock);
    return ok;
}

void
gate_untrack(lease_gate *g, gate_call *gc)
{
    pthread_mutex_lock(&g->lock);
    if (gc->prev != NULL) {
        gc->prev->next = gc->next;
    } else if (g->calls == gc) {
        g->calls = gc->next;
    }
    if (gc->next != NULL) {
        gc->next->prev = gc->prev;
    }
    gc->prev = gc->next = NULL;
    pthread_mutex_unlock(&g->lock);
}

void
gate_op_start(gate_op op, nng_ctx ctx, nng_aio *aio, nng_duration ms)
{
    switch (op) {
    case GATE_OP_SEND:
        nng_ctx_send(ctx, aio);
        break;
    case GATE_OP_RECV:
        nng_ctx_recv(ctx, aio);
        break;
    case GATE_OP_SLEEP:
        nng_sleep_aio(ms, aio);
        break;
    }
}

bool
gate_start(lease_gate *g, gate_op op, nng_ctx ctx, nng_aio *aio,
           nng_duration ms)
{
    pthread_mutex_lock(&g->lock);
    if (g->state == ONCE_CLIENT_LEASE_LOST) {
        pthread_mutex_unlock(&g->lock);
        return false;
    }
    gate_op_start(op, ctx, aio, ms);
    pthread_mutex_unlock(&g->lock);
    return true;
}

bool
gate_is_lost(lease_gate *g)
{
    bool lost;

    pthread_mutex_lock(&g->lock);
    lost = g->state == ONCE_CLIENT_LEASE_LOST;
    pthread_mutex_unlock(&g->lock);
    return lost;
}

void
gate_why(lease_gate *g, once_status *out)
{
    pthread_mutex_lock(&g->lock);
    *out = g->lost_why;
    pthread_mutex_unlock(&g->lock);
}

void
gate_declare(lease_gate *g, const char *fmt, ...)
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
    status_set(&why, ONCE_FAILED_PRECONDITION, ONCE_REASON_LEASE_EXPIRED, "%s",
               msg);

    pthread_mutex_lock(&g->lock);
    if (g->state == ONCE_CLIENT_LEASE_LOST) {
        pthread_mutex_unlock(&g->lock);
        return;
    }
    g->state = ONCE_CLIENT_LEASE_LOST;
    g->lost_why = why;
    for (gate_call *gc = g->calls; gc != NULL; gc = gc->next) {
        /* Both: the call may be waiting for a reply or in its backoff. An
         * aio with nothing in flight ignores the cancel. */
        nng_aio_cancel(gc->aio);
        nng_aio_cancel(gc->sleep);
    }
    quiet = g->closing;
    if (!quiet && g->lost_fn != NULL && !g->lost_notified) {
        fn = g->lost_fn;
        arg = g->lost_arg;
        g->lost_notified = true;
    }
    pthread_mutex_unlock(&g->lock);

    if (!quiet) {
        fprintf(stderr,
                "libonce: the lease of client %" PRIu64
                " is lost: %s; calls in flight under it end "
                "OUTCOME_UNKNOWN, new ones fail LEASE_EXPIRED — open a new "
                "handle\n",
                g->client_id, msg);
    }
    if (fn != NULL) {
        fn(g->owner, g->client_id, &why, arg);
    }
}

void
gate_on_lost(lease_gate *g, once_lease_lost_fn fn, void *arg)
{
    once_status why;
    bool run = false;

    pthread_mutex_lock(&g->lock);
    g->lost_fn = fn;
    g->lost_arg = arg;
    if (fn != NULL && g->state == ONCE_CLIENT_LEASE_LOST && !g->lost_notified &&
        !g->closing) {
        g->lost_notified = true;
        why = g->lost_why;
        run = true;
    }
    pthread_mutex_unlock(&g->lock);
    if (run) {
        fn(g->owner, g->client_id, &why, arg);
    }
}
