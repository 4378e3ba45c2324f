/*
 * svc_lease.c — once.v1.Lease: OpenLease.
 *
 * OpenLease carries no rpc id (the caller has no client id yet), so it is
 * not deduplicated: a lost reply leaks an unused id, never a reused one.
 * The lease table itself lives in lease/.
 */
#include <errno.h>
#include <string.h>

#include "dispatch.h"
#include "lease.h"
#include "once.pb-c.h"
#include "server.h"

#define LEASE_TTL_MIN_MS    100ULL
#define LEASE_TTL_MAX_MS    (24ULL * 3600 * 1000)
#define LEASE_PRINCIPAL_MAX 128

static void
lease_open_validate(server_call *c)
{
    const Once__V1__OpenLeaseRequest *r =
        (const Once__V1__OpenLeaseRequest *)c->req;

    if (r->ttl_ms != 0 &&
        (r->ttl_ms < LEASE_TTL_MIN_MS || r->ttl_ms > LEASE_TTL_MAX_MS)) {
        call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, "BAD_TTL",
                  "ttl must be between %llums and %llums, got %llums",
                  LEASE_TTL_MIN_MS, LEASE_TTL_MAX_MS,
                  (unsigned long long)r->ttl_ms);
        return;
    }
    if (strlen(r->principal) > LEASE_PRINCIPAL_MAX) {
        call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, "BAD_PRINCIPAL",
                  "principal is longer than %d bytes", LEASE_PRINCIPAL_MAX);
    }
}

static void
lease_open_exec(server_call *c)
{
    const Once__V1__OpenLeaseRequest *r =
        (const Once__V1__OpenLeaseRequest *)c->req;
    Once__V1__OpenLeaseResponse resp = ONCE__V1__OPEN_LEASE_RESPONSE__INIT;
    uint64_t ttl = r->ttl_ms != 0 ? r->ttl_ms : c->srv->cfg.lease_ttl_ms;
    uint64_t id;
    int rv;

    if ((rv = lease_open(c->txn, r->principal, ttl, c->now_ms, &id)) != 0) {
        call_store_error(c, rv);
        return;
    }
    STATS_INC(&c->srv->stats, leases_opened);
    resp.client_id = id;
    resp.ttl_ms = ttl;
    call_reply(c, &resp.base);
}

const dispatch_entry svc_lease_methods[] = {
    {"/once.v1.Lease/OpenLease", 0, lease_open_validate, lease_open_exec},
};
const size_t svc_lease_count =
    sizeof(svc_lease_methods) / sizeof(svc_lease_methods[0]);
