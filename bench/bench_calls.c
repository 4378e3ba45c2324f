/*
 * bench_calls.c — throughput and latency of durable exactly-once calls,
 * side by side with what a user would otherwise build (docs/performance.md).
 *
 * Owns: the bench_calls program. It starts its own onced in a temp dir on an
 * ipc path (or uses --server URL), runs N concurrent callers (1, 16, 64 by
 * default) doing distinct Increment calls for S seconds per level, and in
 * the same run measures two baselines served by a REP thread inside this
 * process on another ipc path: a bare nng REQ/REP echo, and an echo whose
 * server appends to a file and fdatasyncs it once per request (the minimum
 * cost of any durable reply). It prints calls/s and p50/p99 latency per
 * level, writes a CSV with --csv, and reports progress on stderr.
 * At every level it also measures the floor: once_floor (floor_server.c),
 * onced's shape with nothing in it — nng REP contexts, one executor, one
 * synced LevelDB batch per group — driven by as many bare nng REQ callers;
 * once/floor is how close onced gets to what its design can do here.
 * With --auth it also runs every level against a second onced that
 * authenticates requests (started with --dev: a principals file and the
 * operator key in its data dir), its callers signing every request, and
 * prints what authentication costs in calls/s (issue 7: < 10%).
 * Invariant: every loop is bounded in count and in time; at the end of each
 * level the counters are read back and must sum to the calls that returned
 * OK (the "exactly-once" in the figure is checked, not assumed).
 * Never: counts a call that did not return OK, or leaves its onced running.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include <once/client.h>

#include "bench/bench_env.h"
#include "tests/sys_helpers.h"

#ifndef ONCED_PATH
#define ONCED_PATH "onced"
#endif
#ifndef FLOOR_PATH
#define FLOOR_PATH "once_floor"
#endif

#define MAX_LEVELS             16
#define MAX_CALLERS            1024
#define MAX_CALLS_PER_CALLER   50000000L /* the time limit ends runs first */
#define MAX_SAMPLES_PER_CALLER (4L << 20)
#define ECHO_RECORD            64 /* bytes appended per request by the fsync echo */

/* ---- options ------------------------------------------------------------- */

static struct {
    int levels[MAX_LEVELS];
    int nlevels;
    int seconds;
    const char *server; /* NULL: start our own onced */
    const char *csv;
    const char *onced;
    bool shared;       /* all callers share one once_client */
    bool baselines;    /* run the echo baselines */
    const char *floor; /* once_floor's path; NULL: --no-floor */
    bool one_counter;  /* all callers increment one counter */
    bool auth;         /* also measure signed calls to an authenticating
                          onced */
} opt = {
    .levels = {1, 16, 64},
    .nlevels = 3,
    .seconds = 5,
    .onced = ONCED_PATH,
    .shared = false,
    .baselines = true,
    .floor = FLOOR_PATH,
};

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: bench_calls [options]\n"
            "\n"
            "Durable exactly-once calls/s and p50/p99 latency of onced at\n"
            "several concurrency levels, plus two baselines measured in the\n"
            "same run at 1 caller: a bare nng REQ/REP echo, and an echo whose\n"
            "server appends %d bytes to a file and fdatasyncs per request.\n"
            "\n"
            "  --callers LIST   concurrency levels, comma-separated "
            "(default 1,16,64)\n"
            "  --seconds S      seconds per level (default 5)\n"
            "  --server URL     use a running onced instead of starting one\n"
            "  --onced PATH     the onced binary to start (default %s)\n"
            "  --csv FILE       also write the results as CSV\n"
            "  --clients MODE   'each' (default): one once_client (one\n"
            "                   connection, one lease) per caller;\n"
            "                   'shared': all callers share one once_client\n"
            "  --one-counter    all callers increment one counter (default:\n"
            "                   one counter per caller)\n"
            "  --no-baselines   skip the echo baselines\n"
            "  --floor PATH     once_floor, onced's shape with nothing in it,\n"
            "                   run at every level after once (default %s)\n"
            "  --no-floor       skip the floor\n"
            "  --auth           at every level, also signed calls to a second\n"
            "                   onced that authenticates (started --dev), and\n"
            "                   the cost of authentication in calls/s\n"
            "  --help           this text\n",
            ECHO_RECORD, ONCED_PATH, FLOOR_PATH);
}

