/*
 * call.c — one rpc, from the public function to its final status
 * (once_call, once_call_new, once_call_retry; call_do for the typed
 * methods above): prepare, run, conclude.
 *
 * Owns: the loop of one call's attempts — attempt, decide, then final,
 * retry, back off or give up — with the call's slot (an nng context, its
 * aio and its sleep aio, taken for all its attempts, slot.h), its
 * deadline and jittered backoff; the status it ends with; the completion
 * of its seq. The steps below it have files of their own: the envelope
 * (envelope.c), one attempt (attempt.c: plain, or coalesced through
 * coalesce.c), one exchange on the slot (exchange.c), the verdict after
 * an attempt (classify.c, pure), the rpc id (rpc_id.c); async groups
 * start in call_group.c and go on here (call_run with a call_pre).
 * Invariant: a mutating call that nng accepted for sending at least once is
 * never reported as a plain failure — it ends with the server's final reply
 * or ONCE_UNKNOWN/OUTCOME_UNKNOWN with its rpc id; its seq stays incomplete
 * in the window until a final reply is delivered (or the caller releases
 * it). What is retried and what is final is classify.h's: timeouts,
 * transport errors and undecodable envelopes back off; UNAVAILABLE backs
 * off (a follower naming the leader is retried there at once); on mutating
 * calls RESOURCE_EXHAUSTED/WINDOW_FULL backs off (a later attempt carries
 * a newer acknowledgement); every other reply is final — but a refusal
 * before execution (WINDOW_FULL, LEASE_EXPIRED, DEADLINE_EXCEEDED) after
 * an attempt that may have run ends OUTCOME_UNKNOWN. A call that ends on
 * WINDOW_FULL that way completes its seq. Mutating calls under the
 * handle's own client id are tracked (lease_gate.h): when the lease is
 * lost they end at once; the loop looks at the lease once a step, after
 * the backoff, and every send, receive and sleep of a tracked call starts
 * through the gate. Which URL an attempt goes to is the connection
 * layer's (steer.h): the loop reports NOT_LEADER hints, replies and
 * unanswered attempts to it (conn_hint, conn_heard, conn_suspect) with the
 * target's generation read before the attempt.
 * Never: assigns a new seq to a retry; never waits past the call deadline;
 * never holds the handle's lock across network I/O; never sends a tracked
 * call after its lease was lost.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>

#include "client/attempt.h"
#include "client/call.h"
#include "client/call_impl.h"
#include "client/classify.h"
#include "client/client_impl.h"
#include "client/envelope.h"
#include "client/exchange.h"
#include "client/lease_gate.h"
#include "client/rpc_id.h"
#include "client/slot.h"
#include "client/status.h"
#include "base/clock.h"

/* The longest backoff after a follower's refusal that moved nothing (a
 * leader change under way), whatever the handle's backoff cap. */
#define CALL_FOLLOWER_BACKOFF_MS 100u

/* One call's run across its attempts: what the steps of call_run share. */
typedef struct call_loop {
    once_client *c;
    const call_spec *cs;
    uint64_t deadline; /* clock_now_ms clock */
    call_slot *slot;   /* taken for all the attempts */
    call_state cst;
    uint64_t rng;   /* the backoff's jitter (retry_seed) */
    uint32_t tries; /* attempts made, call_group's first one included */
    bool clean;     /* ended on a reply: the slot can be kept */
} call_loop;

/* One attempt as the loop sees it. */
typedef struct call_step {
    int rv;                /* 0: r holds the reply */
    Once__V1__Response *r; /* the loop's, freed after the decision */
    uint64_t now;          /* when the attempt began */
    uint64_t target;       /* the target's generation before it */
    uint32_t sent_before;  /* cst.sent before it */
} call_step;

/* The reply's code as enum once_code (classify_code); a missing status
 * is proto3's default, OK. */
static int
call_code(const Once__V1__Response *r)
{
    return r->status != NULL ? classify_code((int)r->status->code) : ONCE_OK;
}

