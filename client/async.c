/*
 * async.c — asynchronous calls (once_call_async, once_wait,
 * once_future_*): the queue of a handle's async calls and the workers that
 * run them through the call engine.
 *
 * New calls leave in groups: a worker takes everything queued (up to a
 * batch) and makes the first attempt of all of it in one message
 * (call_group), so N calls in flight cost a few thread wake-ups, not N;
 * at most ASYNC_SENDERS_MAX groups are in flight, and what queues
 * meanwhile leaves with the next. A call whose first attempt did not end
 * it (no reply, UNAVAILABLE, WINDOW_FULL) is resumed by a worker of its
 * own (call_group_resume), with every retry rule of the blocking engine.
 *
 * Owns: the handle's async_pool and every once_future's life.
 * Invariant: a queued call is taken by exactly one worker, and a call to
 * resume by exactly one; pending counts every call queued, in a group or
 * resumed, and its callback, so async_fini returns only when no callback
 * can run any more. Workers are started on demand (when work waits and no
 * worker is idle), at most ASYNC_WORKERS_MAX.
 * A callback runs on a worker thread, after the future is finished (so
 * once_wait inside it returns at once) and with no lock held.
 * Layer: above the call engine (call.h), beside the typed methods.
 * Never: holds the pool's lock or a future's lock across a call or a
 * callback; never touches nng itself.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/async.h"
#include "client/call_group.h"
#include "client/client_impl.h"
#include "client/status.h"

static void *async_worker(void *arg);

int
async_init(async_pool *p)
{
    memset(p, 0, sizeof(*p));
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        return ENOMEM;
    }
    if (pthread_cond_init(&p->work, NULL) != 0) {
        pthread_mutex_destroy(&p->lock);
        return ENOMEM;
    }
    if (pthread_cond_init(&p->drained, NULL) != 0) {
        pthread_cond_destroy(&p->work);
        pthread_mutex_destroy(&p->lock);
        return ENOMEM;
    }
    return 0;
}

once_future *
async_future_alloc(void)
{
    once_future *f = calloc(1, sizeof(*f));

    if (f == NULL) {
        return NULL;
    }
    if (pthread_mutex_init(&f->lock, NULL) != 0) {
        free(f);
        return NULL;
    }
    if (pthread_cond_init(&f->cv, NULL) != 0) {
        pthread_mutex_destroy(&f->lock);
        free(f);
        return NULL;
    }
    f->refs = 2;
    return f;
}

void
async_future_unref(once_future *f)
{
    int left;

    if (f == NULL) {
        return;
    }
    pthread_mutex_lock(&f->lock);
    left = --f->refs;
    pthread_mutex_unlock(&f->lock);
    if (left > 0) {
        return;
    }
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->lock);
    free(f->method);
    free(f->req);
    free(f->resp);
    free(f);
}

/* Marks a future whose call ended finished: once_wait returns. */
static void
async_fin(once_future *f)
{
    pthread_mutex_lock(&f->lock);
    f->fin = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->lock);
}

/* After async_fin: the callback, then the engine's reference goes. */
static void
async_callback(once_future *f)
{
    if (f->done != NULL) {
        f->done(f, f->arg);
    }
    async_future_unref(f);
}

/* Finishes a future whose call ended: fin, callback, unref. */
static void
async_finish(once_future *f)
{
    async_fin(f);
    async_callback(f);
}

/* The call arguments of f as a group entry. */
static void
async_entry(once_future *f, call_group_entry *e)
{
    memset(e, 0, sizeof(*e));
    e->method = f->method;
    e->kind = f->kind;
    e->id = &f->id;
    e->req = f->req;
    e->req_len = f->req_len;
    e->resp = &f->resp;
    e->resp_len = &f->resp_len;
    e->st = &f->st;
    e->rest = f->rest;
}

/* Under the lock: a new worker when none is idle to take what waits (a
 * group while senders are free, a call to resume). */
static void
async_spawn_locked(async_pool *p)
{
    bool work = !queue_empty(&p->resume) ||
                (!queue_empty(&p->fresh) && p->nsenders < ASYNC_SENDERS_MAX);

    if (work && p->nidle == 0 && p->nworkers < ASYNC_WORKERS_MAX &&
        pthread_create(&p->threads[p->nworkers], NULL, async_worker, p) == 0) {
        p->nworkers++;
    }
}

