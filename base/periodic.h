/*
 * periodic.h — a thread that runs one function every period.
 *
 * The watches and publishers of onced (the ipc:// listener watch, the TLS
 * handshake log, the principals watcher, the metrics publisher, the
 * systemd watchdog) are each a function run every so often on a thread of
 * its own, woken early to stop and sometimes to run at once. This is that
 * thread, once.
 *
 * Owns: the thread, its lock and its condition variable (on the monotonic
 * clock: clock_cond_init), and the stop and wakeup requests.
 * Invariant: fn runs on the periodic thread only, one run at a time and
 * never after periodic_stop returns; a period is waited from the end of
 * one run to the start of the next, cut short only by periodic_wakeup or
 * periodic_stop (spurious wakeups wait on).
 * Never: holds its lock while fn runs; runs fn on a caller's thread.
 */
#ifndef BASE_PERIODIC_H
#define BASE_PERIODIC_H

#include <stdbool.h>
#include <stdint.h>

typedef struct periodic periodic;

/* Why fn runs (its second argument; 0 for a period that ran out). */
#define PERIODIC_FIRST 1u /* the run before the first wait */
#define PERIODIC_WOKEN 2u /* periodic_wakeup asked for it */
#define PERIODIC_LAST  4u /* the run after periodic_stop was asked */

/* Runs on the periodic thread. */
typedef void (*periodic_fn)(void *arg, unsigned why);

/* Options of periodic_start. */
#define PERIODIC_RUN_FIRST 1u /* run fn once before the first wait */
#define PERIODIC_RUN_LAST  2u /* run fn once more when stopped */

/* Starts a thread that runs fn(arg, why) every period_ms (> 0), plus the
 * runs opts asks for. *pp is set before the thread starts (fn may read it)
 * and is the caller's until periodic_stop; NULL on failure. Returns 0,
 * ENOMEM, or pthread_create's error. */
int periodic_start(periodic **pp, periodic_fn fn, void *arg, uint64_t period_ms,
                   unsigned opts);

/* Makes the thread run fn now (why PERIODIC_WOKEN) instead of at the end
 * of its wait; a wakeup during a run is kept for after it. Any thread. */
void periodic_wakeup(periodic *p);

/* True once periodic_stop was asked: for a long fn to end early. */
bool periodic_stopping(periodic *p);

/* Stops the thread of *pp (waiting for a run under way, then the
 * PERIODIC_LAST run if asked for), joins and frees it, and sets *pp to
 * NULL. A NULL *pp is ok (never started, or stopped already). */
void periodic_stop(periodic **pp);

#endif /* BASE_PERIODIC_H */