/* What the reply means for cs's call, given what its attempts learned. */
static classify_reply_out
call_classify(const call_spec *cs, const call_state *cst,
              const Once__V1__Response *r)
{
    return classify_reply(call_code(r),
                          r->status != NULL ? r->status->reason : NULL,
                          cs->mutating, cst->maybe_executed);
}

static void
call_status_from(once_status *st, const Once__V1__Response *r)
{
    const char *reason = r->status != NULL ? r->status->reason : NULL;
    const char *msg = r->status != NULL ? r->status->message : NULL;

    status_take(st, call_code(r), reason, msg);
    st->replayed = r->replayed;
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

/* Gives up because the lease was lost: definitive (*complete) when
 * nothing was sent, an unknown outcome otherwise. */
static int
call_give_up_lost(const call_loop *L, once_status *st, bool *complete)
{
    const call_spec *cs = L->cs;
    once_status why;

    gate_why(&L->c->gate, &why);
    if (L->cst.sent == 0) {
        *complete = true;
        return status_set(
            st, ONCE_FAILED_PRECONDITION, ONCE_REASON_LEASE_EXPIRED,
            "the lease of client %" PRIu64 " is lost (%s); nothing was sent",
            cs->client_id, why.message);
    }
    return status_set(
        st, ONCE_UNKNOWN, ONCE_REASON_OUTCOME_UNKNOWN,
        "the lease of client %" PRIu64 " was lost (%s) after %" PRIu32
        " attempt(s); rpc id %" PRIu64 ":%" PRIu64
        " may or may not have taken effect and can no "
        "longer be retried",
        cs->client_id, why.message, L->cst.sent, cs->client_id, cs->seq);
}

/* The code and status of a call that got no final reply, per
 * once/client.h. Sets *complete when the outcome is definitive for the
 * seq (nothing ran and nothing will: the caller has no reason to retry). */
static int
call_give_up_status(const call_loop *L, bool deadline_passed, once_status *st,
                    bool *complete)
{
    const call_state *cst = &L->cst;
    const call_spec *cs = L->cs;

    *complete = false;
    if (cst->lost) {
        return call_give_up_lost(L, st, complete);
    }
    if (cst->sent == 0 && cst->tls.code != ONCE_OK) {
        *st = cst->tls; /* nothing was sent: nothing can have run */
        return st->code;
    }
    if (cst->sent == 0) {
        return status_set(st, ONCE_UNAVAILABLE, ONCE_REASON_NOT_SENT,
                          "could not send to the server in %" PRIu32
                          " attempt(s) (%s); nothing was sent",
                          L->tries, cst->last_err);
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
                          L->tries, cst->last_err, cs->client_id, cs->seq);
    }
    if (cst->last_unavailable) {
        *st = cst->unavailable;
        return st->code;
    }
    if (deadline_passed) {
        return status_set(st, ONCE_DEADLINE_EXCEEDED, ONCE_REASON_NO_REPLY,
                          "no reply before the deadline after %" PRIu32
                          " attempt(s) (%s)",
                          L->tries, cst->last_err);
    }
    return status_set(st, ONCE_UNAVAILABLE, ONCE_REASON_NO_REPLY,
                      "no reply after %" PRIu32 " attempt(s) (%s)", L->tries,
                      cst->last_err);
}

/* The end of a call that gave up: its status, and its seq completed when
 * that is definitive. */
static int
call_give_up(call_loop *L, once_status *st)
{
    bool passed = retry_remaining_ms(L->deadline) == 0;
    bool complete;
    int rv;

    rv = call_give_up_status(L, passed, st, &complete);
    st->attempts = L->cst.sent;
    if (complete && L->cs->mutating && !L->cs->held) {
        gate_seq_complete(&L->c->gate, L->cs->client_id, L->cs->seq);
    }
    return rv;
}

/* The end of a call on a reply r (freed here) classified out: its status
 * (or OUTCOME_UNKNOWN), its payload delivered, its seq completed. */
