/*
 * test_config.c — onced's configuration file, SIGHUP reload, JSON log and
 * service-manager notifications, against a real onced.
 *
 * Owns: the checks that
 *  - every key of `--config FILE` is a long option and acts like it (window,
 *    lease-ttl, log-format); a flag given on the command line wins over the
 *    file;
 *  - an unknown key, or a bad value, stops onced with exit status 2 and a
 *    message naming the file and line, before anything is opened;
 *  - SIGHUP re-reads the file: a new window and lease TTL apply to the next
 *    calls without a restart, a key that cannot change while running is
 *    logged as waiting for the next start, and a broken file leaves the
 *    configuration in force;
 *  - with --log-format json every line onced writes is one JSON object with
 *    ts, level and msg;
 *  - with NOTIFY_SOCKET set (as systemd does for Type=notify) onced sends
 *    READY=1 once it serves calls, WATCHDOG=1 repeatedly when WATCHDOG_USEC
 *    asks for it, and STOPPING=1 on SIGTERM; without NOTIFY_SOCKET it runs
 *    the same (every other suite).
 * Invariant: every wait is bounded in count and time.
 * Never: sleeps a fixed time where a condition can be waited for.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>

#include <cmocka.h>

#include "tests/harness.h"
#include "tests/notify_sock.h"

extern char **environ;

/* Writes text to path (replacing it). */
static void
write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* Reads path into a malloc'd string (free()). */
static char *
read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf;
    long n;

    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = calloc(1, (size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return buf;
}

/* A lease-less handle that sends each call once and waits up to 30 s for
 * its reply (onced may run under valgrind): a WINDOW_FULL refusal comes
 * back from that one attempt, without retries. */
static once_client *
open_plain(const harness *h)
{
    once_options o;
    once_client *c = NULL;
    once_status st;

    once_options_init(&o);
    o.url = h->url;
    o.no_lease = true;
    o.max_attempts = 1;
    o.deadline_ms = 30000;
    o.attempt_timeout_ms = 30000;
    assert_int_equal(once_client_open(&c, &o, &st), ONCE_OK);
    return c;
}

/* The TTL onced grants a lease that asks for none. */
static uint64_t
default_ttl(once_client *c)
{
    once_status st;
    uint64_t cid = 0, ttl = 0;

    assert_int_equal(once_lease_open(c, NULL, 0, &cid, &ttl, &st), ONCE_OK);
    return ttl;
}

/* How many unacknowledged calls a fresh lease may make before WINDOW_FULL
 * (probing up to max + 1). */
static int
window_of(once_client *c, const char *name, int max)
{
    once_status st;
    uint64_t cid = 0, ttl = 0;
    int64_t v;

    assert_int_equal(once_lease_open(c, NULL, 60000, &cid, &ttl, &st), ONCE_OK);
    for (int s = 1; s <= max + 1; s++) {
        int rv = harness_incr_id(c, name, 1, cid, (uint64_t)s, &v, &st);
        if (rv == ONCE_RESOURCE_EXHAUSTED) {
            assert_string_equal(st.reason, "WINDOW_FULL");
            return s - 1;
        }
        assert_int_equal(rv, ONCE_OK);
    }
    return max + 1;
}

/* True when onced's log holds needle (read now). */
static bool
log_has(const harness *h, const char *needle)
{
    char *log = read_file(h->log);
    bool found = strstr(log, needle) != NULL;

    free(log);
    return found;
}

/* Waits (bounded: 10 s) until onced's log holds needle. */
static void
wait_log(const harness *h, const char *needle)
{
    for (int i = 0; i < 200; i++) {
        if (log_has(h, needle)) {
            return;
        }
        harness_sleep_ms(50);
    }
    harness_dump_log(h);
    fail_msg("onced's log never said \"%s\"", needle);
}

/* The file and flags: window and log-format from the file, lease-ttl from
 * the flag that overrides the file's. */
static void
test_file_and_flags(void **state)
{
    char conf[512], dir[] = "/tmp/once-config-XXXXXX";
    const char *args[] = {"--config", conf, "--lease-ttl", "9s", NULL};
    harness *h = NULL;
    once_client *c;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(conf, sizeof(conf), "%s/onced.conf", dir);
    write_file(conf, "# onced test configuration\n"
                     "window = 3\n"
                     "lease-ttl = 7s\n"
                     "log-format json\n"
                     "\n"
                     "no-listen-check = false\n");
    assert_int_equal(harness_start_args(&h, args), 0);
    c = open_plain(h);
    assert_int_equal(default_ttl(c), 9000); /* the flag, not the file */
    assert_int_equal(window_of(c, "cfg-window", 8), 3);
    once_client_close(c);
    assert_true(log_has(h, "configuration file"));
    assert_int_equal(harness_stop(h), 0);

    /* Every line onced wrote is one JSON object:
     * {"ts":"…","level":"…","msg":"…"}. */
    {
        char *log = read_file(h->log), *save = NULL;
        int lines = 0;

        for (char *l = strtok_r(log, "\n", &save); l != NULL;
             l = strtok_r(NULL, "\n", &save)) {
            size_t n = strlen(l);
            if (strncmp(l, "==", 2) == 0) {
                continue; /* valgrind's own lines (make valgrind) */
            }
            if (strncmp(l, "{\"ts\":\"", 7) != 0 || l[n - 1] != '}' ||
                strstr(l, "\",\"level\":\"") == NULL ||
                strstr(l, "\",\"msg\":\"") == NULL) {
                fail_msg("not a JSON log line: %s", l);
            }
            lines++;
        }
        assert_true(lines >= 3);
        free(log);
    }
    harness_free(h);
    unlink(conf);
    rmdir(dir);
}

/* Runs onced with args (NULL-terminated) and returns its exit status;
 * its stderr goes to errpath. Bounded: 10 s, then SIGKILL and a failure. */
static int
run_onced(const char *const *args, const char *errpath)
{
    posix_spawn_file_actions_t fa;
    char *argv[16];
    pid_t pid;
    int n = 0, status = 0;

    argv[n++] = (char *)ONCED_PATH;
    for (; args[n - 1] != NULL && n < 15; n++) {
        argv[n] = (char *)args[n - 1];
    }
    argv[n] = NULL;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, errpath,
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    assert_int_equal(posix_spawn(&pid, ONCED_PATH, &fa, NULL, argv, environ),
                     0);
    posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; i < 200; i++) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        }
        harness_sleep_ms(50);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    fail_msg("onced did not exit by itself within 10 s");
    return -1;
}

