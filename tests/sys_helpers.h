/*
 * sys_helpers.h — what the test harness, the etcd processes of the
 * replication tests and the benchmarks share that needs neither cmocka nor
 * onced: removing a temp tree and finding a free loopback port.
 *
 * Owns: nothing between calls.
 * Never: follows a symbolic link out of the tree it removes.
 */
#ifndef TESTS_SYS_HELPERS_H
#define TESTS_SYS_HELPERS_H

/* Removes path and everything below it, at most SYS_RM_DEPTH levels deep
 * (a link is removed, never followed). Errors are ignored. */
#define SYS_RM_DEPTH 8
void sys_rm_tree(const char *path);

/* A loopback TCP port nobody listens on now (bound, read, closed), never
 * one of the last 64 this process was given (the kernel may offer a port
 * again at once), or -1. Thread-safe. Another process may still take it
 * before the caller binds it: a caller that can, starts again. */
int sys_free_port(void);

#endif /* TESTS_SYS_HELPERS_H */
