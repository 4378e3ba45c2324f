/*
 * test_conns.c — connections that finish the SP handshake and then idle
 * are bounded and closed (issue 21, finding 5; server/conns.h).
 *
 * Owns: raw handshaken connections — a socket (tcp:// from 127.0.0.2, so
 * that onced tells it from the well-behaved client on 127.0.0.1; or
 * ipc://) that sends the 8-byte SP header of a REQ socket, reads onced's,
 * and then never sends a request — and the checks made while hundreds of
 * them are open: a client opened before them and a client opened after
 * them both make one signed, exact-checked call every 50 ms with their
 * latency within a bound of their quiet latency, and Stats counts the
 * connections refused or closed to make room. onced runs with a low
 * open-file limit, as in the finding (1,100 idle connections against a
 * limit of 1,024 made every new client time out).
 * Invariant: every loop is bounded in count and time; the raw sockets are
 * the test thread's own.
 * Never: decides on a fixed sleep.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/harness.h"

#define IDLERS      400 /* handshaken idle connections of the attack */
#define ONCED_FILES 256 /* onced's open-file limit in these cases */
#define PERIOD_MS   50  /* one probe call this often */

/*
 * LeakSanitizer (make asan), in this test process only: a client's
 * request that nng 1.5.2 accepted (nng_sendmsg) on a connection onced
 * then closed for idling is not always freed by nng (seen in
 * t_idle_timeout). Only messages libonce packed here are matched; onced
 * runs under its own sanitizer and nothing of it is suppressed.
 */
__attribute__((used)) const char *
__lsan_default_suppressions(void)
{
    return "leak:call_pack\n";
}

/* The SP header of a REQ socket (protocol 0x30), and onced's (REP). */
static const uint8_t sp_req[8] = {0, 'S', 'P', 0, 0x00, 0x30, 0, 0};

/* Reads exactly n bytes within ms; false on EOF, error or timeout. */
static bool
read_within(int fd, uint8_t *buf, size_t n, int ms)
{
    size_t got = 0;
    int64_t end = harness_now_ms() + ms;

    while (got < n && harness_now_ms() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t k;

        if (poll(&p, 1, (int)(end - harness_now_ms())) <= 0) {
            continue;
        }
        if ((k = read(fd, buf + got, n - got)) <= 0) {
            return false;
        }
        got += (size_t)k;
    }
    return got == n;
}

/* connect(2) within ms (a listener that cannot accept leaves a blocking
 * connect waiting for minutes). */
static bool
connect_within(int fd, const struct sockaddr *a, socklen_t len, int ms)
{
    int fl = fcntl(fd, F_GETFL), err = 0;
    socklen_t elen = sizeof(err);
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    bool ok;

    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    ok = connect(fd, a, len) == 0 ||
         (errno == EINPROGRESS && poll(&p, 1, ms) == 1 &&
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err == 0);
    fcntl(fd, F_SETFL, fl);
    return ok;
}

/*
 * A connection to onced that sent its SP header: tcp to 127.0.0.1:port
 * from 127.0.0.2 (port > 0), or ipc to path. Returns the descriptor, or -1
 * when it could not connect or onced hung up; *shook says whether onced
 * answered the header within a second. One it did not answer stays open:
 * hanging up mid-handshake ends an nng 1.5.2 ipc listener (listen_watch.h),
 * whose restart closes every idle connection, and the caps this file tests
 * would never be reached (seen in CI on a loaded machine).
 */
static int
connected(int port, const char *path, bool *shook)
{
    uint8_t hdr[8];
    int fd;

    if (port > 0) {
        struct sockaddr_in src = {.sin_family = AF_INET};
        struct sockaddr_in dst = {.sin_family = AF_INET,
                                  .sin_port = htons((uint16_t)port)};

        inet_pton(AF_INET, "127.0.0.2", &src.sin_addr);
        inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
        if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0) {
            return -1;
        }
        if (bind(fd, (struct sockaddr *)&src, sizeof(src)) != 0 ||
            !connect_within(fd, (struct sockaddr *)&dst, sizeof(dst), 1000)) {
            close(fd);
            return -1;
        }
    } else {
        struct sockaddr_un dst = {.sun_family = AF_UNIX};

        snprintf(dst.sun_path, sizeof(dst.sun_path), "%s", path);
        if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) < 0) {
            return -1;
        }
        if (!connect_within(fd, (struct sockaddr *)&dst, sizeof(dst), 1000)) {
            close(fd);
            return -1;
        }
    }
    if (write(fd, sp_req, sizeof(sp_req)) != (ssize_t)sizeof(sp_req)) {
        close(fd);
        return -1;
    }
    *shook = read_within(fd, hdr, sizeof(hdr), 1000);
    return fd;
}

