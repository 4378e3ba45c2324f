/*
 * test_slow_peer.c — a client that never reads its replies cannot stop
 * onced (issue 12, item 1).
 *
 * Owns: a hostile peer — an nng raw REQ socket (xreq0) that sends unsigned
 * requests back to back and never calls receive, so once its socket buffers
 * are full onced's replies to it queue up — over ipc://, tcp:// and
 * tls+tcp://, and the checks made while it is attached: signed calls of
 * another client over every transport keep their latency (within a generous
 * bound, not a tight one), Stats says the peer was held to --conn-inflight
 * (proof the adversity happened) and its connection was closed after
 * --send-timeout; SIGTERM ends onced cleanly, with the peer attached or
 * gone, and every acknowledged call is there after a restart.
 * Invariant: every loop is bounded in count and time; the peer thread only
 * touches atomics and its own socket.
 * Never: asserts from the peer thread; relies on a fixed sleep to decide.
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/tls/tls.h>

#include <once/kv.h>

#include "proto/auth_tag.h"
#include "proto/kv.pb-c.h"
#include "tests/certs.h"
#include "tests/harness.h"

#define PEER_MAX_SENDS 3000000 /* bound of the flood, in requests */
#define PEER_MAX_MS    120000  /* and in time */
#define STUCK_WAIT_MS  120000  /* how long the peer may take to get stuck */
#define STALL_MS                                                               \
    2000         /* a peer that could not send this long is                    \
                    stuck (onced stopped reading from it) */
#define CALLS 10 /* signed calls per transport, per phase */

/* ---- certificates (tls+tcp://), made with the openssl CLI ---------------- */

static char cert_dir[64], ca_pem[128], cert_pem[128], key_pem[128];

static int
make_certs(void **state)
{
    (void)state;
    snprintf(cert_dir, sizeof(cert_dir), "/tmp/once-slow-XXXXXX");
    if (mkdtemp(cert_dir) == NULL) {
        return -1;
    }
    snprintf(ca_pem, sizeof(ca_pem), "%s/ca.pem", cert_dir);
    snprintf(cert_pem, sizeof(cert_pem), "%s/server.pem", cert_dir);
    snprintf(key_pem, sizeof(key_pem), "%s/server.key", cert_dir);
    return certs_make(cert_dir);
}

static int
remove_certs(void **state)
{
    char cmd[128];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", cert_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ---- the peer that never reads --------------------------------------------
 */

/*
 * LeakSanitizer (make asan), in this test process only: nng 1.5.2 does not
 * free a message it accepted from the peer socket when the socket closes
 * while the message waits on a connection onced has closed but the peer
 * never noticed (it does not read, so over tls+tcp:// it never learns of
 * the close). Only messages the peer thread allocated are matched; onced
 * runs under its own sanitizer and nothing of it is suppressed.
 */
__attribute__((used)) const char *
__lsan_default_suppressions(void)
{
    return "leak:peer_main\n";
}

typedef struct peer {
    nng_socket sock;
    nng_tls_config *tls;
    pthread_t thread;
    uint8_t *body; /* an unsigned Admin.Stats envelope */
    size_t body_len;
    _Atomic bool stop;
    _Atomic uint64_t sent;
    _Atomic int64_t last_sent_ms; /* harness_now_ms() of the last send */
    _Atomic uint64_t pipes_lost;  /* connections onced closed */
    bool halted;                  /* peer_halt joined the thread */
} peer;

static void
peer_pipe_lost(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    peer *pr = arg;

    (void)p;
    (void)ev;
    atomic_fetch_add(&pr->pipes_lost, 1);
}

/* Sends request after request, each with its own request id, and never
 * receives; a send that cannot go out within 100 ms is counted as a stall
 * (the time since the last send grows). */
static void *
peer_main(void *arg)
{
    peer *pr = arg;
    int64_t end = harness_now_ms() + PEER_MAX_MS;

    for (uint32_t n = 1; n <= PEER_MAX_SENDS && !atomic_load(&pr->stop) &&
                         harness_now_ms() < end;
         n++) {
        nng_msg *m;

        if (nng_msg_alloc(&m, 0) != 0) {
            break;
        }
        if (nng_msg_header_append_u32(m, 0x80000000u | n) != 0 ||
            nng_msg_append(m, pr->body, pr->body_len) != 0) {
            nng_msg_free(m);
            break;
        }
        if (nng_sendmsg(pr->sock, m, 0) != 0) {
            nng_msg_free(m);
            continue;
        }
        atomic_fetch_add(&pr->sent, 1);
        atomic_store(&pr->last_sent_ms, harness_now_ms());
    }
    return NULL;
}

/* Dials url (tls+tcp:// with the test CA) and starts flooding read
 * requests of method with payload (no rpc id), signed as principal signer
 * of h when signer is not NULL. */
static peer *
peer_start_read(const char *url, const harness *h, const char *signer,
                const char *method, const void *payload, size_t len)
{
    peer *pr = calloc(1, sizeof(*pr));
    nng_dialer d;
    uint8_t *b;

    assert_non_null(pr);
    assert_int_equal(
        harness_envelope(method, 0, 0, payload, len, &pr->body, &pr->body_len),
        0);
    if (signer != NULL) { /* the same request, as signer */
        Once__V1__Request *r =
            once__v1__request__unpack(NULL, pr->body_len, pr->body);
        char *own;

        assert_non_null(r);
        own = r->principal;
        r->principal = (char *)signer;
        pr->body_len = once__v1__request__get_packed_size(r);
        assert_non_null(b = malloc(pr->body_len + AUTH_TAG_TRAILER));
        once__v1__request__pack(r, b);
        r->principal = own;
        once__v1__request__free_unpacked(r, NULL);
        free(pr->body);
        pr->body = b;
        pr->body_len = harness_sign(h, signer, b, pr->body_len);
    }
    assert_int_equal(nng_req0_open_raw(&pr->sock), 0);
    assert_int_equal(nng_socket_set_ms(pr->sock, NNG_OPT_SENDTIMEO, 100), 0);
    assert_int_equal(
        nng_pipe_notify(pr->sock, NNG_PIPE_EV_REM_POST, peer_pipe_lost, pr), 0);
    assert_int_equal(nng_dialer_create(&d, pr->sock, url), 0);
    if (strncmp(url, "tls+", 4) == 0) {
        assert_int_equal(nng_tls_config_alloc(&pr->tls, NNG_TLS_MODE_CLIENT),
                         0);
        assert_int_equal(nng_tls_config_ca_file(pr->tls, ca_pem), 0);
        assert_int_equal(nng_tls_config_server_name(pr->tls, "localhost"), 0);
        assert_int_equal(nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, pr->tls), 0);
    }
    assert_int_equal(nng_dialer_start(d, 0), 0);
    atomic_store(&pr->last_sent_ms, harness_now_ms());
    assert_int_equal(pthread_create(&pr->thread, NULL, peer_main, pr), 0);
    return pr;
}

