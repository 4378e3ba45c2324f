/*
 * duration.h — durations as people write them on a command line.
 *
 * Owns: the grammar of a duration: one or more <digits><unit> parts, unit
 * one of ms, s, m, h ("200ms", "2s", "5m", "1h", "1m30s"); a bare number is
 * milliseconds ("250" = 250ms). No sign, no fractions, no spaces; the total
 * must fit in uint64_t milliseconds.
 * Never: accepts a partially parsed string (trailing garbage is an error).
 * The clock itself (now, sleep, deadlines) is base/clock.h.
 */
#ifndef BASE_DURATION_H
#define BASE_DURATION_H

#include <stddef.h>
#include <stdint.h>

/* Parses s into *ms. Returns 0, EINVAL (bad syntax or unit) or ERANGE
 * (overflow); *ms is untouched on error. */
int duration_parse(const char *s, uint64_t *ms);

/* Writes ms as a duration duration_parse reads back ("30s", "1m30s",
 * "1500ms" becomes "1s500ms", 0 is "0ms") into buf, always
 * NUL-terminated. Returns buf. */
char *duration_format(uint64_t ms, char *buf, size_t len);

#endif /* BASE_DURATION_H */
