/*
 * executor.h — the one thread that executes calls.
 *
 * Owns the queue of received requests — a lane per principal, served
 * round-robin (fair_queue.h), so one principal's flood delays another's
 * call by at most one call of each principal ahead of it — and the
 * executor thread. Requests arrive from the verifier (verify.h), their
 * shape and tag already checked. Every call
 * is decoded, checked, looked up among the completion records and executed
 * here, one after another: that single order is what makes concurrent
 * duplicates execute once and same-key calls serialized, without locks on
 * application keys. Effects and records are staged in one store
 * transaction and handed over; whenever the queue runs dry (or a group
 * reaches EXEC_GROUP_MAX calls or EXEC_GROUP_MS of execution) the
 * executor calls store_sync: one synced write
 * for everything executed since, then the replies, in order — so no reply
 * (not even a read or an error) ever shows state that a crash could take
 * back, and no call pays a thread hand-off to reach the disk.
 * Never: replies before the sync that holds the call.
 */
#ifndef SERVER_EXECUTOR_H
#define SERVER_EXECUTOR_H

#include "server/exec_env.h"
#include "server/listener.h"

typedef struct executor executor;

/* Opens the services (dispatch.h) with env and starts the thread. env is
 * the executor's from here until executor_close: its cfg and leases are
 * then touched on the executor thread only. 0 or an errno (logged). */
int executor_open(executor **ep, exec_env *env);

/* Queues a verified request in the lane of r->principal. Called from the
 * verifier thread: never blocks beyond a short mutex. */
void executor_submit(void *ex, listener_req *r);

/* Runs fn(fn_arg) on the executor thread, before any request still
 * queued. Thread-safe, never blocks beyond a short mutex. */
void executor_post(void *ex, void (*fn)(void *), void *fn_arg);

/* Executes everything still queued, syncs it, and stops the thread. NULL
 * is ok. */
void executor_close(executor *ex);

#endif /* SERVER_EXECUTOR_H */