/* A peer flooding Admin.Stats requests (small replies). */
static peer *
peer_start_as(const char *url, const harness *h, const char *signer)
{
    return peer_start_read(url, h, signer, "/once.v1.Admin/Stats", NULL, 0);
}

/* Stops the flood and hangs up. nng 1.5.2's nng_close can wait for good
 * on a pipe onced has dropped (an ASan CI-like run hit the ctest timeout in
 * t_sigterm_peer_gone): the close runs on a thread of its own, waited for
 * at most 10 s; past that the socket is left to the process exit. */
/* Ends the flood; the socket stays open (its connections too). */
static void
peer_halt(peer *pr)
{
    if (!pr->halted) {
        atomic_store(&pr->stop, true);
        pthread_join(pr->thread, NULL);
        pr->halted = true;
    }
}

static void
peer_stop(peer *pr)
{
    if (pr == NULL) {
        return;
    }
    peer_halt(pr);
    if (!harness_close_bounded(pr->sock, "the peer", 10000)) {
        return; /* pr and the TLS config stay: the closer uses them */
    }
    if (pr->tls != NULL) {
        nng_tls_config_free(pr->tls);
    }
    free(pr->body);
    free(pr);
}

/* ---- onced and its well-behaved clients -----------------------------------
 */

typedef struct fixture {
    harness *h;
    char tcp[64], tls[64];
    once_client *c[3]; /* ipc, tcp, tls+tcp: signing as "alice" */
    const char *name[3];
} fixture;

static const char *fx_urls[3];

static int
open_as_alice(const fixture *f, const char *url, once_client **cp)
{
    once_options o;
    once_security sec;
    once_status st;
    char kp[512];
    int rc;

    snprintf(kp, sizeof(kp), "%s/alice.key", f->h->dir);
    once_options_init(&o);
    once_security_init(&sec);
    o.url = url;
    o.lease_ttl_ms = 120000;
    /* generous: a TLS handshake with a valgrinded onced on a loaded
     * machine; latency is asserted on its own (calls) */
    o.deadline_ms = 60000;
    o.attempt_timeout_ms = 20000;
    o.max_attempts = 3;
    sec.key_file = kp;
    if (strncmp(url, "tls+", 4) == 0) {
        sec.tls_ca_file = ca_pem;
        sec.tls_server_name = "localhost";
    }
    rc = once_client_open_secure(cp, &o, &sec, &st);
    if (rc != ONCE_OK) {
        print_error("  open %s: code %d %s (%s)\n", url, rc, st.reason,
                    st.message);
    }
    return rc;
}

