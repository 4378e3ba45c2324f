/*
 * http_stats.c — the refusal table of http_stats.h and its counting.
 */
#include "server/http_stats.h"

#include <string.h>

#include "proto/reasons.h"

/* What the listener (http_srv.c) and the JSON API (http_api.c,
 * http_head.c, http_console.c) answer before or instead of a call. */
static const struct {
    const char *reason;
    unsigned status;
} rows[] = {
    {REASON_HTTP_BUSY_CONNECTIONS, 503},
    {REASON_HTTP_PEER_CONNECTIONS, 429},
    {REASON_HTTP_SLOW_CLIENT, 408},
    {REASON_HTTP_HEADERS_TOO_LARGE, 431},
    {REASON_HTTP_MALFORMED, 400},
    {REASON_HTTP_MALFORMED, 411},
    {REASON_HTTP_BAD_CHUNK, 400},
    {REASON_REQUEST_TOO_LARGE, 413},
    {REASON_HTTP_NO_ROUTE, 404},
    {REASON_HTTP_NO_ROUTE, 405},
    {REASON_UNKNOWN_METHOD, 404},
    {REASON_HTTP_CONTENT_TYPE, 415},
    {REASON_HTTP_BAD_HEADER, 400},
    {REASON_HTTP_BAD_JSON, 400},
    {REASON_MISSING_PRINCIPAL, 401},
    {REASON_MISSING_TAG, 401},
    {REASON_BAD_TAG, 401},
    {REASON_CONSOLE_TOKEN_BAD, 401},
    {REASON_CONSOLE_TOKEN_EXPIRED, 401},
    {REASON_CONSOLE_NOT_OPERATOR, 403},
    {REASON_CONSOLE_READ_ONLY, 403},
    {REASON_HTTP_BUSY, 429},
    {REASON_NO_MEMORY, 429},
    {"OTHER", 0}, /* the catch-all: any other pair */
};
_Static_assert(sizeof(rows) / sizeof(rows[0]) == HTTP_STATS_ROWS,
               "HTTP_STATS_ROWS is the table's length");

void
http_stats_refused(http_stats *s, const char *reason, unsigned status)
{
    size_t i;

    if (s == NULL) {
        return;
    }
    for (i = 0; i < HTTP_STATS_ROWS - 1; i++) {
        if (rows[i].status == status && strcmp(rows[i].reason, reason) == 0) {
            break;
        }
    }
    atomic_fetch_add_explicit(&s->refusals[i], 1, memory_order_relaxed);
}

void
http_stats_row(size_t i, const char **reason, unsigned *status)
{
    *reason = rows[i].reason;
    *status = rows[i].status;
}
