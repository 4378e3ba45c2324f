/*
 * harness.c — a real onced child process for each test fixture.
 *
 * Owns: the onced child (fork/exec), its temp dir and ipc file, the raw
 * REQ sockets used to probe it, and the checked libonce calls the test
 * files share (cmocka assertions, test thread only).
 * Invariant: every loop here is bounded both in iterations and in wall time;
 * the child is always reaped before a harness is freed, so no test leaves an
 * onced behind.
 * Never: calls anything but async-signal-safe functions between fork and
 * exec; never removes anything outside the harness's own temp dir and ipc
 * file.
 */
#include "tests/harness.h"
#include "tests/sp_ipc.h"
#include "tests/sys_helpers.h"
#include "tests/watchdog.h"

#include "proto/auth_tag.h"
#include "base/clock.h"
#include "base/keyfile.h"
#include "proto/principals.h"
#include "proto/wire.h"

#include <dirent.h>
#include <execinfo.h>
#include <sys/syscall.h>
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#ifndef ONCED_TEST_PATH
#error "ONCED_TEST_PATH must name onced_test (set by tests/CMakeLists.txt)"
#endif
#ifndef ONCED_PATH
#error "ONCED_PATH must name the onced binary (set by tests/CMakeLists.txt)"
#endif

#define HARNESS_STOP_MS 10000

static atomic_int harness_seq;

static const char *harness_prog = "test";

/* Async-signal-safe: write(2) only, then the default action. */
static void
harness_on_signal(int sig)
{
    char buf[160];
    size_t n = 0;
    const char *parts[] = {harness_prog, ": killed by signal ", NULL};
    char num[16];
    int k = 0, v = sig;

    for (int i = 0; parts[i] != NULL; i++) {
        for (const char *p = parts[i]; *p != '\0' && n < sizeof(buf) - 20;
             p++) {
            buf[n++] = *p;
        }
    }
    do {
        num[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0 && k < (int)sizeof(num));
    while (k > 0) {
        buf[n++] = num[--k];
    }
    buf[n++] = '\n';
    (void)!write(2, buf, n);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void
harness_on_exit(int status, void *arg)
{
    (void)arg;
    if (status != 0) {
        fprintf(stderr, "%s: exit status %d\n", harness_prog, status);
    }
}

static void
harness_on_crash(int sig)
{
    void *frames[64];
    int n = backtrace(frames, 64);
    char buf[96];
    int len = snprintf(buf, sizeof(buf), "%s: signal %d on thread %ld:\n",
                       harness_prog, sig, (long)syscall(SYS_gettid));

    (void)!write(2, buf, (size_t)len);
    backtrace_symbols_fd(frames, n, 2);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Every suite linked with the harness gets the watchdog (watchdog.c). */
__attribute__((constructor)) static void
harness_init(void)
{
    watchdog_start();
}

void
harness_trap_crashes(void)
{
    const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};

    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        signal(sigs[i], harness_on_crash);
    }
}

void
harness_trap_exit(const char *prog)
{
    const int sigs[] = {SIGPIPE, SIGTERM, SIGABRT, SIGBUS,  SIGHUP, SIGINT,
                        SIGALRM, SIGXCPU, SIGXFSZ, SIGUSR1, SIGUSR2};

    harness_prog = prog;
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        signal(sigs[i], harness_on_signal);
    }
    on_exit(harness_on_exit, NULL);
}

int64_t
harness_now_ms(void)
{
    return (int64_t)clock_now_ms();
}

void
harness_sleep_ms(int ms)
{
    clock_sleep_ms((uint64_t)ms);
}

void
harness_dump_log(const harness *h)
{
    FILE *f;
    char line[512];
    int n = 0;

    if (h == NULL || (f = fopen(h->log, "r")) == NULL) {
        return;
    }
    fprintf(stderr, "---- onced log (%s) ----\n", h->log);
    while (n++ < 400 && fgets(line, sizeof(line), f) != NULL) {
        fputs(line, stderr);
    }
    fprintf(stderr, "---- end of onced log ----\n");
    fclose(f);
}

extern char **environ;

/* The environment for onced: ours without ONCED_FAULT, plus
 * ONCED_FAULT=h->fault when armed. Built before fork (malloc is not
 * async-signal-safe); *envp and *fault_var are freed with free(). */
static int
spawn_env(const harness *h, char ***envp, char **fault_var)
{
    size_t n = 0, k = 0;
    char **env;

    *fault_var = NULL;
    while (environ != NULL && environ[n] != NULL) {
        n++;
    }
    if ((env = calloc(n + 2, sizeof(*env))) == NULL) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], "ONCED_FAULT=", 12) != 0) {
            env[k++] = environ[i];
        }
    }
    if (h->fault[0] != '\0') {
        size_t len = strlen("ONCED_FAULT=") + strlen(h->fault) + 1;
        if ((*fault_var = malloc(len)) == NULL) {
            free(env);
            return -1;
        }
        snprintf(*fault_var, len, "ONCED_FAULT=%s", h->fault);
        env[k++] = *fault_var;
    }
    env[k] = NULL;
    *envp = env;
    return 0;
}

