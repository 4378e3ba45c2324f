/*
 * bench_chains.c — a journaled chain step against a plain call (issue 25,
 * docs/performance.md "Chains"), on an onced of its own.
 *
 * Owns: the measurement only, for each --threads level (default 1 and
 * 64), each --seconds long (default 5):
 *   plain    each thread loops once_counter_incr_new on one shared handle;
 *   chain    each thread has its own chain in one shared journal and loops
 *            once_chain_commit (context + the next Increment, one synced
 *            local write) → once_chain_send (the call, then the reply's
 *            unsynced write);
 *   journal  each thread loops synced 200-byte LevelDB puts on its own key
 *            (no server): how LevelDB's write grouping shares fsyncs
 *            between threads, the choice journal.c made.
 * Output: calls (or writes)/s and p50/p99 latency per mode and level (for
 * chain also the commit's own p50/p99: the synced write), then
 * chain against plain at each level as ratios (issue 25's targets: p50 at
 * most 1.6x at 1 thread, calls/s at least 0.7x at 64); --csv FILE too.
 * Never: runs unbounded: every loop ends on its deadline.
 */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <leveldb/c.h>

#include <once/client.h>
#include <once/journal.h>

#include "bench/bench_env.h"

#define MAX_THREADS 256
#define MAX_LEVELS  8
#define SAMPLES_MAX 400000

typedef enum mode { MODE_PLAIN, MODE_CHAIN, MODE_JOURNAL } mode;
static const char *const mode_name[] = {"plain", "chain", "journal"};

typedef struct run {
    mode m;
    once_client *c;
    once_journal *j;
    leveldb_t *db;
    leveldb_writeoptions_t *wo;
    int64_t end_ns;
    int64_t *lat;    /* SAMPLES_MAX, shared */
    int64_t *commit; /* SAMPLES_MAX: a chain step's commit alone */
    atomic_size_t nc;
    atomic_size_t n;
    atomic_size_t errors;
} run;

typedef struct thr {
    run *r;
    int id;
} thr;

/* One mode at one level. */
typedef struct figure {
    double per_s, p50_us, p99_us;
    size_t errors;
} figure;

static void
sample(run *r, int64_t t0)
{
    size_t i = atomic_fetch_add(&r->n, 1);

    if (i < SAMPLES_MAX) {
        r->lat[i] = bench_now_ns() - t0;
    }
}

/* One chain step: commit (context, next Increment), then send; the
 * commit's own time sampled in r->commit. */
static int
chain_step(run *r, once_chain *ch, const char *name, uint64_t k)
{
    int64_t t0;
    size_t i;
    char ctx[24];
    void *req;
    size_t len;
    int rv;

    snprintf(ctx, sizeof(ctx), "%" PRIu64, k);
    if (once_chain_counter_request(name, 1, &req, &len, NULL) != ONCE_OK) {
        return -1;
    }
    t0 = bench_now_ns();
    rv = once_chain_commit(ch, ctx, strlen(ctx), "/once.v1.Counter/Increment",
                           req, len, NULL, NULL);
    if ((i = atomic_fetch_add(&r->nc, 1)) < SAMPLES_MAX) {
        r->commit[i] = bench_now_ns() - t0;
    }
    once_free(req);
    return rv == ONCE_OK ? once_chain_send(ch, NULL, NULL, NULL, NULL) : rv;
}

static void *
thr_run(void *arg)
{
    thr *t = arg;
    run *r = t->r;
    char name[32], val[200] = {0};
    once_chain *ch = NULL;
    uint64_t k = 0;

    snprintf(name, sizeof(name), "bench.%d", t->id);
    if (r->m == MODE_CHAIN &&
        once_chain_open(r->j, r->c, name, &ch, NULL) != ONCE_OK) {
        atomic_fetch_add(&r->errors, 1);
        return NULL;
    }
    /* a chain left PENDING by a previous level: finish its step */
    if (ch != NULL) {
        (void)once_chain_send(ch, NULL, NULL, NULL, NULL);
    }
    while (bench_now_ns() < r->end_ns) {
        int64_t t0 = bench_now_ns();
        int rv = 0;
        char *err = NULL;

        if (r->m == MODE_PLAIN) {
            rv = once_counter_incr_new(r->c, name, 1, NULL, NULL, NULL);
        } else if (r->m == MODE_CHAIN) {
            rv = chain_step(r, ch, name, k++);
        } else {
            leveldb_put(r->db, r->wo, name, strlen(name), val, sizeof(val),
                        &err);
            rv = err != NULL;
            leveldb_free(err);
        }
        if (rv != 0) {
            atomic_fetch_add(&r->errors, 1);
        } else {
            sample(r, t0);
        }
    }
    once_chain_close(ch);
    return NULL;
}

