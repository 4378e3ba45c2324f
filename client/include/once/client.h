/*
 * once/client.h — libonce, the client library of onced.
 *
 * A once_client is an opaque, thread-safe handle: many threads may have
 * calls in flight on one handle at once (each call uses its own nng
 * context). Every mutating call carries an rpc id (client_id, seq). The
 * library takes the client id from OpenLease, assigns seqs, tracks the
 * lowest seq whose reply has not been delivered (first_incomplete) and sends
 * it on every call, and retries a call with the *same* id — exponential
 * backoff with jitter, a bounded number of attempts, one deadline over all
 * attempts. A call that was sent at least once and then given up on ends
 * ONCE_UNKNOWN with reason "OUTCOME_UNKNOWN", never as a failure: the caller
 * gets the rpc id back and may retry exactly that id later.
 *
 * A mutating call answered RESOURCE_EXHAUSTED/WINDOW_FULL (too many
 * unacknowledged seqs; nothing was executed) is retried with backoff within
 * the deadline, each attempt carrying the newest acknowledgement. If it
 * still ends on WINDOW_FULL, that is returned and the seq counts as
 * complete — a definitive "not executed" — unless an earlier attempt went
 * unanswered, in which case the call ends OUTCOME_UNKNOWN. The same holds
 * for LEASE_EXPIRED and DEADLINE_EXCEEDED answers: they are definitive only
 * when no earlier attempt of the call may have run.
 *
 * Leases: a handle opened with a lease renews it in the background at about
 * TTL/3. The lease is *lost* when the server answers a renewal or a call
 * under the handle's client id with FAILED_PRECONDITION/LEASE_EXPIRED, or
 * when no renewal has succeeded for the whole TTL the server last granted
 * (by then a single onced has expired it; a restarted onced, or a
 * replicated cluster's new leader, gives live leases a fresh TTL, but the
 * handle cannot know in time). From that moment: every mutating
 * call in flight under the handle's client id ends at once — ONCE_UNKNOWN
 * with reason "OUTCOME_UNKNOWN" if it was sent, FAILED_PRECONDITION /
 * "LEASE_EXPIRED" if it never left this process — without waiting for its
 * deadline; later mutating calls under that id fail the same way without
 * sending anything; once_client_lease_state() says ONCE_CLIENT_LEASE_LOST;
 * and the callback set with once_client_on_lease_lost() runs once. The
 * library never opens a new lease by itself and never re-sends an operation
 * under a new id: open a new handle for new calls. A failed renewal is
 * retried after the handle's backoff until the TTL's end, so a cluster
 * without a leader for less than 2/3 of the TTL (renewals succeed every
 * TTL/3) never costs the lease (docs/replication.md, "Client leases
 * across a failover": choose the TTL above failover time).
 *
 * ABI rule (the one libonce follows, rather than LevelDB's opaque option
 * setters): a struct a caller allocates (once_options, once_status,
 * once_rpc_id, once_stats, ...) never changes size or layout, and a
 * function never changes its signature or meaning; new features come as
 * new functions and new structs (once_security, once_collector_stats,
 * once_call_new). So a program built against an older header keeps
 * working with a newer libonce.so.0. Exported: exactly the functions
 * marked ONCE_API in the installed headers (once/client.h, once/admin.h,
 * once/grants.h, once/inputs.h, once/journal.h, once/kv.h); nothing else is
 * supported API.
 *
 * New calls and retries: once_call_new / once_counter_incr_new always make
 * a new call (a fresh rpc id, written back); once_call_retry /
 * once_counter_incr_retry re-send exactly a known id. The older
 * once_call / once_counter_incr decide by id->seq (0: new) and refuse,
 * with reason ONCE_REASON_RPC_ID_COMPLETED and nothing sent, an id whose
 * reply this handle already delivered — the trap of reusing one id
 * variable in a loop.
 *
 * Return values: every call returns a status code (enum once_code, the gRPC
 * canonical codes; ONCE_OK is 0) and, when st is not NULL, fills *st with the
 * code, the machine-readable reason and a message for people. Library-side
 * problems map to codes too (bad arguments: ONCE_INVALID_ARGUMENT; server
 * unreachable and nothing sent: ONCE_UNAVAILABLE).
 */