/*
 * execve(bin, argv), or — when ONCE_TEST_ONCED_WRAPPER is set, e.g. to
 * "/usr/bin/valgrind --error-exitcode=99 -q" (make valgrind) — the wrapper's
 * words followed by bin and its arguments. Returns only on failure. Runs in
 * the forked child: no allocation beyond the stack.
 */
static void
spawn_exec(char *bin, char **argv, char **envp)
{
    const char *w = getenv("ONCE_TEST_ONCED_WRAPPER");
    char words[1024];
    char *wargv[32 + 6 + HARNESS_MAX_ARGS];
    size_t n = 0;
    char *save = NULL;

    if (w == NULL || w[0] == '\0' || strlen(w) >= sizeof(words)) {
        execve(bin, argv, envp);
        return;
    }
    memcpy(words, w, strlen(w) + 1);
    for (char *t = strtok_r(words, " ", &save); t != NULL && n < 32;
         t = strtok_r(NULL, " ", &save)) {
        wargv[n++] = t;
    }
    for (size_t i = 0; argv[i] != NULL; i++) {
        wargv[n++] = argv[i];
    }
    wargv[n] = NULL;
    execve(wargv[0], wargv, envp);
}

/* Whether this start needs onced's test seams (server/test_seams.h): an
 * armed fault, or one of their variables in our environment. */
static bool
spawn_needs_seams(const harness *h)
{
    /* ONCED_FAULT of our environment is dropped: h->fault is the one. */
    static const char *const vars[] = {"ONCED_CLOCK_OFFSET_FILE",
                                       "ONCED_EXEC_HOLD_MS",
                                       "ONCED_COMPACT_HOLD_MS"};

    if (h->fault[0] != '\0') {
        return true;
    }
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL && v[0] != '\0') {
            return true;
        }
    }
    return false;
}

/* fork/exec onced (the test build when the start needs its seams); stdout
 * and stderr append to h->log. */
/* The binary spawn starts for h. */
static char *
spawn_bin(harness *h)
{
    return h->onced[0] != '\0'    ? h->onced
           : spawn_needs_seams(h) ? (char *)ONCED_TEST_PATH
                                  : (char *)ONCED_PATH;
}

