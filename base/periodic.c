/*
 * periodic.c — the periodic thread (periodic.h).
 */
#include "base/periodic.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "base/clock.h"

struct periodic {
    periodic_fn fn;
    void *arg;
    uint64_t period_ms;
    unsigned opts;
    pthread_t thread;
    pthread_mutex_t lock; /* protects stopping and woken */
    pthread_cond_t cv;    /* monotonic; signalled by wakeup and stop */
    bool stopping;
    bool woken;
};

static void *
periodic_main(void *arg)
{
    periodic *p = arg;

    if ((p->opts & PERIODIC_RUN_FIRST) != 0) {
        p->fn(p->arg, PERIODIC_FIRST);
    }
    pthread_mutex_lock(&p->lock);
    for (;;) {
        struct timespec dl = clock_deadline(p->period_ms);
        unsigned why;

        while (!p->stopping && !p->woken &&
               pthread_cond_timedwait(&p->cv, &p->lock, &dl) != ETIMEDOUT) {
        }
        if (p->stopping) {
            break;
        }
        why = p->woken ? PERIODIC_WOKEN : 0;
        p->woken = false;
        pthread_mutex_unlock(&p->lock);
        p->fn(p->arg, why);
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    if ((p->opts & PERIODIC_RUN_LAST) != 0) {
        p->fn(p->arg, PERIODIC_LAST);
    }
    return NULL;
}

int
periodic_start(periodic **pp, periodic_fn fn, void *arg, uint64_t period_ms,
               unsigned opts)
{
    periodic *p;
    int rv;

    if ((p = calloc(1, sizeof(*p))) == NULL) {
        return ENOMEM;
    }
    p->fn = fn;
    p->arg = arg;
    p->period_ms = period_ms;
    p->opts = opts;
    pthread_mutex_init(&p->lock, NULL);
    if ((rv = clock_cond_init(&p->cv)) != 0) {
        pthread_mutex_destroy(&p->lock);
        free(p);
        return rv;
    }
    *pp = p; /* before the thread starts: fn may read it */
    if ((rv = pthread_create(&p->thread, NULL, periodic_main, p)) != 0) {
        *pp = NULL;
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return rv;
    }
    return 0;
}

void
periodic_wakeup(periodic *p)
{
    pthread_mutex_lock(&p->lock);
    p->woken = true;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->lock);
}

bool
periodic_stopping(periodic *p)
{
    bool s;

    pthread_mutex_lock(&p->lock);
    s = p->stopping;
    pthread_mutex_unlock(&p->lock);
    return s;
}

void
periodic_stop(periodic **pp)
{
    periodic *p = *pp;

    if (p == NULL) {
        return;
    }
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    *pp = NULL; /* after the join: fn may read it until then */
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
