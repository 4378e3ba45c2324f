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

typedef struct once_options {
    const char *url;             /* required: "ipc:///tmp/once.ipc" */
    const char *principal;       /* NULL: "anonymous" */
    uint32_t deadline_ms;        /* over all attempts; 0: 10000 */
    uint32_t attempt_timeout_ms; /* one attempt; 0: 2000 */
    uint32_t max_attempts;       /* 0: 10 */
    uint32_t backoff_initial_ms; /* 0: 5 */
    uint32_t backoff_max_ms;     /* 0: 500 */
    uint64_t lease_ttl_ms;       /* asked of OpenLease; 0: server default */
    bool no_lease; /* do not open a lease: for reads, admin calls and
                      retries of an explicit rpc id */
} once_options;

/* Fills *o with the defaults (all zero, which means "default"). */
void once_options_init(once_options *o);

/*
 * Opens a client: dials o->url (non-blocking dial, the socket reconnects by
 * itself) and, unless o->no_lease, opens a lease to get a client id. On
 * success *cp is the handle (free with once_client_close) and ONCE_OK is
 * returned.
 */
int once_client_open(once_client **cp, const once_options *o, once_status *st);

/* Closes the handle; calls still in flight must have returned. NULL is
 * accepted. */
void once_client_close(once_client *c);

/* The client id from the lease, or 0 with no lease. */
uint64_t once_client_id(const once_client *c);

/* The lowest seq whose reply has not been delivered (what the next call will
 * send as first_incomplete). */
uint64_t once_client_first_incomplete(const once_client *c);

/*
 * The caller will never retry this seq again (a call that ended
 * OUTCOME_UNKNOWN stays "incomplete" and holds first_incomplete back until
 * it is retried to completion or released here).
 */
void once_client_release(once_client *c, uint64_t seq);

/* "ALREADY_EXISTS" for ONCE_ALREADY_EXISTS. A static string. */
const char *once_strerror(int code);

/*
 * The generic call. method is a full name ("/once.v1.Counter/Increment").
 * When mutating is true the call carries an rpc id: if id is NULL or
 * id->seq == 0, the library assigns the next seq of this client (and writes
 * it back to *id when id is not NULL) — otherwise exactly *id is sent, a
 * retry of that id. On ONCE_OK, *resp (when resp is not NULL) is a malloc'd
 * copy of the response payload, freed by the caller with once_free(), and
 * *resp_len its length. On any other code *resp is NULL.
 */
int once_call(once_client *c, const char *method, bool mutating,
              once_rpc_id *id, const void *req, size_t req_len, void **resp,
              size_t *resp_len, once_status *st);

/* Frees memory handed out by libonce. NULL is accepted. */
void once_free(void *p);

/* ---- once.v1.Counter ---------------------------------------------------- */

/* Increment(name, by); *value is the counter right after this increment.
 * id as in once_call. */
int once_counter_incr(once_client *c, const char *name, int64_t by,
                      once_rpc_id *id, int64_t *value, once_status *st);

int once_counter_get(once_client *c, const char *name, int64_t *value,
                     once_status *st);

/* ---- once.v1.Lease ------------------------------------------------------ */

/* OpenLease for principal (NULL: the handle's principal). Does not change
 * the handle's own client id. */
int once_lease_open(once_client *c, const char *principal, uint64_t ttl_ms,
                    uint64_t *client_id, uint64_t *granted_ttl_ms,
                    once_status *st);

/* ---- once.v1.Admin ------------------------------------------------------ */

typedef struct once_stats {
    uint64_t requests;
    uint64_t replays;
    uint64_t conflicts;
    uint64_t commits;
    uint64_t fsyncs;
    uint64_t records_stored;
    uint64_t rejected;
    uint64_t leases_opened;
} once_stats;

int once_admin_stats(once_client *c, once_stats *out, once_status *st);

#ifdef __cplusplus
}
#endif

#endif /* ONCE_CLIENT_H */