/* Waits (bounded) until onced has read the principals file: an unsigned
 * request is refused UNAUTHENTICATED. */
static bool
wait_auth_on(const harness *h)
{
    uint8_t *req;
    size_t len;
    bool on = false;

    assert_int_equal(
        harness_envelope("/once.v1.Admin/Stats", 0, 0, NULL, 0, &req, &len), 0);
    for (int i = 0; i < 200 && !on; i++) {
        Once__V1__Response *r;

        if (harness_raw_rpc(h->url, req, len, &r, 1000) == 0) {
            on = r->status != NULL &&
                 r->status->code == ONCE__V1__CODE__UNAUTHENTICATED;
            once__v1__response__free_unpacked(r, NULL);
        }
        if (!on) {
            harness_sleep_ms(50);
        }
    }
    free(req);
    return on;
}

/* onced on ipc, tcp and tls+tcp with authentication on (principal alice),
 * extra arguments args (NULL-terminated, at most 4), and a signed client
 * per transport. */
static fixture *
fixture_start(const char *const *extra)
{
    fixture *f = calloc(1, sizeof(*f));
    const char *args[HARNESS_MAX_ARGS + 1];
    size_t n = 0;

    assert_non_null(f);
    snprintf(f->tcp, sizeof(f->tcp), "tcp://127.0.0.1:%d", harness_free_port());
    snprintf(f->tls, sizeof(f->tls), "tls+tcp://127.0.0.1:%d",
             harness_free_port());
    args[n++] = "--listen";
    args[n++] = f->tcp;
    args[n++] = "--listen";
    args[n++] = f->tls;
    args[n++] = "--tls-cert";
    args[n++] = cert_pem;
    args[n++] = "--tls-key";
    args[n++] = key_pem;
    for (size_t i = 0; extra != NULL && extra[i] != NULL && i < 6; i++) {
        args[n++] = extra[i];
    }
    args[n] = NULL;
    assert_int_equal(harness_start_args(&f->h, args), 0);
    harness_add_principal(f->h, "alice", "operator");
    assert_true(wait_auth_on(f->h));
    fx_urls[0] = f->h->url;
    fx_urls[1] = f->tcp;
    fx_urls[2] = f->tls;
    f->name[0] = "ipc";
    f->name[1] = "tcp";
    f->name[2] = "tls+tcp";
    for (int i = 0; i < 3; i++) {
        /* onced notices the new principals file within 100 ms: the first
         * open may still meet OPEN mode, which signs fine too. */
        assert_int_equal(open_as_alice(f, fx_urls[i], &f->c[i]), ONCE_OK);
    }
    return f;
}

static void
fixture_free(fixture *f)
{
    for (int i = 0; i < 3; i++) {
        once_client_close(f->c[i]);
    }
    harness_free(f->h);
    free(f);
}

/* CALLS increments of counter name over client i; every one must answer
 * OK. Returns the slowest call's milliseconds; *ok counts the OK ones. */
static int64_t
calls(fixture *f, int i, const char *name, int *ok)
{
    int64_t worst = 0;

    for (int k = 0; k < CALLS; k++) {
        once_rpc_id id = {0, 0};
        once_status st;
        int64_t v, t0 = harness_now_ms(), dt;
        int rc = once_counter_incr(f->c[i], name, 1, &id, &v, &st);

        dt = harness_now_ms() - t0;
        if (rc != ONCE_OK) {
            print_error("  %s call %d: code %d %s (%s) after %lld ms\n",
                        f->name[i], k, rc, st.reason, st.message,
                        (long long)dt);
        }
        assert_int_equal(rc, ONCE_OK);
        (*ok)++;
        worst = dt > worst ? dt : worst;
    }
    return worst;
}

/* onced's Stats over the ipc client, or NULL when it does not answer. */
static Once__V1__StatsResponse *
stats(fixture *f)
{
    Once__V1__StatsResponse *r = NULL;

    return harness_stats_all(f->c[0], &r) == ONCE_OK ? r : NULL;
}

/*
 * Waits until the peer is stuck: onced held it to --conn-inflight (Stats
 * conn_limit_drops grew), or onced stopped reading from it (no send went
 * out for STALL_MS: what happens when every context waits on it). Bounded.
 * Returns true when it got stuck.
 */
static bool
wait_stuck(fixture *f, peer *pr)
{
    int64_t end = harness_now_ms() + STUCK_WAIT_MS;

    for (int i = 0; i < 100000 && harness_now_ms() < end; i++) {
        Once__V1__StatsResponse *r;
        bool limited = false;

        if (harness_now_ms() - atomic_load(&pr->last_sent_ms) >= STALL_MS) {
            print_message("  peer stalled after %llu requests\n",
                          (unsigned long long)atomic_load(&pr->sent));
            return true;
        }
        if ((r = stats(f)) != NULL) {
            limited = r->conn_limit_drops > 0;
            once__v1__stats_response__free_unpacked(r, NULL);
        }
        if (limited) {
            print_message("  peer held to --conn-inflight after %llu "
                          "requests\n",
                          (unsigned long long)atomic_load(&pr->sent));
            return true;
        }
        harness_sleep_ms(50);
    }
    return false;
}

