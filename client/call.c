/*
 * call.c — the call engine: one rpc, its envelope, its attempts and
 * retries, its deadline (once_call, once_call_new, once_call_retry).
 *
 * Owns: the Request envelope of every attempt (method, rpc id,
 * first_incomplete, attempt number, time left, principal, payload, and the
 * authentication tag over those bytes when the handle has a key), the
 * call's nng context, its aio and its sleep aio (a slot taken for all its
 * attempts, slot.h), and the decision after each attempt: final reply, or
 * retry the *same* rpc id after a jittered backoff.
 * Invariant: a mutating call that nng accepted for sending at least once is
 * never reported as a plain failure — it ends with the server's final reply
 * or ONCE_UNKNOWN/OUTCOME_UNKNOWN with its rpc id; its seq stays incomplete
 * in the window until a final reply is delivered (or the caller releases
 * it). Retryable: timeouts, transport errors, undecodable envelopes,
 * replies with code UNAVAILABLE (a replicated cluster's followers answer
 * UNAVAILABLE/NOT_LEADER: not run, call_is_follower_refusal), and — on
 * mutating calls —
 * RESOURCE_EXHAUSTED/WINDOW_FULL (refused before execution; a later attempt
 * carries a newer acknowledgement). Every other reply code is final. A
 * refusal-before-execution reply (WINDOW_FULL, LEASE_EXPIRED,
 * DEADLINE_EXCEEDED) is only taken as "not executed" when no earlier
 * attempt of the call may have run (sent and unanswered, or UNAVAILABLE);
 * otherwise the call ends OUTCOME_UNKNOWN. A call that ends on WINDOW_FULL
 * that way completes its seq. Mutating calls under the handle's own client
 * id are tracked (lease_gate.h): when the lease is lost they end at once.
 * A new call and a retry of a known id are told apart here (call_kind):
 * once_call's older rule (seq 0: new) refuses an own id whose reply was
 * delivered, and a retry of such an id carries no acknowledgement, so the
 * server can still replay it.
 * Coalescing (batch.h): an attempt that finds messages of the handle in
 * flight queues its packed envelope; the queue's leader sends the queued
 * envelopes as one batch (once.v1.Batch) and hands each its Response. An
 * entry keeps its own attempt, timeout, retry and deadline here: a batch
 * that gets no reply fails each of its entries' attempts, and each call
 * retries its own id. Async calls (call_group) make their first attempt
 * together, one message for all of them from one thread; a call that
 * attempt did not end goes on in call_run from that outcome (call_pre),
 * exactly as after an attempt of its own.
 * Layer: the call engine. It uses the connection layer (conn.h, slot.h,
 * batch.h) and the lease gate (lease_gate.h) below it and nothing above
 * it. Which URL an attempt goes to is the connection layer's (steer.h):
 * the engine reports NOT_LEADER hints, replies and unanswered attempts to
 * it (conn_hint, conn_heard, conn_suspect) with the target's generation
 * read before the attempt.
 * Never: assigns a new seq to a retry; never waits past the call deadline;
 * never holds the handle's lock across network I/O; never sends a tracked
 * call after its lease was lost; never sleeps on the aio it sends and
 * receives on (nng 1.5 then reports a later timeout of that aio as
 * success, slot.h): the backoff has an aio of its own.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "proto/auth_tag.h"
#include "client/batch.h"
#include "client/client_impl.h"
#include "client/call.h"
#include "client/lease_gate.h"
#include "client/slot.h"
#include "client/status.h"
#include "proto/wire.h"

/* What one call is about; filled once, read by every attempt. */
typedef struct call_spec {
    const char *method;
    bool mutating;
    uint64_t client_id; /* 0 on non-mutating calls */
    uint64_t seq;       /* 0 on non-mutating calls */
    const void *req;
    size_t req_len;
    bool tracked; /* mutating under the handle's own lease (lease_gate.h) */
} call_spec;

/* The state of one call across attempts. */
typedef struct call_state {
    uint32_t sent;           /* attempts nng accepted for sending */
    char last_err[160];      /* why the last attempt did not finish */
    bool last_unavailable;   /* the last attempt got an UNAVAILABLE reply */
    once_status unavailable; /* that reply's status */
    bool last_window_full;   /* the last attempt got WINDOW_FULL */
    once_status window_full; /* that reply's status */
    bool maybe_executed;     /* an attempt was sent and not answered, or
                                answered UNAVAILABLE: it may have run */
    uint32_t not_leader;     /* NOT_LEADER refusals in a row (followers) */
    bool lost;               /* stopped because the lease was lost */
    once_status tls;         /* a TLS verdict (conn_tls_verdict) that
                                ended the call unsent; code 0: none */
} call_state;

/* Starts op on one of the call's aios (its sleep aio for GATE_OP_SLEEP); a
 * tracked call goes through lost_start, so nothing starts once the lease
 * is lost. Returns false when not started. */
static bool
call_start(once_client *c, const call_spec *cs, gate_op op, nng_ctx ctx,
           nng_aio *aio, nng_duration ms)
{
    if (cs->tracked) {
        return gate_start(&c->gate, op, ctx, aio, ms);
    }
    gate_op_start(op, ctx, aio, ms);
    return true;
}

/* The envelope of one attempt, its fields borrowed from cs and c. */
static void
call_envelope(once_client *c, const call_spec *cs, uint32_t attempt,
              uint64_t timeout_ms, Once__V1__Request *rp)
{
    Once__V1__Request r = ONCE__V1__REQUEST__INIT;

    r.method = (char *)cs->method;
    r.client_id = cs->client_id;
    r.seq = cs->seq;
    r.first_incomplete =
        cs->mutating ? gate_ack(&c->gate, cs->client_id, cs->seq) : 0;
    r.attempt = attempt;
    r.timeout_ms = timeout_ms;
    r.principal = c->principal;
    r.payload.data = (uint8_t *)cs->req;
    r.payload.len = cs->req != NULL ? cs->req_len : 0;
    *rp = r;
}

/* Packs the envelope of one attempt into a fresh nng message (*mp, owned
 * by the caller until a successful send). */
static int
call_pack(once_client *c, const call_spec *cs, uint32_t attempt,
          uint64_t timeout_ms, nng_msg **mp)
{
    Once__V1__Request r;
    nng_msg *m;
    size_t len;
    int rv;

    call_envelope(c, cs, attempt, timeout_ms, &r);
    /* Signed: packed without auth_tag, the tag over exactly those bytes
     * appended as field 8 (auth_tag.h). */
    len = once__v1__request__get_packed_size(&r);
    if ((rv = nng_msg_alloc(&m, len + (c->signs ? AUTH_TAG_TRAILER : 0))) !=
        0) {
        return rv;
    }
    once__v1__request__pack(&r, nng_msg_body(m));
    if (c->signs) {
        auth_tag_append(nng_msg_body(m), len, c->key);
    }
    *mp = m;
    return 0;
}

