/*
 * close_bounded.c — nng_close on a thread the caller waits for at most a
 * bound (close_bounded.h).
 */
#include "base/close_bounded.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/clock.h"

typedef struct closer {
    nng_socket s;
    pthread_mutex_t mtx; /* protects done and abandoned */
    pthread_cond_t cv;   /* monotonic (clock_cond_init) */
    bool done;           /* nng_close returned */
    bool abandoned;      /* the caller stopped waiting: the thread frees */
} closer;

static void
closer_free(closer *c)
{
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mtx);
    free(c);
}

static void *
closer_main(void *arg)
{
    closer *c = arg;
    bool alone;

    nng_close(c->s);
    pthread_mutex_lock(&c->mtx);
    c->done = true;
    alone = c->abandoned;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mtx);
    if (alone) {
        closer_free(c);
    }
    return NULL;
}

bool
close_bounded(nng_socket s, unsigned ms)
{
    closer *c = calloc(1, sizeof(*c));
    struct timespec until;
    pthread_t t;
    bool done;

    if (c == NULL) {
        nng_close(s);
        return true;
    }
    c->s = s;
    pthread_mutex_init(&c->mtx, NULL);
    clock_cond_init(&c->cv);
    if (pthread_create(&t, NULL, closer_main, c) != 0) {
        nng_close(s);
        closer_free(c);
        return true;
    }
    until = clock_deadline(ms);
    pthread_mutex_lock(&c->mtx);
    while (!c->done && pthread_cond_timedwait(&c->cv, &c->mtx, &until) == 0) {
    }
    done = c->done;
    c->abandoned = !done;
    pthread_mutex_unlock(&c->mtx);
    if (done) {
        pthread_join(t, NULL);
        closer_free(c);
    } else {
        pthread_detach(t);
    }
    return done;
}
