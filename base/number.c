/*
 * number.c — strict decimal parsing (number.h).
 */
#include "base/number.h"

#include <errno.h>

int
number_parse_u64(const char *s, const char **end, uint64_t *v)
{
    uint64_t n = 0;
    const char *p = s;

    while (*p >= '0' && *p <= '9') {
        if (n > (UINT64_MAX - (uint64_t)(*p - '0')) / 10) {
            return ERANGE;
        }
        n = n * 10 + (uint64_t)(*p - '0');
        p++;
    }
    if (p == s) {
        return EINVAL;
    }
    *end = p;
    *v = n;
    return 0;
}

int
number_parse_u64_all(const char *s, uint64_t *v)
{
    const char *end;
    uint64_t n;
    int rv;

    if ((rv = number_parse_u64(s, &end, &n)) != 0) {
        return rv;
    }
    if (*end != '\0') {
        return EINVAL;
    }
    *v = n;
    return 0;
}
