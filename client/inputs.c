/*
 * inputs.c — libonce's input store (once/inputs.h): a start request's (or
 * a queued work item's) input kept on the client until the server has
 * durably accepted the grant (or the queue row) (docs/grants.md), as a
 * thin layer over the journal: each kept input is the one-step chain
 * "input/<hash>-<attempt>" (inputs_impl.h, chain_impl.h) of a journal of
 * one file per chain in the store's directory (journal_files.c), which
 * many processes may open at once (docs/chains.md, "The input store").
 *
 * Owns: the mapping between the input store's API and the chain's — a
 * submit is once_chain_step on a new chain, a resend once_chain_send (or
 * chain_step_again under a new id), the chain's PENDING / REPLIED (with
 * a refusal) / LEASE_ENDED are the input's PENDING / REJECTED /
 * LEASE_ENDED, an accepted input's chain is gone — and the checks of the
 * API (lease, principal, state) before a chain is moved.
 * Invariant: every write, send and answer of an input is chain.c's: the
 * request and its rpc id are written before the send, re-sent only under
 * that id, and a decided answer is filed in one synced write (the chain
 * removed when accepted). Nothing here writes a record itself.
 * Never: re-sends an input under an rpc id other than the recorded one
 * unless the caller asks for it (once_grant_input_resend, new_id); holds
 * a lock across a network call.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "client/chain_impl.h"
#include "client/client_impl.h"
#include "client/inputs_impl.h"
#include "client/lease_gate.h"
#include "client/status.h"
#include "proto/grants.pb-c.h"
#include <once/inputs.h>

#define INPUT_ID_MAX 80

struct once_inputs {
    once_journal *j; /* the store's journal of files; owned */
};

const char *
once_input_state_name(int state)
{
    switch (state) {
    case ONCE_INPUT_PENDING:
        return "PENDING";
    case ONCE_INPUT_REJECTED:
        return "REJECTED";
    case ONCE_INPUT_LEASE_ENDED:
        return "LEASE_ENDED";
    default:
        return "?";
    }
}

/* The chain id of (request_id, attempt) into id[INPUT_ID_MAX]. */
static void
input_chain_id(const char *request_id, uint32_t attempt, char *id)
{
    uint8_t h[16];
    char hex[33];

    crypto_generichash(h, sizeof(h), (const uint8_t *)request_id,
                       strlen(request_id), NULL, 0);
    sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
    snprintf(id, INPUT_ID_MAX, INPUTS_CHAIN_PREFIX "%s-%" PRIu32, hex, attempt);
}

/* The input state of a one-step chain's state; 0: not kept (IDLE). */
static int
input_state(uint32_t chain_state)
{
    switch (chain_state) {
    case ONCE_CHAIN_PENDING:
        return ONCE_INPUT_PENDING;
    case ONCE_CHAIN_REPLIED:
        return ONCE_INPUT_REJECTED;
    case ONCE_CHAIN_LEASE_ENDED:
        return ONCE_INPUT_LEASE_ENDED;
    default:
        return 0;
    }
}

/* ---- open / close ------------------------------------------------------- */

int
once_inputs_open(once_inputs **sp, const char *dir, once_status *st)
{
    once_status local_st;
    once_inputs *s;
    int rv;

    (void)status_begin(&st, &local_st, NULL, NULL);
    if (sp == NULL || dir == NULL || dir[0] == '\0') {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "once_inputs_open needs a directory");
    }
    *sp = NULL;
    if (sodium_init() < 0) {
        return status_set(st, ONCE_INTERNAL, ONCE_REASON_SODIUM,
                          "libsodium init");
    }
    if ((s = calloc(1, sizeof(*s))) == NULL) {
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "input store");
    }
    if ((rv = journal_open_files(dir, &s->j, st)) != ONCE_OK ||
        (rv = inputs_import(s->j, dir, st)) != ONCE_OK) {
        once_inputs_close(s);
        return rv;
    }
    *sp = s;
    return ONCE_OK;
}

void
once_inputs_close(once_inputs *s)
{
    if (s == NULL) {
        return;
    }
    once_journal_close(s->j);
    free(s);
}

/* ---- the chain of an input ---------------------------------------------- */

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

/* Opens the chain of (request_id, attempt) for c (chain_open_one_step):
 * an IDLE one when the input is not kept. */
