/*
 * chain.c — a chain of calls kept in the journal (once/journal.h): open or
 * resume, step, send, commit, state, forget.
 *
 * Owns: the chain handle — its record as last written (ch->r) — and the
 * order of writes and sends that Theorem 17.2 of Weikum & Vossen needs
 * (docs/chains.md): a request and its rpc id are written (synced) before
 * the request is sent; the step's seq is completed only once the commit
 * that consumes its reply is synced (so no later call of the handle
 * acknowledges away a record whose reply is not yet durable: the engine's
 * CALL_HELD); consuming a reply, the new context and the next request are
 * one synced write.
 * Invariant: a PENDING record names the rpc id its request was or will be
 * sent with, and a request is sent only under that id; a step whose
 * lease ended is marked LEASE_ENDED and never re-sent under another id.
 * ch->r always equals the journal's record, except in the test build's
 * write-after-send mode (chain_seams.h), whose point is to break this.
 * Never: holds a lock across a send; sends from an IDLE, REPLIED or
 * LEASE_ENDED chain; resumes another principal's chain.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/answer.h"
#include "client/call.h"
#include "client/chain_impl.h"
#include "client/chain_seams.h"
#include "client/client_impl.h"
#include "client/journal_impl.h"
#include "client/lease_gate.h"
#include "base/clock.h"
#include "client/status.h"

struct once_chain {
    once_journal *j; /* not owned */
    once_client *c;  /* not owned */
    char *id;        /* the chain id claimed in j; owned */
    chain_rec *r;    /* the record as last written; owned (NULL until
                        read or created) */
    bool one_step;   /* a kept input (chain_impl.h): a decided answer is
                        final and synced, an OK one removes the chain */
    bool counted;    /* r->sends already counts the coming send */
};

static int
chain_nomem(once_status *st)
{
    return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                      "chain");
}

/* How a record is written: synced, written unsynced (to the journal's
 * reply log, journal_replies.c: it survives the process, not the machine,
 * until the journal's next synced write carries it into LevelDB), or
 * kept in memory only (the test build's broken order). */
typedef enum chain_how { CHAIN_SYNC, CHAIN_NOSYNC, CHAIN_MEMORY } chain_how;

/* Makes w the chain's record: packed once, written as how says, then
 * adopted as ch->r (unpacked from that packing, so w may borrow). */
static int
chain_write(once_chain *ch, chain_rec *w, chain_how how, once_status *st)
{
    size_t len;
    uint8_t *buf;
    chain_rec *n;
    int rv;

    w->updated_unix_ms = clock_wall_ms();
    len = once__client__chain_record__get_packed_size(w);
    if ((buf = malloc(len + 1)) == NULL) {
        return chain_nomem(st);
    }
    once__client__chain_record__pack(w, buf);
    if (how != CHAIN_MEMORY &&
        (rv = journal_put_packed(ch->j, w->chain_id, buf, len,
                                 how == CHAIN_SYNC, st)) != ONCE_OK) {
        free(buf);
        return rv;
    }
    n = once__client__chain_record__unpack(NULL, len, buf);
    free(buf);
    if (n == NULL) {
        return chain_nomem(st);
    }
    once__client__chain_record__free_unpacked(ch->r, NULL);
    ch->r = n;
    return ONCE_OK;
}

/* w: ch->r with nothing in flight (the answer and the request cleared). */
static void
chain_clear_step(const once_chain *ch, chain_rec *w)
{
    *w = *ch->r;
    w->state = ONCE_CHAIN_IDLE;
    w->method = "";
    w->request.data = NULL;
    w->request.len = 0;
    w->client_id = w->seq = w->lease_ttl_ms = 0;
    w->sends = 0;
    w->code = 0;
    w->reason = w->message = "";
    w->reply.data = NULL;
    w->reply.len = 0;
}

/* ---- open / close -------------------------------------------------------- */

/* A new IDLE chain of c's principal, written as how says. */
static int
chain_create(once_chain *ch, const char *chain_id, chain_how how,
             once_status *st)
{
    chain_rec w = ONCE__CLIENT__CHAIN_RECORD__INIT;

    w.version = 1;
    w.chain_id = (char *)chain_id;
    w.principal = ch->c->principal;
    w.state = ONCE_CHAIN_IDLE;
    w.created_unix_ms = clock_wall_ms();
    return chain_write(ch, &w, how, st);
}

