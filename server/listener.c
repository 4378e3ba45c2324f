/*
 * listener.c — nng REP contexts, the async nng_ctx + nng_aio pattern, and
 * the listeners: ipc://, tcp:// and tls+tcp:// (nng's TLS over mbedTLS,
 * with the certificate and key of --tls-cert/--tls-key); ipc:// and
 * tls+tcp:// listeners are watched (listen_watch.h, --listen-check), and
 * tls+tcp:// ones also for failed handshakes (tls_watch.h).
 *
 * What one connection may hold: a context that receives a request notes
 * the pipe it came from until its reply has been handed to that pipe
 * (counted in the connection table, conns.h, which also admits, caps,
 * idles out and penalises connections). A request from a pipe that
 * already holds its limit of contexts (cfg->conn_inflight, 1 for a
 * penalised peer) is dropped unread (counted in Stats.conn_limit_drops): a peer
 * that never reads its replies holds at most that many contexts, whatever it
 * sends. Each reply is sent with an aio timeout of cfg->send_timeout_ms; when
 * it expires (the peer has not read for that long) the pipe is closed, which
 * completes every other reply queued on it, so its contexts come back.
 * The calls those replies answer were executed and synced before: a retry
 * gets the stored result.
 */
#include "server/listener.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/protocol/reqrep0/rep.h>
#include <nng/supplemental/tls/tls.h>

#include "store/fault.h"
#include "server/conns.h"
#include "server/listen_watch.h"
#include "base/close_bounded.h"
#include "base/clock.h"
#include "base/log.h"
#include "server/stop_watch.h"
#include "server/tls_watch.h"
#include "base/tls_server.h"

/* How long SIGTERM waits for nng_close (listener_shutdown). */
#define LISTENER_CLOSE_WAIT_MS 3000

/* Connections closed for not reading that are remembered, so each is
 * counted once (listener_first_drop). */
#define LISTENER_DROPPED_MAX 256

typedef enum { LCTX_RECV, LCTX_WAIT, LCTX_SEND } lctx_state;

typedef struct lctx {
    listener_req req; /* first: listener_reply recovers the lctx from it */
    struct listener *l;
    nng_ctx ctx;
    nng_aio *aio;
    lctx_state state; /* touched by the aio callback and listener_reply,
                         never at the same time: one request at a time */
    nng_pipe pipe;    /* the request's connection, from receipt until its
                         reply left */
    uint32_t held;    /* pipe's id while this context holds one of its
                         requests (conns_hold), else 0; the context's
                         own (one request at a time) */
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
    bool leaked; /* nng_close did not return in time: listener_free keeps l
                    (written by listener_shutdown only) */
    listen_watch *watch;     /* ipc:// listeners kept accepting; NULL: off */
    tls_watch *tls_log;      /* failed handshakes logged; NULL: no tls+tcp:// */
    size_t conn_inflight;    /* --conn-inflight */
    nng_duration send_to_ms; /* --send-timeout */
    server_stats *stats;     /* conn_limit_drops, conns_dropped */
    conns *conns;            /* the open connections and their bounds */
    _Atomic uint64_t drop_log_ms; /* clock_now_ms() of the last drop logged */
    uint32_t dropped[LISTENER_DROPPED_MAX]; /* ids of the pipes closed last
                                               for not reading; l->mtx */
    size_t ndropped;                        /* next slot of dropped; l->mtx */
};

/*
 * True the first time pipe id is closed for not reading: every reply
 * queued on it times out, often interleaved with other pipes' timeouts,
 * and the connection must be counted and logged once. nng hands out pipe
 * ids in sequence, so the last LISTENER_DROPPED_MAX ids are enough.
 */
static bool
listener_first_drop(listener *l, uint32_t id)
{
    bool first = true;

    pthread_mutex_lock(&l->mtx);
    for (size_t i = 0; i < LISTENER_DROPPED_MAX && first; i++) {
        first = l->dropped[i] != id;
    }
    if (first) {
        l->dropped[l->ndropped] = id;
        l->ndropped = (l->ndropped + 1) % LISTENER_DROPPED_MAX;
    }
    pthread_mutex_unlock(&l->mtx);
    return first;
}

/* Logs at most one line a second about connections held to their bounds. */
static void
listener_log_drop(listener *l, const char *what, uint32_t pipe_id)
{
    uint64_t now = clock_now_ms();
    uint64_t last = atomic_load(&l->drop_log_ms);

    if (now - last >= 1000 &&
        atomic_compare_exchange_strong(&l->drop_log_ms, &last, now)) {
        log_info("connection %u: %s (Stats conn_limit_drops %llu, "
                 "conns_dropped %llu)",
                 (unsigned)pipe_id, what,
                 (unsigned long long)atomic_load(&l->stats->conn_limit_drops),
                 (unsigned long long)atomic_load(&l->stats->conns_dropped));
    }
}