static int
input_open(once_client *c, once_inputs *s, const char *request_id,
           uint32_t attempt, once_chain **chp, once_status *st)
{
    char id[INPUT_ID_MAX];

    input_chain_id(request_id, attempt, id);
    return chain_open_one_step(s->j, c, id, chp, st);
}

/* What a step or send of ch ended as: *after (may be NULL) the input's
 * state (0: accepted, not kept). An input whose lease ended answers with
 * the answer that ended it (as before the journal), not the chain's
 * CHAIN_LEASE_ENDED. */
static int
input_outcome(once_chain *ch, int rv, once_status *st, int *after)
{
    const chain_rec *r = chain_record_of(ch);

    if (after != NULL) {
        *after = input_state(r->state);
    }
    if (rv != ONCE_OK && r->state == ONCE_CHAIN_LEASE_ENDED) {
        return status_set(st, r->code, r->reason, "%s", r->message);
    }
    return rv;
}

static int
not_kept(const char *request_id, uint32_t attempt, once_status *st)
{
    return status_set(st, ONCE_NOT_FOUND, ONCE_REASON_NO_INPUT,
                      "request %s attempt %" PRIu32 " is not kept", request_id,
                      attempt);
}

/*
 * Re-sends the kept input of ch (once_grant_input_resend's checks, then
 * the chain's send or step-again); *after as input_outcome.
 */
static int
input_resend(once_client *c, once_chain *ch, bool new_id, once_rpc_id *id,
             void **resp, size_t *resp_len, once_status *st, int *after)
{
    const chain_rec *r = chain_record_of(ch);
    int rv;

    if (new_id) {
        if (c->gate.client_id == 0 || gate_is_lost(&c->gate)) {
            return status_set(st, ONCE_FAILED_PRECONDITION,
                              ONCE_REASON_NO_LEASE,
                              "a resend under a new id needs a handle with "
                              "a live lease");
        }
        rv = chain_step_again(ch, id, resp, resp_len, st);
    } else if (strcmp(r->principal, c->principal) != 0) {
        return status_set(st, ONCE_PERMISSION_DENIED,
                          ONCE_REASON_OTHER_PRINCIPAL,
                          "input %s was sent as principal %s, not %s",
                          r->chain_id, r->principal, c->principal);
    } else if (r->state != ONCE_CHAIN_PENDING) {
        bool rej = r->state == ONCE_CHAIN_REPLIED;
        return status_set(
            st, ONCE_FAILED_PRECONDITION,
            rej ? ONCE_REASON_INPUT_REJECTED : ONCE_REASON_INPUT_LEASE_ENDED,
            "input %s is %s (%s); it is re-sent only under a "
            "new id, on request",
            r->chain_id, once_input_state_name(input_state(r->state)),
            r->reason);
    } else {
        rv = once_chain_send(ch, id, resp, resp_len, st);
    }
    return input_outcome(ch, rv, st, after);
}

/* ---- submit / resend ---------------------------------------------------- */

/* Whether ch keeps exactly (method, req) PENDING. */
static bool
input_same(once_chain *ch, const char *method, const uint8_t *req, size_t len)
{
    const chain_rec *r = chain_record_of(ch);

    return r->state == ONCE_CHAIN_PENDING && strcmp(r->method, method) == 0 &&
           r->request.len == len &&
           (len == 0 || memcmp(r->request.data, req, len) == 0);
}

/*
 * Keeps request m (for method, naming request_id and attempt), packed,
 * under a fresh rpc id of c, then sends it: one step of a new chain. What
 * once_grant_submit and once_work_submit share.
 */
