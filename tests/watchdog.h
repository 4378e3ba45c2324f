/*
 * watchdog.h — stacks of a hung test before ctest kills it (watchdog.c).
 */
#ifndef TESTS_WATCHDOG_H
#define TESTS_WATCHDOG_H

#include <sys/types.h>

/* Starts the watchdog thread when ONCE_TEST_WATCHDOG_S is set (seconds
 * from now); at the deadline it prints every thread's stack of this
 * process and its onced children, then aborts. Called once per process. */
void watchdog_start(void);

/* Prints every thread's stack of process pid to stderr (gdb in batch mode,
 * at most 60 s), headed by what. When pid runs valgrind_binary under
 * valgrind, gdb asks valgrind's gdbserver (vgdb) for the program's
 * threads; NULL otherwise. Any thread; blocks until gdb is done. */
void watchdog_dump(pid_t pid, const char *what, const char *valgrind_binary);

#endif /* TESTS_WATCHDOG_H */
