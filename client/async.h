/*
 * async.h — asynchronous calls: a once_future per call, run by the
 * handle's call workers over the one call engine (call.c).
 *
 * Owns: the functions over the handle's async part (struct async_pool in
 * client_impl.h: the queue of calls not yet started, the worker threads,
 * the count of calls not yet finished) and the layout of once_future.
 * Invariant: an async call is exactly a call_do on a worker thread, so it
 * keeps every rule of the blocking call (one rpc id for all its attempts,
 * backoff, one deadline, OUTCOME_UNKNOWN, the lease gate). A future is
 * freed when both the caller (once_future_free) and the engine (after the
 * callback) have let go of it.
 * Never: runs a completion callback inside an nng callback or with a lock
 * of the handle held; never starts a call after async_fini began.
 */
#ifndef CLIENT_ASYNC_H
#define CLIENT_ASYNC_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/call.h"
#include "client/client_impl.h"
#include "once/client.h"

struct once_future {
    /* Written at submit, read by the worker. */
    once_client *c;
    char *method; /* owned */
    call_kind kind;
    void *req; /* owned copy */
    size_t req_len;
    once_done_fn done;
    void *arg;
    queue_link link;        /* in a queue of the pool, under its lock */
    struct call_rest *rest; /* its first attempt did not end it */

    /* Written by the worker before fin is set, read after. */
    int code;
    once_status st;
    once_rpc_id id;
    void *resp; /* owned until taken (once_future_response) */
    size_t resp_len;

    pthread_mutex_t lock; /* protects fin and refs */
    pthread_cond_t cv;    /* fin became true */
    bool fin;
    int refs; /* caller + engine */
};

/* An empty pool; no thread is started until the first async call. */
int async_init(async_pool *p);

/* Waits for every queued and running call (and its callback), then stops
 * and joins the workers; later submits are refused (CANCELLED). Called
 * first at close, before the lease ends. Idempotent. */
void async_stop(async_pool *p);

/* async_stop, then destroys the pool (client_free). */
void async_fini(async_pool *p);

/* Queues the call f describes (its c, method, kind, id, req, done, arg
 * filled; refs 2, or 1 when the caller keeps no pointer). Returns ONCE_OK,
 * or a code in st with nothing queued (f untouched, the caller frees it). */
int async_submit(async_pool *p, once_future *f, once_status *st);

/* A future with its lock and refs set (caller + engine); NULL when out of
 * memory. */
once_future *async_future_alloc(void);

/* Drops one reference; the last frees the future and what it owns. */
void async_future_unref(once_future *f);

#endif /* CLIENT_ASYNC_H */