/* How long a send waits for a connection before the dial is started over
 * (conn_redial, itself at most once a second per handle). */
#define CALL_SEND_SLICE_MS 1000u

/* Milliseconds until `until` (a retry_now_ms value), at least 1 so nng
 * never treats it as "no wait" (NNG_DURATION_ZERO is still a timeout). */
static nng_duration
call_wait(uint64_t until)
{
    uint64_t left = retry_remaining_ms(until);

    if (left == 0) {
        return NNG_DURATION_ZERO;
    }
    return left > INT32_MAX ? INT32_MAX : (nng_duration)left;
}

/*
 * Sends m (ours until nng takes it) on ctx, waiting for a connection until
 * attempt_end, and waits up to the attempt timeout for the reply, never
 * past the deadline. Returns 0 with *replyp (the reply message, freed by
 * the caller), or an nng error with cst->last_err describing it (m freed).
 */
static int
call_exchange(once_client *c, const call_spec *cs, nng_ctx ctx, nng_aio *aio,
              nng_msg *m, uint64_t deadline, uint64_t attempt_end,
              call_state *cst, nng_msg **replyp)
{
    int rv;

    nng_aio_set_msg(aio, m);
    /* Waiting for a connection, in slices: a send still unsent after one,
     * or at attempt_end (an attempt shorter than a slice), starts the dial
     * over (conn_redial) — and, before attempt_end, waits on. A send that
     * timed out never reached a pipe, so sending the same message again is
     * the same attempt. */
    for (;;) {
        uint64_t slice = retry_now_ms() + CALL_SEND_SLICE_MS;

        nng_aio_set_timeout(
            aio, call_wait(slice < attempt_end ? slice : attempt_end));
        if (!call_start(c, cs, GATE_OP_SEND, ctx, aio, 0)) {
            nng_msg_free(nng_aio_get_msg(aio));
            nng_aio_set_msg(aio, NULL);
            snprintf(cst->last_err, sizeof(cst->last_err),
                     "the lease was lost");
            return NNG_ECANCELED;
        }
        nng_aio_wait(aio);
        /* A send that worked took the message off the aio: one still
         * there was not sent, whatever the result says. (nng 1.5 says 0
         * for a timed-out send on an aio that has slept; this one never
         * sleeps, slot.h, so here the check is only a guard.) */
        if ((rv = nng_aio_result(aio)) == 0 && nng_aio_get_msg(aio) != NULL) {
            rv = NNG_ETIMEDOUT;
        }
        if (rv != NNG_ETIMEDOUT || nng_aio_get_msg(aio) == NULL) {
            break;
        }
        /* tls+tcp://: a handshake that fails (a certificate not trusted,
         * another name) looks like no connection at all; ask why. */
        uint64_t probe_ms = retry_remaining_ms(attempt_end);

        if (probe_ms < CALL_SEND_SLICE_MS) {
            probe_ms = CALL_SEND_SLICE_MS; /* a slice at least, */
        }
        if (probe_ms > retry_remaining_ms(deadline)) {
            probe_ms = retry_remaining_ms(deadline); /* never past it */
        }
        if (conn_tls_verdict(&c->conn, probe_ms, &cst->tls) != ONCE_OK) {
            nng_msg_free(nng_aio_get_msg(aio));
            nng_aio_set_msg(aio, NULL);
            snprintf(cst->last_err, sizeof(cst->last_err), "TLS %s",
                     cst->tls.reason);
            return NNG_ECRYPTO;
        }
        conn_redial(
            &c->conn); /* no connection for a slice, or a whole attempt */
        if (retry_remaining_ms(attempt_end) == 0) {
            break;
        }
    }
    if (rv != 0) {
        /* The message is still ours after a failed send. */
        nng_msg_free(nng_aio_get_msg(aio));
        nng_aio_set_msg(aio, NULL);
        snprintf(cst->last_err, sizeof(cst->last_err), "send: %s",
                 nng_strerror(rv));
        return rv;
    }
    cst->sent++;

    /* The reply gets a full attempt timeout from the moment it was sent
     * (a send may have waited for a connection), within the deadline. */
    attempt_end = retry_now_ms() + c->attempt_timeout_ms;
    if (attempt_end > deadline) {
        attempt_end = deadline;
    }
    nng_aio_set_timeout(aio, call_wait(attempt_end));
    if (!call_start(c, cs, GATE_OP_RECV, ctx, aio, 0)) {
        cst->maybe_executed = true; /* sent, never answered */
        snprintf(cst->last_err, sizeof(cst->last_err), "the lease was lost");
        return NNG_ECANCELED;
    }
    nng_aio_wait(aio);
    /* No message, no reply, whatever the result says (only a guard, as
     * for the send: the nng 1.5 quirk that says 0 for a timed-out receive
     * needs a sleep on this aio). */
    if ((rv = nng_aio_result(aio)) == 0 && nng_aio_get_msg(aio) == NULL) {
        rv = NNG_ETIMEDOUT;
    }
    if (rv != 0) {
        cst->maybe_executed = true; /* sent, never answered */
        if (rv == NNG_ECANCELED && cs->tracked && gate_is_lost(&c->gate)) {
            snprintf(cst->last_err, sizeof(cst->last_err),
                     "the lease was lost while waiting for the reply");
        } else if (rv == NNG_ETIMEDOUT) {
            snprintf(cst->last_err, sizeof(cst->last_err),
                     "no reply within the attempt timeout");
        } else {
            snprintf(cst->last_err, sizeof(cst->last_err), "receive: %s",
                     nng_strerror(rv));
        }
        return rv;
    }
    *replyp = nng_aio_get_msg(aio);
    nng_aio_set_msg(aio, NULL);
    return 0;
}

