/*
 * coalesce.h — several calls in one message: n packed entries sent as
 * one (the entry itself when n is 1, else a batch envelope) and the reply
 * split into one Response per entry; and the batch leader's turn, which
 * takes the handle's queue (batch.h) and hands each waiter its answer.
 *
 * Owns: the one path by which entries leave together — the batch leader
 * (coalesce_lead) and the async group's first attempt (call_group.c) both
 * send through coalesce_send — and the reading of a batch reply.
 * Invariant: answers are handed out in entry order, one per entry; a
 * batch refused whole gives every entry that refusal (nothing of it ran);
 * a reply that cannot be split is EPROTO and every entry may have run.
 * Never: retries or backs off (each entry's call does, under its own rpc
 * id); never looks at an entry's rpc id.
 */
#ifndef CLIENT_COALESCE_H
#define CLIENT_COALESCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "client/batch.h"
#include "client/call_impl.h"
#include "client/slot.h"

/* The answers of one message that carried n entries. */
typedef struct coalesce_reply {
    nng_msg *msg;                            /* the reply; NULL: none came */
    Once__V1__Response *outer;               /* a batch's reply envelope */
    Once__V1__BatchResponse *batch;          /* its entries */
    const uint8_t *resps[BATCH_ENTRIES_MAX]; /* entry i's packed Response */
    size_t lens[BATCH_ENTRIES_MAX];
} coalesce_reply;

/*
 * Sends the packed Requests ents[0, n) as one message on s (tracked:
 * through the lease gate), as exchange_run, and splits the reply. Returns
 * 0 with rep->resps[0, n) (pointing into rep), or an nng error / EPROTO
 * with cst saying why. rep is released with coalesce_reply_fini either
 * way; rep->msg says whether a reply came.
 */
int coalesce_send(once_client *c, bool tracked, call_slot *s,
                  uint8_t *const *ents, const size_t *lens, size_t n,
                  uint64_t deadline, uint64_t attempt_end, call_state *cst,
                  coalesce_reply *rep);

/* Frees what coalesce_send kept in rep. */
void coalesce_reply_fini(coalesce_reply *rep);

/*
 * The leader's turn: takes the queue (its own entry e first, within half
 * an attempt), sends it on s through coalesce_send (alone, a plain
 * request, when nobody else waits) and hands every entry its Response.
 * Returns 0 when e got an answer (e->resp), else an nng error (cst says
 * why; e->sent says whether it left).
 */
int coalesce_lead(once_client *c, bool tracked, call_slot *s, batch_entry *e,
                  uint64_t deadline, uint64_t attempt_end, call_state *cst);

#endif /* CLIENT_COALESCE_H */
