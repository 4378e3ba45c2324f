/*
 * bench_outbox.c — once's outbox beside the usual alternative, a
 * PostgreSQL outbox table written in the business transaction and a
 * polling dispatcher (issue 24, docs/performance.md "Outbox against a
 * PostgreSQL outbox table"), in one run, as ratios:
 *
 *   producing   events committed with their effect per second at each
 *               --producers level: a KV Txn that puts the business row and
 *               emits one event, against ob_produce() (business row +
 *               outbox row, one round trip, outbox_pg.c);
 *   delivering  a backlog of --backlog events applied into PostgreSQL in
 *               batches of --batch: once's consumer (Read, one PostgreSQL
 *               transaction with the events and its offset, Ack) against
 *               the dispatcher (one transaction: SELECT ... FOR UPDATE SKIP
 *               LOCKED, insert into the target, DELETE); and once into a
 *               no-op consumer (Reads of 1000, Ack);
 *   latency     commit to delivery, p50/p99, while --latency-producers
 *               produce: once's consumer long-polls, the dispatcher polls
 *               every --poll-ms when its last poll was not full;
 *               At each level also the floor (floor_load.h): onced's
 *               shape with nothing in it, synced and not, against the same
 *               PostgreSQL figure — the most a target at that level can be
 *               on this machine with this shape;
 *   idle        onced's CPU with and without a consumer long-polling an
 *               empty topic, and its fsyncs (Stats.fsyncs) over 1000 Reads
 *               against the same time with none.
 *
 * Each phase (--phases picks some) runs on a thread of its own under a
 * time bound its deadlines add up to, with a progress line on stderr;
 * its rows are printed and appended to the CSV (outbox_report.c) as soon
 * as it ends; one that overruns ends the run (exit 3) with its step and
 * the bench's stacks.
 *
 * Owns: the run: one onced (bench_onced_start) and one PostgreSQL cluster
 * (pg_cluster.c), both in temp dirs, the threads, the phases' bounds.
 * Invariant: nothing counts unless it returned OK; every delivery is
 * checked — the target table (or the consumer's own tally) must hold
 * exactly the events produced, each once (count, distinct count, sum of
 * ids); a mismatch is printed and the exit status is 1.
 * Never: runs unbounded: producers end on their deadline or count,
 * consumers on their count or a drain deadline, every call on its
 * timeout, every phase on its bound.
 */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <once/client.h>
#include <once/kv.h>
#include <once/outbox.h>

#include "bench/bench_env.h"
#include "bench/floor_load.h"
#include "bench/outbox_pg.h"
#include "bench/outbox_report.h"
#include "tests/sys_helpers.h"

#ifndef ONCED_PATH
#define ONCED_PATH "onced"
#endif
#ifndef FLOOR_PATH
#define FLOOR_PATH "once_floor"
#endif

#define MAX_LEVELS    8
#define MAX_PRODUCERS 64
#define SAMPLES_MAX   (1 << 21)
#define MAX_ERRORS    100  /* a producer gives up after so many */
#define LONGPOLL_MS   1000 /* a latency consumer's Read wait */
#define IDLE_POLL_MS  5000 /* the idle consumer's Read wait */
#define NOOP_BATCH    1000 /* the largest Read */
#define FSYNC_READS   1000
#define DRAIN_MS      60000 /* after the producers, for the last events */
#define PAYLOAD_MAX   64
#define SETTLE_S      20 /* for onced to go quiet before the idle figures */
#define SEEN_MAX      (1u << 26) /* event ids a consumer's tally tells apart */
#define CALL_SLACK_S  30  /* a call's deadline (client_open) and then some */
#define FILL_FS_S     60  /* the fsync phase's 100 events */
#define FLOOR_BYTES   160 /* a floor request: about a Txn's envelope */

typedef enum sys { SYS_ONCE, SYS_PG } sys;

/* The phases, in the order they run (--phases). */
enum {
    PH_PRODUCING = 1u << 0,
    PH_DELIVERING = 1u << 1,
    PH_LATENCY = 1u << 2,
    PH_IDLE = 1u << 3,
    PH_FSYNC = 1u << 4,
    PH_ALL = (1u << 5) - 1,
};
static const char *const phase_name[] = {"producing", "delivering", "latency",
                                         "idle", "fsync"};
static const char *const sys_name[] = {"once", "postgres"};

typedef struct args {
    int seconds;
    int backlog;
    int levels[MAX_LEVELS];
    int nlevels;
    int lat_producers;
    int batch;
    int read_max;  /* the delivering consumer's Reads (batch: its commits) */
    int ack_every; /* its Acks: every so many Reads */
    int poll_ms;
    const char *pg_bin;
    const char *csv;
    const char *floor; /* once_floor's path; NULL: --no-floor */
    unsigned phases;   /* PH_* bits: what runs */
} args;

typedef struct bench {
    args a;
    bench_onced srv;
    pg_cluster pg;
    PGconn *pc; /* the main thread's: checks, TRUNCATE */
    char top[64];
    atomic_uint_fast64_t next_ev; /* event ids, from 1, unique in the run */
    bool ok;                      /* every check passed */
    /* For the progress lines: what the running phase does now, and the
     * events produced and delivered in the run so far. */
    _Atomic(const char *) step;
    atomic_uint_fast64_t progress;
} bench;

/* What came out of a run of producers or of a consumer. */
typedef struct tally {
    uint64_t n, sum;   /* events (produced or delivered) and sum of ids */
    uint64_t distinct; /* delivered: different ids among them */
    uint64_t errors;
    uint64_t fsyncs; /* producing: the server's fsyncs meanwhile */
    double per_s;
    double p50_us, p99_us;
} tally;

static void
say(char *err, int rv, const once_status *st)
{
    snprintf(err, PG_ERR_LEN, "once: %s %s %s", once_strerror(rv), st->reason,
             st->message);
}

/* A handle (with a lease unless reads_only); attempts outlast the
 * longest long-poll. */
static once_client *
client_open(bench *b, bool reads_only, char *err)
{
    once_options o;
    once_status st;
    once_client *c = NULL;
    int rv;

    once_options_init(&o);
    o.url = b->srv.url;
    o.no_lease = reads_only;
    o.attempt_timeout_ms = IDLE_POLL_MS + 5000;
    o.deadline_ms = IDLE_POLL_MS + 15000;
    if ((rv = once_client_open(&c, &o, &st)) != ONCE_OK) {
        say(err, rv, &st);
        return NULL;
    }
    return c;
}

/* ---- producers ----------------------------------------------------------- */

/* A KV Txn: the business row of ev and one event on topic, one batch. */
static int
once_produce(once_client *c, const char *topic, uint64_t ev,
             const char *payload, char *err)
{
    once_kv_txn *t = NULL;
    once_status st;
    char key[32];
    size_t plen = strlen(payload);
    int rv;

    snprintf(key, sizeof(key), "biz/%" PRIu64, ev);
    if ((rv = once_kv_txn_new(&t)) == ONCE_OK &&
        (rv = once_kv_txn_put(t, ONCE_KV_THEN, key, strlen(key), payload, plen,
                              false)) == ONCE_OK &&
        (rv = once_kv_txn_emit(t, ONCE_KV_THEN, topic, payload, plen)) ==
            ONCE_OK) {
        rv = once_kv_txn_exec(c, t, NULL, &st);
        if (rv == ONCE_OK && !once_kv_txn_succeeded(t)) {
            snprintf(err, PG_ERR_LEN, "once: Txn without compares failed");
            rv = -1;
        } else if (rv != ONCE_OK) {
            say(err, rv, &st);
        }
    } else {
        snprintf(err, PG_ERR_LEN, "once: Txn builder: %s", once_strerror(rv));
    }
    once_kv_txn_free(t);
    return rv == ONCE_OK ? 0 : -1;
}

