/*
 * sp_ipc.c — one SP request/reply over a plain AF_UNIX socket (sp_ipc.h).
 */
#include "tests/sp_ipc.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>

#define SP_REPLY_MAX                                                           \
    ((uint64_t)16 << 20)      /* as harness_raw_call's RECVMAXSZ               \
                               */
#define SP_REQ_ID 0x80000001u /* the REQ request id (high bit) */

static int64_t
sp_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until fd is ready for events or the deadline passes. */
static bool
sp_wait(int fd, short events, int64_t deadline)
{
    for (int i = 0; i < 100000; i++) {
        struct pollfd p = {.fd = fd, .events = events};
        int64_t left = deadline - sp_now_ms();
        int n;

        if (left <= 0) {
            return false;
        }
        if ((n = poll(&p, 1, (int)left)) > 0) {
            return true;
        }
        if (n < 0 && errno != EINTR) {
            return false;
        }
    }
    return false;
}

/* Writes all of buf by the deadline. 0 or an nng error. */
static int
sp_write(int fd, const uint8_t *buf, size_t len, int64_t deadline)
{
    size_t done = 0;

    while (done < len) {
        ssize_t n;

        if (!sp_wait(fd, POLLOUT, deadline)) {
            return NNG_ETIMEDOUT;
        }
        n = send(fd, buf + done, len - done, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            return NNG_ECLOSED;
        }
        done += n > 0 ? (size_t)n : 0;
    }
    return 0;
}

/* Reads exactly len bytes by the deadline. 0 or an nng error. */
static int
sp_read(int fd, uint8_t *buf, size_t len, int64_t deadline)
{
    size_t done = 0;

    while (done < len) {
        ssize_t n;

        if (!sp_wait(fd, POLLIN, deadline)) {
            return NNG_ETIMEDOUT;
        }
        n = recv(fd, buf + done, len - done, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            return NNG_ECLOSED;
        }
        done += n > 0 ? (size_t)n : 0;
    }
    return 0;
}

/* Connects to path without blocking; -1 (errno set) when nothing listens. */
static int
sp_connect(const char *path, int64_t deadline)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd;

    if (strlen(path) >= sizeof(sa.sun_path) ||
        (fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) <
            0) {
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 &&
        !(errno == EAGAIN && sp_wait(fd, POLLOUT, deadline))) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The request: SP header, frame header (0x01, length), request id, body. */
static int
sp_send_request(int fd, const void *req, size_t len, int64_t deadline)
{
    uint8_t head[8 + 1 + 8 + 4] = {0, 'S', 'P', 0, 0, 0x30 /* REQ0 */, 0, 0};
    uint64_t flen = (uint64_t)len + 4;
    int rv;

    head[8] = 1;
    for (int i = 0; i < 8; i++) {
        head[9 + i] = (uint8_t)(flen >> (56 - 8 * i));
    }
    for (int i = 0; i < 4; i++) {
        head[17 + i] = (uint8_t)(SP_REQ_ID >> (24 - 8 * i));
    }
    if ((rv = sp_write(fd, head, sizeof(head), deadline)) != 0) {
        return rv;
    }
    return sp_write(fd, req, len, deadline);
}

/* The reply: the server's SP header, then one frame whose first 4 bytes are
 * the request id. */
static int
sp_read_reply(int fd, uint8_t **resp, size_t *resp_len, int64_t deadline)
{
    uint8_t peer[8], fh[9 + 4];
    uint64_t flen = 0;
    int rv;

    if ((rv = sp_read(fd, peer, sizeof(peer), deadline)) != 0) {
        return rv;
    }
    if (peer[0] != 0 || peer[1] != 'S' || peer[2] != 'P' || peer[3] != 0 ||
        peer[5] != 0x31 /* REP0 */) {
        return NNG_EPROTO;
    }
    if ((rv = sp_read(fd, fh, sizeof(fh), deadline)) != 0) {
        return rv;
    }
    for (int i = 0; i < 8; i++) {
        flen = (flen << 8) | fh[1 + i];
    }
    if (fh[0] != 1 || flen < 4 || flen - 4 > SP_REPLY_MAX) {
        return NNG_EPROTO;
    }
    *resp_len = (size_t)(flen - 4);
    if ((*resp = malloc(*resp_len > 0 ? *resp_len : 1)) == NULL) {
        return NNG_ENOMEM;
    }
    return sp_read(fd, *resp, *resp_len, deadline);
}

int
sp_ipc_call(const char *path, const void *req, size_t len, uint8_t **resp,
            size_t *resp_len, int timeout_ms)
{
    int64_t deadline = sp_now_ms() + timeout_ms;
    int fd, rv;

    *resp = NULL;
    *resp_len = 0;
    if ((fd = sp_connect(path, deadline)) < 0) {
        return NNG_ECONNREFUSED;
    }
    if ((rv = sp_send_request(fd, req, len, deadline)) == 0) {
        rv = sp_read_reply(fd, resp, resp_len, deadline);
    }
    close(fd);
    if (rv != 0) {
        free(*resp);
        *resp = NULL;
        *resp_len = 0;
    }
    return rv;
}
