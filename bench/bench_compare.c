/*
 * bench_compare.c — durable exactly-once increments/s and p50/p99 latency of
 * once side by side, in one run on one machine, with what users would
 * otherwise pick, and with the raw limits under it (docs/performance.md):
 *
 *   once      onced + libonce, one once_client per caller      (peer_once.c)
 *   redis     Redis 7, appendfsync always, Lua SET NX + INCRBY (peer_redis.c)
 *   postgres  PostgreSQL 15, synchronous_commit=on, the
 *             idempotency-key transaction (peer_postgres.c) echo      a bare
 * nng REQ/REP echo: the transport's limit   (peer_echo.c) leveldb   LevelDB
 * synced puts: the disk's limit            (peer_leveldb.c)
 *
 * Owns: the run. It makes one temp dir, starts every selected system in a
 * folder of it (Redis and PostgreSQL on sockets in that folder, nothing on
 * TCP), and then, for each concurrency level, runs each system in turn for
 * --seconds with N caller threads, each with its own connection. Systems
 * alternate within a level, so the noise of a busy machine falls on all of
 * them alike. It prints one table with the once/peer ratios, writes a CSV
 * (rows sorted by system, then callers) and draws a PNG with gnuplot
 * (bench/plot/compare.gp).
 * Invariant: the same durability for all — no call returns before its
 * effect is on disk (the echo excepted: it is the transport floor). After
 * each level of an exactly-once system, every caller resends its last call
 * (it must come back as a replay with the same value) and the counters are
 * read back: they must hold exactly the calls that returned OK.
 * Never: runs unbounded (every loop ends on its count or deadline), counts a
 * call that did not return OK, or leaves a server running.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_env.h"
#include "tests/sys_helpers.h"
#include "bench/compare_peer.h"
#include "bench/compare_proc.h"

#ifndef ONCED_PATH
#define ONCED_PATH "onced"
#endif
#ifndef COMPARE_GP
#define COMPARE_GP "bench/plot/compare.gp"
#endif
#ifndef BENCH_DEPS
#define BENCH_DEPS "scripts/bench-deps.sh"
#endif

#define MAX_LEVELS             8
#define MAX_CALLERS            256
#define MAX_CALLS_PER_CALLER   20000000L /* the time limit ends runs first */
#define MAX_SAMPLES_PER_CALLER (2L << 20)
#define DEPS_TIMEOUT_MS        (20 * 60 * 1000)
#define GNUPLOT_TIMEOUT_MS     60000

static const compare_peer *const all_peers[] = {
    &compare_peer_once,
    &compare_peer_redis,
    &compare_peer_postgres,
    &compare_peer_echo,
    &compare_peer_leveldb,
    &compare_peer_etcd,
    &compare_peer_once_repl,
    &compare_peer_once_shared,
    &compare_peer_once_async,
    &compare_peer_once_http,
    /* --workload job (job_row.h): a job row per caller, read-modify-written
     * under its version with an idempotency key */
    &compare_peer_redis_job,
    &compare_peer_postgres_job,
    &compare_peer_etcd_job,
    &compare_peer_once_kv,
    &compare_peer_once_kv_async,
    &compare_peer_once_kv_repl,
};
#define NPEERS ((int)(sizeof(all_peers) / sizeof(all_peers[0])))

/* ---- options ------------------------------------------------------------- */

static struct {
    int levels[MAX_LEVELS];
    int nlevels;
    int seconds;
    bool selected[NPEERS];
    bool systems_given; /* --systems: it decides, not --workload */
    bool job_workload;  /* --workload job */
    const char *csv;
    const char *png; /* NULL: next to the CSV; "none": no plot */
    const char *plot_script;
    const char *onced;
    const char *pg_bin;
    const char *pg_mode;
    const char *redis_bin;
    int echo_bytes;
    int put_bytes;
    bool one_counter;
    bool install;
    bool keep;
} opt = {
    .levels = {1, 16, 64},
    .nlevels = 3,
    .seconds = 5,
    .csv = "compare.csv",
    .plot_script = COMPARE_GP,
    .onced = ONCED_PATH,
    .pg_bin = "/usr/lib/postgresql/15/bin",
    .pg_mode = "function",
    .redis_bin = "/usr/bin/redis-server",
    .echo_bytes = 64,
    .put_bytes = 128,
    .install = true,
};

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: bench_compare [options]\n"
            "\n"
            "Durable exactly-once increments/s and p50/p99 latency of once\n"
            "beside Redis and PostgreSQL, and the raw limits under it, in one\n"
            "run on this machine, at each concurrency level:\n"
            "\n");
    for (int i = 0; i < NPEERS; i++) {
        fprintf(f, "  %-15s %s\n", all_peers[i]->name, all_peers[i]->what);
    }
    fprintf(
        f,
        "\n"
        "Redis and PostgreSQL are started here on sockets in a temp dir\n"
        "(missing Debian packages are installed by %s).\n"
        "Nothing is acknowledged before it is on disk.\n"
        "\n"
        "  --callers LIST      concurrency levels (default 1,16,64)\n"
        "  --seconds S         per system and level (default 5)\n"
        "  --systems LIST      the systems above to run, by name (default:\n"
        "                      every system of the workload)\n"
        "  --workload W        'counter' (default): increments; 'job': the\n"
        "                      job transition (read the row, write it if\n"
        "                      still at that version, idempotency key) on\n"
        "                      the *-job systems and once KV, with the\n"
        "                      once counter as the latency reference\n"
        "  --csv FILE          results (default compare.csv)\n"
        "  --png FILE          plot (default: the CSV's name with .png;\n"
        "                      'none': no plot)\n"
        "  --plot-script FILE  gnuplot script (default %s)\n"
        "  --onced PATH        onced binary (default %s)\n"
        "  --redis-server PATH (default /usr/bin/redis-server)\n"
        "  --pg-bin DIR        initdb, pg_ctl (default "
        "/usr/lib/postgresql/15/bin)\n"
        "  --pg-mode MODE      'function' (default): the transaction in a\n"
        "                      PL/pgSQL function, one round trip per call;\n"
        "                      'statements': BEGIN, three prepared\n"
        "                      statements, COMMIT\n"
        "  --one-counter       all callers of a level increment one\n"
        "                      counter (default: one per caller)\n"
        "  --echo-bytes N      echo request size (default 64)\n"
        "  --put-bytes N       LevelDB value size (default 128)\n"
        "  --no-install        never run %s\n"
        "  --keep              keep the temp dir (logs, data)\n"
        "  --help              this text\n",
        BENCH_DEPS, COMPARE_GP, ONCED_PATH, BENCH_DEPS);
}

