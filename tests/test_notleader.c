/*
 * test_notleader.c — a follower's NOT_LEADER responder (repl/notleader.c)
 * in this process: its refusal and hint (decoded: the leader's URL in
 * Status.leader, and still in the message for older clients), and opening and
 * closing it again and again, as a replica does at every role change and on
 * SIGTERM while following.
 *
 * Owns: a temp dir with the ipc path.
 * Invariant: every loop is bounded in count and time.
 * Never: starts etcd or onced (test_replication does).
 */
#include <errno.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "proto/once.pb-c.h"
#include "repl/repl_impl.h"
#include "tests/etcd_procs.h"
#include "tests/sys_helpers.h"

/* Open/close cycles of the responder. */
#define NL_CYCLES 300

typedef struct nl_fixture {
    char dir[128];
    char url[256];
} nl_fixture;

/* One request to url, the reply's bytes into buf (at most cap). The reply
 * length, or -1 when none came within 2 s. */
static int
nl_ask(const char *url, char *buf, size_t cap)
{
    nng_socket s;
    nng_msg *m = NULL;
    int n = -1;

    if (nng_req0_open(&s) != 0) {
        return -1;
    }
    nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 2000);
    if (nng_dial(s, url, NULL, 0) == 0 && nng_send(s, "x", 1, 0) == 0 &&
        nng_recvmsg(s, &m, 0) == 0) {
        n = (int)nng_msg_len(m) < (int)cap ? (int)nng_msg_len(m) : (int)cap;
        memcpy(buf, nng_msg_body(m), (size_t)n);
        nng_msg_free(m);
    }
    nng_close(s);
    return n;
}

static bool
nl_has(const char *buf, int n, const char *text)
{
    size_t tl = strlen(text);

    for (int i = 0; i + (int)tl <= n; i++) {
        if (memcmp(buf + i, text, tl) == 0) {
            return true;
        }
    }
    return false;
}

static int
setup(void **state)
{
    nl_fixture *f = calloc(1, sizeof(*f));

    snprintf(f->dir, sizeof(f->dir), "/tmp/once-nl-XXXXXX");
    if (mkdtemp(f->dir) == NULL) {
        free(f);
        return -1;
    }
    snprintf(f->url, sizeof(f->url), "ipc://%s/r.ipc", f->dir);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    nl_fixture *f = *state;

    sys_rm_tree(f->dir);
    free(f);
    return 0;
}

/* Decodes a refusal and checks it: UNAVAILABLE, reason, and the leader's
 * URL in Status.leader ("" for none), the field libonce steers by. The
 * message still names the URL too, for a libonce older than the field. */
static void
nl_expect(const char *buf, int n, const char *reason, const char *leader)
{
    Once__V1__Response *r =
        once__v1__response__unpack(NULL, (size_t)n, (const uint8_t *)buf);

    assert_non_null(r);
    assert_non_null(r->status);
    assert_int_equal(r->status->code, ONCE__V1__CODE__UNAVAILABLE);
    assert_string_equal(r->status->reason, reason);
    assert_string_equal(r->status->leader, leader);
    if (leader[0] != '\0') {
        assert_non_null(strstr(r->status->message, leader));
    }
    assert_false(r->replayed);
    assert_int_equal(r->payload.len, 0);
    once__v1__response__free_unpacked(r, NULL);
}

/* Every request is refused UNAVAILABLE with the hint that was set last. */
static void
test_refusal_and_hint(void **state)
{
    nl_fixture *f = *state;
    const char *urls[1] = {f->url};
    notleader *nl = NULL;
    char buf[1024];
    int n;

    assert_int_equal(notleader_open(&nl, urls, 1, NULL, NULL, NULL), 0);
    n = nl_ask(f->url, buf, sizeof(buf));
    assert_true(n > 0);
    assert_true(nl_has(buf, n, "NO_LEADER"));
    nl_expect(buf, n, "NO_LEADER", "");

    notleader_set(nl, "tcp://10.0.0.9:7400", NULL);
    n = nl_ask(f->url, buf, sizeof(buf));
    assert_true(n > 0);
    assert_true(nl_has(buf, n, "NOT_LEADER"));
    assert_true(nl_has(buf, n, "tcp://10.0.0.9:7400"));
    nl_expect(buf, n, "NOT_LEADER", "tcp://10.0.0.9:7400");

    notleader_set(nl, NULL, "ETCD_UNAVAILABLE");
    n = nl_ask(f->url, buf, sizeof(buf));
    assert_true(n > 0);
    assert_true(nl_has(buf, n, "ETCD_UNAVAILABLE"));
    nl_expect(buf, n, "ETCD_UNAVAILABLE", "");
    notleader_close(nl);
}

/*
 * The responder opened and closed NL_CYCLES times on one ipc path, each
 * close after a different delay (0..4 ms), so the close meets the
 * responder's contexts in every state. The process must survive: an
 * operation with a timeout still pending at nng_close lets nng 1.5.2's
 * expire thread cancel it on a socket being destroyed, which aborts the
 * process (the responder once received in a thread with a 100 ms timeout;
 * that code with a 1 ms timeout aborted here within its first cycles; the
 * contexts' aios are now stopped before the close, notleader.c).
 *
 * No client dials during the cycles: with a client process redialling
 * every few milliseconds, nng 1.5.2's nng_close of the responder hung
 * (waiting for its pipes) in most runs, with or without the timeout —
 * a separate hang, docs/replication.md "Known issues".
 */
static void
test_close_cycles(void **state)
{
    nl_fixture *f = *state;
    const char *urls[1] = {f->url};
    int64_t end = procs_now_ms() + 120000;

    for (int c = 0; c < NL_CYCLES && procs_now_ms() < end; c++) {
        notleader *nl = NULL;
        struct timespec ts = {0, (long)(c % 5) * 1000000L};

        assert_int_equal(notleader_open(&nl, urls, 1, NULL, NULL, NULL), 0);
        nanosleep(&ts, NULL);
        notleader_close(nl);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_refusal_and_hint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_cycles, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