/* Unpacks a reply envelope into *rp. 0, or EPROTO (cst says so). */
static int
call_unpack(const uint8_t *buf, size_t len, call_state *cst,
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

/* The most bytes of entries in one batch: what onced reads (its
 * --recv-max, once known) less room for the outer envelope. */
static size_t
call_batch_bytes(once_client *c)
{
    uint64_t max = atomic_load(&c->conn.max_request);

    if (max == 0) {
        return BATCH_BYTES_DEFAULT;
    }
    return max > 4096 ? (size_t)(max - 4096) : 1;
}

/* The batch envelope around copies[0, n): method WIRE_BATCH_METHOD, the
 * handle's principal (signed like any request when the handle signs), no
 * rpc id. *mp owned by the caller until sent. */
static int
call_batch_pack(once_client *c, uint8_t *const *copies, const size_t *lens,
                size_t n, uint64_t timeout_ms, nng_msg **mp)
{
    Once__V1__Request r = ONCE__V1__REQUEST__INIT;
    Once__V1__BatchRequest br = ONCE__V1__BATCH_REQUEST__INIT;
    ProtobufCBinaryData ents[BATCH_ENTRIES_MAX];
    size_t blen, len;
    uint8_t *payload;
    nng_msg *m;
    int rv;

    for (size_t i = 0; i < n; i++) {
        ents[i].data = copies[i];
        ents[i].len = lens[i];
    }
    br.n_entries = n;
    br.entries = ents;
    blen = once__v1__batch_request__get_packed_size(&br);
    if ((payload = malloc(blen > 0 ? blen : 1)) == NULL) {
        return NNG_ENOMEM;
    }
    once__v1__batch_request__pack(&br, payload);
    r.method = (char *)WIRE_BATCH_METHOD;
    r.attempt = 1;
    r.timeout_ms = timeout_ms;
    r.principal = c->principal;
    r.payload.data = payload;
    r.payload.len = blen;
    len = once__v1__request__get_packed_size(&r);
    if ((rv = nng_msg_alloc(&m, len + (c->signs ? AUTH_TAG_TRAILER : 0))) ==
        0) {
        once__v1__request__pack(&r, nng_msg_body(m));
        if (c->signs) {
            auth_tag_append(nng_msg_body(m), len, c->key);
        }
        *mp = m;
    }
    free(payload);
    return rv;
}

/*
 * The answers of a message that carried n calls: the reply itself for one
 * call, a batch reply's entries, or, for a batch refused whole (nothing of
 * it ran), that refusal for every entry. *rp and *brp (freed by the caller)
 * own what resps[] points into. A reply that cannot be split is EPROTO and
 * the calls may have run.
 */
static int
call_batch_split(nng_msg *reply, size_t n, call_state *cst,
                 Once__V1__Response **rp, Once__V1__BatchResponse **brp,
                 const uint8_t **resps, size_t *rlens)
{
    Once__V1__Response *r;
    Once__V1__BatchResponse *br;

    if (n == 1) {
        resps[0] = nng_msg_body(reply);
        rlens[0] = nng_msg_len(reply);
        return 0;
    }
    *rp = r = once__v1__response__unpack(NULL, nng_msg_len(reply),
                                         nng_msg_body(reply));
    if (r == NULL) {
        cst->maybe_executed = true;
        snprintf(cst->last_err, sizeof(cst->last_err),
                 "undecodable batch reply envelope");
        return EPROTO;
    }
    if (r->status != NULL && r->status->code != 0) {
        for (size_t i = 0; i < n; i++) {
            resps[i] = nng_msg_body(reply);
            rlens[i] = nng_msg_len(reply);
        }
        return 0;
    }
    *brp = br =
        once__v1__batch_response__unpack(NULL, r->payload.len, r->payload.data);
    if (br == NULL || br->n_responses != n) {
        cst->maybe_executed = true;
        snprintf(cst->last_err, sizeof(cst->last_err),
                 "batch reply with %zu answers for %zu entries",
                 br != NULL ? br->n_responses : 0, n);
        return EPROTO;
    }
    for (size_t i = 0; i < n; i++) {
        resps[i] = br->responses[i].data;
        rlens[i] = br->responses[i].len;
    }
    return 0;
}

/*
 * The leader's part: takes the queue (its own entry first), sends it as
 * one batch (or alone, a plain request, when nobody else waits) on its own
 * ctx, and hands every entry its Response. Returns 0 when e got an answer
 * (e->resp), else an nng error (cst says why; e->sent says whether it
 * left).
 */
static int
call_batch_lead(once_client *c, const call_spec *cs, nng_ctx ctx, nng_aio *aio,
                batch_entry *e, uint64_t deadline, uint64_t attempt_end,
                call_state *cst)
{
    batch_entry *held[BATCH_ENTRIES_MAX];
    uint8_t *copies[BATCH_ENTRIES_MAX];
    size_t lens[BATCH_ENTRIES_MAX];
    const uint8_t *resps[BATCH_ENTRIES_MAX];
    size_t rlens[BATCH_ENTRIES_MAX];
    Once__V1__Response *r = NULL;
    Once__V1__BatchResponse *br = NULL;
    nng_msg *m = NULL, *reply = NULL;
    bool sent = false;
    uint64_t room_until;
    size_t n;
    int rv;

    /* Room for it within half an attempt, else it goes anyway: a call is
     * sent within its attempt even when nothing answers. */
    room_until = retry_now_ms() + c->attempt_timeout_ms / 2;
    if (room_until > attempt_end) {
        room_until = attempt_end;
    }
    /* lens from batch_take: a follower may leave held[] at any moment. */
    n = batch_take(&c->batch, e, room_until, call_batch_bytes(c), held, copies,
                   lens);
    if (n == 1) {
        /* Alone: a plain request, as if nothing had been in flight. */
        rv = nng_msg_alloc(&m, lens[0]);
        if (rv == 0) {
            memcpy(nng_msg_body(m), copies[0], lens[0]);
        }
    } else {
        rv = call_batch_pack(c, copies, lens, n, retry_remaining_ms(deadline),
                             &m);
    }
    for (size_t i = 0; i < n; i++) {
        free(copies[i]);
    }
    if (rv == 0) {
        uint32_t before = cst->sent;
        rv = call_exchange(c, cs, ctx, aio, m, deadline, attempt_end, cst,
                           &reply);
        sent = cst->sent > before;
    } else {
        snprintf(cst->last_err, sizeof(cst->last_err), "pack: %s",
                 nng_strerror(rv));
    }
    if (rv == 0) {
        rv = call_batch_split(reply, n, cst, &r, &br, resps, rlens);
    }
    batch_finish(&c->batch, held, n, resps, rlens, rv, sent);
    batch_release(&c->batch);
    if (br != NULL) {
        once__v1__batch_response__free_unpacked(br, NULL);
    }
    if (r != NULL) {
        once__v1__response__free_unpacked(r, NULL);
    }
    if (reply != NULL) {
        nng_msg_free(reply);
    }
    pthread_cond_destroy(&e->cv);
    return e->state == BATCH_DONE ? 0 : (rv != 0 ? rv : e->err);
}

/*
 * One attempt: pack the envelope, then send it alone when few messages of
 * the handle are in flight, or coalesce it with the calls queued behind
 * them (batch.h): as the batch's leader, or waiting for one. Waits up to
 * the attempt timeout for the reply, never past the deadline.
 * Returns 0 with *rp set (the unpacked Response, freed by the caller with
 * once__v1__response__free_unpacked), or an nng error / EPROTO with
 * cst->last_err describing it.
 */
static int
call_attempt(once_client *c, const call_spec *cs, nng_ctx ctx, nng_aio *aio,
             uint32_t attempt, uint64_t deadline, uint64_t attempt_end,
             call_state *cst, Once__V1__Response **rp)
{
    nng_msg *m = NULL, *reply = NULL;
    batch_entry e;
    uint64_t reply_end;
    bool led = false;
    int rv = 0;

    if ((rv = call_pack(c, cs, attempt, retry_remaining_ms(deadline), &m)) !=
        0) {
        snprintf(cst->last_err, sizeof(cst->last_err), "pack: %s",
                 nng_strerror(rv));
        return rv;
    }
    if (cs->tracked && gate_is_lost(&c->gate)) {
        nng_msg_free(m);
        snprintf(cst->last_err, sizeof(cst->last_err), "the lease was lost");
        return NNG_ECANCELED;
    }
    e.req = nng_msg_body(m);
    e.len = nng_msg_len(m);
    switch (batch_join(&c->batch, &e)) {
    case BATCH_PLAIN:
        rv = call_exchange(c, cs, ctx, aio, m, deadline, attempt_end, cst,
                           &reply);
        batch_release(&c->batch);
        if (rv != 0) {
            return rv;
        }
        rv = call_unpack(nng_msg_body(reply), nng_msg_len(reply), cst, rp);
        nng_msg_free(reply);
        return rv;
    case BATCH_FOLLOW:
        /* A reply gets a full attempt timeout, within the deadline. */
        reply_end = retry_now_ms() + c->attempt_timeout_ms;
        if (reply_end > deadline) {
            reply_end = deadline;
        }
        if (batch_wait(&c->batch, &e, reply_end) != BATCH_LEADS) {
            break;
        }
        /* promoted: lead the next batch */
        /* FALLTHROUGH */
    case BATCH_LEAD:
        led = true;
        rv = call_batch_lead(c, cs, ctx, aio, &e, deadline, attempt_end, cst);
        break;
    }
    nng_msg_free(m);
    if (!led && e.sent) {
        cst->sent++; /* a leader sent it in its batch */
    }
    if (e.state == BATCH_DONE) {
        rv = call_unpack(e.resp, e.resp_len, cst, rp);
        free(e.resp);
        return rv;
    }
    if (e.sent) {
        cst->maybe_executed = true; /* sent, never answered */
    }
    if (!led) {
        snprintf(cst->last_err, sizeof(cst->last_err), "%s",
                 e.sent ? "no reply to its batch within the attempt timeout"
                        : "not sent before the attempt ended");
    }
    return e.err == ETIMEDOUT ? NNG_ETIMEDOUT : (e.err != 0 ? e.err : rv);
}

/* The reply's code, mapped into enum once_code (unknown numbers become
 * ONCE_UNKNOWN); a missing status is proto3's default, OK. */
static int
call_code(const Once__V1__Response *r)
{
    int code = r->status != NULL ? (int)r->status->code : ONCE_OK;

    return (code < ONCE_OK || code > ONCE_UNAUTHENTICATED) ? ONCE_UNKNOWN
                                                           : code;
}

static void
call_status_from(once_status *st, const Once__V1__Response *r)
{
    const char *reason = r->status != NULL ? r->status->reason : NULL;
    const char *msg = r->status != NULL ? r->status->message : NULL;

    status_take(st, call_code(r), reason, msg);
    st->replayed = r->replayed;
}

/* Gives up: the code and status that say so, per once/client.h. Sets
 * *complete when the outcome is definitive for the seq (nothing ran and
 * nothing will: the caller has no reason to retry it). */
static int
call_give_up(once_client *c, const call_spec *cs, const call_state *cst,
             uint32_t tries, bool deadline_passed, once_status *st,
             bool *complete)
{
    *complete = false;
    if (cst->lost) {
        once_status why;
        gate_why(&c->gate, &why);
        if (cst->sent == 0) {
            *complete = true;
            return status_set(st, ONCE_FAILED_PRECONDITION,
                              ONCE_REASON_LEASE_EXPIRED,
                              "the lease of client %" PRIu64
                              " is lost (%s); nothing was sent",
                              cs->client_id, why.message);
        }
        return status_set(
            st, ONCE_UNKNOWN, ONCE_REASON_OUTCOME_UNKNOWN,
            "the lease of client %" PRIu64 " was lost (%s) after %" PRIu32
            " attempt(s); rpc id %" PRIu64 ":%" PRIu64
            " may or may not have taken effect and can no "
            "longer be retried",
            cs->client_id, why.message, cst->sent, cs->client_id, cs->seq);
    }
    if (cst->sent == 0 && cst->tls.code != ONCE_OK) {
        *st = cst->tls; /* nothing was sent: nothing can have run */
        return st->code;
    }
    if (cst->sent == 0) {
        return status_set(st, ONCE_UNAVAILABLE, ONCE_REASON_NOT_SENT,
                          "could not send to the server in %" PRIu32
                          " attempt(s) (%s); nothing was sent",
                          tries, cst->last_err);
    }
    if (cst->last_window_full && !cst->maybe_executed) {
        /* Every attempt was refused before execution: definitive. */
        *st = cst->window_full;
        *complete = true;
        return st->code;
    }
    if (cs->mutating) {
        return status_set(st, ONCE_UNKNOWN, ONCE_REASON_OUTCOME_UNKNOWN,
                          "no reply after %" PRIu32
                          " attempt(s) (%s); the call may or may not have "
                          "taken effect: retry rpc id %" PRIu64 ":%" PRIu64
                          " to find out",
                          tries, cst->last_err, cs->client_id, cs->seq);
    }
    if (cst->last_unavailable) {
        *st = cst->unavailable;
        return st->code;
    }
    if (deadline_passed) {
        return status_set(st, ONCE_DEADLINE_EXCEEDED, ONCE_REASON_NO_REPLY,
                          "no reply before the deadline after %" PRIu32
                          " attempt(s) (%s)",
                          tries, cst->last_err);
    }
    return status_set(st, ONCE_UNAVAILABLE, ONCE_REASON_NO_REPLY,
                      "no reply after %" PRIu32 " attempt(s) (%s)", tries,
                      cst->last_err);
}

/* A reply that refuses the call before execution: it says nothing about
 * an earlier attempt of the same id that went unanswered. */
static bool
call_refused_unexecuted(const once_status *st)
{
    return st->code == ONCE_DEADLINE_EXCEEDED ||
           (st->code == ONCE_RESOURCE_EXHAUSTED &&
            once_status_is(st, ONCE_REASON_WINDOW_FULL)) ||
           status_lease_gone(st);
}

static bool
call_is_window_full(const Once__V1__Response *r)
{
    return call_code(r) == ONCE_RESOURCE_EXHAUSTED && r->status != NULL &&
           r->status->reason != NULL &&
           strcmp(r->status->reason, ONCE_REASON_WINDOW_FULL) == 0;
}

/* A follower of a replicated cluster (onced --replicate) refused the call
 * without looking at it: it never executes anything, so the attempt did
 * not run (docs/replication.md). */
static bool
call_is_follower_refusal(const Once__V1__Response *r)
{
    const char *why = r->status != NULL ? r->status->reason : NULL;

    return why != NULL && (strcmp(why, ONCE_REASON_NOT_LEADER) == 0 ||
                           strcmp(why, ONCE_REASON_NO_LEADER) == 0 ||
                           strcmp(why, ONCE_REASON_ETCD_UNAVAILABLE) == 0);
}

/* A follower refused and named the leader: one exists. */
static bool
call_is_not_leader(const Once__V1__Response *r)
{
    return call_code(r) == ONCE_UNAVAILABLE && r->status != NULL &&
           r->status->reason != NULL &&
           strcmp(r->status->reason, ONCE_REASON_NOT_LEADER) == 0;
}

/* The leader a NOT_LEADER reply names: Status.leader, the field every
 * follower sets. Reading the URL off the end of the message is only a
 * fallback for an onced older than that field, kept so this libonce still
 * steers on one; never classify by message text otherwise. NULL: none. */
static const char *
call_leader_hint(const Once__V1__Response *r)
{
    static const char tail[] = "the leader is ";
    const char *m;

    if (r->status->leader != NULL && r->status->leader[0] != '\0') {
        return r->status->leader;
    }
    m = r->status->message != NULL ? strstr(r->status->message, tail) : NULL;
    return m != NULL ? m + sizeof(tail) - 1 : NULL;
}

/* Hands the reply's payload to the caller. Returns 0 or ENOMEM. */
static int
call_deliver(const Once__V1__Response *r, void **resp, size_t *resp_len)
{
    void *p;

    if (resp == NULL) {
        return 0;
    }
    if ((p = malloc(r->payload.len > 0 ? r->payload.len : 1)) == NULL) {
        return ENOMEM;
    }
    if (r->payload.len > 0) {
        memcpy(p, r->payload.data, r->payload.len);
    }
    *resp = p;
    if (resp_len != NULL) {
        *resp_len = r->payload.len;
    }
    return 0;
}

/* The outcome of a first attempt made elsewhere (call_group): what
 * call_attempt would have returned, and the call's state after it. */
typedef struct call_pre {
    int rv;                /* 0: r holds the reply */
    Once__V1__Response *r; /* handed over to call_run */
    call_state cst;
    uint64_t start_ms; /* retry_now_ms when the attempt began (steer.h) */
} call_pre;

/* Whether a first attempt's outcome ends the call (no retry follows). */
static bool
call_pre_final(const call_spec *cs, const call_pre *pre)
{
    return pre->rv == 0 && call_code(pre->r) != ONCE_UNAVAILABLE &&
           !(cs->mutating && call_is_window_full(pre->r));
}

/* The retry loop, until the absolute deadline (retry_now_ms clock). With
 * pre, its first attempt was made already (call_group): the loop goes on
 * from that outcome, exactly as after an attempt of its own; a final
 * outcome takes no nng context and never blocks. st is never NULL here. */
static int
call_run(once_client *c, const call_spec *cs, uint64_t deadline, call_pre *pre,
         void **resp, size_t *resp_len, once_status *st)
{
    call_state cst;
    gate_call lc;
    bool tracking = false;
    bool complete = false;
    call_slot *slot = NULL;
    bool clean = false; /* ended on a reply: slot reusable */
    nng_ctx ctx;
    nng_aio *aio = NULL;
    uint64_t rng = retry_seed();
    uint32_t tries = 0;
    Once__V1__Response *r = NULL;
    int rv;

    memset(&cst, 0, sizeof(cst));
    memcpy(cst.last_err, "deadline too short", sizeof("deadline too short"));
    if (pre != NULL) {
        cst = pre->cst;
        if (call_pre_final(cs, pre)) {
            tries = 1;
            r = pre->r;
            pre->r = NULL;
            goto final;
        }
    }
    if ((rv = slot_take(&c->conn.slots, c->conn.sock, &slot)) != 0) {
        if (pre != NULL) {
            /* the first attempt may have left: give up as after it */
            tries = 1;
            snprintf(cst.last_err, sizeof(cst.last_err),
                     "nng context setup: %s", nng_strerror(rv));
            goto give_up;
        }
        return status_set(st, ONCE_UNAVAILABLE, ONCE_REASON_NOT_SENT,
                          "nng context setup: %s; nothing was sent",
                          nng_strerror(rv));
    }
    ctx = slot->ctx;
    aio = slot->aio;
    if (cs->tracked) {
        if (!gate_track(&c->gate, &lc, aio, slot->sleep)) {
            cst.lost = true;
            goto give_up;
        }
        tracking = true;
    }

    for (uint32_t attempt = 1; attempt <= c->retry.max_attempts; attempt++) {
        uint64_t now = retry_now_ms();
        uint64_t attempt_end;
        uint64_t left;
        uint64_t target = conn_target(&c->conn); /* steer.h */
        uint32_t sent_before = cst.sent;
        bool moved = false;

        if (pre != NULL && attempt == 1) {
            /* made by call_group: its outcome, as call_attempt's */
            sent_before = 0;
            now = pre->start_ms;
            tries = 1;
            rv = pre->rv;
            r = pre->r;
            pre->r = NULL;
        } else {
            if (now >= deadline) {
                break;
            }
            attempt_end = now + c->attempt_timeout_ms;
            if (attempt_end > deadline) {
                attempt_end = deadline;
            }
            tries = attempt;
            cst.last_unavailable = false;
            cst.last_window_full = false;
            rv = call_attempt(c, cs, ctx, aio, attempt, deadline, attempt_end,
                              &cst, &r);
        }
        if (rv == 0) {
            conn_heard(&c->conn, target,
                       call_code(r) != ONCE_UNAVAILABLE ||
                           !call_is_follower_refusal(r));
            cst.not_leader = call_is_not_leader(r) ? cst.not_leader + 1 : 0;
            if (cst.not_leader > 0) {
                /* To the leader it names, when it is one of ours. */
                moved = conn_hint(&c->conn, target, call_leader_hint(r));
            } else if (call_code(r) == ONCE_UNAVAILABLE &&
                       call_is_follower_refusal(r)) {
                /* A follower that knows no leader: maybe another replica
                 * does. The next URL, after the backoff below. */
                conn_leaderless(&c->conn, target);
            }
            if (call_code(r) == ONCE_UNAVAILABLE) {
                /* IN_PROGRESS and friends: the server asks us to come
                 * back; the call may be running meanwhile. */
                cst.last_unavailable = true;
                cst.maybe_executed =
                    cst.maybe_executed ||
                    (cs->mutating && !call_is_follower_refusal(r));
                call_status_from(&cst.unavailable, r);
                cst.unavailable.attempts = cst.sent;
                snprintf(cst.last_err, sizeof(cst.last_err), "UNAVAILABLE %s",
                         cst.unavailable.reason);
            } else if (cs->mutating && call_is_window_full(r)) {
                /* Refused before execution; a later attempt carries a
                 * newer acknowledgement and may fit. */
                cst.last_window_full = true;
                call_status_from(&cst.window_full, r);
                cst.window_full.attempts = cst.sent;
                snprintf(cst.last_err, sizeof(cst.last_err),
                         "RESOURCE_EXHAUSTED WINDOW_FULL");
            } else {
                goto final;
            }
            once__v1__response__free_unpacked(r, NULL);
            r = NULL;
        } else if (rv == NNG_ETIMEDOUT && cst.sent > sent_before) {
            /* Sent, unanswered: with several URLs, maybe the next one
             * leads (steer.h: not while the target answers others). */
            conn_suspect(&c->conn, target, now);
        } else if (rv == NNG_ECLOSED) {
            break; /* the handle is closing: no attempt can succeed */
        } else if (cst.tls.code != ONCE_OK) {
            break; /* the certificate will not change by itself */
        }
        if (cs->tracked && gate_is_lost(&c->gate)) {
            cst.lost = true;
            break;
        }
        if (attempt == c->retry.max_attempts ||
            (left = retry_remaining_ms(deadline)) == 0) {
            break;
        }
        uint64_t b = retry_backoff_ms(&c->retry, attempt, &rng);
        if (b > left) {
            b = left;
        }
        /* A follower named a leader and the target moved (steer.h): the
         * next attempt goes there at once, once per URL in a row; then the
         * backoff again, so followers naming each other (an election)
         * cost backoffs up to the deadline, not a busy loop. */
        if (moved && cst.not_leader < c->conn.nurls) {
            b = 0;
        }
        /* On the slot's sleep aio, never on aio (slot.h); tracked with
         * the call, so a lost lease cuts the backoff short. */
        if (b > 0 &&
            call_start(c, cs, GATE_OP_SLEEP, ctx, slot->sleep,
                       (nng_duration)(b > INT32_MAX ? INT32_MAX : b))) {
            nng_aio_wait(slot->sleep);
        }
        if (cs->tracked && gate_is_lost(&c->gate)) {
            cst.lost = true;
            break;
        }
    }
give_up:
    rv = call_give_up(c, cs, &cst, tries, retry_remaining_ms(deadline) == 0, st,
                      &complete);
    st->attempts = cst.sent;
    if (complete && cs->mutating) {
        gate_seq_complete(&c->gate, cs->client_id, cs->seq);
    }
    goto out;

final:
    clean = true;
    call_status_from(st, r);
    st->attempts = cst.sent;
    rv = st->code;
    if (cs->tracked && status_lease_gone(st)) {
        gate_declare(&c->gate, "a call under it was answered %s: %s",
                     st->reason, st->message);
    }
    if (cs->mutating && cst.maybe_executed && call_refused_unexecuted(st)) {
        /* This attempt was refused, but an earlier one may have run. */
        char what[96];
        snprintf(what, sizeof(what), "%s %s", once_strerror(rv), st->reason);
        rv = status_set(st, ONCE_UNKNOWN, ONCE_REASON_OUTCOME_UNKNOWN,
                        "attempt %" PRIu32 " was refused (%s) but an earlier "
                        "attempt may have run (%s); rpc id %" PRIu64 ":%" PRIu64
                        " may or may not have taken effect",
                        tries, what, cst.last_err, cs->client_id, cs->seq);
        goto out;
    }
    if (rv == ONCE_OK && call_deliver(r, resp, resp_len) != 0) {
        /* The reply exists but cannot be handed over: for a mutating call
         * that is an unknown outcome the caller can retry to learn. */
        if (cs->mutating) {
            rv = status_set(st, ONCE_UNKNOWN, ONCE_REASON_OUTCOME_UNKNOWN,
                            "out of memory for the reply; retry rpc id "
                            "%" PRIu64 ":%" PRIu64 " to find out",
                            cs->client_id, cs->seq);
        } else {
            rv = status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                            "out of memory for the reply");
        }
        goto out;
    }
    if (cs->mutating) {
        gate_seq_complete(&c->gate, cs->client_id, cs->seq);
    }

out:
    if (tracking) {
        gate_untrack(&c->gate, &lc);
    }
    if (r != NULL) {
        once__v1__response__free_unpacked(r, NULL);
    }
    if (pre != NULL && pre->r != NULL) {
        /* given up before the loop took it */
        once__v1__response__free_unpacked(pre->r, NULL);
        pre->r = NULL;
    }
    if (slot != NULL) {
        slot_give(&c->conn.slots, slot, clean);
    }
    return rv;
}

