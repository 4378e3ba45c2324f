/*
 * bench_chains.c — a journaled chain step against a plain call (issue 25,
 * docs/performance.md "Chains"), on an onced of its own.
 *
 * Owns: the measurement only, for each --threads level (default 1 and
 * 64), each --seconds long:
 *   plain    each thread loops once_counter_incr_new on one shared handle;
 *   chain    each thread has its own chain in one shared journal and loops
 *            once_chain_commit (context + the next Increment, one synced
 *            local write) → once_chain_send (the call, then the reply's
 *            unsynced write);
 *   journal  each thread loops synced 200-byte LevelDB puts on its own key
 *            (no server): how LevelDB's write grouping shares fsyncs
 *            between threads, the choice journal.c made.
 * Output: calls (or writes)/s and p50/p99 latency per mode and level.
 * Never: runs unbounded: every loop ends on its deadline.
 */
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
    int64_t *lat; /* SAMPLES_MAX, shared */
    atomic_size_t n;
    atomic_size_t errors;
} run;

typedef struct thr {
    run *r;
    int id;
} thr;

static void
sample(run *r, int64_t t0)
{
    size_t i = atomic_fetch_add(&r->n, 1);

    if (i < SAMPLES_MAX) {
        r->lat[i] = bench_now_ns() - t0;
    }
}

/* One chain step: commit (context, next Increment), then send. */
static int
chain_step(once_chain *ch, const char *name, uint64_t k)
{
    char ctx[24];
    void *req;
    size_t len;
    int rv;

    snprintf(ctx, sizeof(ctx), "%" PRIu64, k);
    if (once_chain_counter_request(name, 1, &req, &len, NULL) != ONCE_OK) {
        return -1;
    }
    rv = once_chain_commit(ch, ctx, strlen(ctx), "/once.v1.Counter/Increment",
                           req, len, NULL, NULL);
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
            rv = chain_step(ch, name, k++);
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

static void
measure(run *r, int threads, int seconds)
{
    pthread_t tid[MAX_THREADS];
    thr t[MAX_THREADS];
    size_t n;

    atomic_store(&r->n, 0);
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
    printf("%-8s %4d thr  %9.0f /s  p50 %8.1f us  p99 %8.1f us  errors %zu\n",
           mode_name[r->m], threads, (double)n / seconds,
           bench_pct_us(r->lat, n < SAMPLES_MAX ? n : SAMPLES_MAX, 50),
           bench_pct_us(r->lat, n < SAMPLES_MAX ? n : SAMPLES_MAX, 99),
           atomic_load(&r->errors));
    fflush(stdout);
}

int
main(int argc, char **argv)
{
    int levels[] = {1, 64}, seconds = argc > 1 ? atoi(argv[1]) : 5;
    bench_onced b;
    once_options o;
    once_status st;
    char dir[400], *err = NULL;
    leveldb_options_t *lo = leveldb_options_create();
    run r = {0};

    if (bench_onced_start(&b, ONCED_PATH, NULL) != 0) {
        return 1;
    }
    r.lat = malloc(sizeof(int64_t) * SAMPLES_MAX);
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
    leveldb_options_set_create_if_missing(lo, 1);
    r.db = leveldb_open(lo, dir, &err);
    r.wo = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(r.wo, 1);
    for (int m = MODE_PLAIN; m <= MODE_JOURNAL; m++) {
        for (size_t l = 0; l < sizeof(levels) / sizeof(levels[0]); l++) {
            r.m = (mode)m;
            measure(&r, levels[l], seconds);
        }
    }
    leveldb_close(r.db);
    leveldb_writeoptions_destroy(r.wo);
    leveldb_options_destroy(lo);
    once_journal_close(r.j);
    once_client_close(r.c);
    bench_onced_stop(&b);
    free(r.lat);
    return 0;
}