static int
spawn(harness *h)
{
    char *bin = spawn_bin(h);
    char *argv[6 + HARNESS_MAX_ARGS] = {bin, "--data", h->data, "--listen",
                                        h->url};
    char **envp = NULL;
    char *fault_var = NULL;
    pid_t pid;
    int fd;

    for (int i = 0; i < HARNESS_MAX_ARGS && h->args[i] != NULL; i++) {
        argv[5 + i] = h->args[i];
    }
    if (spawn_env(h, &envp, &fault_var) != 0) {
        perror("harness: environment");
        return -1;
    }
    if ((fd = open(h->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) <
        0) {
        perror("harness: open log");
        free(envp);
        free(fault_var);
        return -1;
    }
    if ((pid = fork()) < 0) {
        perror("harness: fork");
        close(fd);
        free(envp);
        free(fault_var);
        return -1;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_RDONLY);
        /* If the test process dies (a ctest timeout kills it), so does its
         * onced: no orphan keeps a data dir or an ipc path alive. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1) {
            _exit(127);
        }
        if (null >= 0) {
            dup2(null, 0);
        }
        dup2(fd, 1);
        dup2(fd, 2);
        spawn_exec(bin, argv, envp);
        _exit(127);
    }
    close(fd);
    free(envp);
    free(fault_var);
    h->pid = pid;
    h->starts++;
    return 0;
}

/* One Stats probe: does onced answer with an OK Response (or, when it
 * authenticates requests, with UNAUTHENTICATED to this unsigned one)?
 * It waits up to wait_ms: a probe that gives up while onced is still in
 * its handshake hangs up mid-handshake, which ends an ipc listener in nng
 * 1.5.2 (onced's watch then listens again, closing what it held). */
static bool
probe(const harness *h, int wait_ms)
{
    uint8_t *req = NULL;
    size_t len;
    Once__V1__Response *r = NULL;
    bool ok = false;

    if (harness_envelope("/once.v1.Admin/Stats", 0, 0, NULL, 0, &req, &len) !=
        0) {
        return false;
    }
    if (harness_raw_rpc(h->url, req, len, &r, wait_ms) == 0) {
        ok = r->status == NULL || r->status->code == ONCE__V1__CODE__OK ||
             r->status->code == ONCE__V1__CODE__UNAUTHENTICATED;
        once__v1__response__free_unpacked(r, NULL);
    }
    free(req);
    return ok;
}

/* Whether h's onced takes an HTTP listener (--http-listen,
 * --metrics-listen): those open after its nng ones (server/main.c). */
static bool
has_http(const harness *h)
{
    for (int i = 0; i < HARNESS_MAX_ARGS && h->args[i] != NULL; i++) {
        if (strcmp(h->args[i], "--http-listen") == 0 ||
            strcmp(h->args[i], "--metrics-listen") == 0) {
            return true;
        }
    }
    return false;
}

/* Whether h's log holds the line this onced (pid) writes when every
 * listener is open: "ready (pid N)". */
static bool
logged_ready(const harness *h)
{
    char want[48], line[1024];
    bool seen = false;
    FILE *f = fopen(h->log, "r");

    snprintf(want, sizeof(want), "ready (pid %ld)", (long)h->pid);
    while (f != NULL && !seen && fgets(line, sizeof(line), f) != NULL) {
        seen = strstr(line, want) != NULL;
    }
    if (f != NULL) {
        fclose(f);
    }
    return seen;
}

static int
wait_ready(harness *h)
{
    /* Under a wrapper (make valgrind) onced starts many times slower, and
     * the more so beside other suites: three times the wait. */
    int64_t ready_ms = getenv("ONCE_TEST_ONCED_WRAPPER") != NULL
                           ? 3 * HARNESS_READY_MS
                           : HARNESS_READY_MS;
    int64_t deadline = harness_now_ms() + ready_ms;
    /* Each probe waits long enough for a handshake on a loaded machine or
     * under a wrapper (it waits only once onced listens, and returns at
     * its answer): a probe that gives up mid-handshake ends an nng 1.5.2
     * ipc listener (server/listen_watch.h), which onced then restarts,
     * closing what its first clients opened. */
    int probe_ms = 3000;

    for (int i = 0; i < 3000 && harness_now_ms() < deadline; i++) {
        int status;
        pid_t w = waitpid(h->pid, &status, WNOHANG);
        if (w == h->pid) {
            fprintf(stderr,
                    "harness: onced exited before it was ready "
                    "(status 0x%x)\n",
                    status);
            h->pid = 0;
            harness_dump_log(h);
            return -1;
        }
        /* Stats over nng can answer before the HTTP listeners accept
         * (seen under valgrind: test_metrics' curl refused at once). */
        if (probe(h, probe_ms) && (!has_http(h) || logged_ready(h))) {
            return 0;
        }
        harness_sleep_ms(20);
    }
    fprintf(stderr,
            "harness: onced did not answer on %s (and log ready, with an "
            "HTTP listener) within %lld ms\n",
            h->url, (long long)ready_ms);
    harness_dump_log(h);
    return -1;
}

int
harness_start(harness **hp)
{
    return harness_start_args(hp, NULL);
}

int
harness_start_args(harness **hp, const char *const *args)
{
    return harness_start_onced(hp, NULL, args);
}

/* nng 1.5.2 initialises itself on first use without synchronisation; the
 * test's own threads (loads, proxies of libonce) may make their first nng
 * calls at once. Initialised here, on the test's main thread, before any
 * of them starts (raw ipc calls no longer touch nng: sp_ipc.c). */
static void
harness_nng_init(void)
{
    static atomic_bool done;
    nng_socket s;

    if (!atomic_exchange(&done, true) && nng_req0_open(&s) == 0) {
        nng_close(s);
    }
}

int
harness_start_onced(harness **hp, const char *onced, const char *const *args)
{
    harness *h;
    int n = atomic_fetch_add(&harness_seq, 1);

    harness_nng_init();

    if ((h = calloc(1, sizeof(*h))) == NULL) {
        return -1;
    }
    if (onced != NULL) {
        if (strlen(onced) >= sizeof(h->onced)) {
            free(h);
            return -1;
        }
        snprintf(h->onced, sizeof(h->onced), "%s", onced);
    }
    for (int i = 0; args != NULL && args[i] != NULL; i++) {
        if (i == HARNESS_MAX_ARGS || (h->args[i] = strdup(args[i])) == NULL) {
            fprintf(stderr, "harness: too many onced arguments (max %d)\n",
                    HARNESS_MAX_ARGS);
            for (int k = 0; k < i; k++) {
                free(h->args[k]);
            }
            free(h);
            return -1;
        }
    }
    snprintf(h->dir, sizeof(h->dir), "/tmp/once-test-XXXXXX");
    if (mkdtemp(h->dir) == NULL) {
        perror("harness: mkdtemp");
        free(h);
        return -1;
    }
    snprintf(h->data, sizeof(h->data), "%s/data", h->dir);
    snprintf(h->log, sizeof(h->log), "%s/onced.log", h->dir);
    snprintf(h->path, sizeof(h->path), "/tmp/once-test-%ld-%d.ipc",
             (long)getpid(), n);
    snprintf(h->url, sizeof(h->url), "ipc://%s", h->path);
    unlink(h->path); /* a leftover of an earlier process with our pid */
    if (mkdir(h->data, 0700) != 0) {
        perror("harness: mkdir data");
        harness_free(h);
        return -1;
    }
    if (spawn(h) != 0 || wait_ready(h) != 0) {
        harness_free(h);
        return -1;
    }
    *hp = h;
    return 0;
}

int
harness_restart(harness *h)
{
    if (h->pid != 0) {
        fprintf(stderr, "harness: restart while onced %ld still runs\n",
                (long)h->pid);
        return -1;
    }
    if (spawn(h) != 0) {
        return -1;
    }
    return wait_ready(h);
}

/* Waits up to ms for the child; returns 1 and fills *status when reaped. */
static int
reap(harness *h, int ms, int *status)
{
    int64_t deadline = harness_now_ms() + ms;

    for (int i = 0; i < 100000; i++) {
        pid_t w = waitpid(h->pid, status, WNOHANG);
        if (w == h->pid || (w < 0 && errno == ECHILD)) {
            h->pid = 0;
            return 1;
        }
        if (harness_now_ms() >= deadline) {
            break;
        }
        harness_sleep_ms(5);
    }
    return 0;
}

bool
harness_wait_stopped(pid_t pid)
{
    char path[64];

    snprintf(path, sizeof(path), "/proc/%ld/task", (long)pid);
    for (int i = 0; i < 10000 / 5; i++) {
        DIR *d = opendir(path);
        struct dirent *e;
        bool all = d != NULL;

        while (d != NULL && (e = readdir(d)) != NULL) {
            char stat[400], buf[512], *p;
            FILE *f;
            if (e->d_name[0] == '.') {
                continue;
            }
            snprintf(stat, sizeof(stat), "%s/%s/stat", path, e->d_name);
            if ((f = fopen(stat, "r")) == NULL) {
                continue;
            }
            if (fgets(buf, sizeof(buf), f) != NULL &&
                (p = strrchr(buf, ')')) != NULL && p[1] == ' ' && p[2] != 'T' &&
                p[2] != 't') {
                all = false;
            }
            fclose(f);
        }
        if (d != NULL) {
            closedir(d);
        }
        if (all) {
            return true;
        }
        harness_sleep_ms(5);
    }
    return false;
}

void
harness_pause(harness *h)
{
    assert_int_equal(kill(h->pid, SIGSTOP), 0);
    if (!harness_wait_stopped(h->pid)) {
        kill(h->pid, SIGCONT); /* the teardown's SIGTERM must get through */
        fail_msg("onced (pid %ld) did not stop", (long)h->pid);
    }
}

/* Prints every thread's stack of the running onced to stderr, for a stop
 * that hung (through valgrind's gdbserver when it runs under valgrind's
 * wrapper). */
static void
harness_dump_stacks(harness *h)
{
    const char *w = getenv("ONCE_TEST_ONCED_WRAPPER");
    bool vg = w != NULL && strstr(w, "valgrind") != NULL;

    watchdog_dump(h->pid, "the onced that did not stop",
                  vg ? spawn_bin(h) : NULL);
}

int
harness_kill(harness *h, int sig)
{
    int status = 0;

    if (h == NULL || h->pid == 0) {
        return -1;
    }
    kill(h->pid, sig);
    if (!reap(h, HARNESS_STOP_MS, &status)) {
        fprintf(stderr, "harness: onced ignored signal %d for %d ms\n", sig,
                HARNESS_STOP_MS);
        harness_dump_stacks(h);
        kill(h->pid, SIGKILL);
        reap(h, HARNESS_STOP_MS, &status);
        return -1;
    }
    return status;
}

int
harness_set_fault(harness *h, const char *fault)
{
    if (fault == NULL) {
        fault = "";
    }
    if (strlen(fault) >= sizeof(h->fault)) {
        return -1;
    }
    snprintf(h->fault, sizeof(h->fault), "%s", fault);
    return 0;
}

int
harness_wait_exit(harness *h, int ms)
{
    int status = 0;

    if (h == NULL || h->pid == 0) {
        return -1;
    }
    return reap(h, ms, &status) ? status : -1;
}

int
harness_stop(harness *h)
{
    int status = harness_kill(h, SIGTERM);

    if (status == -1) {
        harness_dump_log(h);
        return -1;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        return 0;
    }
    if (WIFEXITED(status)) {
        fprintf(stderr, "harness: onced exited with status %d on SIGTERM\n",
                WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        fprintf(stderr, "harness: onced died of signal %d on SIGTERM\n",
                WTERMSIG(status));
    }
    harness_dump_log(h);
    return -1;
}

void
harness_free(harness *h)
{
    if (h == NULL) {
        return;
    }
    if (h->pid != 0) {
        harness_kill(h, SIGKILL);
    }
    if (getenv("ONCE_TEST_KEEP") == NULL) {
        sys_rm_tree(h->dir);
    } else {
        fprintf(stderr, "harness: keeping %s\n", h->dir);
    }
    unlink(h->path);
    for (int i = 0; i < HARNESS_MAX_ARGS && h->args[i] != NULL; i++) {
        free(h->args[i]);
    }
    free(h);
}

int
harness_client(const harness *h, bool no_lease, once_client **cp)
{
    once_options o;
    once_status st;
    int rv;

    once_options_init(&o);
    o.url = h->url;
    o.no_lease = no_lease;
    o.lease_ttl_ms = 120000;
    o.deadline_ms = 20000;
    if ((rv = once_client_open(cp, &o, &st)) != ONCE_OK) {
        fprintf(stderr, "harness: once_client_open(%s): %s %s %s\n", h->url,
                once_strerror(rv), st.reason, st.message);
    }
    return rv;
}

int
harness_setup(void **state)
{
    return harness_setup_args(state, NULL);
}

int
harness_setup_args(void **state, const char *const *args)
{
    harness *h;

    if (harness_start_args(&h, args) != 0) {
        return -1;
    }
    *state = h;
    return 0;
}

const char *const harness_no_gc[] = {"--gc-interval", "1h", NULL};

int
harness_setup_no_gc(void **state)
{
    return harness_setup_args(state, harness_no_gc);
}

int
harness_teardown(void **state)
{
    harness *h = *state;
    int rv = 0;

    if (h != NULL && h->pid != 0) {
        rv = harness_stop(h);
    }
    harness_free(h);
    *state = NULL;
    return rv;
}

/* ---- checked libonce calls ------------------------------------------- */

void
harness_stats(once_client *c, once_stats *s)
{
    once_status st;
    int rv = once_admin_stats(c, s, &st);
    if (rv != ONCE_OK) {
        print_error("once_admin_stats: %s %s %s\n", once_strerror(rv),
                    st.reason, st.message);
    }
    assert_int_equal(rv, ONCE_OK);
}

int
harness_stats_all(once_client *c, Once__V1__StatsResponse **out)
{
    void *resp = NULL;
    size_t len = 0;
    once_status st;
    int rv;

    *out = NULL;
    if ((rv = once_call(c, "/once.v1.Admin/Stats", false, NULL, NULL, 0, &resp,
                        &len, &st)) != ONCE_OK) {
        return rv;
    }
    *out = once__v1__stats_response__unpack(NULL, len, resp);
    once_free(resp);
    assert_non_null(*out);
    return ONCE_OK;
}

uint64_t
harness_batch_entries(const harness *h)
{
    Once__V1__StatsResponse *r = NULL;
    once_client *c = NULL;
    uint64_t n = 0;

    if (harness_client(h, true, &c) != ONCE_OK) {
        return 0;
    }
    if (harness_stats_all(c, &r) == ONCE_OK) {
        n = r->batch_entries;
        once__v1__stats_response__free_unpacked(r, NULL);
    }
    once_client_close(c);
    return n;
}

void
harness_collector_stats(once_client *c, once_stats *s, once_collector_stats *cs)
{
    once_status st;
    int rv = once_admin_collector_stats(c, s, cs, &st);
    if (rv != ONCE_OK) {
        print_error("once_admin_collector_stats: %s %s %s\n", once_strerror(rv),
                    st.reason, st.message);
    }
    assert_int_equal(rv, ONCE_OK);
}

static int
harness_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return x < y ? -1 : x > y;
}

void
harness_probe_run(once_client *c, const char *name, int period_ms,
                  int64_t dur_ms, int max, harness_calls *p)
{
    enum { PROBE_MAX = 4096 };
    static int64_t lat[PROBE_MAX]; /* the test's own thread only */
    int64_t end = harness_now_ms() + dur_ms;

    memset(p, 0, sizeof(*p));
    max = max < PROBE_MAX ? max : PROBE_MAX;
    while (p->calls < max && harness_now_ms() < end) {
        once_rpc_id id = {0, 0};
        once_status st;
        int64_t v, t0 = harness_now_ms(), dt;
        int rc = once_counter_incr(c, name, 1, &id, &v, &st);

        dt = harness_now_ms() - t0;
        lat[p->calls++] = dt;
        if (rc == ONCE_OK) {
            p->ok++;
        } else {
            printf("  probe call %d: code %d %s (%s) after %lld ms\n", p->calls,
                   rc, st.reason, st.message, (long long)dt);
        }
        p->worst_ms = dt > p->worst_ms ? dt : p->worst_ms;
        if (dt < period_ms) {
            harness_sleep_ms((int)(period_ms - dt));
        }
    }
    if (p->calls > 0) {
        qsort(lat, (size_t)p->calls, sizeof(lat[0]), harness_cmp_i64);
        p->median_ms = lat[p->calls / 2];
    }
}

int64_t
harness_get(once_client *c, const char *name)
{
    once_status st;
    int64_t v = -1;
    int rv = once_counter_get(c, name, &v, &st);
    if (rv != ONCE_OK) {
        print_error("once_counter_get(%s): %s %s %s\n", name, once_strerror(rv),
                    st.reason, st.message);
    }
    assert_int_equal(rv, ONCE_OK);
    return v;
}

int64_t
harness_counter(const harness *h, const char *name)
{
    once_client *c = NULL;
    int64_t v;

    assert_int_equal(harness_client(h, true, &c), ONCE_OK);
    v = harness_get(c, name);
    once_client_close(c);
    return v;
}

int64_t
harness_raw_counter(const char *url, const char *name)
{
    Once__V1__GetRequest gr = ONCE__V1__GET_REQUEST__INIT;
    Once__V1__Response *resp = NULL;
    Once__V1__GetResponse *v;
    uint8_t pl[512], *env = NULL;
    size_t plen, elen;
    int64_t value;

    gr.name = (char *)name;
    plen = once__v1__get_request__pack(&gr, pl);
    assert_int_equal(
        harness_envelope("/once.v1.Counter/Get", 0, 0, pl, plen, &env, &elen),
        0);
    assert_int_equal(harness_raw_rpc(url, env, elen, &resp, 3000), 0);
    free(env);
    assert_non_null(resp->status);
    assert_int_equal(resp->status->code, ONCE__V1__CODE__OK);
    v = once__v1__get_response__unpack(NULL, resp->payload.len,
                                       resp->payload.data);
    assert_non_null(v);
    value = v->value;
    once__v1__get_response__free_unpacked(v, NULL);
    once__v1__response__free_unpacked(resp, NULL);
    return value;
}

void
harness_lease_info(once_client *c, uint64_t cid, struct once_lease_info *li)
{
    once_status st;
    int rv = once_lease_info(c, cid, li, &st);
    if (rv != ONCE_OK) {
        print_error("once_lease_info(%llu): %s %s %s\n",
                    (unsigned long long)cid, once_strerror(rv), st.reason,
                    st.message);
    }
    assert_int_equal(rv, ONCE_OK);
}

int
harness_incr_id(once_client *c, const char *name, int64_t by, uint64_t cid,
                uint64_t seq, int64_t *value, once_status *st)
{
    once_rpc_id id = {cid, seq};

    *value = -1;
    memset(st, 0, sizeof(*st));
    return once_counter_incr(c, name, by, &id, value, st);
}

/* ---- raw envelopes ------------------------------------------------------- */

int
harness_raw_call(const char *url, const void *req, size_t len, uint8_t **resp,
                 size_t *resp_len, int timeout_ms)
{
    nng_socket s;
    nng_msg *m = NULL;
    int rv;

    *resp = NULL;
    *resp_len = 0;
    /* ipc: by hand over AF_UNIX, with no nng socket to close (nng 1.5.2's
     * close hung for good here, under TSan, while replicas restarted: each
     * leader probe then cost the 5 s bound below and test_replication ran
     * past its 600 s). */
    if (strncmp(url, "ipc://", 6) == 0) {
        return sp_ipc_call(url + 6, req, len, resp, resp_len, timeout_ms);
    }
    if ((rv = nng_req0_open(&s)) != 0) {
        return rv;
    }
    nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, timeout_ms);
    nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, timeout_ms);
    /* The REQ socket must not resend on its own within one call. */
    nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME, 3600 * 1000);
    nng_socket_set_size(s, NNG_OPT_RECVMAXSZ, 16 << 20);
    if ((rv = nng_dial(s, url, NULL, 0)) != 0) {
        goto out;
    }
    if ((rv = nng_msg_alloc(&m, 0)) != 0 ||
        (rv = nng_msg_append(m, req, len)) != 0) {
        goto out;
    }
    if ((rv = nng_sendmsg(s, m, 0)) != 0) {
        goto out;
    }
    m = NULL; /* the socket owns it now */
    if ((rv = nng_recvmsg(s, &m, 0)) != 0) {
        goto out;
    }
    *resp_len = nng_msg_len(m);
    if ((*resp = malloc(*resp_len > 0 ? *resp_len : 1)) == NULL) {
        rv = NNG_ENOMEM;
        goto out;
    }
    memcpy(*resp, nng_msg_body(m), *resp_len);