/* A mutating call under a lost lease: refused here, nothing sent. */
static int
call_lost_fast(once_client *c, const call_spec *cs, once_status *st)
{
    once_status why;

    gate_why(&c->gate, &why);
    return status_set(st, ONCE_FAILED_PRECONDITION, ONCE_REASON_LEASE_EXPIRED,
                      "the lease of client %" PRIu64
                      " is lost (%s); nothing was sent — open a new handle",
                      cs->client_id, why.message);
}

/* ONCE_OK when cs's envelope fits what onced reads (its --recv-max, when
 * an OpenLease reply told it): a larger one would be dropped by its
 * transport unanswered, and the call would end OUTCOME_UNKNOWN after its
 * whole deadline. Sized for the largest attempt number and timeout. */
static int
call_fits(once_client *c, const call_spec *cs, once_status *st)
{
    uint64_t max = atomic_load(&c->conn.max_request);
    Once__V1__Request r;
    size_t len;

    /* Fast path: every field but the method, principal and payload takes
     * at most 11 bytes, the tag trailer fewer than 64. */
    if (max == 0 ||
        cs->req_len + strlen(cs->method) + strlen(c->principal) + 192 <= max) {
        return ONCE_OK;
    }
    call_envelope(c, cs, UINT32_MAX, UINT64_MAX, &r);
    len = once__v1__request__get_packed_size(&r) +
          (c->signs ? AUTH_TAG_TRAILER : 0);
    if (len <= max) {
        return ONCE_OK;
    }
    return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_REQUEST_TOO_LARGE,
                      "the request is %zu bytes and onced reads at most "
                      "%" PRIu64 " (its --recv-max); nothing was sent",
                      len, max);
}

