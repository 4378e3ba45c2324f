/*
 * slot.c — call slots kept for reuse (slot.h).
 */
#include "client/slot.h"

#include <stdlib.h>

#include <nng/protocol/reqrep0/req.h>

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
slot_pipe_gone(nng_pipe pipe, nng_pipe_ev ev, void *arg)
{
    slot_pool *p = arg;

    (void)pipe;
    (void)ev;
    atomic_fetch_add(&p->pipes_lost, 1);
}

void
slot_init(slot_pool *p)
{
    pthread_mutex_init(&p->lock, NULL);
    p->slots = NULL;
    p->nslots = 0;
    atomic_init(&p->pipes_lost, 0);
}

int
slot_watch(slot_pool *p, nng_socket sock)
{
    return nng_pipe_notify(sock, NNG_PIPE_EV_REM_POST, slot_pipe_gone, p);
}

int
slot_take(slot_pool *p, nng_socket sock, call_slot **sp)
{
    uint64_t lost = atomic_load(&p->pipes_lost);
    call_slot *s, *stale = NULL;
    int rv;

    pthread_mutex_lock(&p->lock);
    while ((s = p->slots) != NULL) {
        p->slots = s->next;
        p->nslots--;
        if (s->pipes_lost == lost) {
            break;
        }
        s->next = stale; /* kept before a connection closed */
        stale = s;
    }
    pthread_mutex_unlock(&p->lock);
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
    if ((rv = nng_ctx_open(&s->ctx, sock)) != 0) {
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
slot_give(slot_pool *p, call_slot *s, bool clean)
{
    if (s == NULL) {
        return;
    }
    if (clean) {
        s->pipes_lost = atomic_load(&p->pipes_lost);
        pthread_mutex_lock(&p->lock);
        if (p->nslots < SLOT_KEEP) {
            s->next = p->slots;
            p->slots = s;
            p->nslots++;
            s = NULL;
        }
        pthread_mutex_unlock(&p->lock);
    }
    if (s != NULL) {
        slot_close(s);
    }
}

void
slot_fini(slot_pool *p)
{
    call_slot *s;

    while ((s = p->slots) != NULL) {
        p->slots = s->next;
        slot_close(s);
    }
    p->nslots = 0;
    pthread_mutex_destroy(&p->lock);
}
