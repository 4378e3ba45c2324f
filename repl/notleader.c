/*
 * notleader.c — a follower's answer to every call: UNAVAILABLE, reason
 * NOT_LEADER and the leader's advertised URL (in Status.leader and in the
 * message), or, with no leader known, NO_LEADER / ETCD_UNAVAILABLE, on
 * onced's own listen URLs until the replica leads.
 *
 * Owns: one REP socket with its listeners, NOTLEADER_CTXS contexts on it,
 * each with one aio whose callback receives a request and sends the
 * refusal back, and the packed refusal they all send.
 * Invariant: nothing received is decoded or executed; every request gets
 * the same refusal, which libonce retries under the same rpc id. Every
 * context always has a receive or a send posted until notleader_close, so
 * a request is taken off its pipe as soon as it arrives: rep0 reads a
 * pipe again only once a context took its last message, and nng 1.5.2
 * keeps re-arming a hung-up ipc pipe nobody reads (a poll thread at 100%
 * CPU; clients waiting out their attempt timeouts) — never let a pipe wait
 * for a thread that is busy elsewhere.
 * Never: blocks in a callback (the refusal is packed by notleader_set; a
 * callback copies it under a short mutex); blocks a caller of
 * notleader_set beyond that mutex. Shutdown order: stopping set, every
 * aio stopped (nng_aio_stop waits for a running callback, and nothing
 * can be started on a stopped aio), then the socket closed, then the aios
 * freed; the close waited for at most NOTLEADER_CLOSE_MS (close_bounded:
 * nng 1.5.2's nng_close can wait forever for a pipe it never releases). A
 * winner does not close this socket at all: it re-executes (handover.c); only a
 * stopping onced does.
 */
#include "repl/repl_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "proto/once.pb-c.h"
#include "base/close_bounded.h"
#include "base/log.h"
#include "base/tls_server.h"
#include "proto/reasons.h"
#include "store/fault.h"
#include "store/store.h"
#include "proto/wire.h"

/* Contexts answering at once. Each answer is a memcpy and a send, so a
 * few keep up with any number of clients; more than one so a send waiting
 * on a slow peer's pipe never holds up the others. */
#define NOTLEADER_CTXS 64
/* A send to a peer that does not read ends after this, freeing its
 * context (the peer's attempt times out and it retries elsewhere). */
#define NOTLEADER_SEND_MS 1000
/* Room for the packed refusal: reason, message and URL, each bounded. */
#define NOTLEADER_REPLY_MAX 2048
/* How long notleader_close waits for nng_close. */
#define NOTLEADER_CLOSE_MS 3000

typedef struct notleader_ctx {
    notleader *nl;
    nng_ctx ctx;
    nng_aio *aio;
    bool sending; /* the aio's operation: a send (else a receive); only the
                     aio's own callback touches it after open */
} notleader_ctx;

struct notleader {
    nng_socket sock;
    notleader_ctx ctxs[NOTLEADER_CTXS];
    size_t nctxs;        /* contexts opened; written before any recv starts */
    nng_tls_config *tls; /* tls+tcp:// URLs (--tls-cert/--tls-key); NULL
                            without one */
    pthread_mutex_t mtx; /* protects reply and reply_len */
    uint8_t reply[NOTLEADER_REPLY_MAX];
    size_t reply_len;
    _Atomic bool stopping;
    struct store **reads; /* broken on purpose (notleader_open) */
};

/* Packs the refusal into nl->reply. Under nl->mtx. */
static void
notleader_pack(notleader *nl, const char *reason, const char *message,
               const char *leader)
{
    Once__V1__Response r = ONCE__V1__RESPONSE__INIT;
    Once__V1__Status s = ONCE__V1__STATUS__INIT;

    s.code = ONCE__V1__CODE__UNAVAILABLE;
    s.reason = (char *)reason;
    s.message = (char *)message;
    s.leader = (char *)(leader != NULL ? leader : "");
    r.status = &s;
    /* Bounded by the callers: reason < 32, message < 512 (it holds the
     * URL), leader < 1024 bytes. */
    nl->reply_len = once__v1__response__get_packed_size(&r);
    if (nl->reply_len > sizeof(nl->reply)) {
        s.leader = "";
        s.message = "this replica is a follower";
        nl->reply_len = once__v1__response__get_packed_size(&r);
    }
    once__v1__response__pack(&r, nl->reply);
}

