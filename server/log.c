/*
 * log.c — stderr logging.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>

static void
log_line(const char *level, const char *fmt, va_list ap)
{
    char msg[1024];
    char ts[32];
    struct timeval tv;
    struct tm tm;

    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    fprintf(stderr, "%s.%03ldZ onced %s %s\n", ts, (long)(tv.tv_usec / 1000),
            level, msg);
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
