/*
 * service.h — a service of onced as one ops table: its name, its methods,
 * and what it opens before the first call and closes after the last.
 *
 * Owns the shape every service file (svc_*.c) exports — exactly one
 * `const service_ops svc_<name>_ops` and nothing else — and the list of
 * them (services.c), which dispatch.c opens in order and closes in
 * reverse.
 * Invariant: a method's handlers run on the executor thread, one call at a
 * time, with c->svc the state its service's open returned.
 * Never: a service reaches another service's state, or the server beyond
 * its exec_env.
 */
#ifndef SERVER_SERVICE_H
#define SERVER_SERVICE_H

#include <stddef.h>

#include "server/call.h"
#include "server/exec_env.h"

/* The call carries an rpc id, is executed at most once and is recorded. */
#define SERVICE_MUTATING 0x1u

typedef void (*handler_fn)(server_call *c);

/* One method of a service. */
typedef struct service_method {
    const char *name; /* full method name, "/once.v1.Counter/Increment" */
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
} service_method;

typedef struct service_ops {
    const char *name; /* the .proto service, "once.v1.Counter": every
                         method's full name is "/" name "/" Method */
    const service_method *methods;
    size_t nmethods;
    /* Before the executor starts: sets *state (handed to each call as
     * c->svc). 0, or an errno after logging why (onced does not start).
     * NULL: the service keeps no state. */
    int (*open)(const exec_env *env, void **state);
    /* After the executor stopped; state may be NULL. NULL: nothing. */
    void (*close)(void *state);
} service_ops;

/* The services onced serves, in the order of services.c. */
const service_ops *const *services_list(size_t *count);

#endif /* SERVER_SERVICE_H */