/* Waits (bounded) until Stats says onced closed at least one connection
 * after --send-timeout. (The peer may not notice at once: it does not
 * read, so over tls+tcp:// it only learns of the close when it writes.) */
static void
wait_dropped(fixture *f, peer *pr)
{
    int64_t end = harness_now_ms() + 60000;
    uint64_t dropped = 0;

    for (int i = 0; i < 10000 && harness_now_ms() < end; i++) {
        Once__V1__StatsResponse *r = stats(f);

        if (r != NULL) {
            dropped = r->conns_dropped;
            once__v1__stats_response__free_unpacked(r, NULL);
        }
        if (dropped > 0) {
            break;
        }
        harness_sleep_ms(50);
    }
    print_message("  conns_dropped %llu, peer lost %llu connections\n",
                  (unsigned long long)dropped,
                  (unsigned long long)atomic_load(&pr->pipes_lost));
    assert_true(dropped > 0);
}

/*
 * The peer on transport t: once it is stuck, signed calls over every
 * transport still answer OK, none slower than a generous bound (20 times
 * the slowest quiet call, at least 2 s: the machine is shared and the peer
 * floods the same cores); then onced closes the peer's connection.
 */
static void
slow_peer_on(int t)
{
    const char *extra[] = {"--send-timeout", "2s", NULL};
    fixture *f = fixture_start(extra);
    int64_t quiet = 0, bound;
    int ok = 0;
    peer *pr;

    for (int i = 0; i < 3; i++) {
        int64_t w = calls(f, i, "quiet", &ok);
        quiet = w > quiet ? w : quiet;
    }
    bound = 20 * quiet > 2000 ? 20 * quiet : 2000;
    print_message("  quiet: slowest call %lld ms; bound %lld ms\n",
                  (long long)quiet, (long long)bound);

    pr = peer_start_as(fx_urls[t], f->h, "alice");
    assert_true(wait_stuck(f, pr));
    for (int i = 0; i < 3; i++) {
        int64_t w = calls(f, i, "busy", &ok);
        print_message("  %s peer attached: slowest %s call %lld ms\n",
                      f->name[t], f->name[i], (long long)w);
        assert_true(w <= bound);
    }
    wait_dropped(f, pr);
    peer_stop(pr);
    assert_int_equal(harness_get(f->c[0], "busy"), 3 * CALLS);
    assert_int_equal(harness_stop(f->h), 0);
    fixture_free(f);
}

static void
t_slow_peer_ipc(void **state)
{
    (void)state;
    slow_peer_on(0);
}

static void
t_slow_peer_tcp(void **state)
{
    (void)state;
    slow_peer_on(1);
}

static void
t_slow_peer_tls(void **state)
{
    (void)state;
    slow_peer_on(2);
}

/*
 * SIGTERM with a stuck peer attached (over ipc://, the default
 * --send-timeout: its replies still wait), or after onced closed its
 * connection and it hung up (over tls+tcp://, --send-timeout 1s: nng
 * 1.5.2's close of the socket then waits forever for that connection):
 * onced exits 0 within the harness's bound (10 s, then SIGKILL), and every
 * call it acknowledged is there after a restart.
 */
static void
sigterm_with_peer(int t, bool gone)
{
    const char *extra[] = {"--send-timeout", "1s", NULL};
    fixture *f = fixture_start(gone ? extra : NULL);
    int ok = 0;
    int64_t t0;
    peer *pr;

    for (int i = 0; i < 3; i++) {
        calls(f, i, "kept", &ok);
    }
    pr = peer_start_as(fx_urls[t], f->h, "alice");
    assert_true(wait_stuck(f, pr));
    if (gone) {
        wait_dropped(f, pr);
        peer_stop(pr);
        pr = NULL;
    }
    t0 = harness_now_ms();
    assert_int_equal(harness_stop(f->h), 0);
    print_message("  SIGTERM to exit: %lld ms\n",
                  (long long)(harness_now_ms() - t0));
    peer_stop(pr);
    assert_int_equal(harness_restart(f->h), 0);
    assert_int_equal(harness_get(f->c[0], "kept"), ok);
    assert_int_equal(harness_stop(f->h), 0);
    fixture_free(f);
}

static void
t_sigterm_peer_attached(void **state)
{
    (void)state;
    sigterm_with_peer(0, false);
}

