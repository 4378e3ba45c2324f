/*
 * listener.h — the nng REP socket and its contexts.
 *
 * Owns the socket, its listeners and a fixed pool of contexts, each with
 * one aio driving a receive → (executor) → send → receive cycle. A context
 * holds at most one request at a time, so the pool size bounds the calls in
 * flight and gives back-pressure for free. One connection holds at most
 * cfg->conn_inflight contexts (requests beyond them are dropped unread),
 * and one whose reply waits cfg->send_timeout_ms to be taken is closed: a
 * peer that never reads cannot take the pool from the others.
 * Never: blocks, touches LevelDB or executes anything inside an aio
 * callback; a received request is handed to the submit function, which must
 * not block either.
 */
#ifndef SERVER_LISTENER_H
#define SERVER_LISTENER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>

#include "base/queue.h"
#include "server/stats.h"

#define LISTENER_URLS_MAX 8

/* What the listener needs to know (onced(8)); server.c fills it from the
 * server's configuration. */
typedef struct listener_config {
    const char *listen[LISTENER_URLS_MAX]; /* ipc://, tcp://, tls+tcp:// */
    size_t nlisten;
    size_t contexts;          /* nng contexts = requests in flight */
    size_t recv_max;          /* NNG_OPT_RECVMAXSZ */
    const char *tls_cert;     /* PEM certificate for tls+tcp:// listeners */
    const char *tls_key;      /* its PEM private key */
    uint64_t listen_check_ms; /* probe ipc:// listeners this often
                                 (listen_watch.h); 0: never */
    size_t conn_inflight;     /* requests one connection may have in
                                 flight */
    uint64_t send_timeout_ms; /* a reply not taken by its connection in
                                 this long drops that connection */
    size_t conn_max;          /* open connections in all (conns.h) */
    size_t conn_max_per_peer; /* and of one peer */
    uint64_t conn_idle_ms;    /* a connection without a request this long
                                 is closed; 0: never */
} listener_config;

typedef struct listener listener;

/* The principal a request names, cut to this (with its NUL): a
 * principal's name is at most PRINCIPAL_NAME_MAX (128) bytes. The key of
 * the request's lane in the executor (fair_queue.h cuts keys the same). */
#define LISTENER_PRINCIPAL_MAX 132

/* One received request waiting for its reply. Owned by its context; lent
 * to the executor from submit until listener_reply. */
typedef struct listener_req {
    nng_msg *msg;           /* the request; the executor frees it */
    uint64_t recv_ms;       /* clock_now_ms() at receipt */
    uint64_t recv_us;       /* stats_now_us() at receipt, set by the submit
                               function (the call latency histogram) */
    bool wrote;             /* set by the executor: the call's transaction wrote
                               something (what the reply fault points count) */
    uint64_t park_until_ms; /* executor: a parked read's deadline
                               (clock_now_ms); 0: never parked */
    uint32_t pipe_id;       /* the connection it came from */
    uint64_t auth_gen;      /* set by the verifier: the generation of the
                               tables its tag verified under (0: not) */
    char principal[LISTENER_PRINCIPAL_MAX]; /* set by the verifier: the
                                      principal
                                      it names (cut), the executor's lane */
    queue_link link;                        /* in a fair_queue lane (verifier,
                                               executor) */
    struct listener_req *next;              /* the executor's parked reads */
    /* NULL for a request of the nng socket; otherwise the front door that
     * made it (http_api.h) takes its reply: listener_reply calls this
     * with the packed Response instead of sending on a context. Never
     * blocks. */
    void (*reply)(struct listener_req *r, const void *buf, size_t len);
} listener_req;

typedef void (*listener_submit_fn)(void *arg, listener_req *r);

/* Opens the socket, starts listening on every cfg->listen URL and starts
 * receiving; with cfg->listen_check_ms, watches the ipc:// listeners
 * (listen_watch.h). Counts in *stats the listeners started again
 * (listener_restarts) and the connections held to their bounds
 * (conn_limit_drops, conns_dropped). Returns 0 or an nng error (logged). */
int listener_open(listener **lp, const listener_config *cfg,
                  listener_submit_fn submit, void *arg, server_stats *stats);

/* Sends buf as the reply to r (copied; the caller keeps buf); a request
 * with r->reply set is handed to that instead. After
 * listener_shutdown the reply is dropped. Never blocks. For a call that
 * wrote (r->wrote) it passes the reply fault points (store/fault.h):
 * batch_written before sending, reply_sent once the send completed. */
void listener_reply(listener_req *r, const void *buf, size_t len);

/* The verdict of the verifier on r's authentication (ok), counted for
 * r's connection (none for a request with r->reply: true): false when that
 * connection has now failed it CONNS_AUTH_FAILS_MAX times in a row and was
 * closed (conns.h). Any thread; never blocks. */
bool listener_auth_result(listener *l, const listener_req *r, bool ok);

/* Closes the socket: no more requests, replies not yet sent are dropped
 * (clients retry and get the stored result). */
void listener_shutdown(listener *l);

/* Frees the contexts; call after listener_shutdown and once no reply can
 * be pending any more. NULL is ok. */
void listener_free(listener *l);

#endif /* SERVER_LISTENER_H */
