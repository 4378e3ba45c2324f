/*
 * admit.h — whether a call may run under its rpc id: the lease's rules.
 *
 * Owns the admission rules of docs/spec.md for a call that carries an rpc
 * id (client_id, seq) and an acknowledgement (first_incomplete): the
 * client's lease is live (one found past its TTL is ended here, durably),
 * the seq is not below the lease's watermark (stale), the acknowledgement
 * is not above the call's own seq, and the seq is within the window of
 * unacknowledged calls once the acknowledgement is applied.
 * Invariant: the checks run in that order, and nothing of the lease is
 * changed before the call is known not to be stale: the acknowledgement is
 * applied only to a call that passed the first three checks.
 * Never: decides who may use a lease (the server's auth asks that first),
 * formats replies, or reads a completion record.
 */
#ifndef LEASE_ADMIT_H
#define LEASE_ADMIT_H

#include <stdint.h>

#include "lease/table.h"
#include "store/store.h"

typedef enum lease_verdict {
    LEASE_ADMITTED = 0,
    LEASE_NOT_LIVE,    /* no live lease: never issued, or ended */
    LEASE_STALE,       /* seq below the watermark */
    LEASE_BAD_ACK,     /* first_incomplete above the seq */
    LEASE_WINDOW_FULL, /* seq too far past the first unacknowledged one */
    LEASE_STORE_ERROR, /* the expiry could not be staged (ENOMEM) */
} lease_verdict;

/* What a call asks to be admitted with. */
typedef struct lease_ask {
    uint64_t client_id;
    uint64_t seq;
    uint64_t first_incomplete;
    uint64_t window; /* --window */
    uint64_t now_ms;
} lease_ask;

/* The verdict and what its reply names. */
typedef struct lease_admission {
    lease_verdict verdict;
    lease_entry *entry;     /* LEASE_ADMITTED (and the refusals after the
                               liveness check): the client's lease */
    int never_issued;       /* LEASE_NOT_LIVE: 1 never issued, 0 ended */
    uint64_t watermark;     /* LEASE_STALE */
    uint64_t first_unacked; /* LEASE_WINDOW_FULL */
} lease_admission;

/* Admits a call: e is the client's entry (lease_table_find; NULL when
 * none), txn the call's transaction (an expiry found due is staged there,
 * so a refusal leaves only once the lease's end is durable). Fills *out;
 * returns out->verdict. */
lease_verdict lease_admit(lease_table *lt, lease_entry *e, store_txn *txn,
                          const lease_ask *ask, lease_admission *out);

#endif /* LEASE_ADMIT_H */
