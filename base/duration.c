/*
 * duration.c — parsing and printing "200ms" / "2s" / "5m" / "1h".
 *
 * Owns: the unit table and overflow-checked arithmetic; see duration.h for
 * the grammar.
 * Never: uses strtoull (it accepts signs, spaces and hex), never locale.
 */
#include "base/duration.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/number.h"

typedef struct duration_unit {
    const char *name;
    uint64_t ms;
} duration_unit;

/* Longest names first where one is a prefix of another ("ms" before "m"). */
static const duration_unit duration_units[] = {
    {"ms", 1},
    {"h", 3600000},
    {"m", 60000},
    {"s", 1000},
};

#define DURATION_NUNITS (sizeof(duration_units) / sizeof(duration_units[0]))

static const duration_unit *
duration_unit_at(const char *p, size_t *len)
{
    for (size_t i = 0; i < DURATION_NUNITS; i++) {
        size_t n = strlen(duration_units[i].name);
        if (strncmp(p, duration_units[i].name, n) == 0) {
            *len = n;
            return &duration_units[i];
        }
    }
    return NULL;
}

int
duration_parse(const char *s, uint64_t *ms)
{
    const char *p = s;
    uint64_t total = 0;
    int parts = 0;

    if (s == NULL || *s == '\0') {
        return EINVAL;
    }
    while (*p != '\0') {
        uint64_t n;
        const duration_unit *u;
        size_t ulen;
        int rv;

        if ((rv = number_parse_u64(p, &p, &n)) != 0) {
            return rv;
        }
        if (*p == '\0' && parts == 0) {
            *ms = n; /* a bare number: milliseconds */
            return 0;
        }
        if ((u = duration_unit_at(p, &ulen)) == NULL) {
            return EINVAL;
        }
        p += ulen;
        if (n != 0 && n > UINT64_MAX / u->ms) {
            return ERANGE;
        }
        if (total > UINT64_MAX - n * u->ms) {
            return ERANGE;
        }
        total += n * u->ms;
        parts++;
    }
    *ms = total;
    return 0;
}

char *
duration_format(uint64_t ms, char *buf, size_t len)
{
    size_t off = 0;

    if (len == 0) {
        return buf;
    }
    buf[0] = '\0';
    if (ms == 0) {
        snprintf(buf, len, "0ms");
        return buf;
    }
    /* duration_units without "ms" first: h, m, s, then ms. */
    for (size_t i = 1; i <= DURATION_NUNITS; i++) {
        const duration_unit *u = &duration_units[i % DURATION_NUNITS];
        uint64_t n = ms / u->ms;
        int w;

        if (n == 0) {
            continue;
        }
        ms -= n * u->ms;
        w = snprintf(buf + off, len - off, "%llu%s", (unsigned long long)n,
                     u->name);
        if (w < 0 || (size_t)w >= len - off) {
            break; /* truncated, still NUL-terminated */
        }
        off += (size_t)w;
    }
    return buf;
}
