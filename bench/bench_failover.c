/*
 * bench_failover.c — failover time as a distribution (issue 26): 3 etcd
 * members and 3 onced --replicate (tests/cluster.h, the replication
 * tests' fixtures), N clients each with its own once_client dialing all
 * three and calling Increment in a loop, and a nemesis that finds the
 * leader (the replica answering Admin.Stats OK, as clients find it) and
 * SIGKILLs it (then restarts it as a follower) or SIGSTOPs it (SIGCONT
 * once every client is served again). For each fault and client: the
 * unavailability, from the client's last successful call before the fault
 * to its first successful call after it. Per TTL and fault kind: count,
 * p50, p99, max, and whether p99 <= 1.5 x TTL; a CSV of every sample and
 * a PNG (bench/plot/failover.gp, a CDF per TTL and kind).
 *
 * Owns: the etcd members, the replicas and the client threads of a run,
 * from start to cleanup on every exit path (SIGINT/SIGTERM included).
 * Invariant: every loop ends on its count or deadline; a call counts as
 * acknowledged only when it returned OK, an unknown outcome is retried
 * under the same rpc id; at the end of each TTL the counter must equal the
 * acknowledged increments (exactly once).
 * Never: injects a fault before every client recovered from the previous
 * one, or leaves a process running.
 */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench_env.h"
#include "bench/compare_proc.h"
#include "once/client.h"
#include "tests/cluster.h"

#ifndef FAILOVER_GP
#define FAILOVER_GP "bench/plot/failover.gp"
#endif

#define MAX_TTLS     4
#define MAX_CLIENTS  16
#define MAX_FAULTS   200       /* per kind */
#define MAX_CALLS    50000000L /* per client; the run's end comes first */
#define RESOLVE_MS   60000     /* retrying one unknown outcome */
#define LEADER_MS    30000     /* finding the leader before a fault */
#define SETTLE_CALLS 3         /* each client's successes before a fault */
#define SETTLE_MS    30000
#define GNUPLOT_MS   60000

enum { KIND_KILL = 0, KIND_STOP = 1, NKINDS = 2 };
static const char *const kind_name[NKINDS] = {"kill", "stop"};

static struct {
    int ttl[MAX_TTLS];
    int nttl;
    int kills;
    bool kind[NKINDS];
    int clients;
    const char *csv;
    const char *png;
    unsigned backoff_max_ms; /* 0: libonce's default */
} opt = {
    .ttl = {2, 5}, .nttl = 2, .kills = 30, .kind = {true, true}, .clients = 4};

static atomic_bool interrupted;

/* One fault: when it was injected (after the signal was sent) and each
 * client's unavailability (-1: not recovered). */
typedef struct fault {
    int kind;
    int victim;
    int64_t at_ns;
    int64_t gap_ns[MAX_CLIENTS];
} fault;

typedef struct run run;

typedef struct client {
    pthread_t th;
    int idx;
    run *run;
    once_client *c;
    atomic_llong acked;   /* increments that returned OK */
    atomic_llong oks;     /* successes, for the nemesis's settle wait */
    atomic_int seen;      /* faults whose gap this client recorded */
    long long unresolved; /* unknown outcomes given up on */
    long long refused;    /* definitive "not executed" answers */
    long long reopened;   /* handles opened again after a lost lease */
    bool started;         /* the thread runs (join it) */
    int64_t last_ok_ns;
} client;

struct run {
    replica_set *r;
    etcd_cluster *e;
    int ttl_s;
    int nclients;
    atomic_bool stop;
    atomic_int nfaults; /* published after faults[n-1] is filled in */
    fault faults[NKINDS * MAX_FAULTS];
    client cl[MAX_CLIENTS];
};

static void
usage(FILE *f)
{
    fprintf(
        f,
        "usage: bench_failover [options]\n"
        "\n"
        "3 etcd members, 3 onced --replicate, N clients calling Increment;\n"
        "the leader is SIGKILLed (and restarted) or SIGSTOPped (and\n"
        "continued) again and again. Prints, per TTL and fault kind, the\n"
        "unavailability each client saw: count, p50, p99, max, and whether\n"
        "p99 <= 1.5 x TTL; checks the counter against the acknowledged\n"
        "increments.\n"
        "\n"
        "  --ttl LIST     --replicate-ttl values in s (default 2,5)\n"
        "  --kills N      faults per TTL and kind (default 30, max %d)\n"
        "  --kinds LIST   kill,stop (default both)\n"
        "  --clients N    client handles (default 4, max %d)\n"
        "  --csv FILE     every sample: ttl_s,kind,fault,victim,client,"
        "unavail_ms\n"
        "  --png FILE     a CDF per TTL and kind (gnuplot; needs --csv)\n"
        "  --backoff-max MS  the clients' backoff cap (default: libonce's,\n"
        "                 500 ms)\n"
        "  --help\n"
        "\n"
        "Exit status: 0; 1 when a client was not served again, the cluster\n"
        "failed, the counter is not between the acknowledged increments and\n"
        "those plus the unknown ones, or the plot failed; 2 on bad\n"
        "arguments; 130 when interrupted (everything is stopped first).\n",
        MAX_FAULTS, MAX_CLIENTS);
}