static void
t_sigterm_peer_gone(void **state)
{
    (void)state;
    sigterm_with_peer(2, true);
}

/* ---- item 8: each dropped connection counted and logged once ------------ */

#define DROP_PEERS 4
#define DROP_LINE  "closed: a reply waited"

/*
 * Counts onced's log lines saying a connection was closed for not reading
 * (DROP_LINE); *distinct is how many different connection ids they name.
 */
static int
drop_lines(const harness *h, int *distinct)
{
    unsigned ids[512];
    int n = 0, nd = 0;
    char line[1024];
    FILE *fp = fopen(h->log, "r");

    *distinct = 0;
    if (fp == NULL) {
        return 0;
    }
    while (fgets(line, sizeof(line), fp) != NULL && n < 100000) {
        const char *p = strstr(line, "connection ");
        unsigned id;
        bool seen = false;

        if (strstr(line, DROP_LINE) == NULL || p == NULL ||
            sscanf(p, "connection %u", &id) != 1) {
            continue;
        }
        n++;
        for (int i = 0; i < nd && !seen; i++) {
            seen = ids[i] == id;
        }
        if (!seen && nd < 512) {
            ids[nd++] = id;
        }
    }
    fclose(fp);
    *distinct = nd;
    return n;
}

static uint64_t
peers_lost(peer *const *pr)
{
    uint64_t lost = 0;

    for (int i = 0; i < DROP_PEERS; i++) {
        lost += atomic_load(&pr[i]->pipes_lost);
    }
    return lost;
}

/* Stats conns_dropped, or 0 when Stats did not answer. */
static uint64_t
conns_dropped(fixture *f)
{
    Once__V1__StatsResponse *r = stats(f);
    uint64_t n = 0;

    if (r != NULL) {
        n = r->conns_dropped;
        once__v1__stats_response__free_unpacked(r, NULL);
    }
    return n;
}

#define DROP_KEY       "drop/big"
#define DROP_VALUE_LEN 60000 /* bytes of the value each peer reads */

/* Puts DROP_KEY with DROP_VALUE_LEN bytes over client c. */
static void
put_big_value(once_client *c)
{
    once_kv_txn *t = NULL;
    once_status st;
    uint8_t *v = malloc(DROP_VALUE_LEN);

    assert_non_null(v);
    memset(v, 'v', DROP_VALUE_LEN);
    assert_int_equal(once_kv_txn_new(&t), ONCE_OK);
    assert_int_equal(once_kv_txn_put(t, ONCE_KV_THEN, DROP_KEY,
                                     strlen(DROP_KEY), v, DROP_VALUE_LEN,
                                     false),
                     ONCE_OK);
    assert_int_equal(once_kv_txn_exec(c, t, NULL, &st), ONCE_OK);
    once_kv_txn_free(t);
    free(v);
}

/* A peer flooding KV Range reads of DROP_KEY as alice: each reply is
 * DROP_VALUE_LEN bytes, so a few hundred of them fill the loopback socket
 * buffers (megabytes) that thousands of Stats replies took to fill —
 * minutes under ThreadSanitizer, where this case once saw no close at
 * all within 150 s. */
static peer *
peer_start_big(const char *url, const harness *h)
{
    Once__V1__KvRangeRequest q = ONCE__V1__KV_RANGE_REQUEST__INIT;
    uint8_t buf[64];
    size_t n;

    q.key.data = (uint8_t *)DROP_KEY;
    q.key.len = strlen(DROP_KEY);
    n = once__v1__kv_range_request__pack(&q, buf);
    return peer_start_read(url, h, "alice", "/once.v1.KV/Range", buf, n);
}

/* The peers saw more closes (lost) than onced counted drops: every other
 * close onced makes is counted too (evictions, refusals, authentication
 * and idle closes), so lost must be within their sum — a close counted
 * nowhere fails. Prints them and onced's log either way. */
static void
closes_explain(fixture *f, uint64_t lost)
{
    Once__V1__StatsResponse *r = stats(f);
    uint64_t all;

    assert_non_null(r);
    all = r->conns_dropped + r->conns_evicted + r->conns_refused +
          r->auth_disconnects + r->conns_idle_closed;
    print_message("  the peers lost %llu connections; Stats: conns_dropped "
                  "%llu, conns_evicted %llu, conns_refused %llu, "
                  "auth_disconnects %llu, conns_idle_closed %llu\n",
                  (unsigned long long)lost,
                  (unsigned long long)r->conns_dropped,
                  (unsigned long long)r->conns_evicted,
                  (unsigned long long)r->conns_refused,
                  (unsigned long long)r->auth_disconnects,
                  (unsigned long long)r->conns_idle_closed);
    once__v1__stats_response__free_unpacked(r, NULL);
    harness_dump_log(f->h);
    assert_true(all >= lost);
}

