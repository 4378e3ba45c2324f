/*
 * lease_wire.c — lease states as the wire shows them.
 */
#include "server/lease_wire.h"

#include "server/exec_env.h"
#include "proto/reasons.h"

Once__V1__LeaseState
lease_wire_state(const lease_entry *e, uint64_t now)
{
    if (e == NULL) {
        return ONCE__V1__LEASE_STATE__LEASE_COLLECTED;
    }
    switch (e->state) {
    case LEASE_STATE_LIVE:
        return lease_entry_live(e, now) ? ONCE__V1__LEASE_STATE__LEASE_LIVE
                                        : ONCE__V1__LEASE_STATE__LEASE_EXPIRED;
    case LEASE_STATE_CLOSED:
        return ONCE__V1__LEASE_STATE__LEASE_CLOSED;
    case LEASE_STATE_EXPIRED:
        return ONCE__V1__LEASE_STATE__LEASE_EXPIRED;
    }
    return ONCE__V1__LEASE_STATE__LEASE_STATE_UNSPECIFIED;
}

bool
lease_wire_issued(server_call *c, uint64_t client_id)
{
    if (client_id != 0 && client_id < lease_table_next_id(c->env->leases)) {
        return true;
    }
    call_fail(c, ONCE__V1__CODE__NOT_FOUND, REASON_UNKNOWN_CLIENT,
              "client id %llu was never issued", (unsigned long long)client_id);
    return false;
}
