/*
 * events.c — the lifecycle events of start grants on the outbox's system
 * topic (grants_emit): grant issued, finished, cancelled; work queued,
 * claimed, expired.
 *
 * Owns which call's reply makes which events: RequestGrant (a new grant,
 * not an existing one returned), FinishGrant, CancelGrant, Enqueue, Claim
 * (each row claimed, each row the claim found expired). The events carry
 * the grant and work rows of the reply, never its credential.
 * Invariant: runs in the call's transaction after its rule succeeded, so
 * the events commit with the transition and its completion record; a
 * replay (which runs no rule) makes none.
 * Never: changes a grant or a row.
 */
#include <errno.h>
#include <string.h>

#include "grants/rules.h"
#include "outbox/outbox.h"
#include "proto/grants.pb-c.h"
#include "proto/outbox.pb-c.h"

/* Appends one event of kind with grant and work (either may be NULL). A
 * work row's job payload is left out: it is the submitter's, as large as
 * a request may be (test_replication enqueues 900 KB), while an event's
 * payload is bounded by --outbox-payload-max; a consumer that needs it
 * reads the row (Grants.GetSurface) by its request id. */
static int
emit(store_txn *txn, const outbox_limits *l, outbox_producer *p,
     const char *kind, Once__V1__Grant *grant, Once__V1__WorkRow *work,
     outbox_outcome *o)
{
    Once__V1__SystemEvent ev = ONCE__V1__SYSTEM_EVENT__INIT;
    ProtobufCBinaryData kept = {0, NULL};
    int rv;

    if (work != NULL) { /* put back below: the unpacked reply frees it */
        kept = work->payload;
        work->payload.data = NULL;
        work->payload.len = 0;
    }
    ev.kind = (char *)kind;
    ev.grant = grant;
    ev.work = work;
    rv = outbox_system_append(txn, l, p, &ev, o);
    if (work != NULL) {
        work->payload = kept;
    }
    return rv;
}

static int
emit_claim(store_txn *txn, const outbox_limits *l, outbox_producer *p,
           const Once__V1__ClaimResponse *r, outbox_outcome *o)
{
    int rv = 0;

    for (size_t i = 0; i < r->n_expired && rv == 0 && o->code == 0; i++) {
        rv = emit(txn, l, p, "work.expired", NULL, r->expired[i], o);
    }
    for (size_t i = 0; i < r->n_claimed && rv == 0 && o->code == 0; i++) {
        rv = emit(txn, l, p, "work.claimed", r->claimed[i]->grant,
                  r->claimed[i]->row, o);
    }
    return rv;
}

int
grants_emit(store_txn *txn, const outbox_limits *l, outbox_producer *p,
            const char *method, const uint8_t *resp, size_t len,
            outbox_outcome *o)
{
    const ProtobufCMessageDescriptor *d = NULL;
    ProtobufCMessage *m;
    int rv = 0;

    memset(o, 0, sizeof(*o));
    if (strcmp(method, "RequestGrant") == 0) {
        d = &once__v1__request_grant_response__descriptor;
    } else if (strcmp(method, "FinishGrant") == 0) {
        d = &once__v1__finish_grant_response__descriptor;
    } else if (strcmp(method, "CancelGrant") == 0) {
        d = &once__v1__cancel_grant_response__descriptor;
    } else if (strcmp(method, "Enqueue") == 0) {
        d = &once__v1__enqueue_response__descriptor;
    } else if (strcmp(method, "Claim") == 0) {
        d = &once__v1__claim_response__descriptor;
    } else {
        return 0; /* no lifecycle event */
    }
    if ((m = protobuf_c_message_unpack(d, NULL, len, resp)) == NULL) {
        return o->err = EBADMSG;
    }
    if (d == &once__v1__request_grant_response__descriptor) {
        Once__V1__RequestGrantResponse *r = (void *)m;
        if (!r->existing && r->grant != NULL) {
            rv = emit(txn, l, p, "grant.issued", r->grant, NULL, o);
        }
    } else if (d == &once__v1__finish_grant_response__descriptor) {
        rv = emit(txn, l, p, "grant.finished",
                  ((Once__V1__FinishGrantResponse *)m)->grant, NULL, o);
    } else if (d == &once__v1__cancel_grant_response__descriptor) {
        rv = emit(txn, l, p, "grant.cancelled",
                  ((Once__V1__CancelGrantResponse *)m)->grant, NULL, o);
    } else if (d == &once__v1__enqueue_response__descriptor) {
        rv = emit(txn, l, p, "work.queued", NULL,
                  ((Once__V1__EnqueueResponse *)m)->row, o);
    } else {
        rv = emit_claim(txn, l, p, (Once__V1__ClaimResponse *)m, o);
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return rv;
}
