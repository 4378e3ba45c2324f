/*
 * verify.h — the verifier: what a request costs before it is
 * authenticated, paid on a thread of its own, never on the executor.
 *
 * Owns: one thread and its queue of received requests, a lane per
 * connection served round-robin (fair_queue.h), between the listener and
 * the executor; a small request (at most 4 KiB) that finds the queue
 * empty is verified at once on the thread that received it, which saves
 * the normal path a thread hand-off. For each request: the envelope's shape (a
 * bounded scan of the bytes as received, envelope.h) and its tag (auth_verify,
 * the HMAC over those bytes with a copy of the keys in force). A request that
 * fails either is answered here (INVALID_ARGUMENT or UNAUTHENTICATED,
 * counted in Stats as the executor would count it, nothing written) and
 * its connection is told (listener_auth_result: closed after
 * CONNS_AUTH_FAILS_MAX failures in a row); one that passes goes to the
 * executor carrying its principal and the generation of the tables it
 * verified under, so the executor neither hashes it again nor lets it
 * jump ahead of other principals (executor.h).
 * Invariant: a forged or malformed request costs the executor nothing; a
 * connection's request waits behind at most one request of every other
 * connection with requests queued here.
 * Never: blocks in verifier_submit beyond a short mutex and a small
 * request's scan and HMAC (it is called from nng's aio callbacks);
 * executes or writes anything.
 */
#ifndef SERVER_VERIFY_H
#define SERVER_VERIFY_H

#include <stdbool.h>
#include <stddef.h>

#include "proto/envelope.h"
#include "server/auth.h"
#include "server/call.h"
#include "server/listener.h"
#include "server/stats.h"

typedef struct verifier verifier;

/* Starts the thread; requests that pass go to next(next_arg, r). 0 or an
 * errno. */
int verifier_open(verifier **vp, auth *a, server_stats *stats,
                  listener_submit_fn next, void *next_arg);

/* The listener whose connections are told the verdicts (once it is
 * open; before that none are counted). */
void verifier_set_listener(verifier *v, listener *l);

/* The listener's submit function: queues r (arg is the verifier). */
void verifier_submit(void *arg, listener_req *r);

/* Verifies what is still queued, hands it on, and stops the thread. Call
 * after listener_shutdown. NULL is ok. */
void verifier_close(verifier *v);

/* The shape check shared with the executor: scans body[0, len) into
 * *shape; false with INVALID_ARGUMENT (TOO_MANY_METADATA,
 * MALFORMED_ENVELOPE) set on c. */
bool verify_shape(server_call *c, const void *body, size_t len,
                  envelope_shape *shape);

#endif /* SERVER_VERIFY_H */
