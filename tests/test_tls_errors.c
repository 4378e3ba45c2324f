/*
 * test_tls_errors.c — TLS that explains itself (issue 15, item 6): the
 * certificate recipe of docs/security.md run as written and working, and
 * each way a handshake fails reported as what it is, at the first attempt.
 *
 * Owns: the certificates (a temp dir removed at the end): the recipe's CA
 * and server certificate (DNS:once.example, DNS:localhost, DNS:127.0.0.1,
 * IP:127.0.0.1), a server certificate made the usual way for an address
 * (subjectAltName=IP:127.0.0.1 only) by the same CA, and an unrelated CA;
 * and the checks: the recipe reached by address, by name and with
 * tls_server_name / oncectl --tls-server-name; TLS_UNTRUSTED (another CA,
 * no CA), TLS_NAME_MISMATCH (another name; the IP-only certificate, whose
 * message says what to add), TLS_HANDSHAKE (a plain tcp:// listener), no
 * TLS verdict for a port nobody listens on, and onced's log line.
 * Invariant: every wait is bounded (client deadlines, harness timeouts, the
 * log poll); a failure must come before the first attempt's end.
 * Never: turns verification off to make a test pass.
 */
#include <setjmp.h>
#include <stdarg.h> /* cmocka.h needs va_list */
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/harness.h"

/* A failing open: deadline and attempt timeout. The verdict must come
 * within the first attempt, long before the deadline. */
#define FAIL_DEADLINE_MS 12000u
#define FAIL_ATTEMPT_MS  6000u

typedef struct tls_fixture {
    char dir[64];
    char ca[128], ca_other[128];
    char cert[128], key[128];       /* the recipe's server.pem/.key */
    char ip_cert[128], ip_key[128]; /* subjectAltName=IP:127.0.0.1 only */
} tls_fixture;

static tls_fixture fx;

/* The recipe: the ```sh block after the tls-recipe marker of
 * docs/security.md, run as written in dir/recipe; then the IP-only
 * certificate by the same CA and another CA. */
static int
make_certs(void **state)
{
    (void)state;
    snprintf(fx.dir, sizeof(fx.dir), "/tmp/once-tlserr-XXXXXX");
    if (mkdtemp(fx.dir) == NULL) {
        return -1;
    }
    snprintf(fx.ca, sizeof(fx.ca), "%s/recipe/ca.pem", fx.dir);
    snprintf(fx.cert, sizeof(fx.cert), "%s/recipe/server.pem", fx.dir);
    snprintf(fx.key, sizeof(fx.key), "%s/recipe/server.key", fx.dir);
    snprintf(fx.ip_cert, sizeof(fx.ip_cert), "%s/recipe/ip.pem", fx.dir);
    snprintf(fx.ip_key, sizeof(fx.ip_key), "%s/recipe/ip.key", fx.dir);
    snprintf(fx.ca_other, sizeof(fx.ca_other), "%s/other-ca.pem", fx.dir);
    if (harness_sh("mkdir %s/recipe && awk '/<!-- tls-recipe/ {m = 1; next} "
                   "m && /^```sh/ {b = 1; next} b && /^```/ {exit} b' %s "
                   "> %s/recipe.sh && test -s %s/recipe.sh",
                   fx.dir, ONCE_SOURCE_DIR "/docs/security.md", fx.dir,
                   fx.dir) != 0) {
        fprintf(stderr, "no tls-recipe block in docs/security.md\n");
        return -1;
    }
    if (harness_sh("cd %s/recipe && sh -e ../recipe.sh >../recipe.log 2>&1",
                   fx.dir) != 0) {
        harness_sh("cat %s/recipe.log >&2", fx.dir);
        return -1;
    }
    return harness_sh(
               "cd %s/recipe && "
               "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
               "-nodes -keyout ip.key -out ip.csr -subj '/CN=127.0.0.1' "
               "2>/dev/null && "
               "printf 'subjectAltName=IP:127.0.0.1\\n' > ip.ext && "
               "openssl x509 -req -in ip.csr -CA ca.pem -CAkey ca.key "
               "-CAcreateserial -days 2 -extfile ip.ext -out ip.pem "
               "2>/dev/null && cd .. && "
               "openssl req -x509 -newkey ec -pkeyopt "
               "ec_paramgen_curve:prime256v1 -nodes -keyout other-ca.key "
               "-out other-ca.pem -days 2 -subj '/CN=once CA' 2>/dev/null",
               fx.dir) == 0
               ? 0
               : -1;
}

static int
remove_certs(void **state)
{
    (void)state;
    return harness_sh("rm -rf %s", fx.dir) == 0 ? 0 : -1;
}