static int
parse_list(const char *s, int *out, int max, int lo, int hi)
{
    char *copy = strdup(s), *save = NULL, *tok;
    int n = 0;

    if (copy == NULL) {
        return -1;
    }
    for (tok = strtok_r(copy, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        char *end;
        long v = strtol(tok, &end, 10);
        if (*end != '\0' || v < lo || v > hi || n == max) {
            free(copy);
            return -1;
        }
        out[n++] = (int)v;
    }
    free(copy);
    return n;
}

static int
parse_systems(const char *s)
{
    char *copy = strdup(s), *save = NULL, *tok;
    int n = 0;

    if (copy == NULL) {
        return -1;
    }
    memset(opt.selected, 0, sizeof(opt.selected));
    for (tok = strtok_r(copy, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        int found = -1;
        for (int i = 0; i < NPEERS; i++) {
            if (strcmp(tok, all_peers[i]->name) == 0) {
                found = i;
            }
        }
        if (found < 0) {
            fprintf(stderr, "bench_compare: unknown system '%s'\n", tok);
            free(copy);
            return -1;
        }
        opt.selected[found] = true;
        n++;
    }
    free(copy);
    return n > 0 ? 0 : -1;
}

static int
parse_args(int argc, char **argv)
{
    static const struct option lo[] = {
        {"callers", required_argument, NULL, 'c'},
        {"seconds", required_argument, NULL, 's'},
        {"systems", required_argument, NULL, 'y'},
        {"workload", required_argument, NULL, 'w'},
        {"csv", required_argument, NULL, 'C'},
        {"png", required_argument, NULL, 'P'},
        {"plot-script", required_argument, NULL, 'g'},
        {"onced", required_argument, NULL, 'o'},
        {"redis-server", required_argument, NULL, 'r'},
        {"pg-bin", required_argument, NULL, 'b'},
        {"pg-mode", required_argument, NULL, 'm'},
        {"one-counter", no_argument, NULL, '1'},
        {"echo-bytes", required_argument, NULL, 'E'},
        {"put-bytes", required_argument, NULL, 'V'},
        {"no-install", no_argument, NULL, 'n'},
        {"keep", no_argument, NULL, 'k'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch, n;

    while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (ch) {
        case 'c':
            n = parse_list(optarg, opt.levels, MAX_LEVELS, 1, MAX_CALLERS);
            if (n <= 0) {
                fprintf(stderr,
                        "bench_compare: bad --callers '%s' (at most %d "
                        "levels of 1..%d)\n",
                        optarg, MAX_LEVELS, MAX_CALLERS);
                return -1;
            }
            opt.nlevels = n;
            break;
        case 's':
            opt.seconds = atoi(optarg);
            if (opt.seconds < 1 || opt.seconds > 3600) {
                fprintf(stderr, "bench_compare: --seconds 1..3600\n");
                return -1;
            }
            break;
        case 'y':
            if (parse_systems(optarg) != 0) {
                return -1;
            }
            opt.systems_given = true;
            break;
        case 'w':
            if (strcmp(optarg, "counter") != 0 && strcmp(optarg, "job") != 0) {
                fprintf(stderr, "bench_compare: --workload counter|job\n");
                return -1;
            }
            opt.job_workload = strcmp(optarg, "job") == 0;
            break;
        case 'C':
            opt.csv = optarg;
            break;
        case 'P':
            opt.png = optarg;
            break;
        case 'g':
            opt.plot_script = optarg;
            break;
        case 'o':
            opt.onced = optarg;
            break;
        case 'r':
            opt.redis_bin = optarg;
            break;
        case 'b':
            opt.pg_bin = optarg;
            break;
        case 'm':
            if (strcmp(optarg, "function") != 0 &&
                strcmp(optarg, "statements") != 0) {
                fprintf(stderr,
                        "bench_compare: --pg-mode function|statements\n");
                return -1;
            }
            opt.pg_mode = optarg;
            break;
        case '1':
            opt.one_counter = true;
            break;
        case 'E':
        case 'V':
            n = atoi(optarg);
            if (n < 1 || n > 65536) {
                fprintf(stderr, "bench_compare: sizes are 1..65536\n");
                return -1;
            }
            *(ch == 'E' ? &opt.echo_bytes : &opt.put_bytes) = n;
            break;
        case 'n':
            opt.install = false;
            break;
        case 'k':
            opt.keep = true;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return -1;
    }
    for (int i = 0; i < NPEERS && !opt.systems_given; i++) {
        opt.selected[i] =
            all_peers[i]->job == opt.job_workload ||
            (opt.job_workload && all_peers[i] == &compare_peer_once);
    }
    return 0;
}

/* ---- results ------------------------------------------------------------- */

typedef struct result {
    const compare_peer *peer;
    int callers;
    double seconds;
    int64_t calls; /* OK calls in the timed window */
    int64_t errors;
    double per_s;
    double p50_us;
    double p99_us;
    /* exactly-once peers: -1 not checked, 0 failed, 1 held */
    int counters_ok; /* counters == OK calls + warm-up calls */
    int replay_ok;   /* every last call came back replayed, same value */
    bool ran;
    /* Per OK call in the timed window; -1: not measured. cli: this
     * process (the callers and the client library), srv: the server's
     * threads (compare_peer.server_pid). */
    double cli_cpu_us, srv_cpu_us, cli_csw, srv_csw;
    double calls_per_fsync; /* -1: not counted */
} result;

/* CPU and context switches of both sides at one moment. */
typedef struct usage_mark {
    uint64_t cli_ns, cli_csw;
    uint64_t srv_ns, srv_csw;
    bool srv_ok;
    uint64_t fsyncs;
} usage_mark;

static void
usage_take(const compare_peer *peer, void *env, usage_mark *u)
{
    struct rusage ru;
    pid_t pid = peer->server_pid != NULL ? peer->server_pid(env) : 0;

    memset(u, 0, sizeof(*u));
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        u->cli_ns =
            ((uint64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) *
                1000000000ull +
            ((uint64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
        u->cli_csw = (uint64_t)ru.ru_nvcsw + (uint64_t)ru.ru_nivcsw;
    }
    u->srv_ok = pid > 0 && bench_proc_usage(pid, &u->srv_ns, &u->srv_csw) == 0;
    if (peer->server_fsyncs != NULL) {
        u->fsyncs = peer->server_fsyncs(env);
    }
}

/* The difference of two marks per call into r. */
static void
usage_per_call(const compare_peer *peer, const usage_mark *a,
               const usage_mark *b, result *r)
{
    double n = (double)r->calls;

    r->cli_cpu_us = r->srv_cpu_us = r->cli_csw = r->srv_csw = -1;
    r->calls_per_fsync = -1;
    if (n <= 0) {
        return;
    }
    r->cli_cpu_us = (double)(b->cli_ns - a->cli_ns) / 1000.0 / n;
    r->cli_csw = (double)(b->cli_csw - a->cli_csw) / n;
    if (a->srv_ok && b->srv_ok) {
        r->srv_cpu_us = (double)(b->srv_ns - a->srv_ns) / 1000.0 / n;
        r->srv_csw = (double)(b->srv_csw - a->srv_csw) / n;
    }
    if (peer->server_fsyncs != NULL && b->fsyncs > a->fsyncs) {
        r->calls_per_fsync = n / (double)(b->fsyncs - a->fsyncs);
    }
}

static result results[NPEERS][MAX_LEVELS];

/* ---- callers ------------------------------------------------------------- */

typedef struct caller {
    const compare_peer *peer;
    void *conn;
    compare_caller who;
    char counter[64];
    uint64_t next_n; /* the next call's number */
    int64_t last_value;
    int64_t *lat; /* ns, up to MAX_SAMPLES_PER_CALLER */
    int64_t nlat, cap;
    int64_t ok, errors;
    char first_err[COMPARE_ERR_LEN];
    pthread_t th;
} caller;

static atomic_bool stop_flag;   /* ends the timed window */
static atomic_bool interrupted; /* SIGINT/SIGTERM: end the run */

/* The start gate: callers wait on it so that all start together. */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool gate_open; /* gate_mu */

static void
gate_set(bool open)
{
    pthread_mutex_lock(&gate_mu);
    gate_open = open;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}

/* Waits for the gate, at most 60 s (then the caller runs anyway). */
static void
gate_wait(void)
{
    struct timespec until;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    pthread_mutex_lock(&gate_mu);
    while (!gate_open &&
           pthread_cond_timedwait(&gate_cv, &gate_mu, &until) == 0) {
    }
    pthread_mutex_unlock(&gate_mu);
}

static void
on_signal(int sig)
{
    (void)sig;
    atomic_store(&interrupted, true);
    atomic_store(&stop_flag, true);
}

static void
record(caller *k, int64_t ns)
{
    if (k->nlat == k->cap && k->cap < MAX_SAMPLES_PER_CALLER) {
        int64_t ncap = k->cap == 0 ? 4096 : k->cap * 2;
        int64_t *p = realloc(k->lat, (size_t)ncap * sizeof(*p));
        if (p != NULL) {
            k->lat = p;
            k->cap = ncap;
        }
    }
    if (k->nlat < k->cap) {
        k->lat[k->nlat++] = ns;
    }
}

/* One call, counted when it returns OK. */
static void
one_call(caller *k, bool timed)
{
    char err[COMPARE_ERR_LEN] = "";
    int64_t v = 0, t0 = bench_now_ns();
    int rv = k->peer->call(k->conn, k->next_n, &v, err);
    int64_t t1 = bench_now_ns();

    /* A failed call's number is never used again: with no answer, its
     * effect may or may not be there, and the counter check will say. */
    k->next_n++;
    if (rv == 0) {
        k->last_value = v;
        if (timed) {
            k->ok++;
            record(k, t1 - t0);
        }
    } else if (k->errors++ == 0) {
        snprintf(k->first_err, sizeof(k->first_err), "%s", err);
    }
}

/* One thread for all n callers of an async peer: each keeps one call in
 * flight (n in flight in all); the calls are waited for in the order they
 * were started, and each is started again as soon as it has ended. */
typedef struct async_driver {
    caller *ks;
    int n;
    pthread_t th;
} async_driver;

static void
async_failed(caller *k, const char *err)
{
    if (k->errors++ == 0) {
        snprintf(k->first_err, sizeof(k->first_err), "%s", err);
    }
}

static void *
async_driver_main(void *p)
{
    async_driver *d = p;
    int64_t *t0 = calloc((size_t)d->n, sizeof(*t0));
    bool *busy = calloc((size_t)d->n, sizeof(*busy));
    char err[COMPARE_ERR_LEN];
    int inflight = 0;

    if (t0 == NULL || busy == NULL) {
        free(t0);
        free(busy);
        return NULL;
    }
    gate_wait();
    for (int i = 0; i < d->n && !atomic_load(&stop_flag); i++) {
        caller *k = &d->ks[i];
        t0[i] = bench_now_ns();
        if (k->peer->call_start(k->conn, k->next_n++, err) == 0) {
            busy[i] = true;
            inflight++;
        } else {
            async_failed(k, err);
        }
    }
    for (long round = 0; inflight > 0 && round < MAX_CALLS_PER_CALLER;
         round++) {
        for (int i = 0; i < d->n; i++) {
            caller *k = &d->ks[i];
            int64_t v = 0;
            if (!busy[i]) {
                continue;
            }
            busy[i] = false;
            inflight--;
            if (k->peer->call_end(k->conn, &v, err) == 0) {
                k->last_value = v;
                k->ok++;
                record(k, bench_now_ns() - t0[i]);
            } else {
                async_failed(k, err);
            }
            if (atomic_load(&stop_flag)) {
                continue;
            }
            t0[i] = bench_now_ns();
            if (k->peer->call_start(k->conn, k->next_n++, err) == 0) {
                busy[i] = true;
                inflight++;
            } else {
                async_failed(k, err);
            }
        }
    }
    free(t0);
    free(busy);
    return NULL;
}

static void *
caller_main(void *p)
{
    caller *k = p;

    gate_wait();
    for (long i = 0; i < MAX_CALLS_PER_CALLER && !atomic_load(&stop_flag);
         i++) {
        one_call(k, true);
    }
    return NULL;
}

/* ---- one system at one level --------------------------------------------- */

static int run_index, run_total; /* for the progress bar */

/* A bar redrawn in place on a terminal; one line per run in a log. */
static void
progress(const compare_peer *peer, int n, double frac_of_run)
{
    static int last_run = -1;
    char label[48];

    snprintf(label, sizeof(label), "%s x%d", peer->name, n);
    if (isatty(STDERR_FILENO)) {
        bench_progress(label, (run_index + frac_of_run) / run_total, 0);
    } else if (last_run != run_index) {
        last_run = run_index;
        fprintf(stderr, "bench_compare: [%d/%d] %s for %d s\n", run_index + 1,
                run_total, label, opt.seconds);
    }
}

static void
summarize(caller *ks, int n, result *r)
{
    size_t nsamples = 0, at = 0;
    int64_t *all;

    for (int i = 0; i < n; i++) {
        r->calls += ks[i].ok;
        r->errors += ks[i].errors;
        nsamples += (size_t)ks[i].nlat;
    }
    r->per_s = r->seconds > 0 ? (double)r->calls / r->seconds : 0;
    if (nsamples == 0 || (all = malloc(nsamples * sizeof(*all))) == NULL) {
        return;
    }
    for (int i = 0; i < n; i++) {
        memcpy(all + at, ks[i].lat, (size_t)ks[i].nlat * sizeof(*all));
        at += (size_t)ks[i].nlat;
    }
    r->p50_us = bench_pct_us(all, nsamples, 50);
    r->p99_us = bench_pct_us(all, nsamples, 99);
    free(all);
}

/* Replays and counters, after the timed window. */
static void
check_effects(const compare_peer *peer, void *env, caller *ks, int n, result *r)
{
    char err[COMPARE_ERR_LEN] = "";
    int64_t want = 0, have = 0;

    r->replay_ok = peer->replay_last != NULL ? 1 : -1; /* -1: not checked */
    for (int i = 0; i < n && peer->replay_last != NULL; i++) {
        bool replayed = false;
        int64_t v = -1;
        if (peer->replay_last(ks[i].conn, &replayed, &v, err) != 0 ||
            !replayed || v != ks[i].last_value) {
            if (r->replay_ok) {
                fprintf(
                    stderr,
                    "\nbench_compare: %s x%d: caller %d's resend came "
                    "back %s with %" PRId64 " (first value %" PRId64 ") %s\n",
                    peer->name, n, i, replayed ? "replayed" : "NOT replayed", v,
                    ks[i].last_value, err);
            }
            r->replay_ok = 0;
        }
    }
    /* Every call that returned OK, timed or warm-up, once each. */
    r->counters_ok = 1;
    for (int i = 0; i < n; i++) {
        want += ks[i].ok + 1;
    }
    for (int i = 0; i < n; i++) {
        int64_t v = 0;
        if (opt.one_counter && i > 0) {
            break;
        }
        if (peer->read(env, ks[i].counter, &v, err) != 0) {
            fprintf(stderr, "\nbench_compare: %s: read %s: %s\n", peer->name,
                    ks[i].counter, err);
            r->counters_ok = -1; /* unchecked, said above: not a NO */
            return;
        }
        have += v;
    }
    if (have != want) {
        fprintf(stderr,
                "\nbench_compare: %s x%d: counters hold %" PRId64
                ", expected %" PRId64 " (%" PRId64 " OK calls + %d warm-up)\n",
                peer->name, n, have, want, r->calls, n);
        r->counters_ok = 0;
    }
}

static int
run_level(const compare_peer *peer, void *env, int level, int n, result *r)
{
    caller *ks = calloc((size_t)n, sizeof(*ks));
    char err[COMPARE_ERR_LEN] = "";
    int64_t t0, t1, deadline;
    int opened = 0, started = 0, rv = -1;
    async_driver driver;
    bool one_thread = false;
    usage_mark u0, u1;

    memset(r, 0, sizeof(*r));
    r->peer = peer;
    r->callers = n;
    r->counters_ok = r->replay_ok = -1;
    if (ks == NULL) {
        return -1;
    }
    for (int i = 0; i < n; i++) {
        caller *k = &ks[i];
        k->peer = peer;
        k->next_n = 1;
        snprintf(k->counter, sizeof(k->counter), "cmp/%d/%d", level,
                 opt.one_counter ? 0 : i);
        k->who.level = level;
        k->who.index = i;
        k->who.counter = k->counter;
        if (peer->open(env, &k->who, &k->conn, err) != 0) {
            fprintf(stderr, "\nbench_compare: %s: open caller %d: %s\n",
                    peer->name, i, err);
            goto out;
        }
        opened++;
        /* One warm-up call each, not timed: connection, lease, caches. */
        one_call(k, false);
        if (k->errors > 0) {
            fprintf(stderr, "\nbench_compare: %s: warm-up call: %s\n",
                    peer->name, k->first_err);
            goto out;
        }
    }

    atomic_store(&stop_flag, atomic_load(&interrupted));
    gate_set(false);
    if (peer->call_start != NULL && peer->call_end != NULL) {
        driver.ks = ks;
        driver.n = n;
        if (pthread_create(&driver.th, NULL, async_driver_main, &driver) == 0) {
            started = n;
            one_thread = true;
        } else {
            fprintf(stderr, "\nbench_compare: pthread_create failed\n");
            atomic_store(&stop_flag, true);
        }
    }
    for (; !one_thread && started < n; started++) {
        if (pthread_create(&ks[started].th, NULL, caller_main, &ks[started]) !=
            0) {
            fprintf(stderr, "\nbench_compare: pthread_create failed\n");
            atomic_store(&stop_flag, true);
            break;
        }
    }
    usage_take(peer, env, &u0);
    gate_set(true); /* every caller starts now */
    t0 = bench_now_ns();
    deadline = t0 + (int64_t)opt.seconds * 1000000000;
    for (int i = 0; i < opt.seconds * 10 + 10 && !atomic_load(&interrupted) &&
                    started == n;
         i++) {
        int64_t now = bench_now_ns();
        if (now >= deadline) {
            break;
        }
        progress(peer, n, (double)(now - t0) / (deadline - t0));
        bench_sleep_ms(now + 100000000 < deadline
                           ? 100
                           : (int)((deadline - now) / 1000000) + 1);
    }
    atomic_store(&stop_flag, true);
    usage_take(peer, env, &u1);
    if (one_thread) {
        pthread_join(driver.th, NULL);
    }
    for (int i = 0; !one_thread && i < started; i++) {
        pthread_join(ks[i].th, NULL);
    }
    t1 = bench_now_ns();
    if (started < n) {
        goto out;
    }
    r->seconds = (double)(t1 - t0) / 1e9;
    summarize(ks, n, r);
    usage_per_call(peer, &u0, &u1, r);
    for (int i = 0; i < n; i++) {
        if (ks[i].errors > 0) {
            fprintf(stderr,
                    "\nbench_compare: %s x%d caller %d: %" PRId64
                    " errors, first: %s\n",
                    peer->name, n, i, ks[i].errors, ks[i].first_err);
        }
    }
    if (peer->exactly_once && !atomic_load(&interrupted)) {
        check_effects(peer, env, ks, n, r);
    }
    r->ran = true;
    rv = 0;
out:
    for (int i = 0; i < opened; i++) {
        peer->close(ks[i].conn);
        free(ks[i].lat);
    }
    free(ks);
    return rv;
}

/* ---- setup: packages, temp dir, systems ---------------------------------- */

static char topdir[64];

/* Whether a selected system is Redis or PostgreSQL (each has a counter
 * and a job row). */
static bool
selected_system(const char *name)
{
    for (int p = 0; p < NPEERS; p++) {
        if (opt.selected[p] &&
            strncmp(all_peers[p]->name, name, strlen(name)) == 0) {
            return true;
        }
    }
    return false;
}

static bool
needs_install(void)
{
    char initdb[300];

    snprintf(initdb, sizeof(initdb), "%s/initdb", opt.pg_bin);
    return (selected_system("redis") && access(opt.redis_bin, X_OK) != 0) ||
           (selected_system("postgres") && access(initdb, X_OK) != 0);
}

static void
install_deps(void)
{
    const char *argv[] = {BENCH_DEPS, NULL};

    if (!needs_install()) {
        return;
    }
    if (!opt.install) {
        fprintf(stderr, "bench_compare: Redis or PostgreSQL missing and "
                        "--no-install given\n");
        return;
    }
    fprintf(stderr, "bench_compare: installing packages (%s)\n", BENCH_DEPS);
    /* Its output goes to our stderr: the log is the terminal. */
    {
        pid_t pid = fork();
        if (pid == 0) {
            execv(argv[0], (char *const *)argv);
            _exit(127);
        }
        if (pid < 0 || compare_proc_wait(pid, DEPS_TIMEOUT_MS) != 0) {
            fprintf(stderr, "bench_compare: %s failed\n", BENCH_DEPS);
        }
    }
}

/* gnuplot -e "csv='…'; png='…'" script. */
static int
plot(const char *png)
{
    char vars[1200];
    const char *argv[] = {"/usr/bin/gnuplot", "-e", vars, opt.plot_script,
                          NULL};
    char log[128];
    int rv;

    if (access(argv[0], X_OK) != 0) {
        fprintf(stderr, "bench_compare: no gnuplot (scripts/bench-deps.sh "
                        "installs gnuplot-nox); no plot\n");
        return -1;
    }
    if (strchr(opt.csv, '\'') != NULL || strchr(png, '\'') != NULL) {
        fprintf(stderr, "bench_compare: no quotes in --csv/--png, please\n");
        return -1;
    }
    snprintf(vars, sizeof(vars), "csv='%s'; png='%s'; seconds=%d", opt.csv, png,
             opt.seconds);
    snprintf(log, sizeof(log), "%s/gnuplot.log", topdir);
    rv = compare_proc_run(argv, NULL, log, GNUPLOT_TIMEOUT_MS);
    if (rv != 0) {
        fprintf(stderr, "bench_compare: gnuplot failed (%d)\n", rv);
        compare_proc_tail(log, 1500);
        return -1;
    }
    return 0;
}

/* ---- report -------------------------------------------------------------- */

static const char *
check_word(const result *r)
{
    if (!r->peer->exactly_once) {
        return "n/a";
    }
    if (r->counters_ok < 0) {
        return "unchecked";
    }
    if (r->replay_ok < 0) { /* shared handle: counters only */
        return r->counters_ok ? "counters" : "NO";
    }
    return r->counters_ok && r->replay_ok ? "yes" : "NO";
}

static int
write_csv(void)
{
    FILE *f = fopen(opt.csv, "w");

    if (f == NULL) {
        fprintf(stderr, "bench_compare: %s: %s\n", opt.csv, strerror(errno));
        return -1;
    }
    fprintf(f, "system,callers,seconds,calls,errors,calls_per_s,p50_us,"
               "p99_us,exactly_once,client_cpu_us_per_call,"
               "server_cpu_us_per_call,client_csw_per_call,"
               "server_csw_per_call,calls_per_fsync\n");
    /* By system, then callers: gnuplot draws one line per system. */
    for (int p = 0; p < NPEERS; p++) {
        for (int l = 0; l < opt.nlevels; l++) {
            const result *r = &results[p][l];
            if (!r->ran) {
                continue;
            }
            fprintf(f,
                    "%s,%d,%.3f,%" PRId64 ",%" PRId64
                    ",%.1f,%.1f,%.1f,%s,%.1f,%.1f,%.2f,%.2f,%.1f\n",
                    r->peer->name, r->callers, r->seconds, r->calls, r->errors,
                    r->per_s, r->p50_us, r->p99_us, check_word(r),
                    r->cli_cpu_us, r->srv_cpu_us, r->cli_csw, r->srv_csw,
                    r->calls_per_fsync);
        }
    }
    return fclose(f) == 0 ? 0 : -1;
}

static const result *
find(const char *name, int level)
{
    for (int p = 0; p < NPEERS; p++) {
        if (strcmp(all_peers[p]->name, name) == 0 && results[p][level].ran &&
            results[p][level].per_s > 0) {
            return &results[p][level];
        }
    }
    return NULL;
}

static void
print_ratio(const result *once, const char *peer, int level)
{
    const result *r = find(peer, level);

    if (once != NULL && r != NULL) {
        printf(" %13.2f", once->per_s / r->per_s);
    } else {
        printf(" %13s", "-");
    }
}

static void
print_target(const char *what, double have, double want, bool at_least)
{
    bool met = at_least ? have >= want : have <= want;
    printf("  %-44s %7.2f  (target %s %.2f)  %s\n", what, have,
           at_least ? ">=" : "<=", want, met ? "met" : "NOT met");
}

/* The three load averages of /proc/loadavg, or "?". */
static const char *
load_average(void)
{
    static char buf[64];
    FILE *f = fopen("/proc/loadavg", "r");
    double a, b, c;

    snprintf(buf, sizeof(buf), "?");
    if (f != NULL) {
        if (fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3) {
            snprintf(buf, sizeof(buf), "%.2f %.2f %.2f", a, b, c);
        }
        fclose(f);
    }
    return buf;
}

/* The job workload's ratios: once KV (per-caller handles, async,
 * replicated) over the peer of the same kind. */
static void
job_ratios(void)
{
    static const char *const pairs[][2] = {
        {"once-kv", "redis-job"},           {"once-kv-async", "redis-job"},
        {"once-kv", "postgres-job"},        {"once-kv-async", "postgres-job"},
        {"once-kv-replicated", "etcd-job"},
    };
    const int n = (int)(sizeof(pairs) / sizeof(pairs[0]));

    printf("\njob transition: once KV / peer, calls/s (above 1: once is "
           "faster)\n%-7s",
           "callers");
    for (int i = 0; i < n; i++) {
        printf(" %s/%s", pairs[i][0], pairs[i][1]);
    }
    printf("\n");
    for (int l = 0; l < opt.nlevels; l++) {
        printf("%-7d", opt.levels[l]);
        for (int i = 0; i < n; i++) {
            const result *o = find(pairs[i][0], l);
            int w = (int)(strlen(pairs[i][0]) + strlen(pairs[i][1]) + 1);
            const result *r = find(pairs[i][1], l);
            if (o != NULL && r != NULL) {
                printf(" %*.2f", w, o->per_s / r->per_s);
            } else {
                printf(" %*s", w, "-");
            }
        }
        printf("\n");
    }
}

static void
report(void)
{
    char host[64] = "?";
    time_t now = time(NULL);
    char when[32];

    gethostname(host, sizeof(host));
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M", localtime(&now));
    printf("\nbench_compare %s on %s: %ld cores, %d s per system and level, "
           "postgres mode '%s'%s\n\n",
           when, host, sysconf(_SC_NPROCESSORS_ONLN), opt.seconds, opt.pg_mode,
           opt.one_counter ? ", one counter" : "");
    printf("%-15s %7s %11s %9s %9s %10s %7s  %s\n", "system", "callers",
           "calls/s", "p50_us", "p99_us", "calls", "errors", "exactly-once");
    for (int l = 0; l < opt.nlevels; l++) {
        for (int p = 0; p < NPEERS; p++) {
            const result *r = &results[p][l];
            if (!r->ran) {
                continue;
            }
            printf("%-15s %7d %11.0f %9.1f %9.1f %10" PRId64 " %7" PRId64
                   "  %s\n",
                   r->peer->name, r->callers, r->per_s, r->p50_us, r->p99_us,
                   r->calls, r->errors, check_word(r));
        }
    }
    printf("\nper call: CPU us and context switches of the caller process "
           "and of the server\n(load average %s)\n",
           load_average());
    printf("%-15s %7s %9s %9s %9s %9s %11s\n", "system", "callers", "cli_us",
           "srv_us", "cli_csw", "srv_csw", "calls/fsync");
    for (int l = 0; l < opt.nlevels; l++) {
        for (int p = 0; p < NPEERS; p++) {
            const result *r = &results[p][l];
            if (!r->ran || r->calls == 0) {
                continue;
            }
            printf("%-15s %7d %9.1f %9.1f %9.2f %9.2f %11.1f\n", r->peer->name,
                   r->callers, r->cli_cpu_us, r->srv_cpu_us, r->cli_csw,
                   r->srv_csw, r->calls_per_fsync);
        }
    }
    if (opt.job_workload) {
        job_ratios();
    } else {
        printf("\nonce / peer, calls/s (above 1: once is faster)\n");
        printf("%-7s %13s %13s %13s %13s %13s\n", "callers", "once/redis",
               "once/postgres", "once/echo", "once/leveldb", "p50 redis/once");
    }
    for (int l = 0; l < opt.nlevels && !opt.job_workload; l++) {
        const result *once = find("once", l), *redis = find("redis", l);
        printf("%-7d", opt.levels[l]);
        print_ratio(once, "redis", l);
        print_ratio(once, "postgres", l);
        print_ratio(once, "echo", l);
        print_ratio(once, "leveldb", l);
        if (once != NULL && redis != NULL && once->p50_us > 0) {
            printf(" %13.2f", redis->p50_us / once->p50_us);
        } else {
            printf(" %13s", "-");
        }
        printf("\n");
    }

    /*
     * The targets in force, where this run measured both sides: calls/s
     * ratios at 16 and 64 callers (issue 17: per-caller handles, one
     * shared handle, async; issue 14: replicated once against the etcd
     * idempotency-key peer; issue 23: the job transition on once KV
     * against Redis, PostgreSQL and etcd), and p50 ratios at one caller.
     */
    static const struct {
        const char *mine, *peer;
        double at16, at64; /* 0: no target at that level */
    } ratios[] = {
        {"once", "redis", 0.9, 0},
        {"once-shared", "redis", 1.0, 1.3},
        {"once-async", "redis", 1.0, 1.3},
        {"once-http", "once", 0.7, 0}, /* issue 27: JSON over HTTP */
        {"once-replicated", "etcd", 1.0, 1.0},
        {"once-kv-async", "redis-job", 0, 1.2},
        {"once-kv-async", "postgres-job", 2.0, 0},
        {"once-kv-replicated", "etcd-job", 2.0, 0},
    };
    printf("\ntargets\n");
    for (int l = 0; l < opt.nlevels; l++) {
        char what[64];
        for (size_t i = 0; i < sizeof(ratios) / sizeof(ratios[0]); i++) {
            const result *o = find(ratios[i].mine, l);
            const result *r = find(ratios[i].peer, l);
            double want = opt.levels[l] == 16   ? ratios[i].at16
                          : opt.levels[l] == 64 ? ratios[i].at64
                                                : 0;
            if (o != NULL && r != NULL && want > 0 && r->per_s > 0) {
                snprintf(what, sizeof(what), "%s/%s at %d", ratios[i].mine,
                         ratios[i].peer, opt.levels[l]);
                print_target(what, o->per_s / r->per_s, want, true);
            }
        }
        if (opt.levels[l] == 1) {
            const result *once = find("once", l), *e = find("echo", l);
            const result *db = find("leveldb", l);
            const result *rep = find("once-replicated", l);
            const result *etcd = find("etcd", l);
            if (once != NULL && e != NULL && db != NULL &&
                e->p50_us + db->p50_us > 0) {
                print_target("p50 once/(echo+leveldb) at 1 (lower is better)",
                             once->p50_us / (e->p50_us + db->p50_us), 1.1,
                             false);
            }
            const result *kv = find("once-kv", l);
            if (rep != NULL && etcd != NULL && etcd->p50_us > 0) {
                print_target("p50 once-replicated/etcd at 1 (lower better)",
                             rep->p50_us / etcd->p50_us, 1.5, false);
            }
            if (kv != NULL && once != NULL && once->p50_us > 0) {
                print_target("p50 once-kv/once (counter) at 1 (lower better)",
                             kv->p50_us / once->p50_us, 1.2, false);
            }
        }
    }
    fflush(stdout);
}

/* ---- main ---------------------------------------------------------------- */

int
main(int argc, char **argv)
{
    void *envs[NPEERS] = {0};
    bool up[NPEERS] = {0};
    char png[512];
    int max_callers = 1, rv = 0;
    struct sigaction sa;

    if (parse_args(argc, argv) != 0) {
        return 2;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    for (int l = 0; l < opt.nlevels; l++) {
        if (opt.levels[l] > max_callers) {
            max_callers = opt.levels[l];
        }
    }

    install_deps();
    snprintf(topdir, sizeof(topdir), "/tmp/once-compare-XXXXXX");
    if (mkdtemp(topdir) == NULL || chmod(topdir, 0755) != 0) {
        perror("bench_compare: temp dir");
        return 1;
    }

    for (int p = 0; p < NPEERS && !atomic_load(&interrupted); p++) {
        char dir[128];
        compare_config cfg = {
            .dir = dir,
            .onced = opt.onced,
            .pg_bin = opt.pg_bin,
            .pg_mode = opt.pg_mode,
            .redis_bin = opt.redis_bin,
            .max_callers = max_callers,
            .echo_bytes = (size_t)opt.echo_bytes,
            .put_bytes = (size_t)opt.put_bytes,
        };
        if (!opt.selected[p]) {
            continue;
        }
        snprintf(dir, sizeof(dir), "%s/%s", topdir, all_peers[p]->name);
        if (mkdir(dir, 0755) != 0) {
            perror("bench_compare: mkdir");
            rv = 1;
            continue;
        }
        fprintf(stderr, "bench_compare: starting %s\n", all_peers[p]->name);
        if (all_peers[p]->start(&cfg, &envs[p]) != 0) {
            fprintf(stderr, "bench_compare: %s did not start; left out\n",
                    all_peers[p]->name);
            rv = 1;
            continue;
        }
        up[p] = true;
        run_total += opt.nlevels;
    }

    /* Level by level, every system in turn. */
    for (int l = 0; l < opt.nlevels && !atomic_load(&interrupted); l++) {
        for (int p = 0; p < NPEERS && !atomic_load(&interrupted); p++) {
            if (!up[p]) {
                continue;
            }
            if (run_level(all_peers[p], envs[p], l, opt.levels[l],
                          &results[p][l]) != 0) {
                fprintf(stderr, "\nbench_compare: %s at %d callers failed\n",
                        all_peers[p]->name, opt.levels[l]);
                rv = 1;
            } else if (results[p][l].errors > 0 ||
                       strcmp(check_word(&results[p][l]), "NO") == 0) {
                rv = 1;
            }
            run_index++;
        }
    }
    if (run_total > 0 && isatty(STDERR_FILENO)) {
        bench_progress("done", 1.0, 1);
    }

    for (int p = NPEERS - 1; p >= 0; p--) {
        if (up[p]) {
            all_peers[p]->stop(envs[p]);
        }
    }
    if (atomic_load(&interrupted)) {
        fprintf(stderr, "bench_compare: interrupted\n");
        rv = 1;
    }

    report();
    if (write_csv() != 0) {
        rv = 1;
    } else {
        printf("\nresults in %s", opt.csv);
        if (opt.png == NULL) {
            const char *dot = strrchr(opt.csv, '.');
            int stem = dot != NULL && strchr(dot, '/') == NULL
                           ? (int)(dot - opt.csv)
                           : (int)strlen(opt.csv);
            snprintf(png, sizeof(png), "%.*s.png", stem, opt.csv);
        } else {
            snprintf(png, sizeof(png), "%s", opt.png);
        }
        if (strcmp(png, "none") != 0 && plot(png) == 0) {
            printf(", plot in %s", png);
        }
        printf("\n");
    }
    if (opt.keep) {
        fprintf(stderr, "bench_compare: kept %s\n", topdir);
    } else {
        sys_rm_tree(topdir);
    }
    return rv;
}