/* Posts the next receive on nc (a no-op once its aio is stopped). */
static void
notleader_recv(notleader_ctx *nc)
{
    nc->sending = false;
    nng_ctx_recv(nc->ctx, nc->aio);
}

/* Broken on purpose (FAULT_BROKEN_FOLLOWER_READS): a Counter.Get in m is
 * answered OK from the follower's own store, however far behind it is,
 * and m becomes the reply. False for anything else (refused as usual). */
static bool
notleader_read(notleader *nl, nng_msg *m)
{
    Once__V1__Request *req =
        once__v1__request__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
    Once__V1__GetRequest *g = NULL;
    Once__V1__Response r = ONCE__V1__RESPONSE__INIT;
    Once__V1__Status s = ONCE__V1__STATUS__INIT;
    Once__V1__GetResponse gr = ONCE__V1__GET_RESPONSE__INIT;
    uint8_t out[64], pay[16];
    char key[300], *v = NULL;
    size_t vlen = 0;
    store_txn *t;
    bool ok = false;

    if (req != NULL && strcmp(req->method, "/once.v1.Counter/Get") == 0 &&
        (g = once__v1__get_request__unpack(NULL, req->payload.len,
                                           req->payload.data)) != NULL &&
        *nl->reads != NULL && (t = store_txn_begin(*nl->reads)) != NULL) {
        int n = snprintf(key, sizeof(key), "c/%s", g->name);
        if (store_txn_get(t, key, (size_t)n, &v, &vlen) == 0 && vlen == 8) {
            gr.value = (int64_t)wire_get_be64((uint8_t *)v);
        }
        free(v);
        store_txn_abort(t);
        r.status = &s; /* code OK */
        r.payload.data = pay;
        r.payload.len = once__v1__get_response__pack(&gr, pay);
        nng_msg_clear(m);
        ok = nng_msg_append(m, out, once__v1__response__pack(&r, out)) == 0;
    }
    once__v1__get_request__free_unpacked(g, NULL);
    once__v1__request__free_unpacked(req, NULL);
    return ok;
}

static void
notleader_cb(void *arg)
{
    notleader_ctx *nc = arg;
    notleader *nl = nc->nl;
    nng_msg *m;
    int rv = nng_aio_result(nc->aio);

    if (atomic_load(&nl->stopping) || rv == NNG_ECLOSED ||
        rv == NNG_ECANCELED) {
        return; /* notleader_close frees any message left on the aio */
    }
    if (nc->sending) {
        if (rv != 0) {
            /* Not sent (a peer that does not read): still ours. */
            nng_msg_free(nng_aio_get_msg(nc->aio));
            nng_aio_set_msg(nc->aio, NULL);
        }
        notleader_recv(nc);
        return;
    }
    if (rv != 0) {
        notleader_recv(nc); /* a receive error: take the next one */
        return;
    }
    m = nng_aio_get_msg(nc->aio);
    if (nl->reads == NULL || !notleader_read(nl, m)) {
        nng_msg_clear(m);
        pthread_mutex_lock(&nl->mtx);
        rv = nng_msg_append(m, nl->reply, nl->reply_len);
        pthread_mutex_unlock(&nl->mtx);
    }
    if (rv != 0) {
        nng_msg_free(m);
        nng_aio_set_msg(nc->aio, NULL);
        notleader_recv(nc);
        return;
    }
    nc->sending = true;
    nng_aio_set_msg(nc->aio, m);
    nng_aio_set_timeout(nc->aio, NOTLEADER_SEND_MS);
    nng_ctx_send(nc->ctx, nc->aio);
}

