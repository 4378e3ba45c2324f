/*
 * bench_retransmit.c — what lost replies cost, with and without
 * deduplication (docs/performance.md: E[effects] = 1/(1-p)).
 *
 * Owns: the measurement only. For each reply-loss probability p it starts
 * onced and a once_proxy (bench/once_proxy.c) that drops replies with
 * probability p, and runs --callers callers that each make --calls logical
 * increments. A caller retries a call whose reply did not come within
 * --attempt-timeout:
 *   dedup     with the SAME rpc id: onced returns the stored result, so the
 *             counter must rise by exactly one per logical call;
 *   no-dedup  with a NEW seq each attempt — what a client without stable
 *             operation ids does: every retry runs again, and the effects
 *             per logical call follow 1/(1-p).
 * The counters are read back from onced directly (not through the proxy).
 * Output: a table, a CSV (--csv) and, with --png, a gnuplot plot of the
 * measured effects per call against the model.
 * Never: runs unbounded — calls are counted, attempts per call are capped
 * and every level has a deadline.
 */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench_env.h"
#include "bench/compare_proc.h"
#include "proto/once.pb-c.h"

#define MAX_P            16
#define MAX_ATTEMPTS     64
#define LEVEL_DEADLINE_S 300

static struct {
    double ps[MAX_P];
    int nps;
    int callers;
    int calls;
    int attempt_timeout_ms;
    unsigned seed;
    const char *onced;
    const char *proxy;
    const char *csv;
    const char *png;
} opt = {{0, 0.05, 0.1, 0.2, 0.3, 0.5},
         6,
         8,
         200,
         150,
         1,
         ONCED_PATH,
         PROXY_PATH,
         NULL,
         NULL};

typedef struct caller {
    int index;
    bool dedup;
    const char *url; /* the proxy's front */
    int64_t deadline;
    int64_t logical; /* calls that got an OK reply */
    int64_t attempts;
    int64_t failed; /* gave up after MAX_ATTEMPTS */
    int64_t *lat;   /* per logical call, ns */
} caller;

typedef struct row {
    double p;
    bool dedup;
    int64_t logical;
    int64_t attempts;
    int64_t effects;
    int64_t failed;
    double per_s;
    double p50_us;
    double p99_us;
} row;

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: bench_retransmit [options]\n"
            "\n"
            "Effects per logical call, latency and throughput when replies\n"
            "are lost with probability p, with deduplication (same rpc id on\n"
            "retry) and without (a new id per attempt), against the model\n"
            "1/(1-p).\n"
            "\n"
            "  --p LIST              loss probabilities (default "
            "0,0.05,0.1,0.2,0.3,0.5)\n"
            "  --callers N           concurrent callers (default 8)\n"
            "  --calls N             logical calls per caller (default 200)\n"
            "  --attempt-timeout MS  wait for a reply before retrying "
            "(default 150;\n"
            "                        too short and slow replies count as "
            "lost)\n"
            "  --seed N              the proxy's seed (default 1)\n"
            "  --onced PATH          (default %s)\n"
            "  --proxy PATH          (default %s)\n"
            "  --csv FILE            the results as CSV\n"
            "  --png FILE            a plot (needs gnuplot)\n"
            "  --help                this text\n",
            ONCED_PATH, PROXY_PATH);
}

static int64_t
read_counter(const char *url, const char *name)
{
    Once__V1__GetRequest req = ONCE__V1__GET_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    int64_t v = -1;
    nng_socket s;
    int code;

    if (bench_dial(&s, url) != 0) {
        return -1;
    }
    req.name = (char *)name;
    if (bench_rpc(s, "/once.v1.Counter/Get", 0, 0, 0, &req.base,
                  &once__v1__get_response__descriptor, &resp, &code) == 0 &&
        resp != NULL) {
        v = ((Once__V1__GetResponse *)resp)->value;
        protobuf_c_message_free_unpacked(resp, NULL);
    }
    nng_close(s);
    return v;
}

static void *
call_loop(void *p)
{
    caller *c = p;
    char name[32];
    uint64_t id, seq = 0;
    nng_socket s;

    snprintf(name, sizeof(name), "retransmit-%d", c->index);
    if (bench_dial(&s, c->url) != 0) {
        c->failed = opt.calls;
        return NULL;
    }
    /* Leases come through the proxy too: retry until one arrives. An hour,
     * so no level outlives it (the callers do not renew). */
    nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, opt.attempt_timeout_ms);
    for (int i = 0;
         i < MAX_ATTEMPTS && (id = bench_open_lease(s, 3600000)) == 0; i++) {
    }
    if (id == 0) {
        c->failed = opt.calls;
        nng_close(s);
        return NULL;
    }
    for (int n = 0; n < opt.calls && bench_now_ns() < c->deadline; n++) {
        Once__V1__IncrementRequest req = ONCE__V1__INCREMENT_REQUEST__INIT;
        int64_t t0 = bench_now_ns();
        bool ok = false;

        req.name = name;
        req.by = 1;
        seq++;
        for (int a = 0; a < MAX_ATTEMPTS && !ok; a++) {
            int code = -1;
            if (a > 0 && !c->dedup) {
                seq++; /* no stable id: the retry is a new request */
            }
            c->attempts++;
            /* Every earlier seq has had its reply (or was abandoned). */
            if (bench_rpc(s, "/once.v1.Counter/Increment", id, seq, seq,
                          &req.base, NULL, NULL, &code) == 0 &&
                code == 0) {
                ok = true;
            }
        }
        if (!ok) {
            c->failed++;
            continue;
        }
        c->lat[c->logical++] = bench_now_ns() - t0;
    }
    nng_close(s);
    return NULL;
}

