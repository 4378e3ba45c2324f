/*
 * test_hostile.c — malformed and hostile input against a real onced
 * (docs/spec.md: nothing that fails before execution writes anything).
 *
 * Owns: raw nng REQ sends of garbage, truncated envelopes, bad payloads,
 * unknown methods, missing rpc ids, an oversized message, an empty counter
 * name, a zero increment and a never-issued client id. Each must get its
 * status code (decoded from the Response envelope), write nothing (Stats
 * commits and records_stored unchanged, the counter unchanged, and the rpc
 * id it used still free for a real call), and leave onced serving. Also
 * peers that connect to the ipc path and hang up before the handshake:
 * onced must go on accepting new clients.
 * Invariant: the rpc ids used by rejected requests are reused afterwards for
 * a valid call, which must execute (not replay, not conflict) — proof that
 * the rejection stored no completion record.
 * Never: goes through libonce for the hostile bytes (libonce would refuse to
 * send most of them); libonce is only used to observe the server.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <nng/nng.h>

#include "proto/grants.pb-c.h"
#include "tests/harness.h"

#define INCREMENT "/once.v1.Counter/Increment"
#define START     7 /* the watched counter's value before every hostile send */
#define REPLY_MS  5000

typedef struct fixture {
    harness *h;
    once_client *c; /* lease-less: reads, stats, explicit-id calls */
    uint64_t cid;   /* a live client id for the raw requests */
    uint64_t seq;   /* the next unused seq of cid */
    once_stats before;
} fixture;

/* Starts onced with args (NULL-terminated) and opens the fixture's client,
 * its lease and the watched counter. */
static int
fx_setup_args(void **state, const char *const *args)
{
    fixture *f = calloc(1, sizeof(*f));
    once_status st;
    once_rpc_id id;
    uint64_t ttl;
    int64_t v;

    if (f == NULL || harness_start_args(&f->h, args) != 0) {
        free(f);
        return -1;
    }
    *state = f;
    if (harness_client(f->h, true, &f->c) != ONCE_OK ||
        once_lease_open(f->c, NULL, 120000, &f->cid, &ttl, &st) != ONCE_OK ||
        f->cid == 0) {
        return -1;
    }
    f->seq = 1;
    id = (once_rpc_id){f->cid, f->seq++};
    if (once_counter_incr(f->c, "hostile", START, &id, &v, &st) != ONCE_OK ||
        v != START) {
        return -1;
    }
    return 0;
}

static int
fx_setup(void **state)
{
    /* Every test here compares Stats.commits to show a refused request
     * wrote nothing (harness_no_gc). */
    return fx_setup_args(state, harness_no_gc);
}

static int
fx_teardown(void **state)
{
    fixture *f = *state;
    int rv = 0;

    if (f == NULL) {
        return 0;
    }
    once_client_close(f->c);
    if (f->h != NULL && f->h->pid != 0) {
        rv = harness_stop(f->h);
    }
    harness_free(f->h);
    free(f);
    return rv;
}

/* fx_setup with every call that carries a deadline held 300 ms in onced's
 * executor after it was received (test-only ONCED_EXEC_HOLD_MS), as behind
 * a long queue. */
static int
fx_setup_held(void **state)
{
    int rv;

    setenv("ONCED_EXEC_HOLD_MS", "300", 1);
    rv = fx_setup(state);
    unsetenv("ONCED_EXEC_HOLD_MS");
    return rv;
}

/* The same, with the listener watch off (onced --no-listen-check). */
static int
fx_setup_no_watch(void **state)
{
    static const char *const args[] = {"--gc-interval", "1h",
                                       "--no-listen-check", NULL};

    return fx_setup_args(state, args);
}

/* Records the Stats the "nothing written" check compares against. */
static void
mark(fixture *f)
{
    once_status st;
    assert_int_equal(once_admin_stats(f->c, &f->before, &st), ONCE_OK);
}

/* Nothing was written since mark(), and onced still answers normal calls. */
static void
nothing_written(fixture *f)
{
    once_stats now;
    once_status st;
    int64_t v = -1;
    int rv;

    rv = once_admin_stats(f->c, &now, &st);
    if (rv != ONCE_OK) {
        print_error("onced stopped serving: Stats -> %s %s %s\n",
                    once_strerror(rv), st.reason, st.message);
        harness_dump_log(f->h);
    }
    assert_int_equal(rv, ONCE_OK);
    assert_int_equal(now.commits, f->before.commits);
    assert_int_equal(now.records_stored, f->before.records_stored);
    assert_int_equal(once_counter_get(f->c, "hostile", &v, &st), ONCE_OK);
    assert_int_equal(v, START);
}

/* A valid Increment under exactly (cid, seq) executes for the first time. */
static void
id_still_free(fixture *f, uint64_t cid, uint64_t seq)
{
    once_rpc_id id = {cid, seq};
    once_status st;
    int64_t v = -1;
    int rv;

    rv = once_counter_incr(f->c, "fresh", 1, &id, &v, &st);
    if (rv != ONCE_OK) {
        print_error("valid call on id %llu/%llu after the rejection: %s "
                    "reason=\"%s\" message=\"%s\"\n",
                    (unsigned long long)cid, (unsigned long long)seq,
                    once_strerror(rv), st.reason, st.message);
    }
    assert_int_equal(rv, ONCE_OK);
    assert_false(st.replayed);
}

/* Sends bytes raw; expects a Response with code `want` (and `reason` when
 * not NULL). want2 is an acceptable alternative code, or -1. */