#ifndef ONCE_CLIENT_H
#define ONCE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <once/export.h>
#include <once/reasons.h>
#include <once/version.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct once_client once_client;

/* gRPC canonical status codes (same numbers as once.v1.Code). */
enum once_code {
    ONCE_OK = 0,
    ONCE_CANCELLED = 1,
    ONCE_UNKNOWN = 2,
    ONCE_INVALID_ARGUMENT = 3,
    ONCE_DEADLINE_EXCEEDED = 4,
    ONCE_NOT_FOUND = 5,
    ONCE_ALREADY_EXISTS = 6,
    ONCE_PERMISSION_DENIED = 7,
    ONCE_RESOURCE_EXHAUSTED = 8,
    ONCE_FAILED_PRECONDITION = 9,
    ONCE_ABORTED = 10,
    ONCE_OUT_OF_RANGE = 11,
    ONCE_UNIMPLEMENTED = 12,
    ONCE_INTERNAL = 13,
    ONCE_UNAVAILABLE = 14,
    ONCE_DATA_LOSS = 15,
    ONCE_UNAUTHENTICATED = 16,
};

/* An rpc id. seq 0 means "not assigned yet". */
typedef struct once_rpc_id {
    uint64_t client_id;
    uint64_t seq;
} once_rpc_id;

/* The outcome of one call. Plain data, no ownership. */
typedef struct once_status {
    int code;          /* enum once_code */
    char reason[64];   /* "RPC_ID_CONFLICT", "OUTCOME_UNKNOWN", or "" */
    char message[256]; /* for people */
    bool replayed;     /* the server returned a stored result */
    uint32_t attempts; /* how many times the request was sent */
} once_status;

/*
 * Reasons: the machine-readable half of a status, named so no caller has
 * to spell (or strcmp) the strings: ONCE_REASON_OUTCOME_UNKNOWN,
 * ONCE_REASON_LEASE_EXPIRED, ... Each is defined, with its code, meaning
 * and what to do next, in <once/reasons.h> (included above), generated
 * from the one table of reasons (proto/reasons.tsv; docs/spec.md lists
 * it). A server may send others, which once_status_is compares as well.
 */

typedef struct once_options {
    const char *url;             /* required: "ipc:///tmp/once.ipc"; or
                                    the replicas of a cluster, comma-
                                    separated (docs/replication.md) */
    const char *principal;       /* NULL: "anonymous" */
    uint32_t deadline_ms;        /* over all attempts; 0: 10000 */
    uint32_t attempt_timeout_ms; /* one attempt; 0: 2000 */
    uint32_t max_attempts;       /* 0: 10 */
    uint32_t backoff_initial_ms; /* 0: 5 */
    uint32_t backoff_max_ms;     /* 0: 500; after a follower's refusal
                                    that moved nothing (a leader change),
                                    at most 100 whatever this says */
    uint64_t lease_ttl_ms;       /* asked of OpenLease; 0: server default */
    bool no_lease; /* do not open a lease: for reads, admin calls and
                      retries of an explicit rpc id */
} once_options;

/* Fills *o with the defaults (all zero, which means "default"). */
ONCE_API void once_options_init(once_options *o);

/*
 * Security of a handle (once_client_open_secure): the principal's key, so
 * every request carries an authentication tag (libsodium crypto_auth over
 * the envelope as sent), and the CA that tls+tcp:// servers must be signed
 * by. A new struct rather than new once_options fields (see "ABI" above).
 * Plain data: the library copies what it needs during the open.
 */
typedef struct once_security {
    /* A key file ("NAME KEYHEX", written by `oncectl principal add
     * --key-out` or onced --dev): the handle signs as NAME. If
     * once_options.principal is set too, it must be the same name. */
    const char *key_file;
    /* Or the key itself (ONCE_KEY_BYTES bytes) of once_options.principal;
     * used only when key_file is NULL. NULL and no key_file: no tag. */
    const uint8_t *key;
    /* tls+tcp:// URLs: PEM file of the CA(s) the server's certificate must
     * chain to; the server is always verified (a server that does not
     * present a certificate signed by them is never talked to). */
    const char *tls_ca_file;
    /* The name the certificate must carry; NULL: the host of the URL. */
    const char *tls_server_name;
} once_security;

#define ONCE_KEY_BYTES 32

