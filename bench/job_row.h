/*
 * job_row.h — the job-transition workload of bench_compare (issue 23): one
 * row per job, read-modify-written by its owner under a version guard, each
 * transition carrying an idempotency key. Every job peer (peer_redis.c,
 * peer_postgres.c, peer_etcd.c, peer_once_kv.c) stores the same bytes.
 *
 * Owns: the row's text, the one rule of a transition, and the client's
 * loop around one attempt (job_transition). Transition t
 * (t from 1) leaves the row at {"state":S,"machine":M,"transitions":t},
 * S cycling queued/running/done and M over m0..m7, so the row's
 * transitions count is the number of transitions applied to it — what
 * bench_compare's effect check reads back (it must equal the calls that
 * returned OK, exactly).
 * Invariant: job_row_parse(job_row_format(t)) == t for every t >= 0.
 * Never: does I/O itself (the peer's attempt function does); retries a
 * transition under another idempotency key.
 */
#ifndef BENCH_JOB_ROW_H
#define BENCH_JOB_ROW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest row job_row_format writes, with its NUL. */
#define JOB_ROW_MAX 96

/* The row after t transitions (t = 0: the row as submitted, queued) into
 * buf (JOB_ROW_MAX bytes); returns its length. */
size_t job_row_format(char *buf, int64_t transitions);

/* The transitions count of a row of len bytes (not NUL-terminated): 0, or
 * -1 when it is not a row job_row_format wrote. */
int job_row_parse(const char *row, size_t len, int64_t *transitions);

/* What one attempt found. */
typedef enum job_outcome {
    JOB_APPLIED,  /* the row was at the expected version: written */
    JOB_REPLAYED, /* the idempotency key was used: its stored result */
    JOB_MOVED,    /* the row is at another version: nothing written */
} job_outcome;

/* One guarded attempt of a peer: transition t of conn's row, sent under
 * the idempotency key of call n, writing row (rlen bytes) if the row is at
 * version expect. Fills *out and: APPLIED, *version the row's new version;
 * REPLAYED, *transitions the stored result; MOVED, *version and
 * *transitions the row as it is. 0, or -1 with err (COMPARE_ERR_LEN). */
typedef int (*job_attempt_fn)(void *conn, uint64_t n, int64_t expect,
                              const char *row, size_t rlen, int64_t t,
                              job_outcome *out, int64_t *version,
                              int64_t *transitions, char *err);

/* The caller's view of its row, kept between calls: a transition is one
 * round trip while nobody else moves the row. */
typedef struct job_cache {
    int64_t version;     /* -1: not known yet (the first attempt learns) */
    int64_t transitions; /* of the row at that version */
    uint64_t last_n;     /* the last call that returned OK (0: none) */
    int64_t last_expect; /* its attempt's version and transition */
    int64_t last_t;
} job_cache;

/* Resets c to "nothing known". */
void job_cache_init(job_cache *c);

/* Call n: attempts until one applies (re-reading the row through MOVED,
 * at most a bounded number of times). *value: the row's transitions after
 * it. A REPLAYED answer to a new n is an error (the key was used). */
int job_transition(void *conn, job_attempt_fn attempt, job_cache *c, uint64_t n,
                   int64_t *value, char *err);

/* Sends the last successful call again, with the same key and payload:
 * *replayed whether the stored result came back, *value what it held. */
int job_replay(void *conn, job_attempt_fn attempt, const job_cache *c,
               bool *replayed, int64_t *value, char *err);

#endif /* BENCH_JOB_ROW_H */