static figure
measure(run *r, int threads, int seconds)
{
    pthread_t tid[MAX_THREADS];
    thr t[MAX_THREADS];
    size_t n, kept;
    figure f;

    atomic_store(&r->n, 0);
    atomic_store(&r->nc, 0);
    atomic_store(&r->errors, 0);
    r->end_ns = bench_now_ns() + (int64_t)seconds * 1000000000;
    for (int i = 0; i < threads; i++) {
        t[i] = (thr){r, i};
        pthread_create(&tid[i], NULL, thr_run, &t[i]);
    }
    for (int i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
    }
    n = atomic_load(&r->n);
    kept = n < SAMPLES_MAX ? n : SAMPLES_MAX;
    f.per_s = (double)n / seconds;
    f.p50_us = bench_pct_us(r->lat, kept, 50);
    f.p99_us = bench_pct_us(r->lat, kept, 99);
    f.errors = atomic_load(&r->errors);
    printf("%-8s %4d thr  %9.0f /s  p50 %8.1f us  p99 %8.1f us  errors %zu\n",
           mode_name[r->m], threads, f.per_s, f.p50_us, f.p99_us, f.errors);
    if (r->m == MODE_CHAIN) {
        n = atomic_load(&r->nc);
        kept = n < SAMPLES_MAX ? n : SAMPLES_MAX;
        printf("         of which the commit (its synced write): p50 %.1f us, "
               "p99 %.1f us\n",
               bench_pct_us(r->commit, kept, 50),
               bench_pct_us(r->commit, kept, 99));
    }
    fflush(stdout);
    return f;
}

typedef struct args {
    int seconds;
    int levels[MAX_LEVELS];
    int nlevels;
    const char *csv;
    bool modes[MODE_JOURNAL + 1]; /* which modes run (--modes) */
} args;

static void
usage(FILE *out)
{
    fprintf(
        out,
        "usage: bench_chains [options] [SECONDS]\n"
        "\n"
        "A journaled chain step against a plain call, on an onced of its\n"
        "own: 'plain' loops once_counter_incr_new on one shared handle,\n"
        "'chain' gives each thread a chain in one shared journal (one\n"
        "synced local write, the call, the reply's unsynced write), and\n"
        "'journal' is LevelDB's synced puts alone. Prints calls/s and\n"
        "p50/p99 per mode and level, then chain/plain ratios.\n"
        "\n"
        "  --seconds S      per mode and level (default 5; also as the\n"
        "                   one positional argument)\n"
        "  --threads LIST   levels, comma-separated (default 1,64; at\n"
        "                   most %d levels of at most %d threads)\n"
        "  --modes LIST     which of plain,chain,journal run (default all;\n"
        "                   one alone suits perf record / perf stat)\n"
        "  --csv FILE       also write mode,threads,per_s,p50_us,p99_us,\n"
        "                   errors rows to FILE\n"
        "  --help           this text\n",
        MAX_LEVELS, MAX_THREADS);
}

/* a->modes from "plain,chain,..."; false on an unknown name. */
static bool
parse_modes(const char *s, args *a)
{
    size_t n;

    memset(a->modes, 0, sizeof(a->modes));
    for (; *s != '\0'; s += n + (s[n] == ',')) {
        int m = MODE_PLAIN;

        n = strcspn(s, ",");
        while (m <= MODE_JOURNAL && (strlen(mode_name[m]) != n ||
                                     strncmp(s, mode_name[m], n) != 0)) {
            m++;
        }
        if (m > MODE_JOURNAL) {
            return false;
        }
        a->modes[m] = true;
    }
    return true;
}

