/*
 * slot.h — call slots: an nng REQ context and its two aios, kept for reuse.
 *
 * A call takes a slot for all its attempts and gives it back at the end.
 * Opening a context and allocating an aio cost nng's global socket lock and
 * an allocation each; under many callers that lock is contended, so slots
 * that ended cleanly are kept (up to SLOT_KEEP per handle) for the next
 * call.
 *
 * Owns: a socket's free slots (struct slot_pool, under its lock).
 * Invariant: a slot's aio only ever sends and receives and its sleep aio
 * only ever sleeps (the backoff between attempts). nng 1.5 reports a send
 * or receive that timed out on an aio that has slept as success (0, and
 * the message still on the aio, or none received), so the two are never
 * the same aio. A kept slot has no operation in flight on either aio and
 * no message on its aio; and no connection of the handle has closed since
 * it was kept: a context that last talked over a connection that is gone
 * is closed, not reused (slot_watch), so after a server restart every call
 * starts on a fresh context, as before slots.
 * Never: keeps a slot whose last operation ended in an error; never sleeps
 * on aio.
 */
#ifndef CLIENT_SLOT_H
#define CLIENT_SLOT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

typedef struct call_slot call_slot;

/* The free slots of one socket. */
typedef struct slot_pool {
    pthread_mutex_t lock;        /* protects slots and nslots */
    call_slot *slots;            /* free slots */
    size_t nslots;               /* under lock */
    _Atomic uint64_t pipes_lost; /* connections closed so far */
} slot_pool;

struct call_slot {
    nng_ctx ctx;
    nng_aio *aio;           /* sends and receives on ctx, never sleeps */
    nng_aio *sleep;         /* the backoff between attempts, nothing else */
    uint64_t pipes_lost;    /* the handle's count when it was kept */
    struct call_slot *next; /* in the free list */
};

/* An empty pool (its lock initialized). */
void slot_init(slot_pool *p);

/* Counts sock's closed connections (an nng pipe notification), so kept
 * slots from before a disconnection are not reused. */
int slot_watch(slot_pool *p, nng_socket sock);

/* A slot with an open context (resend timer off), its aio and its sleep
 * aio, reused when one is free. Returns 0 or an nng error. */
int slot_take(slot_pool *p, nng_socket sock, call_slot **sp);

/* Ends a call's use of s: kept for reuse when clean, closed otherwise. */
void slot_give(slot_pool *p, call_slot *s, bool clean);

/* Closes every kept slot and destroys the lock (conn_fini). */
void slot_fini(slot_pool *p);

#endif /* CLIENT_SLOT_H */
