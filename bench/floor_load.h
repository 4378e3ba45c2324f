/*
 * floor_load.h — what onced's shape with nothing in it (once_floor,
 * floor_server.c) carries on this machine at a given number of callers:
 * a bound for a benchmark's target, measured in the same run as the
 * figures it bounds (bench_outbox: "the floor" rows).
 *
 * Owns: one once_floor process (its temp dir) and the callers' threads and
 * sockets, from the start of floor_load to its return.
 * Invariant: bounded — callers stop at the deadline (or after
 * FLOOR_LOAD_MAX_CALLS each), every call has nng's 10 s timeouts, and the
 * server is stopped before floor_load returns.
 * Never: counts a call that did not come back with its own bytes.
 */
#ifndef BENCH_FLOOR_LOAD_H
#define BENCH_FLOOR_LOAD_H

#include <stdbool.h>
#include <stdint.h>

#define FLOOR_LOAD_MAX_CALLS 100000000L /* per caller, a bound only */

typedef struct floor_tally {
    uint64_t calls;  /* echoed with the bytes sent */
    uint64_t errors; /* transport errors and wrong echoes */
    double per_s;    /* calls over the measured time */
} floor_tally;

/*
 * Starts path (once_floor) on a temp dir and ipc address — with
 * --no-sync when sync is false — and runs n callers, a REQ socket each,
 * sending bytes-sized requests one after the other for seconds. Fills *t.
 * 0, or -1 after saying why on stderr.
 */
int floor_load(const char *path, bool sync, int n, int seconds, int bytes,
               floor_tally *t);

#endif /* BENCH_FLOOR_LOAD_H */