typedef struct prod {
    bench *b;
    sys s;
    const char *topic;
    int64_t end_ns;
    uint64_t last_ev; /* stop past this id; 0: on the deadline only */
    atomic_uint_fast64_t n, sum, errors;
    atomic_int running;
    pthread_mutex_t mu;
    char err[PG_ERR_LEN]; /* the first error */
} prod;

static void
prod_fail(prod *p, const char *err)
{
    pthread_mutex_lock(&p->mu);
    if (p->err[0] == '\0') {
        snprintf(p->err, sizeof(p->err), "%s", err);
    }
    pthread_mutex_unlock(&p->mu);
    atomic_fetch_add(&p->errors, 1);
}

static void *
prod_thread(void *arg)
{
    prod *p = arg;
    char err[PG_ERR_LEN] = "", payload[PAYLOAD_MAX];
    once_client *oc = NULL;
    PGconn *pc = NULL;
    uint64_t mine = 0;

    if (p->s == SYS_ONCE ? (oc = client_open(p->b, false, err)) == NULL
                         : (pc = obpg_connect(&p->b->pg, err)) == NULL) {
        prod_fail(p, err);
    }
    while ((oc != NULL || pc != NULL) && bench_now_ns() < p->end_ns &&
           mine < MAX_ERRORS) {
        uint64_t ev = atomic_fetch_add(&p->b->next_ev, 1);
        int64_t stamp = bench_now_ns();
        int rv;

        if (p->last_ev != 0 && ev > p->last_ev) {
            break;
        }
        snprintf(payload, sizeof(payload), "%" PRIu64 " %" PRId64, ev, stamp);
        rv = oc != NULL ? once_produce(oc, p->topic, ev, payload, err)
                        : obpg_produce(pc, ev, stamp, payload, err);
        if (rv == 0) {
            atomic_fetch_add(&p->b->progress, 1);
            atomic_fetch_add(&p->n, 1);
            atomic_fetch_add(&p->sum, ev);
        } else {
            prod_fail(p, err);
            mine++;
        }
    }
    once_client_close(oc);
    PQfinish(pc);
    atomic_fetch_sub(&p->running, 1);
    return NULL;
}

/*
 * n producers of system s on topic (once) or the outbox table (postgres),
 * for seconds, or until count events (count > 0: a progress bar, and the
 * deadline is seconds as a bound). The tally of what returned OK.
 */
static tally
produce(bench *b, sys s, const char *topic, int n, int seconds, int count)
{
    pthread_t tid[MAX_PRODUCERS];
    prod p = {.b = b, .s = s, .topic = topic};
    int64_t t0 = bench_now_ns();
    tally t = {0};

    pthread_mutex_init(&p.mu, NULL);
    p.end_ns = t0 + (int64_t)seconds * 1000000000;
    if (count > 0) {
        p.last_ev = atomic_load(&b->next_ev) + (uint64_t)count - 1;
    }
    atomic_store(&p.running, n);
    for (int i = 0; i < n; i++) {
        pthread_create(&tid[i], NULL, prod_thread, &p);
    }
    while (count > 0 && atomic_load(&p.running) > 0) {
        bench_progress(sys_name[s], (double)atomic_load(&p.n) / count, 0);
        bench_sleep_ms(200);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(tid[i], NULL);
    }
    if (count > 0) {
        bench_progress(sys_name[s], (double)atomic_load(&p.n) / count, 1);
    }
    t.n = atomic_load(&p.n);
    t.sum = atomic_load(&p.sum);
    t.errors = atomic_load(&p.errors);
    t.per_s = (double)t.n * 1e9 / (double)(bench_now_ns() - t0);
    if (p.err[0] != '\0') {
        fprintf(stderr, "bench_outbox: %s: %" PRIu64 " errors, first: %s\n",
                sys_name[s], t.errors, p.err);
    }
    pthread_mutex_destroy(&p.mu);
    return t;
}

/* ---- consumers ----------------------------------------------------------- */

/* What a consumer keeps of the events it is given. */
typedef struct sink {
    int64_t *lat; /* NULL: no latencies */
    size_t nlat;
    uint64_t n, sum;
    uint64_t distinct; /* ids seen for the first time */
    uint8_t *seen;     /* a bit per id below SEEN_MAX */
} sink;

static int
sink_init(sink *k, bool latencies)
{
    *k = (sink){0};
    k->seen = calloc(SEEN_MAX / 8, 1);
    k->lat = latencies ? malloc(sizeof(int64_t) * SAMPLES_MAX) : NULL;
    return k->seen == NULL || (latencies && k->lat == NULL) ? -1 : 0;
}

static void
sink_free(sink *k)
{
    free(k->seen);
    free(k->lat);
}

static void
sink_take(void *arg, uint64_t ev, int64_t stamp)
{
    sink *k = arg;

    k->n++;
    k->sum += ev;
    if (k->seen != NULL && ev < SEEN_MAX &&
        (k->seen[ev / 8] & (1u << (ev % 8))) == 0) {
        k->seen[ev / 8] |= (uint8_t)(1u << (ev % 8));
        k->distinct++;
    }
    if (k->lat != NULL && k->nlat < SAMPLES_MAX) {
        k->lat[k->nlat++] = bench_now_ns() - stamp;
    }
}

typedef struct cons {
    bench *b;
    const char *topic, *name;
    uint32_t batch;
    uint64_t wait_ms;
    PGconn *apply;   /* NULL: a no-op consumer */
    bool reads_only; /* no lease: never Acks (an empty topic) */
    /* Stop once the cursor reaches it (set by the main thread when the
     * producers are done), or at the deadline. */
    atomic_uint_fast64_t stop_at;
    atomic_llong deadline_ns;
    sink k;
    uint64_t reads, acked;
    uint32_t ack_every; /* the product loop (cons_apply_run): its option */
    uint32_t read_max;  /* its Reads' size (batch: its transactions') */
    uint64_t *staged;   /* its batch's event ids, until batch_done */
    size_t nstaged;
    uint64_t first; /* the offset of staged[0] */
    char err[PG_ERR_LEN];
} cons;

/* The event id and the producer's stamp of ev's payload. */
static uint64_t
cons_parse(const once_outbox_event *ev, int64_t *stamp)
{
    char text[PAYLOAD_MAX] = "";
    char *end;
    uint64_t id;

    memcpy(text, ev->payload,
           ev->payload_len < PAYLOAD_MAX ? ev->payload_len : PAYLOAD_MAX - 1);
    id = strtoull(text, &end, 10);
    *stamp = strtoll(end, NULL, 10);
    return id;
}

