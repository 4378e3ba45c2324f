/*
 * lease.h — the lease table: client ids and whether they are live.
 *
 * Owns the LevelDB keys "m/next_client_id" (the next id to hand out) and
 * "l/<client_id:be64>" (one LeaseRecord per id ever issued).
 * Invariant: client ids are allocated monotonically and durably — the
 * counter is written in the same transaction as the lease, and a reply
 * carrying the id leaves only after that transaction is synced, so no id is
 * ever handed out twice, across restarts too. Records of leases that have
 * ended are kept (state CLOSED/EXPIRED) so an ended lease is never revived.
 * Never: runs outside a store transaction.
 */
#ifndef LEASE_LEASE_H
#define LEASE_LEASE_H

#include <stdint.h>

#include "record.pb-c.h"
#include "store.h"

typedef Once__Store__V1__LeaseRecord lease_record;

/* Allocates the next client id and stages its LIVE lease in t. Returns 0,
 * or ENOMEM/EIO. */
int lease_open(store_txn *t, const char *principal, uint64_t ttl_ms,
               uint64_t now_ms, uint64_t *client_id);

/*
 * Reads the lease of client_id as t sees it. Returns 0 and *rec (free with
 * lease_record_free), ENOENT for an id never issued, EIO or EBADMSG.
 */
int lease_get(store_txn *t, uint64_t client_id, lease_record **rec);

void lease_record_free(lease_record *rec);

/* Whether client_id has a LIVE lease: 0 yes, ENOENT never issued, ESTALE
 * ended, or EIO/EBADMSG. */
int lease_check_live(store_txn *t, uint64_t client_id);

#endif /* LEASE_LEASE_H */