out:
    nng_msg_free(m);
    /* nng 1.5.2's close can wait for good for a pipe (seen here under
     * TSan, a replica restarting): bounded; main ends with harness_exit. */
    harness_close_bounded(s, "a raw call's socket", 5000);
    return rv;
}

/* ---- closing a socket that may hang ------------------------------------ */

static atomic_bool harness_left_behind; /* a close never returned */

typedef struct harness_closer {
    nng_socket sock;
    atomic_bool done;
} harness_closer;

static void *
harness_close_main(void *arg)
{
    harness_closer *hc = arg;

    nng_close(hc->sock);
    atomic_store(&hc->done, true);
    return NULL;
}

bool
harness_close_bounded(nng_socket sock, const char *what, int wait_ms)
{
    harness_closer *hc = calloc(1, sizeof(*hc));
    pthread_t t;

    if (hc != NULL) {
        hc->sock = sock;
    }
    if (hc == NULL || pthread_create(&t, NULL, harness_close_main, hc) != 0) {
        free(hc);
        nng_close(sock); /* no thread to spare: unbounded */
        return true;
    }
    for (int ms = 0; ms < wait_ms && !atomic_load(&hc->done); ms += 10) {
        harness_sleep_ms(10);
    }
    if (!atomic_load(&hc->done)) {
        print_message("  nng_close of %s did not return in %d ms; left to "
                      "the process exit\n",
                      what, wait_ms);
        pthread_detach(t);
        atomic_store(&harness_left_behind, true);
        return false; /* hc stays: the closer still uses it */
    }
    pthread_join(t, NULL);
    free(hc);
    return true;
}

