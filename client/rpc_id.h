/*
 * rpc_id.h — the rpc id of a mutating call: a fresh seq of the handle's
 * own client id for a new call, exactly the caller's id for a retry, and
 * once_call's older rule between the two (call_kind).
 *
 * Owns: the choice of (client_id, seq) and the refusals made before
 * anything is sent: a retry without an id, an own id whose reply this
 * handle delivered (once_call's rule), a new call without a lease, a call
 * under a lost lease.
 * Invariant: a retry is never given a new seq; a new call's seq comes
 * from the lease gate (gate_seq_assign) and is written to the caller's
 * id only once assigned.
 * Never: sends; never completes a seq (call.c does, at the call's end).
 */
#ifndef CLIENT_RPC_ID_H
#define CLIENT_RPC_ID_H

#include <stdbool.h>

#include "client/call_impl.h"

/* The rpc id of a mutating call of kind into cs (client_id, seq,
 * tracked), assigning a seq for a new call (*assigned then true, and *id
 * set when id is not NULL). ONCE_OK, or the refusal in st (nothing was
 * sent). */
int rpc_id_settle(once_client *c, call_kind kind, once_rpc_id *id,
                  call_spec *cs, bool *assigned, once_status *st);

#endif /* CLIENT_RPC_ID_H */
