/*
 * test_hostile.c — malformed and hostile input against a real onced
 * (SPEC §2: nothing that fails before execution writes anything).
 *
 * Owns: raw nng REQ sends of garbage, truncated envelopes, bad payloads,
 * unknown methods, missing rpc ids, an oversized message, an empty counter
 * name, a zero increment and a never-issued client id. Each must get its
 * status code (decoded from the Response envelope), write nothing (Stats
 * commits and records_stored unchanged, the counter unchanged, and the rpc
 * id it used still free for a real call), and leave onced serving.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <nng/nng.h>

#include "harness.h"

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

static int
fx_setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    once_status st;
    once_rpc_id id;
    uint64_t ttl;
    int64_t v;

    if (f == NULL || harness_start(&f->h) != 0) {
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
                sizeof(bad_wiretype), ONCE_INVALID_ARGUMENT, -1, NULL);
    nothing_written(f);
    expect_code(f, "garbage: endless varint", bad_varint, sizeof(bad_varint),
                ONCE_INVALID_ARGUMENT, -1, NULL);
    nothing_written(f);
    expect_code(f, "garbage: length past the end", overlong_len,
                sizeof(overlong_len), ONCE_INVALID_ARGUMENT, -1, NULL);
    nothing_written(f);
    expect_code(f, "garbage: HTTP request", text, strlen(text),
                ONCE_INVALID_ARGUMENT, -1, NULL);
    nothing_written(f);
    /* Zero bytes decode as an empty Request: no method. */
    expect_code(f, "garbage: empty message", "", 0, ONCE_INVALID_ARGUMENT,
                ONCE_UNIMPLEMENTED, NULL);
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
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    uint8_t hdr[13], peer[8];
    size_t got = 0, sent = 0, total = sizeof(hdr) + len;
    int fd, rv = -1;

    *closed = false;
    if (strlen(path) >= sizeof(sa.sun_path) ||
        (fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        fcntl(fd, F_SETFL, O_NONBLOCK) != 0 ||
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
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
