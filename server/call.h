/*
 * call.h — one executing call, as a method handler sees it.
 *
 * Owns nothing beyond the call: the executor fills the inputs, a handler
 * fills the outcome (status, packed response). The response buffer is
 * malloc'd by call_reply and freed by the executor.
 * Never: a handler keeps a pointer to the call after it returns.
 */
#ifndef SERVER_CALL_H
#define SERVER_CALL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"
#include "proto/wire.h"

typedef struct exec_env exec_env;
typedef struct auth_who auth_who;

typedef struct server_call {
    /* Inputs, owned by the executor. */
    const exec_env *env; /* what the call may use (exec_env.h) */
    void *svc;           /* the state of the method's service, as its
                            service_ops.open set it (service.h) */
    const wire_method *wm;
    const ProtobufCMessage *req; /* the unpacked method payload */
    store_txn *txn;              /* reads and writes of this call */
    uint64_t client_id;          /* 0 for calls without an rpc id */
    uint64_t seq;
    uint64_t now_ms;     /* wall clock, unix ms */
    const auth_who *who; /* the authenticated caller (auth.h); set before
                            the method is looked up */
    bool replaying;      /* service_method.replay runs: read only */

    /* Outcome, filled by the handler. */
    int code;
    char reason[64];
    char message[256];
    uint8_t *resp; /* packed response message (malloc'd), NULL if none */
    size_t resp_len;
    bool transient;   /* the outcome says nothing about the call (a store
                         error): never recorded, the client may retry */
    bool keep_writes; /* a non-OK outcome that still commits what it
                         staged (a lease found expired is ended) */
    uint64_t park_ms; /* a read with nothing to return yet (Outbox.Read):
                         the executor may hold the request this long and
                         run it again when an event is committed */
} server_call;

/* Sets a non-OK outcome: code, a machine-readable reason, a message. */
void call_fail(server_call *c, int code, const char *reason, const char *fmt,
               ...) __attribute__((format(printf, 4, 5)));

/* Sets an OK outcome with resp packed as the response payload. Returns 0 or
 * ENOMEM (then the outcome is INTERNAL). */
int call_reply(server_call *c, const ProtobufCMessage *resp);

/* A store error turned into an outcome: EBADMSG (damaged stored data) is
 * DATA_LOSS with the reason DATA_CORRUPT and a log line; anything else
 * INTERNAL with the reason STORE. Both are transient: never recorded. */
void call_store_error(server_call *c, int err);

#endif /* SERVER_CALL_H */
