/*
 * load.h — increments of one counter through libonce in one of three
 * shapes, each call resolved by its own rpc id until answered: the load
 * the soak and the batched crash matrix run while onced is killed.
 *
 * Owns: the caller threads (or the one async thread), their handles and
 * the values their calls returned.
 * Invariant: a call that ended OUTCOME_UNKNOWN or UNAVAILABLE after it was
 * sent is retried under exactly its id (at most LOAD_RESOLVE_TRIES times);
 * a call never sent is started anew; every value recorded is the answer of
 * exactly one call. Bounded: no call starts after stop_ms or max_calls.
 * Never: calls cmocka assertions off the test's own thread (load_start and
 * load_join are called from it; callers only record).
 */
#ifndef TESTS_LOAD_H
#define TESTS_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Retries of one unknown id (each a whole call: up to its deadline). */
#define LOAD_RESOLVE_TRIES 100

typedef enum load_mode {
    LOAD_HANDLES, /* width threads, a handle (and lease) each */
    LOAD_SHARED,  /* width threads on ONE handle: their calls coalesce */
    LOAD_ASYNC,   /* one thread, width async calls in flight on one handle */
} load_mode;

typedef struct load_opts {
    const char *url;     /* what the handles dial */
    const char *counter; /* the counter's name */
    load_mode mode;
    int width;             /* threads, or async calls in flight */
    size_t max_calls;      /* calls started at most */
    int64_t stop_ms;       /* harness_now_ms() after which none starts */
    const char *principal; /* who signs (with key), or NULL: anonymous */
    const char *key;       /* that principal's key file, or NULL */
    const char *tls_ca;    /* a CA file for tls+tcp://, or NULL */
    uint32_t attempt_ms;   /* one attempt; 0: 100 (see load_start) */
} load_opts;

typedef struct load load;

/* "handles", "shared", "async". */
const char *load_mode_name(load_mode m);

/* Starts the load (its threads run at once) into *lp; asserts it started.
 * The handles' options suit a lossy, crashing server: 100 ms attempts
 * (attempt_ms), at most 4, a deadline of 8 attempts. A slow server (TLS
 * handshakes under valgrind) needs a longer attempt_ms: each open is a
 * fresh handshake, and one that never fits its attempt never succeeds. */
void load_start(load **lp, const load_opts *o);

/* True while some caller still runs. */
bool load_running(load *l);

/* Waits for the callers (bounded by their calls' bounds) and returns the
 * load's first error, or "" (no assertion: the caller may print more
 * first). */
const char *load_wait(load *l);

/* load_wait, then asserts
 * that nothing went wrong (printing the first error) and that the values
 * returned are exactly {1..n}, n the calls answered; returns n. */
size_t load_join(load *l);

/* Calls that ended OUTCOME_UNKNOWN (or UNAVAILABLE after a send) at least
 * once before their answer, and sends over all calls. After load_join. */
uint64_t load_unknown(const load *l);
uint64_t load_sends(const load *l);

/* Frees l (after load_join). NULL is accepted. */
void load_free(load *l);

/* Asserts values[0, n) sorted are exactly {1..n}, naming a duplicate or a
 * gap and what (cmocka, the test's thread). Sorts values. */
void load_assert_exact(int64_t *values, size_t n, const char *what);

#endif /* TESTS_LOAD_H */
