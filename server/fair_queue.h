/*
 * fair_queue.h — requests queued in lanes, served round-robin.
 *
 * Owns: one FIFO lane per key (a connection for the verifier, a principal
 * for the executor) among the lanes that hold requests, and the ring of
 * those lanes. Taking a request takes the first of the lane at the head
 * of the ring and moves that lane to the tail: a request waits behind at
 * most one request of every other lane that was queued when its lane
 * became active, whatever their lanes hold.
 * Invariant: a lane is in the ring exactly while it holds a request; an
 * empty lane is freed.
 * Never: locks (its owner does); blocks. Its lanes and ring are
 * base/queue.h FIFOs.
 */
#ifndef SERVER_FAIR_QUEUE_H
#define SERVER_FAIR_QUEUE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/queue.h"

/* The longest key; longer ones are cut (a principal's name is at most
 * PRINCIPAL_NAME_MAX, 128, bytes). */
#define FAIRQ_KEY_MAX 132

typedef struct listener_req listener_req;
typedef struct fairq_lane fairq_lane;

typedef struct fair_queue {
    queue ring;    /* of fairq_lane, as a list: served from the head */
    size_t queued; /* requests in all lanes */
} fair_queue;

/* Appends r to the lane of key[0, klen). 0 or ENOMEM (r not queued). */
int fair_queue_push(fair_queue *q, const void *key, size_t klen,
                    listener_req *r);

/* The next request round-robin, or NULL when none is queued. */
listener_req *fair_queue_pop(fair_queue *q);

#endif /* SERVER_FAIR_QUEUE_H */
