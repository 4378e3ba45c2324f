/*
 * exchange.h — one message out and its reply in, on a call slot: the send
 * that waits for a connection (redialing, asking TLS why there is none),
 * the receive within the attempt timeout, and the backoff sleep between
 * attempts on the slot's other aio.
 *
 * Owns: the nng operations of a call on its slot (slot.h) and what they
 * say about the attempt: sent or not, why not (call_state.last_err, tls),
 * and whether it may have run (maybe_executed).
 * Invariant: a tracked call's operations start through the lease gate
 * (gate_start), so none starts once the lease is lost and a loss cancels
 * the one in flight; the message is the socket's only after a send that
 * took it, and freed here otherwise.
 * Never: sleeps on the aio it sends and receives on (nng 1.5 then reports
 * a later timeout of that aio as success, slot.h); never waits past the
 * call's deadline; never decides whether to retry.
 */
#ifndef CLIENT_EXCHANGE_H
#define CLIENT_EXCHANGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "client/call_impl.h"
#include "client/slot.h"

/*
 * Sends m (ours until nng takes it) on s, waiting for a connection until
 * attempt_end, and waits a full attempt timeout from the send for the
 * reply, never past deadline. tracked: through the lease gate. Returns 0
 * with *replyp (the reply message, freed by the caller), or an nng error
 * with cst->last_err describing it (m freed). cst->sent counts a send.
 */
int exchange_run(once_client *c, bool tracked, call_slot *s, nng_msg *m,
                 uint64_t deadline, uint64_t attempt_end, call_state *cst,
                 nng_msg **replyp);

/* Unpacks a reply envelope into *rp (freed by the caller with
 * once__v1__response__free_unpacked). 0, or EPROTO (cst says so: the call
 * may have run). */
int exchange_unpack(const uint8_t *buf, size_t len, call_state *cst,
                    Once__V1__Response **rp);

/* Waits ms on s's sleep aio; tracked, a lost lease cuts it short (or it
 * does not start). */
void exchange_backoff(once_client *c, bool tracked, call_slot *s, uint64_t ms);

#endif /* CLIENT_EXCHANGE_H */
