/*
 * lease.h — the upper half of the lease layer: opening, renewing and
 * closing the handle's own lease (lease.c), over the call engine.
 *
 * Owns: declarations only (struct lease_renewer, the renewal thread's
 * fields, is part of the handle's layout in client_impl.h).
 * Invariant: only lease.c opens, renews or closes the handle's own lease
 * and only it tells the gate (lease_gate.h) what the server said about it.
 * Never: included by the call engine or below.
 */
#ifndef CLIENT_LEASE_H
#define CLIENT_LEASE_H

#include <stdbool.h>
#include <stdint.h>

#include "once/client.h"

/* Initializes the renewer's lock and condition (monotonic clock). */
void lease_init(once_client *c);

/* Destroys what lease_init made; renewal must be stopped. */
void lease_fini(once_client *c);

/* Opens the handle's own lease (OpenLease asking ttl_ms, 0: the server's
 * default), tells the gate, and starts renewal. Only while the handle is
 * not shared yet. Returns ONCE_OK or fills st. */
int lease_begin(once_client *c, uint64_t ttl_ms, once_status *st);

/* The handle is closing (calls have returned): stops renewal and — unless
 * keep, the lease is lost, or a seq is still incomplete — closes the lease
 * with CloseLease. With keep, *left_ms (may be NULL) is about how long the
 * lease stays live. Closes the socket (conn_shut) to end a renewal in
 * flight. */
void lease_end(once_client *c, bool keep, uint64_t *left_ms);

#endif /* CLIENT_LEASE_H */
