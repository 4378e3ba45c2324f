/*
 * notify_sock.c — systemd's notification socket, played by a test
 * (notify_sock.h).
 */
#define _GNU_SOURCE
#include "tests/notify_sock.h"

#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/clock.h"

int
notify_sock_open(notify_sock *n)
{
    struct sockaddr_un sa;

    memset(n, 0, sizeof(*n));
    n->fd = -1;
    snprintf(n->dir, sizeof(n->dir), "/tmp/once-notify-XXXXXX");
    if (mkdtemp(n->dir) == NULL) {
        return -1;
    }
    snprintf(n->path, sizeof(n->path), "%s/notify", n->dir);
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", n->path);
    if ((n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0 ||
        bind(n->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        notify_sock_close(n);
        return -1;
    }
    return 0;
}

void
notify_sock_close(notify_sock *n)
{
    if (n->fd >= 0) {
        close(n->fd);
        n->fd = -1;
    }
    unlink(n->path);
    rmdir(n->dir);
}

int
notify_sock_recv(notify_sock *n, char *buf, size_t len, int ms)
{
    struct pollfd p = {n->fd, POLLIN, 0};
    ssize_t got;

    if (poll(&p, 1, ms) != 1) {
        return -1;
    }
    if ((got = recv(n->fd, buf, len - 1, 0)) < 0) {
        return -1;
    }
    buf[got] = '\0';
    return (int)got;
}

bool
notify_sock_expect(notify_sock *n, const char *what, int ms, int *pings,
                   char *buf, size_t len)
{
    char m[1024];
    uint64_t end = clock_now_ms() + (uint64_t)ms;

    while (clock_now_ms() < end) {
        if (notify_sock_recv(n, m, sizeof(m), 200) < 0) {
            continue;
        }
        if (pings != NULL && strstr(m, "WATCHDOG=1") != NULL) {
            (*pings)++;
        }
        if (strstr(m, what) != NULL) {
            if (buf != NULL) {
                snprintf(buf, len, "%s", m);
            }
            return true;
        }
    }
    return false;
}