/* onced with a tls+tcp://127.0.0.1 listener on a free port serving
 * cert/key; *port set. */
static harness *
start_tls(const char *cert, const char *key, int *port)
{
    harness *h = NULL;
    char url[64];

    *port = harness_free_port();
    assert_true(*port > 0);
    snprintf(url, sizeof(url), "tls+tcp://127.0.0.1:%d", *port);
    const char *args[] = {"--listen",  url, "--tls-cert", cert,
                          "--tls-key", key, NULL};
    assert_int_equal(harness_start_args(&h, args), 0);
    return h;
}

/* Opens a handle with a lease on tls+tcp://HOST:port; *ms is how long
 * the open took. */
static int
open_tls(const char *host, int port, const char *ca, const char *server_name,
         uint32_t deadline_ms, once_client **cp, once_status *st, int64_t *ms)
{
    char url[96];
    once_options o;
    once_security sec;
    int64_t t0 = harness_now_ms();
    int rv;

    snprintf(url, sizeof(url), "tls+tcp://%s:%d", host, port);
    once_options_init(&o);
    once_security_init(&sec);
    o.url = url;
    o.deadline_ms = deadline_ms;
    o.attempt_timeout_ms = deadline_ms / 2;
    sec.tls_ca_file = ca;
    sec.tls_server_name = server_name;
    *cp = NULL;
    rv = once_client_open_secure(cp, &o, &sec, st);
    *ms = harness_now_ms() - t0;
    return rv;
}

/* The open fails UNAVAILABLE with reason, nothing sent, within the first
 * attempt; the message holds want (NULL: anything). */
static void
expect_tls_failure(const char *host, int port, const char *ca,
                   const char *server_name, const char *reason,
                   const char *want)
{
    once_client *c = NULL;
    once_status st;
    int64_t ms;

    assert_int_equal(
        open_tls(host, port, ca, server_name, FAIL_DEADLINE_MS, &c, &st, &ms),
        ONCE_UNAVAILABLE);
    fprintf(stderr, "  %s %s after %lld ms: %s\n", st.reason,
            server_name != NULL ? server_name : host, (long long)ms,
            st.message);
    assert_null(c);
    assert_string_equal(st.reason, reason);
    assert_int_equal(st.attempts, 0);
    assert_true(ms < (int64_t)FAIL_ATTEMPT_MS);
    if (want != NULL) {
        assert_non_null(strstr(st.message, want));
    }
}

/* The recipe's certificate: by address, by name, with another name the
 * certificate carries; a round trip and its replay. */