/* The batch's events into k (and PostgreSQL when c->apply), in order. */
static int
cons_batch(cons *c, once_outbox_batch *bt, uint64_t *last)
{
    size_t n = once_outbox_batch_count(bt);
    uint64_t *evs = malloc((n + 1) * sizeof(*evs)), first = 0;
    int rv = 0;

    if (evs == NULL) {
        snprintf(c->err, sizeof(c->err), "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        once_outbox_event ev;
        int64_t stamp;

        once_outbox_batch_at(bt, i, &ev);
        evs[i] = cons_parse(&ev, &stamp);
        first = i == 0 ? ev.offset : first;
        *last = ev.offset;
        sink_take(&c->k, evs[i], stamp);
    }
    atomic_fetch_add(&c->b->progress, n);
    if (c->apply != NULL && n > 0) {
        rv = obpg_apply(c->apply, c->name, first, evs, n, c->err);
    }
    free(evs);
    return rv;
}

/* Read, apply, Ack until stop_at or the deadline. */
static void *
cons_thread(void *arg)
{
    cons *c = arg;
    once_client *oc = client_open(c->b, c->reads_only, c->err);
    once_status st;
    int rv;

    if (oc == NULL) {
        return NULL;
    }
    while (c->acked < atomic_load(&c->stop_at) &&
           bench_now_ns() < atomic_load(&c->deadline_ns)) {
        once_outbox_batch *bt = NULL;
        uint64_t last = 0;

        rv = once_outbox_read(oc, c->topic, c->name, c->batch, c->wait_ms, &bt,
                              &st);
        c->reads++;
        if (rv != ONCE_OK) {
            say(c->err, rv, &st);
            break;
        }
        if (cons_batch(c, bt, &last) != 0) {
            once_outbox_batch_free(bt);
            break;
        }
        once_outbox_batch_free(bt);
        if (last != 0 &&
            (rv = once_outbox_ack(oc, c->topic, c->name, last, NULL, &c->acked,
                                  &st)) != ONCE_OK) {
            say(c->err, rv, &st);
            break;
        }
    }
    once_client_close(oc);
    return NULL;
}

/* The staged events' PostgreSQL transaction: the events and the
 * offset of the last (obpg_apply); ONCE_CONSUMER_NEXT or -1. */
static int
cons_apply_staged(cons *c)
{
    size_t n = c->nstaged;

    c->nstaged = 0;
    atomic_fetch_add(&c->b->progress, n);
    if (n == 0) {
        return ONCE_CONSUMER_NEXT;
    }
    return obpg_apply(c->apply, c->name, c->first, c->staged, n, c->err) == 0
               ? ONCE_CONSUMER_NEXT
               : -1;
}

/* libonce's receiver loop (once_consumer_run_opts), one event: staged,
 * and every c->batch events one PostgreSQL transaction; STOP at stop_at,
 * -2 past the deadline (not applied). */
static int
cons_apply_event(void *arg, const once_outbox_event *ev)
{
    cons *c = arg;
    int64_t stamp;

    if (bench_now_ns() >= atomic_load(&c->deadline_ns)) {
        snprintf(c->err, sizeof(c->err), "drain deadline");
        return -2;
    }
    if (c->nstaged == 0) {
        c->first = ev->offset;
    }
    c->staged[c->nstaged] = cons_parse(ev, &stamp);
    sink_take(&c->k, c->staged[c->nstaged++], stamp);
    if (c->nstaged == c->batch && cons_apply_staged(c) != ONCE_CONSUMER_NEXT) {
        return -1;
    }
    return ev->offset >= atomic_load(&c->stop_at) ? ONCE_CONSUMER_STOP
                                                  : ONCE_CONSUMER_NEXT;
}

/* The end of a Read's events: the rest of them in one transaction. */
static int
cons_apply_batch(void *arg, uint64_t last)
{
    (void)last;
    return cons_apply_staged(arg);
}

/*
 * The delivering consumer into PostgreSQL through libonce's loop: Reads
 * of c->read_max events, one PostgreSQL transaction of c->batch events
 * (with its offset row) at a time, the next Read sent while they commit,
 * an Ack every c->ack_every Reads (sent while the next ones commit).
 */
static void
cons_apply_run(cons *c)
{
    once_client *oc = client_open(c->b, false, c->err);
    once_consumer_options o;
    once_status st;
    int rv;

    if (oc == NULL ||
        (c->staged = malloc(sizeof(*c->staged) * c->batch)) == NULL) {
        once_client_close(oc);
        return;
    }
    once_consumer_options_init(&o);
    o.max = c->read_max;
    o.wait_ms = LONGPOLL_MS;
    o.ack_every = c->ack_every;
    o.batch_done = cons_apply_batch;
    rv = once_consumer_run_opts(oc, c->topic, c->name, &o, cons_apply_event, c,
                                &st);
    if (rv > 0) {
        say(c->err, rv, &st);
    }
    free(c->staged);
    once_client_close(oc);
}

static int
subscribe(bench *b, const char *topic, const char *name)
{
    char err[PG_ERR_LEN];
    once_client *c = client_open(b, false, err);
    once_status st;
    int rv =
        c == NULL ? -1 : once_outbox_subscribe(c, topic, name, NULL, NULL, &st);

    if (c != NULL && rv != ONCE_OK) {
        say(err, rv, &st);
    }
    if (rv != ONCE_OK) {
        fprintf(stderr, "bench_outbox: subscribe %s: %s\n", topic, err);
    }
    once_client_close(c);
    return rv == ONCE_OK ? 0 : -1;
}

/* The dispatcher of the latency run (a cons without topic): polls until
 * stop_at events or the deadline, sleeping poll_ms after a poll that was
 * not full. */
static void *
poll_thread(void *arg)
{
    cons *p = arg;
    PGconn *c = obpg_connect(&p->b->pg, p->err);

    while (c != NULL && p->k.n < atomic_load(&p->stop_at) &&
           bench_now_ns() < atomic_load(&p->deadline_ns)) {
        int n = 0;

        if (obpg_poll(c, NOOP_BATCH, sink_take, &p->k, &n, p->err) != 0) {
            break;
        }
        atomic_fetch_add(&p->b->progress, (uint64_t)n);
        if (n < NOOP_BATCH) {
            bench_sleep_ms(p->b->a.poll_ms);
        }
    }
    PQfinish(c);
    return NULL;
}

/* ---- checks -------------------------------------------------------------- */

static void
check(bench *b, const char *what, uint64_t n, uint64_t distinct, uint64_t sum,
      const tally *want)
{
    if (n == want->n && distinct == want->n && sum == want->sum) {
        printf("  %-40s checked (%" PRIu64 " events, sum of ids %" PRIu64 ")\n",
               what, n, sum);
    } else {
        printf("  %-40s MISMATCH: %" PRIu64 " delivered (%" PRIu64
               " distinct), sum %" PRIu64 "; produced %" PRIu64 ", sum %" PRIu64
               "\n",
               what, n, distinct, sum, want->n, want->sum);
        b->ok = false;
    }
    fflush(stdout);
}

/* table ("target" or "outbox") against want. */
static void
check_table(bench *b, const char *what, const char *table, const tally *want)
{
    char err[PG_ERR_LEN];
    int64_t n, d, s;

    if (obpg_check(b->pc, table, &n, &d, &s, err) != 0) {
        printf("  %-40s cannot check: %s\n", what, err);
        b->ok = false;
        return;
    }
    check(b, what, (uint64_t)n, (uint64_t)d, (uint64_t)s, want);
}

static void
pg_sql(bench *b, const char *sql)
{
    char err[PG_ERR_LEN];

    if (pg_exec(b->pc, sql, err) != 0) {
        fprintf(stderr, "bench_outbox: %s\n", err);
        b->ok = false;
    }
}

/* The head of topic (Topics) is n: every OK Txn gave one offset. */
static void
check_head(bench *b, const char *what, const char *topic, const tally *want)
{
    char err[PG_ERR_LEN] = "";
    once_client *c = client_open(b, true, err);
    once_outbox_topics_list *l = NULL;
    once_status st;
    uint64_t head = 0;
    bool found = false;
    int rv = c == NULL ? -1 : once_outbox_topics(c, &l, &st);

    for (size_t i = 0; rv == ONCE_OK && i < once_outbox_topics_count(l); i++) {
        once_outbox_topic_info ti;
        if (once_outbox_topics_at(l, i, &ti) == ONCE_OK &&
            strcmp(ti.name, topic) == 0) {
            head = ti.head;
            found = true;
        }
    }
    if (found && head == want->n) {
        printf("  %-40s checked (head %" PRIu64 " = events committed)\n", what,
               head);
    } else {
        printf("  %-40s MISMATCH: topic %s head %" PRIu64 "%s; %" PRIu64
               " committed\n",
               what, topic, head, found ? "" : " (not listed)", want->n);
        b->ok = false;
    }
    once_outbox_topics_free(l);
    once_client_close(c);
}

/* ---- the phases ---------------------------------------------------------- */

typedef struct results {
    tally prod[2][MAX_LEVELS];
    floor_tally floor[2][MAX_LEVELS]; /* [0] synced, [1] no fsync */
    tally apply[2], apply_serial, noop, lat[2];
    double cpu_quiet, cpu_poll; /* onced's CPU, ms per s */
    uint64_t poll_reads;
    uint64_t fs_reads, fs_idle; /* fsyncs over the Reads, the same time idle */
} results;

static int
largest_level(const args *a)
{
    int m = 1;

    for (int l = 0; l < a->nlevels; l++) {
        m = a->levels[l] > m ? a->levels[l] : m;
    }
    return m;
}

static bool
has_16(const args *a)
{
    for (int l = 0; l < a->nlevels; l++) {
        if (a->levels[l] == 16) {
            return true;
        }
    }
    return false;
}

/* The WAL syncs PostgreSQL counted (pg_stat_wal), 0 when unknown. A
 * backend hands its counts over at most once a second and when it exits:
 * the count waits that second out. */
static uint64_t
pg_wal_syncs(bench *b)
{
    char err[PG_ERR_LEN];
    int64_t v = 0;

    bench_sleep_ms(1500);
    if (obpg_scalar(b->pc, "SELECT wal_sync FROM pg_stat_wal", &v, err) != 0) {
        fprintf(stderr, "bench_outbox: %s\n", err);
        return 0;
    }
    return (uint64_t)v;
}

/* The floor at level l, synced and not (--no-floor: neither). */
static void
producing_floor(bench *b, results *r, int l)
{
    int n = b->a.levels[l];

    for (int k = 0; k < 2 && b->a.floor != NULL; k++) {
        fprintf(stderr, "bench_outbox: producing, floor%s, %d callers, %d s\n",
                k == 0 ? "" : " with no fsync", n, b->a.seconds);
        atomic_store(&b->step, k == 0 ? "floor" : "floor, no fsync");
        if (floor_load(b->a.floor, k == 0, n, b->a.seconds, FLOOR_BYTES,
                       &r->floor[k][l]) != 0 ||
            r->floor[k][l].errors > 0) {
            printf("  floor at %d callers: did not run cleanly (%" PRIu64
                   " errors); its row is 0\n",
                   n, r->floor[k][l].errors);
            r->floor[k][l].per_s = 0;
        }
    }
}

static void
phase_producing(bench *b, results *r)
{
    for (int l = 0; l < b->a.nlevels; l++) {
        int n = b->a.levels[l];
        char topic[32], what[64];
        uint64_t f0;

        snprintf(topic, sizeof(topic), "p%d", n);
        fprintf(stderr, "bench_outbox: producing, once, %d producers, %d s\n",
                n, b->a.seconds);
        atomic_store(&b->step, "once");
        f0 = bench_server_fsyncs(b->srv.url);
        r->prod[SYS_ONCE][l] = produce(b, SYS_ONCE, topic, n, b->a.seconds, 0);
        r->prod[SYS_ONCE][l].fsyncs = bench_server_fsyncs(b->srv.url) - f0;
        snprintf(what, sizeof(what), "producing once, %d producers", n);
        check_head(b, what, topic, &r->prod[SYS_ONCE][l]);

        pg_sql(b, "TRUNCATE outbox");
        fprintf(stderr,
                "bench_outbox: producing, postgres, %d producers, %d s\n", n,
                b->a.seconds);
        atomic_store(&b->step, "postgres");
        f0 = pg_wal_syncs(b);
        r->prod[SYS_PG][l] = produce(b, SYS_PG, NULL, n, b->a.seconds, 0);
        r->prod[SYS_PG][l].fsyncs = pg_wal_syncs(b) - f0;
        snprintf(what, sizeof(what), "producing postgres, %d producers", n);
        check_table(b, what, "outbox", &r->prod[SYS_PG][l]);
        producing_floor(b, r, l);
    }
    pg_sql(b, "TRUNCATE outbox");
}

/* A backlog consumer's time: DRAIN_MS and 2 ms an event, in s. */
static int64_t
drain_deadline_s(const args *a)
{
    return ((int64_t)DRAIN_MS + 2LL * a->backlog) / 1000 + 1;
}

static int64_t
drain_deadline(const bench *b)
{
    return bench_now_ns() + drain_deadline_s(&b->a) * 1000000000;
}

/* Filling a backlog: a minute and 2 ms an event (a deadline, so a slow
 * fill ends and is counted, never hangs). */
static int
fill_s(const args *a)
{
    return 60 + a->backlog / 500;
}

/* One consumer of the backlog, timed, in this thread: libonce's loop
 * with Acks every ack_every batches (cons_apply_run), or with ack_every 0
 * the bench's own Read, apply, Ack in turn (cons_thread). */
static tally
consume_backlog(bench *b, const char *name, uint32_t batch, PGconn *apply,
                uint32_t ack_every, const tally *fill)
{
    cons c = {.b = b,
              .topic = "backlog",
              .name = name,
              .batch = batch,
              .wait_ms = LONGPOLL_MS,
              .apply = apply,
              .ack_every = ack_every,
              .read_max = (uint32_t)b->a.read_max};
    int64_t t0 = bench_now_ns();
    tally t = {0};

    if (sink_init(&c.k, false) != 0) {
        fprintf(stderr, "bench_outbox: out of memory\n");
        return t;
    }
    atomic_store(&c.stop_at, fill->n);
    atomic_store(&c.deadline_ns, drain_deadline(b));
    if (ack_every > 0) {
        cons_apply_run(&c);
    } else {
        cons_thread(&c);
    }
    if (c.err[0] != '\0') {
        fprintf(stderr, "bench_outbox: consumer %s: %s\n", name, c.err);
    }
    t.n = c.k.n;
    t.sum = c.k.sum;
    t.distinct = c.k.distinct;
    sink_free(&c.k);
    t.per_s = (double)t.n * 1e9 / (double)(bench_now_ns() - t0);
    fprintf(stderr, "bench_outbox: %s: %" PRIu64 " events, %.0f /s\n", name,
            t.n, t.per_s);
    return t;
}

static void
phase_delivering_once(bench *b, results *r, int np)
{
    char err[PG_ERR_LEN];
    PGconn *pc;
    tally fill;

    if (subscribe(b, "backlog", "apply") != 0 ||
        subscribe(b, "backlog", "serial") != 0 ||
        subscribe(b, "backlog", "noop") != 0 ||
        (pc = obpg_connect(&b->pg, err)) == NULL) {
        b->ok = false;
        return;
    }
    atomic_store(&b->step, "filling once's backlog");
    fprintf(stderr, "bench_outbox: backlog of %d events into once\n",
            b->a.backlog);
    fill = produce(b, SYS_ONCE, "backlog", np, fill_s(&b->a), b->a.backlog);
    pg_sql(b, "TRUNCATE target");
    atomic_store(&b->step, "once -> PostgreSQL, Read-commit-Ack in turn");
    fprintf(stderr, "bench_outbox: delivering, once -> PostgreSQL, Read, "
                    "commit, Ack in turn\n");
    r->apply_serial =
        consume_backlog(b, "serial", (uint32_t)b->a.batch, pc, 0, &fill);
    check_table(b, "delivering once in turn -> PostgreSQL", "target", &fill);
    pg_sql(b, "TRUNCATE target");
    atomic_store(&b->step, "once -> PostgreSQL");
    fprintf(stderr,
            "bench_outbox: delivering, once -> PostgreSQL (libonce's loop, "
            "Reads of %d, an Ack every %d Reads)\n",
            b->a.read_max, b->a.ack_every);
    r->apply[SYS_ONCE] = consume_backlog(b, "apply", (uint32_t)b->a.batch, pc,
                                         (uint32_t)b->a.ack_every, &fill);
    check_table(b, "delivering once -> PostgreSQL", "target", &fill);
    atomic_store(&b->step, "once -> no-op");
    fprintf(stderr, "bench_outbox: delivering, once -> no-op\n");
    r->noop = consume_backlog(b, "noop", NOOP_BATCH, NULL, 0, &fill);
    check(b, "delivering once -> no-op", r->noop.n, r->noop.distinct,
          r->noop.sum, &fill);
    PQfinish(pc);
}

static void
phase_delivering_pg(bench *b, results *r, int np)
{
    char err[PG_ERR_LEN] = "";
    tally fill, *t = &r->apply[SYS_PG];
    PGconn *pc = obpg_connect(&b->pg, err);
    int64_t t0, end = drain_deadline(b);
    int n = 1;

    pg_sql(b, "TRUNCATE outbox, target");
    atomic_store(&b->step, "filling postgres' backlog");
    fprintf(stderr, "bench_outbox: backlog of %d events into postgres\n",
            b->a.backlog);
    fill = produce(b, SYS_PG, NULL, np, fill_s(&b->a), b->a.backlog);
    atomic_store(&b->step, "dispatcher -> PostgreSQL");
    fprintf(stderr, "bench_outbox: delivering, dispatcher -> PostgreSQL\n");
    t0 = bench_now_ns();
    while (pc != NULL && n > 0 && bench_now_ns() < end) {
        if (obpg_dispatch_apply(pc, b->a.batch, &n, err) != 0) {
            break;
        }
        t->n += (uint64_t)n;
        atomic_fetch_add(&b->progress, (uint64_t)n);
    }
    t->per_s = (double)t->n * 1e9 / (double)(bench_now_ns() - t0);
    if (err[0] != '\0') {
        fprintf(stderr, "bench_outbox: dispatcher: %s\n", err);
    }
    fprintf(stderr, "bench_outbox: dispatcher: %" PRIu64 " events, %.0f /s\n",
            t->n, t->per_s);
    check_table(b, "delivering dispatcher -> PostgreSQL", "target", &fill);
    PQfinish(pc);
}

/* once's consumer long-polling, or the dispatcher polling every poll_ms,
 * while producers run. */
static void
phase_latency(bench *b, results *r, sys s)
{
    cons c = {.b = b,
              .topic = "lat",
              .name = "lat",
              .batch = NOOP_BATCH,
              .wait_ms = LONGPOLL_MS};
    char what[64];
    tally p;
    pthread_t tid;

    if (s == SYS_PG) {
        pg_sql(b, "TRUNCATE outbox");
    } else if (subscribe(b, "lat", "lat") != 0) {
        b->ok = false;
        return;
    }
    if (sink_init(&c.k, true) != 0) {
        fprintf(stderr, "bench_outbox: out of memory\n");
        b->ok = false;
        return;
    }
    atomic_store(&c.stop_at, UINT64_MAX);
    atomic_store(&c.deadline_ns, bench_now_ns() +
                                     (int64_t)b->a.seconds * 1000000000 +
                                     (int64_t)DRAIN_MS * 1000000);
    fprintf(stderr, "bench_outbox: latency, %s, %d producers, %d s\n",
            s == SYS_ONCE ? "once (long-poll)" : "postgres (poll)",
            b->a.lat_producers, b->a.seconds);
    atomic_store(&b->step, sys_name[s]);
    pthread_create(&tid, NULL, s == SYS_ONCE ? cons_thread : poll_thread, &c);
    p = produce(b, s, "lat", b->a.lat_producers, b->a.seconds, 0);
    atomic_store(&c.stop_at, p.n);
    pthread_join(tid, NULL);
    if (c.err[0] != '\0') {
        fprintf(stderr, "bench_outbox: latency %s: %s\n", sys_name[s], c.err);
    }
    snprintf(what, sizeof(what), "latency %s", sys_name[s]);
    check(b, what, c.k.n, c.k.distinct, c.k.sum, &p);
    r->lat[s] = p;
    r->lat[s].p50_us = bench_pct_us(c.k.lat, c.k.nlat, 50);
    r->lat[s].p99_us = bench_pct_us(c.k.lat, c.k.nlat, 99);
    sink_free(&c.k);
}

/* onced's CPU in ms per s of wall time over the window [t0, now). */
static double
cpu_ms_per_s(pid_t pid, uint64_t cpu0, int64_t t0)
{
    uint64_t cpu1 = 0, csw;

    bench_proc_usage(pid, &cpu1, &csw);
    return (double)(cpu1 - cpu0) / 1e6 / ((double)(bench_now_ns() - t0) / 1e9);
}

/* Waits (at most SETTLE_S) until onced's fsync count holds still for a
 * second: the collector has reclaimed what the last calls left. */
static void
settle(bench *b)
{
    uint64_t last = bench_server_fsyncs(b->srv.url);

    for (int i = 0; i < SETTLE_S; i++) {
        uint64_t now;

        bench_sleep_ms(1000);
        if ((now = bench_server_fsyncs(b->srv.url)) == last) {
            return;
        }
        last = now;
    }
    fprintf(stderr, "bench_outbox: onced still syncing after %d s\n", SETTLE_S);
}

/* onced's CPU (ms/s) over seconds with no call. */
static double
quiet_window(bench *b)
{
    uint64_t cpu0 = 0, csw;
    int64_t t0 = bench_now_ns();

    bench_proc_usage(b->srv.pid, &cpu0, &csw);
    bench_sleep_ms(b->a.seconds * 1000);
    return cpu_ms_per_s(b->srv.pid, cpu0, t0);
}

/* Quiet, long-polling, quiet: the two quiet windows around the polling one
 * take out a drift of onced's background work. */
static void
phase_idle_cpu(bench *b, results *r)
{
    cons c = {.b = b,
              .topic = "idle",
              .name = "idle",
              .batch = 1,
              .wait_ms = IDLE_POLL_MS,
              .reads_only = true};
    uint64_t cpu0 = 0, csw;
    int64_t t0;
    pthread_t tid;

    fprintf(stderr,
            "bench_outbox: onced idle %d s, with a consumer long-polling an "
            "empty topic %d s, idle %d s\n",
            b->a.seconds, b->a.seconds, b->a.seconds);
    atomic_store(&b->step, "Subscribe");
    if (subscribe(b, "idle", "idle") != 0) {
        b->ok = false;
        return;
    }
    atomic_store(&b->step, "waiting for onced to settle");
    settle(b);
    atomic_store(&b->step, "the first quiet window");
    r->cpu_quiet = quiet_window(b) / 2;
    atomic_store(&b->step, "a consumer long-polling");
    atomic_store(&c.stop_at, UINT64_MAX);
    atomic_store(&c.deadline_ns,
                 bench_now_ns() + (int64_t)b->a.seconds * 1000000000);
    t0 = bench_now_ns();
    bench_proc_usage(b->srv.pid, &cpu0, &csw);
    pthread_create(&tid, NULL, cons_thread, &c);
    pthread_join(tid, NULL);
    r->cpu_poll = cpu_ms_per_s(b->srv.pid, cpu0, t0);
    r->poll_reads = c.reads;
    if (c.err[0] != '\0') {
        fprintf(stderr, "bench_outbox: idle consumer: %s\n", c.err);
    }
    atomic_store(&b->step, "the second quiet window");
    r->cpu_quiet += quiet_window(b) / 2;
}

/* Stats.fsyncs over FSYNC_READS Reads of a topic with events, against the
 * same time with no call. */
static void
phase_read_fsync(bench *b, results *r)
{
    char err[PG_ERR_LEN] = "";
    once_client *c;
    once_status st;
    uint64_t f0, f1, f2;
    int64_t t0, dt;
    tally fill;

    atomic_store(&b->step, "Subscribe, 100 events");
    if (subscribe(b, "fs", "fs") != 0 ||
        (c = client_open(b, true, err)) == NULL) {
        b->ok = false;
        return;
    }
    fprintf(stderr, "bench_outbox: fsyncs over %d Reads\n", FSYNC_READS);
    fill = produce(b, SYS_ONCE, "fs", 1, 60, 100);
    (void)fill;
    atomic_store(&b->step, "waiting for onced to settle");
    settle(b);
    atomic_store(&b->step, "the Reads");
    f0 = bench_server_fsyncs(b->srv.url);
    t0 = bench_now_ns();
    for (int i = 0; i < FSYNC_READS; i++) {
        once_outbox_batch *bt = NULL;
        int rv = once_outbox_read(c, "fs", "fs", 100, 0, &bt, &st);

        once_outbox_batch_free(bt);
        if (rv != ONCE_OK) {
            say(err, rv, &st);
            fprintf(stderr, "bench_outbox: Read: %s\n", err);
            b->ok = false;
            break;
        }
    }
    f1 = bench_server_fsyncs(b->srv.url);
    dt = bench_now_ns() - t0;
    bench_sleep_ms((int)(dt / 1000000) + 1);
    f2 = bench_server_fsyncs(b->srv.url);
    r->fs_reads = f1 - f0;
    r->fs_idle = f2 - f1;
    once_client_close(c);
}

/* ---- each phase's rows --------------------------------------------------- */

/* Events a producing run committed per fsync (0: no fsync counted). */
static double
per_fsync(const tally *t)
{
    return t->fsyncs > 0 ? (double)t->n / (double)t->fsyncs : 0;
}

static void
rows_producing(const bench *b, const results *r, report *rp)
{
    char what[64];

    for (int l = 0; l < b->a.nlevels; l++) {
        int p = b->a.levels[l];
        const tally *o = &r->prod[SYS_ONCE][l], *g = &r->prod[SYS_PG][l];

        snprintf(what, sizeof(what), "producing, %d producers (ev/s)", p);
        report_add(rp, what, o->per_s, g->per_s, p == 16 ? T_RATIO_MIN : T_NONE,
                   1.5, "x");
        snprintf(what, sizeof(what), "events per fsync, %d producers", p);
        report_add(rp, what, per_fsync(o), per_fsync(g), T_NONE, 0, "");
        if (b->a.floor == NULL) {
            continue;
        }
        snprintf(what, sizeof(what), "  floor, %d callers (calls/s)", p);
        report_add(rp, what, r->floor[0][l].per_s, g->per_s, T_NONE, 0, "");
        snprintf(what, sizeof(what), "  floor, no fsync, %d callers", p);
        report_add(rp, what, r->floor[1][l].per_s, g->per_s, T_NONE, 0, "");
    }
}

/* What the floor rows say about the producing target. */
static void
notes_producing(const bench *b, const results *r)
{
    for (int l = 0; l < b->a.nlevels && b->a.floor != NULL; l++) {
        double pg = r->prod[SYS_PG][l].per_s;

        if (b->a.levels[l] != 16 || pg <= 0) {
            continue;
        }
        printf("floor at 16: onced's shape with nothing in it (no protobuf, "
               "ids, records or leases; bare REQ callers) carries %.2fx "
               "PostgreSQL's producing rate synced and %.2fx with no fsync "
               "at all: %s\n",
               r->floor[0][l].per_s / pg, r->floor[1][l].per_s / pg,
               r->floor[0][l].per_s / pg < 1.5
                   ? "the 1.5x target is above what the shape carries here"
                   : "the shape leaves room for the 1.5x target here");
    }
}

static void
rows_delivering(const bench *b, const results *r, report *rp)
{
    (void)b;
    report_add(rp, "delivering into PostgreSQL (ev/s)",
               r->apply[SYS_ONCE].per_s, r->apply[SYS_PG].per_s, T_RATIO_MIN,
               1.0, "x");
    report_add(rp, "  (Read, commit, Ack in turn)", r->apply_serial.per_s,
               r->apply[SYS_PG].per_s, T_NONE, 0, "");
    report_add(rp, "delivering into a no-op (ev/s)", r->noop.per_s, -1,
               T_ONCE_MIN, 50000, "/s");
}

static void
rows_latency(const bench *b, const results *r, report *rp)
{
    (void)b;
    report_add(rp, "commit to delivery p50 (ms)",
               r->lat[SYS_ONCE].p50_us / 1000, r->lat[SYS_PG].p50_us / 1000,
               T_NONE, 0, "");
    report_add(rp, "commit to delivery p99 (ms)",
               r->lat[SYS_ONCE].p99_us / 1000, r->lat[SYS_PG].p99_us / 1000,
               T_NONE, 0, "");
}

static void
rows_idle(const bench *b, const results *r, report *rp)
{
    (void)b;
    report_add(rp, "CPU a long-poll adds (ms/s)", r->cpu_poll - r->cpu_quiet,
               -1, T_ONCE_MAX, 1.0, " ms/s");
}

static void
notes_idle(const bench *b, const results *r)
{
    (void)b;
    printf("onced CPU: %.2f ms/s idle (before and after), %.2f ms/s with a "
           "consumer long-polling (%" PRIu64 " Reads of %d ms)\n",
           r->cpu_quiet, r->cpu_poll, r->poll_reads, IDLE_POLL_MS);
}

static void
rows_fsync(const bench *b, const results *r, report *rp)
{
    (void)b;
    report_add(rp, "fsyncs Reads add (per 1000)",
               (double)r->fs_reads - (double)r->fs_idle, -1, T_ONCE_MAX, 0, "");
}

static void
notes_fsync(const bench *b, const results *r)
{
    (void)b;
    printf("onced fsyncs: %" PRIu64 " over %d Reads, %" PRIu64
           " in the same time idle\n",
           r->fs_reads, FSYNC_READS, r->fs_idle);
}

/* ---- the phases, each bounded in time ------------------------------------ */

#define PROGRESS_S 10 /* a line on stderr this often during a phase */

typedef struct phase_def {
    unsigned bit; /* PH_*; its name is phase_name[bit's index] */
    void (*run)(bench *, results *);
    void (*rows)(const bench *, const results *, report *);
    void (*notes)(const bench *, const results *); /* below the rows */
    int64_t bound_s;                               /* set by phase_bounds */
} phase_def;

static void
phase_delivering(bench *b, results *r)
{
    phase_delivering_once(b, r, largest_level(&b->a));
    phase_delivering_pg(b, r, largest_level(&b->a));
}

static void
phase_latency_both(bench *b, results *r)
{
    phase_latency(b, r, SYS_ONCE);
    phase_latency(b, r, SYS_PG);
}

static phase_def phases[] = {
    {PH_PRODUCING, phase_producing, rows_producing, notes_producing, 0},
    {PH_DELIVERING, phase_delivering, rows_delivering, NULL, 0},
    {PH_LATENCY, phase_latency_both, rows_latency, NULL, 0},
    {PH_IDLE, phase_idle_cpu, rows_idle, notes_idle, 0},
    {PH_FSYNC, phase_read_fsync, rows_fsync, notes_fsync, 0},
};
#define NPHASES (sizeof(phases) / sizeof(phases[0]))

/* Each phase's bound: what its own deadlines add up to, plus a call's
 * deadline (CALL_SLACK_S) for every step that may end on one. */
static void
phase_bounds(const args *a)
{
    int64_t s = a->seconds, drain = drain_deadline_s(a);

    phases[0].bound_s = a->nlevels * (4 * s + 6 * CALL_SLACK_S);
    phases[1].bound_s = 2 * fill_s(a) + 4 * drain + 7 * CALL_SLACK_S;
    phases[2].bound_s = 2 * (s + DRAIN_MS / 1000 + 2 * CALL_SLACK_S);
    phases[3].bound_s = SETTLE_S + 3 * s + 4 * CALL_SLACK_S;
    phases[4].bound_s = FILL_FS_S + SETTLE_S + 4 * CALL_SLACK_S;
}

typedef struct phase_run {
    bench *b;
    results *r;
    const phase_def *ph;
    atomic_bool done;
} phase_run;

static void *
phase_thread(void *arg)
{
    phase_run *pr = arg;

    pr->ph->run(pr->b, pr->r);
    atomic_store(&pr->done, true);
    return NULL;
}

static const char *
phase_label(const phase_def *ph)
{
    return phase_name[__builtin_ctz(ph->bit)];
}

/* The bench's own threads' stacks on stderr (gdb, when there is one): what
 * an overrun phase waits for. */
static void
dump_stacks(void)
{
    char cmd[160];

    snprintf(cmd, sizeof(cmd),
             "command -v gdb >/dev/null && timeout 60 gdb -p %d -batch -nx "
             "-ex 'thread apply all bt' >&2 2>/dev/null",
             (int)getpid());
    fflush(stderr);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_outbox: (no stacks: gdb missing or failed)\n");
    }
}

