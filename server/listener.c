/*
 * listener.c — nng REP contexts, the async nng_ctx + nng_aio pattern, and
 * the listeners: ipc://, tcp:// and tls+tcp:// (nng's TLS over mbedTLS,
 * with the certificate and key of --tls-cert/--tls-key); ipc:// listeners
 * are watched (listen_watch.h, --listen-check).
 */
#include "listener.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/protocol/reqrep0/rep.h>
#include <nng/supplemental/tls/tls.h>

#include "fault.h"
#include "listen_watch.h"
#include "log.h"

typedef enum { LCTX_RECV, LCTX_WAIT, LCTX_SEND } lctx_state;

typedef struct lctx {
    listener_req req; /* first: listener_reply recovers the lctx from it */
    struct listener *l;
    nng_ctx ctx;
    nng_aio *aio;
    lctx_state state; /* touched by the aio callback and listener_reply,
                         never at the same time: one request at a time */
} lctx;

struct listener {
    nng_socket sock;
    nng_tls_config *tls; /* server side of tls+tcp://, NULL without */
    lctx *ctxs;
    size_t nctx;
    listener_submit_fn submit;
    void *arg;
    pthread_mutex_t mtx; /* protects closed */
    bool closed;
    listen_watch *watch; /* ipc:// listeners kept accepting; NULL: off */
};

static void
lctx_cb(void *arg)
{
    lctx *c = arg;
    int rv = nng_aio_result(c->aio);

    switch (c->state) {
    case LCTX_RECV:
        if (rv != 0) {
            if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
                return; /* shut down */
            }
            nng_ctx_recv(c->ctx, c->aio);
            return;
        }
        c->req.msg = nng_aio_get_msg(c->aio);
        c->req.recv_ms = (uint64_t)nng_clock();
        c->req.wrote = false;
        c->req.next = NULL;
        c->state = LCTX_WAIT;
        c->l->submit(c->l->arg, &c->req);
        return;
    case LCTX_SEND:
        if (rv != 0) {
            nng_msg_free(nng_aio_get_msg(c->aio));
            if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
                return; /* shut down */
            }
        } else if (c->req.wrote) {
            fault_point(FAULT_REPLY_SENT);
        }
        c->state = LCTX_RECV;
        nng_ctx_recv(c->ctx, c->aio);
        return;
    case LCTX_WAIT:
        return;
    }
}

void
listener_reply(listener_req *r, const void *buf, size_t len)
{
    lctx *c = (lctx *)r; /* req is the first member */
    listener *l = c->l;
    nng_msg *m;

    if (r->wrote) {
        fault_point(FAULT_BATCH_WRITTEN);
        if (fault_drop(FAULT_BATCH_WRITTEN) || fault_drop(FAULT_REPLY_SENT)) {
            /* Lost on its way: the context takes the next request and
             * the client times out and retries the same id. */
            pthread_mutex_lock(&l->mtx);
            if (!l->closed) {
                c->state = LCTX_RECV;
                nng_ctx_recv(c->ctx, c->aio);
            }
            pthread_mutex_unlock(&l->mtx);
            return;
        }
    }
    pthread_mutex_lock(&l->mtx);
    if (l->closed || nng_msg_alloc(&m, 0) != 0 ||
        nng_msg_append(m, buf, len) != 0) {
        /* Dropped: the client times out and retries the same id. */
        pthread_mutex_unlock(&l->mtx);
        return;
    }
    c->state = LCTX_SEND;
    nng_aio_set_msg(c->aio, m);
    nng_ctx_send(c->ctx, c->aio);
    pthread_mutex_unlock(&l->mtx);
}

/* A whole PEM file as a string (malloc'd, the caller frees), or NULL. */
static char *
listener_read_pem(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    long n;

    if (f == NULL) {
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && n < (1L << 20) &&
        fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL) {
        if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        } else {
            buf[n] = '\0';
        }
    }
    fclose(f);
    return buf;
}

/* The server TLS configuration from cfg's certificate and key. */
static int
listener_tls(listener *l, const server_config *cfg)
{
    char *cert, *key;
    int rv;

    if (cfg->tls_cert == NULL) {
        log_error("a tls+tcp:// address needs --tls-cert FILE and --tls-key "
                  "FILE");
        return NNG_EINVAL;
    }
    cert = listener_read_pem(cfg->tls_cert);
    key = listener_read_pem(cfg->tls_key);
    if (cert == NULL || key == NULL) {
        log_error("cannot read the TLS %s %s",
                  cert == NULL ? "certificate" : "key",
                  cert == NULL ? cfg->tls_cert : cfg->tls_key);
        rv = NNG_EINVAL;
    } else if ((rv = nng_tls_config_alloc(&l->tls, NNG_TLS_MODE_SERVER)) != 0 ||
               (rv = nng_tls_config_own_cert(l->tls, cert, key, NULL)) != 0) {
        log_error("TLS certificate %s / key %s: %s", cfg->tls_cert,
                  cfg->tls_key, nng_strerror(rv));
    }
    if (key != NULL) {
        memset(key, 0, strlen(key));
    }
    free(cert);
    free(key);
    return rv;
}

