/*
 * slot.h — call slots: an nng REQ context and its two aios, kept for reuse.
 *
 * A call takes a slot for all its attempts and gives it back at the end.
 * Opening a context and allocating an aio cost nng's global socket lock and
 * an allocation each; under many callers that lock is contended, so slots
 * that ended cleanly are kept (up to SLOT_KEEP per handle) for the next
 * call.
 *
 * Owns: the handle's free slots (conn.slots, under slot_lock).
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

#include <stdbool.h>

#include <nng/nng.h>

typedef struct conn conn;

typedef struct call_slot {
    nng_ctx ctx;
    nng_aio *aio;           /* sends and receives on ctx, never sleeps */
    nng_aio *sleep;         /* the backoff between attempts, nothing else */
    uint64_t pipes_lost;    /* the handle's count when it was kept */
    struct call_slot *next; /* in the free list */
} call_slot;

/* Counts the handle's closed connections (an nng pipe notification on
 * conn.sock), so kept slots from before a disconnection are not reused. */
int slot_watch(conn *c);

/* A slot with an open context (resend timer off), its aio and its sleep
 * aio, reused when one is free. Returns 0 or an nng error. */
int slot_take(conn *c, call_slot **sp);

/* Ends a call's use of s: kept for reuse when clean, closed otherwise. */
void slot_give(conn *c, call_slot *s, bool clean);

/* Closes every kept slot (conn_fini). */
void slot_fini(conn *c);

#endif /* CLIENT_SLOT_H */
