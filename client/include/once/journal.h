/*
 * once/journal.h — chains that survive the client: a durable local journal
 * of every step of a chain of calls (docs/chains.md; SPEC.md section 13).
 *
 * A journal is a directory holding a LevelDB. A chain is a named sequence
 * of steps kept in it: each step is one mutating call. The rule that makes
 * a chain run exactly once on the server (Weikum & Vossen, Theorem 17.2):
 *
 *   once_chain_step    writes the request, its method and the rpc id it
 *                      assigns to the journal (one synced write) BEFORE it
 *                      is sent; sends it under that id; writes the reply
 *                      when it comes (state REPLIED; not synced: until the
 *                      commit, the seq is not acknowledged to the server,
 *                      which keeps the reply too).
 *   once_chain_commit  in one synced write: the reply is consumed, the new
 *                      context bytes are kept and, optionally, the next
 *                      request is recorded with the rpc id assigned to it
 *                      (state PENDING; send it with once_chain_send).
 *
 * So at any crash the journal holds either a request with its id (maybe
 * sent: re-sent under the SAME id, the server replays its completion
 * record) or a reply not yet consumed (handed back again), never a request
 * sent under an id the journal does not know.
 *
 * Resume: once_chain_open on an existing chain reads it back; when its
 * pending step was recorded under another client id (the crashed
 * process's lease), that lease is renewed first (RenewLease), and again
 * before each re-send. If it has ended (expired, closed, collected), the
 * step becomes ONCE_CHAIN_LEASE_ENDED with that answer and is never
 * re-sent under another id; once_chain_state says so. A chain therefore
 * may stay down at most its step's lease TTL (docs/chains.md, "Limits").
 * A chain may be resumed only by the principal that opened it
 * (PERMISSION_DENIED / OTHER_PRINCIPAL).
 *
 * Threads: a journal is shared by any number of threads and chains; their
 * synced writes are grouped into shared fsyncs by LevelDB's own write
 * grouping. One chain handle is used by one thread at a time. The journal
 * directory is locked by the process that opened it (LevelDB's LOCK).
 *
 * Memory: every void ** output is a malloc'd copy freed with once_free(),
 * NULL with length 0 when there is none.
 */
#ifndef ONCE_JOURNAL_H
#define ONCE_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <once/client.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct once_journal once_journal;
typedef struct once_chain once_chain;

/* Where a chain stands. */
enum once_chain_state {
    ONCE_CHAIN_IDLE = 1,        /* nothing in flight: the context is all */
    ONCE_CHAIN_PENDING = 2,     /* a request is recorded with its rpc id;
                                   maybe sent, no reply yet */
    ONCE_CHAIN_REPLIED = 3,     /* its reply is recorded, not consumed */
    ONCE_CHAIN_LEASE_ENDED = 4, /* the pending request's lease ended before
                                   its reply: never re-sent by itself */
};

/* A chain as kept in the journal. Plain data; strings truncated. */
typedef struct once_chain_info {
    char chain_id[257];
    char principal[160];   /* the owner (who opened it) */
    int state;             /* enum once_chain_state */
    uint64_t steps;        /* replies consumed so far */
    char method[128];      /* the step in flight ("" when IDLE) */
    once_rpc_id id;        /* its rpc id */
    uint64_t lease_ttl_ms; /* that id's lease TTL as last known (0: unknown) */
    uint32_t sends;        /* sends made for it, written with its answer
                              (0 while PENDING) */
    int code;              /* REPLIED: the answer; LEASE_ENDED: why */
    char reason[64];
    char message[256];
    size_t context_len;
    size_t request_len;
    size_t reply_len;
    uint64_t created_unix_ms;
    uint64_t updated_unix_ms;
} once_chain_info;

/* Opens (creating it, mode 0700, when missing) the journal in dir. On
 * success *jp is the journal (free with once_journal_close). */
ONCE_API int once_journal_open(const char *dir, once_journal **jp,
                               once_status *st);

/* Opens the journal in dir for a reader such as oncectl (list, show),
 * creating nothing: a LevelDB journal (once_journal_open's: dir holds
 * LevelDB's CURRENT or LOCK file; locked, so not while another process
 * has it open), or else an input store's journal of one file per chain
 * (once_inputs_open's; readable while schedulers have it open — its
 * files of before not yet imported are no chains). FAILED_PRECONDITION /
 * JOURNAL when dir is no directory or the LevelDB does not open. On
 * success *jp is the journal (free with once_journal_close). */
ONCE_API int once_journal_open_existing(const char *dir, once_journal **jp,
                                        once_status *st);

/* Closes the journal; every chain handle on it must be closed first. NULL
 * is accepted. */
ONCE_API void once_journal_close(once_journal *j);

