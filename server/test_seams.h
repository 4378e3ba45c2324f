/*
 * test_seams.h — the test build's hooks into onced, read from its
 * environment. test_seams.c is compiled into once_server_test only, and
 * these declarations exist only with ONCE_TEST_SEAMS (the *_test
 * libraries and onced_test, tests/CMakeLists.txt); the shipped onced has
 * neither the file nor a call into it (scripts/check_no_seams.sh).
 *
 * Owns the variables ONCED_CLOCK_OFFSET_FILE (the wall clock shifted by the
 * signed milliseconds in that file, read at every reading),
 * ONCED_EXEC_HOLD_MS (a call with a deadline waits this long before it
 * runs, at most 10000), ONCED_COMPACT_HOLD_MS (a compaction waits this long
 * before it starts, at most 60000), ONCED_FAULT and ONCED_BROKEN (the
 * broken-on-purpose switches; store/fault.h).
 * Never: part of the shipped onced.
 */
#ifndef SERVER_TEST_SEAMS_H
#define SERVER_TEST_SEAMS_H

#include <stdint.h>

typedef uint64_t (*test_seams_clock_fn)(void); /* unix ms */

#ifdef ONCE_TEST_SEAMS

/* Reads the variables, arms the fault point and sets the holds
 * (store/fault.h). Call once in main, before server_open and before any
 * thread. */
void test_seams_apply(void);

/* The clock onced reads: the offset clock when ONCED_CLOCK_OFFSET_FILE is
 * set, else wall. */
test_seams_clock_fn test_seams_clock(test_seams_clock_fn wall);

#define TEST_SEAMS_APPLY()     test_seams_apply()
#define TEST_SEAMS_CLOCK(wall) test_seams_clock(wall)

#else /* the shipped build: no seam */

#define TEST_SEAMS_APPLY()     ((void)0)
#define TEST_SEAMS_CLOCK(wall) (wall)

#endif /* ONCE_TEST_SEAMS */

#endif /* SERVER_TEST_SEAMS_H */
