/*
 * queue.c — the intrusive FIFO of queue.h.
 */
#include "base/queue.h"

void
queue_push(queue *q, queue_link *l)
{
    l->next = NULL;
    if (q->tail != NULL) {
        q->tail->next = l;
    } else {
        q->head = l;
    }
    q->tail = l;
    q->len++;
}

queue_link *
queue_pop(queue *q)
{
    queue_link *l = q->head;

    if (l != NULL) {
        if ((q->head = l->next) == NULL) {
            q->tail = NULL;
        }
        l->next = NULL;
        q->len--;
    }
    return l;
}

size_t
queue_take(queue *q, queue *out, size_t max)
{
    queue_link *last = q->head;
    size_t n;

    if (last == NULL || max == 0) {
        return 0;
    }
    for (n = 1; n < max && last->next != NULL; n++) {
        last = last->next;
    }
    out->head = q->head;
    out->tail = last;
    out->len = n;
    if ((q->head = last->next) == NULL) {
        q->tail = NULL;
    }
    last->next = NULL;
    q->len -= n;
    return n;
}

bool
queue_remove(queue *q, queue_link *l)
{
    queue_link **pp = &q->head, *prev = NULL;

    while (*pp != NULL && *pp != l) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (*pp == NULL) {
        return false;
    }
    *pp = l->next;
    if (q->tail == l) {
        q->tail = prev;
    }
    l->next = NULL;
    q->len--;
    return true;
}
