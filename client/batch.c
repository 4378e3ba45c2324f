/*
 * batch.c — the batch queue of one handle (batch.h): who sends alone, who
 * leads a batch, who waits.
 *
 * Owns: struct batch_queue and the states of the entries in it.
 * Invariant: see batch.h; an entry's waiter is woken exactly when its state
 * leaves QUEUED/TAKEN or it is promoted.
 * Never: does I/O or calls out with the lock held.
 */
#include "client/batch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/retry.h"
#include "base/clock.h"

void
batch_init(batch_queue *q)
{
    memset(q, 0, sizeof(*q));
    pthread_mutex_init(&q->lock, NULL);
    clock_cond_init(&q->room); /* waits until clock_deadline */
}

void
batch_fini(batch_queue *q)
{
    pthread_cond_destroy(&q->room);
    pthread_mutex_destroy(&q->lock);
}

/* Under the lock: the queue's head leads when nobody does. */
static void
batch_promote(batch_queue *q)
{
    if (!q->led && !queue_empty(&q->waiting)) {
        batch_entry *head = QUEUE_ITEM(q->waiting.head, batch_entry, link);
        q->led = true;
        head->state = BATCH_LEADS;
        pthread_cond_signal(&head->cv);
    }
}

batch_role
batch_join(batch_queue *q, batch_entry *e)
{
    batch_role role;

    clock_cond_init(&e->cv); /* waits until clock_deadline */
    e->state = BATCH_QUEUED;
    e->sent = false;
    e->resp = NULL;
    e->resp_len = 0;
    e->err = 0;
    e->held = NULL;
    pthread_mutex_lock(&q->lock);
    if (q->inflight < BATCH_INFLIGHT_MAX && queue_empty(&q->waiting)) {
        q->inflight++;
        role = BATCH_PLAIN;
    } else {
        queue_push(&q->waiting, &e->link);
        if (!q->led) {
            q->led = true;
            e->state = BATCH_LEADS;
            role = BATCH_LEAD;
        } else {
            role = BATCH_FOLLOW;
        }
    }
    pthread_mutex_unlock(&q->lock);
    if (role == BATCH_PLAIN) {
        pthread_cond_destroy(&e->cv);
    }
    return role;
}

batch_state
batch_wait(batch_queue *q, batch_entry *e, uint64_t until_ms)
{
    struct timespec ts = clock_deadline(retry_remaining_ms(until_ms));
    batch_state st;

    pthread_mutex_lock(&q->lock);
    while ((e->state == BATCH_QUEUED || e->state == BATCH_TAKEN) &&
           pthread_cond_timedwait(&e->cv, &q->lock, &ts) != ETIMEDOUT) {
    }
    st = e->state;
    if (st == BATCH_QUEUED) { /* gave up before any leader took it */
        queue_remove(&q->waiting, &e->link);
        e->err = ETIMEDOUT;
        st = e->state = BATCH_FAILED;
    } else if (st == BATCH_TAKEN) { /* sent, unanswered: leave the batch */
        *e->held = NULL;
        e->err = ETIMEDOUT;
        st = e->state = BATCH_FAILED;
    }
    pthread_mutex_unlock(&q->lock);
    if (st != BATCH_LEADS) {
        pthread_cond_destroy(&e->cv);
    }
    return st;
}

size_t
batch_take(batch_queue *q, batch_entry *e, uint64_t until_ms, size_t max_bytes,
           batch_entry **held, uint8_t **copies, size_t *lens)
{
    struct timespec ts = clock_deadline(retry_remaining_ms(until_ms));
    size_t n = 0, bytes;

    pthread_mutex_lock(&q->lock);
    while (q->inflight >= BATCH_INFLIGHT_MAX &&
           pthread_cond_timedwait(&q->room, &q->lock, &ts) != ETIMEDOUT) {
    }
    /* Room or not: at until_ms the batch goes anyway (a server that
     * answers nothing must not keep calls from being sent at all). */
    queue_remove(&q->waiting, &e->link);
    held[n++] = e;
    bytes = e->len;
    while (!queue_empty(&q->waiting) && n < BATCH_ENTRIES_MAX) {
        batch_entry *x = QUEUE_ITEM(q->waiting.head, batch_entry, link);
        if (bytes + x->len > max_bytes) {
            break;
        }
        queue_pop(&q->waiting);
        held[n++] = x;
        bytes += x->len;
    }
    for (size_t i = 0; i < n; i++) {
        /* Copied now: a follower that gives up takes its bytes along.
         * sent: from here it may have left (batch_finish corrects it). */
        if ((copies[i] = malloc(held[i]->len > 0 ? held[i]->len : 1)) == NULL) {
            abort(); /* as protobuf-c does without memory */
        }
        memcpy(copies[i], held[i]->req, held[i]->len);
        lens[i] = held[i]->len;
        held[i]->state = BATCH_TAKEN;
        held[i]->sent = true;
        held[i]->held = &held[i];
    }
    q->inflight++;
    q->led = false;
    /* The rest wait for room under a leader of their own. */
    batch_promote(q);
    pthread_mutex_unlock(&q->lock);
    return n;
}

void
batch_finish(batch_queue *q, batch_entry **held, size_t n,
             const uint8_t *const *resps, const size_t *lens, int err,
             bool sent)
{
    pthread_mutex_lock(&q->lock);
    for (size_t i = 0; i < n; i++) {
        batch_entry *x = held[i];
        uint8_t *p = NULL;

        if (x == NULL) {
            continue; /* its waiter gave up */
        }
        if (err == 0 && resps != NULL && resps[i] != NULL &&
            (p = malloc(lens[i] > 0 ? lens[i] : 1)) != NULL) {
            memcpy(p, resps[i], lens[i]);
            x->resp = p;
            x->resp_len = lens[i];
            x->state = BATCH_DONE;
        } else {
            x->err = err != 0 ? err : ENOMEM;
            x->state = BATCH_FAILED;
        }
        x->sent = sent;
        x->held = NULL;
        held[i] = NULL;
        if (i > 0) {
            pthread_cond_signal(&x->cv);
        }
    }
    pthread_mutex_unlock(&q->lock);
}

void
batch_release(batch_queue *q)
{
    pthread_mutex_lock(&q->lock);
    if (q->inflight > 0) {
        q->inflight--;
    }
    pthread_cond_broadcast(&q->room);
    batch_promote(q);
    pthread_mutex_unlock(&q->lock);
}
