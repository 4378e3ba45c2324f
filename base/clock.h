/*
 * clock.h — the one clock (and sleep) of the tree.
 *
 * Owns: reading the monotonic clock (deadlines, elapsed times, latencies)
 * and the wall clock (dates), sleeping, and the monotonic deadlines of
 * timed condition waits.
 * Invariant: a deadline or an elapsed time is measured on CLOCK_MONOTONIC
 * only, so a step of the wall clock (NTP, an operator's date -s) neither
 * stretches nor cuts it; clock_wall_ms is the only reading of
 * CLOCK_REALTIME, for times that leave the process (sent, stored, shown,
 * compared with another process's clock).
 * Never: hands out a time that mixes the two clocks; a deadline for a cv
 * not set up by clock_cond_init (a default cv reads it on the wall clock,
 * where it passed long ago: the wait would end at once).
 */
#ifndef BASE_CLOCK_H
#define BASE_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Milliseconds on the monotonic clock (CLOCK_MONOTONIC): for deadlines and
 * elapsed times, never for wall-clock dates. */
uint64_t clock_now_ms(void);

/* The same clock in microseconds (latencies). */
uint64_t clock_now_us(void);

/* Milliseconds since the epoch on the wall clock (CLOCK_REALTIME): for
 * dates only — times sent on the wire, stored, shown to people or compared
 * with another process's clock; never for a deadline. */
uint64_t clock_wall_ms(void);

/* Sleeps ms milliseconds, resuming after signals. */
void clock_sleep_ms(uint64_t ms);

/* Initialises cv to time its waits on the monotonic clock, so that a
 * pthread_cond_timedwait until clock_deadline(ms) is immune to wall clock
 * jumps. Returns pthread_cond_init's result. */
int clock_cond_init(pthread_cond_t *cv);

/* The absolute CLOCK_MONOTONIC time ms from now, for pthread_cond_timedwait
 * on a cv from clock_cond_init. */
struct timespec clock_deadline(uint64_t ms);

#endif /* BASE_CLOCK_H */
