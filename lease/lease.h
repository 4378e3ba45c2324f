/*
 * lease.h — durable lease transitions and loading the lease table.
 *
 * Owns the LevelDB keys "m/next_client_id" (the next id to hand out),
 * "l/<client_id:be64>" (a LeaseRecord for each issued id until it has
 * ended and been collected) and "w/<client_id:be64>" (the watermark
 * persisted with the last reclamation).
 * Invariants: client ids are allocated monotonically and durably — the
 * counter is written in the same transaction as the lease, and a reply
 * carrying the id leaves only after that transaction is synced, so no id is
 * handed out twice, across restarts too. The end of a lease is staged
 * before any reclamation of its records, and the commit queue is FIFO, so
 * it is durable first. Renewals touch memory only: a restart gives every
 * live lease a fresh TTL (a grace period), which never shortens safety, so
 * no renewal needs an fsync.
 * Never: runs outside the executor thread (the table is unlocked).
 */
#ifndef LEASE_LEASE_H
#define LEASE_LEASE_H

#include <stdint.h>

#include "store/store.h"
#include "lease/table.h"

#define LEASE_KEY_LEN 10

void lease_key(uint64_t client_id, uint8_t key[LEASE_KEY_LEN]);
void lease_watermark_key(uint64_t client_id, uint8_t key[LEASE_KEY_LEN]);

/* Issues the next client id: stages its LIVE lease and the new id counter
 * in txn, adds it to the table. Returns 0 and *ep, or ENOMEM. */
int lease_open(lease_table *lt, store_txn *txn, const char *principal,
               uint64_t ttl_ms, uint64_t now, lease_entry **ep);

/* Ends a live lease: stages what ends with it (the table's end hook:
 * lease_table_on_end) and its record with state (CLOSED or EXPIRED) in
 * txn and moves the entry to that state. Returns 0, ENOMEM, or the hook's
 * error. */
int lease_end(store_txn *txn, lease_entry *e, lease_state state, uint64_t now);

/* Ends e as EXPIRED (staged in txn) when it is LIVE but past its TTL at
 * now — the one way expiry becomes a durable fact. Returns 0 or ENOMEM. */
int lease_expire_due(store_txn *txn, lease_entry *e, uint64_t now);

/* Forgets a lease that has ended and holds no record: stages the deletion
 * of its l/ and w/ keys and removes the entry. Its id stays issued
 * (below next_id). Returns 0 or ENOMEM. */
int lease_forget(lease_table *lt, store_txn *txn, lease_entry *e);

/*
 * Start-up: fills the table from LevelDB. Live leases get expiry now + ttl
 * (the grace period); ended ones keep their state; retained records are
 * counted per client (a client with records and no lease record is treated
 * as expired, so its records are reclaimed). *nrec and *nbytes return the
 * totals. Returns 0 or EIO/EBADMSG/ENOMEM.
 */
int lease_load(lease_table *lt, store *st, uint64_t now, uint64_t *nrec,
               uint64_t *nbytes);

#endif /* LEASE_LEASE_H */