/* Called with the lock held, returns with it held: sends everything
 * queued (up to a batch) as one group, finishes the calls answered and
 * queues the others to be resumed. */
static void
async_send_group(async_pool *p)
{
    once_future *fs[BATCH_ENTRIES_MAX];
    call_group_entry g[BATCH_ENTRIES_MAX];
    size_t n = 0, finished = 0;

    while (!queue_empty(&p->fresh) && n < BATCH_ENTRIES_MAX) {
        fs[n++] = QUEUE_ITEM(queue_pop(&p->fresh), once_future, link);
    }
    p->nsenders++;
    pthread_mutex_unlock(&p->lock);
    for (size_t i = 0; i < n; i++) {
        async_entry(fs[i], &g[i]);
    }
    if (n > 0) {
        call_group(fs[0]->c, g, n);
    }
    /* Every answered call of the group is finished before any callback
     * runs: a callback that waits for a neighbour's future returns. */
    for (size_t i = 0; i < n; i++) {
        if (g[i].done) {
            fs[i]->code = g[i].rv;
            async_fin(fs[i]);
            finished++;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (g[i].done) {
            async_callback(fs[i]);
        }
    }
    pthread_mutex_lock(&p->lock);
    p->nsenders--;
    for (size_t i = 0; i < n; i++) {
        if (!g[i].done) {
            fs[i]->rest = g[i].rest;
            queue_push(&p->resume, &fs[i]->link);
        }
    }
    p->pending -= finished;
    if (p->pending == 0) {
        pthread_cond_broadcast(&p->drained);
    }
    pthread_cond_broadcast(&p->work);
    async_spawn_locked(p);
}

/* Called with the lock held, returns with it held: the rest of one call
 * whose first attempt did not end it (backoff and retries, blocking). */
static void
async_resume_one(async_pool *p)
{
    once_future *f = QUEUE_ITEM(queue_pop(&p->resume), once_future, link);
    call_group_entry e;

    pthread_mutex_unlock(&p->lock);
    async_entry(f, &e);
    f->rest = NULL;
    f->code = call_group_resume(f->c, &e, NULL);
    async_finish(f);
    pthread_mutex_lock(&p->lock);
    if (--p->pending == 0) {
        pthread_cond_broadcast(&p->drained);
    }
}

static void *
async_worker(void *arg)
{
    async_pool *p = arg;

    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (queue_empty(&p->resume) &&
               !(!queue_empty(&p->fresh) && p->nsenders < ASYNC_SENDERS_MAX) &&
               !p->stop) {
            p->nidle++;
            pthread_cond_wait(&p->work, &p->lock);
            p->nidle--;
        }
        if (!queue_empty(&p->resume)) {
            async_resume_one(p);
        } else if (!queue_empty(&p->fresh) && p->nsenders < ASYNC_SENDERS_MAX) {
            async_send_group(p);
        } else if (p->stop) {
            break; /* stop, and nothing left */
        }
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int
async_submit(async_pool *p, once_future *f, once_status *st)
{
    int rv = ONCE_OK;

    pthread_mutex_lock(&p->lock);
    if (p->stop) {
        rv = status_set(st, ONCE_CANCELLED, ONCE_REASON_NOT_SENT,
                        "the handle is closing; nothing was sent");
        goto out;
    }
    if (p->pending >= ASYNC_PENDING_MAX) {
        rv = status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NOT_SENT,
                        "%u async calls of this handle are already pending; "
                        "nothing was sent — wait for some first",
                        ASYNC_PENDING_MAX);
        goto out;
    }
    if (p->nworkers == 0) {
        if (pthread_create(&p->threads[0], NULL, async_worker, p) != 0) {
            rv = status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NOT_SENT,
                            "cannot start a call thread; nothing was sent");
            goto out;
        }
        p->nworkers = 1;
    }
    queue_push(&p->fresh, &f->link);
    p->pending++;
    /* A sender for it: an idle worker, or a new one while senders are
     * free (a busy sender takes the queue when it comes back). */
    async_spawn_locked(p);
    pthread_cond_signal(&p->work);
out:
    pthread_mutex_unlock(&p->lock);
    return rv;
}

