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

int
status_set(once_status *st, int code, const char *reason, const char *fmt, ...)
{
    va_list ap;

    if (st == NULL) {
        return code;
    }
    st->code = code;
    snprintf(st->reason, sizeof(st->reason), "%s",
             reason != NULL ? reason : "");
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
