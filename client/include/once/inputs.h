/*
 * once/inputs.h — keeping a start request's input (or a queued work item's,
 * once_work_submit) on the client until the server has durably accepted it
 * (docs/grants.md, "Input keeping").
 *
 * An input store is a directory; each kept input in it is a chain of the
 * journal (once/journal.h, docs/chains.md "The input store") whose one step
 * is the input's request, kept as one file of its own. once_grant_submit()
 * first writes the RequestGrant it is about to send — the request bytes
 * exactly as they will be sent, the rpc id (client_id, seq) assigned to it
 * and the principal — into that file (write a temp file, fsync, rename,
 * fsync the directory), and only then sends it. What happens to the file
 * depends on the answer:
 *
 *   OK                       the grant is accepted (the server committed it
 *                            with the call's completion record): the file is
 *                            removed (unlink, then fsync of the directory).
 *   no answer, or one that   the file stays ONCE_INPUT_PENDING: UNKNOWN /
 *   says nothing was decided OUTCOME_UNKNOWN, UNAVAILABLE (also IN_PROGRESS),
 *                            DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED
 * (WINDOW_FULL), ABORTED, CANCELLED. LEASE_EXPIRED, STALE_RPC the rpc id can no
 * longer be used: ONCE_INPUT_LEASE_ENDED (see below). any other answer the
 * server refused the input (ALREADY_OWNED, PLACEMENT_CHANGED, GRANT_CONFLICT,
 *                            PRINCIPAL_DENIED, INVALID_ARGUMENT, ...): the
 *                            file stays, ONCE_INPUT_REJECTED — "not sent": it
 *                            did not start anything and is never re-sent by
 *                            the library; code, reason and message are kept.
 *
 * After a crash or restart, a new process opens the same directory and calls
 * once_grant_inputs_resume(): every PENDING input whose principal is the
 * handle's is re-sent with the rpc id recorded in its file — the SAME
 * (client_id, seq), never a new one — so the server answers it from the
 * completion record if the first send was executed (one grant, replayed),
 * or executes it now if it was not. When the recorded client id is not the
 * handle's own (the process that wrote the file is gone), its lease is
 * first renewed with RenewLease, so the id stays usable while the re-send
 * runs. If that lease has ended meanwhile (expired, closed or collected: the
 * renewal, or the re-send, answers LEASE_EXPIRED, or NOT_YOUR_LEASE from an
 * onced with authentication on), the input is NOT re-sent under another
 * id: its file is marked ONCE_INPUT_LEASE_ENDED with that answer (which
 * the resend returns), and stays listed. Whether the earlier send was
 * accepted cannot be learned from an ended id; the caller may look at the
 * surface (GetSurface) or resend it explicitly with
 * once_grant_input_resend(..., new_id = true): the server locks
 * (request_id, attempt) before anything
 * else, so if the first send was accepted the explicit resend returns that
 * same grant (existing = true), and if it was not, it is a first request.
 *
 * A store may be shared by threads of one process; an input being sent by
 * one thread is not sent, resent or forgotten by another at the same time
 * (FAILED_PRECONDITION / CHAIN_BUSY). It takes no lock across processes:
 * any number may open it at once (a lister beside a running scheduler).
 * Two processes resuming one store at once stay correct on the server
 * (same id: one execution) but may both deliver the answer.
 *
 * Files: "input+<hash>-<attempt>.chain", one packed once.client.ChainRecord
 * each (the journal's record), hash being the hex BLAKE2b-128 of the
 * request id. A store written before the journal ("<hash>-<attempt>.input"
 * files) is imported at open: each file becomes its chain (one synced
 * write), then is removed; a chain already kept for it wins.
 */
#ifndef ONCE_INPUTS_H
#define ONCE_INPUTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <once/client.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct once_inputs once_inputs;

/* The state of a kept input (a file in the store). */
enum once_input_state {
    ONCE_INPUT_PENDING = 1,     /* kept; maybe sent, not known accepted */
    ONCE_INPUT_REJECTED = 2,    /* refused by the server: not sent, kept */
    ONCE_INPUT_LEASE_ENDED = 3, /* its rpc id's lease ended first: kept,
                                   never re-sent under a new id by itself */
};

/* What a kept input is sent as. */
enum once_input_kind {
    ONCE_INPUT_START = 1,   /* RequestGrant (once_grant_submit) */
    ONCE_INPUT_ENQUEUE = 2, /* Enqueue (once_work_submit) */
};

/* What to start: the fields of once.v1.RequestGrantRequest. Borrowed. */
typedef struct once_grant_input {
    const char *request_id; /* required */
    uint32_t attempt;       /* 0: 1 */
    const char *surface;
    const char *machine;
    const char *location;
    uint64_t generation;
    const void *payload; /* the user's input; may be NULL when len is 0 */
    size_t payload_len;
    uint64_t credential_ttl_ms; /* 0: the server's default */
} once_grant_input;

