/*
 * lost.h — the handle's lease health, and the calls that end with the
 * lease.
 *
 * Owns: the handle's view of its lease (enum once_client_lease: LIVE,
 * FAILING, LOST), the list of *tracked* calls in flight (mutating calls
 * under the handle's own client id), the start of every nng operation of a
 * call (lost_op_start; for a tracked call under lease_lock, lost_start),
 * and the lease-lost callback.
 * Invariant: LOST is final — the state never leaves it. A tracked call
 * starts an nng operation (send, receive, backoff sleep) only under
 * lease_lock, only while the lease is not lost and only on one of the aios
 * it registered with lost_track, and lost_declare cancels every registered
 * aio under that same lock, so no tracked operation started before the
 * loss outlives it and none starts after it.
 * Never: sends anything, re-sends a call or gives it a new id; never runs
 * the user's callback with a lock held, or twice.
 */
#ifndef CLIENT_LOST_H
#define CLIENT_LOST_H

#include <stdbool.h>

#include <nng/nng.h>

#include "once/client.h"

/* One tracked call, linked into once_client.calls while in flight. Lives
 * on the calling thread's stack. */
typedef struct lost_call {
    nng_aio *aio;   /* its sends and receives */
    nng_aio *sleep; /* its backoff sleeps */
    struct lost_call *prev;
    struct lost_call *next;
} lost_call;

typedef enum lost_op {
    LOST_OP_SEND,  /* nng_ctx_send(ctx, aio) */
    LOST_OP_RECV,  /* nng_ctx_recv(ctx, aio) */
    LOST_OP_SLEEP, /* nng_sleep_aio(ms, aio) */
} lost_op;

/* Initializes the lease-health fields: state is ONCE_CLIENT_LEASE_NONE
 * until lost_set_health is called. */
void lost_init(once_client *c);

/* Destroys what lost_init made. */
void lost_fini(once_client *c);

/* Links lc into the tracked calls, with the call's two aios: aio (send
 * and receive) and sleep (backoff); a loss cancels both. Returns false,
 * linking nothing, when the lease is already lost. */
bool lost_track(once_client *c, lost_call *lc, nng_aio *aio, nng_aio *sleep);

/* Unlinks lc. */
void lost_untrack(once_client *c, lost_call *lc);

/* Starts op on an aio (ms only for LOST_OP_SLEEP), unconditionally: an
 * untracked call's path; tracked calls go through lost_start. */
void lost_op_start(lost_op op, nng_ctx ctx, nng_aio *aio, nng_duration ms);

/* Starts op on one of a tracked call's aios — the sleep aio for
 * LOST_OP_SLEEP (ms only for it), the other for send and receive. Returns
 * false, starting nothing, when the lease is lost. */
bool lost_start(once_client *c, lost_op op, nng_ctx ctx, nng_aio *aio,
                nng_duration ms);

/* Whether the handle's lease is lost. */
bool lost_is_lost(once_client *c);

/* A copy of the status that says how the lease was lost (code
 * ONCE_FAILED_PRECONDITION, reason LEASE_EXPIRED). Only meaningful once
 * lost_is_lost. */
void lost_why(once_client *c, once_status *out);

/* The lease is lost: state LOST, every tracked call cancelled, a line on
 * stderr, and the callback run (unless the handle is closing). A no-op
 * when already lost. */
void lost_declare(once_client *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* A renewal worked (ok) or failed: LIVE or FAILING, unless LOST. */
void lost_set_health(once_client *c, bool ok);

/* once_client_close has begun: a later loss runs no callback and prints
 * nothing. */
void lost_closing(once_client *c);

#endif /* CLIENT_LOST_H */