int
notleader_open(notleader **np, const char *const *urls, size_t n,
               const char *tls_cert, const char *tls_key, struct store **reads)
{
    notleader *nl = calloc(1, sizeof(*nl));
    int rv;

    if (nl == NULL) {
        return ENOMEM;
    }
    pthread_mutex_init(&nl->mtx, NULL);
    nl->reads = FAULT_BROKEN(FAULT_BROKEN_FOLLOWER_READS) ? reads : NULL;
    notleader_pack(nl, REASON_NO_LEADER,
                   "this replica is not the leader and none is known yet",
                   NULL);
    if ((rv = nng_rep0_open(&nl->sock)) != 0 ||
        (rv = nng_socket_set_size(nl->sock, NNG_OPT_RECVMAXSZ, 1u << 20)) !=
            0) {
        goto fail;
    }
    for (size_t i = 0; i < NOTLEADER_CTXS; i++) {
        notleader_ctx *nc = &nl->ctxs[i];

        nc->nl = nl;
        if ((rv = nng_aio_alloc(&nc->aio, notleader_cb, nc)) != 0) {
            goto fail;
        }
        if ((rv = nng_ctx_open(&nc->ctx, nl->sock)) != 0) {
            nng_aio_free(nc->aio);
            nc->aio = NULL;
            goto fail;
        }
        nl->nctxs++;
    }
    for (size_t i = 0; i < n; i++) {
        char err[512];

        if (strncmp(urls[i], "tls+", 4) == 0) {
            /* The same certificate as the leader's listener: a client
             * checks a follower's as it would the leader's. */
            if (nl->tls == NULL &&
                (rv = tls_server_config(&nl->tls, tls_cert, tls_key, err,
                                        sizeof(err))) != 0) {
                log_error("repl: %s", err);
                goto fail;
            }
            rv = tls_server_listen(nl->sock, urls[i], nl->tls, NULL);
        } else {
            rv = nng_listen(nl->sock, urls[i], NULL, 0);
        }
        if (rv != 0) {
            log_error("repl: cannot listen on %s: %s", urls[i],
                      nng_strerror(rv));
            goto fail;
        }
    }
    for (size_t i = 0; i < nl->nctxs; i++) {
        notleader_recv(&nl->ctxs[i]);
    }
    *np = nl;
    return 0;
fail:
    notleader_close(nl);
    return rv;
}

void
notleader_set(notleader *nl, const char *leader_url, const char *reason)
{
    char message[512];

    if (leader_url != NULL) {
        /* The URL travels in Status.leader (notleader_pack); the message
         * names it too, for a libonce older than that field. */
        snprintf(message, sizeof(message),
                 "this replica is a follower; the leader is %s", leader_url);
    } else {
        snprintf(message, sizeof(message),
                 "this replica is a follower and no leader is known (%s)",
                 reason);
    }
    pthread_mutex_lock(&nl->mtx);
    notleader_pack(nl, leader_url != NULL ? REASON_NOT_LEADER : reason, message,
                   leader_url);
    pthread_mutex_unlock(&nl->mtx);
}

void
notleader_close(notleader *nl)
{
    if (nl == NULL) {
        return;
    }
    atomic_store(&nl->stopping, true);
    /* Every callback returned and none can start again... */
    for (size_t i = 0; i < nl->nctxs; i++) {
        nng_aio_stop(nl->ctxs[i].aio);
    }
    /* ...so the socket (its contexts, listeners and pipes) closes with
     * nothing of ours running on it. */
    if (nng_socket_id(nl->sock) > 0 &&
        !close_bounded(nl->sock, NOTLEADER_CLOSE_MS)) {
        log_warn("repl: the follower's socket did not close within %d ms "
                 "(nng 1.5.2 can wait forever for a pipe); leaving it to "
                 "the exit",
                 NOTLEADER_CLOSE_MS);
        return; /* the close may still use nl's aios: keep them */
    }
    for (size_t i = 0; i < nl->nctxs; i++) {
        nng_msg_free(nng_aio_get_msg(nl->ctxs[i].aio));
        nng_aio_free(nl->ctxs[i].aio);
    }
    if (nl->tls != NULL) {
        nng_tls_config_free(nl->tls); /* its listeners closed with sock */
    }
    pthread_mutex_destroy(&nl->mtx);
    free(nl);
}
