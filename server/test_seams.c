/*
 * test_seams.c — the test build's environment hooks (test_seams.h).
 *
 * Owns test_seams_clock_file, set once by test_seams_apply before any
 * thread and read-only afterwards.
 * Invariant: with none of the variables set, the test build behaves as the
 * shipped onced.
 * Never: compiled into the shipped onced (server/CMakeLists.txt adds it to
 * once_server_test only).
 */
#include "server/test_seams.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"
#include "base/log.h"
#include "store/fault.h"

static const char *test_seams_clock_file;

/* The wall clock plus the offset in test_seams_clock_file (0 when it is
 * missing or does not hold a number). */
static uint64_t
test_seams_offset_clock(void)
{
    FILE *f = fopen(test_seams_clock_file, "r");
    long long off = 0;

    if (f != NULL) {
        if (fscanf(f, "%lld", &off) != 1) {
            off = 0;
        }
        fclose(f);
    }
    return clock_wall_ms() + (uint64_t)off;
}

/* The milliseconds in variable name (a bare number), at most max; 0 when
 * unset, empty or not a number. */
static uint64_t
test_seams_ms(const char *name, uint64_t max, const char *what)
{
    const char *v = getenv(name);
    unsigned long long ms;
    char *end;

    if (v == NULL || v[0] == '\0') {
        return 0;
    }
    ms = strtoull(v, &end, 10);
    if (*end != '\0' || ms == 0) {
        return 0;
    }
    if (ms > max) {
        ms = max;
    }
    log_info("test hold: %s wait %llu ms (%s)", what, ms, name);
    return ms;
}

void
test_seams_apply(void)
{
    const char *v;

    log_info("test build: test seams are read from the environment");
    if ((v = getenv("ONCED_CLOCK_OFFSET_FILE")) != NULL && v[0] != '\0') {
        test_seams_clock_file = v;
        log_info("test clock: offset read from %s", v);
    }
    fault_hold_set(FAULT_HOLD_EXEC,
                   test_seams_ms("ONCED_EXEC_HOLD_MS", 10000,
                                 "calls with a deadline, before running,"));
    fault_hold_set(FAULT_HOLD_COMPACT,
                   test_seams_ms("ONCED_COMPACT_HOLD_MS", 60000,
                                 "compactions, before starting,"));
    fault_arm(getenv("ONCED_FAULT"));
    fault_break(getenv("ONCED_BROKEN"));
}

test_seams_clock_fn
test_seams_clock(test_seams_clock_fn wall)
{
    return test_seams_clock_file != NULL ? test_seams_offset_clock : wall;
}