static int
parse_levels(const char *s)
{
    char *copy = strdup(s), *save = NULL, *tok;
    int n = 0;

    if (copy == NULL) {
        return -1;
    }
    for (tok = strtok_r(copy, ",", &save); tok != NULL && n < MAX_LEVELS;
         tok = strtok_r(NULL, ",", &save)) {
        char *end;
        long v = strtol(tok, &end, 10);
        if (*end != '\0' || v < 1 || v > MAX_CALLERS) {
            free(copy);
            return -1;
        }
        opt.levels[n++] = (int)v;
    }
    free(copy);
    if (n == 0) {
        return -1;
    }
    opt.nlevels = n;
    return 0;
}

static int
parse_args(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"callers", required_argument, NULL, 'c'},
        {"seconds", required_argument, NULL, 's'},
        {"server", required_argument, NULL, 'S'},
        {"onced", required_argument, NULL, 'o'},
        {"csv", required_argument, NULL, 'C'},
        {"clients", required_argument, NULL, 'm'},
        {"one-counter", no_argument, NULL, '1'},
        {"no-baselines", no_argument, NULL, 'B'},
        {"floor", required_argument, NULL, 'F'},
        {"no-floor", no_argument, NULL, 'f'},
        {"auth", no_argument, NULL, 'A'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;

    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            if (parse_levels(optarg) != 0) {
                fprintf(stderr, "bench_calls: bad --callers '%s' (1..%d)\n",
                        optarg, MAX_CALLERS);
                return -1;
            }
            break;
        case 's':
            opt.seconds = atoi(optarg);
            if (opt.seconds < 1 || opt.seconds > 3600) {
                fprintf(stderr, "bench_calls: bad --seconds '%s'\n", optarg);
                return -1;
            }
            break;
        case 'S':
            opt.server = optarg;
            break;
        case 'o':
            opt.onced = optarg;
            break;
        case 'C':
            opt.csv = optarg;
            break;
        case 'm':
            if (strcmp(optarg, "shared") == 0) {
                opt.shared = true;
            } else if (strcmp(optarg, "each") == 0) {
                opt.shared = false;
            } else {
                fprintf(stderr, "bench_calls: --clients each|shared\n");
                return -1;
            }
            break;
        case '1':
            opt.one_counter = true;
            break;
        case 'F':
            opt.floor = optarg;
            break;
        case 'f':
            opt.floor = NULL;
            break;
        case 'B':
            opt.baselines = false;
            break;
        case 'A':
            opt.auth = true;
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
    if (opt.auth && opt.server != NULL) {
        fprintf(stderr, "bench_calls: --auth starts its own servers; drop "
                        "--server\n");
        return -1;
    }
    return 0;
}

/* ---- the onced and the echo we measure ---------------------------------- */

static struct {
    bench_onced srv;      /* our own onced, unless --server */
    const char *url;      /* what the callers dial */
    bench_onced auth_srv; /* --auth: the authenticating onced */
    char key_file[400];   /* its operator key (auth_srv.data/dev.key) */
    bool signing;         /* the level being run is the --auth one */
    char dir[256];        /* temp dir of the echo baselines' file */
    char echo_ipc[128];
    char echo_url[160];
} env;

/* ---- results ------------------------------------------------------------- */

typedef struct result {
    const char *kind; /* "once", "once+auth", "floor", "echo", "echo+fsync" */
    int callers;
    int64_t calls;
    int64_t errors;
    double seconds;
    double per_s;
    double p50_us;
    double p99_us;
    uint64_t commits;
    uint64_t fsyncs;
    bool verified; /* counters read back equal the OK calls */
} result;