static int
run_level(double p, bool dedup, row *r)
{
    char drop[32], seed[32], front[320];
    const char *extra[] = {"--window", "100000", NULL};
    const char *pargv[] = {opt.proxy, "--front",    front, "--back",
                           NULL,      "--drop-rep", drop,  "--seed",
                           seed,      "--quiet",    NULL};
    pthread_t th[256];
    caller *cs = calloc((size_t)opt.callers, sizeof(*cs));
    int64_t *all, nall = 0, t0;
    bench_onced b;
    pid_t proxy;

    if (bench_onced_start(&b, opt.onced, extra) != 0) {
        free(cs);
        return -1;
    }
    snprintf(drop, sizeof(drop), "%.4f", p);
    snprintf(seed, sizeof(seed), "%u", opt.seed);
    snprintf(front, sizeof(front), "ipc://%s/proxy.ipc", b.dir);
    pargv[4] = b.url;
    if ((proxy = compare_proc_spawn(pargv, NULL, NULL)) < 0) {
        bench_onced_stop(&b);
        free(cs);
        return -1;
    }
    bench_sleep_ms(200); /* the proxy listens and dials */
    t0 = bench_now_ns();
    for (int i = 0; i < opt.callers; i++) {
        cs[i].index = i;
        cs[i].dedup = dedup;
        cs[i].url = front;
        cs[i].deadline = t0 + (int64_t)LEVEL_DEADLINE_S * 1000000000;
        cs[i].lat = malloc(sizeof(int64_t) * (size_t)opt.calls);
        pthread_create(&th[i], NULL, call_loop, &cs[i]);
    }
    memset(r, 0, sizeof(*r));
    r->p = p;
    r->dedup = dedup;
    all = malloc(sizeof(int64_t) * (size_t)opt.calls * (size_t)opt.callers);
    for (int i = 0; i < opt.callers; i++) {
        char name[32];
        int64_t v;
        pthread_join(th[i], NULL);
        snprintf(name, sizeof(name), "retransmit-%d", i);
        v = read_counter(b.url, name); /* directly, not through the proxy */
        r->effects += v > 0 ? v : 0;
        r->logical += cs[i].logical;
        r->attempts += cs[i].attempts;
        r->failed += cs[i].failed;
        memcpy(all + nall, cs[i].lat, (size_t)cs[i].logical * sizeof(int64_t));
        nall += cs[i].logical;
        free(cs[i].lat);
    }
    r->per_s = (double)r->logical * 1e9 / (double)(bench_now_ns() - t0);
    r->p50_us = bench_pct_us(all, (size_t)nall, 50);
    r->p99_us = bench_pct_us(all, (size_t)nall, 99);
    free(all);
    free(cs);
    compare_proc_stop(proxy, 5000);
    bench_onced_stop(&b);
    return 0;
}

static int
parse_ps(const char *s)
{
    char *copy = strdup(s), *save = NULL, *tok;
    int n = 0;

    for (tok = strtok_r(copy, ",", &save); tok != NULL && n < MAX_P;
         tok = strtok_r(NULL, ",", &save)) {
        char *end;
        double v = strtod(tok, &end);
        if (*end != '\0' || v < 0 || v > 0.9) {
            free(copy);
            return -1;
        }
        opt.ps[n++] = v;
    }
    free(copy);
    opt.nps = n;
    return n > 0 ? 0 : -1;
}

static void
plot(const char *csv, const char *png)
{
    char script[1024];
    const char *argv[] = {"/usr/bin/gnuplot", "-e", script, NULL};

    snprintf(script, sizeof(script),
             "set terminal pngcairo size 900,560; set output '%s';"
             "set datafile separator ',';"
             "set title 'Effects per logical call when replies are lost';"
             "set xlabel 'reply loss probability p';"
             "set ylabel 'effects per logical call'; set key top left;"
             "set grid; set xrange [0:*]; set yrange [0.9:*];"
             "plot 1/(1-x) w l dt 2 lw 2 t 'model 1/(1-p) (no dedup)',"
             " 1 w l dt 3 t 'exactly once',"
             " '%s' u ($2==0?$1:1/0):5 w lp pt 7 lw 2 t 'no dedup (new id "
             "per retry)',"
             " '%s' u ($2==1?$1:1/0):5 w lp pt 5 lw 2 t 'once (same id)'",
             png, csv, csv);
    if (access(argv[0], X_OK) != 0 ||
        compare_proc_run(argv, NULL, NULL, 30000) != 0) {
        fprintf(stderr, "bench_retransmit: no plot (is gnuplot "
                        "installed? scripts/bench-deps.sh)\n");
    }
}

