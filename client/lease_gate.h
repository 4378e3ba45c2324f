/*
 * lease_gate.h — the lease's state as the call engine sees it: the handle's
 * own client id, its window of incomplete seqs (what every call
 * acknowledges), the lease's health and the calls that end with it.
 *
 * The lower half of the lease layer: no I/O, no threads, so the call
 * engine (call.c) can consult it on every attempt. The upper half, lease.c,
 * opens, renews and closes the lease through the call engine and tells
 * this gate what it learned; lease.c's opening comment is the whole story
 * of a handle's lease.
 *
 * Owns: struct lease_gate — the seq window (under win_lock), the health
 * state, the expiry estimate, the tracked calls in flight and the
 * lease-lost callback (under lock).
 * Invariant: seqs of one handle are assigned in increasing order from 1
 * and never reused; first_incomplete only moves forward. LOST is final —
 * the state never leaves it. A tracked call starts an nng operation (send,
 * receive, backoff sleep) only under lock, only while the lease is not
 * lost and only on one of the aios it registered with gate_track, and
 * gate_declare cancels every registered aio under that same lock, so no
 * tracked operation started before the loss outlives it and none starts
 * after it. Neither lock is ever taken under the other.
 * Never: sends anything, re-sends a call or gives it a new id; never runs
 * the user's callback with a lock held, or twice; never includes
 * client_impl.h (the gate knows nothing of the handle around it).
 */
#ifndef CLIENT_LEASE_GATE_H
#define CLIENT_LEASE_GATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <nng/nng.h>

#include "once/client.h"
#include "client/window.h"

/* One tracked call, linked into lease_gate.calls while in flight. Lives
 * on the calling thread's stack. */
typedef struct gate_call {
    nng_aio *aio;   /* its sends and receives */
    nng_aio *sleep; /* its backoff sleeps */
    struct gate_call *prev;
    struct gate_call *next;
} gate_call;

typedef enum gate_op {
    GATE_OP_SEND,  /* nng_ctx_send(ctx, aio) */
    GATE_OP_RECV,  /* nng_ctx_recv(ctx, aio) */
    GATE_OP_SLEEP, /* nng_sleep_aio(ms, aio) */
} gate_op;

typedef struct lease_gate {
    once_client *owner; /* handed to the callback; read-only */
    uint64_t client_id; /* the handle's own id, 0 without a lease; set by
                           gate_grant before the handle is shared */
    uint64_t ttl_ms;    /* the TTL OpenLease granted; as client_id */

    pthread_mutex_t win_lock; /* protects win */
    window win;               /* incomplete seqs of client_id */

    pthread_mutex_t lock;       /* protects everything below */
    int state;                  /* enum once_client_lease */
    uint64_t until_ms;          /* clock_now_ms() by which the server has
                                   expired the lease unless renewed since:
                                   the last renewal's reply time plus the
                                   remaining TTL it reported */
    bool closing;               /* the handle is closing: no callback */
    gate_call *calls;           /* tracked calls in flight */
    once_lease_lost_fn lost_fn; /* the callback, NULL when none */
    void *lost_arg;
    bool lost_notified;   /* the callback has run */
    once_status lost_why; /* how the loss was learned (valid once LOST) */
} lease_gate;

/* ---- life --------------------------------------------------------------- */

/* State ONCE_CLIENT_LEASE_NONE, no id, an empty window from seq 1. */
void gate_init(lease_gate *g, once_client *owner);
void gate_fini(lease_gate *g);

/* OpenLease granted client_id with ttl_ms at local time now_ms: LIVE. Only
 * before the handle is shared. */
void gate_grant(lease_gate *g, uint64_t client_id, uint64_t ttl_ms,
                uint64_t now_ms);

/* The handle is closing: a later loss runs no callback and prints
 * nothing. */
void gate_closing(lease_gate *g);

/* ---- seqs and acknowledgements ------------------------------------------ */

/* Whether client_id is the handle's own (non-zero) id. */
bool gate_tracks(const lease_gate *g, uint64_t client_id);

/* Assigns the next seq of the own id (marked incomplete). 0 or ENOMEM. */
int gate_seq_assign(lease_gate *g, uint64_t *seq);

/* The reply for (client_id, seq) was delivered, or the caller released
 * seq: marks it complete when client_id is the own id; else a no-op. */
void gate_seq_complete(lease_gate *g, uint64_t client_id, uint64_t seq);

/* Whether (client_id, seq) is an id of this handle that it assigned and
 * has completed (its reply delivered, or released): a retry of it can only
 * replay. */
bool gate_seq_completed(lease_gate *g, uint64_t client_id, uint64_t seq);

/* The first_incomplete a request under (client_id, seq) carries: the own
 * watermark for an incomplete seq of the own id; 0 ("no acknowledgement")
 * for any other id, or for a seq of the own id that already completed (the
 * watermark is above it, and the server refuses an acknowledgement above
 * the call's own seq). */
uint64_t gate_ack(lease_gate *g, uint64_t client_id, uint64_t seq);

/* The own watermark (lowest incomplete seq, or the next to assign). */
uint64_t gate_first_incomplete(lease_gate *g);

/* True when every assigned seq completed: nothing can be retried. */
bool gate_all_complete(lease_gate *g);

/* ---- health -------------------------------------------------------------- */

/* One of enum once_client_lease. */
int gate_state(lease_gate *g);

/* Whether the lease is lost. */
bool gate_is_lost(lease_gate *g);

/* A copy of how the lease was lost (FAILED_PRECONDITION/LEASE_EXPIRED).
 * Only meaningful once gate_is_lost. */
void gate_why(lease_gate *g, once_status *out);

/* The local expiry estimate (clock_now_ms time). */
uint64_t gate_until(lease_gate *g);

/* A renewal answered at local time reply_ms with remaining_ms left: LIVE,
 * expiry moved forward (unless LOST). */
void gate_renewed(lease_gate *g, uint64_t reply_ms, uint64_t remaining_ms);

/* A renewal failed: FAILING (unless LOST). */
void gate_failing(lease_gate *g);

/* The lease is lost: state LOST, every tracked call cancelled, a line on
 * stderr, and the callback run (unless the handle is closing). A no-op
 * when already lost. */
void gate_declare(lease_gate *g, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Sets or clears the lease-lost callback (once_client_on_lease_lost). */
void gate_on_lost(lease_gate *g, once_lease_lost_fn fn, void *arg);

/* ---- tracked calls --------------------------------------------------------
 */

/* Links gc into the tracked calls, with the call's two aios: aio (send
 * and receive) and sleep (backoff); a loss cancels both. Returns false,
 * linking nothing, when the lease is already lost. */
bool gate_track(lease_gate *g, gate_call *gc, nng_aio *aio, nng_aio *sleep);

/* Unlinks gc. */
void gate_untrack(lease_gate *g, gate_call *gc);

/* Starts op on an aio (ms only for GATE_OP_SLEEP), unconditionally: an
 * untracked call's path; tracked calls go through gate_start. */
void gate_op_start(gate_op op, nng_ctx ctx, nng_aio *aio, nng_duration ms);

/* Starts op on one of a tracked call's aios. Returns false, starting
 * nothing, when the lease is lost. */
bool gate_start(lease_gate *g, gate_op op, nng_ctx ctx, nng_aio *aio,
                nng_duration ms);

#endif /* CLIENT_LEASE_GATE_H */