/*
 * Runs ph on a thread of its own and waits at most its bound, with a
 * progress line every PROGRESS_S. 0: it ended (its rows are printed and
 * in the CSV); -1: it overran (said on stdout and stderr, stacks dumped;
 * the thread is left running: the caller ends the process).
 */
static int
run_phase(bench *b, results *r, report *rp, const phase_def *ph)
{
    phase_run pr = {.b = b, .r = r, .ph = ph};
    int64_t t0 = bench_now_ns(), next = PROGRESS_S;
    pthread_t tid;

    fprintf(stderr, "bench_outbox: phase %s (bound %" PRId64 " s)\n",
            phase_label(ph), ph->bound_s);
    atomic_store(&b->step, "starting");
    pthread_create(&tid, NULL, phase_thread, &pr);
    while (!atomic_load(&pr.done)) {
        int64_t el = (bench_now_ns() - t0) / 1000000000;

        if (el >= ph->bound_s) {
            printf("\nphase %s OVERRAN its bound of %" PRId64
                   " s (at: %s); the rows above are all it kept\n",
                   phase_label(ph), ph->bound_s, atomic_load(&b->step));
            fflush(stdout);
            fprintf(stderr,
                    "bench_outbox: phase %s overran %" PRId64
                    " s at: %s; its threads:\n",
                    phase_label(ph), ph->bound_s, atomic_load(&b->step));
            dump_stacks();
            return -1;
        }
        if (el >= next) {
            fprintf(stderr,
                    "bench_outbox: %s: %s, %" PRId64 " s of at most %" PRId64
                    " s, %" PRIu64 " events so far\n",
                    phase_label(ph), atomic_load(&b->step), el, ph->bound_s,
                    (uint64_t)atomic_load(&b->progress));
            next += PROGRESS_S;
        }
        bench_sleep_ms(100);
    }
    pthread_join(tid, NULL);
    ph->rows(b, r, rp);
    report_rows(rp, phase_label(ph));
    if (ph->notes != NULL) {
        ph->notes(b, r);
    }
    fflush(stdout);
    return 0;
}

