/*
 * admit.c — the admission rules of a call under an rpc id (admit.h).
 */
#include "lease/admit.h"

#include "lease/lease.h"
#include "store/fault.h"

lease_verdict
lease_admit(lease_table *lt, lease_entry *e, store_txn *txn,
            const lease_ask *ask, lease_admission *out)
{
    *out = (lease_admission){.verdict = LEASE_ADMITTED, .entry = e};
    if (e != NULL && lease_expire_due(txn, e, ask->now_ms) != 0) {
        return out->verdict = LEASE_STORE_ERROR;
    }
    if (e == NULL || e->state != LEASE_STATE_LIVE) {
        out->never_issued = ask->client_id >= lease_table_next_id(lt);
        return out->verdict = LEASE_NOT_LIVE;
    }
    /* A seq below the watermark is stale whatever else the request says,
     * its acknowledgement included; a call's own acknowledgement (at most
     * its seq) cannot make it stale, so this comes first. */
    if (ask->seq < e->watermark) {
        out->watermark = e->watermark;
        return out->verdict = LEASE_STALE;
    }
    if (ask->first_incomplete > ask->seq) {
        return out->verdict = LEASE_BAD_ACK;
    }
    lease_entry_ack(e, ask->first_incomplete);
    fault_point(FAULT_ACK_APPLIED);
    out->first_unacked = lease_entry_first_unacked(e);
    if (ask->seq - out->first_unacked >= ask->window) {
        return out->verdict = LEASE_WINDOW_FULL;
    }
    return LEASE_ADMITTED;
}