int
harness_sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    return system(cmd);
}

int
harness_exit(int rc)
{
    if (atomic_load(&harness_left_behind)) {
        fflush(NULL);
        _exit(rc);
    }
    return rc;
}

int
harness_envelope(const char *method, uint64_t client_id, uint64_t seq,
                 const void *payload, size_t payload_len, uint8_t **out,
                 size_t *out_len)
{
    return harness_envelope_fi(method, client_id, seq, 0, payload, payload_len,
                               out, out_len);
}

int
harness_envelope_fi(const char *method, uint64_t client_id, uint64_t seq,
                    uint64_t fi, const void *payload, size_t payload_len,
                    uint8_t **out, size_t *out_len)
{
    Once__V1__Request r = ONCE__V1__REQUEST__INIT;
    size_t len;

    r.method = (char *)method;
    r.client_id = client_id;
    r.seq = seq;
    r.first_incomplete = fi;
    r.attempt = 1;
    r.principal = "anonymous";
    r.payload.data = (uint8_t *)payload;
    r.payload.len = payload != NULL ? payload_len : 0;
    len = once__v1__request__get_packed_size(&r);
    if ((*out = malloc(len > 0 ? len : 1)) == NULL) {
        return -1;
    }
    *out_len = once__v1__request__pack(&r, *out);
    return 0;
}

