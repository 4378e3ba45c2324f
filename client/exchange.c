/*
 * exchange.c — one message and its reply on a call slot (exchange.h).
 *
 * Owns: the send in slices (a send still unsent after a slice starts the
 * dial over, conn_redial, and asks TLS why, conn_tls_verdict), the
 * receive, the backoff sleep, and the words last_err gives each failure.
 * Invariant: the slot's aio only sends and receives, its sleep aio only
 * sleeps (slot.h); a message left on the aio after a send was not sent.
 * Never: holds the handle's lock across I/O; never reads a reply's
 * contents beyond unpacking it.
 */
#include "client/exchange.h"

#include <errno.h>
#include <stdio.h>

#include "client/client_impl.h"
#include "client/lease_gate.h"
#include "base/clock.h"

/* How long a send waits for a connection before the dial is started over
 * (conn_redial, itself at most once a second per handle). */
#define EXCHANGE_SEND_SLICE_MS 1000u
/* With several URLs, how often a send without a connection looks whether
 * its dial was refused (conn_poll_move: nothing listens there, or a target
 * found down a moment ago still does not connect). */
#define EXCHANGE_REFUSED_POLL_MS 100u

static const char exchange_lost[] = "the lease was lost";

/* Starts op on aio (one of s's); a tracked call goes through the lease
 * gate, so nothing starts once the lease is lost. Returns false when not
 * started. */
static bool
exchange_start(once_client *c, bool tracked, gate_op op, call_slot *s,
               nng_aio *aio, nng_duration ms)
{
    if (tracked) {
        return gate_start(&c->gate, op, s->ctx, aio, ms);
    }
    gate_op_start(op, s->ctx, aio, ms);
    return true;
}

/* Milliseconds until `until` (a clock_now_ms value), at least 1 so nng
 * never treats it as "no wait" (NNG_DURATION_ZERO is still a timeout). */
static nng_duration
exchange_wait(uint64_t until)
{
    uint64_t left = retry_remaining_ms(until);

    if (left == 0) {
        return NNG_DURATION_ZERO;
    }
    return left > INT32_MAX ? INT32_MAX : (nng_duration)left;
}

/* The end of the next wait for a connection from now: the slice's end,
 * or with several URLs the next look at a refused dial before it. */
static uint64_t
exchange_poll_end(once_client *c, uint64_t now, uint64_t slice_end)
{
    if (!conn_several(&c->conn)) {
        return slice_end;
    }
    return retry_window(now, EXCHANGE_REFUSED_POLL_MS, slice_end);
}

/* Frees the message still on aio: it was not sent, so it is still ours. */
static void
exchange_drop(nng_aio *aio)
{
    nng_msg_free(nng_aio_get_msg(aio));
    nng_aio_set_msg(aio, NULL);
}

/* No connection for a slice (or a whole attempt). tls+tcp://: a handshake
 * that fails (a certificate not trusted, another name) looks like no
 * connection at all; ask why, for a slice at least, never past the
 * deadline. NNG_ECRYPTO with cst->tls set, or 0 after starting the dial
 * over. */
static int
exchange_no_route(once_client *c, uint64_t deadline, uint64_t attempt_end,
                  call_state *cst)
{
    uint64_t probe_ms = retry_remaining_ms(attempt_end);

    if (probe_ms < EXCHANGE_SEND_SLICE_MS) {
        probe_ms = EXCHANGE_SEND_SLICE_MS;
    }
    if (probe_ms > retry_remaining_ms(deadline)) {
        probe_ms = retry_remaining_ms(deadline);
    }
    if (conn_tls_verdict(&c->conn, probe_ms, &cst->tls) != ONCE_OK) {
        snprintf(cst->last_err, sizeof(cst->last_err), "TLS %s",
                 cst->tls.reason);
        return NNG_ECRYPTO;
    }
    conn_redial(&c->conn); /* no connection for a slice, or an attempt */
    return 0;
}

/*
 * The send: waiting for a connection in slices; a send still unsent after
 * one, or at attempt_end (an attempt shorter than a slice), starts the
 * dial over — and, before attempt_end, waits on. A send that timed out
 * never reached a pipe, so sending the same message again is the same
 * attempt. 0 (m is the socket's) or an nng error (m freed).
 */