/*
 * DROP_PEERS non-readers at once over tcp://, --send-timeout 1s (each may
 * hold --conn-inflight 256 contexts; --contexts 1280 leaves 256 for the
 * test's own Stats calls), each reading a large value: their replies time
 * out interleaved. Once onced closed DROP_PEERS connections and the floods
 * stopped, Stats conns_dropped is at least the connections the peers saw
 * closed, and onced logged one line per connection (as many lines as
 * distinct connection ids, as many as conns_dropped). Bounded wait for the
 * counts to settle (replies still queued may time out later).
 */
static void
t_drop_counted_once(void **state)
{
    /* --conn-idle-timeout: a peer's reconnected, halted connection is not
     * closed for idling while the counts settle (up to 150 s) */
    const char *extra[] = {"--send-timeout",
                           "1s",
                           "--conn-inflight",
                           "256",
                           "--contexts",
                           "1280",
                           "--conn-idle-timeout",
                           "1h",
                           NULL};
    fixture *f = fixture_start(extra);
    peer *pr[DROP_PEERS];
    int64_t t0 = harness_now_ms(), end = t0 + 120000;
    uint64_t dropped = 0, lost = 0;
    int lines = 0, distinct = 0, ok = 0;

    (void)state;
    put_big_value(f->c[0]);
    for (int i = 0; i < DROP_PEERS; i++) {
        pr[i] = peer_start_big(f->tcp, f->h);
    }
    /* Waits for onced's own count: a peer notices a close only while it
     * still reads its socket's events, so under load (CI's TSan run beside
     * other suites) the peers saw 2 of the closes within 60 s while onced
     * had made them. */
    while (conns_dropped(f) < DROP_PEERS && harness_now_ms() < end) {
        harness_sleep_ms(50);
    }
    print_message("  %llu connections closed after %lld ms\n",
                  (unsigned long long)conns_dropped(f),
                  (long long)(harness_now_ms() - t0));
    for (int i = 0; i < DROP_PEERS; i++) {
        peer_halt(pr[i]);
    }
    for (int k = 0; k < 1200 && harness_now_ms() < end + 30000; k++) {
        dropped = conns_dropped(f);
        lost = peers_lost(pr);
        lines = drop_lines(f->h, &distinct);
        if (dropped >= lost && (uint64_t)lines == dropped &&
            lines == distinct) {
            break;
        }
        harness_sleep_ms(50);
    }
    print_message("  conns_dropped %llu, peers lost %llu connections, %d log "
                  "lines naming %d connections\n",
                  (unsigned long long)dropped, (unsigned long long)lost, lines,
                  distinct);
    assert_true(dropped >= DROP_PEERS);
    /* A peer notices a close only while it still reads its socket's
     * events: onced may close more of its connections than it counted
     * (seen under TSan: 6 closed, 4 noticed), never fewer drops — unless
     * it closed one for another reason, counted under its own name (seen
     * once under ASan in CI: 5 lost for 4 drops; closes_explain). */
    if (dropped < lost) {
        closes_explain(f, lost);
    }
    assert_int_equal(lines, distinct);
    assert_int_equal((uint64_t)lines, dropped);
    calls(f, 1, "after", &ok);
    for (int i = 0; i < DROP_PEERS; i++) {
        peer_stop(pr[i]);
    }
    assert_int_equal(harness_stop(f->h), 0);
    fixture_free(f);
}

/* ---- reconnecting non-readers lose their slots (issue 21, finding 2) --- */

#define NONREADERS 8
#define NR_SEND_S  4    /* --send-timeout of these cases, in seconds */
#define NR_RCVBUF  4096 /* a raw non-reader's receive buffer */

/*
 * A raw non-reader: a socket of its own (tcp to 127.0.0.1, or ipc) with a
 * receive buffer of NR_RCVBUF bytes, so that onced's replies stop going
 * out after a few kilobytes; it shakes hands as a REQ socket, then writes
 * requests and never reads, and connects again at once when onced closes
 * the connection — what an attacker would write.
 */
typedef struct rawpeer {
    int port;         /* tcp port, or 0: ipc path */
    const char *path; /* the ipc socket file */
    const uint8_t *body;
    size_t body_len;
    pthread_t thread;
    _Atomic bool stop;
    _Atomic uint64_t sent, lost;
} rawpeer;