/* One kept input, as listed. Plain data; strings truncated if longer. */
typedef struct once_input_info {
    char request_id[257];
    uint32_t attempt;
    char surface[257];
    char machine[257];
    char location[1025];
    uint64_t generation;
    size_t payload_len;
    once_rpc_id id;      /* the rpc id it was (or will be) sent with */
    char principal[160]; /* the principal of that id's lease */
    int state;           /* enum once_input_state */
    uint64_t kept_unix_ms;
    uint64_t updated_unix_ms;
    uint32_t sends; /* sends started for its rpc id: the first counted
                       with the write that keeps it, later ones written
                       with their answer */
    int code;       /* the last answer (enum once_code), 0 before any */
    char reason[64];
    char message[256];
    char file[80]; /* its chain id in the store: "input/<hash>-<attempt>",
                      kept as the file "input+<hash>-<attempt>.chain" */
    int kind;      /* enum once_input_kind; an ENQUEUE input has no
                      machine, location or generation (the server writes
                      the destination when it takes the row) */
} once_input_info;

/* Opens (creating it, mode 0700, when missing) the store in dir. On success
 * *sp is the store (free with once_inputs_close). */
ONCE_API int once_inputs_open(once_inputs **sp, const char *dir,
                              once_status *st);

/* Closes the store; the files stay. NULL is accepted. */
ONCE_API void once_inputs_close(once_inputs *s);

/*
 * Keeps *in durably under a fresh rpc id of c (which must hold a lease),
 * then sends it (RequestGrant) and files the answer as described above.
 * *id (may be NULL) gets the rpc id used. On ONCE_OK, *resp (may be NULL)
 * is the packed once.v1.RequestGrantResponse (grant and credential),
 * freed with once_free(). If (request_id, attempt) is already kept: with the
 * same request bytes and PENDING, this is once_grant_input_resend(..., false);
 * otherwise ALREADY_EXISTS / INPUT_KEPT and nothing is sent.
 */
ONCE_API int once_grant_submit(once_client *c, once_inputs *s,
                               const once_grant_input *in, once_rpc_id *id,
                               void **resp, size_t *resp_len, once_status *st);

/* What to queue: the fields of once.v1.EnqueueRequest. Borrowed. */
typedef struct once_work_input {
    const char *request_id; /* required */
    uint32_t attempt;       /* 0: 1 */
    const char *surface;
    const void *payload; /* the user's input; may be NULL when len is 0 */
    size_t payload_len;
} once_work_input;

/*
 * once_grant_submit for the queue path: keeps *in durably, then sends it
 * as Enqueue; the file is removed once the row is accepted (OK: the
 * server committed the row, with its destination, and the call's record),
 * and otherwise filed as for a start. On ONCE_OK *resp (may be NULL) is
 * the packed once.v1.EnqueueResponse. Resend, resume, list and forget
 * treat it like any kept input: a (request_id, attempt) names one input,
 * whichever path it takes.
 */
ONCE_API int once_work_submit(once_client *c, once_inputs *s,
                              const once_work_input *in, once_rpc_id *id,
                              void **resp, size_t *resp_len, once_status *st);

/*
 * Re-sends one kept input. new_id false: only a PENDING input, with its
 * recorded rpc id (renewing that id's lease first when it is not c's own);
 * a REJECTED or LEASE_ENDED one gives FAILED_PRECONDITION / INPUT_REJECTED
 * or INPUT_LEASE_ENDED and nothing is sent; another principal's gives
 * PERMISSION_DENIED / OTHER_PRINCIPAL. new_id true: the caller's explicit
 * choice, for any state — a fresh rpc id of c is recorded first, then the
 * same request bytes are sent under it. An input not kept: NOT_FOUND /
 * NO_INPUT. The answer is filed and returned as in once_grant_submit.
 */
ONCE_API int once_grant_input_resend(once_client *c, once_inputs *s,
                                     const char *request_id, uint32_t attempt,
                                     bool new_id, once_rpc_id *id, void **resp,
                                     size_t *resp_len, once_status *st);

/* Called by once_grant_inputs_resume after each re-send: in as it was
 * kept, rv/st the answer, resp (on ONCE_OK) the packed
 * RequestGrantResponse (an EnqueueResponse when in->kind is
 * ONCE_INPUT_ENQUEUE), valid during the call only. */
typedef void (*once_input_resumed_fn)(const once_input_info *in, int rv,
                                      const once_status *st, const void *resp,
                                      size_t resp_len, void *arg);

/*
 * Re-sends every PENDING input of c's principal with its recorded rpc id
 * (once_grant_input_resend(..., false) each, oldest first). fn may be NULL.
 * *accepted, *pending, *ended, *rejected (each may be NULL) count how the
 * re-sent inputs were filed. Returns ONCE_OK unless the store could not be
 * read; the answers of single inputs go to fn.
 */
ONCE_API int once_grant_inputs_resume(once_client *c, once_inputs *s,
                                      once_input_resumed_fn fn, void *arg,
                                      size_t *accepted, size_t *pending,
                                      size_t *ended, size_t *rejected,
                                      once_status *st);

/* Every kept input, oldest first. On ONCE_OK *out is one malloc'd array of
 * *n rows (NULL when none), freed with once_free(). */
ONCE_API int once_grant_inputs_list(once_inputs *s, once_input_info **out,
                                    size_t *n, once_status *st);

/* Removes a kept input (the caller gives up on it). NOT_FOUND / NO_INPUT
 * when it is not kept. */
ONCE_API int once_grant_input_forget(once_inputs *s, const char *request_id,
                                     uint32_t attempt, once_status *st);

/* "PENDING", "REJECTED", "LEASE_ENDED", or "?". A static string. */
ONCE_API const char *once_input_state_name(int state);

#ifdef __cplusplus
}
#endif

#endif /* ONCE_INPUTS_H */