/* ---- options and main ---------------------------------------------------- */

static void
usage(FILE *out)
{
    fprintf(out,
            "usage: bench_outbox [options]\n"
            "\n"
            "once's outbox beside a PostgreSQL outbox table written in the\n"
            "business transaction and a polling dispatcher (SELECT ... FOR\n"
            "UPDATE SKIP LOCKED, deliver, DELETE), in one run, on an onced\n"
            "and a PostgreSQL 15 cluster of its own (synchronous_commit=on,\n"
            "fsync=on). Prints events/s and latencies as ratios with the\n"
            "issue's targets, and checks that every event was delivered\n"
            "exactly once (exit 1 when not).\n"
            "\n"
            "  --seconds S          per producing level, latency and idle\n"
            "                       window (default 10)\n"
            "  --producers LIST     producing levels (default 1,4,16; at most\n"
            "                       %d levels of at most %d); the largest\n"
            "                       also fills the backlogs\n"
            "  --backlog N          events to deliver (default 100000)\n"
            "  --batch N            events per delivering transaction\n"
            "                       (default 100, at most 1000)\n"
            "  --read-max N         the delivering consumer (libonce's\n"
            "                       loop) Reads N events (default 1000) and\n"
            "                       commits them --batch at a time\n"
            "  --ack-every K        ... and Acks every K Reads (default 1;\n"
            "                       its offset row in PostgreSQL is the\n"
            "                       truth)\n"
            "  --latency-producers N  producers during the latency run\n"
            "                       (default 4)\n"
            "  --poll-ms X          the dispatcher's poll interval when its\n"
            "                       last poll was not full (default 100)\n"
            "  --pg-bin DIR         initdb, pg_ctl (default\n"
            "                       /usr/lib/postgresql/15/bin)\n"
            "  --csv FILE           also write metric,once,postgres,ratio,\n"
            "                       target,met rows to FILE, each phase's\n"
            "                       as it ends\n"
            "  --floor PATH         once_floor, onced's shape with nothing\n"
            "                       in it, run synced and with no fsync at\n"
            "                       every producing level (default %s)\n"
            "  --no-floor           skip the floor\n"
            "  --phases LIST        which phases run, of producing,\n"
            "                       delivering,latency,idle,fsync (default\n"
            "                       all); each is bounded in time, and one\n"
            "                       that overruns ends the run (exit 3)\n"
            "  --help               this text\n",
            MAX_LEVELS, MAX_PRODUCERS, FLOOR_PATH);
}

