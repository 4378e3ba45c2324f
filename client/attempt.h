/*
 * attempt.h — one attempt of one call: its envelope packed, then sent
 * alone when few messages of the handle are in flight, or coalesced with
 * the calls queued behind them (batch.h): as the batch's leader, or
 * waiting for one.
 *
 * Owns: the choice between the three ways an attempt leaves (plain,
 * lead, follow) and what each tells the call (sent or not, answered or
 * not) in its call_state.
 * Invariant: whichever way it left, an attempt ends with the call's own
 * Response or an error; a follower's reply gets a full attempt timeout,
 * within the deadline.
 * Never: retries or backs off; never consults the lease's health (the
 * call's loop does, once a step; the send itself goes through the gate).
 */
#ifndef CLIENT_ATTEMPT_H
#define CLIENT_ATTEMPT_H

#include <stdint.h>

#include "client/call_impl.h"
#include "client/slot.h"

/*
 * Attempt number `attempt` of cs's call on slot s, waiting for a
 * connection until attempt_end and for the reply up to the attempt
 * timeout, never past deadline. Returns 0 with *rp set (the unpacked
 * Response, freed by the caller with once__v1__response__free_unpacked),
 * or an nng error / EPROTO with cst->last_err describing it.
 */
int attempt_make(once_client *c, const call_spec *cs, call_slot *s,
                 uint32_t attempt, uint64_t deadline, uint64_t attempt_end,
                 call_state *cst, Once__V1__Response **rp);

#endif /* CLIENT_ATTEMPT_H */