/* The pending step's lease ended (answer rv/why): LEASE_ENDED, written. */
static int
chain_lease_ended(once_chain *ch, int rv, const once_status *why,
                  once_status *st)
{
    chain_rec w = *ch->r;
    int e;

    w.state = ONCE_CHAIN_LEASE_ENDED;
    w.code = rv;
    w.reason = (char *)why->reason;
    w.message = (char *)why->message;
    if ((e = chain_write(ch, &w, CHAIN_SYNC, st)) != ONCE_OK) {
        return e;
    }
    return status_set(
        st, ONCE_FAILED_PRECONDITION, ONCE_REASON_CHAIN_LEASE_ENDED,
        "chain %s: the lease of client %" PRIu64
        " ended before the reply of seq %" PRIu64
        " (%s); the step is not re-sent under another id",
        ch->r->chain_id, ch->r->client_id, ch->r->seq, why->reason);
}

/* Renews the lease of the pending step's id when it is not the handle's
 * own. ONCE_OK; LEASE_ENDED filed; or the failure (step stays PENDING). */
static int
chain_renew(once_chain *ch, once_status *st)
{
    once_status one;
    int rv;

    if (ch->r->client_id == ch->c->gate.client_id) {
        return ONCE_OK;
    }
    rv = once_lease_renew(ch->c, ch->r->client_id, NULL, NULL, &one);
    if (rv == ONCE_OK) {
        return ONCE_OK;
    }
    /* Ended: expired or collected; with authentication on, an ended lease
     * of the chain's own principal is answered NOT_YOUR_LEASE. */
    if (rv == ONCE_FAILED_PRECONDITION || rv == ONCE_NOT_FOUND ||
        (rv == ONCE_PERMISSION_DENIED &&
         once_status_is(&one, ONCE_REASON_NOT_YOUR_LEASE))) {
        return chain_lease_ended(ch, rv, &one, st);
    }
    *st = one;
    return rv;
}

static int
chain_check_owner(once_chain *ch, once_status *st)
{
    if (strcmp(ch->r->principal, ch->c->principal) == 0) {
        return ONCE_OK;
    }
    return status_set(st, ONCE_PERMISSION_DENIED, ONCE_REASON_OTHER_PRINCIPAL,
                      "chain %s belongs to principal %s, not %s",
                      ch->r->chain_id, ch->r->principal, ch->c->principal);
}

/* A handle on chain_id of j for c, claimed in j; its record not read. */
static int
chain_alloc(once_journal *j, once_client *c, const char *chain_id,
            once_chain **chp, once_status *st)
{
    once_chain *ch;

    *chp = NULL;
    if ((ch = calloc(1, sizeof(*ch))) == NULL) {
        return chain_nomem(st);
    }
    ch->j = j;
    ch->c = c;
    if ((ch->id = strdup(chain_id)) == NULL) {
        free(ch);
        return chain_nomem(st);
    }
    if (!journal_claim(j, chain_id)) {
        free(ch->id);
        free(ch);
        return status_set(st, ONCE_FAILED_PRECONDITION, ONCE_REASON_CHAIN_BUSY,
                          "chain %s is already open in this process", chain_id);
    }
    *chp = ch;
    return ONCE_OK;
}

int
once_chain_open(once_journal *j, once_client *c, const char *chain_id,
                once_chain **chp, once_status *st)
{
    once_status local_st;
    once_chain *ch;
    int rv;

    (void)status_begin(&st, &local_st, NULL, NULL);
    if (j == NULL || c == NULL || chain_id == NULL || chain_id[0] == '\0' ||
        chp == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "once_chain_open needs a journal, a handle and a "
                          "chain id");
    }
    if ((rv = chain_alloc(j, c, chain_id, chp, st)) != ONCE_OK) {
        return rv;
    }
    ch = *chp;
    rv = journal_get(j, chain_id, &ch->r, st);
    if (rv == ONCE_NOT_FOUND) {
        status_clear(st);
        rv = chain_create(ch, chain_id, CHAIN_SYNC, st);
    } else if (rv == ONCE_OK && (rv = chain_check_owner(ch, st)) == ONCE_OK &&
               ch->r->state == ONCE_CHAIN_PENDING) {
        /* Resume: keep the recorded id usable; an ended lease is filed
         * and said by once_chain_state, not an error of the open. An
         * unreachable server leaves it to the next send. */
        once_status ignored;
        (void)chain_renew(ch, &ignored);
    }
    if (rv != ONCE_OK) {
        once_chain_close(ch);
        *chp = NULL;
        return rv;
    }
    return ONCE_OK;
}

