/*
 * batch.h — coalescing on one handle: calls that find messages of the
 * handle already in flight wait in a queue, and one of them (the leader)
 * sends the queue as one batch envelope (once.proto, once.v1.Batch).
 *
 * Owns: the handle's batch queue (struct batch_queue): the count of its
 * messages in flight, the waiting entries, who leads the next batch.
 * Invariant: an entry is in at most one of: the queue, one leader's taken
 * list; an entry whose waiter gave up is unlinked from both under the lock
 * before its waiter returns (entries live on their waiter's stack). At
 * most one leader at a time. A message in flight is counted from
 * batch_join/batch_take until batch_release. Knows nothing of rpc ids,
 * envelopes or sockets: it moves packed bytes.
 * Never: does I/O; never holds its lock while anyone sends or waits on nng.
 */
#ifndef CLIENT_BATCH_H
#define CLIENT_BATCH_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/queue.h"

/* Messages of one handle in flight before new calls queue. */
#define BATCH_INFLIGHT_MAX 2u
/* Entries in one batch (the server's limit, WIRE_BATCH_MAX_ENTRIES). */
#define BATCH_ENTRIES_MAX 256u
/* Bytes of entries in one batch when the server's --recv-max is not
 * known (an OpenLease reply tells it). */
#define BATCH_BYTES_DEFAULT (256u * 1024u)

typedef enum batch_role {
    BATCH_PLAIN,  /* send your envelope alone, then batch_release */
    BATCH_LEAD,   /* batch_take, send, batch_finish, batch_release */
    BATCH_FOLLOW, /* batch_wait */
} batch_role;

typedef enum batch_state {
    BATCH_QUEUED,
    BATCH_TAKEN,  /* in a leader's list, being sent */
    BATCH_DONE,   /* resp holds this entry's Response */
    BATCH_FAILED, /* the batch got no usable reply: err */
    BATCH_LEADS,  /* promoted: this waiter leads the next batch */
} batch_state;

typedef struct batch_entry {
    const uint8_t *req; /* packed entry envelope, the waiter's */
    size_t len;
    pthread_cond_t cv; /* the waiter's; signalled on a state change */
    batch_state state; /* under the queue's lock */
    bool sent;         /* the batch holding it was handed to nng */
    uint8_t *resp;     /* BATCH_DONE: malloc'd, the waiter frees */
    size_t resp_len;
    int err;                   /* BATCH_FAILED: an nng error */
    queue_link link;           /* in the queue */
    struct batch_entry **held; /* BATCH_TAKEN: the leader's slot for it */
} batch_entry;

typedef struct batch_queue {
    pthread_mutex_t lock; /* protects every field */
    pthread_cond_t room;  /* inflight went down */
    unsigned inflight;    /* messages sent (or being sent), unanswered */
    queue waiting;        /* batch_entry QUEUED, in arrival order */
    bool led;             /* a leader exists (queued or taking) */
} batch_queue;

void batch_init(batch_queue *q);
void batch_fini(batch_queue *q);

/* Enters a call with its packed envelope e->req/len: PLAIN (counted in
 * flight: send it alone), LEAD or FOLLOW (queued). */
batch_role batch_join(batch_queue *q, batch_entry *e);

/* A follower waits until its entry is answered (DONE), failed (FAILED),
 * it is promoted (LEADS), or until_ms (clock_now_ms clock) passes: then
 * it is unlinked and the state says whether it had been sent (e->sent). */
batch_state batch_wait(batch_queue *q, batch_entry *e, uint64_t until_ms);

/* The leader: waits (until until_ms at most) for room in flight, then takes
 * itself and up to BATCH_ENTRIES_MAX - 1 queued entries (at most max_bytes
 * of envelopes in all) into held[], counts one message in flight, marks
 * them sent and passes the lead on when entries remain; copies[i] is a
 * malloc'd copy of held[i]'s envelope and lens[i] its length, the leader
 * frees. Read lens, never held[i]->len: a follower that gives up unlinks
 * itself (held[i] becomes NULL) as soon as the lock is let go.
 * Returns how many (held[0] is e); at until_ms it takes them even
 * without room (then more than BATCH_INFLIGHT_MAX are in flight). */
size_t batch_take(batch_queue *q, batch_entry *e, uint64_t until_ms,
                  size_t max_bytes, batch_entry **held, uint8_t **copies,
                  size_t *lens);

/* Hands each taken entry still waited for its Response (resps[i], copied;
 * NULL or err != 0: FAILED with err), sets its sent (whether the batch left
 * this process) and wakes it. held[0] is the
 * leader's own and is filled the same way. */
void batch_finish(batch_queue *q, batch_entry **held, size_t n,
                  const uint8_t *const *resps, const size_t *lens, int err,
                  bool sent);

/* One message of the handle is answered (or given up): room for the next,
 * and the lead passes to the queue's head if nobody leads. */
void batch_release(batch_queue *q);

#endif /* CLIENT_BATCH_H */
