/*
 * queue.h — one intrusive FIFO: a singly linked list with a tail pointer.
 *
 * The queues of once (the executor's posted tasks, each lane of the fair
 * queue and its ring, the store's commit queue, libonce's batch queue and
 * its async pool's two queues) are each a list of elements that embed a
 * queue_link; this is that list, once. An element is found from its link
 * with QUEUE_ITEM.
 *
 * Owns: nothing but the links: the elements are the caller's, and an
 * element is in at most one queue per queue_link it embeds.
 * Invariant: head is NULL exactly when tail is and len is 0; elements
 * leave in the order they came (queue_remove aside).
 * Never: locks (the queue's owner holds its own mutex around every call);
 * allocates; blocks. A zeroed queue is an empty one.
 */
#ifndef BASE_QUEUE_H
#define BASE_QUEUE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct queue_link {
    struct queue_link *next; /* NULL at the tail */
} queue_link;

typedef struct queue {
    queue_link *head; /* the next to leave */
    queue_link *tail;
    size_t len; /* links in the queue */
} queue;

/* The element of type `type` whose member `member` is the link l. */
#define QUEUE_ITEM(l, type, member)                                            \
    ((type *)(void *)((char *)(l)-offsetof(type, member)))

/* True when q holds nothing. */
static inline bool
queue_empty(const queue *q)
{
    return q->head == NULL;
}

/* Appends l (not in any queue) at the tail of q. */
void queue_push(queue *q, queue_link *l);

/* Takes the head of q (its next set to NULL); NULL when q is empty. */
queue_link *queue_pop(queue *q);

/* Moves the first min(max, q->len) links of q, in order, to the empty
 * queue out; returns how many. */
size_t queue_take(queue *q, queue *out, size_t max);

/* Takes l out of q wherever it is (a scan: O(len)); false, q unchanged,
 * when l is not in q. */
bool queue_remove(queue *q, queue_link *l);

#endif /* BASE_QUEUE_H */
