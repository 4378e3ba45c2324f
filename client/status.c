/*
 * status.c — once_status filling and code names.
 *
 * Owns: once_strerror and once_lease_state_name (names come from the
 * once.v1 enum descriptors, so there is no second table), status_set, the
 * reason predicates (once_status_is, once_status_outcome_unknown, ...) and
 * once_version and once_free.
 * Never: writes past the fixed reason/message buffers of once_status.
 */
#include "client/status.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "client/classify.h"
#include "proto/wire.h"

void
status_clear(once_status *st)
{
    if (st != NULL) {
        memset(st, 0, sizeof(*st));
    }
}

int
status_begin(once_status **stp, once_status *local, const void *arg,
             const char *what)
{
    if (*stp == NULL) {
        *stp = local;
    }
    status_clear(*stp);
    if (what != NULL && arg == NULL) {
        return status_set(*stp, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "%s is NULL", what);
    }
    return ONCE_OK;
}

/* Copies s into dst[n], truncated, always terminated. */
static void
status_copy(char *dst, size_t n, const char *s)
{
    size_t len = s != NULL ? strnlen(s, n - 1) : 0;

    memcpy(dst, s != NULL ? s : "", len);
    dst[len] = '\0';
}

int
status_take(once_status *st, int code, const char *reason, const char *msg)
{
    if (st == NULL) {
        return code;
    }
    st->code = code;
    status_copy(st->reason, sizeof(st->reason), reason);
    status_copy(st->message, sizeof(st->message), msg);
    return code;
}

int
status_set(once_status *st, int code, const char *reason, const char *fmt, ...)
{
    va_list ap;

    if (st == NULL) {
        return code;
    }
    st->code = code;
    status_copy(st->reason, sizeof(st->reason), reason);
    if (fmt == NULL) {
        st->message[0] = '\0';
        return code;
    }
    va_start(ap, fmt);
    vsnprintf(st->message, sizeof(st->message), fmt, ap);
    va_end(ap);
    return code;
}

const char *
once_strerror(int code)
{
    return wire_code_name(code);
}

const char *
once_lease_state_name(int state)
{
    return wire_lease_state_name(state);
}

bool
once_status_is(const once_status *st, const char *reason)
{
    return st != NULL && reason != NULL &&
           strncmp(st->reason, reason, sizeof(st->reason)) == 0;
}

bool
once_status_outcome_unknown(const once_status *st)
{
    return st != NULL && st->code == ONCE_UNKNOWN &&
           once_status_is(st, ONCE_REASON_OUTCOME_UNKNOWN);
}

bool
once_status_lease_expired(const once_status *st)
{
    return st != NULL && st->code == ONCE_FAILED_PRECONDITION &&
           once_status_is(st, ONCE_REASON_LEASE_EXPIRED);
}

bool
status_lease_gone(const once_status *st)
{
    return st != NULL && classify_lease_gone(st->code, st->reason);
}

const char *
once_version(void)
{
    return ONCE_VERSION_STRING;
}

void
once_free(void *p)
{
    free(p);
}