/*
 * Opens chain chain_id of j for calls through c, creating it (IDLE, empty
 * context) when the journal has none; otherwise resumes it as described
 * above. *chp is freed with once_chain_close. A chain of another principal
 * gives PERMISSION_DENIED / OTHER_PRINCIPAL; a chain already open in this
 * journal gives FAILED_PRECONDITION / CHAIN_BUSY.
 */
ONCE_API int once_chain_open(once_journal *j, once_client *c,
                             const char *chain_id, once_chain **chp,
                             once_status *st);

/* Closes the handle; the chain stays in the journal. NULL is accepted. */
ONCE_API void once_chain_close(once_chain *ch);

/* Removes the chain from the journal and closes the handle (ch is freed
 * either way). A step in flight is given up: its seq is released (as
 * once_client_release), so the server may drop its record. */
ONCE_API int once_chain_forget(once_chain *ch, once_status *st);

/*
 * One step: records (method, req) with a fresh rpc id of the chain's
 * client, sends it under that id, records the answer. Only on an IDLE
 * chain (else FAILED_PRECONDITION / CHAIN_BUSY). *id (may be NULL) gets
 * the id. On ONCE_OK *resp is the reply payload. An answer that decides
 * nothing (ONCE_UNKNOWN, UNAVAILABLE, ...) leaves the step PENDING: call
 * once_chain_send to re-send it; any other answer is recorded (REPLIED)
 * and returned.
 */
ONCE_API int once_chain_step(once_chain *ch, const char *method,
                             const void *req, size_t req_len, once_rpc_id *id,
                             void **resp, size_t *resp_len, once_status *st);

/* Sends the PENDING step under its recorded rpc id (renewing that id's
 * lease first when it is not the client's own) and records the answer as
 * once_chain_step does. A REPLIED chain hands its recorded answer back
 * without sending; IDLE gives FAILED_PRECONDITION / CHAIN_BUSY; LEASE_ENDED
 * gives FAILED_PRECONDITION / CHAIN_LEASE_ENDED and sends nothing. */
ONCE_API int once_chain_send(once_chain *ch, once_rpc_id *id, void **resp,
                             size_t *resp_len, once_status *st);

/*
 * Consumes the recorded reply (REPLIED; IDLE for the chain's first input;
 * LEASE_ENDED when the caller gives up on that step, having looked at the
 * server's state) in one synced write with the new context (context may be NULL
 * when context_len is 0) and, when next_method is not NULL, the next
 * request with a fresh rpc id of the chain's client (*next_id, may be NULL):
 * the chain becomes PENDING, else IDLE. PENDING gives FAILED_PRECONDITION
 * / CHAIN_BUSY and writes nothing.
 */
ONCE_API int once_chain_commit(once_chain *ch, const void *context,
                               size_t context_len, const char *next_method,
                               const void *next_req, size_t next_len,
                               once_rpc_id *next_id, once_status *st);

/*
 * Where the chain stands (*info may be NULL), its context, and *payload:
 * the recorded reply when REPLIED, the pending request when PENDING or
 * LEASE_ENDED, none when IDLE.
 */
ONCE_API int once_chain_state(once_chain *ch, once_chain_info *info,
                              void **context, size_t *context_len,
                              void **payload, size_t *payload_len,
                              once_status *st);

/* A step that increments counter name by `by` (once.v1.Counter/Increment);
 * *value (may be NULL) the value after it. As once_chain_step; on a
 * REPLIED resume read the value with once_chain_counter_value. */
ONCE_API int once_chain_counter_incr(once_chain *ch, const char *name,
                                     int64_t by, int64_t *value,
                                     once_status *st);

/* The value in a recorded Increment reply (payload of once_chain_state or
 * once_chain_send). INVALID_ARGUMENT when it is not one. */
ONCE_API int once_chain_counter_value(const void *reply, size_t reply_len,
                                      int64_t *value, once_status *st);

/* The packed IncrementRequest for once_chain_commit's next request; *req
 * freed with once_free. */
ONCE_API int once_chain_counter_request(const char *name, int64_t by,
                                        void **req, size_t *req_len,
                                        once_status *st);

/* Every chain of the journal, by chain id (no client needed: for
 * oncectl). *rows is one malloc'd array of *n (NULL when none), freed with
 * once_free. */
ONCE_API int once_journal_list(once_journal *j, once_chain_info **rows,
                               size_t *n, once_status *st);

/* One chain read without opening it (nothing is sent, nothing written):
 * as once_chain_state. NOT_FOUND / NO_CHAIN when the journal has none. */
ONCE_API int once_journal_show(once_journal *j, const char *chain_id,
                               once_chain_info *info, void **context,
                               size_t *context_len, void **payload,
                               size_t *payload_len, once_status *st);

/* "IDLE", "PENDING", "REPLIED", "LEASE_ENDED", or "?". A static string. */
ONCE_API const char *once_chain_state_name(int state);

#ifdef __cplusplus
}
#endif

#endif /* ONCE_JOURNAL_H */
