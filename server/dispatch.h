/*
 * dispatch.h — from a full method name to its handler and its service's
 * state.
 *
 * Owns the open services (services.c, service.h): opened in order before
 * the executor's first call, closed in reverse after its last, and the
 * lookup joining the methods of the .proto service descriptors
 * (wire_methods) with the handlers the services register. A method in the
 * descriptors without a handler answers UNIMPLEMENTED like an unknown one.
 * Never: executes anything; it only finds.
 */
#ifndef SERVER_DISPATCH_H
#define SERVER_DISPATCH_H

#include <stddef.h>

#include "server/exec_env.h"
#include "server/service.h"

typedef struct dispatch dispatch;

/* Opens every service of services.c with env (which must outlive d).
 * Refuses a method name that is not "/<service name>/..." or not in the
 * .proto descriptors. 0, or an errno after logging why. */
int dispatch_open(dispatch **dp, const exec_env *env);

/* Closes the services in reverse order. NULL is ok. */
void dispatch_close(dispatch *d);

/* The method for this full name (not necessarily NUL-terminated), or
 * NULL; *wm is set to the descriptor's method when the name is known at
 * all, *svc to the state of the method's service. */
const service_method *dispatch_find(const dispatch *d, const char *name,
                                    size_t len, const wire_method **wm,
                                    void **svc);

#endif /* SERVER_DISPATCH_H */