/* The rpc id of a mutating call into cs (assigning a seq for a new call),
 * or a refusal in st. *assigned says a fresh seq was taken. */
static int
call_id(once_client *c, call_kind kind, once_rpc_id *id, call_spec *cs,
        bool *assigned, once_status *st)
{
    bool either = kind == CALL_EITHER;

    if (either) {
        kind = (id != NULL && id->seq != 0) ? CALL_RETRY : CALL_NEW;
    }
    if (kind == CALL_RETRY) {
        if (id == NULL || id->seq == 0 || id->client_id == 0) {
            return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_RPC_ID,
                              "a retry needs an rpc id with a client id and "
                              "a seq (got %" PRIu64 ":%" PRIu64 ")",
                              id != NULL ? id->client_id : 0,
                              id != NULL ? id->seq : 0);
        }
        cs->client_id = id->client_id;
        cs->seq = id->seq;
        cs->tracked = gate_tracks(&c->gate, cs->client_id);
        if (cs->tracked && gate_is_lost(&c->gate)) {
            return call_lost_fast(c, cs, st);
        }
        if (either && gate_seq_completed(&c->gate, id->client_id, id->seq)) {
            return status_set(
                st, ONCE_INVALID_ARGUMENT, ONCE_REASON_RPC_ID_COMPLETED,
                "rpc id %" PRIu64 ":%" PRIu64 " was already completed by "
                "this handle (its reply was delivered), so this is not a new "
                "call; nothing was sent. For a new call set id.seq = 0 first "
                "(or use the _new function); to read that reply again use "
                "the _retry function",
                id->client_id, id->seq);
        }
        return ONCE_OK;
    }
    /* CALL_NEW */
    if (c->gate.client_id == 0) {
        return status_set(st, ONCE_FAILED_PRECONDITION, ONCE_REASON_NO_LEASE,
                          "a new mutating call needs a client id: open the "
                          "handle with a lease, or retry a known rpc id");
    }
    cs->client_id = c->gate.client_id;
    cs->tracked = true;
    if (gate_is_lost(&c->gate)) {
        return call_lost_fast(c, cs, st);
    }
    if (gate_seq_assign(&c->gate, &cs->seq) != 0) {
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "cannot assign a seq");
    }
    *assigned = true;
    if (id != NULL) {
        id->client_id = cs->client_id;
        id->seq = cs->seq;
    }
    return ONCE_OK;
}

