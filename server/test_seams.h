/*
 * test_seams.h — the test build's hooks into onced, read from its
 * environment. Compiled only into the test-only servers tests/ builds
 * (onced_test, onced_split_*, with ONCE_TEST_SEAMS defined); the shipped
 * onced has neither this file nor any of the variables below.
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

#include "server/server.h"

/* Reads the variables, arms the fault point, and fills cfg's test seams.
 * Call once in main, before server_open and before any thread. */
void test_seams_apply(server_config *cfg);

#endif /* SERVER_TEST_SEAMS_H */
