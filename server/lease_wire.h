/*
 * lease_wire.h — how the lease table is shown on the wire: the states
 * LeaseInfo and ListRecords report, and the "never issued" answer. Shared
 * by svc_lease.c and svc_admin.c so both say the same thing.
 * Never: changes a lease.
 */
#ifndef SERVER_LEASE_WIRE_H
#define SERVER_LEASE_WIRE_H

#include <stdbool.h>
#include <stdint.h>

#include "server/call.h"
#include "proto/once.pb-c.h"
#include "lease/table.h"

/* The state a call made now would see: a LIVE entry past its TTL is
 * EXPIRED; no entry (ended and collected) is COLLECTED. */
Once__V1__LeaseState lease_wire_state(const lease_entry *e, uint64_t now);

/* false, with NOT_FOUND/UNKNOWN_CLIENT set, when client_id was never
 * issued. */
bool lease_wire_issued(server_call *c, uint64_t client_id);

#endif /* SERVER_LEASE_WIRE_H */