/* 0: run; 1: exit 0 (--help); 2: exit 2 (a usage error, said). */
static int
parse_args(int argc, char **argv, args *a)
{
    static const struct option opts[] = {{"seconds", required_argument, 0, 's'},
                                         {"threads", required_argument, 0, 't'},
                                         {"csv", required_argument, 0, 'c'},
                                         {"modes", required_argument, 0, 'm'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int ch;

    *a = (args){.seconds = 5,
                .levels = {1, 64},
                .nlevels = 2,
                .modes = {true, true, true}};
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (ch == 'h') {
            usage(stdout);
            return 1;
        } else if (ch == 's') {
            a->seconds = atoi(optarg);
        } else if (ch == 't' &&
                   (a->nlevels = bench_parse_levels(
                        optarg, a->levels, MAX_LEVELS, MAX_THREADS)) > 0) {
            continue;
        } else if (ch == 'c') {
            a->csv = optarg;
        } else if (ch == 'm' && parse_modes(optarg, a)) {
            continue;
        } else {
            fprintf(stderr, "bench_chains: bad option or value "
                            "(--threads wants e.g. 1,64, --modes e.g. "
                            "plain,chain); see --help\n");
            return 2;
        }
    }
    if (optind < argc) {
        a->seconds = atoi(argv[optind]);
    }
    if (a->seconds < 1 || a->seconds > 600) {
        fprintf(stderr, "bench_chains: seconds must be 1..600; see --help\n");
        return 2;
    }
    return 0;
}

/* chain against plain at each level, and the targets of issue 25. */
static void
print_ratios(const args *a, figure f[][MAX_LEVELS])
{
    if (!a->modes[MODE_CHAIN] || !a->modes[MODE_PLAIN]) {
        return;
    }
    printf("\nchain / plain (same run):\n");
    for (int l = 0; l < a->nlevels; l++) {
        printf("  %3d thr: calls/s %.2f, p50 %.2f, p99 %.2f\n", a->levels[l],
               f[MODE_CHAIN][l].per_s / f[MODE_PLAIN][l].per_s,
               f[MODE_CHAIN][l].p50_us / f[MODE_PLAIN][l].p50_us,
               f[MODE_CHAIN][l].p99_us / f[MODE_PLAIN][l].p99_us);
    }
    printf("targets: p50 at 1 thread <= 1.6, calls/s at 64 threads >= 0.7\n");
}

static void
write_csv(const args *a, figure f[][MAX_LEVELS])
{
    FILE *fp = fopen(a->csv, "w");

    if (fp == NULL) {
        fprintf(stderr, "bench_chains: cannot write %s\n", a->csv);
        return;
    }
    fprintf(fp, "mode,threads,per_s,p50_us,p99_us,errors\n");
    for (int m = MODE_PLAIN; m <= MODE_JOURNAL; m++) {
        for (int l = 0; l < a->nlevels && a->modes[m]; l++) {
            fprintf(fp, "%s,%d,%.0f,%.1f,%.1f,%zu\n", mode_name[m],
                    a->levels[l], f[m][l].per_s, f[m][l].p50_us, f[m][l].p99_us,
                    f[m][l].errors);
        }
    }
    fclose(fp);
}

int
main(int argc, char **argv)
{
    args a;
    bench_onced b;
    once_options o;
    once_status st;
    char dir[400], *err = NULL;
    leveldb_options_t *lo;
    run r = {0};
    figure f[MODE_JOURNAL + 1][MAX_LEVELS];
    int pr = parse_args(argc, argv, &a);

    if (pr != 0) {
        return pr == 1 ? 0 : 2;
    }
    if (bench_onced_start(&b, ONCED_PATH, NULL) != 0) {
        return 1;
    }
    r.lat = malloc(sizeof(int64_t) * SAMPLES_MAX);
    r.commit = malloc(sizeof(int64_t) * SAMPLES_MAX);
    once_options_init(&o);
    o.url = b.url;
    if (once_client_open(&r.c, &o, &st) != ONCE_OK) {
        fprintf(stderr, "open: %s\n", st.message);
        return 1;
    }
    snprintf(dir, sizeof(dir), "%s/journal", b.dir);
    if (once_journal_open(dir, &r.j, &st) != ONCE_OK) {
        fprintf(stderr, "journal: %s\n", st.message);
        return 1;
    }
    snprintf(dir, sizeof(dir), "%s/raw", b.dir);
    lo = leveldb_options_create();
    leveldb_options_set_create_if_missing(lo, 1);
    r.db = leveldb_open(lo, dir, &err);
    r.wo = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(r.wo, 1);
    for (int m = MODE_PLAIN; m <= MODE_JOURNAL; m++) {
        for (int l = 0; l < a.nlevels && a.modes[m]; l++) {
            r.m = (mode)m;
            fprintf(stderr, "bench_chains: %s at %d threads, %d s\n",
                    mode_name[m], a.levels[l], a.seconds);
            f[m][l] = measure(&r, a.levels[l], a.seconds);
        }
    }
    print_ratios(&a, f);
    if (a.csv != NULL) {
        write_csv(&a, f);
    }
    leveldb_close(r.db);
    leveldb_writeoptions_destroy(r.wo);
    leveldb_options_destroy(lo);
    once_journal_close(r.j);
    once_client_close(r.c);
    bench_onced_stop(&b);
    free(r.lat);
    free(r.commit);
    return 0;
}
