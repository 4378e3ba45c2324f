/*
 * envelope.h — the bytes of a call's requests: the Request envelope of one
 * attempt, the batch envelope around several, and whether a call fits
 * what onced reads.
 *
 * Owns: the fields of every envelope libonce sends (method, rpc id,
 * first_incomplete, attempt number, time left, principal, payload) and the
 * authentication tag over exactly those bytes when the handle signs.
 * Invariant: a retry's envelope carries the payload bytes as the caller
 * gave them, never a re-encoding (docs/protocol.md, "The payload is
 * compared as sent"); a batch carries its entries as packed, unchanged.
 * Never: sends, waits or retries; never changes an rpc id.
 */
#ifndef CLIENT_ENVELOPE_H
#define CLIENT_ENVELOPE_H

#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "client/call_impl.h"

/* Packs the envelope of cs's attempt number `attempt`, with timeout_ms
 * left, into a fresh nng message *mp (the caller's until a successful
 * send). first_incomplete is the lease gate's acknowledgement for cs's
 * id. 0 or an nng error. */
int envelope_pack(once_client *c, const call_spec *cs, uint32_t attempt,
                  uint64_t timeout_ms, nng_msg **mp);

/* Packs the batch envelope (method WIRE_BATCH_METHOD, the handle's
 * principal, signed like any request when the handle signs, no rpc id)
 * around the packed Requests ents[0, n) into *mp (the caller's until
 * sent). 0 or an nng error. */
int envelope_pack_batch(once_client *c, uint8_t *const *ents,
                        const size_t *lens, size_t n, uint64_t timeout_ms,
                        nng_msg **mp);

/* The most bytes of entries in one batch: what onced reads (its
 * --recv-max, once known) less room for the outer envelope. */
size_t envelope_batch_room(once_client *c);

/* ONCE_OK when cs's envelope fits what onced reads (its --recv-max, when
 * an OpenLease reply told it): a larger one would be dropped by its
 * transport unanswered, and the call would end OUTCOME_UNKNOWN after its
 * whole deadline. Sized for the largest attempt number and timeout. Else
 * INVALID_ARGUMENT/REQUEST_TOO_LARGE in st. */
int envelope_fits(once_client *c, const call_spec *cs, once_status *st);

#endif /* CLIENT_ENVELOPE_H */