/* Listens on url; tls+tcp:// with the TLS configuration. */
static int
listener_listen(listener *l, const server_config *cfg, const char *url)
{
    nng_listener nl;
    int rv;

    if (strncmp(url, "tls+", 4) != 0) {
        if ((rv = nng_listen(l->sock, url, &nl, 0)) == 0 && l->watch != NULL) {
            rv = listen_watch_add(l->watch, url, nl);
        }
        return rv;
    }
    if (l->tls == NULL && (rv = listener_tls(l, cfg)) != 0) {
        return rv;
    }
    if ((rv = nng_listener_create(&nl, l->sock, url)) != 0) {
        return rv;
    }
    if ((rv = nng_listener_set_ptr(nl, NNG_OPT_TLS_CONFIG, l->tls)) != 0 ||
        (rv = nng_listener_start(nl, 0)) != 0) {
        nng_listener_close(nl);
    }
    return rv;
}

int
listener_open(listener **lp, const server_config *cfg,
              listener_submit_fn submit, void *arg, _Atomic uint64_t *restarts)
{
    listener *l;
    int rv;

    if ((l = calloc(1, sizeof(*l))) == NULL) {
        return NNG_ENOMEM;
    }
    pthread_mutex_init(&l->mtx, NULL);
    l->submit = submit;
    l->arg = arg;
    if ((rv = nng_rep0_open(&l->sock)) != 0) {
        log_error("cannot open the nng REP socket: %s", nng_strerror(rv));
        free(l);
        return rv;
    }
    nng_socket_set_size(l->sock, NNG_OPT_RECVMAXSZ, cfg->recv_max);
    if (cfg->listen_check_ms > 0 &&
        (rv = listen_watch_open(&l->watch, l->sock, cfg->listen_check_ms,
                                restarts)) != 0) {
        log_error("cannot watch the listeners: %s", nng_strerror(rv));
        goto fail;
    }
    if ((l->ctxs = calloc(cfg->contexts, sizeof(*l->ctxs))) == NULL) {
        rv = NNG_ENOMEM;
        goto fail;
    }
    for (size_t i = 0; i < cfg->contexts; i++) {
        lctx *c = &l->ctxs[i];
        c->l = l;
        if ((rv = nng_aio_alloc(&c->aio, lctx_cb, c)) != 0 ||
            (rv = nng_ctx_open(&c->ctx, l->sock)) != 0) {
            log_error("cannot open nng context %zu: %s", i, nng_strerror(rv));
            nng_aio_free(c->aio);
            goto fail;
        }
        l->nctx++;
    }
    for (size_t i = 0; i < cfg->nlisten; i++) {
        if ((rv = listener_listen(l, cfg, cfg->listen[i])) != 0) {
            log_error("cannot listen on %s: %s (is another onced running "
                      "there? pick another address with --listen)",
                      cfg->listen[i], nng_strerror(rv));
            goto fail;
        }
    }
    for (size_t i = 0; i < l->nctx; i++) {
        l->ctxs[i].state = LCTX_RECV;
        nng_ctx_recv(l->ctxs[i].ctx, l->ctxs[i].aio);
    }
    if (l->watch != NULL && (rv = listen_watch_start(l->watch)) != 0) {
        log_error("cannot start the listener watch: %s", nng_strerror(rv));
        goto fail;
    }
    *lp = l;
    return 0;
fail:
    listener_shutdown(l);
    listener_free(l);
    return rv;
}

void
listener_shutdown(listener *l)
{
    pthread_mutex_lock(&l->mtx);
    l->closed = true;
    pthread_mutex_unlock(&l->mtx);
    listen_watch_stop(l->watch); /* no probe or new listener from here */
    nng_close(l->sock);
    /* nng_close does not wait for callbacks already running: stop every
     * aio, which does, so no request reaches the executor after this. */
    for (size_t i = 0; i < l->nctx; i++) {
        nng_aio_stop(l->ctxs[i].aio);
    }
}

void
listener_free(listener *l)
{
    if (l == NULL) {
        return;
    }
    for (size_t i = 0; i < l->nctx; i++) {
        nng_aio_free(l->ctxs[i].aio); /* waits for a running callback */
    }
    free(l->ctxs);
    listen_watch_free(l->watch); /* after nng_close: no pipe callback left */
    if (l->tls != NULL) {
        nng_tls_config_free(l->tls);
    }
    pthread_mutex_destroy(&l->mtx);
    free(l);
}