static int
input_submit(once_client *c, once_inputs *s, const char *method,
             const char *request_id, uint32_t attempt,
             const ProtobufCMessage *m, once_rpc_id *id, void **resp,
             size_t *resp_len, once_status *st)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    once_chain *ch;
    uint8_t *buf;
    int rv;

    if ((buf = malloc(len + 1)) == NULL) {
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "input");
    }
    protobuf_c_message_pack(m, buf);
    if ((rv = input_open(c, s, request_id, attempt, &ch, st)) != ONCE_OK) {
        free(buf);
        return rv;
    }
    if (chain_record_of(ch)->state == ONCE_CHAIN_IDLE) {
        rv = once_chain_step(ch, method, buf, len, id, resp, resp_len, st);
        rv = input_outcome(ch, rv, st, NULL);
    } else if (input_same(ch, method, buf, len)) {
        rv = input_resend(c, ch, false, id, resp, resp_len, st, NULL);
    } else {
        rv = status_set(st, ONCE_ALREADY_EXISTS, ONCE_REASON_INPUT_KEPT,
                        "request %s attempt %" PRIu32
                        " is already kept (%s) with other content; "
                        "resend or forget it first",
                        request_id, attempt, chain_record_of(ch)->chain_id);
    }
    once_chain_close(ch);
    free(buf);
    return rv;
}

/* The checks once_grant_submit and once_work_submit share; ONCE_OK when
 * the input may be kept. */
static int
submit_check(once_client *c, once_inputs *s, const char *fn,
             const char *request_id, const void *payload, size_t payload_len,
             once_status *st)
{
    if (c == NULL || s == NULL || request_id == NULL || request_id[0] == '\0' ||
        (payload == NULL && payload_len > 0)) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "%s needs a handle, a store and an input with a "
                          "request id",
                          fn);
    }
    if (c->gate.client_id == 0) {
        return status_set(st, ONCE_FAILED_PRECONDITION, ONCE_REASON_NO_LEASE,
                          "keeping an input needs a handle with a lease");
    }
    if (gate_is_lost(&c->gate)) {
        return status_set(st, ONCE_FAILED_PRECONDITION,
                          ONCE_REASON_LEASE_EXPIRED,
                          "the handle's lease is lost; nothing was kept");
    }
    return ONCE_OK;
}

int
once_grant_submit(once_client *c, once_inputs *s, const once_grant_input *in,
                  once_rpc_id *id, void **resp, size_t *resp_len,
                  once_status *st)
{
    Once__V1__RequestGrantRequest r = ONCE__V1__REQUEST_GRANT_REQUEST__INIT;
    int rv;

    status_clear(st);
    clear_out(resp, resp_len);
    if ((rv = submit_check(c, s, "once_grant_submit",
                           in != NULL ? in->request_id : NULL,
                           in != NULL ? in->payload : NULL,
                           in != NULL ? in->payload_len : 0, st)) != ONCE_OK) {
        return rv;
    }
    r.request_id = (char *)in->request_id;
    r.attempt = in->attempt != 0 ? in->attempt : 1;
    r.surface = (char *)(in->surface != NULL ? in->surface : "");
    r.machine = (char *)(in->machine != NULL ? in->machine : "");
    r.location = (char *)(in->location != NULL ? in->location : "");
    r.generation = in->generation;
    r.payload.data = (uint8_t *)in->payload;
    r.payload.len = in->payload_len;
    r.credential_ttl_ms = in->credential_ttl_ms;
    return input_submit(c, s, INPUTS_REQUEST_GRANT, r.request_id, r.attempt,
                        &r.base, id, resp, resp_len, st);
}

int
once_work_submit(once_client *c, once_inputs *s, const once_work_input *in,
                 once_rpc_id *id, void **resp, size_t *resp_len,
                 once_status *st)
{
    Once__V1__EnqueueRequest r = ONCE__V1__ENQUEUE_REQUEST__INIT;
    int rv;

    status_clear(st);
    clear_out(resp, resp_len);
    if ((rv = submit_check(c, s, "once_work_submit",
                           in != NULL ? in->request_id : NULL,
                           in != NULL ? in->payload : NULL,
                           in != NULL ? in->payload_len : 0, st)) != ONCE_OK) {
        return rv;
    }
    r.request_id = (char *)in->request_id;
    r.attempt = in->attempt != 0 ? in->attempt : 1;
    r.surface = (char *)(in->surface != NULL ? in->surface : "");
    r.payload.data = (uint8_t *)in->payload;
    r.payload.len = in->payload_len;
    return input_submit(c, s, INPUTS_ENQUEUE, r.request_id, r.attempt, &r.base,
                        id, resp, resp_len, st);
}

/* The kept input (request_id, attempt) re-sent (input_resend); *after
 * (may be NULL) its state then, -1 when it was not re-sent. */