static result results[MAX_LEVELS * 3 + 2];
static int nresults;

/* ---- callers ------------------------------------------------------------- */

typedef struct caller {
    int index;
    once_client *c; /* once mode */
    char counter[64];
    nng_socket s; /* echo mode */
    int64_t *lat; /* ns, up to MAX_SAMPLES_PER_CALLER */
    int64_t nlat;
    int64_t cap;
    int64_t ok;
    int64_t errors;
    int first_error;
    char first_reason[64];
    pthread_t th;
} caller;

static atomic_bool stop_flag;
static atomic_long progress;
static pthread_barrier_t go;

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

static void *
once_caller(void *p)
{
    caller *k = p;

    pthread_barrier_wait(&go);
    for (long i = 0; i < MAX_CALLS_PER_CALLER && !atomic_load(&stop_flag);
         i++) {
        once_rpc_id id = {0, 0};
        once_status st;
        int64_t v, t0 = bench_now_ns();
        int rv = once_counter_incr(k->c, k->counter, 1, &id, &v, &st);
        int64_t t1 = bench_now_ns();

        if (rv == ONCE_OK) {
            k->ok++;
            record(k, t1 - t0);
        } else if (k->errors++ == 0) {
            k->first_error = rv;
            snprintf(k->first_reason, sizeof(k->first_reason), "%s", st.reason);
        }
        atomic_fetch_add(&progress, 1);
    }
    return NULL;
}

static void *
echo_caller(void *p)
{
    caller *k = p;
    char buf[ECHO_RECORD];

    memset(buf, 'e', sizeof(buf));
    pthread_barrier_wait(&go);
    for (long i = 0; i < MAX_CALLS_PER_CALLER && !atomic_load(&stop_flag);
         i++) {
        nng_msg *m = NULL;
        int64_t t0 = bench_now_ns();
        int rv = nng_send(k->s, buf, sizeof(buf), 0);
        if (rv == 0) {
            rv = nng_recvmsg(k->s, &m, 0);
        }
        int64_t t1 = bench_now_ns();
        if (rv == 0) {
            nng_msg_free(m);
            k->ok++;
            record(k, t1 - t0);
        } else if (k->errors++ == 0) {
            k->first_error = rv;
            snprintf(k->first_reason, sizeof(k->first_reason), "%s",
                     nng_strerror(rv));
        }
        atomic_fetch_add(&progress, 1);
    }
    return NULL;
}

/* Runs n callers for opt.seconds and fills r from their samples. */
static void
run_level(const char *label, caller *ks, int n, void *(*fn)(void *), result *r)
{
    int64_t t0, t1, total = 0;
    size_t nsamples = 0;
    int64_t *all;

    atomic_store(&stop_flag, false);
    atomic_store(&progress, 0);
    pthread_barrier_init(&go, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++) {
        pthread_create(&ks[i].th, NULL, fn, &ks[i]);
    }
    pthread_barrier_wait(&go);
    t0 = bench_now_ns();
    for (int s = 1; s <= opt.seconds; s++) {
        bench_sleep_ms(1000);
        fprintf(stderr, "  [%s, %d caller%s] %d/%d s, %ld calls\n", label, n,
                n == 1 ? "" : "s", s, opt.seconds, atomic_load(&progress));
    }
    atomic_store(&stop_flag, true);
    for (int i = 0; i < n; i++) {
        pthread_join(ks[i].th, NULL);
    }
    t1 = bench_now_ns();
    pthread_barrier_destroy(&go);

    r->callers = n;
    r->seconds = (double)(t1 - t0) / 1e9;
    for (int i = 0; i < n; i++) {
        r->calls += ks[i].ok;
        r->errors += ks[i].errors;
        nsamples += (size_t)ks[i].nlat;
        if (ks[i].errors > 0) {
            fprintf(stderr, "  caller %d: %" PRId64 " errors, first %d %s\n", i,
                    ks[i].errors, ks[i].first_error, ks[i].first_reason);
        }
    }
    r->per_s = (double)r->calls / r->seconds;
    all = malloc((nsamples > 0 ? nsamples : 1) * sizeof(*all));
    if (all != NULL) {
        for (int i = 0; i < n; i++) {
            memcpy(all + total, ks[i].lat, (size_t)ks[i].nlat * sizeof(*all));
            total += ks[i].nlat;
        }
        r->p50_us = bench_pct_us(all, (size_t)nsamples, 50);
        r->p99_us = bench_pct_us(all, (size_t)nsamples, 99);
        free(all);
    }
    for (int i = 0; i < n; i++) {
        free(ks[i].lat);
        ks[i].lat = NULL;
        ks[i].nlat = ks[i].cap = 0;
    }
}

