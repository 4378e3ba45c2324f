/*
 * log.c — stderr logging, as text or JSON lines (log.h).
 *
 * Owns: the line format. Invariant: one line per message, written by one
 * fprintf; in JSON every byte of the message that JSON cannot hold as is
 * (quote, backslash, control characters) is escaped. Never: blocks on
 * anything but stderr.
 */
#include "base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "base/clock.h"

static atomic_bool log_json;

void
log_set_json(bool json)
{
    atomic_store(&log_json, json);
}

/* Escapes msg into out (outlen bytes, always terminated). */
static void
json_escape(const char *msg, char *out, size_t outlen)
{
    size_t o = 0;

    for (const unsigned char *p = (const unsigned char *)msg; *p != '\0'; p++) {
        char esc[8];
        size_t n;

        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            n = 2;
        } else if (*p < 0x20) {
            n = (size_t)snprintf(esc, sizeof(esc), "\\u%04x", *p);
        } else {
            esc[0] = (char)*p;
            n = 1;
        }
        if (o + n + 1 > outlen) {
            break;
        }
        for (size_t i = 0; i < n; i++) {
            out[o++] = esc[i];
        }
    }
    out[o] = '\0';
}

static void
log_line(const char *level, const char *fmt, va_list ap)
{
    char msg[1024];
    char ts[32];
    uint64_t wall = clock_wall_ms();
    time_t sec = (time_t)(wall / 1000);
    struct tm tm;

    gmtime_r(&sec, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (atomic_load(&log_json)) {
        char esc[6 * sizeof(msg)];

        json_escape(msg, esc, sizeof(esc));
        fprintf(stderr,
                "{\"ts\":\"%s.%03ldZ\",\"level\":\"%s\",\"msg\":\"%s\"}\n", ts,
                (long)(wall % 1000), level, esc);
        return;
    }
    fprintf(stderr, "%s.%03ldZ onced %s %s\n", ts, (long)(wall % 1000), level,
            msg);
}

#define LOG_FN(name, level)                                                    \
    void name(const char *fmt, ...)                                            \
    {                                                                          \
        va_list ap;                                                            \
        va_start(ap, fmt);                                                     \
        log_line(level, fmt, ap);                                              \
        va_end(ap);                                                            \
    }

LOG_FN(log_info, "info")
LOG_FN(log_warn, "warn")
LOG_FN(log_error, "error")