int
harness_batch_envelope(uint8_t *const *entries, const size_t *lens, size_t n,
                       uint8_t **out, size_t *out_len)
{
    Once__V1__BatchRequest br = ONCE__V1__BATCH_REQUEST__INIT;
    ProtobufCBinaryData *ents = calloc(n > 0 ? n : 1, sizeof(*ents));
    uint8_t *p = NULL;
    size_t plen;
    int rv = -1;

    if (ents == NULL) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        ents[i].data = entries[i];
        ents[i].len = lens[i];
    }
    br.n_entries = n;
    br.entries = ents;
    plen = once__v1__batch_request__get_packed_size(&br);
    if ((p = malloc(plen > 0 ? plen : 1)) != NULL) {
        once__v1__batch_request__pack(&br, p);
        rv = harness_envelope(WIRE_BATCH_METHOD, 0, 0, p, plen, out, out_len);
    }
    free(p);
    free(ents);
    return rv;
}

int
harness_incr_payload(const char *name, int64_t by, uint8_t **out,
                     size_t *out_len)
{
    Once__V1__IncrementRequest r = ONCE__V1__INCREMENT_REQUEST__INIT;
    size_t len;

    r.name = (char *)name;
    r.by = by;
    len = once__v1__increment_request__get_packed_size(&r);
    if ((*out = malloc(len > 0 ? len : 1)) == NULL) {
        return -1;
    }
    *out_len = once__v1__increment_request__pack(&r, *out);
    return 0;
}