typedef enum { HOLD_OK, HOLD_FULL, HOLD_CLOSED } hold_result;

static bool listener_is_closed(listener *l);

/*
 * Takes a request from pipe p for context c unless p already holds its
 * limit of contexts (conns.h: --conn-inflight, or 1 for a penalised peer),
 * p is gone, or the listener is shutting down. Never blocks.
 */
static hold_result
listener_hold(listener *l, lctx *c, nng_pipe p)
{
    uint32_t id = (uint32_t)nng_pipe_id(p);

    if (listener_is_closed(l)) {
        return HOLD_CLOSED;
    }
    switch (conns_hold(l->conns, id)) {
    case CONNS_HOLD_OK:
        c->held = id;
        return HOLD_OK;
    case CONNS_HOLD_GONE:
        return HOLD_CLOSED; /* no reply could reach it */
    case CONNS_HOLD_FULL:
    default:
        return HOLD_FULL;
    }
}

static bool
listener_is_closed(listener *l)
{
    bool closed;

    pthread_mutex_lock(&l->mtx);
    closed = l->closed;
    pthread_mutex_unlock(&l->mtx);
    return closed;
}

static void
listener_release(listener *l, lctx *c)
{
    if (c->held != 0) {
        conns_release(l->conns, c->held);
        c->held = 0;
    }
}

/* Back to receiving, without a timeout: a context waits for requests as
 * long as it takes. */
static void
lctx_recv(lctx *c)
{
    c->state = LCTX_RECV;
    nng_aio_set_timeout(c->aio, NNG_DURATION_INFINITE);
    nng_ctx_recv(c->ctx, c->aio);
}

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
        c->pipe = nng_msg_get_pipe(c->req.msg);
        switch (listener_hold(c->l, c, c->pipe)) {
        case HOLD_OK:
            break;
        case HOLD_CLOSED:
            nng_msg_free(c->req.msg); /* never submitted */
            c->req.msg = NULL;
            if (!listener_is_closed(c->l)) {
                nng_ctx_recv(c->ctx, c->aio); /* its pipe is gone */
            }
            return;
        case HOLD_FULL:
            /* Its connection holds enough contexts already: dropped as
             * an oversized request is; the client's retry comes back. */
            nng_msg_free(c->req.msg);
            c->req.msg = NULL;
            STATS_INC(c->l->stats, conn_limit_drops);
            listener_log_drop(c->l,
                              "has --conn-inflight replies it has not read; "
                              "requests beyond them are dropped",
                              (uint32_t)nng_pipe_id(c->pipe));
            nng_ctx_recv(c->ctx, c->aio);
            return;
        }
        c->req.recv_ms = clock_now_ms();
        c->req.pipe_id = (uint32_t)nng_pipe_id(c->pipe);
        c->req.auth_gen = 0;
        c->req.principal[0] = '\0';
        c->req.wrote = false;
        c->req.park_until_ms = 0; /* a new request: never parked yet */
        c->req.next = NULL;
        c->req.reply = NULL;
        c->state = LCTX_WAIT;
        c->l->submit(c->l->arg, &c->req);
        return;
    case LCTX_SEND:
        listener_release(c->l, c);
        if (rv != 0) {
            nng_msg_free(nng_aio_get_msg(c->aio));
            nng_aio_set_msg(c->aio, NULL);
            if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
                return; /* shut down */
            }
            if (rv == NNG_ETIMEDOUT) {
                /* The peer has not read a reply for --send-timeout:
                 * closing its pipe completes the replies queued behind
                 * this one, which frees their contexts. Never blocks.
                 * Those replies may time out too: count the connection
                 * once. */
                if (listener_first_drop(c->l, (uint32_t)nng_pipe_id(c->pipe))) {
                    STATS_INC(c->l->stats, conns_dropped);
                    log_info("connection %u closed: a reply waited "
                             "--send-timeout for it to read (Stats "
                             "conns_dropped %llu)",
                             (unsigned)nng_pipe_id(c->pipe),
                             (unsigned long long)atomic_load(
                                 &c->l->stats->conns_dropped));
                }
                conns_not_reading(c->l->conns, (uint32_t)nng_pipe_id(c->pipe));
                nng_pipe_close(c->pipe);
            }
        } else if (c->req.wrote) {
            FAULT_POINT(FAULT_REPLY_SENT);
        }
        lctx_recv(c);
        return;
    case LCTX_WAIT:
        return;
    }
}

#ifdef ONCE_TEST_SEAMS
/* Test build only: when a reply point is armed ":drop" (store/fault.h) and
 * this is its hit, the reply is lost on its way — the context takes the
 * next request, the client times out and retries the same id — and true
 * is returned. */
