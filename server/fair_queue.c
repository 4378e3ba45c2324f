/*
 * fair_queue.c — the lanes and ring of fair_queue.h.
 *
 * Finding a lane is a scan of the ring: it holds one lane per key with a
 * request queued, so at most the requests in flight (--contexts).
 */
#include "server/fair_queue.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "server/listener.h"

struct fairq_lane {
    unsigned char key[FAIRQ_KEY_MAX];
    size_t klen;
    listener_req *head;
    listener_req *tail;
    fairq_lane *next; /* the next lane of the ring */
};

int
fair_queue_push(fair_queue *q, const void *key, size_t klen, listener_req *r)
{
    fairq_lane *l;

    klen = klen < FAIRQ_KEY_MAX ? klen : FAIRQ_KEY_MAX;
    for (l = q->head; l != NULL; l = l->next) {
        if (l->klen == klen && memcmp(l->key, key, klen) == 0) {
            break;
        }
    }
    if (l == NULL) {
        if ((l = calloc(1, sizeof(*l))) == NULL) {
            return ENOMEM;
        }
        memcpy(l->key, key, klen);
        l->klen = klen;
        if (q->tail != NULL) {
            q->tail->next = l;
        } else {
            q->head = l;
        }
        q->tail = l;
        q->lanes++;
    }
    r->next = NULL;
    if (l->tail != NULL) {
        l->tail->next = r;
    } else {
        l->head = r;
    }
    l->tail = r;
    q->queued++;
    return 0;
}

listener_req *
fair_queue_pop(fair_queue *q)
{
    fairq_lane *l = q->head;
    listener_req *r;

    if (l == NULL) {
        return NULL;
    }
    r = l->head;
    if ((l->head = r->next) == NULL) {
        l->tail = NULL;
    }
    r->next = NULL;
    q->queued--;
    q->head = l->next;
    l->next = NULL;
    if (q->head == NULL) {
        q->tail = NULL;
    }
    if (l->head == NULL) {
        free(l);
        q->lanes--;
    } else { /* to the tail of the ring */
        if (q->tail != NULL) {
            q->tail->next = l;
        } else {
            q->head = l;
        }
        q->tail = l;
    }
    return r;
}