static void
t_recipe_works(void **state)
{
    int port;
    harness *h = start_tls(fx.cert, fx.key, &port);
    once_client *c = NULL, *r = NULL;
    once_status st;
    once_rpc_id id = {0, 0};
    int64_t v = 0, ms;

    (void)state;
    assert_int_equal(
        open_tls("127.0.0.1", port, fx.ca, NULL, 10000, &c, &st, &ms), ONCE_OK);
    assert_int_equal(once_counter_incr(c, "tls", 2, &id, &v, &st), ONCE_OK);
    assert_int_equal(v, 2);
    assert_int_equal(
        open_tls("localhost", port, fx.ca, NULL, 10000, &r, &st, &ms), ONCE_OK);
    assert_int_equal(once_counter_incr(r, "tls", 2, &id, &v, &st), ONCE_OK);
    assert_true(st.replayed);
    once_client_close(r);
    assert_int_equal(
        open_tls("127.0.0.1", port, fx.ca, "once.example", 10000, &r, &st, &ms),
        ONCE_OK);
    assert_int_equal(once_counter_get(r, "tls", &v, &st), ONCE_OK);
    assert_int_equal(v, 2);
    once_client_close(r);
    once_client_close(c);
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

/* oncectl --tls-server-name: a name of the certificate works, another is
 * TLS_NAME_MISMATCH (in --json, exit status 1). */
static void
t_oncectl_server_name(void **state)
{
    int port;
    harness *h = start_tls(fx.cert, fx.key, &port);
    char url[64], out[2048];

    (void)state;
    snprintf(url, sizeof(url), "tls+tcp://127.0.0.1:%d", port);
    const char *ok[] = {"--json",       "--server", url,
                        "--tls-ca",     fx.ca,      "--tls-server-name",
                        "once.example", "stats",    NULL};
    assert_int_equal(harness_oncectl_run(ok, out, sizeof(out), NULL), 0);
    const char *bad[] = {"--json",        "--server", url,
                         "--tls-ca",      fx.ca,      "--tls-server-name",
                         "other.example", "stats",    NULL};
    assert_int_equal(harness_oncectl_run(bad, out, sizeof(out), NULL), 1);
    fprintf(stderr, "  oncectl: %s", out);
    assert_non_null(strstr(out, "\"reason\":\"TLS_NAME_MISMATCH\""));
    assert_non_null(strstr(out, "other.example"));
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

/* Another CA, or no CA: TLS_UNTRUSTED. */
static void
t_untrusted(void **state)
{
    int port;
    harness *h = start_tls(fx.cert, fx.key, &port);

    (void)state;
    expect_tls_failure("127.0.0.1", port, fx.ca_other, NULL,
                       ONCE_REASON_TLS_UNTRUSTED, "other-ca.pem");
    expect_tls_failure("127.0.0.1", port, NULL, NULL, ONCE_REASON_TLS_UNTRUSTED,
                       "no CA file");
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

/* The right CA, a name the certificate does not carry. */
static void
t_name_mismatch(void **state)
{
    int port;
    harness *h = start_tls(fx.cert, fx.key, &port);

    (void)state;
    expect_tls_failure("127.0.0.1", port, fx.ca, "other.example",
                       ONCE_REASON_TLS_NAME_MISMATCH, "other.example");
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

/* subjectAltName=IP:127.0.0.1 only, reached as 127.0.0.1: mbedTLS does not
 * match IP entries, and the message says what to add. Through oncectl too,
 * as a user meets it. */
static void
t_ip_only_san(void **state)
{
    int port;
    harness *h = start_tls(fx.ip_cert, fx.ip_key, &port);
    char url[64], out[2048];

    (void)state;
    expect_tls_failure("127.0.0.1", port, fx.ca, NULL,
                       ONCE_REASON_TLS_NAME_MISMATCH, "DNS:127.0.0.1");
    snprintf(url, sizeof(url), "tls+tcp://127.0.0.1:%d", port);
    const char *args[] = {"--json", "--server", url, "--tls-ca",
                          fx.ca,    "stats",    NULL};
    assert_int_equal(harness_oncectl_run(args, out, sizeof(out), NULL), 1);
    fprintf(stderr, "  oncectl: %s", out);
    assert_non_null(strstr(out, "\"reason\":\"TLS_NAME_MISMATCH\""));
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

/* tls+tcp:// to a plain tcp:// listener: TLS_HANDSHAKE. */
static void
t_not_tls(void **state)
{
    harness *h = NULL;
    int port = harness_free_port();
    char url[64];

    (void)state;
    assert_true(port > 0);
    snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", port);
    const char *args[] = {"--listen", url, NULL};
    assert_int_equal(harness_start_args(&h, args), 0);
    expect_tls_failure("127.0.0.1", port, fx.ca, NULL,
                       ONCE_REASON_TLS_HANDSHAKE, NULL);
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

/* Nobody listening: no TLS verdict, NOT_SENT at the deadline as before. */
static void
t_unreachable(void **state)
{
    once_client *c = NULL;
    once_status st;
    int64_t ms;

    (void)state;
    assert_int_equal(open_tls("127.0.0.1", harness_free_port(), fx.ca, NULL,
                              1500, &c, &st, &ms),
                     ONCE_UNAVAILABLE);
    assert_string_equal(st.reason, ONCE_REASON_NOT_SENT);
}

/* onced says it: a warning naming the listener once a client rejected its
 * certificate. */
static void
t_onced_logs(void **state)
{
    int port;
    harness *h = start_tls(fx.cert, fx.key, &port);
    bool seen = false;

    (void)state;
    expect_tls_failure("127.0.0.1", port, fx.ca_other, NULL,
                       ONCE_REASON_TLS_UNTRUSTED, NULL);
    for (int i = 0; i < 200 && !seen; i++) { /* the log is read each second */
        seen = harness_sh(
                   "grep -q 'tls+tcp://127.0.0.1:%d: [0-9]* TLS handshake(s) "
                   "rejected by clients' %s",
                   port, h->log) == 0;
        if (!seen) {
            harness_sleep_ms(50);
        }
    }
    if (!seen) {
        harness_dump_log(h);
    }
    assert_true(seen);
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_recipe_works),
        cmocka_unit_test(t_oncectl_server_name),
        cmocka_unit_test(t_untrusted),
        cmocka_unit_test(t_name_mismatch),
        cmocka_unit_test(t_ip_only_san),
        cmocka_unit_test(t_not_tls),
        cmocka_unit_test(t_unreachable),
        cmocka_unit_test(t_onced_logs),
    };
    return cmocka_run_group_tests(tests, make_certs, remove_certs);
}