static bool
listener_fault_drop(lctx *c)
{
    listener *l = c->l;

    if (!FAULT_DROP(FAULT_BATCH_WRITTEN) && !FAULT_DROP(FAULT_REPLY_SENT)) {
        return false;
    }
    /* Lost on its way: the context takes the next request and the client
     * times out and retries the same id. */
    listener_release(l, c);
    pthread_mutex_lock(&l->mtx);
    if (!l->closed) {
        lctx_recv(c);
    }
    pthread_mutex_unlock(&l->mtx);
    return true;
}
#define LISTENER_FAULT_DROP(c) listener_fault_drop(c)
#else
#define LISTENER_FAULT_DROP(c) false
#endif

void
listener_reply(listener_req *r, const void *buf, size_t len)
{
    lctx *c = (lctx *)r; /* req is the first member */
    listener *l;
    nng_msg *m;

    if (r->reply != NULL) {
        r->reply(r, buf, len); /* not one of ours (http_api.h) */
        return;
    }
    l = c->l;
    if (r->wrote) {
        FAULT_POINT(FAULT_BATCH_WRITTEN);
        if (LISTENER_FAULT_DROP(c)) {
            return;
        }
    }
    pthread_mutex_lock(&l->mtx);
    if (l->closed || nng_msg_alloc(&m, 0) != 0 ||
        nng_msg_append(m, buf, len) != 0) {
        /* Dropped: the client times out and retries the same id. */
        pthread_mutex_unlock(&l->mtx);
        listener_release(l, c);
        return;
    }
    c->state = LCTX_SEND;
    nng_aio_set_timeout(c->aio, l->send_to_ms);
    nng_aio_set_msg(c->aio, m);
    nng_ctx_send(c->ctx, c->aio);
    pthread_mutex_unlock(&l->mtx);
}

bool
listener_auth_result(listener *l, const listener_req *r, bool ok)
{
    if (r->reply != NULL) {
        return true; /* no nng connection to count it for */
    }
    if (!conns_auth_result(l->conns, r->pipe_id, ok)) {
        return true;
    }
    nng_pipe_close((nng_pipe){.id = r->pipe_id});
    return false;
}

/* The server TLS configuration from cfg's certificate and key. */
static int
listener_tls(listener *l, const listener_config *cfg)
{
    char err[512];
    int rv;

    if ((rv = tls_server_config(&l->tls, cfg->tls_cert, cfg->tls_key, err,
                                sizeof(err))) != 0) {
        log_error("%s", err);
    }
    return rv;
}

/* Listens on url; tls+tcp:// with the TLS configuration. */
static int
listener_listen(listener *l, const listener_config *cfg, const char *url)
{
    nng_listener nl;
    int rv;

    if (strncmp(url, "tls+", 4) != 0) {
        if ((rv = nng_listen(l->sock, url, &nl, 0)) == 0 && l->watch != NULL) {
            rv = listen_watch_add(l->watch, url, nl, NULL);
        }
        return rv;
    }
    if (l->tls == NULL && (rv = listener_tls(l, cfg)) != 0) {
        return rv;
    }
    if ((rv = tls_server_listen(l->sock, url, l->tls, &nl)) != 0 ||
        (l->watch != NULL &&
         (rv = listen_watch_add(l->watch, url, nl, l->tls)) != 0)) {
        return rv;
    }
    if (l->tls_log == NULL && (rv = tls_watch_open(&l->tls_log)) != 0) {
        return rv;
    }
    return tls_watch_add(l->tls_log, url, nl);
}

/* The watch's thread: a tls+tcp:// listener was started again; the log
 * of failed handshakes reads the new one. Atomics only. */
static void
listener_moved(void *arg, nng_listener old, nng_listener nl)
{
    listener *l = arg;

    tls_watch_moved(l->tls_log, old, nl);
}

/* nng's thread, for every pipe of the socket: counted by the ipc watch
 * (a pipe a listener negotiated, admitted or not), then admitted or
 * refused, and forgotten, by the connection table. Never blocks. */
static void
listener_pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    listener *l = arg;

    if (ev == NNG_PIPE_EV_ADD_PRE && l->watch != NULL) {
        listen_watch_pipe_added(l->watch, p);
    }
    conns_pipe_event(l->conns, p, ev);
}

/* The connection table (conns.h), watching the socket before it listens,
 * and its thread. A peer penalised for not reading gets a window of four
 * --send-timeout at first (one second at least). */
