/*
 * slot.c — call slots kept for reuse (slot.h).
 */
#include "slot.h"

#include <stdlib.h>

#include <nng/protocol/reqrep0/req.h>

#include "client_impl.h"

/* Free slots kept per handle: enough for every caller of a busy shared
 * handle, few enough that an idle one holds little. */
#define SLOT_KEEP 64

static void
slot_close(call_slot *s)
{
    nng_aio_free(s->aio);
    nng_ctx_close(s->ctx);
    free(s);
}

int
slot_take(once_client *c, call_slot **sp)
{
    call_slot *s;
    int rv;

    pthread_mutex_lock(&c->slot_lock);
    if ((s = c->slots) != NULL) {
        c->slots = s->next;
        c->nslots--;
    }
    pthread_mutex_unlock(&c->slot_lock);
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
        (rv = nng_aio_alloc(&s->aio, NULL, NULL)) != 0) {
        nng_ctx_close(s->ctx);
        free(s);
        return rv;
    }
    *sp = s;
    return 0;
}

void
slot_give(once_client *c, call_slot *s, bool clean)
{
    if (s == NULL) {
        return;
    }
    if (clean) {
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
slot_fini(once_client *c)
{
    call_slot *s;

    while ((s = c->slots) != NULL) {
        c->slots = s->next;
        slot_close(s);
    }
    c->nslots = 0;
}