static void
expect_code(fixture *f, const char *what, const void *bytes, size_t len,
            int want, int want2, const char *reason)
{
    Once__V1__Response *r = NULL;
    int rv = harness_raw_rpc(f->h->url, bytes, len, &r, REPLY_MS);

    if (rv != 0) {
        print_error("%s: no Response (%s)\n", what,
                    rv > 0 ? nng_strerror(rv) : "undecodable reply");
        harness_dump_log(f->h);
    }
    assert_int_equal(rv, 0);
    assert_non_null(r->status);
    print_message("%-36s -> %s reason=\"%s\" message=\"%s\"\n", what,
                  once_strerror(r->status->code), r->status->reason,
                  r->status->message);
    if ((int)r->status->code != want && (int)r->status->code != want2) {
        print_error("%s: want %s, got %s\n", what, once_strerror(want),
                    once_strerror(r->status->code));
    }
    assert_true((int)r->status->code == want || (int)r->status->code == want2);
    /* A rejection says why: a reason or a message for people. */
    assert_true(r->status->reason[0] != '\0' || r->status->message[0] != '\0');
    if (reason != NULL) {
        assert_string_equal(r->status->reason, reason);
    }
    assert_false(r->replayed);
    assert_int_equal(r->payload.len, 0);
    once__v1__response__free_unpacked(r, NULL);
}

/* An Increment envelope; *out is malloc'd. */
static void
incr_envelope(uint64_t cid, uint64_t seq, const char *name, int64_t by,
              uint8_t **out, size_t *len)
{
    uint8_t *p;
    size_t plen;

    assert_int_equal(harness_incr_payload(name, by, &p, &plen), 0);
    assert_int_equal(harness_envelope(INCREMENT, cid, seq, p, plen, out, len),
                     0);
    free(p);
}

static void
test_garbage_bytes(void **state)
{
    fixture *f = *state;
    static const uint8_t bad_wiretype[] = {0x0f, 0x01, 0x02, 0x03};
    static const uint8_t bad_varint[] = {0xff, 0xff, 0xff, 0xff, 0xff,
                                         0xff, 0xff, 0xff, 0xff, 0xff,
                                         0xff, 0xff, 0xff};
    static const uint8_t overlong_len[] = {0x0a, 0xff, 0xff, 0xff,
                                           0x7f, '/',  'o'};
    const char *text = "GET / HTTP/1.1\r\nHost: onced\r\n\r\n";

    mark(f);
    expect_code(f, "garbage: invalid wire type", bad_wiretype,
                sizeof(bad_wiretype), ONCE_INVALID_ARGUMENT, -1,
                "MALFORMED_ENVELOPE");
    nothing_written(f);
    expect_code(f, "garbage: endless varint", bad_varint, sizeof(bad_varint),
                ONCE_INVALID_ARGUMENT, -1, "MALFORMED_ENVELOPE");
    nothing_written(f);
    expect_code(f, "garbage: length past the end", overlong_len,
                sizeof(overlong_len), ONCE_INVALID_ARGUMENT, -1,
                "MALFORMED_ENVELOPE");
    nothing_written(f);
    expect_code(f, "garbage: HTTP request", text, strlen(text),
                ONCE_INVALID_ARGUMENT, -1, "MALFORMED_ENVELOPE");
    nothing_written(f);
    /* Zero bytes decode as an empty Request: no method. */
    expect_code(f, "garbage: empty message", "", 0, ONCE_UNIMPLEMENTED, -1,
                "UNKNOWN_METHOD");
    nothing_written(f);
}

static void
test_truncated_envelope(void **state)
{
    fixture *f = *state;
    uint64_t seq = f->seq++;
    uint8_t *env;
    size_t len;

    incr_envelope(f->cid, seq, "hostile", 1, &env, &len);
    mark(f);
    /* The payload is the last field, so these cut into its bytes. */
    expect_code(f, "envelope truncated by 1 byte", env, len - 1,
                ONCE_INVALID_ARGUMENT, -1, NULL);
    nothing_written(f);
    expect_code(f, "envelope truncated by 3 bytes", env, len - 3,
                ONCE_INVALID_ARGUMENT, -1, NULL);
    nothing_written(f);
    expect_code(f, "envelope truncated to half", env, len / 2,
                ONCE_INVALID_ARGUMENT, -1, NULL);
    nothing_written(f);
    free(env);
    id_still_free(f, f->cid, seq);
}

static void
test_bad_payload(void **state)
{
    fixture *f = *state;
    static const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff};
    uint64_t seq = f->seq++;
    uint8_t *p, *env;
    size_t plen, len;

    mark(f);
    assert_int_equal(harness_envelope(INCREMENT, f->cid, seq, garbage,
                                      sizeof(garbage), &env, &len),
                     0);
    expect_code(f, "Increment payload: garbage", env, len,
                ONCE_INVALID_ARGUMENT, -1, NULL);
    free(env);
    nothing_written(f);

    /* by = 300 is a two-byte varint at the end: cut its last byte. */
    assert_int_equal(harness_incr_payload("hostile", 300, &p, &plen), 0);
    assert_int_equal(
        harness_envelope(INCREMENT, f->cid, seq, p, plen - 1, &env, &len), 0);
    expect_code(f, "Increment payload: truncated", env, len,
                ONCE_INVALID_ARGUMENT, -1, NULL);
    free(env);
    nothing_written(f);

    /* A name whose length runs past the payload. */
    assert_int_equal(harness_envelope(INCREMENT, f->cid, seq, p, 4, &env, &len),
                     0);
    expect_code(f, "Increment payload: cut inside name", env, len,
                ONCE_INVALID_ARGUMENT, -1, NULL);
    free(env);
    free(p);
    nothing_written(f);

    id_still_free(f, f->cid, seq);
}