/* A connection onced answered within a second (connected), or -1. */
static int
handshaken(int port, const char *path)
{
    bool shook = false;
    int fd = connected(port, path, &shook);

    if (fd >= 0 && !shook) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Whether onced closed fd (EOF or reset), waiting at most ms. */
static bool
closed_within(int fd, int ms)
{
    int64_t end = harness_now_ms() + ms;
    uint8_t b;

    while (harness_now_ms() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};

        if (poll(&p, 1, 100) > 0) {
            ssize_t k = read(fd, &b, 1);

            if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
                return true;
            }
        }
    }
    return false;
}

/* onced with authentication on (principal alice) and args, started under
 * an open-file limit of files (0: the test's own); waits until it reads
 * the principals file. */
static harness *
start_limited(const char *const *args, rlim_t files)
{
    harness *h = NULL;
    struct rlimit was, rl;
    once_client *c = NULL;
    once_status st;

    assert_int_equal(getrlimit(RLIMIT_NOFILE, &was), 0);
    rl = was;
    if (files > 0) {
        rl.rlim_cur = files;
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
    }
    assert_int_equal(harness_start_args(&h, args), 0);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &was), 0);
    harness_add_principal(h, "alice", "operator");
    assert_int_equal(harness_client_as(h, "alice", true, &c, &st), ONCE_OK);
    once_client_close(c);
    return h;
}

/* onced's Stats as alice. */
static Once__V1__StatsResponse *
stats_of(once_client *c)
{
    Once__V1__StatsResponse *r = NULL;

    assert_int_equal(harness_stats_all(c, &r), ONCE_OK);
    return r;
}

/*
 * IDLERS handshaken connections that never send a request, over tcp://
 * (from another address than alice's) or ipc:// (the same uid as
 * alice), against onced under an open-file limit of ONCED_FILES (so
 * --conn-max is lowered to 128). A client opened before them and one
 * opened after them each make calls every 50 ms for two seconds: every
 * call answers OK, the counters are exact, and the slowest call is
 * within ten times the slowest quiet call (at least 500 ms); Stats
 * counts at least IDLERS - 128 connections refused or closed to make
 * room. Without the caps onced runs out of descriptors and the client
 * opened after them never gets an answer.
 */