int
chain_open_one_step(once_journal *j, once_client *c, const char *chain_id,
                    once_chain **chp, once_status *st)
{
    once_chain *ch;
    int rv;

    if ((rv = chain_alloc(j, c, chain_id, chp, st)) != ONCE_OK) {
        return rv;
    }
    ch = *chp;
    ch->one_step = true;
    rv = journal_get(j, chain_id, &ch->r, st);
    if (rv == ONCE_NOT_FOUND) {
        status_clear(st);
        rv = chain_create(ch, chain_id, CHAIN_MEMORY, st);
    }
    if (rv != ONCE_OK) {
        once_chain_close(ch);
        *chp = NULL;
    }
    return rv;
}

const chain_rec *
chain_record_of(const once_chain *ch)
{
    return ch->r;
}

void
once_chain_close(once_chain *ch)
{
    if (ch == NULL) {
        return;
    }
    journal_release(ch->j, ch->id);
    if (ch->r != NULL) {
        once__client__chain_record__free_unpacked(ch->r, NULL);
    }
    free(ch->id);
    free(ch);
}

int
once_chain_forget(once_chain *ch, once_status *st)
{
    int rv;

    status_clear(st);
    if (ch == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "once_chain_forget needs a chain");
    }
    rv = journal_del(ch->j, ch->id, st);
    if (rv == ONCE_OK && ch->r != NULL && ch->r->seq != 0) {
        /* Given up: the step's seq must not hold the window back. */
        gate_seq_complete(&ch->c->gate, ch->r->client_id, ch->r->seq);
    }
    once_chain_close(ch);
    return rv;
}

/* ---- the step in flight -------------------------------------------------- */

/* w (a copy of ch->r, context and steps set by the caller) becomes
 * PENDING with (method, req) under a fresh seq of the handle, and is
 * written (crash points before_record / after_record around it). */
static int
chain_record(once_chain *ch, chain_rec *w, const char *method, const void *req,
             size_t req_len, once_rpc_id *id, once_status *st)
{
    once_client *c = ch->c;
    uint64_t seq;
    int rv;

    if (c->gate.client_id == 0 || gate_is_lost(&c->gate)) {
        return status_set(st, ONCE_FAILED_PRECONDITION, ONCE_REASON_NO_LEASE,
                          "a chain step needs a handle with a live lease");
    }
    if (gate_seq_assign(&c->gate, &seq) != 0) {
        return chain_nomem(st);
    }
    w->state = ONCE_CHAIN_PENDING;
    w->method = (char *)method;
    w->request.data = (uint8_t *)req;
    w->request.len = req_len;
    w->client_id = c->gate.client_id;
    w->seq = seq;
    w->lease_ttl_ms = c->gate.ttl_ms;
    if (ch->one_step) {
        w->sends++; /* an input counts the coming send in this write */
    }
    chain_crash_point("before_record");
    rv = chain_write(ch, w,
                     chain_write_after_send() ? CHAIN_MEMORY : CHAIN_SYNC, st);
    if (rv != ONCE_OK) {
        /* Not recorded, so never sent: the seq must not hold the window. */
        gate_seq_complete(&c->gate, c->gate.client_id, seq);
        return rv;
    }
    ch->counted = ch->one_step;
    if (id != NULL) {
        id->client_id = c->gate.client_id;
        id->seq = seq;
    }
    return ONCE_OK;
}

/* Hands the recorded answer of a REPLIED chain back. */
static int
chain_replay(once_chain *ch, void **resp, size_t *resp_len, once_status *st)
{
    const chain_rec *r = ch->r;

    if (r->code == ONCE_OK &&
        journal_copy_out(r->reply.data, r->reply.len, resp, resp_len) != 0) {
        return chain_nomem(st);
    }
    return status_set(st, r->code, r->reason, "%s", r->message);
}

/* A one-step chain accepted: removed from the journal in one synced
 * write; the handle keeps an IDLE record in memory (not kept). */
static int
chain_drop(once_chain *ch, once_status *st)
{
    chain_rec w;
    int rv;

    if ((rv = journal_del(ch->j, ch->id, st)) != ONCE_OK) {
        return rv;
    }
    chain_clear_step(ch, &w);
    return chain_write(ch, &w, CHAIN_MEMORY, st);
}

/* The answer rv/st (resp on OK, taken over) of the pending step, written:
 * REPLIED, LEASE_ENDED, or nothing when it decides nothing.
 *
 * The reply's write is not synced (one write(2) to the journal's reply
 * log; reads of the journal see it at once), and the step's seq stays
 * incomplete (CALL_HELD) until the commit that consumes the reply is synced:
 * until then no call of the handle acknowledges the seq, so the server keeps
 * the completion record, and a reply lost with the machine is learned
 * again by re-sending the PENDING step under its id. One local fsync per
 * step (the commit, which records the next request too) instead of two. */
