/*
 * watchdog.h — stacks of a hung test before ctest kills it (watchdog.c).
 */
#ifndef TESTS_WATCHDOG_H
#define TESTS_WATCHDOG_H

/* Starts the watchdog thread when ONCE_TEST_WATCHDOG_S is set (seconds
 * from now); at the deadline it prints every thread's stack of this
 * process and its onced children, then aborts. Called once per process. */
void watchdog_start(void);

#endif /* TESTS_WATCHDOG_H */
