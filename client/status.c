/*
 * status.c — once_status filling and code names.
 *
 * Owns: once_strerror (code names come from the once.v1.Code descriptor via
 * wire_code_name, so there is no second table) and status_set.
 * Never: writes past the fixed reason/message buffers of once_status.
 */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "wire.h"

void
status_clear(once_status *st)
{
    if (st != NULL) {
        memset(st, 0, sizeof(*st));
    }
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