static int
exchange_send(once_client *c, bool tracked, call_slot *s, nng_msg *m,
              uint64_t deadline, uint64_t attempt_end, call_state *cst)
{
    uint64_t slice_end = 0;
    int rv;

    nng_aio_set_msg(s->aio, m);
    for (;;) {
        if (slice_end == 0) {
            slice_end = retry_window(clock_now_ms(), EXCHANGE_SEND_SLICE_MS,
                                     attempt_end);
        }
        nng_aio_set_timeout(s->aio, exchange_wait(exchange_poll_end(
                                        c, clock_now_ms(), slice_end)));
        if (!exchange_start(c, tracked, GATE_OP_SEND, s, s->aio, 0)) {
            exchange_drop(s->aio);
            snprintf(cst->last_err, sizeof(cst->last_err), "%s", exchange_lost);
            return NNG_ECANCELED;
        }
        nng_aio_wait(s->aio);
        /* A send that worked took the message off the aio: one still
         * there was not sent, whatever the result says. (nng 1.5 says 0
         * for a timed-out send on an aio that has slept; this one never
         * sleeps, slot.h, so here the check is only a guard.) */
        if ((rv = nng_aio_result(s->aio)) == 0 &&
            nng_aio_get_msg(s->aio) != NULL) {
            rv = NNG_ETIMEDOUT;
        }
        if (rv != NNG_ETIMEDOUT || nng_aio_get_msg(s->aio) == NULL) {
            break;
        }
        if (retry_remaining_ms(slice_end) > 0) {
            /* A poll within the slice: a refused dial moves on now. */
            if (conn_poll_move(&c->conn)) {
                slice_end = 0;
            }
            continue;
        }
        slice_end = 0;
        if (exchange_no_route(c, deadline, attempt_end, cst) != 0) {
            exchange_drop(s->aio);
            return NNG_ECRYPTO;
        }
        if (retry_remaining_ms(attempt_end) == 0) {
            break;
        }
    }
    if (rv != 0) {
        exchange_drop(s->aio);
        snprintf(cst->last_err, sizeof(cst->last_err), "send: %s",
                 nng_strerror(rv));
    }
    return rv;
}

/* The receive: a full attempt timeout from now (the send may have waited
 * for a connection), within the deadline. 0 with *replyp, or an nng
 * error: sent and never answered, so the call may have run. */
static int
exchange_recv(once_client *c, bool tracked, call_slot *s, uint64_t deadline,
              call_state *cst, nng_msg **replyp)
{
    uint64_t end =
        retry_window(clock_now_ms(), c->attempt_timeout_ms, deadline);
    int rv;

    nng_aio_set_timeout(s->aio, exchange_wait(end));
    if (!exchange_start(c, tracked, GATE_OP_RECV, s, s->aio, 0)) {
        cst->maybe_executed = true;
        snprintf(cst->last_err, sizeof(cst->last_err), "%s", exchange_lost);
        return NNG_ECANCELED;
    }
    nng_aio_wait(s->aio);
    /* No message, no reply, whatever the result says (only a guard, as
     * for the send: the nng 1.5 quirk that says 0 for a timed-out receive
     * needs a sleep on this aio). */
    if ((rv = nng_aio_result(s->aio)) == 0 && nng_aio_get_msg(s->aio) == NULL) {
        rv = NNG_ETIMEDOUT;
    }
    if (rv != 0) {
        cst->maybe_executed = true;
        if (rv == NNG_ECANCELED && tracked && gate_is_lost(&c->gate)) {
            snprintf(cst->last_err, sizeof(cst->last_err),
                     "%s while waiting for the reply", exchange_lost);
        } else if (rv == NNG_ETIMEDOUT) {
            snprintf(cst->last_err, sizeof(cst->last_err),
                     "no reply within the attempt timeout");
        } else {
            snprintf(cst->last_err, sizeof(cst->last_err), "receive: %s",
                     nng_strerror(rv));
        }
        return rv;
    }
    *replyp = nng_aio_get_msg(s->aio);
    nng_aio_set_msg(s->aio, NULL);
    return 0;
}

int
exchange_run(once_client *c, bool tracked, call_slot *s, nng_msg *m,
             uint64_t deadline, uint64_t attempt_end, call_state *cst,
             nng_msg **replyp)
{
    int rv;

    if ((rv = exchange_send(c, tracked, s, m, deadline, attempt_end, cst)) !=
        0) {
        return rv;
    }
    cst->sent++;
    return exchange_recv(c, tracked, s, deadline, cst, replyp);
}

int
exchange_unpack(const uint8_t *buf, size_t len, call_state *cst,
                Once__V1__Response **rp)
{
    if ((*rp = once__v1__response__unpack(NULL, len, buf)) == NULL) {
        cst->maybe_executed = true; /* sent, no readable answer */
        snprintf(cst->last_err, sizeof(cst->last_err),
                 "undecodable reply envelope");
        return EPROTO;
    }
    return 0;
}

void
exchange_backoff(once_client *c, bool tracked, call_slot *s, uint64_t ms)
{
    if (exchange_start(c, tracked, GATE_OP_SLEEP, s, s->sleep,
                       (nng_duration)(ms > INT32_MAX ? INT32_MAX : ms))) {
        nng_aio_wait(s->sleep);
    }
}