static int
open_client(once_client **cp, bool lease)
{
    once_options o;
    once_security sec;
    once_status st;
    int rv;

    once_options_init(&o);
    once_security_init(&sec);
    o.url = env.signing ? env.auth_srv.url : env.url;
    o.no_lease = !lease;
    sec.key_file = env.signing ? env.key_file : NULL;
    if ((rv = once_client_open_secure(cp, &o, &sec, &st)) != ONCE_OK) {
        fprintf(stderr, "bench_calls: once_client_open: %s %s %s\n",
                once_strerror(rv), st.reason, st.message);
    }
    return rv;
}

static int
bench_once(int n, int level_index, result *r)
{
    caller *ks = calloc((size_t)n, sizeof(*ks));
    once_client *shared = NULL, *admin = NULL;
    once_stats s0, s1;
    once_status st;
    int64_t sum = 0;
    int rv = -1;

    r->kind = env.signing ? "once+auth" : "once";
    if (ks == NULL || open_client(&admin, false) != ONCE_OK) {
        goto out;
    }
    if (opt.shared && open_client(&shared, true) != ONCE_OK) {
        goto out;
    }
    for (int i = 0; i < n; i++) {
        int64_t v;
        once_rpc_id id = {0, 0};

        ks[i].index = i;
        ks[i].c = shared;
        if (!opt.shared && open_client(&ks[i].c, true) != ONCE_OK) {
            goto out;
        }
        /* Distinct per run, so a --server run never reuses a counter. */
        snprintf(ks[i].counter, sizeof(ks[i].counter), "bench/%d/%d/%d/%d",
                 (int)getpid(), level_index, n, opt.one_counter ? 0 : i);
        /* A warm-up call per caller, not timed: connection and lease. */
        if (once_counter_incr(ks[i].c, ks[i].counter, 1, &id, &v, &st) !=
            ONCE_OK) {
            fprintf(stderr, "bench_calls: warm-up call failed: %s %s\n",
                    once_strerror(st.code), st.reason);
            goto out;
        }
    }
    if (once_admin_stats(admin, &s0, &st) != ONCE_OK) {
        goto out;
    }
    run_level(r->kind, ks, n, once_caller, r);
    if (once_admin_stats(admin, &s1, &st) != ONCE_OK) {
        goto out;
    }
    r->commits = s1.commits - s0.commits;
    r->fsyncs = s1.fsyncs - s0.fsyncs;

    /* Exactly once, checked: the counters hold warm-up + OK calls. */
    for (int i = 0; i < n; i++) {
        int64_t v = 0;
        if (opt.one_counter && i > 0) {
            break;
        }
        if (once_counter_get(admin, ks[i].counter, &v, &st) != ONCE_OK) {
            goto out;
        }
        sum += v;
    }
    r->verified = sum == r->calls + n;
    if (!r->verified) {
        fprintf(stderr,
                "bench_calls: counters hold %" PRId64 ", expected %" PRId64
                " (%" PRId64 " OK calls + %d warm-up)\n",
                sum, r->calls + n, r->calls, n);
    }
    rv = 0;
out:
    for (int i = 0; ks != NULL && i < n; i++) {
        if (ks[i].c != shared) {
            once_client_close(ks[i].c);
        }
    }
    once_client_close(shared);
    once_client_close(admin);
    free(ks);
    return rv;
}