/* Fills *s with "nothing" (all zero). */
ONCE_API void once_security_init(once_security *s);

/*
 * once_client_open with security settings (sec may be NULL: exactly
 * once_client_open). The OpenLease of the handle is itself signed. A key
 * file that cannot be read, or a principal that does not match it, gives
 * ONCE_INVALID_ARGUMENT ("BAD_KEY") and nothing is sent.
 */
ONCE_API int once_client_open_secure(once_client **cp, const once_options *o,
                                     const once_security *sec, once_status *st);

/*
 * Opens a client: dials o->url (non-blocking dial, the socket reconnects by
 * itself, 10 ms to 1 s apart; a call that finds no connection for a
 * second, or for a whole attempt when attempts are shorter, also starts the
 * dial over, at most once a second) and, unless o->no_lease, opens a lease
 * to get a client id. On
 * success *cp is the handle (free with once_client_close) and ONCE_OK is
 * returned.
 */
ONCE_API int once_client_open(once_client **cp, const once_options *o,
                              once_status *st);

/*
 * Closes the handle; calls still in flight must have returned. NULL is
 * accepted. When the handle holds a live lease and no seq of it is
 * incomplete (every reply was delivered or released with
 * once_client_release), close first sends CloseLease (waiting at most
 * min(deadline, 2s)), so the collector can reclaim the client's completion
 * records at once: none of its rpc ids can be retried afterwards (they get
 * LEASE_EXPIRED). When some seq is still incomplete (an OUTCOME_UNKNOWN the
 * caller may retry from elsewhere with the explicit id), the lease is left
 * alone and ends by itself after its TTL, since nothing renews it any more.
 */
ONCE_API void once_client_close(once_client *c);

/*
 * Closes the handle but leaves its lease alive: no CloseLease is sent and
 * renewal stops, so the lease ends by itself after its TTL. Until then any
 * handle (another process too) may retry the handle's rpc ids with
 * once_call_retry and get the stored result. For one-shot tools that print
 * an rpc id (oncectl). *lease_left_ms (may be NULL) is about how long the
 * lease stays live from now: the TTL the server last reported, counted
 * from its reply (0 when the handle had no lease or it was lost). NULL c
 * is accepted.
 */
ONCE_API void once_client_close_keep_lease(once_client *c,
                                           uint64_t *lease_left_ms);

/* The client id from the lease, or 0 with no lease. */
ONCE_API uint64_t once_client_id(const once_client *c);

/* The lowest seq whose reply has not been delivered (what the next call will
 * send as first_incomplete). */
ONCE_API uint64_t once_client_first_incomplete(const once_client *c);

/*
 * The caller will never retry this seq again (a call that ended
 * OUTCOME_UNKNOWN stays "incomplete" and holds first_incomplete back until
 * it is retried to completion or released here).
 */
ONCE_API void once_client_release(once_client *c, uint64_t seq);

/* The handle's view of its own lease (see "Leases" above). */
enum once_client_lease {
    ONCE_CLIENT_LEASE_NONE = 0,    /* opened with no_lease */
    ONCE_CLIENT_LEASE_LIVE = 1,    /* the last renewal (or the open) worked */
    ONCE_CLIENT_LEASE_FAILING = 2, /* the last renewal failed; the lease may
                                      still be live, renewal goes on */
    ONCE_CLIENT_LEASE_LOST = 3,    /* ended for good: mutating calls under
                                      this client id fail LEASE_EXPIRED */
};

/* One of enum once_client_lease. NULL gives ONCE_CLIENT_LEASE_NONE. */
ONCE_API int once_client_lease_state(const once_client *c);

/*
 * Called once when the handle's lease is lost. why has code
 * ONCE_FAILED_PRECONDITION, reason "LEASE_EXPIRED" and a message saying how
 * it was learned; it is valid during the call only. It runs on the thread
 * that noticed the loss (the renewal thread or a calling thread), after the
 * calls in flight were told, with no library lock held; it must return
 * promptly and must not call once_client_close on c.
 */
typedef void (*once_lease_lost_fn)(once_client *c, uint64_t client_id,
                                   const once_status *why, void *arg);