static bool
in_range(int v, int lo, int hi)
{
    return v >= lo && v <= hi;
}

/* PH_* bits of a comma list of phase names; 0 when a name is unknown. */
static unsigned
parse_phases(const char *s)
{
    unsigned bits = 0;

    while (*s != '\0') {
        size_t len = strcspn(s, ",");
        unsigned bit = 0;

        for (size_t i = 0; i < sizeof(phase_name) / sizeof(phase_name[0]);
             i++) {
            if (strlen(phase_name[i]) == len &&
                strncmp(s, phase_name[i], len) == 0) {
                bit = 1u << i;
            }
        }
        if (bit == 0) {
            return 0;
        }
        bits |= bit;
        s += len + (s[len] == ',');
    }
    return bits;
}

/* 0: run; 1: exit 0 (--help); 2: exit 2 (a usage error, said). */
static int
parse_args(int argc, char **argv, args *a)
{
    static const struct option opts[] = {
        {"seconds", required_argument, 0, 's'},
        {"producers", required_argument, 0, 'p'},
        {"backlog", required_argument, 0, 'n'},
        {"batch", required_argument, 0, 'b'},
        {"ack-every", required_argument, 0, 'k'},
        {"read-max", required_argument, 0, 'r'},
        {"latency-producers", required_argument, 0, 'l'},
        {"poll-ms", required_argument, 0, 'i'},
        {"pg-bin", required_argument, 0, 'g'},
        {"csv", required_argument, 0, 'c'},
        {"phases", required_argument, 0, 'P'},
        {"floor", required_argument, 0, 'F'},
        {"no-floor", no_argument, 0, 'f'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int ch;

    *a = (args){.seconds = 10,
                .backlog = 100000,
                .levels = {1, 4, 16},
                .nlevels = 3,
                .lat_producers = 4,
                .batch = 100,
                .read_max = 1000,
                .ack_every = 1,
                .poll_ms = 100,
                .pg_bin = "/usr/lib/postgresql/15/bin",
                .floor = FLOOR_PATH,
                .phases = PH_ALL};
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (ch == 'h') {
            usage(stdout);
            return 1;
        } else if (ch == 's') {
            a->seconds = atoi(optarg);
        } else if (ch == 'p') {
            a->nlevels = bench_parse_levels(optarg, a->levels, MAX_LEVELS,
                                            MAX_PRODUCERS);
        } else if (ch == 'n') {
            a->backlog = atoi(optarg);
        } else if (ch == 'b') {
            a->batch = atoi(optarg);
        } else if (ch == 'k') {
            a->ack_every = atoi(optarg);
        } else if (ch == 'r') {
            a->read_max = atoi(optarg);
        } else if (ch == 'l') {
            a->lat_producers = atoi(optarg);
        } else if (ch == 'i') {
            a->poll_ms = atoi(optarg);
        } else if (ch == 'g') {
            a->pg_bin = optarg;
        } else if (ch == 'c') {
            a->csv = optarg;
        } else if (ch == 'F') {
            a->floor = optarg;
        } else if (ch == 'f') {
            a->floor = NULL;
        } else if (ch == 'P') {
            a->phases = parse_phases(optarg);
        } else {
            fprintf(stderr, "bench_outbox: bad option; see --help\n");
            return 2;
        }
    }
    if (optind < argc || a->nlevels < 1 || a->phases == 0 ||
        !in_range(a->seconds, 1, 600) || !in_range(a->backlog, 1, 10000000) ||
        !in_range(a->batch, 1, 1000) || !in_range(a->ack_every, 1, 100000) ||
        !in_range(a->read_max, 1, 1000) ||
        !in_range(a->lat_producers, 1, MAX_PRODUCERS) ||
        !in_range(a->poll_ms, 1, 60000)) {
        fprintf(stderr, "bench_outbox: a value out of range (--producers "
                        "wants e.g. 1,4,16, --phases e.g. idle,fsync); see "
                        "--help\n");
        return 2;
    }
    return 0;
}

/* The onced and the cluster, in b->top. 0 or -1 (said). */
static int
start(bench *b)
{
    const char *extra[] = {BENCH_ONCED_MANY_PEERS, "--outbox-max-bytes", "1G",
                           NULL};
    char dir[128], err[PG_ERR_LEN];

    snprintf(b->top, sizeof(b->top), "/tmp/once-obbench-XXXXXX");
    if (mkdtemp(b->top) == NULL || chmod(b->top, 0755) != 0) {
        perror("bench_outbox: temp dir");
        return -1;
    }
    snprintf(dir, sizeof(dir), "%s/pg", b->top);
    if (mkdir(dir, 0755) != 0) {
        perror("bench_outbox: mkdir");
        return -1;
    }
    fprintf(stderr, "bench_outbox: starting onced and PostgreSQL\n");
    if (bench_onced_start(&b->srv, ONCED_PATH, extra) != 0) {
        return -1;
    }
    if (obpg_start(&b->pg, b->a.pg_bin, dir, 2 * MAX_PRODUCERS + 16) != 0) {
        return -1;
    }
    if ((b->pc = pg_cluster_connect(&b->pg, err)) == NULL) {
        fprintf(stderr, "bench_outbox: %s\n", err);
        return -1;
    }
    return 0;
}

static void
stop(bench *b)
{
    PQfinish(b->pc);
    pg_cluster_stop(&b->pg);
    bench_onced_stop(&b->srv);
    if (b->top[0] != '\0') {
        sys_rm_tree(b->top);
    }
}

/* Ends the run after an overrun: the phase's thread still holds calls
 * and connections, so the servers go and the process exits at once. */
static _Noreturn void
abandon(bench *b, report *rp)
{
    report_close(rp);
    fprintf(stderr, "bench_outbox: stopping after the overrun; exit 3\n");
    pg_cluster_stop(&b->pg);
    bench_onced_stop(&b->srv);
    sys_rm_tree(b->top);
    fflush(stdout);
    _exit(3);
}

int
main(int argc, char **argv)
{
    static bench b;
    static results r;
    static report rp;
    int pr = parse_args(argc, argv, &b.a);

    if (pr != 0) {
        return pr == 1 ? 0 : 2;
    }
    b.ok = true;
    atomic_store(&b.next_ev, 1);
    atomic_store(&b.step, "starting");
    phase_bounds(&b.a);
    if (report_open(&rp, b.a.csv) != 0 || start(&b) != 0) {
        stop(&b);
        return 1;
    }
    printf("once's outbox against a PostgreSQL outbox table + polling "
           "dispatcher (poll %d ms, batch %d, backlog %d, latency at %d "
           "producers)\n\nchecks:\n",
           b.a.poll_ms, b.a.batch, b.a.backlog, b.a.lat_producers);
    fflush(stdout);
    for (size_t i = 0; i < NPHASES; i++) {
        if ((b.a.phases & phases[i].bit) != 0 &&
            run_phase(&b, &r, &rp, &phases[i]) != 0) {
            abandon(&b, &rp);
        }
    }
    report_table(&rp, "all figures:");
    if ((b.a.phases & PH_PRODUCING) != 0 && !has_16(&b.a)) {
        printf("(the producing target is at 16 producers: not run)\n");
    }
    printf("correctness: %s\n",
           b.ok ? "checked (every event delivered exactly once)"
                : "MISMATCH (see above)");
    report_close(&rp);
    stop(&b);
    return b.ok ? 0 : 1;
}
