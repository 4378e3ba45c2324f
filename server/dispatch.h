/*
 * dispatch.h — from a full method name to its handler.
 *
 * Owns the table joining the methods of the .proto service descriptors
 * (wire_methods) with the handlers the services register. A method in the
 * descriptors without a handler answers UNIMPLEMENTED like an unknown one.
 * Never: executes anything; it only finds.
 */
#ifndef SERVER_DISPATCH_H
#define SERVER_DISPATCH_H

#include <stddef.h>

#include "call.h"

/* The call carries an rpc id, is executed at most once and is recorded. */
#define DISPATCH_MUTATING 0x1u

typedef void (*handler_fn)(server_call *c);

typedef struct dispatch_entry {
    const char *name; /* full method name */
    unsigned flags;
    /* Checks the request alone, before anything is looked up or executed;
     * a failure here is not recorded and writes nothing. May be NULL. */
    handler_fn validate;
    /* Executes the method: reads and stages writes through c->txn, sets
     * the outcome. Every outcome of a mutating method is recorded. */
    handler_fn execute;
    /* A recorded OK result of this mutating method is replayed, c->resp
     * holding the stored reply: makes again what a record must not stand
     * in for (svc_grants: credentials, minted afresh after permission is
     * evaluated again), replacing c->resp, or replaces the outcome with a
     * refusal. Reads only: stages no writes. NULL: the record is returned
     * as stored. */
    handler_fn replay;
} dispatch_entry;

/* Service tables, one per svc_*.c file. */
extern const dispatch_entry svc_counter_methods[];
extern const size_t svc_counter_count;
extern const dispatch_entry svc_lease_methods[];
extern const size_t svc_lease_count;
extern const dispatch_entry svc_admin_methods[];
extern const size_t svc_admin_count;
extern const dispatch_entry svc_grants_methods[];
extern const size_t svc_grants_count;

/* The entry for this full name (not necessarily NUL-terminated), or NULL;
 * *wm is set to the descriptor's method when the name is known at all. */
const dispatch_entry *dispatch_find(const char *name, size_t len,
                                    const wire_method **wm);

#endif /* SERVER_DISPATCH_H */