/* An unknown key, a value where none belongs, a bad value and a missing
 * file stop onced with status 2 before it opens anything. */
static void
test_bad_files_refused(void **state)
{
    char dir[] = "/tmp/once-config-XXXXXX";
    char conf[512], err[512], data[512], url[600];
    const char *args[] = {"--config", conf, "--data", data,
                          "--listen", url,  NULL};
    static const struct {
        const char *text;
        const char *says;
    } cases[] = {
        {"window = 4\nno-such-key = 1\n", "onced.conf:2: unknown key "
                                          "\"no-such-key\""},
        {"dev = maybe\n", "onced.conf:1: dev takes no value"},
        {"window\n", "onced.conf:1: window wants a value"},
        {"window = many\n", "--window wants a whole number"},
        {"config = other.conf\n", "unknown key \"config\""},
    };

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(conf, sizeof(conf), "%s/onced.conf", dir);
    snprintf(err, sizeof(err), "%s/stderr", dir);
    snprintf(data, sizeof(data), "%s/data", dir);
    snprintf(url, sizeof(url), "ipc://%s/s.ipc", dir);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *text;

        write_file(conf, cases[i].text);
        assert_int_equal(run_onced(args, err), 2);
        text = read_file(err);
        if (strstr(text, cases[i].says) == NULL) {
            fail_msg("case %zu: stderr lacks \"%s\": %s", i, cases[i].says,
                     text);
        }
        free(text);
        assert_int_equal(access(data, F_OK), -1); /* nothing opened */
    }
    unlink(conf);
    assert_int_equal(run_onced(args, err), 2); /* no such file */
    {
        char *text = read_file(err);
        assert_non_null(strstr(text, "cannot read the configuration file"));
        free(text);
    }
    unlink(err);
    rmdir(dir);
}

