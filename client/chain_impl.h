/*
 * chain_impl.h — the chain as the input store uses it (chain.c): a kept
 * input is a chain of one step (docs/chains.md, "The input store").
 *
 * Owns: the one-step mode of a chain handle. In it, the state machine is
 * chain.c's own — a request and its rpc id written before the send, sent
 * only under that id, a lease renewed before a re-send and an ended one
 * filed LEASE_ENDED — with two differences, both in chain_answer: a
 * decided answer is final, so a refusal is written REPLIED synced and an
 * OK answer removes the chain (one synced write; the reply goes to the
 * caller only), and the step's seq is completed then (no commit will
 * consume it); and the first write of a step counts its send.
 * Invariant: a one-step chain is never IDLE in the journal: IDLE in the
 * handle means "not kept".
 * Never: used by the journal's own API (once/journal.h).
 */
#ifndef CLIENT_CHAIN_IMPL_H
#define CLIENT_CHAIN_IMPL_H

#include "client/journal_impl.h"

/*
 * Opens chain_id of j for c in one-step mode: its record when the journal
 * has one (any principal's; nothing is renewed or sent), else an IDLE
 * record in memory only (once_chain_step then writes it PENDING). Claimed
 * as once_chain_open claims (CHAIN_BUSY); freed with once_chain_close.
 */
int chain_open_one_step(once_journal *j, once_client *c, const char *chain_id,
                        once_chain **chp, once_status *st);

/* The handle's record as last written (or the in-memory IDLE one);
 * borrowed, valid until the next call on ch. */
const chain_rec *chain_record_of(const once_chain *ch);

/*
 * The step in flight (PENDING, REPLIED or LEASE_ENDED) given up and
 * recorded again, the same method and request, under a fresh rpc id of
 * the handle (and its principal), then sent as once_chain_send sends; the
 * old seq is released as once_chain_forget releases it. The caller's
 * explicit choice only: whether the old id's request ran is not known.
 */
int chain_step_again(once_chain *ch, once_rpc_id *id, void **resp,
                     size_t *resp_len, once_status *st);

#endif /* CLIENT_CHAIN_IMPL_H */