static int
parse_kinds(const char *s)
{
    char buf[64], *save = NULL;

    snprintf(buf, sizeof(buf), "%s", s);
    opt.kind[KIND_KILL] = opt.kind[KIND_STOP] = false;
    for (char *t = strtok_r(buf, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        if (strcmp(t, "kill") == 0) {
            opt.kind[KIND_KILL] = true;
        } else if (strcmp(t, "stop") == 0) {
            opt.kind[KIND_STOP] = true;
        } else {
            return -1;
        }
    }
    return opt.kind[KIND_KILL] || opt.kind[KIND_STOP] ? 0 : -1;
}

static int
parse_args(int argc, char **argv)
{
    static const struct option longs[] = {
        {"ttl", required_argument, NULL, 't'},
        {"kills", required_argument, NULL, 'k'},
        {"kinds", required_argument, NULL, 'K'},
        {"clients", required_argument, NULL, 'c'},
        {"csv", required_argument, NULL, 'o'},
        {"png", required_argument, NULL, 'p'},
        {"backoff-max", required_argument, NULL, 'b'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;

    while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (ch) {
        case 't':
            if ((opt.nttl = bench_parse_levels(optarg, opt.ttl, MAX_TTLS, 60)) <
                0) {
                fprintf(stderr, "bench_failover: bad --ttl %s\n", optarg);
                return -1;
            }
            break;
        case 'k':
            opt.kills = atoi(optarg);
            if (opt.kills < 1 || opt.kills > MAX_FAULTS) {
                fprintf(stderr, "bench_failover: --kills 1..%d\n", MAX_FAULTS);
                return -1;
            }
            break;
        case 'K':
            if (parse_kinds(optarg) != 0) {
                fprintf(stderr, "bench_failover: bad --kinds %s\n", optarg);
                return -1;
            }
            break;
        case 'c':
            opt.clients = atoi(optarg);
            if (opt.clients < 1 || opt.clients > MAX_CLIENTS) {
                fprintf(stderr, "bench_failover: --clients 1..%d\n",
                        MAX_CLIENTS);
                return -1;
            }
            break;
        case 'o':
            opt.csv = optarg;
            break;
        case 'p':
            opt.png = optarg;
            break;
        case 'b':
            opt.backoff_max_ms = (unsigned)atoi(optarg);
            if (opt.backoff_max_ms < 1 || opt.backoff_max_ms > 10000) {
                fprintf(stderr, "bench_failover: --backoff-max 1..10000\n");
                return -1;
            }
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
    }
    if (optind < argc || (opt.png != NULL && opt.csv == NULL)) {
        usage(stderr);
        return -1;
    }
    return 0;
}

static bool
ending(const run *u)
{
    return atomic_load(&u->stop) || atomic_load(&interrupted);
}

/* A success at now_ns of a call sent at sent_ns in `attempts` attempts:
 * every published fault injected before it that this client had not seen
 * gets its gap, measured from the last success. A call sent before the
 * fault and answered by its first attempt was answered by the leader
 * before the fault (the reply was on its way, or this thread had not run
 * yet: SIGSTOP leaves sent replies to be delivered), so it counts as a
 * success before the fault, not the first one after it. */
static void
note_ok(client *k, int64_t sent_ns, int64_t now_ns, uint32_t attempts)
{
    run *u = k->run;
    int n = atomic_load_explicit(&u->nfaults, memory_order_acquire);
    int seen = atomic_load(&k->seen);

    while (seen < n && u->faults[seen].at_ns < now_ns &&
           !(attempts == 1 && sent_ns < u->faults[seen].at_ns)) {
        u->faults[seen].gap_ns[k->idx] = now_ns - k->last_ok_ns;
        seen++;
    }
    atomic_store(&k->seen, seen);
    k->last_ok_ns = now_ns;
    atomic_fetch_add(&k->oks, 1);
}

/* Retries *id (an unknown outcome) until an answer or RESOLVE_MS. */
static int
resolve(client *k, const once_rpc_id *id)
{
    int64_t until = bench_now_ns() + (int64_t)RESOLVE_MS * 1000000;
    int rc = ONCE_UNKNOWN;
    once_status st;
    int64_t v;

    for (int i = 0; i < 1000 && rc == ONCE_UNKNOWN && bench_now_ns() < until &&
                    !atomic_load(&interrupted);
         i++) {
        rc = once_counter_incr_retry(k->c, "failover", 1, id, &v, &st);
    }
    return rc;
}

/* A handle for k (libonce never opens a new lease by itself). 0, or -1
 * when none could be opened within RESOLVE_MS. */
static int
client_open(client *k)
{
    int64_t until = bench_now_ns() + (int64_t)RESOLVE_MS * 1000000;
    once_options o;
    once_status st;

    once_options_init(&o);
    o.url = k->run->r->urls;
    o.backoff_max_ms = opt.backoff_max_ms;
    for (int i = 0; i < 100 && !atomic_load(&interrupted); i++) {
        if (once_client_open(&k->c, &o, &st) == ONCE_OK) {
            return 0;
        }
        if (bench_now_ns() > until) {
            break;
        }
        bench_sleep_ms(100);
    }
    fprintf(stderr, "bench_failover: client %d: %s %s\n", k->idx, st.reason,
            st.message);
    k->c = NULL;
    return -1;
}

/* A client whose lease was lost opens a new handle; the time it takes is
 * part of what it sees. */
static int
client_reopen(client *k)
{
    fprintf(stderr,
            "\nbench_failover: client %d lost its lease; a new "
            "handle\n",
            k->idx);
    once_client_close(k->c);
    k->c = NULL;
    k->reopened++;
    return client_open(k);
}

static void *
client_main(void *arg)
{
    client *k = arg;

    for (long i = 0; i < MAX_CALLS && !ending(k->run); i++) {
        once_rpc_id id = {0, 0};
        once_status st;
        int64_t v;
        int64_t sent_ns = bench_now_ns();
        int rc = once_counter_incr_new(k->c, "failover", 1, &id, &v, &st);
        uint32_t attempts = st.attempts;

        if (rc == ONCE_UNKNOWN) {
            /* Anything but OK leaves it unknown: a retry refused here
             * (the lease lost) says nothing of the first attempt. */
            rc = resolve(k, &id) == ONCE_OK ? ONCE_OK : ONCE_UNKNOWN;
            attempts = 2; /* the first attempt went unanswered */
        }
        if (rc == ONCE_OK) {
            atomic_fetch_add(&k->acked, 1);
            note_ok(k, sent_ns, bench_now_ns(), attempts);
        } else if (rc == ONCE_UNKNOWN) {
            k->unresolved++;
            once_client_release(k->c, id.seq);
        } else {
            k->refused++; /* not executed: a definitive answer */
            bench_sleep_ms(10);
        }
        if (once_client_lease_state(k->c) == ONCE_CLIENT_LEASE_LOST &&
            client_reopen(k) != 0) {
            break;
        }
    }
    return NULL;
}

static int
clients_start(run *u)
{
    for (int i = 0; i < u->nclients; i++) {
        client *k = &u->cl[i];

        k->idx = i;
        k->run = u;
        if (client_open(k) != 0) {
            return -1;
        }
        k->last_ok_ns = bench_now_ns();
        if (pthread_create(&k->th, NULL, client_main, k) != 0) {
            return -1;
        }
        k->started = true;
    }
    return 0;
}

static void
clients_stop(run *u)
{
    atomic_store(&u->stop, true);
    for (int i = 0; i < u->nclients; i++) {
        if (u->cl[i].started) {
            pthread_join(u->cl[i].th, NULL);
            u->cl[i].started = false;
        }
        once_client_close(u->cl[i].c);
        u->cl[i].c = NULL;
    }
}

/* Waits (at most ms) until every client saw n faults and made `more`
 * successes past base[] (NULL: no such condition). */
static bool
clients_wait(run *u, int n, const long long *base, long long more, int ms)
{
    int64_t until = bench_now_ns() + (int64_t)ms * 1000000;

    while (!atomic_load(&interrupted) && bench_now_ns() < until) {
        bool all = true;

        for (int i = 0; i < u->nclients && all; i++) {
            all =
                atomic_load(&u->cl[i].seen) >= n &&
                (base == NULL || atomic_load(&u->cl[i].oks) >= base[i] + more);
        }
        if (all) {
            return true;
        }
        bench_sleep_ms(5);
    }
    return false;
}

static void
snapshot_oks(run *u, long long *base)
{
    for (int i = 0; i < u->nclients; i++) {
        base[i] = atomic_load(&u->cl[i].oks);
    }
}

/* One fault of kind: finds the leader, signals it, waits for every client
 * to be served again, brings the victim back and lets the clients settle.
 * 0, 1 (a client not served again in time) or -1 (the cluster broke). */
static int
inject(run *u, int kind)
{
    long long base[MAX_CLIENTS];
    int n = atomic_load(&u->nfaults);
    fault *f = &u->faults[n];
    int recover_ms = 6 * u->ttl_s * 1000 + 30000;
    int leader = replicas_leader(u->r, -1, LEADER_MS);
    bool ok;

    if (leader < 0) {
        fprintf(stderr, "bench_failover: no leader within %d ms\n", LEADER_MS);
        return -1;
    }
    f->kind = kind;
    f->victim = leader;
    for (int i = 0; i < MAX_CLIENTS; i++) {
        f->gap_ns[i] = -1;
    }
    replicas_kill(u->r, leader, kind == KIND_KILL ? SIGKILL : SIGSTOP);
    f->at_ns = bench_now_ns();
    atomic_store_explicit(&u->nfaults, n + 1, memory_order_release);
    ok = clients_wait(u, n + 1, NULL, 0, recover_ms);
    if (atomic_load(&interrupted)) {
        return 0; /* the teardown continues or reaps the victim */
    }
    if (kind == KIND_KILL) {
        if (replicas_restart(u->r, leader) != 0) {
            fprintf(stderr, "bench_failover: replica %d did not restart\n",
                    leader);
            return -1;
        }
    } else {
        replicas_kill(u->r, leader, SIGCONT);
    }
    snapshot_oks(u, base);
    if (!clients_wait(u, n + 1, base, SETTLE_CALLS, SETTLE_MS)) {
        fprintf(stderr,
                "bench_failover: clients did not settle after "
                "fault %d\n",
                n + 1);
        return -1;
    }
    return ok ? 0 : 1;
}

/* Prints one line per kind; 1 when a client was not served again. */
static int
report(run *u, FILE *csv)
{
    int bad = 0;

    for (int kind = 0; kind < NKINDS; kind++) {
        int64_t *gap = calloc(MAX_FAULTS * MAX_CLIENTS, sizeof(*gap));
        size_t n = 0, lost = 0;
        double p50, p99;

        if (gap == NULL || !opt.kind[kind]) {
            free(gap);
            continue;
        }
        for (int j = 0; j < atomic_load(&u->nfaults); j++) {
            const fault *f = &u->faults[j];

            for (int i = 0; i < u->nclients && f->kind == kind; i++) {
                if (f->gap_ns[i] < 0) {
                    lost++;
                    continue;
                }
                gap[n++] = f->gap_ns[i];
                if (csv != NULL) {
                    fprintf(csv, "%d,%s,%d,%d,%d,%.1f\n", u->ttl_s,
                            kind_name[kind], j + 1, f->victim, i,
                            (double)f->gap_ns[i] / 1e6);
                }
            }
        }
        /* the unavailabilities in ns; bench_pct_us sorts them: gap[n - 1] is
         * the max */
        p50 = bench_pct_us(gap, n, 50) / 1000.0;
        p99 = bench_pct_us(gap, n, 99) / 1000.0;
        printf("ttl %2d s  %-4s  count %4zu  p50 %7.0f ms  p99 %7.0f ms  "
               "max %7.0f ms  p99 <= 1.5 x TTL: %s%s\n",
               u->ttl_s, kind_name[kind], n, p50, p99,
               n > 0 ? (double)gap[n - 1] / 1e6 : 0.0,
               n > 0 && p99 <= 1.5 * u->ttl_s * 1000 ? "yes" : "no",
               lost > 0 ? "  (clients not served again: see below)" : "");
        if (lost > 0) {
            printf("ttl %2d s  %-4s  %zu client(s) not served again within "
                   "the bound\n",
                   u->ttl_s, kind_name[kind], lost);
            bad = 1;
        }
        free(gap);
    }
    return bad;
}

/* The counter against the acknowledged increments. 0 or 1. */
static int
check_once(run *u)
{
    long long acked = 0, unresolved = 0, refused = 0, reopened = 0;
    once_options o;
    once_client *c = NULL;
    once_status st;
    int64_t v = -1;
    int rc;

    for (int i = 0; i < u->nclients; i++) {
        acked += atomic_load(&u->cl[i].acked);
        unresolved += u->cl[i].unresolved;
        refused += u->cl[i].refused;
        reopened += u->cl[i].reopened;
    }
    once_options_init(&o);
    o.url = u->r->urls;
    o.no_lease = true;
    o.deadline_ms = 30000;
    rc = once_client_open(&c, &o, &st);
    if (rc == ONCE_OK) {
        rc = once_counter_get(c, "failover", &v, &st);
    }
    once_client_close(c);
    printf("ttl %2d s  exactly-once: counter %" PRId64 ", acknowledged %lld, "
           "unknown %lld, refused %lld, leases lost %lld: %s\n",
           u->ttl_s, v, acked, unresolved, refused, reopened,
           rc != ONCE_OK ? "UNREAD"
           : v == acked  ? "ok"
           : unresolved > 0 && v > acked && v <= acked + unresolved
               ? "ok (unknowns ran)"
               : "VIOLATED");
    fflush(stdout);
    return rc == ONCE_OK && v >= acked && v <= acked + unresolved ? 0 : 1;
}

/* Every fault kind at one TTL on a fresh cluster. 0, or 1 on a failure. */
static int
run_ttl(run *u, FILE *csv)
{
    int bad = 0, total = 0, done = 0;
    char label[64];

    for (int kind = 0; kind < NKINDS; kind++) {
        total += opt.kind[kind] ? opt.kills : 0;
    }
    if (etcd_cluster_start(&u->e, 3) != 0 ||
        replicas_start(&u->r, u->e, 3, u->ttl_s) != 0) {
        fprintf(stderr, "bench_failover: the cluster did not start\n");
        return 1;
    }
    if (clients_start(u) != 0) {
        return 1;
    }
    snprintf(label, sizeof(label), "ttl %d s", u->ttl_s);
    for (int kind = 0; kind < NKINDS && bad >= 0; kind++) {
        for (int j = 0; opt.kind[kind] && j < opt.kills && bad >= 0 &&
                        !atomic_load(&interrupted);
             j++) {
            int rv = inject(u, kind);

            bad = rv < 0 ? -1 : bad | rv;
            done++;
            bench_progress(label, (double)done / total, done == total);
        }
    }
    clients_stop(u);
    if (bad < 0 || atomic_load(&interrupted)) {
        fprintf(stderr, "\n");
        if (bad < 0) {
            replicas_dump(u->r);
        }
    }
    bad = (bad != 0) | report(u, csv);
    bad |= check_once(u);
    return bad;
}

static void
run_free(run *u)
{
    clients_stop(u);
    (void)replicas_stop(u->r);
    replicas_free(u->r);
    etcd_cluster_free(u->e);
    free(u);
}

static void
on_signal(int sig)
{
    (void)sig;
    atomic_store(&interrupted, true);
}

static int
plot(void)
{
    char vars[1200], log[] = "/tmp/bench-failover-gnuplot.log";
    const char *argv[] = {"/usr/bin/gnuplot", "-e", vars, FAILOVER_GP, NULL};
    int rv;

    if (access(argv[0], X_OK) != 0) {
        fprintf(stderr, "bench_failover: no gnuplot (gnuplot-nox); no plot\n");
        return -1;
    }
    if (strchr(opt.csv, '\'') != NULL || strchr(opt.png, '\'') != NULL) {
        fprintf(stderr, "bench_failover: no quotes in --csv/--png, please\n");
        return -1;
    }
    snprintf(vars, sizeof(vars), "csv='%s'; png='%s'", opt.csv, opt.png);
    if ((rv = compare_proc_run(argv, NULL, log, GNUPLOT_MS)) != 0) {
        compare_proc_tail(log, 2000);
    }
    unlink(log);
    return rv;
}

int
main(int argc, char **argv)
{
    struct sigaction sa;
    FILE *csv = NULL;
    int bad = 0;

    if (parse_args(argc, argv) != 0) {
        return 2;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (opt.csv != NULL) {
        if ((csv = fopen(opt.csv, "w")) == NULL) {
            perror(opt.csv);
            return 2;
        }
        fprintf(csv, "ttl_s,kind,fault,victim,client,unavail_ms\n");
    }
    for (int t = 0; t < opt.nttl && !atomic_load(&interrupted); t++) {
        run *u = calloc(1, sizeof(*u));

        if (u == NULL) {
            bad = 1;
            break;
        }
        u->ttl_s = opt.ttl[t];
        u->nclients = opt.clients;
        bad |= run_ttl(u, csv);
        run_free(u);
    }
    if (csv != NULL) {
        fclose(csv);
    }
    if (opt.png != NULL && !atomic_load(&interrupted) && plot() != 0) {
        bad = 1;
    }
    if (atomic_load(&interrupted)) {
        fprintf(stderr, "bench_failover: interrupted; cleaned up\n");
        return 130;
    }
    return bad;
}
