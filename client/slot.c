/*
 * slot.c — call slots kept for reuse (slot.h).
 */
#include "slot.h"

#include <stdlib.h>

#include <nng/protocol/reqrep0/req.h>

#include "conn.h"

/* Free slots kept per handle: enough for every caller of a busy shared
 * handle, few enough that an idle one holds little. */
#define SLOT_KEEP 64

static void
slot_close(call_slot *s)
{
    nng_aio_free(s->sleep);
    nng_aio_free(s->aio);
    nng_ctx_close(s->ctx);
    free(s);
}

/* nng's pipe callback: runs on an nng thread, only counts. */
static void
slot_pipe_gone(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    conn *c = arg;

    (void)p;
    (void)ev;
    atomic_fetch_add(&c->pipes_lost, 1);
}

int
slot_watch(conn *c)
{
    return nng_pipe_notify(c->sock, NNG_PIPE_EV_REM_POST, slot_pipe_gone, c);
}

int
slot_take(conn *c, call_slot **sp)
{
    uint64_t lost = atomic_load(&c->pipes_lost);
    call_slot *s, *stale = NULL;
    int rv;

    pthread_mutex_lock(&c->slot_lock);
    while ((s = c->slots) != NULL) {
        c->slots = s->next;
        c->nslots--;
        if (s->pipes_lost == lost) {
            break;
        }
        s->next = stale; /* kept before a connection closed */
        stale = s;
    }
    pthread_mutex_unlock(&c->slot_lock);
    while (stale != NULL) {
        call_slot *next = stale->next;
        slot_close(stale);
        stale = next;
    }
    if (s != NULL) {
        *sp = s;
        return 0;
    }
    if ((s = calloc(1, sizeof(*s))) == NULL) {
        return NNG_ENOMEM;
    }
    if ((rv = nng_ctx_open(&s->ctx, c->sock)) != 0) {
        free(s);
        return rv;
    }
    if ((rv = nng_ctx_set_ms(s->ctx, NNG_OPT_REQ_RESENDTIME,
                             NNG_DURATION_INFINITE)) != 0 ||
        (rv = nng_aio_alloc(&s->aio, NULL, NULL)) != 0 ||
        (rv = nng_aio_alloc(&s->sleep, NULL, NULL)) != 0) {
        if (s->aio != NULL) {
            nng_aio_free(s->aio);
        }
        nng_ctx_close(s->ctx);
        free(s);
        return rv;
    }
    *sp = s;
    return 0;
}

void
slot_give(conn *c, call_slot *s, bool clean)
{
    if (s == NULL) {
        return;
    }
    if (clean) {
        s->pipes_lost = atomic_load(&c->pipes_lost);
        pthread_mutex_lock(&c->slot_lock);
        if (c->nslots < SLOT_KEEP) {
            s->next = c->slots;
            c->slots = s;
            c->nslots++;
            s = NULL;
        }
        pthread_mutex_unlock(&c->slot_lock);
    }
    if (s != NULL) {
        slot_close(s);
    }
}

void
slot_fini(conn *c)
{
    call_slot *s;

    while ((s = c->slots) != NULL) {
        c->slots = s->next;
        slot_close(s);
    }
    c->nslots = 0;
}