static void
test_unknown_method(void **state)
{
    fixture *f = *state;
    uint64_t seq = f->seq++;
    uint8_t *p, *env;
    size_t plen, len;
    char *longname;

    assert_int_equal(harness_incr_payload("hostile", 1, &p, &plen), 0);
    mark(f);
    assert_int_equal(
        harness_envelope("/once.v1.Nope/X", f->cid, seq, p, plen, &env, &len),
        0);
    expect_code(f, "method /once.v1.Nope/X", env, len, ONCE_UNIMPLEMENTED, -1,
                NULL);
    free(env);
    nothing_written(f);

    /* A prefix of a real name is not that name. */
    assert_int_equal(harness_envelope("/once.v1.Counter/Incr", f->cid, seq, p,
                                      plen, &env, &len),
                     0);
    expect_code(f, "method /once.v1.Counter/Incr", env, len, ONCE_UNIMPLEMENTED,
                -1, NULL);
    free(env);
    nothing_written(f);

    /* A 64 KiB method name. */
    assert_non_null(longname = malloc(65536));
    memset(longname, 'A', 65535);
    longname[0] = '/';
    longname[65535] = '\0';
    assert_int_equal(
        harness_envelope(longname, f->cid, seq, p, plen, &env, &len), 0);
    expect_code(f, "method of 64 KiB", env, len, ONCE_UNIMPLEMENTED,
                ONCE_INVALID_ARGUMENT, NULL);
    free(env);
    free(longname);
    free(p);
    nothing_written(f);

    id_still_free(f, f->cid, seq);
}

static void
test_missing_rpc_id(void **state)
{
    fixture *f = *state;
    uint64_t seq = f->seq++;
    uint8_t *env;
    size_t len;

    mark(f);
    incr_envelope(0, seq, "hostile", 1, &env, &len);
    expect_code(f, "Increment with client_id=0", env, len,
                ONCE_INVALID_ARGUMENT, -1, NULL);
    free(env);
    nothing_written(f);

    incr_envelope(f->cid, 0, "hostile", 1, &env, &len);
    expect_code(f, "Increment with seq=0", env, len, ONCE_INVALID_ARGUMENT, -1,
                NULL);
    free(env);
    nothing_written(f);

    incr_envelope(0, 0, "hostile", 1, &env, &len);
    expect_code(f, "Increment with no rpc id", env, len, ONCE_INVALID_ARGUMENT,
                -1, NULL);
    free(env);
    nothing_written(f);

    id_still_free(f, f->cid, seq);
}

/* Waits up to ms for fd to become ready for ev; returns poll's revents, or 0
 * on timeout. */
static int
wait_fd(int fd, short ev, int ms)
{
    struct pollfd p = {.fd = fd, .events = ev};
    int n = poll(&p, 1, ms);
    return n > 0 ? p.revents : 0;
}

