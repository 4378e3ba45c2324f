/*
 * executor.h — the one thread that executes calls.
 *
 * Owns the queue of received requests and the executor thread. Every call
 * is decoded, checked, looked up among the completion records and executed
 * here, one after another: that single order is what makes concurrent
 * duplicates execute once and same-key calls serialized, without locks on
 * application keys. Effects and records are staged in one store
 * transaction and handed to the group committer; the reply leaves from the
 * committer thread once that transaction, and every one before it, is
 * durable — so no reply (not even a read or an error) ever shows state that
 * a crash could take back.
 * Never: waits on the disk for a sync (the committer does), or replies
 * directly.
 */
#ifndef SERVER_EXECUTOR_H
#define SERVER_EXECUTOR_H

#include "listener.h"
#include "server.h"

int executor_open(executor **ep, server *srv);

/* Queues a received request. Called from aio callbacks: never blocks
 * beyond a short mutex. */
void executor_submit(void *ex, listener_req *r);

/* Runs fn(fn_arg) on the executor thread, before any request still
 * queued. Thread-safe, never blocks beyond a short mutex. */
void executor_post(void *ex, void (*fn)(void *), void *fn_arg);

/* Executes everything still queued, hands it to the committer, and stops
 * the thread. NULL is ok. */
void executor_close(executor *ex);

#endif /* SERVER_EXECUTOR_H */