static int
call_final(call_loop *L, Once__V1__Response *r, const classify_reply_out *out,
           void **resp, size_t *resp_len, once_status *st)
{
    const call_spec *cs = L->cs;
    char what[96];
    int rv;

    L->clean = true;
    call_status_from(st, r);
    st->attempts = L->cst.sent;
    rv = st->code;
    if (cs->tracked && out->lease_gone) {
        gate_declare(&L->c->gate, "a call under it was answered %s: %s",
                     st->reason, st->message);
    }
    if (out->verdict == CLASSIFY_UNKNOWN) {
        /* This attempt was refused, but an earlier one may have run. */
        snprintf(what, sizeof(what), "%s %s", once_strerror(rv), st->reason);
        rv =
            status_set(st, ONCE_UNKNOWN, ONCE_REASON_OUTCOME_UNKNOWN,
                       "attempt %" PRIu32 " was refused (%s) but an earlier "
                       "attempt may have run (%s); rpc id %" PRIu64 ":%" PRIu64
                       " may or may not have taken effect",
                       L->tries, what, L->cst.last_err, cs->client_id, cs->seq);
    } else if (rv == ONCE_OK && call_deliver(r, resp, resp_len) != 0) {
        /* The reply exists but cannot be handed over: for a mutating call
         * that is an unknown outcome the caller can retry to learn. */
        rv =
            cs->mutating
                ? status_set(st, ONCE_UNKNOWN, ONCE_REASON_OUTCOME_UNKNOWN,
                             "out of memory for the reply; retry rpc id "
                             "%" PRIu64 ":%" PRIu64 " to find out",
                             cs->client_id, cs->seq)
                : status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                             "out of memory for the reply");
    } else if (cs->mutating && !cs->held) {
        gate_seq_complete(&L->c->gate, cs->client_id, cs->seq);
    }
    once__v1__response__free_unpacked(r, NULL);
    return rv;
}

/* Attempt number `attempt`, unless the attempts or the deadline are used
 * up (false: give up). */
static bool
call_attempt(call_loop *L, uint32_t attempt, call_step *s)
{
    once_client *c = L->c;

    s->now = clock_now_ms();
    s->target = conn_target(&c->conn); /* steer.h */
    s->sent_before = L->cst.sent;
    s->r = NULL;
    if (attempt > c->retry.max_attempts || s->now >= L->deadline) {
        return false;
    }
    L->tries = attempt;
    L->cst.last_unavailable = false;
    L->cst.last_window_full = false;
    s->rv =
        attempt_make(c, L->cs, L->slot, attempt, L->deadline,
                     retry_window(s->now, c->attempt_timeout_ms, L->deadline),
                     &L->cst, &s->r);
    return true;
}

/* The first attempt, made by call_group: its outcome, as an attempt's. */
static void
call_attempt_pre(call_loop *L, call_pre *pre, call_step *s)
{
    s->now = pre->start_ms;
    s->target = conn_target(&L->c->conn);
    s->sent_before = 0;
    s->rv = pre->rv;
    s->r = pre->r;
    pre->r = NULL;
    L->tries = 1;
}

/* A refusal a retry keeps, to report if the call gives up on it. */
static void
call_remember(call_loop *L, classify_refusal refusal,
              const Once__V1__Response *r)
{
    call_state *cst = &L->cst;
    once_status *kept;

    if (refusal == CLASSIFY_REFUSAL_NONE) {
        return;
    }
    if (refusal == CLASSIFY_REFUSAL_UNAVAILABLE) {
        cst->last_unavailable = true;
        kept = &cst->unavailable;
    } else {
        cst->last_window_full = true;
        kept = &cst->window_full;
    }
    call_status_from(kept, r);
    kept->attempts = cst->sent;
    snprintf(cst->last_err, sizeof(cst->last_err), "%s %s",
             once_strerror(kept->code), kept->reason);
}

/* What the attempt s means (classify.h), and what the route learns from
 * it (steer.h). *moved: a follower named the leader and the target moved
 * there. */
