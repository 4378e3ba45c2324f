/*
 * rpc_id.c — which rpc id a mutating call carries (rpc_id.h).
 *
 * Owns: new, retry and once_call's rule; the refusals before sending.
 * Invariant: every refusal here comes before a seq is assigned, so it
 * leaves the window as it was; a call refused after its seq was assigned
 * (too large, envelope_fits) has that seq released by call_conclude.
 * Never: touches the network or the handle's lock.
 */
#include "client/rpc_id.h"

#include <inttypes.h>

#include "client/client_impl.h"
#include "client/lease_gate.h"
#include "client/status.h"

/* A mutating call under a lost lease: refused here, nothing sent. */
static int
rpc_id_lost(once_client *c, const call_spec *cs, once_status *st)
{
    once_status why;

    gate_why(&c->gate, &why);
    return status_set(st, ONCE_FAILED_PRECONDITION, ONCE_REASON_LEASE_EXPIRED,
                      "the lease of client %" PRIu64
                      " is lost (%s); nothing was sent — open a new handle",
                      cs->client_id, why.message);
}

/* Exactly *id; either: once_call's rule, which refuses an own id whose
 * reply was delivered. */
static int
rpc_id_retry(once_client *c, const once_rpc_id *id, bool either, call_spec *cs,
             once_status *st)
{
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
        return rpc_id_lost(c, cs, st);
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

/* A fresh seq of the handle's own client id. */
static int
rpc_id_new(once_client *c, once_rpc_id *id, call_spec *cs, bool *assigned,
           once_status *st)
{
    if (c->gate.client_id == 0) {
        return status_set(st, ONCE_FAILED_PRECONDITION, ONCE_REASON_NO_LEASE,
                          "a new mutating call needs a client id: open the "
                          "handle with a lease, or retry a known rpc id");
    }
    cs->client_id = c->gate.client_id;
    cs->tracked = true;
    if (gate_is_lost(&c->gate)) {
        return rpc_id_lost(c, cs, st);
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

int
rpc_id_settle(once_client *c, call_kind kind, once_rpc_id *id, call_spec *cs,
              bool *assigned, once_status *st)
{
    bool either = kind == CALL_EITHER;

    if (either) {
        kind = (id != NULL && id->seq != 0) ? CALL_RETRY : CALL_NEW;
    }
    if (kind == CALL_RETRY || kind == CALL_HELD) {
        cs->held = kind == CALL_HELD;
        return rpc_id_retry(c, id, either, cs, st);
    }
    return rpc_id_new(c, id, cs, assigned, st);
}
