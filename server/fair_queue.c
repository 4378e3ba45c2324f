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
    queue reqs;     /* listener_req, by their link */
    queue_link way; /* in the ring */
};

int
fair_queue_push(fair_queue *q, const void *key, size_t klen, listener_req *r)
{
    fairq_lane *l = NULL;

    klen = klen < FAIRQ_KEY_MAX ? klen : FAIRQ_KEY_MAX;
    for (queue_link *w = q->ring.head; w != NULL; w = w->next) {
        fairq_lane *x = QUEUE_ITEM(w, fairq_lane, way);
        if (x->klen == klen && memcmp(x->key, key, klen) == 0) {
            l = x;
            break;
        }
    }
    if (l == NULL) {
        if ((l = calloc(1, sizeof(*l))) == NULL) {
            return ENOMEM;
        }
        memcpy(l->key, key, klen);
        l->klen = klen;
        queue_push(&q->ring, &l->way);
    }
    queue_push(&l->reqs, &r->link);
    q->queued++;
    return 0;
}

listener_req *
fair_queue_pop(fair_queue *q)
{
    queue_link *w = queue_pop(&q->ring);
    fairq_lane *l;
    listener_req *r;

    if (w == NULL) {
        return NULL;
    }
    l = QUEUE_ITEM(w, fairq_lane, way);
    r = QUEUE_ITEM(queue_pop(&l->reqs), listener_req, link);
    q->queued--;
    if (queue_empty(&l->reqs)) {
        free(l);
    } else { /* to the tail of the ring */
        queue_push(&q->ring, &l->way);
    }
    return r;
}