static int
chain_answer(once_chain *ch, int rv, void **resp, size_t *resp_len,
             once_status *st)
{
    chain_rec w = *ch->r;
    answer_kind k = answer_classify(rv, st);
    once_status why = *st;
    int e;

    if (k == ANSWER_UNDECIDED) {
        return rv; /* stays PENDING: re-send it under its id */
    }
    if (k == ANSWER_LEASE_ENDED) {
        e = chain_lease_ended(ch, rv, &why, st);
        gate_seq_complete(&ch->c->gate, w.client_id, w.seq);
        return e;
    }
    w.state = ONCE_CHAIN_REPLIED;
    w.code = rv;
    w.reason = why.reason;
    w.message = why.message;
    w.reply.data = rv == ONCE_OK ? (uint8_t *)*resp : NULL;
    w.reply.len = rv == ONCE_OK ? *resp_len : 0;
    if (!ch->one_step) {
        /* The test build's broken order records the request only now: a
         * reply log's record is replayed only onto its recorded request,
         * so there the reply is a LevelDB write as the request would be. */
        e = chain_write(
            ch, &w, chain_write_after_send() ? CHAIN_SYNC : CHAIN_NOSYNC, st);
    } else if (rv == ONCE_OK) {
        e = chain_drop(ch, st); /* accepted: nothing is kept */
    } else {
        e = chain_write(ch, &w, CHAIN_SYNC, st); /* refused: kept, final */
    }
    if (e != ONCE_OK) {
        /* Not written: the step stays PENDING in the journal and its seq
         * incomplete; a re-send replays the stored reply. */
        once_free(*resp);
        *resp = NULL;
        *resp_len = 0;
        return e;
    }
    if (ch->one_step) {
        /* Its answer is final and durable: nothing consumes it later. */
        gate_seq_complete(&ch->c->gate, w.client_id, w.seq);
    }
    *st = why;
    chain_crash_point("after_reply");
    return rv;
}

/* Sends the PENDING step under its recorded id and files the answer. */
static int
chain_send_pending(once_chain *ch, once_rpc_id *id, void **resp,
                   size_t *resp_len, once_status *st)
{
    once_rpc_id rid = {ch->r->client_id, ch->r->seq};
    int rv;

    if ((rv = chain_renew(ch, st)) != ONCE_OK) {
        return rv;
    }
    if (id != NULL) {
        *id = rid;
    }
    if (!ch->counted) {
        ch->r->sends++;
    }
    ch->counted = false;
    rv = call_do(ch->c, ch->r->method, CALL_HELD, &rid, ch->r->request.data,
                 ch->r->request.len, resp, resp_len, st, 0);
    chain_crash_point("after_send");
    return chain_answer(ch, rv, resp, resp_len, st);
}

static int
chain_busy(const once_chain *ch, const char *what, once_status *st)
{
    return status_set(st, ONCE_FAILED_PRECONDITION,
                      ch->r->state == ONCE_CHAIN_LEASE_ENDED
                          ? ONCE_REASON_CHAIN_LEASE_ENDED
                          : ONCE_REASON_CHAIN_BUSY,
                      "chain %s is %s: %s", ch->r->chain_id,
                      once_chain_state_name((int)ch->r->state), what);
}

static void
clear_out(void **resp, size_t *resp_len)
{
    if (resp != NULL) {
        *resp = NULL;
    }
    if (resp_len != NULL) {
        *resp_len = 0;
    }
}

int
once_chain_send(once_chain *ch, once_rpc_id *id, void **resp, size_t *resp_len,
                once_status *st)
{
    once_status local_st;
    void *local = NULL;
    size_t local_len = 0;
    int rv;

    (void)status_begin(&st, &local_st, NULL, NULL);
    clear_out(resp, resp_len);
    if (ch == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "once_chain_send needs a chain");
    }
    switch (ch->r->state) {
    case ONCE_CHAIN_REPLIED:
        rv = chain_replay(ch, &local, &local_len, st);
        break;
    case ONCE_CHAIN_PENDING:
        rv = chain_send_pending(ch, id, &local, &local_len, st);
        break;
    default:
        return chain_busy(ch, "nothing to send", st);
    }
    if (resp != NULL) {
        *resp = local;
        if (resp_len != NULL) {
            *resp_len = local_len;
        }
    } else {
        once_free(local);
    }
    return rv;
}