void
async_stop(async_pool *p)
{
    unsigned n;

    pthread_mutex_lock(&p->lock);
    while (p->pending > 0) {
        pthread_cond_wait(&p->drained, &p->lock);
    }
    p->stop = true;
    pthread_cond_broadcast(&p->work);
    n = p->nworkers;
    p->nworkers = 0;
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < n; i++) {
        pthread_join(p->threads[i], NULL);
    }
}

void
async_fini(async_pool *p)
{
    async_stop(p);
    pthread_cond_destroy(&p->drained);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->lock);
}

int
once_call_async(once_client *c, const char *method, bool mutating,
                const once_rpc_id *id, const void *req, size_t req_len,
                once_done_fn done, void *arg, once_future **fp, once_status *st)
{
    once_status local;
    once_future *f;
    int rv;

    if (st == NULL) {
        st = &local;
    }
    status_clear(st);
    if (fp != NULL) {
        *fp = NULL;
    }
    if (c == NULL || method == NULL || method[0] == '\0' ||
        (req == NULL && req_len > 0) || (fp == NULL && done == NULL)) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "an async call needs a handle, a method, a payload "
                          "and a future pointer or a callback");
    }
    if ((f = async_future_alloc()) == NULL ||
        (f->method = strdup(method)) == NULL ||
        (f->req = malloc(req_len > 0 ? req_len : 1)) == NULL) {
        if (f != NULL) {
            f->refs = 1;
            async_future_unref(f);
        }
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "out of memory; nothing was sent");
    }
    if (req_len > 0) {
        memcpy(f->req, req, req_len);
    }
    f->c = c;
    /* No id written back, so no id variable reused by mistake: a non-zero
     * seq is a retry of exactly that id (once_call_retry), else new. */
    f->kind = !mutating                      ? CALL_READ
              : (id != NULL && id->seq != 0) ? CALL_RETRY
                                             : CALL_NEW;
    f->req_len = req_len;
    f->done = done;
    f->arg = arg;
    if (id != NULL && mutating) {
        f->id = *id;
    }
    if (fp == NULL) {
        f->refs = 1; /* the engine's only */
    }
    if ((rv = async_submit(&c->async, f, st)) != ONCE_OK) {
        f->refs = 1;
        async_future_unref(f);
        return rv;
    }
    if (fp != NULL) {
        *fp = f;
    }
    return ONCE_OK;
}

int
once_wait(once_future *f, once_status *st)
{
    if (f == NULL) {
        if (st != NULL) {
            status_clear(st);
        }
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "once_wait needs a future");
    }
    pthread_mutex_lock(&f->lock);
    while (!f->fin) {
        pthread_cond_wait(&f->cv, &f->lock);
    }
    pthread_mutex_unlock(&f->lock);
    if (st != NULL) {
        *st = f->st;
    }
    return f->code;
}

bool
once_future_done(once_future *f)
{
    bool fin;

    if (f == NULL) {
        return false;
    }
    pthread_mutex_lock(&f->lock);
    fin = f->fin;
    pthread_mutex_unlock(&f->lock);
    return fin;
}

void
once_future_id(once_future *f, once_rpc_id *id)
{
    if (id == NULL) {
        return;
    }
    memset(id, 0, sizeof(*id));
    if (f != NULL && once_future_done(f)) {
        *id = f->id;
    }
}

int
once_future_response(once_future *f, void **resp, size_t *resp_len)
{
    int code;

    if (resp != NULL) {
        *resp = NULL;
    }
    if (resp_len != NULL) {
        *resp_len = 0;
    }
    if (f == NULL) {
        return ONCE_INVALID_ARGUMENT;
    }
    if ((code = once_wait(f, NULL)) != ONCE_OK) {
        return code;
    }
    if (resp_len != NULL) {
        *resp_len = f->resp_len;
    }
    if (resp != NULL) {
        *resp = f->resp; /* handed over once */
        f->resp = NULL;
        f->resp_len = 0;
    }
    return ONCE_OK;
}

void
once_future_free(once_future *f)
{
    async_future_unref(f);
}