/* ---- the echo baselines -------------------------------------------------- */

typedef struct echo_server {
    nng_socket s;
    int fd; /* -1: bare echo */
    atomic_bool stop;
    pthread_t th;
    int64_t served;
} echo_server;

static void *
echo_serve(void *p)
{
    echo_server *e = p;

    for (long i = 0; i < MAX_CALLS_PER_CALLER * 4 && !atomic_load(&e->stop);
         i++) {
        nng_msg *m;
        int rv = nng_recvmsg(e->s, &m, 0);
        if (rv == NNG_ETIMEDOUT) {
            continue;
        }
        if (rv != 0) {
            break;
        }
        if (e->fd >= 0) {
            if (write(e->fd, nng_msg_body(m), nng_msg_len(m)) < 0 ||
                fdatasync(e->fd) != 0) {
                perror("bench_calls: echo write/fdatasync");
            }
        }
        if (nng_sendmsg(e->s, m, 0) != 0) {
            nng_msg_free(m);
        }
        e->served++;
    }
    return NULL;
}

static int
bench_echo(bool fsync_each, result *r)
{
    echo_server e = {.fd = -1};
    caller k = {0};
    char path[320];
    int rv;

    r->kind = fsync_each ? "echo+fsync" : "echo";
    if (fsync_each) {
        snprintf(path, sizeof(path), "%s/echo.log", env.dir);
        if ((e.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644)) <
            0) {
            perror("bench_calls: echo file");
            return -1;
        }
    }
    if ((rv = nng_rep0_open(&e.s)) != 0 ||
        (rv = nng_socket_set_ms(e.s, NNG_OPT_RECVTIMEO, 100)) != 0 ||
        (rv = nng_listen(e.s, env.echo_url, NULL, 0)) != 0) {
        fprintf(stderr, "bench_calls: echo server: %s\n", nng_strerror(rv));
        goto out;
    }
    pthread_create(&e.th, NULL, echo_serve, &e);
    if ((rv = nng_req0_open(&k.s)) != 0 ||
        (rv = nng_socket_set_ms(k.s, NNG_OPT_RECVTIMEO, 5000)) != 0 ||
        (rv = nng_dial(k.s, env.echo_url, NULL, 0)) != 0) {
        fprintf(stderr, "bench_calls: echo client: %s\n", nng_strerror(rv));
    } else {
        run_level(r->kind, &k, 1, echo_caller, r);
        r->verified = r->errors == 0;
    }
    nng_close(k.s);
    atomic_store(&e.stop, true);
    pthread_join(e.th, NULL);
out:
    nng_close(e.s);
    if (e.fd >= 0) {
        close(e.fd);
        unlink(path);
    }
    return rv == 0 ? 0 : -1;
}

/* ---- the floor: onced's shape with nothing in it ------------------------ */

/* n bare REQ callers, a socket each, against a fresh once_floor. */
static int
bench_floor(int n, result *r)
{
    bench_onced fl;
    caller *ks;
    int rv = -1;

    r->kind = "floor";
    if ((ks = calloc((size_t)n, sizeof(*ks))) == NULL) {
        return -1;
    }
    if (bench_spawn(&fl, opt.floor, NULL) != 0 || bench_floor_ready(&fl) != 0) {
        goto out;
    }
    for (int i = 0; i < n; i++) {
        int e = bench_dial(&ks[i].s, fl.url);
        if (e != 0) {
            fprintf(stderr, "bench_calls: floor caller: %s\n", nng_strerror(e));
            for (int j = 0; j < i; j++) {
                nng_close(ks[j].s);
            }
            goto out;
        }
        ks[i].index = i;
    }
    run_level(r->kind, ks, n, echo_caller, r);
    r->verified = r->errors == 0;
    for (int i = 0; i < n; i++) {
        nng_close(ks[i].s);
    }
    rv = 0;
out:
    bench_onced_stop(&fl);
    free(ks);
    return rv;
}

