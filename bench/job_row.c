/*
 * job_row.c — the job row's text (job_row.h).
 *
 * Owns: formatting and parsing one row; the transition loop every job
 * peer runs around its attempt.
 * Invariant: a row ends with its transitions count, so parsing needs no
 * JSON library and refuses anything else.
 * Never: reads past len.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bench/compare_peer.h"
#include "bench/job_row.h"

/* Attempts of one call while other callers move the same row. */
#define JOB_TRIES 1000

static const char *const STATES[] = {"queued", "running", "done"};

size_t
job_row_format(char *buf, int64_t transitions)
{
    int n =
        snprintf(buf, JOB_ROW_MAX,
                 "{\"state\":\"%s\",\"machine\":\"m%d\","
                 "\"transitions\":%" PRId64 "}",
                 STATES[transitions % 3], (int)(transitions % 8), transitions);

    return n > 0 && n < JOB_ROW_MAX ? (size_t)n : 0;
}

int
job_row_parse(const char *row, size_t len, int64_t *transitions)
{
    static const char key[] = "\"transitions\":";
    char copy[JOB_ROW_MAX], check[JOB_ROW_MAX];
    const char *at;
    int64_t t = 0;

    if (len == 0 || len >= sizeof(copy)) {
        return -1;
    }
    memcpy(copy, row, len);
    copy[len] = '\0';
    if ((at = strstr(copy, key)) == NULL ||
        sscanf(at + sizeof(key) - 1, "%" SCNd64, &t) != 1 || t < 0) {
        return -1;
    }
    /* Only the exact bytes job_row_format writes. */
    if (job_row_format(check, t) != len || memcmp(check, copy, len) != 0) {
        return -1;
    }
    *transitions = t;
    return 0;
}

void
job_cache_init(job_cache *c)
{
    memset(c, 0, sizeof(*c));
    c->version = -1;
}

int
job_transition(void *conn, job_attempt_fn attempt, job_cache *c, uint64_t n,
               int64_t *value, char *err)
{
    for (int i = 0; i < JOB_TRIES; i++) {
        char row[JOB_ROW_MAX];
        int64_t t = c->transitions + 1, expect = c->version, v = 0, tr = 0;
        size_t rlen = job_row_format(row, t);
        job_outcome out;

        if (attempt(conn, n, expect, row, rlen, t, &out, &v, &tr, err) != 0) {
            return -1;
        }
        switch (out) {
        case JOB_APPLIED:
            c->version = v;
            c->transitions = t;
            c->last_n = n;
            c->last_expect = expect;
            c->last_t = t;
            *value = t;
            return 0;
        case JOB_REPLAYED:
            snprintf(err, COMPARE_ERR_LEN, "key of call %llu already used",
                     (unsigned long long)n);
            return -1;
        case JOB_MOVED:
            c->version = v;
            c->transitions = tr;
            break;
        }
    }
    snprintf(err, COMPARE_ERR_LEN, "row moved %d times in a row", JOB_TRIES);
    return -1;
}

int
job_replay(void *conn, job_attempt_fn attempt, const job_cache *c,
           bool *replayed, int64_t *value, char *err)
{
    char row[JOB_ROW_MAX];
    size_t rlen;
    int64_t v = 0, tr = -1;
    job_outcome out;

    if (c->last_n == 0) {
        snprintf(err, COMPARE_ERR_LEN, "no call to replay");
        return -1;
    }
    rlen = job_row_format(row, c->last_t);
    if (attempt(conn, c->last_n, c->last_expect, row, rlen, c->last_t, &out, &v,
                &tr, err) != 0) {
        return -1;
    }
    *replayed = out == JOB_REPLAYED;
    *value = *replayed ? tr : -1;
    return 0;
}