/*
 * Sets (fn non-NULL) or clears (fn NULL) the lease-lost callback and its
 * argument. If the lease is already lost when fn is set and no callback
 * has run yet, fn runs at once, on the calling thread, before this returns.
 * At most one callback run per handle. A handle without a lease never
 * loses it, so its callback never runs.
 */
ONCE_API void once_client_on_lease_lost(once_client *c, once_lease_lost_fn fn,
                                        void *arg);

/*
 * Where a handle sends its calls (docs/replication.md, "libonce"). A handle
 * given several URLs (a replicated cluster's replicas) sends every attempt
 * to one of them, the target: it starts with the first, moves to the URL
 * a follower's UNAVAILABLE/NOT_LEADER names when that URL is one of its
 * own, and to the next URL (round robin) when the target cannot be
 * reached or stops answering. Plain data, filled by once_client_route; the
 * counters count since the open, over every call of the handle.
 */
typedef struct once_route {
    char url[256];           /* the target now (truncated if longer) */
    uint32_t index;          /* its position in once_options.url, from 0 */
    uint32_t urls;           /* how many URLs the handle was given */
    uint64_t not_leader;     /* attempts answered UNAVAILABLE/NOT_LEADER */
    uint64_t hints_followed; /* moves to the URL such an answer named */
    uint64_t hints_ignored;  /* answers whose URL was not followed: not
                                one of the handle's, or found down a
                                moment ago */
    uint64_t rotations;      /* moves to the next URL (no connection, no
                                reply, or a leader under an unknown URL) */
} once_route;

/* Fills *out with c's route. ONCE_OK, or ONCE_INVALID_ARGUMENT for a NULL
 * argument. */
ONCE_API int once_client_route(once_client *c, once_route *out);

/* "ALREADY_EXISTS" for ONCE_ALREADY_EXISTS. A static string. */
ONCE_API const char *once_strerror(int code);

/* Whether st's reason is reason (one of the ONCE_REASON_ strings, or any
 * other). false for a NULL st or reason. */
ONCE_API bool once_status_is(const once_status *st, const char *reason);

/* Whether st says the call may or may not have taken effect (ONCE_UNKNOWN
 * with ONCE_REASON_OUTCOME_UNKNOWN): the caller keeps the rpc id and may
 * retry exactly it with once_call_retry. */
ONCE_API bool once_status_outcome_unknown(const once_status *st);

/* Whether st says the lease of the call's client id has ended
 * (FAILED_PRECONDITION with ONCE_REASON_LEASE_EXPIRED). */
ONCE_API bool once_status_lease_expired(const once_status *st);

/* "0.1.0": the version of the libonce.so in use (ONCE_VERSION_STRING is
 * the headers'). A static string. */
ONCE_API const char *once_version(void);

/*
 * The generic call. method is a full name ("/once.v1.Counter/Increment").
 * When mutating is true the call carries an rpc id: if id is NULL or
 * id->seq == 0, the library assigns the next seq of this client (and writes
 * it back to *id when id is not NULL) — otherwise exactly *id is sent, a
 * retry of that id. On ONCE_OK, *resp (when resp is not NULL) is a malloc'd
 * copy of the response payload, freed by the caller with once_free(), and
 * *resp_len its length. On any other code *resp is NULL.
 */
ONCE_API int once_call(once_client *c, const char *method, bool mutating,
                       once_rpc_id *id, const void *req, size_t req_len,
                       void **resp, size_t *resp_len, once_status *st);
/* (once_call with a non-zero id->seq of this handle's own client id whose
 * reply was already delivered, or that was released, sends nothing and
 * gives ONCE_INVALID_ARGUMENT / ONCE_REASON_RPC_ID_COMPLETED.) */

/*
 * A new mutating call: always a fresh seq of this handle's client id,
 * whatever *id held before; the id is written to *id (id may be NULL).
 * Otherwise as once_call. Needs a handle with a lease (ONCE_REASON_NO_LEASE
 * otherwise).
 */
ONCE_API int once_call_new(once_client *c, const char *method, once_rpc_id *id,
                           const void *req, size_t req_len, void **resp,
                           size_t *resp_len, once_status *st);