/* ---- output -------------------------------------------------------------- */

static void
print_result(const result *r)
{
    printf("%-11s %7d %10" PRId64 " %7" PRId64 " %11.0f %9.1f %9.1f", r->kind,
           r->callers, r->calls, r->errors, r->per_s, r->p50_us, r->p99_us);
    if (strncmp(r->kind, "once", 4) == 0) {
        printf(" %8.2f %s", r->fsyncs > 0 ? (double)r->commits / r->fsyncs : 0,
               r->verified ? "yes" : "NO");
    } else {
        printf(" %8s %s", "-", r->verified ? "yes" : "NO");
    }
    printf("\n");
    fflush(stdout);
}

static int
write_csv(void)
{
    FILE *f = fopen(opt.csv, "w");

    if (f == NULL) {
        perror(opt.csv);
        return -1;
    }
    fprintf(f, "kind,callers,calls,errors,seconds,calls_per_s,p50_us,p99_us,"
               "commits,fsyncs,exactly_once_verified\n");
    for (int i = 0; i < nresults; i++) {
        const result *r = &results[i];
        fprintf(f,
                "%s,%d,%" PRId64 ",%" PRId64 ",%.3f,%.1f,%.1f,%.1f,%" PRIu64
                ",%" PRIu64 ",%d\n",
                r->kind, r->callers, r->calls, r->errors, r->seconds, r->per_s,
                r->p50_us, r->p99_us, r->commits, r->fsyncs, r->verified);
    }
    return fclose(f) == 0 ? 0 : -1;
}

