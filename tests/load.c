/*
 * load.c — the callers of load.h: per-handle threads, threads on one
 * shared handle, or one thread keeping async calls in flight.
 *
 * Owns: struct load, its threads and handles, the values they record.
 * Invariant: see load.h. Each call ends in exactly one record: its value
 * (answered), nothing (never sent, or stopped before it started), or the
 * load's first error.
 * Never: asserts off the test's thread; waits without a bound.
 */
#include "tests/load.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"

#define LOAD_WIDTH_MAX 128

struct load {
    load_opts o;
    pthread_t th[LOAD_WIDTH_MAX];
    int nth;
    once_client *shared; /* LOAD_SHARED and LOAD_ASYNC */
    atomic_int running;
    atomic_size_t started; /* calls started (claimed) */

    pthread_mutex_t mtx; /* protects values, n, unknown, sends, error */
    int64_t *values;     /* [0, n): the answers, max_calls room */
    size_t n;
    uint64_t unknown;
    uint64_t sends;
    char error[512]; /* the first thing that went wrong, or "" */
};

const char *
load_mode_name(load_mode m)
{
    return m == LOAD_HANDLES  ? "handles"
           : m == LOAD_SHARED ? "shared"
                              : "async";
}

static void
load_fail(load *l, const char *fmt, ...)
{
    va_list ap;

    pthread_mutex_lock(&l->mtx);
    if (l->error[0] == '\0') {
        va_start(ap, fmt);
        vsnprintf(l->error, sizeof(l->error), fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&l->mtx);
}

static bool
load_failed(load *l)
{
    bool f;

    pthread_mutex_lock(&l->mtx);
    f = l->error[0] != '\0';
    pthread_mutex_unlock(&l->mtx);
    return f;
}

/* Claims the next call: false when max_calls or stop_ms says no more. */
static bool
load_claim(load *l)
{
    if (harness_now_ms() >= l->o.stop_ms || load_failed(l)) {
        return false;
    }
    if (atomic_fetch_add(&l->started, 1) >= l->o.max_calls) {
        atomic_fetch_sub(&l->started, 1);
        return false;
    }
    return true;
}

static void
load_record(load *l, int64_t v, bool unknown, uint32_t sends)
{
    pthread_mutex_lock(&l->mtx);
    if (l->n < l->o.max_calls) {
        l->values[l->n++] = v;
    }
    l->unknown += unknown ? 1 : 0;
    l->sends += sends;
    pthread_mutex_unlock(&l->mtx);
}

/* A handle for the load: the options of a lossy, crashing server. Retries
 * OpenLease (it may meet a crash or a lost reply too). */
static once_client *
load_open(load *l)
{
    once_client *c = NULL;
    once_options o;
    once_security sec;
    once_status st;
    int rv = ONCE_UNAVAILABLE;

    once_options_init(&o);
    once_security_init(&sec);
    o.url = l->o.url;
    o.principal = l->o.principal;
    o.lease_ttl_ms = 120000; /* outlives every crash and restart */
    /* Short: a crash or a few lost replies in a row end a call
     * OUTCOME_UNKNOWN, which the load resolves by its id. */
    o.attempt_timeout_ms = l->o.attempt_ms > 0 ? l->o.attempt_ms : 100;
    o.max_attempts = 4;
    o.deadline_ms = 8 * o.attempt_timeout_ms;
    o.backoff_initial_ms = 5;
    o.backoff_max_ms = 50;
    sec.key_file = l->o.key;
    sec.tls_ca_file = l->o.tls_ca;
    for (int i = 0; i < 50 && rv != ONCE_OK; i++) {
        if ((rv = once_client_open_secure(&c, &o, &sec, &st)) != ONCE_OK) {
            harness_sleep_ms(100);
        }
    }
    if (rv != ONCE_OK) {
        load_fail(l, "once_client_open on %s: %s %s %s", l->o.url,
                  once_strerror(rv), st.reason, st.message);
        return NULL;
    }
    return c;
}

/* Whether a call that ended rv may be retried under its id. */
static bool
load_retryable(int rv)
{
    return rv == ONCE_UNKNOWN || rv == ONCE_UNAVAILABLE;
}

/* Whether a new call ended without being sent at all: UNAVAILABLE
 * NOT_SENT (nothing can have run; it is no call yet). */
static bool
load_not_sent(int rv, const once_status *st)
{
    return rv == ONCE_UNAVAILABLE && once_status_is(st, ONCE_REASON_NOT_SENT);
}

/* One blocking call to an answer: the first send, then retries of its id. */
static void
load_call(load *l, once_client *c)
{
    once_rpc_id id = {0, 0};
    once_status st;
    int64_t v = -1;
    bool unknown = false;
    uint32_t sends = 0;
    int rv = ONCE_UNKNOWN;

    for (int i = 0; i <= LOAD_RESOLVE_TRIES; i++) {
        rv = once_counter_incr(c, l->o.counter, 1, &id, &v, &st);
        sends += st.attempts;
        if (rv == ONCE_OK || id.seq == 0 ||
            (i == 0 && load_not_sent(rv, &st))) {
            /* Answered, or never sent: not a call yet (libonce completed
             * the fresh seq it took; a retry of it would be refused). */
            id.seq = rv == ONCE_OK ? id.seq : 0;
            break;
        }
        if (!load_retryable(rv)) {
            load_fail(l, "call %llu:%llu ended %s %s (%s) after %d retries",
                      (unsigned long long)id.client_id,
                      (unsigned long long)id.seq, once_strerror(rv), st.reason,
                      st.message, i);
            return;
        }
        unknown = true;
        harness_sleep_ms(20);
    }
    if (rv == ONCE_OK) {
        load_record(l, v, unknown, sends);
    } else if (id.seq != 0) {
        load_fail(l, "call %llu:%llu still unknown after %d retries",
                  (unsigned long long)id.client_id, (unsigned long long)id.seq,
                  LOAD_RESOLVE_TRIES);
    } else {
        /* Never sent: give the claim back, the caller starts anew. */
        atomic_fetch_sub(&l->started, 1);
    }
}

static void *
load_caller(void *arg)
{
    load *l = arg;
    once_client *c = l->shared;

    if (c == NULL && (c = load_open(l)) == NULL) {
        atomic_fetch_sub(&l->running, 1);
        return NULL;
    }
    while (load_claim(l)) {
        load_call(l, c);
    }
    if (c != l->shared) {
        once_client_close(c);
    }
    atomic_fetch_sub(&l->running, 1);
    return NULL;
}

/* One async call of the window: its future and what it has been through. */
typedef struct load_slot {
    once_future *f;
    int tries; /* retries of its id so far */
} load_slot;

/* Starts slot s's call: new (id NULL) or a retry of *id. False when it
 * was not queued (the load's error says why). */
static bool
load_submit(load *l, load_slot *s, const once_rpc_id *id)
{
    once_status st;
    int rv = once_counter_incr_async(l->shared, l->o.counter, 1, id, NULL, NULL,
                                     &s->f, &st);

    if (rv != ONCE_OK) {
        load_fail(l, "async submit: %s %s %s", once_strerror(rv), st.reason,
                  st.message);
        s->f = NULL;
        return false;
    }
    return true;
}

/* The async caller: width calls in flight, collected in turn; an unknown
 * one is resubmitted under its id in its slot, an answered slot starts the
 * next call. */
static void *
load_async(void *arg)
{
    load *l = arg;
    load_slot *slots = calloc((size_t)l->o.width, sizeof(*slots));
    int live = 0;

    if (slots == NULL) {
        load_fail(l, "out of memory");
        atomic_fetch_sub(&l->running, 1);
        return NULL;
    }
    for (int i = 0; i < l->o.width && load_claim(l); i++) {
        if (load_submit(l, &slots[i], NULL)) {
            live++;
        }
    }
    while (live > 0) {
        for (int i = 0; i < l->o.width; i++) {
            load_slot *s = &slots[i];
            once_status st;
            once_rpc_id id;
            int64_t v = -1;
            int rv;

            if (s->f == NULL) {
                continue;
            }
            rv = once_wait(s->f, &st);
            once_future_id(s->f, &id);
            if (rv == ONCE_OK) {
                once_future_counter_value(s->f, &v);
            }
            once_future_free(s->f);
            s->f = NULL;
            live--;
            if (rv == ONCE_OK) {
                load_record(l, v, s->tries > 0, st.attempts);
            } else if (id.seq == 0 ||
                       (s->tries == 0 && load_not_sent(rv, &st))) {
                atomic_fetch_sub(&l->started, 1); /* never sent */
            } else if (!load_retryable(rv) || s->tries >= LOAD_RESOLVE_TRIES) {
                load_fail(l,
                          "async call %llu:%llu ended %s %s (%s) after "
                          "%d retries",
                          (unsigned long long)id.client_id,
                          (unsigned long long)id.seq, once_strerror(rv),
                          st.reason, st.message, s->tries);
            } else {
                s->tries++;
                if (load_submit(l, s, &id)) {
                    live++;
                }
                continue;
            }
            s->tries = 0;
            if (load_claim(l) && load_submit(l, s, NULL)) {
                live++;
            }
        }
    }
    free(slots);
    atomic_fetch_sub(&l->running, 1);
    return NULL;
}

void
load_start(load **lp, const load_opts *o)
{
    load *l = calloc(1, sizeof(*l));

    assert_non_null(l);
    assert_true(o->width > 0 && o->width <= LOAD_WIDTH_MAX);
    l->o = *o;
    assert_non_null(l->values = calloc(o->max_calls, sizeof(*l->values)));
    pthread_mutex_init(&l->mtx, NULL);
    if (o->mode != LOAD_HANDLES) {
        l->shared = load_open(l);
        if (l->shared == NULL) {
            print_error("load: %s\n", l->error);
        }
        assert_non_null(l->shared);
    }
    l->nth = o->mode == LOAD_ASYNC ? 1 : o->width;
    atomic_store(&l->running, l->nth);
    for (int i = 0; i < l->nth; i++) {
        assert_int_equal(
            pthread_create(&l->th[i], NULL,
                           o->mode == LOAD_ASYNC ? load_async : load_caller, l),
            0);
    }
    *lp = l;
}

bool
load_running(load *l)
{
    return atomic_load(&l->running) > 0;
}

const char *
load_wait(load *l)
{
    for (int i = 0; i < l->nth; i++) {
        pthread_join(l->th[i], NULL);
    }
    l->nth = 0;
    if (l->shared != NULL) {
        once_client_close(l->shared);
        l->shared = NULL;
    }
    return l->error;
}

size_t
load_join(load *l)
{
    if (load_wait(l)[0] != '\0') {
        print_error("load (%s, %s): %s\n", load_mode_name(l->o.mode),
                    l->o.counter, l->error);
    }
    assert_string_equal(l->error, "");
    assert_true(l->n < l->o.max_calls + 1);
    load_assert_exact(l->values, l->n, load_mode_name(l->o.mode));
    return l->n;
}

uint64_t
load_unknown(const load *l)
{
    return l->unknown;
}

uint64_t
load_sends(const load *l)
{
    return l->sends;
}

void
load_free(load *l)
{
    if (l == NULL) {
        return;
    }
    pthread_mutex_destroy(&l->mtx);
    free(l->values);
    free(l);
}

static int
load_cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

void
load_assert_exact(int64_t *values, size_t n, const char *what)
{
    qsort(values, n, sizeof(*values), load_cmp64);
    for (size_t i = 0; i < n; i++) {
        if (values[i] != (int64_t)i + 1) {
            print_error("%s: sorted value %zu is %lld, not %zu (%s)\n", what, i,
                        (long long)values[i], i + 1,
                        values[i] < (int64_t)i + 1 ? "a duplicate" : "a gap");
        }
        assert_int_equal(values[i], (int64_t)i + 1);
    }
}