static int
listener_conns(listener *l, const listener_config *cfg)
{
    conns_config cc;
    int rv;

    memset(&cc, 0, sizeof(cc));
    cc.max = cfg->conn_max;
    cc.max_per_peer = cfg->conn_max_per_peer;
    cc.idle_ms = cfg->conn_idle_ms;
    cc.inflight = l->conn_inflight;
    cc.penalty_ms =
        4 * cfg->send_timeout_ms > 1000 ? 4 * cfg->send_timeout_ms : 1000;
    if ((rv = conns_open(&l->conns, &cc, l->stats)) != 0 ||
        (rv = nng_pipe_notify(l->sock, NNG_PIPE_EV_ADD_PRE, listener_pipe_cb,
                              l)) != 0 ||
        (rv = nng_pipe_notify(l->sock, NNG_PIPE_EV_REM_POST, listener_pipe_cb,
                              l)) != 0 ||
        (rv = conns_start(l->conns)) != 0) {
        log_error("cannot watch the connections: %s", nng_strerror(rv));
    }
    return rv;
}

int
listener_open(listener **lp, const listener_config *cfg,
              listener_submit_fn submit, void *arg, server_stats *stats)
{
    listener *l;
    int rv;

    if ((l = calloc(1, sizeof(*l))) == NULL) {
        return NNG_ENOMEM;
    }
    pthread_mutex_init(&l->mtx, NULL);
    l->submit = submit;
    l->arg = arg;
    l->stats = stats;
    l->conn_inflight = cfg->conn_inflight > 0 ? cfg->conn_inflight : 1;
    l->send_to_ms =
        cfg->send_timeout_ms > 0 && cfg->send_timeout_ms < (uint64_t)INT32_MAX
            ? (nng_duration)cfg->send_timeout_ms
            : NNG_DURATION_INFINITE;
    if ((rv = nng_rep0_open(&l->sock)) != 0) {
        log_error("cannot open the nng REP socket: %s", nng_strerror(rv));
        free(l);
        return rv;
    }
    nng_socket_set_size(l->sock, NNG_OPT_RECVMAXSZ, cfg->recv_max);
    if ((rv = listener_conns(l, cfg)) != 0) {
        goto fail;
    }
    if (cfg->listen_check_ms > 0 &&
        (rv = listen_watch_open(&l->watch, l->sock, cfg->listen_check_ms,
                                &stats->listener_restarts)) != 0) {
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
        lctx_recv(&l->ctxs[i]);
    }
    if (l->watch != NULL) {
        listen_watch_on_move(l->watch, listener_moved, l);
    }
    if (l->watch != NULL && (rv = listen_watch_start(l->watch)) != 0) {
        log_error("cannot start the listener watch: %s", nng_strerror(rv));
        goto fail;
    }
    if (l->tls_log != NULL && (rv = tls_watch_start(l->tls_log)) != 0) {
        log_error("cannot start the TLS handshake log: %s", nng_strerror(rv));
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
    l->closed = true; /* no submit and no send from here */
    pthread_mutex_unlock(&l->mtx);
    stop_watch_step("the ipc listener watch's probe");
    listen_watch_stop(l->watch); /* no probe or new listener from here */
    stop_watch_step("the idle-connection closer");
    conns_stop(l->conns); /* no idle close from here */
    stop_watch_step("the TLS handshake log");
    tls_watch_stop(l->tls_log); /* reads the socket's listeners' stats */
    /* Cancel every receive and send and wait for running callbacks, so no
     * request reaches the executor after this, however nng_close goes. */
    stop_watch_step("the nng callbacks running on the listener's contexts");
    for (size_t i = 0; i < l->nctx; i++) {
        nng_aio_stop(l->ctxs[i].aio);
    }
    stop_watch_step("the nng socket's close (bounded)");
    /* nng 1.5.2 can wait forever in nng_close for a pipe that never
     * finishes closing (seen after a peer that did not read its replies),
     * and SIGTERM must end onced whatever its peers did. */
    if (!close_bounded(l->sock, LISTENER_CLOSE_WAIT_MS)) {
        l->leaked = true; /* the close still runs: never free l */
        log_warn("the nng socket did not close within %d ms (a connection "
                 "that does not finish closing); stopping without waiting "
                 "for it — every call received is still executed and synced",
                 LISTENER_CLOSE_WAIT_MS);
    }
}

void
listener_free(listener *l)
{
    if (l == NULL || l->leaked) {
        return; /* leaked: the process is about to exit */
    }
    for (size_t i = 0; i < l->nctx; i++) {
        nng_aio_free(l->ctxs[i].aio); /* waits for a running callback */
    }
    free(l->ctxs);
    listen_watch_free(l->watch); /* after nng_close: no pipe callback left */
    conns_free(l->conns);
    tls_watch_free(l->tls_log);
    if (l->tls != NULL) {
        nng_tls_config_free(l->tls);
    }
    pthread_mutex_destroy(&l->mtx);
    free(l);
}
