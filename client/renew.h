/*
 * renew.h — keeping the handle's lease alive in the background.
 *
 * Owns: one thread per leased handle that calls /once.v1.Lease/RenewLease
 * about every TTL/3, and reports on stderr when renewal keeps failing
 * (from the second failure in a row). It declares the lease lost (lost.h)
 * when a renewal is answered LEASE_EXPIRED or none has succeeded within
 * the TTL the server last reported.
 * Invariant: the thread only reads read-only handle fields and the socket;
 * it never touches the seq window; it stops (and is joined) before the
 * handle is freed.
 * Never: opens a new lease or changes the handle's client id — a lost lease
 * is reported, and calls under it end OUTCOME_UNKNOWN or fail
 * LEASE_EXPIRED, never silently re-sent under a new id.
 */
#ifndef CLIENT_RENEW_H
#define CLIENT_RENEW_H

#include "client_impl.h"

/* Initializes the renewal lock and condition (monotonic clock). */
void renew_init(once_client *c);

/* Destroys what renew_init made; renewal must be stopped. */
void renew_fini(once_client *c);

/* Starts the renewal thread when the handle holds a lease with a TTL;
 * otherwise does nothing. Returns 0, or an errno from pthread_create. */
int renew_start(once_client *c);

/* Stops and joins the thread; closes the socket first so a renewal in
 * flight returns at once (only valid while closing the handle). Accepts a
 * handle without renewal. */
void renew_stop(once_client *c);

#endif /* CLIENT_RENEW_H */