/*
 * A retry of exactly *id (client_id and seq non-zero), with the same
 * request as the first attempt: the server runs it if it never ran, or
 * answers with the stored result (st->replayed). Any handle may retry any
 * id while its lease lives. A retry of an id this handle already completed
 * replays too while the server keeps the result; once it has been
 * acknowledged away the answer is FAILED_PRECONDITION /
 * ONCE_REASON_STALE_RPC, saying so.
 */
ONCE_API int once_call_retry(once_client *c, const char *method,
                             const once_rpc_id *id, const void *req,
                             size_t req_len, void **resp, size_t *resp_len,
                             once_status *st);

/* Frees memory handed out by libonce. NULL is accepted. */
ONCE_API void once_free(void *p);

/* ---- once.v1.Counter ---------------------------------------------------- */

/* Increment(name, by); *value is the counter right after this increment.
 * id as in once_call. */
ONCE_API int once_counter_incr(once_client *c, const char *name, int64_t by,
                               once_rpc_id *id, int64_t *value,
                               once_status *st);

/* A new Increment (once_call_new): *id (may be NULL) receives its id. */
ONCE_API int once_counter_incr_new(once_client *c, const char *name, int64_t by,
                                   once_rpc_id *id, int64_t *value,
                                   once_status *st);

/* A retry of the Increment sent as *id, with the same name and by
 * (once_call_retry). */
ONCE_API int once_counter_incr_retry(once_client *c, const char *name,
                                     int64_t by, const once_rpc_id *id,
                                     int64_t *value, once_status *st);

ONCE_API int once_counter_get(once_client *c, const char *name, int64_t *value,
                              once_status *st);

/* ---- Asynchronous calls --------------------------------------------------
 *
 * One thread can keep many calls of one handle in flight: an async call
 * returns at once with a once_future; its outcome arrives later, through a
 * callback, once_wait, or both. An async call follows exactly the rules of
 * its blocking twin (it runs the same call engine): one rpc id for all its
 * attempts, backoff, the handle's deadline over all of them, and a
 * mutating call that may have run ends ONCE_UNKNOWN / OUTCOME_UNKNOWN with
 * its rpc id (once_future_id), never a plain failure. New calls leave in
 * groups: everything queued goes in one message (up to 256 calls), with
 * at most two such messages in flight; a call that must retry is retried
 * on a thread of its own, at most 128 at once (at most 65536 calls
 * pending, then ONCE_RESOURCE_EXHAUSTED / NOT_SENT and nothing queued).
 *
 * The callback runs on one of the handle's call threads (never inside an
 * nng callback), after the future is finished, with no lock of the handle
 * held: it may call once_wait / once_future_* on its future, free it, and
 * start new calls, but must not close the handle. once_client_close waits
 * for every pending async call and its callback first.
 *
 * Calls in flight on one handle (async, or from many threads) share
 * messages: while two messages of the handle are in flight, further calls
 * queue and leave together as one batch (docs/protocol.md, "Batches"),
 * each keeping its own rpc id, status and retries.
 *
 * A future belongs to the caller until once_future_free (which may come
 * before the call finished: the call still runs, and its callback still
 * runs). Passing fp == NULL with a callback keeps no future for the caller.
 */
typedef struct once_future once_future;

/* Called once when the call has finished. */
typedef void (*once_done_fn)(once_future *f, void *arg);

/*
 * An async call: method and the request bytes (copied) as in once_call.
 * A mutating call with id NULL or id->seq 0 is a new call
 * (once_call_new; its id is read with once_future_id), otherwise a retry
 * of exactly *id (copied), as once_call_retry: it replays an id this
 * handle completed while the server keeps its result. On
 * ONCE_OK the call is queued and *fp (when fp is not NULL) is its future;
 * done (may be NULL when fp is not) runs with arg when it ends. Any other
 * code means nothing was queued or sent (bad arguments, no memory, too many
 * pending, handle closing), st saying why.
 */
ONCE_API int once_call_async(once_client *c, const char *method, bool mutating,
                             const once_rpc_id *id, const void *req,
                             size_t req_len, once_done_fn done, void *arg,
                             once_future **fp, once_status *st);

/* once_counter_incr as an async call (id as in once_call_async); read the
 * value with once_future_counter_value. */
ONCE_API int once_counter_incr_async(once_client *c, const char *name,
                                     int64_t by, const once_rpc_id *id,
                                     once_done_fn done, void *arg,
                                     once_future **fp, once_status *st);