static classify_verdict
call_decide(call_loop *L, const call_step *s, classify_reply_out *out,
            bool *moved)
{
    conn *cn = &L->c->conn;

    *moved = false;
    if (s->rv != 0) {
        /* Sent, unanswered: with several URLs, maybe the next one leads
         * (steer.h: not while the target answers others). */
        if (s->rv == NNG_ETIMEDOUT && L->cst.sent > s->sent_before) {
            conn_suspect(cn, s->target, s->now);
        }
        *out = (classify_reply_out){
            .verdict = classify_no_reply(s->rv, L->cst.tls.code != ONCE_OK)};
        return out->verdict;
    }
    *out = call_classify(L->cs, &L->cst, s->r);
    conn_heard(cn, s->target, !out->follower);
    L->cst.not_leader =
        out->verdict == CLASSIFY_RETRY_NOW ? L->cst.not_leader + 1 : 0;
    if (out->verdict == CLASSIFY_RETRY_NOW) {
        /* To the leader it names, when it is one of ours. */
        *moved = conn_hint(
            cn, s->target,
            classify_leader_hint(s->r->status->leader, s->r->status->message));
    } else if (out->follower) {
        /* A follower that knows no leader: maybe another replica does.
         * The next URL, after the backoff. */
        conn_leaderless(cn, s->target);
    }
    L->cst.maybe_executed = L->cst.maybe_executed || out->may_have_run;
    call_remember(L, out->refusal, s->r);
    return out->verdict;
}

/* The wait before the attempt after `attempt`: 0 when none follows (the
 * attempts or the deadline are used up) or when it goes at once. follower:
 * a follower refused it. */
static uint64_t
call_backoff(call_loop *L, uint32_t attempt, bool moved, bool follower)
{
    once_client *c = L->c;
    uint64_t left, b;

    if (attempt == c->retry.max_attempts ||
        (left = retry_remaining_ms(L->deadline)) == 0) {
        return 0;
    }
    b = retry_backoff_ms(&c->retry, attempt, &L->rng);
    if (b > left) {
        b = left;
    }
    /* A follower named a leader and the target moved (steer.h): the next
     * attempt goes there at once, once per URL in a row; then the backoff
     * again, so followers naming each other (an election) cost backoffs up
     * to the deadline, not a busy loop. */
    if (moved && L->cst.not_leader < c->conn.nurls) {
        b = 0;
    }
    /* A follower that named no leader it could move to: a leader change
     * is under way, and its end is what the call waits for. Asking a
     * follower again costs it one reply, so within CALL_FOLLOWER_BACKOFF_MS
     * whatever the cap: a call finds the new leader that much sooner. */
    if (follower && b > CALL_FOLLOWER_BACKOFF_MS) {
        b = CALL_FOLLOWER_BACKOFF_MS;
    }
    return b;
}

/* Between two attempts: the backoff (on the slot's sleep aio, cut short
 * by a lost lease), then the step's one look at the lease. True: it is
 * lost, and the call ends before anything more is sent. */
static bool
call_pause(call_loop *L, uint64_t backoff)
{
    if (backoff > 0) {
        exchange_backoff(L->c, L->cs->tracked, L->slot, backoff);
    }
    if (L->cs->tracked && gate_is_lost(&L->c->gate)) {
        L->cst.lost = true;
        return true;
    }
    return false;
}

/* The loop: attempt, decide, then final, retry (at once or after a
 * backoff) or give up. The first step takes pre's outcome when there is
 * one; the lease was looked at by gate_track just before. */
