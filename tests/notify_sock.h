/*
 * notify_sock.h — a stand-in for systemd's notification socket: a datagram
 * socket in a temp folder whose path goes into NOTIFY_SOCKET of an onced
 * the test starts, and what onced sends there (READY=1, STATUS=...,
 * WATCHDOG=1, STOPPING=1).
 *
 * Owns: the socket and its folder (notify_sock_close removes both).
 * Invariant: every wait is bounded by the caller's ms.
 * Never: sets the environment itself (the caller sets NOTIFY_SOCKET to
 * path around the start of the process it tests).
 */
#ifndef TESTS_NOTIFY_SOCK_H
#define TESTS_NOTIFY_SOCK_H

#include <stdbool.h>
#include <stddef.h>

typedef struct notify_sock {
    int fd;
    char dir[64];
    char path[96]; /* NOTIFY_SOCKET's value */
} notify_sock;

/* Binds a new socket. 0 or -1. */
int notify_sock_open(notify_sock *n);
void notify_sock_close(notify_sock *n);

/* One datagram into buf (NUL-terminated) within ms: its length, or -1. */
int notify_sock_recv(notify_sock *n, char *buf, size_t len, int ms);

/* Waits at most ms for a datagram containing what; adds the WATCHDOG=1
 * datagrams seen meanwhile to *pings (may be NULL) and copies the one
 * that matched into buf (may be NULL). Whether it came. */
bool notify_sock_expect(notify_sock *n, const char *what, int ms, int *pings,
                        char *buf, size_t len);

#endif /* TESTS_NOTIFY_SOCK_H */
