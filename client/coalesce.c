/*
 * coalesce.c — entries that travel together (coalesce.h).
 *
 * Owns: making one message of n packed entries, splitting its reply, and
 * the batch leader's turn over the handle's queue.
 * Invariant: a single entry is sent as a plain request, never as a batch
 * of one (docs/protocol.md, "Batches"); the batch leader counts its batch
 * as one message in flight from batch_take to batch_release.
 * Never: holds the queue's lock while it sends (batch.h takes and
 * releases it).
 */
#include "client/coalesce.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_impl.h"
#include "client/envelope.h"
#include "client/exchange.h"
#include "base/clock.h"

/* ents[0, n) as one message *mp: the entry itself when n is 1, else a
 * batch envelope with what is left of deadline. */
static int
coalesce_message(once_client *c, uint8_t *const *ents, const size_t *lens,
                 size_t n, uint64_t deadline, nng_msg **mp)
{
    int rv;

    if (n > 1) {
        return envelope_pack_batch(c, ents, lens, n,
                                   retry_remaining_ms(deadline), mp);
    }
    /* Alone: a plain request, as if nothing had been in flight. */
    if ((rv = nng_msg_alloc(mp, lens[0])) == 0) {
        memcpy(nng_msg_body(*mp), ents[0], lens[0]);
    }
    return rv;
}

/*
 * The answers in rep->msg for n entries: the reply itself for one, a batch
 * reply's entries, or, for a batch refused whole (nothing of it ran), that
 * refusal for every entry. A reply that cannot be split is EPROTO and the
 * entries may have run.
 */
static int
coalesce_split(size_t n, call_state *cst, coalesce_reply *rep)
{
    const uint8_t *body = nng_msg_body(rep->msg);
    size_t len = nng_msg_len(rep->msg);
    Once__V1__Response *r = NULL;
    Once__V1__BatchResponse *br;

    if (n > 1 && (rep->outer = r =
                      once__v1__response__unpack(NULL, len, body)) == NULL) {
        cst->maybe_executed = true;
        snprintf(cst->last_err, sizeof(cst->last_err),
                 "undecodable batch reply envelope");
        return EPROTO;
    }
    if (n == 1 || (r->status != NULL && r->status->code != 0)) {
        for (size_t i = 0; i < n; i++) {
            rep->resps[i] = body;
            rep->lens[i] = len;
        }
        return 0;
    }
    rep->batch = br =
        once__v1__batch_response__unpack(NULL, r->payload.len, r->payload.data);
    if (br == NULL || br->n_responses != n) {
        cst->maybe_executed = true;
        snprintf(cst->last_err, sizeof(cst->last_err),
                 "batch reply with %zu answers for %zu entries",
                 br != NULL ? br->n_responses : 0, n);
        return EPROTO;
    }
    for (size_t i = 0; i < n; i++) {
        rep->resps[i] = br->responses[i].data;
        rep->lens[i] = br->responses[i].len;
    }
    return 0;
}

int
coalesce_send(once_client *c, bool tracked, call_slot *s, uint8_t *const *ents,
              const size_t *lens, size_t n, uint64_t deadline,
              uint64_t attempt_end, call_state *cst, coalesce_reply *rep)
{
    nng_msg *m;
    int rv;

    rep->msg = NULL;
    rep->outer = NULL;
    rep->batch = NULL;
    if ((rv = coalesce_message(c, ents, lens, n, deadline, &m)) != 0) {
        snprintf(cst->last_err, sizeof(cst->last_err), "pack: %s",
                 nng_strerror(rv));
        return rv;
    }
    if ((rv = exchange_run(c, tracked, s, m, deadline, attempt_end, cst,
                           &rep->msg)) != 0) {
        return rv;
    }
    return coalesce_split(n, cst, rep);
}

void
coalesce_reply_fini(coalesce_reply *rep)
{
    if (rep->batch != NULL) {
        once__v1__batch_response__free_unpacked(rep->batch, NULL);
    }
    if (rep->outer != NULL) {
        once__v1__response__free_unpacked(rep->outer, NULL);
    }
    if (rep->msg != NULL) {
        nng_msg_free(rep->msg);
    }
}

int
coalesce_lead(once_client *c, bool tracked, call_slot *s, batch_entry *e,
              uint64_t deadline, uint64_t attempt_end, call_state *cst)
{
    batch_entry *held[BATCH_ENTRIES_MAX];
    uint8_t *copies[BATCH_ENTRIES_MAX];
    size_t lens[BATCH_ENTRIES_MAX];
    coalesce_reply rep;
    uint32_t before = cst->sent;
    size_t n;
    int rv;

    /* Room for it within half an attempt, else it goes anyway: a call is
     * sent within its attempt even when nothing answers. lens from
     * batch_take: a follower may leave held[] at any moment. */
    n = batch_take(
        &c->batch, e,
        retry_window(clock_now_ms(), c->attempt_timeout_ms / 2, attempt_end),
        envelope_batch_room(c), held, copies, lens);
    rv = coalesce_send(c, tracked, s, copies, lens, n, deadline, attempt_end,
                       cst, &rep);
    for (size_t i = 0; i < n; i++) {
        free(copies[i]);
    }
    batch_finish(&c->batch, held, n, rep.resps, rep.lens, rv,
                 cst->sent > before);
    batch_release(&c->batch);
    coalesce_reply_fini(&rep);
    pthread_cond_destroy(&e->cv);
    return e->state == BATCH_DONE ? 0 : (rv != 0 ? rv : e->err);
}