static int
resend_named(once_client *c, once_inputs *s, const char *request_id,
             uint32_t attempt, bool new_id, once_rpc_id *id, void **resp,
             size_t *resp_len, once_status *st, int *after)
{
    once_chain *ch;
    int rv;

    if (after != NULL) {
        *after = -1;
    }
    if ((rv = input_open(c, s, request_id, attempt, &ch, st)) != ONCE_OK) {
        return rv;
    }
    if (chain_record_of(ch)->state == ONCE_CHAIN_IDLE) {
        rv = not_kept(request_id, attempt, st);
    } else {
        rv = input_resend(c, ch, new_id, id, resp, resp_len, st, after);
    }
    once_chain_close(ch);
    return rv;
}

int
once_grant_input_resend(once_client *c, once_inputs *s, const char *request_id,
                        uint32_t attempt, bool new_id, once_rpc_id *id,
                        void **resp, size_t *resp_len, once_status *st)
{
    once_status local_st;

    (void)status_begin(&st, &local_st, NULL, NULL);
    clear_out(resp, resp_len);
    if (c == NULL || s == NULL || request_id == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "once_grant_input_resend needs a handle, a store "
                          "and a request id");
    }
    if (attempt == 0) {
        attempt = 1;
    }
    return resend_named(c, s, request_id, attempt, new_id, id, resp, resp_len,
                        st, NULL);
}

/* ---- listing ------------------------------------------------------------ */

/* The request's fields into o (kind by method). */
static void
info_request(once_input_info *o, const chain_rec *r)
{
    Once__V1__RequestGrantRequest *g;
    Once__V1__EnqueueRequest *q;

    o->kind = strcmp(r->method, INPUTS_ENQUEUE) == 0 ? ONCE_INPUT_ENQUEUE
                                                     : ONCE_INPUT_START;
    if (o->kind == ONCE_INPUT_ENQUEUE) {
        q = once__v1__enqueue_request__unpack(NULL, r->request.len,
                                              r->request.data);
        if (q != NULL) {
            snprintf(o->request_id, sizeof(o->request_id), "%s", q->request_id);
            o->attempt = q->attempt;
            snprintf(o->surface, sizeof(o->surface), "%s", q->surface);
            o->payload_len = q->payload.len;
            once__v1__enqueue_request__free_unpacked(q, NULL);
        }
        return;
    }
    g = once__v1__request_grant_request__unpack(NULL, r->request.len,
                                                r->request.data);
    if (g != NULL) {
        snprintf(o->request_id, sizeof(o->request_id), "%s", g->request_id);
        o->attempt = g->attempt;
        snprintf(o->surface, sizeof(o->surface), "%s", g->surface);
        snprintf(o->machine, sizeof(o->machine), "%s", g->machine);
        snprintf(o->location, sizeof(o->location), "%s", g->location);
        o->generation = g->generation;
        o->payload_len = g->payload.len;
        once__v1__request_grant_request__free_unpacked(g, NULL);
    }
}

static void
info_fill(once_input_info *o, const chain_rec *r)
{
    memset(o, 0, sizeof(*o));
    info_request(o, r);
    o->id.client_id = r->client_id;
    o->id.seq = r->seq;
    snprintf(o->principal, sizeof(o->principal), "%s", r->principal);
    o->state = input_state(r->state);
    o->kept_unix_ms = r->created_unix_ms;
    o->updated_unix_ms = r->updated_unix_ms;
    o->sends = r->sends;
    o->code = r->code;
    snprintf(o->reason, sizeof(o->reason), "%s", r->reason);
    snprintf(o->message, sizeof(o->message), "%s", r->message);
    snprintf(o->file, sizeof(o->file), "%s", r->chain_id);
}

static int
info_cmp(const void *a, const void *b)
{
    const once_input_info *x = a, *y = b;

    if (x->kept_unix_ms != y->kept_unix_ms) {
        return x->kept_unix_ms < y->kept_unix_ms ? -1 : 1;
    }
    return strcmp(x->file, y->file);
}

typedef struct input_rows {
    once_input_info *rows;
    size_t n, cap;
} input_rows;

/* journal_each's callback: one kept input (a chain "input/..." that is
 * not IDLE); ENOMEM. */
