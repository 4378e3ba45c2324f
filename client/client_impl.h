/*
 * client_impl.h — the body of the opaque once_client handle, shared by the
 * files of libonce only (never installed).
 *
 * The handle is one part per layer, each with its own locks:
 *   conn   — the connection layer (conn.h, slot.h): socket, dialer, slots;
 *   gate   — the lease's state as calls see it (lease_gate.h): own client
 *            id, seq window, health, tracked calls, lease-lost callback;
 *   renew  — the lease's renewal thread (lease.c);
 *   async  — the queue and workers of async calls (async.h), over the
 *            call engine;
 * plus the call settings below, which the call engine reads.
 *
 * Owns: the handle's layout and which part belongs to which layer.
 * Invariant: the call settings are written once in once_client_open and
 * read-only afterwards, so calls read them without a lock. Lock order:
 * renew.lock, then gate.lock; conn's locks and gate.win_lock are leaves;
 * none is held across network I/O or a user callback.
 * Never: exposes nng or protobuf-c types through the public header; never
 * included by a layer below the call engine (conn, slot, lease_gate take
 * their own part, not the handle).
 */
#ifndef CLIENT_CLIENT_IMPL_H
#define CLIENT_CLIENT_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/queue.h"
#include "client/batch.h"
#include "client/conn.h"
#include "client/lease_gate.h"
#include "once/client.h"
#include "client/retry.h"

/* The handle's async calls; only async.c touches it. New calls leave in
 * groups (call_group: one message for all queued), from at most
 * ASYNC_SENDERS_MAX workers at a time; a call that must retry is resumed
 * by a worker of its own, at most ASYNC_WORKERS_MAX threads in all. */
#define ASYNC_WORKERS_MAX 128u
/* Groups of new calls in flight at once (as messages in flight, batch.h). */
#define ASYNC_SENDERS_MAX 2u
/* At most this many calls of one handle are queued or running. */
#define ASYNC_PENDING_MAX 65536u

typedef struct async_pool {
    pthread_mutex_t lock;                 /* protects every field below */
    pthread_cond_t work;                  /* a call was queued, or stop */
    pthread_cond_t drained;               /* pending reached 0 */
    queue fresh;                          /* once_future queued, not started */
    queue resume;                         /* to resume (call_group_resume) */
    unsigned nsenders;                    /* workers sending a group */
    size_t pending;                       /* queued or running */
    unsigned nworkers;                    /* threads started */
    unsigned nidle;                       /* threads waiting for work */
    bool stop;                            /* async_fini: workers exit */
    pthread_t threads[ASYNC_WORKERS_MAX]; /* [0, nworkers) */
} async_pool;

/* The lease's renewal thread; only lease.c touches it. */
typedef struct lease_renewer {
    bool running;         /* written only by open/close (no lock) */
    pthread_t thread;     /* valid while running */
    pthread_mutex_t lock; /* protects stop */
    pthread_cond_t cv;    /* signalled when stop is set */
    bool stop;            /* under lock */
} lease_renewer;

struct once_client {
    conn conn;           /* connection layer */
    lease_gate gate;     /* lease state the call engine consults */
    lease_renewer renew; /* the renewal thread (lease.c) */
    async_pool async;    /* async calls and their workers (async.c) */
    batch_queue batch;   /* calls queued behind messages in flight */

    /* Call settings; read-only after open. */
    char *principal;             /* owned (strdup) */
    uint32_t deadline_ms;        /* over all attempts of one call */
    uint32_t attempt_timeout_ms; /* one attempt */
    retry_policy retry;          /* attempts and backoff */
    bool signs;                  /* every request carries a tag; with key: */
    uint8_t key[32];             /* the principal's key; wiped at close */
};

#endif /* CLIENT_CLIENT_IMPL_H */