static int
call_loop_run(call_loop *L, call_pre *pre, void **resp, size_t *resp_len,
              once_status *st)
{
    uint64_t backoff = 0;

    for (uint32_t attempt = 1;; attempt++) {
        classify_reply_out out;
        classify_verdict v;
        call_step s;
        bool moved;

        if (attempt > 1 && call_pause(L, backoff)) {
            break;
        }
        if (pre != NULL && attempt == 1) {
            call_attempt_pre(L, pre, &s);
        } else if (!call_attempt(L, attempt, &s)) {
            break;
        }
        v = call_decide(L, &s, &out, &moved);
        if (v == CLASSIFY_FINAL || v == CLASSIFY_UNKNOWN) {
            return call_final(L, s.r, &out, resp, resp_len, st);
        }
        if (s.r != NULL) {
            once__v1__response__free_unpacked(s.r, NULL);
        }
        if (v == CLASSIFY_GIVE_UP) {
            break;
        }
        backoff = call_backoff(L, attempt, moved, out.follower);
    }
    return call_give_up(L, st);
}

/* Whether pre ends its call, and what its reply means (*out). */
static bool
call_pre_ends(const call_spec *cs, const call_pre *pre, classify_reply_out *out)
{
    if (pre->rv != 0) {
        return false;
    }
    *out = call_classify(cs, &pre->cst, pre->r);
    return out->verdict == CLASSIFY_FINAL || out->verdict == CLASSIFY_UNKNOWN;
}

bool
call_pre_final(const call_spec *cs, const call_pre *pre)
{
    classify_reply_out out;

    return call_pre_ends(cs, pre, &out);
}

int
call_run(once_client *c, const call_spec *cs, uint64_t deadline, call_pre *pre,
         void **resp, size_t *resp_len, once_status *st)
{
    call_loop L = {.c = c, .cs = cs, .deadline = deadline, .rng = retry_seed()};
    classify_reply_out first;
    gate_call lc;
    bool tracking = false;
    int rv;

    snprintf(L.cst.last_err, sizeof(L.cst.last_err), "deadline too short");
    if (pre != NULL) {
        L.cst = pre->cst;
        if (call_pre_ends(cs, pre, &first)) {
            L.tries = 1;
            rv = call_final(&L, pre->r, &first, resp, resp_len, st);
            pre->r = NULL;
            return rv;
        }
    }
    if ((rv = slot_take(&c->conn.slots, c->conn.sock, &L.slot)) != 0) {
        if (pre == NULL) {
            return status_set(st, ONCE_UNAVAILABLE, ONCE_REASON_NOT_SENT,
                              "nng context setup: %s; nothing was sent",
                              nng_strerror(rv));
        }
        /* the first attempt may have left: give up as after it */
        L.tries = 1;
        snprintf(L.cst.last_err, sizeof(L.cst.last_err),
                 "nng context setup: %s", nng_strerror(rv));
        rv = call_give_up(&L, st);
    } else if (cs->tracked &&
               !(tracking =
                     gate_track(&c->gate, &lc, L.slot->aio, L.slot->sleep))) {
        L.cst.lost = true;
        rv = call_give_up(&L, st);
    } else {
        rv = call_loop_run(&L, pre, resp, resp_len, st);
    }
    if (tracking) {
        gate_untrack(&c->gate, &lc);
    }
    if (pre != NULL && pre->r != NULL) {
        /* given up before the loop took it */
        once__v1__response__free_unpacked(pre->r, NULL);
        pre->r = NULL;
    }
    if (L.slot != NULL) {
        slot_give(&c->conn.slots, L.slot, L.clean);
    }
    return rv;
}

int
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
        (rv = rpc_id_settle(c, kind, id, cs, assigned, st)) != ONCE_OK) {
        return rv;
    }
    return envelope_fits(c, cs, st);
}

int
call_conclude(once_client *c, const call_spec *cs, bool assigned, int rv,
              once_status *st)
{
    if (cs->method == NULL || (cs->mutating && cs->client_id == 0)) {
        return rv; /* refused before an rpc id was settled */
    }
    if (classify_stale(rv, st->reason) &&
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
    if (rv == ONCE_OK) {
        if (deadline_ms == 0) {
            deadline_ms = c->deadline_ms;
        }
        rv = call_run(c, &cs, clock_now_ms() + deadline_ms, NULL, resp,
                      resp_len, st);
    }
    return call_conclude(c, &cs, assigned, rv, st);
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