/* Waits until f's call has finished; returns its code and fills *st (may
 * be NULL) as the blocking call would have. */
ONCE_API int once_wait(once_future *f, once_status *st);

/* Whether f's call has finished (never waits). */
ONCE_API bool once_future_done(once_future *f);

/* The rpc id f's call was sent under (zero while not finished, and for a
 * read-only call). */
ONCE_API void once_future_id(once_future *f, once_rpc_id *id);

/* Waits for f; on ONCE_OK hands over the response payload once (*resp
 * freed by the caller with once_free; a second call gives NULL, 0). */
ONCE_API int once_future_response(once_future *f, void **resp,
                                  size_t *resp_len);

/* Waits for an once_counter_incr_async future; on ONCE_OK *value is the
 * counter right after this increment. */
ONCE_API int once_future_counter_value(once_future *f, int64_t *value);

/* Lets go of f (NULL accepted). */
ONCE_API void once_future_free(once_future *f);

/* ---- once.v1.Lease ------------------------------------------------------ */

/* OpenLease for principal (NULL: the handle's principal). Does not change
 * the handle's own client id. */
ONCE_API int once_lease_open(once_client *c, const char *principal,
                             uint64_t ttl_ms, uint64_t *client_id,
                             uint64_t *granted_ttl_ms, once_status *st);

/* In the calls below, client_id 0 means this handle's own client id.
 * None of them carries an rpc id (renewing, closing or reading twice is
 * harmless). */

/* RenewLease: *ttl_ms is the TTL, *remaining_ms the time left right after
 * the renewal (either may be NULL). A lease that has ended or was never
 * issued gives FAILED_PRECONDITION/LEASE_EXPIRED; for the handle's own id
 * that marks the handle's lease lost. */
ONCE_API int once_lease_renew(once_client *c, uint64_t client_id,
                              uint64_t *ttl_ms, uint64_t *remaining_ms,
                              once_status *st);

/* CloseLease: ends the lease now (OK also when it had already ended);
 * *records_retained (may be NULL) is how many completion records the
 * collector will now reclaim. An id never issued gives
 * NOT_FOUND/UNKNOWN_CLIENT. Closing the handle's own lease marks it lost:
 * its calls fail fast afterwards. */
ONCE_API int once_lease_close(once_client *c, uint64_t client_id,
                              uint64_t *records_retained, once_status *st);

/* once.v1.LeaseState, as struct once_lease_info.state. */
enum once_lease_state {
    ONCE_LEASE_STATE_UNSPECIFIED = 0,
    ONCE_LEASE_STATE_LIVE = 1,
    ONCE_LEASE_STATE_CLOSED = 2,
    ONCE_LEASE_STATE_EXPIRED = 3,
    ONCE_LEASE_STATE_COLLECTED = 4, /* ended, every record reclaimed */
};

/* LeaseInfoResponse. Plain data, no ownership. (A struct tag without a
 * typedef: the function of the same name takes the ordinary name.) */
struct once_lease_info {
    uint64_t client_id;
    char principal[160]; /* truncated if longer */
    int state;           /* enum once_lease_state */
    uint64_t ttl_ms;
    uint64_t remaining_ms;
    uint64_t watermark;         /* every seq below it is acknowledged */
    uint64_t watermark_durable; /* as persisted with the last reclamation */
    uint64_t records_retained;
    uint64_t bytes_retained;
    uint64_t max_seq;
    uint64_t oldest_record_age_ms;
};

/* "LEASE_LIVE" for ONCE_LEASE_STATE_LIVE, the once.v1.LeaseState names
 * ("LEASE_STATE_UNSPECIFIED" for unknown numbers). A static string. */
ONCE_API const char *once_lease_state_name(int state);

/* LeaseInfo into *out. An id never issued gives NOT_FOUND/UNKNOWN_CLIENT;
 * a collected one gives OK with state ONCE_LEASE_STATE_COLLECTED. */
ONCE_API int once_lease_info(once_client *c, uint64_t client_id,
                             struct once_lease_info *out, once_status *st);

#ifdef __cplusplus
}
#endif

/* The Admin calls (once/admin.h) were declared in this header before;
 * programs written then keep compiling. */
#include <once/admin.h>

#endif /* ONCE_CLIENT_H */