/* SIGHUP: window and lease-ttl change for the next calls; contexts waits
 * for a restart; a broken file keeps what is in force. */
static void
test_sighup_reload(void **state)
{
    char conf[512], dir[] = "/tmp/once-config-XXXXXX";
    const char *args[] = {"--config", conf, NULL};
    harness *h = NULL;
    once_client *c;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(conf, sizeof(conf), "%s/onced.conf", dir);
    write_file(conf, "window = 2\nlease-ttl = 5s\ncontexts = 64\n");
    assert_int_equal(harness_start_args(&h, args), 0);
    c = open_plain(h);
    assert_int_equal(default_ttl(c), 5000);
    assert_int_equal(window_of(c, "hup-1", 8), 2);

    write_file(conf, "window = 5\nlease-ttl = 6s\ncontexts = 32\n");
    assert_int_equal(kill(h->pid, SIGHUP), 0);
    wait_log(h, "window 5, lease-ttl 6000ms");
    assert_int_equal(default_ttl(c), 6000);
    assert_int_equal(window_of(c, "hup-2", 8), 5);
    assert_true(log_has(h, "contexts changed; it takes effect at the next "
                           "start"));

    /* A file that does not parse: the values in force stay. */
    write_file(conf, "window = 7\nlease-ttl = soon\n");
    assert_int_equal(kill(h->pid, SIGHUP), 0);
    wait_log(h, "the configuration in force stays");
    assert_int_equal(default_ttl(c), 6000);
    assert_int_equal(window_of(c, "hup-3", 8), 5);

    once_client_close(c);
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
    unlink(conf);
    rmdir(dir);
}

/* NOTIFY_SOCKET: READY=1 when it serves, WATCHDOG=1 while it runs,
 * STOPPING=1 on SIGTERM. */
static void
test_notify(void **state)
{
    notify_sock ns;
    harness *h = NULL;
    once_client *c;
    once_stats s;
    int pings = 0;

    (void)state;
    assert_int_equal(notify_sock_open(&ns), 0);
    setenv("NOTIFY_SOCKET", ns.path, 1);
    setenv("WATCHDOG_USEC", "400000", 1);
    unsetenv("WATCHDOG_PID");
    assert_int_equal(harness_start(&h), 0);
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");

    assert_true(notify_sock_expect(&ns, "READY=1", 15000, &pings, NULL, 0));
    /* READY came after the listeners were up: a call goes through. */
    assert_int_equal(harness_client(h, true, &c), ONCE_OK);
    harness_stats(c, &s);
    once_client_close(c);
    pings = 0;
    for (int i = 0; i < 40 && pings < 3; i++) {
        char buf[1024];
        if (notify_sock_recv(&ns, buf, sizeof(buf), 500) > 0 &&
            strstr(buf, "WATCHDOG=1") != NULL) {
            pings++;
        }
    }
    assert_true(pings >= 3);
    assert_int_equal(kill(h->pid, SIGTERM), 0);
    assert_true(notify_sock_expect(&ns, "STOPPING=1", 15000, &pings, NULL, 0));
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
    notify_sock_close(&ns);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_and_flags),
        cmocka_unit_test(test_bad_files_refused),
        cmocka_unit_test(test_sighup_reload),
        cmocka_unit_test(test_notify),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