static void
idlers_on(bool tcp)
{
    char url[64];
    int port = harness_free_port();
    const char *args[] = {"--listen", url, NULL};
    harness *h;
    once_client *before = NULL, *after = NULL;
    once_options o;
    once_security sec;
    once_status st;
    char kp[512];
    harness_calls quiet, b1, b2;
    int fds[IDLERS], stuck[IDLERS], open = 0, slow = 0;
    int64_t bound;
    Once__V1__StatsResponse *r;

    snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", port);
    h = start_limited(args, ONCED_FILES);
    snprintf(kp, sizeof(kp), "%s/alice.key", h->dir);
    once_options_init(&o);
    once_security_init(&sec);
    o.url = tcp ? url : h->url;
    /* generous for the open: an ipc listener nng stopped after some
     * peer's hang-up is started again within about 5 s (listen_watch.h;
     * seen once here before any idle connection was made) */
    o.deadline_ms = 30000;
    o.max_attempts = 20;
    sec.key_file = kp;
    if (once_client_open_secure(&before, &o, &sec, &st) != ONCE_OK) {
        print_error("  open: %s (%s)\n", st.reason, st.message);
        harness_dump_log(h);
        fail();
    }
    harness_probe_run(before, "quiet", PERIOD_MS, 2000, 40, &quiet);
    assert_int_equal(quiet.ok, quiet.calls);
    bound = 10 * quiet.worst_ms > 500 ? 10 * quiet.worst_ms : 500;

    for (int i = 0; i < IDLERS; i++) {
        bool shook = false;
        int fd = connected(tcp ? port : 0, h->path, &shook);

        if (fd >= 0 && shook) {
            fds[open++] = fd;
        } else if (fd >= 0) {
            stuck[slow++] = fd;
        }
    }
    print_message("  %s: %d of %d idle connections shook hands (%d more "
                  "not within a second)\n",
                  tcp ? "tcp" : "ipc", open, IDLERS, slow);
    assert_true(open >= 128); /* the attack happened */

    harness_probe_run(before, "before", PERIOD_MS, 2000, 40, &b1);
    /* a new client, opened while the idle connections are open */
    o.deadline_ms = 5000;
    assert_int_equal(once_client_open_secure(&after, &o, &sec, &st), ONCE_OK);
    harness_probe_run(after, "after", PERIOD_MS, 2000, 40, &b2);
    print_message("  alice: quiet slowest %lld ms (median %lld); beside the "
                  "idle connections: old client %d/%d OK, slowest %lld ms; "
                  "new client %d/%d OK, slowest %lld ms (bound %lld ms)\n",
                  (long long)quiet.worst_ms, (long long)quiet.median_ms, b1.ok,
                  b1.calls, (long long)b1.worst_ms, b2.ok, b2.calls,
                  (long long)b2.worst_ms, (long long)bound);
    assert_int_equal(b1.ok, b1.calls);
    assert_int_equal(b2.ok, b2.calls);
    assert_true(b1.calls >= 10 && b2.calls >= 10);
    assert_true(b1.worst_ms <= bound);
    assert_true(b2.worst_ms <= bound);
    assert_int_equal(harness_get(before, "before"), b1.ok);
    assert_int_equal(harness_get(after, "after"), b2.ok);
    r = stats_of(after);
    print_message("  Stats: conns_open %llu, conns_refused %llu, "
                  "conns_evicted %llu, listener_restarts %llu\n",
                  (unsigned long long)r->conns_open,
                  (unsigned long long)r->conns_refused,
                  (unsigned long long)r->conns_evicted,
                  (unsigned long long)r->listener_restarts);
    if (r->conns_refused + r->conns_evicted <
            (uint64_t)(IDLERS - (ONCED_FILES - 128)) ||
        r->conns_open > ONCED_FILES - 128) {
        harness_dump_log(h); /* e.g. a listener restart, and why */
        fail();
    }
    once__v1__stats_response__free_unpacked(r, NULL);
    for (int i = 0; i < open; i++) {
        close(fds[i]);
    }
    once_client_close(before);
    once_client_close(after);
    assert_int_equal(harness_stop(h), 0);
    for (int i = 0; i < slow; i++) {
        close(stuck[i]); /* onced is gone: no handshake to break */
    }
    harness_free(h);
}

static void
t_idlers_tcp(void **state)
{
    (void)state;
    idlers_on(true);
}

static void
t_idlers_ipc(void **state)
{
    (void)state;
    idlers_on(false);
}

/*
 * --conn-idle-timeout 1s: a handshaken connection that sends nothing is
 * closed by onced (within 30 s, bounded) and counted in Stats
 * conns_idle_closed; a client whose connection was closed so makes its
 * next call as if nothing happened (nng dials again). The idle connection
 * is a tcp:// one: an ipc:// listener that listen_watch.h starts again
 * (on a loaded machine its probe can time out) closes its connections
 * too, which once passed for an idle close here and failed the count.
 */
static void
t_idle_timeout(void **state)
{
    char url[64];
    int port = harness_free_port();
    const char *args[] = {"--conn-idle-timeout", "1s", "--listen", url, NULL};
    harness *h;
    once_client *c = NULL;
    once_status st;
    Once__V1__StatsResponse *r;
    int fd;

    (void)state;
    snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", port);
    h = start_limited(args, 0);
    assert_int_equal(harness_client_as(h, "alice", true, &c, &st), ONCE_OK);
    assert_int_equal(harness_get(c, "idle"), 0); /* then it idles */
    assert_true((fd = handshaken(port, NULL)) >= 0);
    assert_true(closed_within(fd, 30000));
    close(fd);
    assert_int_equal(harness_get(c, "idle"), 0); /* after its own close */
    r = stats_of(c);
    print_message("  Stats conns_idle_closed %llu, listener_restarts %llu\n",
                  (unsigned long long)r->conns_idle_closed,
                  (unsigned long long)r->listener_restarts);
    if (r->conns_idle_closed < 1) {
        harness_dump_log(h); /* who closed it, if not the idle timeout */
        fail();
    }
    once__v1__stats_response__free_unpacked(r, NULL);
    once_client_close(c);
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_idle_timeout),
        cmocka_unit_test(t_idlers_tcp),
        cmocka_unit_test(t_idlers_ipc),
    };
    if (getenv("ONCE_TEST_FILTER") != NULL) {
        cmocka_set_test_filter(getenv("ONCE_TEST_FILTER"));
    }
    return harness_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
