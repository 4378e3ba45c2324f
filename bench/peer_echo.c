/*
 * peer_echo.c — the transport's limit: a bare nng REQ/REP echo at the same
 * concurrency as the others. The REP side lives in this process: one REP
 * socket with one context per caller, each context an aio state machine
 * (receive → send the same message back → receive), callbacks on nng's
 * threads, never blocking. Each caller has a REQ socket of its own on an
 * ipc path, as each once_client has.
 *
 * Owns: the REP socket, its contexts and the ipc path.
 * Invariant: a reply is the request's own message, unchanged; nothing is
 * written anywhere (this is the floor, not a durable peer).
 * Never: blocks in a callback.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "bench/bench_env.h"
#include "bench/compare_peer.h"

#define ECHO_MAX_MSG 65536

typedef struct echo_ctx {
    nng_ctx ctx;
    nng_aio *aio;
    int sending; /* 0: receiving; 1: sending the echo */
} echo_ctx;

typedef struct echo_env {
    nng_socket rep;
    echo_ctx *ctxs;
    int nctx;
    char path[128];
    char url[160];
    size_t value_bytes;
} echo_env;

typedef struct echo_conn {
    nng_socket req;
    char *buf;
    size_t len;
} echo_conn;

static void
echo_cb(void *arg)
{
    echo_ctx *x = arg;
    int rv = nng_aio_result(x->aio);

    if (x->sending) {
        if (rv != 0) {
            nng_msg_free(nng_aio_get_msg(x->aio));
            nng_aio_set_msg(x->aio, NULL);
        }
        if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
            return;
        }
        x->sending = 0;
        nng_ctx_recv(x->ctx, x->aio);
        return;
    }
    if (rv != 0) {
        if (rv != NNG_ECLOSED && rv != NNG_ECANCELED) {
            nng_ctx_recv(x->ctx, x->aio);
        }
        return;
    }
    x->sending = 1;
    /* The received message is already on the aio: send it back as is. */
    nng_ctx_send(x->ctx, x->aio);
}

static void echo_stop(void *env);

static int
echo_start(const compare_config *cfg, void **envp)
{
    echo_env *e = calloc(1, sizeof(*e));
    int rv;

    if (e == NULL) {
        return -1;
    }
    e->value_bytes = cfg->echo_bytes;
    e->nctx = cfg->max_callers;
    snprintf(e->path, sizeof(e->path), "/tmp/once-compare-%d-echo.ipc",
             (int)getpid());
    snprintf(e->url, sizeof(e->url), "ipc://%s", e->path);
    if ((e->ctxs = calloc((size_t)e->nctx, sizeof(*e->ctxs))) == NULL) {
        free(e);
        return -1;
    }
    if ((rv = nng_rep0_open(&e->rep)) != 0 ||
        (rv = nng_socket_set_size(e->rep, NNG_OPT_RECVMAXSZ, ECHO_MAX_MSG)) !=
            0 ||
        (rv = nng_listen(e->rep, e->url, NULL, 0)) != 0) {
        fprintf(stderr, "bench_compare: echo on %s: %s\n", e->url,
                nng_strerror(rv));
        nng_close(e->rep);
        free(e->ctxs);
        free(e);
        return -1;
    }
    for (int i = 0; i < e->nctx; i++) {
        echo_ctx *x = &e->ctxs[i];
        if ((rv = nng_aio_alloc(&x->aio, echo_cb, x)) != 0 ||
            (rv = nng_ctx_open(&x->ctx, e->rep)) != 0) {
            fprintf(stderr, "bench_compare: echo context: %s\n",
                    nng_strerror(rv));
            e->nctx = i + 1; /* echo_stop frees what was made */
            echo_stop(e);
            return -1;
        }
        nng_ctx_recv(x->ctx, x->aio);
    }
    *envp = e;
    return 0;
}

static void
echo_stop(void *env)
{
    echo_env *e = env;

    if (e == NULL) {
        return;
    }
    nng_close(e->rep); /* every pending aio completes with NNG_ECLOSED */
    for (int i = 0; i < e->nctx; i++) {
        if (e->ctxs[i].aio != NULL) {
            /* Waits for the callback, which freed any unsent echo. */
            nng_aio_stop(e->ctxs[i].aio);
            nng_aio_free(e->ctxs[i].aio);
        }
    }
    unlink(e->path);
    free(e->ctxs);
    free(e);
}

static int
echo_open(void *env, const compare_caller *who, void **connp, char *err)
{
    echo_env *e = env;
    echo_conn *k = calloc(1, sizeof(*k));
    int rv;

    (void)who;
    if (k == NULL || (k->buf = malloc(e->value_bytes)) == NULL) {
        free(k);
        snprintf(err, COMPARE_ERR_LEN, "out of memory");
        return -1;
    }
    memset(k->buf, 'e', e->value_bytes);
    k->len = e->value_bytes;
    if ((rv = bench_dial(&k->req, e->url)) != 0) {
        snprintf(err, COMPARE_ERR_LEN, "echo dial: %s", nng_strerror(rv));
        free(k->buf);
        free(k);
        return -1;
    }
    *connp = k;
    return 0;
}

static int
echo_call(void *conn, uint64_t n, int64_t *value, char *err)
{
    echo_conn *k = conn;
    char *rbuf;
    size_t rlen;
    int rv;

    (void)n;
    *value = 0;
    if ((rv = nng_send(k->req, k->buf, k->len, 0)) != 0 ||
        (rv = nng_recv(k->req, &rbuf, &rlen, NNG_FLAG_ALLOC)) != 0) {
        snprintf(err, COMPARE_ERR_LEN, "echo: %s", nng_strerror(rv));
        return -1;
    }
    rv = rlen == k->len ? 0 : -1;
    nng_free(rbuf, rlen);
    if (rv != 0) {
        snprintf(err, COMPARE_ERR_LEN, "echo: reply of %zu bytes", rlen);
    }
    return rv;
}

static void
echo_close(void *conn)
{
    echo_conn *k = conn;

    if (k != NULL) {
        nng_close(k->req);
        free(k->buf);
        free(k);
    }
}

const compare_peer compare_peer_echo = {
    .name = "echo",
    .what = "bare nng REQ/REP echo over ipc (REP with a context per caller)",
    .exactly_once = false,
    .start = echo_start,
    .stop = echo_stop,
    .open = echo_open,
    .call = echo_call,
    .close = echo_close,
};
