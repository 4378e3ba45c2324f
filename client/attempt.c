/*
 * attempt.c — one attempt of one call (attempt.h).
 *
 * Owns: joining the handle's batch queue with the attempt's envelope and
 * reading back what became of it, whichever way it left.
 * Invariant: every way out of the queue is matched: a plain send is
 * released (batch_release) after its exchange, a leader's turn releases
 * its batch (coalesce_lead), a follower is unlinked by batch_wait.
 * Never: frees the envelope while the queue may still read it (it is
 * freed after the attempt's entry left the queue).
 */
#include "client/attempt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "client/batch.h"
#include "client/client_impl.h"
#include "client/coalesce.h"
#include "client/envelope.h"
#include "client/exchange.h"
#include "base/clock.h"

/* Alone, as if nothing had been in flight: m on the call's own slot. */
static int
attempt_plain(once_client *c, const call_spec *cs, call_slot *s, nng_msg *m,
              uint64_t deadline, uint64_t attempt_end, call_state *cst,
              Once__V1__Response **rp)
{
    nng_msg *reply = NULL;
    int rv;

    rv = exchange_run(c, cs->tracked, s, m, deadline, attempt_end, cst, &reply);
    batch_release(&c->batch);
    if (rv != 0) {
        return rv;
    }
    rv = exchange_unpack(nng_msg_body(reply), nng_msg_len(reply), cst, rp);
    nng_msg_free(reply);
    return rv;
}

/* What became of a queued entry: its Response (BATCH_DONE), or why not.
 * led: this call led the batch (its own exchange filled cst), and rv is
 * what the lead returned. */
static int
attempt_queued(batch_entry *e, bool led, int rv, call_state *cst,
               Once__V1__Response **rp)
{
    if (!led && e->sent) {
        cst->sent++; /* a leader sent it in its batch */
    }
    if (e->state == BATCH_DONE) {
        rv = exchange_unpack(e->resp, e->resp_len, cst, rp);
        free(e->resp);
        return rv;
    }
    if (e->sent) {
        cst->maybe_executed = true; /* sent, never answered */
    }
    if (!led) {
        snprintf(cst->last_err, sizeof(cst->last_err), "%s",
                 e->sent ? "no reply to its batch within the attempt timeout"
                         : "not sent before the attempt ended");
    }
    return e->err == ETIMEDOUT ? NNG_ETIMEDOUT : (e->err != 0 ? e->err : rv);
}

int
attempt_make(once_client *c, const call_spec *cs, call_slot *s,
             uint32_t attempt, uint64_t deadline, uint64_t attempt_end,
             call_state *cst, Once__V1__Response **rp)
{
    nng_msg *m = NULL;
    batch_entry e;
    bool led = false;
    int rv = 0;

    if ((rv = envelope_pack(c, cs, attempt, retry_remaining_ms(deadline),
                            &m)) != 0) {
        snprintf(cst->last_err, sizeof(cst->last_err), "pack: %s",
                 nng_strerror(rv));
        return rv;
    }
    e.req = nng_msg_body(m);
    e.len = nng_msg_len(m);
    switch (batch_join(&c->batch, &e)) {
    case BATCH_PLAIN:
        return attempt_plain(c, cs, s, m, deadline, attempt_end, cst, rp);
    case BATCH_FOLLOW:
        /* A reply gets a full attempt timeout, within the deadline. */
        if (batch_wait(&c->batch, &e,
                       retry_window(clock_now_ms(), c->attempt_timeout_ms,
                                    deadline)) != BATCH_LEADS) {
            break;
        }
        /* promoted: lead the next batch */
        /* FALLTHROUGH */
    case BATCH_LEAD:
        led = true;
        rv = coalesce_lead(c, cs->tracked, s, &e, deadline, attempt_end, cst);
        break;
    }
    nng_msg_free(m);
    return attempt_queued(&e, led, rv, cst, rp);
}