int
main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"p", required_argument, NULL, 'p'},
        {"callers", required_argument, NULL, 'c'},
        {"calls", required_argument, NULL, 'n'},
        {"attempt-timeout", required_argument, NULL, 't'},
        {"seed", required_argument, NULL, 's'},
        {"onced", required_argument, NULL, 'o'},
        {"proxy", required_argument, NULL, 'x'},
        {"csv", required_argument, NULL, 'f'},
        {"png", required_argument, NULL, 'g'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    row rows[2 * MAX_P];
    int nrows = 0, ch, rv = 0;
    FILE *f = NULL;

    while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (ch) {
        case 'p':
            if (parse_ps(optarg) != 0) {
                fprintf(stderr, "bench_retransmit: --p like 0,0.1,0.2 "
                                "(each 0..0.9)\n");
                return 2;
            }
            break;
        case 'c':
            opt.callers = atoi(optarg);
            break;
        case 'n':
            opt.calls = atoi(optarg);
            break;
        case 't':
            opt.attempt_timeout_ms = atoi(optarg);
            break;
        case 's':
            opt.seed = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'o':
            opt.onced = optarg;
            break;
        case 'x':
            opt.proxy = optarg;
            break;
        case 'f':
            opt.csv = optarg;
            break;
        case 'g':
            opt.png = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (opt.callers < 1 || opt.callers > 256 || opt.calls < 1 ||
        opt.calls > 1000000 || opt.attempt_timeout_ms < 1) {
        fprintf(stderr, "bench_retransmit: --callers 1..256, --calls "
                        "1..1000000, --attempt-timeout >= 1\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < opt.nps; i++) {
        for (int d = 1; d >= 0; d--) {
            char label[48];
            snprintf(label, sizeof(label), "p=%.2f %s", opt.ps[i],
                     d ? "dedup" : "no-dedup");
            bench_progress(label, (double)nrows / (2.0 * opt.nps), 0);
            if (run_level(opt.ps[i], d == 1, &rows[nrows]) != 0) {
                fprintf(stderr, "\nbench_retransmit: level %s failed\n", label);
                return 1;
            }
            nrows++;
        }
    }
    bench_progress("done", 1.0, 1);
    printf("%-6s %-9s %9s %9s %9s %9s %10s %9s %9s %9s\n", "p", "mode",
           "logical", "attempts", "effects", "eff/call", "model", "calls/s",
           "p50_us", "p99_us");
    for (int i = 0; i < nrows; i++) {
        row *r = &rows[i];
        double epc = r->logical ? (double)r->effects / (double)r->logical : 0;
        double model = r->dedup ? 1.0 : 1.0 / (1.0 - r->p);
        printf("%-6.2f %-9s %9lld %9lld %9lld %9.3f %10.3f %9.0f %9.1f %9.1f\n",
               r->p, r->dedup ? "dedup" : "no-dedup", (long long)r->logical,
               (long long)r->attempts, (long long)r->effects, epc, model,
               r->per_s, r->p50_us, r->p99_us);
        /* A call given up on (no reply in MAX_ATTEMPTS) may have run once:
         * with deduplication effects lie in [logical, logical + failed]. */
        if (r->dedup &&
            (r->effects < r->logical || r->effects > r->logical + r->failed)) {
            fprintf(stderr,
                    "bench_retransmit: p=%.2f: %lld effects for %lld "
                    "logical calls with deduplication\n",
                    r->p, (long long)r->effects, (long long)r->logical);
            rv = 1;
        }
        if (r->failed > 0) {
            rv = 1;
        }
    }
    if (opt.csv != NULL && (f = fopen(opt.csv, "w")) != NULL) {
        fprintf(f, "p,dedup,logical,attempts,effects_per_call,model,"
                   "calls_per_s,p50_us,p99_us,effects,failed\n");
        for (int i = 0; i < nrows; i++) {
            row *r = &rows[i];
            fprintf(f, "%.4f,%d,%lld,%lld,%.4f,%.4f,%.0f,%.1f,%.1f,%lld,%lld\n",
                    r->p, r->dedup, (long long)r->logical,
                    (long long)r->attempts,
                    r->logical ? (double)r->effects / (double)r->logical : 0,
                    r->dedup ? 1.0 : 1.0 / (1.0 - r->p), r->per_s, r->p50_us,
                    r->p99_us, (long long)r->effects, (long long)r->failed);
        }
        fclose(f);
        if (opt.png != NULL) {
            plot(opt.csv, opt.png);
        }
    }
    return rv;
}
