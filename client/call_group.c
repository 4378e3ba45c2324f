/*
 * call_group.c — a group's first attempt and the rest of its calls
 * (call_group.h).
 *
 * Owns: struct call_rest (a call between its group's first attempt and
 * its resumption), preparing and packing each call of a group, cutting
 * the group into messages that fit onced's --recv-max, and handing each
 * call its first attempt's outcome.
 * Invariant: a group's message goes through the one coalescing path
 * (coalesce_send) on a slot of its own, tracked by the lease gate when
 * any of its calls is; each call's first attempt is attempt number 1 of
 * its own rpc id.
 * Never: blocks on a retry or a backoff (call_group_resume does, for one
 * call).
 */
#include "client/call_group.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/call_impl.h"
#include "client/client_impl.h"
#include "client/coalesce.h"
#include "client/envelope.h"
#include "client/exchange.h"
#include "client/lease_gate.h"
#include "client/status.h"
#include "base/clock.h"

/* What call_group leaves of a call whose first attempt did not end it. */
struct call_rest {
    call_spec cs;
    bool assigned;
    uint64_t deadline;
    call_pre pre;
};

/* Each call's first attempt as attempt_make would have left it: rv and
 * cst of the message they shared, and on 0 its own Response. */
static void
call_group_hand(struct call_rest **rs, size_t n, int rv, const call_state *cst,
                uint64_t start_ms, const coalesce_reply *rep)
{
    for (size_t i = 0; i < n; i++) {
        call_pre *p = &rs[i]->pre;

        p->cst = *cst;
        p->rv = rv;
        p->start_ms = start_ms;
        p->r = NULL;
        if (rv == 0) {
            p->rv =
                exchange_unpack(rep->resps[i], rep->lens[i], &p->cst, &p->r);
        }
    }
}

/* The calls rs[0, n) (packed in m[]) as one message on a slot of the
 * group's own: a batch envelope, or a plain request when n is 1. */
static void
call_group_send(once_client *c, struct call_rest **rs, nng_msg **m, size_t n,
                uint64_t deadline)
{
    uint8_t *bodies[BATCH_ENTRIES_MAX];
    size_t lens[BATCH_ENTRIES_MAX];
    coalesce_reply rep;
    call_state cst;
    call_slot *slot = NULL;
    gate_call lc;
    bool tracked = false, tracking = false, sent = false;
    uint64_t attempt_end =
        retry_window(clock_now_ms(), c->attempt_timeout_ms, deadline);
    uint64_t start_ms = clock_now_ms();
    int rv;

    memset(&cst, 0, sizeof(cst));
    for (size_t i = 0; i < n; i++) {
        tracked = tracked || rs[i]->cs.tracked;
        bodies[i] = nng_msg_body(m[i]);
        lens[i] = nng_msg_len(m[i]);
    }
    if ((rv = slot_take(&c->conn.slots, c->conn.sock, &slot)) != 0) {
        snprintf(cst.last_err, sizeof(cst.last_err), "nng context setup: %s",
                 nng_strerror(rv));
    } else if (tracked && !(tracking = gate_track(&c->gate, &lc, slot->aio,
                                                  slot->sleep))) {
        rv = NNG_ECANCELED;
        snprintf(cst.last_err, sizeof(cst.last_err), "the lease was lost");
    } else {
        start_ms = clock_now_ms();
        rv = coalesce_send(c, tracked, slot, bodies, lens, n, deadline,
                           attempt_end, &cst, &rep);
        sent = true;
    }
    if (sent && rep.msg != NULL) {
        /* steer.h: the target answers; its entries say whether it leads */
        conn_heard(&c->conn, conn_target(&c->conn), false);
    }
    call_group_hand(rs, n, rv, &cst, start_ms, sent ? &rep : NULL);
    if (sent) {
        coalesce_reply_fini(&rep);
    }
    if (tracking) {
        gate_untrack(&c->gate, &lc);
    }
    if (slot != NULL) {
        slot_give(&c->conn.slots, slot, rv == 0);
    }
}

/* Prepares e's call and packs its first attempt into *m. True: *xp is to
 * be sent; false: e is done (refused, nothing sent) or left to resume
 * (its first attempt could not be packed). */
static bool
call_group_prepare(once_client *c, call_group_entry *e, uint64_t deadline,
                   struct call_rest **xp, nng_msg **m)
{
    struct call_rest *x;
    int rv;

    e->done = true;
    e->rest = NULL;
    if ((x = calloc(1, sizeof(*x))) == NULL) {
        status_clear(e->st);
        e->rv =
            status_set(e->st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                       "out of memory; nothing was sent");
        return false;
    }
    rv = call_prepare(c, e->method, e->kind, e->id, e->req, e->req_len, e->resp,
                      e->resp_len, e->st, &x->cs, &x->assigned);
    if (rv != ONCE_OK) {
        e->rv = call_conclude(c, &x->cs, x->assigned, rv, e->st);
        free(x);
        return false;
    }
    x->deadline = deadline;
    if ((rv = envelope_pack(c, &x->cs, 1, retry_remaining_ms(deadline), m)) !=
        0) {
        /* not sent: that failed first attempt is where the rest starts */
        x->pre.rv = rv;
        snprintf(x->pre.cst.last_err, sizeof(x->pre.cst.last_err), "pack: %s",
                 nng_strerror(rv));
        e->rest = x;
        e->done = false;
        return false;
    }
    *xp = x;
    return true;
}

/* After its group's message: e's call finished at once when its first
 * attempt ended it (the common case), else left to resume. */
static void
call_group_settle(once_client *c, call_group_entry *e, struct call_rest *x)
{
    if (call_pre_final(&x->cs, &x->pre)) {
        e->rv = call_group_resume(c, e, x);
    } else {
        e->rest = x;
        e->done = false;
    }
}

void
call_group(once_client *c, call_group_entry *g, size_t n)
{
    struct call_rest *rs[BATCH_ENTRIES_MAX];
    call_group_entry *ge[BATCH_ENTRIES_MAX];
    nng_msg *m[BATCH_ENTRIES_MAX];
    uint64_t deadline = clock_now_ms() + c->deadline_ms;
    size_t max_bytes = envelope_batch_room(c);
    size_t k = 0;

    if (n > BATCH_ENTRIES_MAX) {
        n = BATCH_ENTRIES_MAX; /* the caller's to keep to; never more */
    }
    for (size_t i = 0; i < n; i++) {
        if (call_group_prepare(c, &g[i], deadline, &rs[k], &m[k])) {
            ge[k++] = &g[i];
        }
    }
    /* In messages of at most max_bytes of entries, in order. */
    for (size_t from = 0; from < k;) {
        size_t to = from + 1, bytes = nng_msg_len(m[from]);

        while (to < k && bytes + nng_msg_len(m[to]) <= max_bytes) {
            bytes += nng_msg_len(m[to]);
            to++;
        }
        call_group_send(c, rs + from, m + from, to - from, deadline);
        for (size_t i = from; i < to; i++) {
            nng_msg_free(m[i]);
            call_group_settle(c, ge[i], rs[i]);
        }
        from = to;
    }
}

int
call_group_resume(once_client *c, call_group_entry *e, struct call_rest *x)
{
    int rv;

    if (x == NULL) {
        x = e->rest;
    }
    e->rest = NULL;
    rv = call_run(c, &x->cs, x->deadline, &x->pre, e->resp, e->resp_len, e->st);
    rv = call_conclude(c, &x->cs, x->assigned, rv, e->st);
    e->rv = rv;
    e->done = true;
    free(x);
    return rv;
}