/* A blocking AF_UNIX stream socket connected to path, or -1. */
static int
unix_connect(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd;

    if (strlen(path) >= sizeof(sa.sun_path) ||
        (fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/*
 * Sends one message of len bytes to onced over a plain AF_UNIX socket,
 * speaking nng's SP framing by hand as a REQ peer (8-byte handshake, then a
 * 0x01 byte, a big-endian 64-bit length and the body; the body starts with
 * the 4-byte REQ request id). libnng is not used because its REQ socket can
 * hang in nng_close when the peer drops a pipe in the middle of a large
 * write. Returns 1 when any reply bytes came back within ms, 0 when none did
 * (*closed tells whether onced closed the connection), -1 on a setup error.
 */
static int
send_oversized(const char *path, const uint8_t *body, size_t len, int ms,
               bool *closed)
{
    static const uint8_t hello[8] = {0, 'S', 'P', 0, 0, 0x30, 0, 0};
    uint8_t hdr[13], peer[8];
    size_t got = 0, sent = 0, total = sizeof(hdr) + len;
    int fd, rv = -1;

    *closed = false;
    if ((fd = unix_connect(path)) < 0) {
        return -1;
    }
    if (fcntl(fd, F_SETFL, O_NONBLOCK) != 0 ||
        send(fd, hello, sizeof(hello), MSG_NOSIGNAL) != sizeof(hello)) {
        goto out;
    }
    for (int i = 0; i < 100 && got < sizeof(peer); i++) {
        ssize_t n;
        if (wait_fd(fd, POLLIN, ms) == 0) {
            goto out;
        }
        if ((n = recv(fd, peer + got, sizeof(peer) - got, 0)) <= 0) {
            goto out;
        }
        got += (size_t)n;
    }
    if (got < sizeof(peer)) {
        goto out;
    }
    hdr[0] = 1;
    for (int i = 0; i < 8; i++) {
        hdr[1 + i] = (uint8_t)((uint64_t)(len + 4) >> (56 - 8 * i));
    }
    memcpy(hdr + 9, "\x80\x00\x00\x01", 4); /* REQ request id */
    for (int i = 0; i < 100000 && sent < total && !*closed; i++) {
        ssize_t n;
        if (wait_fd(fd, POLLOUT, ms) == 0) {
            break; /* onced stopped reading: dropped as well */
        }
        if (sent < sizeof(hdr)) {
            n = send(fd, hdr + sent, sizeof(hdr) - sent, MSG_NOSIGNAL);
        } else {
            n = send(fd, body + (sent - sizeof(hdr)), total - sent,
                     MSG_NOSIGNAL);
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            *closed = true; /* EPIPE / ECONNRESET */
        } else if (n > 0) {
            sent += (size_t)n;
        }
    }
    rv = 0;
    if (!*closed && (wait_fd(fd, POLLIN, ms) & (POLLIN | POLLHUP)) != 0) {
        uint8_t b[64];
        ssize_t n = recv(fd, b, sizeof(b), 0);
        if (n > 0) {
            rv = 1;
        } else {
            *closed = true;
        }
    }
out:
    close(fd);
    return rv;
}

/* Connects to path over a plain AF_UNIX socket and hangs up at once,
 * before the SP handshake, as a port scan, a health check or a client that
 * gives up a dial does. 0, or -1 when it could not connect. */
static int
hang_up_early(const char *path)
{
    int fd = unix_connect(path);

    if (fd < 0) {
        return -1;
    }
    close(fd);
    return 0;
}

/*
 * Five peers connect to onced's ipc path and hang up before the handshake.
 * One that beats onced's header write is enough to stop its listener; made
 * while onced is stopped, every one does: the kernel queues the connection
 * in the listen backlog, and onced accepts it only after the peer is gone.
 * Left to chance, a loaded machine let twenty in a row lose that race (CI,
 * under TSan).
 */
static void
hang_up_while_stopped(fixture *f)
{
    harness_pause(f->h);
    for (int i = 0; i < 5; i++) {
        if (hang_up_early(f->h->path) != 0) {
            kill(f->h->pid, SIGCONT);
            fail_msg("could not connect to %s while onced was stopped",
                     f->h->path);
        }
    }
    kill(f->h->pid, SIGCONT);
}

/*
 * Connects to path and sends a REQ peer's 8-byte SP header, then keeps the
 * connection: made right after the hang-ups, it finishes its handshake with
 * the stopped listener, which never hands it to the socket. Closing that
 * listener (the watch's restart) leaves such a connection's memory inside
 * nng 1.5.2 for good, which LeakSanitizer reports when onced exits unless
 * tests/lsan.supp names it. Returns the fd, or -1.
 */
static int
handshake_and_hold(const char *path)
{
    static const uint8_t hello[8] = {0, 'S', 'P', 0, 0, 0x30 /* REQ0 */, 0, 0};
    int fd = unix_connect(path);

    if (fd >= 0 && send(fd, hello, sizeof(hello), MSG_NOSIGNAL) !=
                       (ssize_t)sizeof(hello)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Opens a new lease-less client with a deadline of deadline_ms, reads the
 * watched counter into *v and returns how that went. */
static int
new_client_get(fixture *f, uint64_t deadline_ms, int64_t *v)
{
    once_client *c = NULL;
    once_options o;
    once_status st;
    int64_t t0 = harness_now_ms();
    int rv;

    once_options_init(&o);
    o.url = f->h->url;
    o.no_lease = true;
    o.deadline_ms = deadline_ms;
    assert_int_equal(once_client_open(&c, &o, &st), ONCE_OK);
    rv = once_counter_get(c, "hostile", v, &st);
    print_message("  a new client after the hang-ups: %s %s, %lld ms\n",
                  once_strerror(rv), st.reason,
                  (long long)(harness_now_ms() - t0));
    once_client_close(c);
    return rv;
}

/* onced's Stats listener_restarts. */
static uint64_t
listener_restarts(fixture *f)
{
    Once__V1__StatsResponse *r = NULL;
    uint64_t n;

    assert_int_equal(harness_stats_all(f->c, &r), ONCE_OK);
    n = r->listener_restarts;
    once__v1__stats_response__free_unpacked(r, NULL);
    print_message("  listener_restarts %llu\n", (unsigned long long)n);
    return n;
}

/*
 * Peers that connect to the ipc path and hang up before the handshake. nng
 * 1.5.2 then ends its ipc listener for good: later clients connect into the
 * backlog, finish their handshake and are never read
 * (server/listen_watch.h). onced must go on serving: a client opened
 * afterwards gets its call through within its 20 s deadline (the watch
 * needs up to ~5 s), and so does the client connected before. A peer that
 * finished its handshake with the stopped listener stays connected across
 * the restart, as a client did when CI's ASan run of test_crash_matrix
 * caught the leak this leaves in nng: onced must still exit cleanly under
 * LeakSanitizer, which counts everything but blocks allocated inside
 * nng_listen (tests/lsan.supp).
 */
static void
test_hang_up_before_handshake(void **state)
{
    fixture *f = *state;
    once_status st;
    int64_t v = 0;
    int held;

    hang_up_while_stopped(f);
    held = handshake_and_hold(f->h->path);
    assert_true(held >= 0);
    assert_int_equal(new_client_get(f, 20000, &v), ONCE_OK);
    close(held);
    assert_int_equal(v, START);
    /* It was the watch: the listener was started again (and Stats says so). */
    assert_true(listener_restarts(f) >= 1);
    /* The client connected before: its connection was closed with the
     * stopped listener, and it reconnects. */
    assert_int_equal(once_counter_get(f->c, "hostile", &v, &st), ONCE_OK);
    assert_int_equal(v, START);
}

/* A new lease-less client's one call (deadline deadline_ms): its code, and
 * the ms from opening it to the answer in *ms. */
static int
new_client_timed(fixture *f, uint64_t deadline_ms, int64_t *ms)
{
    once_client *c = NULL;
    once_options o;
    once_status st;
    int64_t v = 0, t0 = harness_now_ms();
    int rv;

    once_options_init(&o);
    o.url = f->h->url;
    o.no_lease = true;
    o.deadline_ms = deadline_ms;
    assert_int_equal(once_client_open(&c, &o, &st), ONCE_OK);
    rv = once_counter_get(c, "hostile", &v, &st);
    *ms = harness_now_ms() - t0;
    once_client_close(c);
    return rv == ONCE_OK && v == START ? ONCE_OK : (rv != ONCE_OK ? rv : -1);
}

#define TRICKLE 8 /* hang-ups, one per round */

/*
 * Issue 21, finding 6: a steady trickle of hang-ups, each one stopping the
 * ipc listener (made while onced is stopped, hang_up_while_stopped's way,
 * so that every one does), each followed by a new client's call. Every
 * such call answers within its 4 s deadline, and the slowest within ten
 * times the slowest quiet one (at least 2 s): the watch sees the stop in
 * nng's listener statistics and starts the listener again within a few
 * hundred ms. (With probes alone it took up to ~5 s: 1 s between probes,
 * two unanswered probes of 2 s.) The client connected before keeps being
 * served.
 */
static void
test_hang_up_trickle(void **state)
{
    fixture *f = *state;
    once_status st;
    int64_t quiet = 0, worst = 0, ms, v = 0, t0;
    int ok = 0;

    for (int i = 0; i < 3; i++) {
        assert_int_equal(new_client_timed(f, 4000, &ms), ONCE_OK);
        quiet = ms > quiet ? ms : quiet;
    }
    t0 = harness_now_ms();
    for (int i = 0; i < TRICKLE; i++) {
        int rv;

        harness_pause(f->h);
        if (hang_up_early(f->h->path) != 0) {
            kill(f->h->pid, SIGCONT);
            fail_msg("could not connect to %s", f->h->path);
        }
        kill(f->h->pid, SIGCONT);
        rv = new_client_timed(f, 4000, &ms);
        print_message("  hang-up %d: a new client's call %s after %lld ms\n", i,
                      once_strerror(rv), (long long)ms);
        ok += rv == ONCE_OK;
        worst = ms > worst ? ms : worst;
        assert_int_equal(once_counter_get(f->c, "hostile", &v, &st), ONCE_OK);
    }
    print_message("  %d hang-ups in %lld ms: %d of %d new clients answered, "
                  "slowest %lld ms (quiet slowest %lld ms)\n",
                  TRICKLE, (long long)(harness_now_ms() - t0), ok, TRICKLE,
                  (long long)worst, (long long)quiet);
    assert_true(listener_restarts(f) >= 1);
    assert_int_equal(ok, TRICKLE);
    assert_true(worst <= (10 * quiet > 2000 ? 10 * quiet : 2000));
}

/*
 * The same hang-ups with the watch off (onced --no-listen-check): the new
 * client's call is sent and never answered, so it ends DEADLINE_EXCEEDED
 * after 7 s (the watch, were it on, would have answered it within ~5 s),
 * while the client connected before is still served. This shows both that
 * the hang-ups do stop the listener (the test above would pass without
 * them stopping anything) and that --no-listen-check turns the watch off.
 * Should a later nng fix the listener, this fails and says so.
 */
static void
test_hang_up_without_watch(void **state)
{
    fixture *f = *state;
    once_status st;
    uint64_t restarts;
    int64_t v = 0;
    int rv;

    hang_up_while_stopped(f);
    rv = new_client_get(f, 7000, &v);
    restarts = listener_restarts(f);
    if (restarts != 0) {
        print_error("the watch restarted the listener under "
                    "--no-listen-check\n");
    } else if (rv == ONCE_OK) {
        print_error("a client got through a listener stopped by hang-ups: "
                    "if nng no longer stops it, listen_watch.c is not "
                    "needed\n");
    }
    assert_int_equal(restarts, 0);
    assert_int_equal(rv, ONCE_DEADLINE_EXCEEDED);
    assert_int_equal(once_counter_get(f->c, "hostile", &v, &st), ONCE_OK);
    assert_int_equal(v, START);
}

/*
 * Through libonce, a request larger than onced's --recv-max (which the
 * OpenLease reply tells) is refused before it is sent:
 * INVALID_ARGUMENT/REQUEST_TOO_LARGE at once, no attempt, nothing written,
 * rather than dropped by onced's transport and OUTCOME_UNKNOWN after the
 * whole deadline. The handle goes on working.
 */
static void
test_oversized_call_refused_by_libonce(void **state)
{
    fixture *f = *state;
    const size_t big = (size_t)2 << 20; /* onced's default limit is 1 MiB */
    once_client *c = NULL;
    uint8_t *payload;
    once_status st;
    int64_t v, t0;
    int rv;

    assert_int_equal(harness_client(f->h, false, &c), ONCE_OK);
    assert_non_null(payload = calloc(1, big));
    mark(f);
    t0 = harness_now_ms();
    rv = once_call(c, INCREMENT, true, NULL, payload, big, NULL, NULL, &st);
    free(payload);
    print_message("%-36s -> %s %s (%s), %lld ms\n", "2 MiB call via libonce",
                  once_strerror(rv), st.reason, st.message,
                  (long long)(harness_now_ms() - t0));
    assert_int_equal(rv, ONCE_INVALID_ARGUMENT);
    assert_string_equal(st.reason, "REQUEST_TOO_LARGE");
    assert_int_equal(st.attempts, 0);
    nothing_written(f);
    assert_int_equal(once_counter_incr(c, "hostile-after", 1, NULL, &v, &st),
                     ONCE_OK);
    assert_int_equal(v, 1);
    once_client_close(c);
}

/*
 * A call whose deadline (timeout_ms) passes while it waits in onced is
 * refused DEADLINE_EXCEEDED when its turn comes, before it runs: nothing
 * is written and its rpc id stays free, so a call under that id with time
 * to spare then runs once. onced holds every call with a deadline 300 ms
 * here (fx_setup_held).
 */
static void
test_deadline_passed_in_queue(void **state)
{
    fixture *f = *state;
    Once__V1__Request r = ONCE__V1__REQUEST__INIT;
    Once__V1__IncrementRequest in = ONCE__V1__INCREMENT_REQUEST__INIT;
    Once__V1__Response *resp = NULL;
    uint64_t seq = f->seq++;
    uint8_t p[64], b[256];
    once_status st;
    int64_t v;
    size_t len;

    in.name = "hostile";
    in.by = 1;
    r.method = INCREMENT;
    r.client_id = f->cid;
    r.seq = seq;
    r.payload.data = p;
    r.payload.len = once__v1__increment_request__pack(&in, p);
    r.timeout_ms = 100;
    len = once__v1__request__pack(&r, b);
    mark(f);
    assert_int_equal(harness_raw_rpc(f->h->url, b, len, &resp, REPLY_MS), 0);
    print_message("%-36s -> %s reason=\"%s\"\n", "100 ms deadline, 300 ms wait",
                  once_strerror(resp->status->code), resp->status->reason);
    assert_int_equal(resp->status->code, ONCE_DEADLINE_EXCEEDED);
    assert_string_equal(resp->status->reason, "DEADLINE_EXCEEDED");
    once__v1__response__free_unpacked(resp, NULL);
    nothing_written(f);
    assert_int_equal(once_counter_get(f->c, "hostile", &v, &st), ONCE_OK);
    assert_int_equal(v, START);
    id_still_free(f, f->cid, seq); /* libonce: time to spare, runs once */
}

static void
test_oversized_message(void **state)
{
    fixture *f = *state;
    const size_t big = (size_t)8 << 20;
    uint64_t seq = f->seq++;
    uint8_t *env;
    size_t len;
    char *name;
    bool closed;
    int rv;

    /* A well-formed Increment whose name alone is 8 MiB. */
    assert_non_null(name = malloc(big + 1));
    memset(name, 'x', big);
    name[big] = '\0';
    incr_envelope(f->cid, seq, name, 1, &env, &len);
    free(name);
    assert_true(len > big);

    /* Control: the hand-made framing does get a reply for a small call. */
    {
        uint8_t *small;
        size_t slen;
        assert_int_equal(harness_envelope("/once.v1.Admin/Stats", 0, 0, NULL, 0,
                                          &small, &slen),
                         0);
        rv = send_oversized(f->h->path, small, slen, 2000, &closed);
        free(small);
        assert_int_equal(rv, 1);
    }

    mark(f);
    rv = send_oversized(f->h->path, env, len, 2000, &closed);
    free(env);
    print_message("%-36s -> %s\n", "8 MiB Increment",
                  rv == 1   ? "a reply"
                  : rv != 0 ? "could not send"
                  : closed  ? "no reply, connection closed"
                            : "no reply");
    if (rv == 1) {
        /* onced must drop it at the transport (NNG_OPT_RECVMAXSZ). */
        print_error("onced answered an 8 MiB message: its receive limit is "
                    "not set\n");
    }
    assert_int_equal(rv, 0);
    nothing_written(f);
    id_still_free(f, f->cid, seq);
}

static void
test_empty_name_and_zero_by(void **state)
{
    fixture *f = *state;
    uint64_t seq = f->seq++;
    uint8_t *env;
    size_t len;

    mark(f);
    incr_envelope(f->cid, seq, "", 1, &env, &len);
    expect_code(f, "Increment of an empty name", env, len,
                ONCE_INVALID_ARGUMENT, -1, NULL);
    free(env);
    nothing_written(f);

    incr_envelope(f->cid, seq, "hostile", 0, &env, &len);
    expect_code(f, "Increment by 0", env, len, ONCE_INVALID_ARGUMENT, -1, NULL);
    free(env);
    nothing_written(f);

    id_still_free(f, f->cid, seq);
}

static void
test_unissued_client_id(void **state)
{
    fixture *f = *state;
    /* Client ids are allocated monotonically: this one was never issued. */
    uint64_t ghost = f->cid + 1000000;
    uint8_t *env;
    size_t len;
    once_rpc_id id = {ghost, 1};
    once_status st;
    int64_t v;

    mark(f);
    incr_envelope(ghost, 1, "hostile", 1, &env, &len);
    expect_code(f, "Increment from a never-issued client", env, len,
                ONCE_FAILED_PRECONDITION, -1, "LEASE_EXPIRED");
    free(env);
    nothing_written(f);

    /* Through libonce the same id gets the same answer, never executed. */
    assert_int_equal(once_counter_incr(f->c, "hostile", 1, &id, &v, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "LEASE_EXPIRED");
    nothing_written(f);
}

/* ---- hand-built protobuf: lengths, types and repeats that lie ---------- */

/* Appends a varint; returns the new length. */
static size_t
pb_varint(uint8_t *b, size_t n, uint64_t v)
{
    while (v >= 0x80) {
        b[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (uint8_t)v;
    return n;
}

/* Appends field `field` as length-delimited bytes. */
static size_t
pb_bytes(uint8_t *b, size_t n, unsigned field, const void *p, size_t len)
{
    n = pb_varint(b, n, (uint64_t)field << 3 | 2);
    n = pb_varint(b, n, len);
    memcpy(b + n, p, len);
    return n + len;
}

/* Appends field `field` as a varint. */
static size_t
pb_uint(uint8_t *b, size_t n, unsigned field, uint64_t v)
{
    n = pb_varint(b, n, (uint64_t)field << 3 | 0);
    return pb_varint(b, n, v);
}

/* An envelope: method, client_id, seq, then payload field 10 as given. */
static size_t
pb_envelope(uint8_t *b, uint64_t cid, uint64_t seq, const void *payload,
            size_t plen)
{
    size_t n = pb_bytes(b, 0, 1, INCREMENT, strlen(INCREMENT));
    n = pb_uint(b, n, 2, cid);
    n = pb_uint(b, n, 3, seq);
    return pb_bytes(b, n, 10, payload, plen);
}

/* Lengths that claim far more than the message holds, in the envelope and
 * inside the payload. */
static void
test_huge_declared_lengths(void **state)
{
    fixture *f = *state;
    uint64_t seq = f->seq++;
    uint8_t b[256], pl[64];
    size_t n, plen;

    mark(f);
    /* payload (field 10) says 2^62 bytes follow; 3 do. */
    n = pb_bytes(b, 0, 1, INCREMENT, strlen(INCREMENT));
    n = pb_uint(b, n, 2, f->cid);
    n = pb_uint(b, n, 3, seq);
    n = pb_varint(b, n, 10 << 3 | 2);
    n = pb_varint(b, n, (uint64_t)1 << 62);
    memcpy(b + n, "abc", 3);
    expect_code(f, "envelope field length 2^62", b, n + 3,
                ONCE_INVALID_ARGUMENT, -1, "MALFORMED_ENVELOPE");
    nothing_written(f);

    /* method (field 1) says UINT64_MAX bytes. */
    n = pb_varint(b, 0, 1 << 3 | 2);
    n = pb_varint(b, n, UINT64_MAX);
    expect_code(f, "method length UINT64_MAX", b, n, ONCE_INVALID_ARGUMENT, -1,
                "MALFORMED_ENVELOPE");
    nothing_written(f);

    /* Inside a well-formed envelope, the name says 1 GiB. */
    plen = pb_varint(pl, 0, 1 << 3 | 2);
    plen = pb_varint(pl, plen, (uint64_t)1 << 30);
    memcpy(pl + plen, "hostile", 7);
    n = pb_envelope(b, f->cid, seq, pl, plen + 7);
    expect_code(f, "payload name length 1 GiB", b, n, ONCE_INVALID_ARGUMENT, -1,
                "MALFORMED_PAYLOAD");
    nothing_written(f);
    id_still_free(f, f->cid, seq);
}

/* A field sent with another wire type than its declaration. */
static void
test_wrong_field_types(void **state)
{
    fixture *f = *state;
    uint64_t seq = f->seq++;
    uint8_t b[256], pl[64];
    size_t n, plen;

    mark(f);
    /* method as a varint. */
    n = pb_uint(b, 0, 1, 42);
    n = pb_uint(b, n, 2, f->cid);
    n = pb_uint(b, n, 3, seq);
    expect_code(f, "method sent as a varint", b, n, ONCE_INVALID_ARGUMENT,
                ONCE_UNIMPLEMENTED, NULL);
    nothing_written(f);

    /* seq as bytes. */
    n = pb_bytes(b, 0, 1, INCREMENT, strlen(INCREMENT));
    n = pb_uint(b, n, 2, f->cid);
    n = pb_bytes(b, n, 3, "\x05", 1);
    expect_code(f, "seq sent as bytes", b, n, ONCE_INVALID_ARGUMENT, -1, NULL);
    nothing_written(f);

    /* Payload: name as a varint, by as bytes. */
    plen = pb_uint(pl, 0, 1, 7);
    plen = pb_uint(pl, plen, 2, 1);
    n = pb_envelope(b, f->cid, seq, pl, plen);
    expect_code(f, "payload name sent as a varint", b, n, ONCE_INVALID_ARGUMENT,
                -1, NULL);
    nothing_written(f);
    plen = pb_bytes(pl, 0, 1, "hostile", 7);
    plen = pb_bytes(pl, plen, 2, "\x01", 1);
    n = pb_envelope(b, f->cid, seq, pl, plen);
    expect_code(f, "payload by sent as bytes", b, n, ONCE_INVALID_ARGUMENT, -1,
                NULL);
    nothing_written(f);
    id_still_free(f, f->cid, seq);
}

/*
 * A singular field sent twice: protobuf's rule is that the last one counts,
 * and onced follows it — so a repeat that ends on a bad value is refused
 * like that value, and one that ends on a good value is that call.
 */
static void
test_repeated_singular_fields(void **state)
{
    fixture *f = *state;
    uint64_t seq = f->seq++;
    uint8_t b[256], pl[64];
    size_t n, plen;

    mark(f);
    /* seq=5 then seq=0: no rpc id. */
    n = pb_bytes(b, 0, 1, INCREMENT, strlen(INCREMENT));
    n = pb_uint(b, n, 2, f->cid);
    n = pb_uint(b, n, 3, seq);
    n = pb_uint(b, n, 3, 0);
    plen = pb_bytes(pl, 0, 1, "hostile", 7);
    plen = pb_uint(pl, plen, 2, 1);
    n = pb_bytes(b, n, 10, pl, plen);
    expect_code(f, "seq twice, the last 0", b, n, ONCE_INVALID_ARGUMENT, -1,
                "MISSING_RPC_ID");
    nothing_written(f);

    /* name "hostile" then "": the empty name. */
    plen = pb_bytes(pl, 0, 1, "hostile", 7);
    plen = pb_bytes(pl, plen, 1, "", 0);
    plen = pb_uint(pl, plen, 2, 1);
    n = pb_envelope(b, f->cid, seq, pl, plen);
    expect_code(f, "name twice, the last empty", b, n, ONCE_INVALID_ARGUMENT,
                -1, "BAD_NAME");
    nothing_written(f);

    /* method Get then an unknown one: the unknown one. */
    n = pb_bytes(b, 0, 1, "/once.v1.Counter/Get", 20);
    n = pb_bytes(b, n, 1, "/once.v1.Nope/X", 15);
    expect_code(f, "method twice, the last unknown", b, n, ONCE_UNIMPLEMENTED,
                -1, "UNKNOWN_METHOD");
    nothing_written(f);
    id_still_free(f, f->cid, seq);
}

/* Zero, negative and overflowing numbers. */
static void
test_extreme_numbers(void **state)
{
    fixture *f = *state;
    uint64_t seq = f->seq++;
    uint8_t *env;
    size_t len;
    once_rpc_id id;
    once_status st;
    int64_t v = -1;
    Once__V1__Request r = ONCE__V1__REQUEST__INIT;
    uint8_t *p, b[512];
    size_t plen;

    /* seq at UINT64_MAX: far past the window, refused before execution. */
    mark(f);
    incr_envelope(f->cid, UINT64_MAX, "hostile", 1, &env, &len);
    expect_code(f, "Increment with seq=UINT64_MAX", env, len,
                ONCE_RESOURCE_EXHAUSTED, -1, "WINDOW_FULL");
    free(env);
    nothing_written(f);

    /* client id UINT64_MAX: never issued. */
    incr_envelope(UINT64_MAX, 1, "hostile", 1, &env, &len);
    expect_code(f, "Increment from client UINT64_MAX", env, len,
                ONCE_FAILED_PRECONDITION, -1, "LEASE_EXPIRED");
    free(env);
    nothing_written(f);

    /* first_incomplete above the call's own seq, at UINT64_MAX. */
    assert_int_equal(harness_incr_payload("hostile", 1, &p, &plen), 0);
    r.method = INCREMENT;
    r.client_id = f->cid;
    r.seq = seq;
    r.first_incomplete = UINT64_MAX;
    r.payload.data = p;
    r.payload.len = plen;
    len = once__v1__request__pack(&r, b);
    expect_code(f, "first_incomplete=UINT64_MAX", b, len, ONCE_INVALID_ARGUMENT,
                -1, "BAD_ACK");
    nothing_written(f);

    /* A deadline of UINT64_MAX ms is "no hurry", not "already passed". */
    r.first_incomplete = 0;
    r.timeout_ms = UINT64_MAX;
    len = once__v1__request__pack(&r, b);
    {
        Once__V1__Response *resp = NULL;
        assert_int_equal(harness_raw_rpc(f->h->url, b, len, &resp, REPLY_MS),
                         0);
        assert_non_null(resp->status);
        print_message("%-36s -> %s reason=\"%s\"\n", "timeout_ms=UINT64_MAX",
                      once_strerror(resp->status->code), resp->status->reason);
        assert_int_equal(resp->status->code, ONCE_OK);
        once__v1__response__free_unpacked(resp, NULL);
    }
    free(p);
    assert_int_equal(once_counter_get(f->c, "hostile", &v, &st), ONCE_OK);
    assert_int_equal(v, START + 1);

    /* Increments that overflow int64 are executed and refused: the
     * outcome (OUT_OF_RANGE) is the call's recorded result, the counter
     * does not move, and a retry replays the refusal. */
    id = (once_rpc_id){f->cid, f->seq++};
    assert_int_equal(
        once_counter_incr(f->c, "hostile", INT64_MAX, &id, &v, &st),
        ONCE_OUT_OF_RANGE);
    assert_string_equal(st.reason, "COUNTER_OVERFLOW");
    assert_int_equal(
        once_counter_incr(f->c, "hostile", INT64_MAX, &id, &v, &st),
        ONCE_OUT_OF_RANGE);
    assert_true(st.replayed);
    id = (once_rpc_id){f->cid, f->seq++};
    assert_int_equal(
        once_counter_incr(f->c, "hostile", INT64_MIN, &id, &v, &st), ONCE_OK);
    assert_int_equal(v, (int64_t)START + 1 + INT64_MIN);
    id = (once_rpc_id){f->cid, f->seq++};
    assert_int_equal(
        once_counter_incr(f->c, "hostile", INT64_MIN, &id, &v, &st),
        ONCE_OUT_OF_RANGE);
    assert_int_equal(once_counter_get(f->c, "hostile", &v, &st), ONCE_OK);
    assert_int_equal(v, (int64_t)START + 1 + INT64_MIN);
}

/* Names longer than anything onced keeps. */
static void
test_overlong_names(void **state)
{
    fixture *f = *state;
    uint64_t seq = f->seq++;
    char name[300], *method;
    uint8_t *env;
    size_t len;
    uint8_t *p;
    size_t plen;

    mark(f);
    memset(name, 'n', 257);
    name[257] = '\0';
    incr_envelope(f->cid, seq, name, 1, &env, &len);
    expect_code(f, "Increment of a 257-byte name", env, len,
                ONCE_INVALID_ARGUMENT, -1, "BAD_NAME");
    free(env);
    nothing_written(f);

    assert_non_null(method = malloc(64 * 1024));
    memset(method, 'm', 64 * 1024 - 1);
    method[64 * 1024 - 1] = '\0';
    assert_int_equal(harness_incr_payload("hostile", 1, &p, &plen), 0);
    assert_int_equal(harness_envelope(method, f->cid, seq, p, plen, &env, &len),
                     0);
    expect_code(f, "a 64 KiB method name", env, len, ONCE_UNIMPLEMENTED, -1,
                "UNKNOWN_METHOD");
    free(env);
    free(p);
    free(method);
    nothing_written(f);
    id_still_free(f, f->cid, seq);
}

/* Enum fields carry numbers the schema does not name (proto3 keeps them as
 * plain integers on decode): a FinishGrant outcome of 99 or -1 is refused
 * before anything runs. */
static void
test_unknown_enum_values(void **state)
{
    fixture *f = *state;
    const int64_t bad[] = {99, -1, 0};
    uint64_t seq = f->seq++;

    mark(f);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        Once__V1__FinishGrantRequest req = ONCE__V1__FINISH_GRANT_REQUEST__INIT;
        uint8_t payload[64];
        uint8_t *env;
        size_t plen, len;
        char what[64];

        req.grant_id = 1;
        req.outcome = (Once__V1__GrantOutcome)bad[i];
        plen = once__v1__finish_grant_request__pack(&req, payload);
        assert_int_equal(harness_envelope("/once.v1.Grants/FinishGrant", f->cid,
                                          seq, payload, plen, &env, &len),
                         0);
        snprintf(what, sizeof(what), "FinishGrant outcome %lld",
                 (long long)bad[i]);
        expect_code(f, what, env, len, ONCE_INVALID_ARGUMENT, -1, NULL);
        free(env);
        nothing_written(f);
    }
    id_still_free(f, f->cid, seq);
}

int
main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_garbage_bytes),
        T(test_truncated_envelope),
        T(test_bad_payload),
        T(test_unknown_method),
        T(test_missing_rpc_id),
        T(test_oversized_message),
        T(test_empty_name_and_zero_by),
        T(test_unissued_client_id),
        T(test_huge_declared_lengths),
        T(test_wrong_field_types),
        T(test_repeated_singular_fields),
        T(test_extreme_numbers),
        T(test_overlong_names),
        T(test_unknown_enum_values),
        cmocka_unit_test_setup_teardown(test_oversized_call_refused_by_libonce,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_deadline_passed_in_queue,
                                        fx_setup_held, fx_teardown),
        cmocka_unit_test_setup_teardown(test_hang_up_before_handshake, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_hang_up_trickle, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_hang_up_without_watch,
                                        fx_setup_no_watch, fx_teardown),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
