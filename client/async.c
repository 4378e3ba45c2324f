/*
 * async.c — asynchronous calls (once_call_async, once_wait,
 * once_future_*): the queue of a handle's async calls and the workers that
 * run them through the call engine.
 *
 * Owns: the handle's async_pool and every once_future's life.
 * Invariant: a queued call is started by exactly one worker; pending counts
 * every call queued or running, and its callback, so async_fini returns
 * only when no callback can run any more. Workers are started on demand
 * (when a call is queued and no worker is idle), at most ASYNC_WORKERS_MAX.
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
#include "client/client_impl.h"
#include "client/status.h"

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

/* Runs one call and finishes its future: result, fin, callback, unref. */
static void
async_run(once_future *f)
{
    f->code = call_do(f->c, f->method, f->kind, &f->id, f->req, f->req_len,
                      &f->resp, &f->resp_len, &f->st, 0);
    pthread_mutex_lock(&f->lock);
    f->fin = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->lock);
    if (f->done != NULL) {
        f->done(f, f->arg);
    }
    async_future_unref(f);
}

static void *
async_worker(void *arg)
{
    async_pool *p = arg;

    pthread_mutex_lock(&p->lock);
    for (;;) {
        once_future *f;

        while (p->head == NULL && !p->stop) {
            p->nidle++;
            pthread_cond_wait(&p->work, &p->lock);
            p->nidle--;
        }
        if (p->head == NULL) {
            break; /* stop, and nothing left */
        }
        f = p->head;
        p->head = f->next;
        if (p->head == NULL) {
            p->tail = NULL;
        }
        f->next = NULL;
        p->queued--;
        pthread_mutex_unlock(&p->lock);
        async_run(f);
        pthread_mutex_lock(&p->lock);
        if (--p->pending == 0) {
            pthread_cond_broadcast(&p->drained);
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
    /* A worker for it: an idle one, or a new one while under the cap
     * (else it waits in the queue for the next worker to be free). */
    if (p->queued + 1 > p->nidle && p->nworkers < ASYNC_WORKERS_MAX) {
        if (pthread_create(&p->threads[p->nworkers], NULL, async_worker, p) ==
            0) {
            p->nworkers++;
        } else if (p->nworkers == 0) {
            rv = status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NOT_SENT,
                            "cannot start a call thread; nothing was sent");
            goto out;
        }
    }
    f->next = NULL;
    if (p->tail != NULL) {
        p->tail->next = f;
    } else {
        p->head = f;
    }
    p->tail = f;
    p->queued++;
    p->pending++;
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
