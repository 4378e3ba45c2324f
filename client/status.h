/*
 * status.h — filling a caller's once_status.
 *
 * Owns: the one place that writes code, reason and message into a
 * once_status, truncating to the struct's fixed buffers.
 * Never: allocates; never fails (a NULL st is simply not written).
 */
#ifndef CLIENT_STATUS_H
#define CLIENT_STATUS_H

#include "once/client.h"

/* Zeroes *st (code ONCE_OK, empty strings). NULL is accepted. */
void status_clear(once_status *st);

/* The start of a public call: *stp, or local when the caller passed no
 * status, is cleared and becomes *stp. When what is not NULL, arg (what
 * the call needs, named by what) must not be NULL. Returns ONCE_OK, or
 * ONCE_INVALID_ARGUMENT with reason BAD_ARGUMENT ("<what> is NULL") in
 * *stp. */
int status_begin(once_status **stp, once_status *local, const void *arg,
                 const char *what);

/* Sets code, reason (NULL: "") and a printf-style message; leaves replayed
 * and attempts alone. Returns code, so callers can `return status_set(...)`.
 */
/* status_set with a message taken as it is (no formatting): the cheap
 * path for a reply's own status. */
int status_take(once_status *st, int code, const char *reason, const char *msg);

int status_set(once_status *st, int code, const char *reason, const char *fmt,
               ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* A reply to a call under the handle's own lease that says the lease is
 * gone: FAILED_PRECONDITION/LEASE_EXPIRED, or PERMISSION_DENIED/
 * NOT_YOUR_LEASE (what an authenticated onced answers for a collected
 * lease, as for any id that is not the caller's). */
bool status_lease_gone(const once_status *st);

#endif /* CLIENT_STATUS_H */