static int
rawpeer_connect(const rawpeer *rp)
{
    static const uint8_t hdr[8] = {0, 'S', 'P', 0, 0x00, 0x30, 0, 0};
    struct timeval tv = {.tv_sec = 0, .tv_usec = 100000};
    int fd, rcv = NR_RCVBUF;
    uint8_t got[8];
    size_t n = 0;

    if (rp->port > 0) {
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)rp->port)};

        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0) {
            return -1;
        }
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
            close(fd);
            return -1;
        }
    } else {
        struct sockaddr_un a = {.sun_family = AF_UNIX};

        snprintf(a.sun_path, sizeof(a.sun_path), "%s", rp->path);
        if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) < 0) {
            return -1;
        }
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
            close(fd);
            return -1;
        }
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL) != (ssize_t)sizeof(hdr)) {
        close(fd);
        return -1;
    }
    for (int i = 0; i < 20 && n < sizeof(got); i++) {
        ssize_t k = recv(fd, got + n, sizeof(got) - n, 0);
        if (k == 0) {
            break;
        }
        n += k > 0 ? (size_t)k : 0;
    }
    if (n != sizeof(got)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One framed request: [ipc: 0x01] length (8 bytes, big endian), request
 * id (4 bytes, top bit set), the envelope. */
static size_t
rawpeer_frame(const rawpeer *rp, uint32_t id, uint8_t *f)
{
    uint64_t len = 4 + rp->body_len;
    size_t n = 0;

    if (rp->port == 0) {
        f[n++] = 0x01;
    }
    for (int i = 7; i >= 0; i--) {
        f[n++] = (uint8_t)(len >> (8 * i));
    }
    id |= 0x80000000u;
    for (int i = 3; i >= 0; i--) {
        f[n++] = (uint8_t)(id >> (8 * i));
    }
    memcpy(f + n, rp->body, rp->body_len);
    return n + rp->body_len;
}

/* Whether onced has shut the connection down: it may only shut it (nng
 * closes the descriptor later), and a peer that never reads sees that as
 * the end of the stream it is not reading. */
static bool
rawpeer_hung_up(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};

    return poll(&p, 1, 0) > 0 &&
           (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

static void *
rawpeer_main(void *arg)
{
    rawpeer *rp = arg;
    int64_t end = harness_now_ms() + PEER_MAX_MS;
    uint8_t frame[1024];
    int fd = -1;

    for (uint32_t id = 1; !atomic_load(&rp->stop) && harness_now_ms() < end &&
                          id < PEER_MAX_SENDS;
         id++) {
        size_t n;

        if (fd < 0 && (fd = rawpeer_connect(rp)) < 0) {
            harness_sleep_ms(10);
            continue;
        }
        n = rawpeer_frame(rp, id, frame);
        for (size_t off = 0; off < n && fd >= 0 && !atomic_load(&rp->stop) &&
                             harness_now_ms() < end;) {
            ssize_t k = send(fd, frame + off, n - off, MSG_NOSIGNAL);

            if (k > 0) {
                off += (size_t)k;
            } else if ((k < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                        errno != EINTR) ||
                       rawpeer_hung_up(fd)) { /* closed by onced */
                close(fd);
                fd = -1;
                atomic_fetch_add(&rp->lost, 1);
            }
        }
        if (fd >= 0) {
            atomic_fetch_add(&rp->sent, 1);
        }
        if (fd >= 0 && rawpeer_hung_up(fd)) {
            close(fd);
            fd = -1;
            atomic_fetch_add(&rp->lost, 1);
        }
    }
    if (fd >= 0) {
        close(fd);
    }
    return NULL;
}

static uint64_t
rawpeers_lost(rawpeer *rp)
{
    uint64_t n = 0;

    for (int i = 0; i < NONREADERS; i++) {
        n += atomic_load(&rp[i].lost) > 0;
    }
    return n;
}

static uint64_t
rawpeers_sent(rawpeer *rp)
{
    uint64_t n = 0;

    for (int i = 0; i < NONREADERS; i++) {
        n += atomic_load(&rp[i].sent);
    }
    return n;
}

/*
 * NONREADERS raw non-readers on transport t (0 ipc, 1 tcp), sending
 * unsigned Admin.Stats requests: together they may hold more contexts than the
 * pool has (8 x --conn-inflight 64 > 256). Beside them alice, on the same
 * transport, makes one signed Increment every 50 ms. The first round of
 * the attack may hold the pool for one --send-timeout
 * (docs/security.md); once every non-reader has lost a connection (or
 * four send timeouts passed, one at least having lost one), her
 * calls over the next two send timeouts all answer OK, the counter is
 * exact, and her slowest call is within half a send timeout: a pool
 * refilled by the reconnected non-readers costs her a whole one, while on
 * this shared machine one group's fsync has taken 600 ms and, beside
 * another suite in CI, one call 1004 ms.
 */
static void
nonreaders_on(int t)
{
    const char *extra[] = {"--send-timeout", "4s", NULL};
    fixture *f = fixture_start(extra);
    rawpeer rp[NONREADERS];
    harness_calls quiet, busy;
    int64_t bound, end;
    uint64_t sent0, sent1;
    uint8_t *body;
    size_t len;
    Once__V1__StatsResponse *r;
    int port = 0;

    assert_int_equal(
        harness_envelope("/once.v1.Admin/Stats", 0, 0, NULL, 0, &body, &len),
        0);
    if (t == 1) {
        assert_int_equal(sscanf(f->tcp, "tcp://127.0.0.1:%d", &port), 1);
    }
    harness_probe_run(f->c[t], "quiet", 50, 2000, 40, &quiet);
    assert_int_equal(quiet.ok, quiet.calls);
    bound = NR_SEND_S * 500;
    memset(rp, 0, sizeof(rp));
    for (int i = 0; i < NONREADERS; i++) {
        rp[i].port = port;
        rp[i].path = f->h->path;
        rp[i].body = body;
        rp[i].body_len = len;
        assert_int_equal(
            pthread_create(&rp[i].thread, NULL, rawpeer_main, &rp[i]), 0);
    }
    /* The first round: until every non-reader lost a connection, or four
     * send timeouts (a peer may not notice a close at once: nng shuts
     * the connection down and closes it later). */
    end = harness_now_ms() + 4 * NR_SEND_S * 1000;
    while (rawpeers_lost(rp) < NONREADERS && harness_now_ms() < end) {
        harness_sleep_ms(50);
    }
    print_message("  %s: %llu of the non-readers lost a connection\n",
                  f->name[t], (unsigned long long)rawpeers_lost(rp));
    assert_true(rawpeers_lost(rp) >= 1);
    sent0 = rawpeers_sent(rp);
    harness_probe_run(f->c[t], "busy", 50, 2 * NR_SEND_S * 1000, 4096, &busy);
    sent1 = rawpeers_sent(rp);
    print_message("  %s: alice quiet median %lld ms, slowest %lld ms; "
                  "attacked: %d calls, %d OK, median %lld ms, slowest %lld "
                  "ms (bound %lld ms); non-readers sent %llu meanwhile\n",
                  f->name[t], (long long)quiet.median_ms,
                  (long long)quiet.worst_ms, busy.calls, busy.ok,
                  (long long)busy.median_ms, (long long)busy.worst_ms,
                  (long long)bound, (unsigned long long)(sent1 - sent0));
    assert_int_equal(busy.ok, busy.calls);
    assert_true(busy.calls >= 10);
    assert_true(busy.worst_ms <= bound);
    /* The attack happened. Whether it went on during her calls depends on
     * the peers learning of their closes: nng 1.5.2 closes a pipe's
     * descriptor on its one reaper thread, which a pipe that never
     * finishes closing can hold for good (docs/design.md), and a peer
     * whose descriptor stays open just stops sending (seen under TSan
     * over tcp), which costs alice nothing. */
    assert_true(sent0 > 0);
    if (sent1 == sent0) {
        print_message("  (the non-readers were stopped: onced closed their "
                      "connections and they were never told)\n");
    }
    assert_int_equal(harness_get(f->c[t], "busy"), busy.ok);
    assert_non_null(r = stats(f));
    print_message("  Stats: conns_dropped %llu, peers_penalised %llu, "
                  "auth_disconnects %llu, conn_limit_drops %llu\n",
                  (unsigned long long)r->conns_dropped,
                  (unsigned long long)r->peers_penalised,
                  (unsigned long long)r->auth_disconnects,
                  (unsigned long long)r->conn_limit_drops);
    assert_true(r->peers_penalised >= 1);
    once__v1__stats_response__free_unpacked(r, NULL);
    for (int i = 0; i < NONREADERS; i++) {
        atomic_store(&rp[i].stop, true);
    }
    for (int i = 0; i < NONREADERS; i++) {
        pthread_join(rp[i].thread, NULL);
    }
    free(body);
    assert_int_equal(harness_stop(f->h), 0);
    fixture_free(f);
}

static void
t_nonreaders_tcp(void **state)
{
    (void)state;
    nonreaders_on(1);
}

static void
t_nonreaders_ipc(void **state)
{
    (void)state;
    nonreaders_on(0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_slow_peer_ipc),
        cmocka_unit_test(t_slow_peer_tcp),
        cmocka_unit_test(t_slow_peer_tls),
        cmocka_unit_test(t_sigterm_peer_attached),
        cmocka_unit_test(t_sigterm_peer_gone),
        cmocka_unit_test(t_drop_counted_once),
        cmocka_unit_test(t_nonreaders_tcp),
        cmocka_unit_test(t_nonreaders_ipc),
    };
    if (getenv("ONCE_TEST_FILTER") != NULL) { /* e.g. "t_sigterm*" */
        cmocka_set_test_filter(getenv("ONCE_TEST_FILTER"));
    }
    return harness_exit(
        cmocka_run_group_tests(tests, make_certs, remove_certs));
}