int
harness_raw_rpc(const char *url, const void *req, size_t len,
                Once__V1__Response **rp, int timeout_ms)
{
    uint8_t *buf;
    size_t blen;
    int rv;

    *rp = NULL;
    if ((rv = harness_raw_call(url, req, len, &buf, &blen, timeout_ms)) != 0) {
        return rv;
    }
    *rp = once__v1__response__unpack(NULL, blen, buf);
    free(buf);
    return *rp != NULL ? 0 : -1;
}

extern char **environ;

int
harness_run(const char *prog, const char *const *args, char *out, size_t cap,
            size_t *outlen)
{
    char *argv[32] = {(char *)prog};
    char drop[256], none[1];
    posix_spawn_file_actions_t fa;
    int n = 1, p[2], st;
    size_t len = 0;
    ssize_t r;
    pid_t pid;

    if (out == NULL) {
        out = none;
        cap = sizeof(none);
    }
    for (int i = 0; args[i] != NULL && n < 31; i++) {
        argv[n++] = (char *)args[i];
    }
    argv[n] = NULL;
    assert_int_equal(pipe(p), 0);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_addclose(&fa, p[0]);
    assert_int_equal(posix_spawn(&pid, argv[0], &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    for (;;) { /* what does not fit in out is read and dropped */
        bool room = len + 1 < cap;

        if ((r = read(p[0], room ? out + len : drop,
                      room ? cap - 1 - len : sizeof(drop))) <= 0) {
            break;
        }
        len += room ? (size_t)r : 0;
    }
    out[len] = '\0';
    close(p[0]);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    if (outlen != NULL) {
        *outlen = len;
    }
    return WEXITSTATUS(st);
}

int
harness_oncectl_run(const char *const *args, char *out, size_t cap,
                    size_t *outlen)
{
    return harness_run(ONCECTL_PATH, args, out, cap, outlen);
}

int
harness_oncectl(const harness *h, const char *key, char *out, size_t cap,
                size_t *outlen, const char *const *args)
{
    const char *argv[32] = {"--server", h->url, "--json"};
    int n = 3, rv;

    if (key != NULL) {
        argv[n++] = "--key-file";
        argv[n++] = key;
    }
    for (int i = 0; args[i] != NULL && n < 31; i++) {
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    rv = harness_oncectl_run(argv, out, cap, outlen);
    print_message(
        "  oncectl %s %s %s → %d %s", args[0],
        args[0] != NULL && args[1] != NULL ? args[1] : "",
        args[0] != NULL && args[1] != NULL && args[2] != NULL ? args[2] : "",
        rv, out);
    return rv;
}

int
harness_client_as(const harness *h, const char *name, bool no_lease,
                  once_client **cp, once_status *st)
{
    once_options o;
    once_security sec;
    char kp[512];

    snprintf(kp, sizeof(kp), "%s/%s.key", h->dir, name);
    once_options_init(&o);
    once_security_init(&sec);
    o.url = h->url;
    o.no_lease = no_lease;
    o.lease_ttl_ms = 120000;
    o.deadline_ms = 5000;
    o.max_attempts = 3;
    sec.key_file = kp;
    return once_client_open_secure(cp, &o, &sec, st);
}

void
harness_write_policy(const harness *h, const char *text)
{
    char path[400], tmp[420];
    FILE *f;

    snprintf(path, sizeof(path), "%s/policy", h->data);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    assert_non_null(f = fopen(tmp, "w"));
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(tmp, 0600), 0);
    assert_int_equal(rename(tmp, path), 0);
}

void
harness_add_principal_nowait(const harness *h, const char *name,
                             const char *role)
{
    char kp[512];
    const char *args[] = {"principal", "add",   name,        "--role", role,
                          "--data",    h->data, "--key-out", kp,       NULL};

    snprintf(kp, sizeof(kp), "%s/%s.key", h->dir, name);
    assert_int_equal(harness_oncectl_run(args, NULL, 0, NULL), 0);
}

/* The code of a Counter/Get signed as name (key DIR/name.key), or unsigned
 * when name is NULL; -1 when onced did not answer. Reads only. */
static int
harness_probe(const harness *h, const char *name)
{
    Once__V1__GetRequest g = ONCE__V1__GET_REQUEST__INIT;
    Once__V1__Request r = ONCE__V1__REQUEST__INIT;
    Once__V1__Response *resp = NULL;
    uint8_t pl[64], *req;
    size_t len;
    int code = -1;

    g.name = "harness-probe";
    r.method = "/once.v1.Counter/Get";
    r.attempt = 1;
    r.principal = (char *)(name != NULL ? name : "anonymous");
    r.payload.data = pl;
    r.payload.len = once__v1__get_request__pack(&g, pl);
    len = once__v1__request__get_packed_size(&r);
    assert_non_null(req = malloc(len + AUTH_TAG_TRAILER));
    once__v1__request__pack(&r, req);
    if (name != NULL) {
        len = harness_sign(h, name, req, len);
    }
    if (harness_raw_rpc(h->url, req, len, &resp, 2000) == 0) {
        code = resp->status != NULL ? (int)resp->status->code : 0;
        once__v1__response__free_unpacked(resp, NULL);
    }
    free(req);
    return code;
}

size_t
harness_sign(const harness *h, const char *name, uint8_t *buf, size_t len)
{
    char kp[512], kname[PRINCIPAL_NAME_MAX + 1], err[256];
    uint8_t key[AUTH_KEY_BYTES];

    snprintf(kp, sizeof(kp), "%s/%s.key", h->dir, name);
    assert_int_equal(keyfile_read(kp, kname, key, err, sizeof(err)), 0);
    auth_tag_append(buf, len, key);
    return len + AUTH_TAG_TRAILER;
}

void
harness_add_principal(const harness *h, const char *name, const char *role)
{
    int64_t end;

    harness_add_principal_nowait(h, name, role);
    if (h->pid == 0) {
        return;
    }
    /* authenticating, and name known (a refusal by policy still is) */
    end = harness_now_ms() + 20000;
    while (harness_now_ms() < end) {
        if (harness_probe(h, NULL) == ONCE__V1__CODE__UNAUTHENTICATED) {
            int code = harness_probe(h, name);
            if (code >= 0 && code != ONCE__V1__CODE__UNAUTHENTICATED) {
                return;
            }
        }
        harness_sleep_ms(20);
    }
    harness_dump_log(h);
    fail_msg("onced never put principal %s in force", name);
}

int
harness_free_port(void)
{
    return sys_free_port();
}