/* The start of every call: arguments, the rpc id, the size check. Fills
 * cs. ONCE_OK, or the refusal (st says why; nothing was sent). */
static int
call_prepare(once_client *c, const char *method, call_kind kind,
             once_rpc_id *id, const void *req, size_t req_len, void **resp,
             size_t *resp_len, once_status *st, call_spec *cs, bool *assigned)
{
    int rv;

    status_clear(st);
    *assigned = false;
    if (resp != NULL) {
        *resp = NULL;
    }
    if (resp_len != NULL) {
        *resp_len = 0;
    }
    memset(cs, 0, sizeof(*cs));
    if (c == NULL || method == NULL || method[0] == '\0' ||
        (req == NULL && req_len > 0)) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "a call needs a handle, a method and a payload");
    }
    cs->method = method;
    cs->mutating = kind != CALL_READ;
    cs->req = req;
    cs->req_len = req_len;
    if (cs->mutating &&
        (rv = call_id(c, kind, id, cs, assigned, st)) != ONCE_OK) {
        return rv;
    }
    return call_fits(c, cs, st);
}

/* The end of every call that got past call_id: rv as the caller sees it. */
static int
call_conclude(once_client *c, const call_spec *cs, bool assigned, int rv,
              once_status *st)
{
    if (rv == ONCE_FAILED_PRECONDITION &&
        once_status_is(st, ONCE_REASON_STALE_RPC) &&
        gate_tracks(&c->gate, cs->client_id)) {
        /* Our own id, acknowledged away by a later call of this handle. */
        rv = status_set(st, ONCE_FAILED_PRECONDITION, ONCE_REASON_STALE_RPC,
                        "rpc id %" PRIu64 ":%" PRIu64 " was completed by "
                        "this handle and acknowledged by its later calls; "
                        "the server no longer keeps its result",
                        cs->client_id, cs->seq);
    }

    /* A fresh seq that never left this process cannot have taken effect:
     * nothing will ever retry it, so it must not hold the watermark back. */
    if (assigned && st->attempts == 0 && rv != ONCE_OK) {
        gate_seq_complete(&c->gate, cs->client_id, cs->seq);
    }
    return rv;
}

