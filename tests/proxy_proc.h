/*
 * proxy_proc.h — once_proxy (bench/once_proxy.c) as a child of a test: a
 * lossy network between libonce and onced.
 *
 * Owns: starting the proxy with its fault arguments and its stderr in a
 * log file, and reading back the counts it prints when it ends.
 * Invariant: the child dies with the test (PR_SET_PDEATHSIG).
 * Never: decides what a test asserts; it only tells what the proxy did.
 */
#ifndef TESTS_PROXY_PROC_H
#define TESTS_PROXY_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Starts bin (once_proxy) between front and back with --seed seed and the
 * NULL-terminated fault arguments (e.g. "--drop-rep", "0.2", NULL); its
 * stderr goes to log. Returns the pid, or -1. */
pid_t proxy_proc_start(const char *bin, const char *front, const char *back,
                       uint64_t seed, const char *const *faults,
                       const char *log);

/* The replies the proxy took in and dropped, from the line it prints when
 * it ends ("once_proxy: replies in N dropped M ..."): call after it
 * exited. False when the log has no such line. */
bool proxy_proc_replies(const char *log, uint64_t *in, uint64_t *dropped);

#endif /* TESTS_PROXY_PROC_H */