static int
list_one(const chain_rec *r, void *arg)
{
    input_rows *l = arg;

    if (strncmp(r->chain_id, INPUTS_CHAIN_PREFIX,
                strlen(INPUTS_CHAIN_PREFIX)) != 0 ||
        input_state(r->state) == 0) {
        return 0;
    }
    if (journal_rows_grow((void **)&l->rows, &l->cap, l->n, sizeof(*l->rows)) !=
        0) {
        return ENOMEM;
    }
    info_fill(&l->rows[l->n++], r);
    return 0;
}

int
once_grant_inputs_list(once_inputs *s, once_input_info **out, size_t *n,
                       once_status *st)
{
    once_status local_st;
    input_rows l = {NULL, 0, 0};
    int rv;

    (void)status_begin(&st, &local_st, NULL, NULL);
    if (s == NULL || out == NULL || n == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "once_grant_inputs_list needs a store and outputs");
    }
    *out = NULL;
    *n = 0;
    if ((rv = journal_each(s->j, list_one, &l, st)) != ONCE_OK) {
        free(l.rows);
        return rv;
    }
    if (l.n > 1) {
        qsort(l.rows, l.n, sizeof(*l.rows), info_cmp);
    }
    *out = l.rows;
    *n = l.n;
    return ONCE_OK;
}

int
once_grant_input_forget(once_inputs *s, const char *request_id,
                        uint32_t attempt, once_status *st)
{
    once_status local_st;
    char id[INPUT_ID_MAX];
    chain_rec *r = NULL;
    int rv;

    (void)status_begin(&st, &local_st, NULL, NULL);
    if (s == NULL || request_id == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "once_grant_input_forget needs a store and a "
                          "request id");
    }
    attempt = attempt != 0 ? attempt : 1;
    input_chain_id(request_id, attempt, id);
    if (!journal_claim(s->j, id)) {
        return status_set(st, ONCE_FAILED_PRECONDITION, ONCE_REASON_CHAIN_BUSY,
                          "input %s is being sent by this process", id);
    }
    if ((rv = journal_get(s->j, id, &r, st)) == ONCE_NOT_FOUND) {
        rv = not_kept(request_id, attempt, st);
    } else if (rv == ONCE_OK) {
        once__client__chain_record__free_unpacked(r, NULL);
        rv = journal_del(s->j, id, st);
    }
    journal_release(s->j, id);
    return rv;
}

int
once_grant_inputs_resume(once_client *c, once_inputs *s,
                         once_input_resumed_fn fn, void *arg, size_t *accepted,
                         size_t *pending, size_t *ended, size_t *rejected,
                         once_status *st)
{
    size_t n = 0, na = 0, np = 0, ne = 0, nr = 0;
    once_input_info *rows = NULL;
    int rv;

    if (accepted != NULL) {
        *accepted = 0;
    }
    if (pending != NULL) {
        *pending = 0;
    }
    if (ended != NULL) {
        *ended = 0;
    }
    if (rejected != NULL) {
        *rejected = 0;
    }
    if (c == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "once_grant_inputs_resume needs a handle");
    }
    if ((rv = once_grant_inputs_list(s, &rows, &n, st)) != ONCE_OK) {
        return rv;
    }
    for (size_t i = 0; i < n; i++) {
        const once_input_info *in = &rows[i];
        void *resp = NULL;
        size_t resp_len = 0;
        once_status one;
        int after;

        if (in->state != ONCE_INPUT_PENDING ||
            strcmp(in->principal, c->principal) != 0) {
            continue;
        }
        status_clear(&one);
        rv = resend_named(c, s, in->request_id, in->attempt, false, NULL, &resp,
                          &resp_len, &one, &after);
        na += after == 0;
        np += after == ONCE_INPUT_PENDING;
        ne += after == ONCE_INPUT_LEASE_ENDED;
        nr += after == ONCE_INPUT_REJECTED;
        if (fn != NULL) {
            fn(in, rv, &one, resp, resp_len, arg);
        }
        once_free(resp);
    }
    once_free(rows);
    if (accepted != NULL) {
        *accepted = na;
    }
    if (pending != NULL) {
        *pending = np;
    }
    if (ended != NULL) {
        *ended = ne;
    }
    if (rejected != NULL) {
        *rejected = nr;
    }
    return status_set(st, ONCE_OK, "", "%s", "");
}