int
call_do(once_client *c, const char *method, call_kind kind, once_rpc_id *id,
        const void *req, size_t req_len, void **resp, size_t *resp_len,
        once_status *st, uint32_t deadline_ms)
{
    once_status local;
    call_spec cs;
    bool assigned = false;
    int rv;

    if (st == NULL) {
        st = &local;
    }
    rv = call_prepare(c, method, kind, id, req, req_len, resp, resp_len, st,
                      &cs, &assigned);
    if (cs.method == NULL || (cs.mutating && cs.client_id == 0)) {
        return rv; /* refused before an rpc id was settled */
    }
    if (rv == ONCE_OK) {
        if (deadline_ms == 0) {
            deadline_ms = c->deadline_ms;
        }
        rv = call_run(c, &cs, retry_now_ms() + deadline_ms, NULL, resp,
                      resp_len, st);
    }
    return call_conclude(c, &cs, assigned, rv, st);
}

/* What call_group leaves of a call whose first attempt did not end it. */
struct call_rest {
    call_spec cs;
    bool assigned;
    uint64_t deadline;
    call_pre pre;
};

/* The entries g[0, n) (packed in m[]) as one message on one nng context:
 * a batch envelope, or a plain request when n is 1. Fills each entry's
 * pre with the outcome, as call_attempt would for a call of its own. */