int
main(int argc, char **argv)
{
    const result *once1 = NULL, *echo = NULL, *echofs = NULL;
    int rv = 0;

    if (parse_args(argc, argv) != 0) {
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);

    snprintf(env.dir, sizeof(env.dir), "/tmp/once-bench-echo-XXXXXX");
    if (mkdtemp(env.dir) == NULL) {
        perror("bench_calls: mkdtemp");
        return 1;
    }
    snprintf(env.echo_ipc, sizeof(env.echo_ipc), "/tmp/once-bench-%ld-echo.ipc",
             (long)getpid());
    snprintf(env.echo_url, sizeof(env.echo_url), "ipc://%s", env.echo_ipc);

    if (opt.server == NULL) {
        if (bench_onced_start(&env.srv, opt.onced, NULL) != 0) {
            rv = 1;
            goto out;
        }
        env.url = env.srv.url;
        fprintf(stderr, "bench_calls: started %s on %s (data %s)\n", opt.onced,
                env.srv.url, env.srv.data);
    } else {
        env.url = opt.server;
    }
    if (opt.auth) {
        static const char *const dev[] = {"--dev", NULL};
        if (bench_onced_start(&env.auth_srv, opt.onced, dev) != 0) {
            rv = 1;
            goto out;
        }
        snprintf(env.key_file, sizeof(env.key_file), "%s/dev.key",
                 env.auth_srv.data);
        fprintf(stderr,
                "bench_calls: started an authenticating %s on %s (key %s)\n",
                opt.onced, env.auth_srv.url, env.key_file);
    }

    if (opt.baselines) {
        fprintf(stderr, "bench_calls: baselines on %s, %d s each\n",
                env.echo_url, opt.seconds);
        if (bench_echo(false, &results[nresults]) == 0) {
            echo = &results[nresults++];
        }
        if (bench_echo(true, &results[nresults]) == 0) {
            echofs = &results[nresults++];
        }
    }
    for (int i = 0; i < opt.nlevels; i++) {
        fprintf(stderr, "bench_calls: once, %d caller%s, %d s (%s clients)\n",
                opt.levels[i], opt.levels[i] == 1 ? "" : "s", opt.seconds,
                opt.shared ? "one shared" : "per-caller");
        if (bench_once(opt.levels[i], i, &results[nresults]) != 0) {
            fprintf(stderr, "bench_calls: level %d failed\n", opt.levels[i]);
            rv = 1;
            break;
        }
        if (opt.levels[i] == 1 && once1 == NULL) {
            once1 = &results[nresults];
        }
        if (!results[nresults].verified) {
            rv = 1;
        }
        nresults++;
        if (opt.floor != NULL) {
            fprintf(stderr, "bench_calls: floor, %d caller%s, %d s\n",
                    opt.levels[i], opt.levels[i] == 1 ? "" : "s", opt.seconds);
            if (bench_floor(opt.levels[i], &results[nresults]) != 0) {
                fprintf(stderr, "bench_calls: floor at %d failed\n",
                        opt.levels[i]);
                rv = 1;
                break;
            }
            nresults++;
        }
        if (!opt.auth) {
            continue;
        }
        fprintf(stderr, "bench_calls: once+auth, %d caller%s, %d s\n",
                opt.levels[i], opt.levels[i] == 1 ? "" : "s", opt.seconds);
        env.signing = true;
        if (bench_once(opt.levels[i], i, &results[nresults]) != 0) {
            fprintf(stderr, "bench_calls: auth level %d failed\n",
                    opt.levels[i]);
            env.signing = false;
            rv = 1;
            break;
        }
        env.signing = false;
        if (!results[nresults].verified) {
            rv = 1;
        }
        nresults++;
    }

    printf("\n%-11s %7s %10s %7s %11s %9s %9s %8s %s\n", "kind", "callers",
           "calls", "errors", "calls/s", "p50_us", "p99_us", "grouping",
           "exactly-once");
    for (int i = 0; i < nresults; i++) {
        print_result(&results[i]);
    }
    if (once1 != NULL && echofs != NULL && echofs->p50_us > 0) {
        printf("\np50 at 1 caller: once %.1f us = %.2fx echo+fsync (%.1f us)",
               once1->p50_us, once1->p50_us / echofs->p50_us, echofs->p50_us);
        if (echo != NULL && echo->p50_us > 0) {
            printf(", %.1fx bare echo (%.1f us)", once1->p50_us / echo->p50_us,
                   echo->p50_us);
        }
        printf("\n");
    }
    for (int i = 0; i < nresults; i++) {
        const result *o = &results[i], *f = NULL;
        for (int j = i + 1; j < nresults && f == NULL; j++) {
            if (strcmp(results[j].kind, "floor") == 0 &&
                results[j].callers == o->callers) {
                f = &results[j];
            }
        }
        if (strcmp(o->kind, "once") == 0 && f != NULL && f->per_s > 0) {
            printf("once/floor at %d caller%s: %.0f / %.0f calls/s = %.2f\n",
                   o->callers, o->callers == 1 ? "" : "s", o->per_s, f->per_s,
                   o->per_s / f->per_s);
        }
    }
    for (int i = 1; opt.auth && i < nresults; i++) {
        const result *a = &results[i], *u = &results[i - 1];
        if (strcmp(a->kind, "once+auth") == 0 && strcmp(u->kind, "once") == 0 &&
            u->per_s > 0) {
            printf("authentication at %d caller%s: %.0f vs %.0f calls/s "
                   "(%+.1f%%), p50 %.1f vs %.1f us\n",
                   a->callers, a->callers == 1 ? "" : "s", a->per_s, u->per_s,
                   100.0 * (a->per_s - u->per_s) / u->per_s, a->p50_us,
                   u->p50_us);
        }
    }
    if (opt.csv != NULL && write_csv() != 0) {
        rv = 1;
    }
out:
    if (opt.server == NULL) {
        bench_onced_stop(&env.srv);
    }
    if (opt.auth) {
        bench_onced_stop(&env.auth_srv);
    }
    unlink(env.echo_ipc);
    sys_rm_tree(env.dir);
    return rv;
}
