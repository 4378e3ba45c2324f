/*
 * services.c — the services onced serves: one line each.
 *
 * Adding a service: write svc_<name>.c exporting
 * `const service_ops svc_<name>_ops` (service.h), then add X(svc_<name>)
 * to SERVICES below. server/CMakeLists.txt builds every svc_*.c.
 * Invariant: the list is fixed at build time; dispatch.c checks at start
 * that every method it names is in the .proto descriptors (wire.h).
 */
#include "server/service.h"

#define SERVICES(X)                                                            \
    X(svc_counter)                                                             \
    X(svc_lease) X(svc_admin) X(svc_grants) X(svc_kv) X(svc_outbox)

#define SERVICE_DECLARE(n) extern const service_ops n##_ops;
#define SERVICE_ENTRY(n)   &n##_ops,

SERVICES(SERVICE_DECLARE)

static const service_ops *const services[] = {SERVICES(SERVICE_ENTRY)};

const service_ops *const *
services_list(size_t *count)
{
    *count = sizeof(services) / sizeof(services[0]);
    return services;
}
