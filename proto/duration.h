/*
 * duration.h — durations as people write them on a command line.
 *
 * Owns: the grammar of a duration: one or more <digits><unit> parts, unit
 * one of ms, s, m, h ("200ms", "2s", "5m", "1h", "1m30s"); a bare number is
 * milliseconds ("250" = 250ms). No sign, no fractions, no spaces; the total
 * must fit in uint64_t milliseconds.
 * Never: accepts a partially parsed string (trailing garbage is an error).
 * Also the one monotonic millisecond clock (and sleep) of the tree, and
 * the monotonic deadlines of its timed condition waits.
 */
#ifndef PROTO_DURATION_H
#define PROTO_DURATION_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Parses s into *ms. Returns 0, EINVAL (bad syntax or unit) or ERANGE
 * (overflow); *ms is untouched on error. */
int duration_parse(const char *s, uint64_t *ms);

/* Writes ms as a duration duration_parse reads back ("30s", "1m30s",
 * "1500ms" becomes "1s500ms", 0 is "0ms") into buf, always
 * NUL-terminated. Returns buf. */
char *duration_format(uint64_t ms, char *buf, size_t len);

/* Milliseconds on the monotonic clock (CLOCK_MONOTONIC): for deadlines and
 * elapsed times, never for wall-clock dates. */
uint64_t duration_now_ms(void);

/* The same clock in microseconds (latencies). */
uint64_t duration_now_us(void);

/* Sleeps ms milliseconds, resuming after signals. */
void duration_sleep_ms(uint64_t ms);

/* Initialises cv to time its waits on the monotonic clock, so that a
 * pthread_cond_timedwait until duration_deadline(ms) is immune to wall
 * clock jumps. Returns pthread_cond_init's result. */
int duration_cond_init(pthread_cond_t *cv);

/* The absolute CLOCK_MONOTONIC time ms from now, for pthread_cond_timedwait
 * on a cv from duration_cond_init. */
struct timespec duration_deadline(uint64_t ms);

#endif /* PROTO_DURATION_H */
