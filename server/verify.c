/*
 * verify.c — the verifier thread of verify.h.
 */
#include "server/verify.h"

#include "proto/reasons.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "proto/wire.h"
#include "server/fair_queue.h"

/* Requests of at most this many bytes, with none queued, are verified on
 * the thread that received them (verifier_submit). */
#define VERIFY_INLINE_MAX 4096

struct verifier {
    auth *auth;
    server_stats *stats;
    listener_submit_fn next;
    void *next_arg;
    _Atomic(listener *) ls; /* NULL until verifier_set_listener */
    pthread_t thread;
    pthread_mutex_t mtx; /* protects q and stopping */
    pthread_cond_t cv;
    fair_queue q; /* a lane per connection */
    bool stopping;
};

bool
verify_shape(server_call *c, const void *body, size_t len,
             envelope_shape *shape)
{
    switch (envelope_scan(body, len, shape)) {
    case ENVELOPE_OK:
        return true;
    case ENVELOPE_TOO_MANY_METADATA:
        call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_TOO_MANY_METADATA,
                  "the envelope carries more than %d metadata entries",
                  ENVELOPE_METADATA_MAX);
        return false;
    case ENVELOPE_MALFORMED:
    default:
        call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT,
                  REASON_MALFORMED_ENVELOPE,
                  "the %zu bytes received are not a once.v1.Request", len);
        return false;
    }
}

/* Answers r with c's refusal, counted as the executor counts one. */
static void
verify_refuse(verifier *v, listener_req *r, server_call *c)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    uint64_t recv_us = r->recv_us;

    STATS_INC(v->stats, requests);
    STATS_INC(v->stats, rejected);
    if (c->code == ONCE__V1__CODE__UNAUTHENTICATED) {
        STATS_INC(v->stats, unauthenticated);
    }
    stats_calls_count(&v->stats->calls, NULL, c->code);
    if (wire_response_pack(c->code, c->reason, c->message, NULL, 0, false, &buf,
                           &len) != 0) {
        log_error("out of memory packing a reply");
        abort();
    }
    nng_msg_free(r->msg);
    r->msg = NULL;
    listener_reply(r, buf, len);
    stats_calls_latency(&v->stats->calls, stats_now_us() - recv_us);
    free(buf);
}

static void
verify_one(verifier *v, listener_req *r)
{
    server_call c;
    envelope_shape shape;
    const uint8_t *body = nng_msg_body(r->msg);
    size_t len = nng_msg_len(r->msg), plen;
    listener *ls = atomic_load(&v->ls);
    uint64_t gen = 0;
    bool authn;

    memset(&c, 0, sizeof(c));
    if (!verify_shape(&c, body, len, &shape)) {
        verify_refuse(v, r, &c);
        return;
    }
    authn = auth_verify(v->auth, &c, body, len, shape.principal,
                        shape.principal_len, &gen);
    if (ls != NULL) {
        /* (a refusal of r's connection closes it: r's reply is lost
         * with it, as the peer's next requests are) */
        (void)listener_auth_result(ls, r, authn);
    }
    if (!authn) {
        verify_refuse(v, r, &c);
        return;
    }
    r->auth_gen = gen;
    plen = shape.principal_len < sizeof(r->principal) - 1
               ? shape.principal_len
               : sizeof(r->principal) - 1;
    if (plen > 0) {
        memcpy(r->principal, shape.principal, plen);
    }
    r->principal[plen] = '\0';
    v->next(v->next_arg, r);
}

static void *
verify_main(void *arg)
{
    verifier *v = arg;

    for (;;) {
        listener_req *r;

        pthread_mutex_lock(&v->mtx);
        while (v->q.queued == 0 && !v->stopping) {
            pthread_cond_wait(&v->cv, &v->mtx);
        }
        r = fair_queue_pop(&v->q);
        pthread_mutex_unlock(&v->mtx);
        if (r == NULL) {
            return NULL; /* stopping, nothing left */
        }
        verify_one(v, r);
    }
}

void
verifier_submit(void *arg, listener_req *r)
{
    verifier *v = arg;
    bool small = nng_msg_len(r->msg) <= VERIFY_INLINE_MAX;

    r->recv_us = stats_now_us();
    pthread_mutex_lock(&v->mtx);
    /* A small request with nothing queued ahead of it is verified here,
     * on the receiving thread: its scan and HMAC cost a few microseconds
     * (bounded by VERIFY_INLINE_MAX), where the hand-off to the verifier
     * thread cost a wake-up per call. */
    if (small && v->q.queued == 0 && !v->stopping) {
        pthread_mutex_unlock(&v->mtx);
        verify_one(v, r);
        return;
    }
    if (fair_queue_push(&v->q, &r->pipe_id, sizeof(r->pipe_id), r) != 0) {
        log_error("out of memory queueing a request");
        abort();
    }
    pthread_cond_signal(&v->cv);
    pthread_mutex_unlock(&v->mtx);
}

int
verifier_open(verifier **vp, auth *a, server_stats *stats,
              listener_submit_fn next, void *next_arg)
{
    verifier *v = calloc(1, sizeof(*v));
    int rv;

    if (v == NULL) {
        return ENOMEM;
    }
    v->auth = a;
    v->stats = stats;
    v->next = next;
    v->next_arg = next_arg;
    pthread_mutex_init(&v->mtx, NULL);
    pthread_cond_init(&v->cv, NULL);
    if ((rv = pthread_create(&v->thread, NULL, verify_main, v)) != 0) {
        pthread_mutex_destroy(&v->mtx);
        pthread_cond_destroy(&v->cv);
        free(v);
        return rv;
    }
    *vp = v;
    return 0;
}

void
verifier_set_listener(verifier *v, listener *l)
{
    atomic_store(&v->ls, l);
}

void
verifier_close(verifier *v)
{
    if (v == NULL) {
        return;
    }
    pthread_mutex_lock(&v->mtx);
    v->stopping = true;
    pthread_cond_signal(&v->cv);
    pthread_mutex_unlock(&v->mtx);
    pthread_join(v->thread, NULL);
    pthread_mutex_destroy(&v->mtx);
    pthread_cond_destroy(&v->cv);
    free(v);
}
