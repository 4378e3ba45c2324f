/*
 * call_group.h — the first attempt of several calls made together, from
 * one thread, in as few messages as fit (async.c starts its queued calls
 * this way), and the rest of each call that attempt did not end.
 *
 * Owns: a group's entries and what became of each (done, or the rest of
 * its call for call_group_resume).
 * Invariant: every call of a group keeps every rule of call_do: a call
 * that must retry goes on in call_run from its first attempt's outcome,
 * exactly as after an attempt of its own.
 * Never: retries on the group's thread (the rest is call_group_resume's,
 * on a thread of the caller's choosing).
 */
#ifndef CLIENT_CALL_GROUP_H
#define CLIENT_CALL_GROUP_H

#include <stdbool.h>
#include <stddef.h>

#include "client/call.h"

/* One call of a group: its arguments as call_do's (deadline: the
 * handle's), and what became of it. */
typedef struct call_group_entry {
    const char *method;
    call_kind kind;
    once_rpc_id *id;
    const void *req;
    size_t req_len;
    void **resp;
    size_t *resp_len;
    once_status *st;
    int rv;                 /* done: the call's result, as call_do's */
    bool done;              /* finished by call_group */
    struct call_rest *rest; /* not done: the rest, for call_group_resume */
} call_group_entry;

/*
 * The first attempt of n calls (at most BATCH_ENTRIES_MAX) in as few
 * messages as fit (one batch envelope, or one plain request for one
 * call), on the calling thread. A call that got its final reply is done
 * (rv, *st, *resp); one that must retry (no reply, UNAVAILABLE,
 * WINDOW_FULL, or nothing sent) is left in rest with every rule of call_do
 * intact: call_group_resume runs the rest of it — backoff, later
 * attempts, OUTCOME_UNKNOWN — as call_do would have after that first
 * attempt.
 */
void call_group(once_client *c, call_group_entry *g, size_t n);

/* The rest of e's call (rest NULL: e->rest), blocking; sets e->rv and
 * e->done and returns rv. */
int call_group_resume(once_client *c, call_group_entry *e,
                      struct call_rest *rest);

#endif /* CLIENT_CALL_GROUP_H */