int
once_chain_step(once_chain *ch, const char *method, const void *req,
                size_t req_len, once_rpc_id *id, void **resp, size_t *resp_len,
                once_status *st)
{
    once_status local_st;
    chain_rec w;
    int rv;

    (void)status_begin(&st, &local_st, NULL, NULL);
    clear_out(resp, resp_len);
    if (ch == NULL || method == NULL || method[0] == '\0' ||
        (req == NULL && req_len > 0)) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "once_chain_step needs a chain, a method and a "
                          "request");
    }
    if (ch->r->state != ONCE_CHAIN_IDLE) {
        return chain_busy(ch, "send, or commit, what is in flight first", st);
    }
    chain_clear_step(ch, &w);
    if ((rv = chain_record(ch, &w, method, req, req_len, id, st)) != ONCE_OK) {
        return rv;
    }
    chain_crash_point("after_record");
    return once_chain_send(ch, id, resp, resp_len, st);
}

int
chain_step_again(once_chain *ch, once_rpc_id *id, void **resp, size_t *resp_len,
                 once_status *st)
{
    uint64_t old_cid = ch->r->client_id, old_seq = ch->r->seq;
    chain_rec w;
    int rv;

    clear_out(resp, resp_len);
    if (ch->r->state == ONCE_CHAIN_IDLE) {
        return chain_busy(ch, "no step to send again", st);
    }
    chain_clear_step(ch, &w);
    w.sends = ch->r->sends;
    w.principal = ch->c->principal; /* the id is the handle's now */
    /* w borrows ch->r's method and request: chain_write packs them
     * before it lets the old record go. */
    rv = chain_record(ch, &w, ch->r->method, ch->r->request.data,
                      ch->r->request.len, id, st);
    if (rv != ONCE_OK) {
        return rv;
    }
    if (old_seq != 0) {
        /* Given up (as once_chain_forget): it must not hold the window. */
        gate_seq_complete(&ch->c->gate, old_cid, old_seq);
    }
    return once_chain_send(ch, id, resp, resp_len, st);
}

int
once_chain_commit(once_chain *ch, const void *context, size_t context_len,
                  const char *next_method, const void *next_req,
                  size_t next_len, once_rpc_id *next_id, once_status *st)
{
    once_status local_st;
    uint64_t done_cid, done_seq;
    chain_rec w;
    int rv;

    (void)status_begin(&st, &local_st, NULL, NULL);
    if (ch == NULL || (context == NULL && context_len > 0) ||
        (next_method != NULL && (next_req == NULL && next_len > 0))) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "once_chain_commit needs a chain and its context");
    }
    if (ch->r->state == ONCE_CHAIN_PENDING) {
        return chain_busy(ch, "its step has no reply to consume yet", st);
    }
    done_cid = ch->r->client_id;
    done_seq = ch->r->seq;
    chain_clear_step(ch, &w);
    w.context.data = (uint8_t *)context;
    w.context.len = context_len;
    if (ch->r->state != ONCE_CHAIN_IDLE) {
        w.steps++;
    }
    if (next_method == NULL) {
        rv = chain_write(ch, &w, CHAIN_SYNC, st);
    } else if (chain_write_after_send()) {
        /* Test build, the broken order: the consumption and context now,
         * the next request only once it is answered. */
        if ((rv = chain_write(ch, &w, CHAIN_SYNC, st)) == ONCE_OK) {
            chain_clear_step(ch, &w);
            rv = chain_record(ch, &w, next_method, next_req, next_len, next_id,
                              st);
        }
    } else {
        rv = chain_record(ch, &w, next_method, next_req, next_len, next_id, st);
    }
    if (rv == ONCE_OK) {
        /* The consumed reply is durable now: its record may go. */
        if (done_seq != 0) {
            gate_seq_complete(&ch->c->gate, done_cid, done_seq);
        }
        chain_crash_point("after_commit");
        if (next_method != NULL) {
            chain_crash_point("after_record");
        }
    }
    return rv;
}

int
once_chain_state(once_chain *ch, once_chain_info *info, void **context,
                 size_t *context_len, void **payload, size_t *payload_len,
                 once_status *st)
{
    const chain_rec *r;
    const ProtobufCBinaryData *p;

    status_clear(st);
    clear_out(context, context_len);
    clear_out(payload, payload_len);
    if (ch == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "once_chain_state needs a chain");
    }
    r = ch->r;
    if (info != NULL) {
        journal_info_fill(info, r);
    }
    p = r->state == ONCE_CHAIN_REPLIED ? &r->reply
        : r->state == ONCE_CHAIN_IDLE  ? NULL
                                       : &r->request;
    if (journal_copy_out(r->context.data, r->context.len, context,
                         context_len) != 0 ||
        (p != NULL &&
         journal_copy_out(p->data, p->len, payload, payload_len) != 0)) {
        if (context != NULL) {
            free(*context);
            clear_out(context, context_len);
        }
        return chain_nomem(st);
    }
    return ONCE_OK;
}