static void
call_group_send(once_client *c, struct call_rest **rs, nng_msg **m, size_t n,
                uint64_t deadline)
{
    uint8_t *bodies[BATCH_ENTRIES_MAX];
    size_t lens[BATCH_ENTRIES_MAX];
    const uint8_t *resps[BATCH_ENTRIES_MAX];
    size_t rlens[BATCH_ENTRIES_MAX];
    call_spec any;
    call_state cst;
    call_slot *slot = NULL;
    gate_call lc;
    bool tracking = false;
    nng_msg *msg = NULL, *reply = NULL;
    Once__V1__Response *r = NULL;
    Once__V1__BatchResponse *br = NULL;
    uint64_t attempt_end = retry_now_ms() + c->attempt_timeout_ms;
    uint64_t start_ms = retry_now_ms();
    int rv;

    memset(&cst, 0, sizeof(cst));
    memset(&any, 0, sizeof(any));
    for (size_t i = 0; i < n; i++) {
        any.tracked = any.tracked || rs[i]->cs.tracked;
        bodies[i] = nng_msg_body(m[i]);
        lens[i] = nng_msg_len(m[i]);
        resps[i] = NULL;
    }
    if (attempt_end > deadline) {
        attempt_end = deadline;
    }
    if ((rv = slot_take(&c->conn.slots, c->conn.sock, &slot)) != 0) {
        snprintf(cst.last_err, sizeof(cst.last_err), "nng context setup: %s",
                 nng_strerror(rv));
        goto out;
    }
    if (any.tracked) {
        if (!gate_track(&c->gate, &lc, slot->aio, slot->sleep)) {
            rv = NNG_ECANCELED;
            snprintf(cst.last_err, sizeof(cst.last_err), "the lease was lost");
            goto out;
        }
        tracking = true;
    }
    if (n == 1) {
        msg = m[0];
        m[0] = NULL;
    } else if ((rv = call_batch_pack(c, bodies, lens, n,
                                     retry_remaining_ms(deadline), &msg)) !=
               0) {
        snprintf(cst.last_err, sizeof(cst.last_err), "pack: %s",
                 nng_strerror(rv));
        goto out;
    }
    start_ms = retry_now_ms();
    rv = call_exchange(c, &any, slot->ctx, slot->aio, msg, deadline,
                       attempt_end, &cst, &reply);
    if (rv == 0) {
        /* steer.h: the target answers; its entries say whether it leads */
        conn_heard(&c->conn, conn_target(&c->conn), false);
    }
    if (rv == 0) {
        rv = call_batch_split(reply, n, &cst, &r, &br, resps, rlens);
    }
out:
    for (size_t i = 0; i < n; i++) {
        call_pre *p = &rs[i]->pre;
        p->cst = cst;
        p->rv = rv;
        p->start_ms = start_ms;
        p->r = NULL;
        if (rv == 0) {
            p->rv = call_unpack(resps[i], rlens[i], &p->cst, &p->r);
        }
    }
    if (tracking) {
        gate_untrack(&c->gate, &lc);
    }
    if (br != NULL) {
        once__v1__batch_response__free_unpacked(br, NULL);
    }
    if (r != NULL) {
        once__v1__response__free_unpacked(r, NULL);
    }
    if (reply != NULL) {
        nng_msg_free(reply);
    }
    if (slot != NULL) {
        slot_give(&c->conn.slots, slot, rv == 0);
    }
}

void
call_group(once_client *c, call_group_entry *g, size_t n)
{
    struct call_rest *rs[BATCH_ENTRIES_MAX];
    call_group_entry *ge[BATCH_ENTRIES_MAX];
    nng_msg *m[BATCH_ENTRIES_MAX];
    uint64_t deadline = retry_now_ms() + c->deadline_ms;
    size_t max_bytes = call_batch_bytes(c);
    size_t k = 0;

    if (n > BATCH_ENTRIES_MAX) {
        n = BATCH_ENTRIES_MAX; /* the caller's to keep to; never more */
    }
    for (size_t i = 0; i < n; i++) {
        call_group_entry *e = &g[i];
        struct call_rest *x;
        int rv;

        e->done = true;
        e->rest = NULL;
        if ((x = calloc(1, sizeof(*x))) == NULL) {
            status_clear(e->st);
            e->rv = status_set(e->st, ONCE_RESOURCE_EXHAUSTED,
                               ONCE_REASON_NO_MEMORY,
                               "out of memory; nothing was sent");
            continue;
        }
        rv = call_prepare(c, e->method, e->kind, e->id, e->req, e->req_len,
                          e->resp, e->resp_len, e->st, &x->cs, &x->assigned);
        if (rv != ONCE_OK) {
            e->rv = (x->cs.method == NULL ||
                     (x->cs.mutating && x->cs.client_id == 0))
                        ? rv
                        : call_conclude(c, &x->cs, x->assigned, rv, e->st);
            free(x);
            continue;
        }
        x->deadline = deadline;
        if ((rv = call_pack(c, &x->cs, 1, retry_remaining_ms(deadline),
                            &m[k])) != 0) {
            /* not sent: the rest of the call starts at its attempt 1 */
            x->pre.rv = rv;
            snprintf(x->pre.cst.last_err, sizeof(x->pre.cst.last_err),
                     "pack: %s", nng_strerror(rv));
            e->rest = x;
            e->done = false;
            continue;
        }
        rs[k] = x;
        ge[k] = e;
        k++;
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
            call_group_entry *e = ge[i];

            if (m[i] != NULL) {
                nng_msg_free(m[i]);
            }
            if (call_pre_final(&rs[i]->cs, &rs[i]->pre)) {
                /* the common case: answered, finished here at once */
                e->rv = call_resume(c, e, rs[i]);
            } else {
                e->rest = rs[i];
                e->done = false;
            }
        }
        from = to;
    }
}

int
call_resume(once_client *c, call_group_entry *e, struct call_rest *x)
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

int
once_call(once_client *c, const char *method, bool mutating, once_rpc_id *id,
          const void *req, size_t req_len, void **resp, size_t *resp_len,
          once_status *st)
{
    return call_do(c, method, mutating ? CALL_EITHER : CALL_READ, id, req,
                   req_len, resp, resp_len, st, 0);
}

int
once_call_new(once_client *c, const char *method, once_rpc_id *id,
              const void *req, size_t req_len, void **resp, size_t *resp_len,
              once_status *st)
{
    return call_do(c, method, CALL_NEW, id, req, req_len, resp, resp_len, st,
                   0);
}

int
once_call_retry(once_client *c, const char *method, const once_rpc_id *id,
                const void *req, size_t req_len, void **resp, size_t *resp_len,
                once_status *st)
{
    once_rpc_id copy;

    if (id != NULL) {
        copy = *id;
    }
    return call_do(c, method, CALL_RETRY, id != NULL ? &copy : NULL, req,
                   req_len, resp, resp_len, st, 0);
}
