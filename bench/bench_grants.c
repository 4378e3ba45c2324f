/*
 * bench_grants.c — start grants/s and claims/s (issue 4, docs/grants.md).
 *
 * Owns: the measurement only, on an onced of its own (or --server), in
 * three modes of --seconds each:
 *   distinct   --schedulers threads, each on its own surface, loop
 *              RequestGrant (a new request id) → FinishGrant(SUCCEEDED):
 *              every grant is accepted, surfaces never contend;
 *   contended  the same threads on --contended surfaces (default 10), each
 *              picking one at random: RequestGrant, and FinishGrant when it
 *              got the grant; ALREADY_OWNED answers are counted as refused;
 *   claims     --machines agents (default 1000), each with its own lease,
 *              served round-robin by --pollers threads, each agent calling
 *              Claim for its own machine; --work rows are enqueued first
 *              (spread over the machines) so some polls turn rows into
 *              grants, most find nothing.
 * Every call is a durable exactly-once RPC (its own rpc id, acknowledged
 * at once). After each mode it checks the server's view: the sum of the
 * surfaces' fencing epochs (one per grant ever made) equals the grants the
 * clients saw accepted, and no claimed grant names another machine.
 * Output: a table on stdout, progress on stderr, --csv FILE.
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

#include "bench/bench_env.h"
#include "proto/grants.pb-c.h"
#include "proto/once.pb-c.h"
#include "proto/reasons.h"

#define SAMPLES_MAX 200000
#define MAX_THREADS 256

static struct {
    int schedulers;
    int contended;
    int machines;
    int pollers;
    int work;
    int seconds;
    const char *server;
    const char *onced;
    const char *csv;
} opt = {16, 10, 1000, 16, 2000, 5, NULL, ONCED_PATH, NULL};

static const char *url;

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: bench_grants [options]\n"
            "\n"
            "Start grants/s (16 schedulers on distinct surfaces, then on 10\n"
            "contended surfaces) and claims/s (1,000 machines polling their\n"
            "own queue), every call a durable exactly-once RPC.\n"
            "\n"
            "  --schedulers N  scheduler threads, one connection and lease "
            "each\n"
            "                  (default 16)\n"
            "  --contended N   surfaces of the contended mode (default 10)\n"
            "  --machines N    polling machines, one lease each (default "
            "1000)\n"
            "  --pollers N     threads serving the machines round-robin "
            "(default 16)\n"
            "  --work N        rows enqueued before the claims (default "
            "2000)\n"
            "  --seconds S     per mode (default 5)\n"
            "  --server URL    use a running onced instead of starting one\n"
            "  --onced PATH    the onced to start (default %s)\n"
            "  --csv FILE      also write the results as CSV\n"
            "  --help          this text\n",
            ONCED_PATH);
}

/* ---- calls -------------------------------------------------------------- */

/* An rpc-id stream: one lease, seqs from 1, every reply delivered. */
typedef struct ids {
    uint64_t client;
    uint64_t seq;
} ids;

/* One Grants call; 0 and *code, or -1 on a transport error. */
static int
gcall(nng_socket s, ids *id, const char *m, const ProtobufCMessage *req,
      const ProtobufCMessageDescriptor *rd, ProtobufCMessage **resp, int *code)
{
    char full[64];
    uint64_t seq = 0, ack = 0;

    snprintf(full, sizeof(full), "/once.v1.Grants/%s", m);
    if (id != NULL) {
        seq = ++id->seq;
        ack = seq; /* every earlier reply was delivered */
    }
    return bench_rpc(s, full, id != NULL ? id->client : 0, seq, ack, req, rd,
                     resp, code);
}

static int
place(nng_socket s, ids *id, const char *surface, const char *machine)
{
    Once__V1__SetPlacementRequest r = ONCE__V1__SET_PLACEMENT_REQUEST__INIT;
    int code;

    r.surface = (char *)surface;
    r.machine = (char *)machine;
    r.location = "/work";
    if (gcall(s, id, "SetPlacement", &r.base, NULL, NULL, &code) != 0 ||
        code != 0) {
        return -1;
    }
    return 0;
}

/* The surface's placement generation and fencing epoch. */
static int
surface_view(nng_socket s, const char *surface, uint64_t *gen, uint64_t *epoch)
{
    Once__V1__GetSurfaceRequest r = ONCE__V1__GET_SURFACE_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    int code;

    r.surface = (char *)surface;
    if (gcall(s, NULL, "GetSurface", &r.base,
              &once__v1__get_surface_response__descriptor, &resp, &code) != 0 ||
        resp == NULL) {
        return -1;
    }
    if (gen != NULL) {
        *gen = ((Once__V1__GetSurfaceResponse *)resp)->generation;
    }
    if (epoch != NULL) {
        *epoch = ((Once__V1__GetSurfaceResponse *)resp)->epoch;
    }
    protobuf_c_message_free_unpacked(resp, NULL);
    return 0;
}

/* ---- schedulers --------------------------------------------------------- */

typedef struct worker {
    int index;
    bool contended;
    int64_t deadline;
    uint64_t *gens; /* generation of each surface the worker may use */
    int64_t grants, refused, calls, failures;
    int64_t *lat; /* RequestGrant latency, ns */
    size_t nlat;
    unsigned rnd;
} worker;

static void *
schedule(void *p)
{
    worker *w = p;
    ids id = {0, 0};
    nng_socket s;
    char surface[32], rid[48], machine[16];
    uint64_t n = 0;

    if (bench_dial(&s, url) != 0 ||
        (id.client = bench_open_lease(s, 3600000)) == 0) {
        w->failures++;
        return NULL;
    }
    while (bench_now_ns() < w->deadline) {
        Once__V1__RequestGrantRequest r = ONCE__V1__REQUEST_GRANT_REQUEST__INIT;
        ProtobufCMessage *resp = NULL;
        int k = w->contended ? (int)(rand_r(&w->rnd) % (unsigned)opt.contended)
                             : w->index;
        int64_t t0;
        int code;

        snprintf(surface, sizeof(surface), "%s-%d",
                 w->contended ? "hot" : "own", k);
        snprintf(machine, sizeof(machine), "m%d", k % 64);
        snprintf(rid, sizeof(rid), "%s%d-%" PRIu64, w->contended ? "c" : "d",
                 w->index, ++n);
        r.request_id = rid;
        r.attempt = 1;
        r.surface = surface;
        r.machine = machine;
        r.location = "/work";
        r.generation = w->gens[k];
        r.payload.data = (uint8_t *)rid;
        r.payload.len = strlen(rid);
        t0 = bench_now_ns();
        if (gcall(s, &id, "RequestGrant", &r.base,
                  &once__v1__request_grant_response__descriptor, &resp,
                  &code) != 0) {
            w->failures++;
            continue;
        }
        w->calls++;
        if (w->nlat < SAMPLES_MAX) {
            w->lat[w->nlat++] = bench_now_ns() - t0;
        }
        if (code == 0 && resp != NULL) {
            Once__V1__FinishGrantRequest f =
                ONCE__V1__FINISH_GRANT_REQUEST__INIT;
            f.grant_id =
                ((Once__V1__RequestGrantResponse *)resp)->grant->grant_id;
            f.outcome = ONCE__V1__GRANT_OUTCOME__SUCCEEDED;
            w->grants++;
            if (gcall(s, &id, "FinishGrant", &f.base, NULL, NULL, &code) != 0 ||
                code != 0) {
                w->failures++;
            }
            w->calls++;
        } else if (code == 9 /* FAILED_PRECONDITION: ALREADY_OWNED */) {
            w->refused++;
        } else {
            w->failures++;
        }
        if (resp != NULL) {
            protobuf_c_message_free_unpacked(resp, NULL);
        }
    }
    nng_close(s);
    return NULL;
}

/* ---- claims ------------------------------------------------------------- */

typedef struct poller {
    int index;
    int64_t deadline;
    ids *agents; /* opt.machines, this poller uses i % pollers == index */
    int64_t claims, claimed, calls, failures, wrong_machine;
    int64_t *lat;
    size_t nlat;
} poller;

static void *
poll_claims(void *p)
{
    poller *w = p;
    nng_socket s;
    char machine[16];

    if (bench_dial(&s, url) != 0) {
        w->failures++;
        return NULL;
    }
    while (bench_now_ns() < w->deadline) {
        for (int m = w->index; m < opt.machines; m += opt.pollers) {
            Once__V1__ClaimRequest r = ONCE__V1__CLAIM_REQUEST__INIT;
            ProtobufCMessage *resp = NULL;
            int64_t t0;
            int code;

            if (bench_now_ns() >= w->deadline) {
                break;
            }
            snprintf(machine, sizeof(machine), "m%d", m);
            r.machine = machine;
            r.max = 16;
            t0 = bench_now_ns();
            if (gcall(s, &w->agents[m], "Claim", &r.base,
                      &once__v1__claim_response__descriptor, &resp,
                      &code) != 0 ||
                code != 0 || resp == NULL) {
                w->failures++;
                if (resp != NULL) {
                    protobuf_c_message_free_unpacked(resp, NULL);
                }
                continue;
            }
            if (w->nlat < SAMPLES_MAX) {
                w->lat[w->nlat++] = bench_now_ns() - t0;
            }
            w->claims++;
            w->calls++;
            Once__V1__ClaimResponse *cr = (Once__V1__ClaimResponse *)resp;
            for (size_t i = 0; i < cr->n_claimed; i++) {
                w->claimed++;
                if (cr->claimed[i]->grant == NULL ||
                    strcmp(cr->claimed[i]->grant->machine, machine) != 0) {
                    w->wrong_machine++;
                }
            }
            protobuf_c_message_free_unpacked(resp, NULL);
        }
    }
    nng_close(s);
    return NULL;
}

/* ---- modes -------------------------------------------------------------- */

typedef struct result {
    const char *mode;
    int threads;
    int surfaces; /* or machines */
    int64_t grants, refused, calls, failures;
    double grants_s, calls_s, p50_us, p99_us;
    uint64_t fsyncs;
    const char *check;
    char checkbuf[96];
} result;

static void
progress(const char *label, int64_t t0)
{
    while (bench_now_ns() < t0 + (int64_t)opt.seconds * 1000000000) {
        bench_progress(
            label, (double)(bench_now_ns() - t0) / ((double)opt.seconds * 1e9),
            0);
        bench_sleep_ms(100);
    }
    bench_progress(label, 1.0, 1);
}

static int
run_schedulers(bool contended, result *r)
{
    int nsurf = contended ? opt.contended : opt.schedulers;
    uint64_t *gens = calloc((size_t)nsurf, sizeof(*gens));
    worker *ws = calloc((size_t)opt.schedulers, sizeof(*ws));
    pthread_t th[MAX_THREADS];
    int64_t *all = NULL, t0;
    uint64_t f0, epochs = 0;
    size_t nall = 0;
    ids setup = {0, 0};
    nng_socket s;
    char surface[32], machine[16];

    memset(r, 0, sizeof(*r));
    r->mode = contended ? "contended" : "distinct";
    r->threads = opt.schedulers;
    r->surfaces = nsurf;
    if (bench_dial(&s, url) != 0 ||
        (setup.client = bench_open_lease(s, 3600000)) == 0) {
        return -1;
    }
    for (int k = 0; k < nsurf; k++) {
        snprintf(surface, sizeof(surface), "%s-%d", contended ? "hot" : "own",
                 k);
        snprintf(machine, sizeof(machine), "m%d", k % 64);
        if (place(s, &setup, surface, machine) != 0 ||
            surface_view(s, surface, &gens[k], NULL) != 0) {
            fprintf(stderr, "bench_grants: cannot place %s\n", surface);
            nng_close(s);
            return -1;
        }
    }
    f0 = bench_server_fsyncs(url);
    t0 = bench_now_ns();
    for (int i = 0; i < opt.schedulers; i++) {
        ws[i].index = i;
        ws[i].contended = contended;
        ws[i].deadline = t0 + (int64_t)opt.seconds * 1000000000;
        ws[i].gens = gens;
        ws[i].rnd = (unsigned)(i * 7919 + 1);
        ws[i].lat = malloc(sizeof(int64_t) * SAMPLES_MAX);
        pthread_create(&th[i], NULL, schedule, &ws[i]);
    }
    progress(contended ? "grants (contended)" : "grants (distinct)", t0);
    all = malloc(sizeof(int64_t) * SAMPLES_MAX * (size_t)opt.schedulers);
    for (int i = 0; i < opt.schedulers; i++) {
        pthread_join(th[i], NULL);
        r->grants += ws[i].grants;
        r->refused += ws[i].refused;
        r->calls += ws[i].calls;
        r->failures += ws[i].failures;
        memcpy(all + nall, ws[i].lat, ws[i].nlat * sizeof(int64_t));
        nall += ws[i].nlat;
        free(ws[i].lat);
    }
    {
        double el = (double)(bench_now_ns() - t0) / 1e9;
        r->grants_s = (double)r->grants / el;
        r->calls_s = (double)r->calls / el;
    }
    r->p50_us = bench_pct_us(all, nall, 50);
    r->p99_us = bench_pct_us(all, nall, 99);
    r->fsyncs = bench_server_fsyncs(url) - f0;
    /* The server's view: one epoch per grant ever made of a surface. */
    for (int k = 0; k < nsurf; k++) {
        uint64_t e = 0;
        snprintf(surface, sizeof(surface), "%s-%d", contended ? "hot" : "own",
                 k);
        (void)surface_view(s, surface, NULL, &e);
        epochs += e;
    }
    snprintf(r->checkbuf, sizeof(r->checkbuf), "%s (epochs %" PRIu64 ")",
             epochs == (uint64_t)r->grants ? "ok" : "MISMATCH", epochs);
    r->check = r->checkbuf;
    nng_close(s);
    free(all);
    free(ws);
    free(gens);
    return epochs == (uint64_t)r->grants ? 0 : -1;
}

static int
run_claims(result *r)
{
    poller *ws = calloc((size_t)opt.pollers, sizeof(*ws));
    ids *agents = calloc((size_t)opt.machines, sizeof(*agents));
    pthread_t th[MAX_THREADS];
    int64_t *all, t0, wrong = 0, claimed = 0;
    uint64_t f0;
    size_t nall = 0;
    ids setup = {0, 0};
    nng_socket s;
    char surface[48], machine[16], rid[32];

    memset(r, 0, sizeof(*r));
    r->mode = "claims";
    r->threads = opt.pollers;
    r->surfaces = opt.machines;
    if (bench_dial(&s, url) != 0 ||
        (setup.client = bench_open_lease(s, 3600000)) == 0) {
        return -1;
    }
    fprintf(stderr, "claims: %d leases, %d rows on %d machines...\n",
            opt.machines, opt.work, opt.machines);
    for (int m = 0; m < opt.machines; m++) {
        if ((agents[m].client = bench_open_lease(s, 3600000)) == 0) {
            nng_close(s);
            return -1;
        }
    }
    for (int i = 0; i < opt.work; i++) {
        Once__V1__EnqueueRequest e = ONCE__V1__ENQUEUE_REQUEST__INIT;
        int code;
        snprintf(machine, sizeof(machine), "m%d", i % opt.machines);
        snprintf(surface, sizeof(surface), "q-%d", i);
        snprintf(rid, sizeof(rid), "w%d", i);
        e.request_id = rid;
        e.attempt = 1;
        e.surface = surface;
        e.payload.data = (uint8_t *)rid;
        e.payload.len = strlen(rid);
        if (place(s, &setup, surface, machine) != 0 ||
            gcall(s, &setup, "Enqueue", &e.base, NULL, NULL, &code) != 0 ||
            code != 0) {
            fprintf(stderr, "bench_grants: cannot enqueue %s\n", rid);
            nng_close(s);
            return -1;
        }
        if (i % 100 == 0) {
            bench_progress("enqueue", (double)i / opt.work, 0);
        }
    }
    bench_progress("enqueue", 1.0, 1);
    f0 = bench_server_fsyncs(url);
    t0 = bench_now_ns();
    for (int i = 0; i < opt.pollers; i++) {
        ws[i].index = i;
        ws[i].deadline = t0 + (int64_t)opt.seconds * 1000000000;
        ws[i].agents = agents;
        ws[i].lat = malloc(sizeof(int64_t) * SAMPLES_MAX);
        pthread_create(&th[i], NULL, poll_claims, &ws[i]);
    }
    progress("claims", t0);
    all = malloc(sizeof(int64_t) * SAMPLES_MAX * (size_t)opt.pollers);
    for (int i = 0; i < opt.pollers; i++) {
        pthread_join(th[i], NULL);
        r->calls += ws[i].claims;
        r->failures += ws[i].failures;
        claimed += ws[i].claimed;
        wrong += ws[i].wrong_machine;
        memcpy(all + nall, ws[i].lat, ws[i].nlat * sizeof(int64_t));
        nall += ws[i].nlat;
        free(ws[i].lat);
    }
    {
        double el = (double)(bench_now_ns() - t0) / 1e9;
        r->grants = claimed;
        r->grants_s = (double)claimed / el;
        r->calls_s = (double)r->calls / el;
    }
    r->p50_us = bench_pct_us(all, nall, 50);
    r->p99_us = bench_pct_us(all, nall, 99);
    r->fsyncs = bench_server_fsyncs(url) - f0;
    snprintf(r->checkbuf, sizeof(r->checkbuf),
             "%s (%" PRId64 " rows claimed, %" PRId64 " by another machine)",
             wrong == 0 ? "ok" : REASON_WRONG_MACHINE, claimed, wrong);
    r->check = r->checkbuf;
    nng_close(s);
    free(all);
    free(ws);
    free(agents);
    return wrong == 0 ? 0 : -1;
}

/* ---- main --------------------------------------------------------------- */

int
main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"schedulers", required_argument, NULL, 'n'},
        {"contended", required_argument, NULL, 'k'},
        {"machines", required_argument, NULL, 'm'},
        {"pollers", required_argument, NULL, 'p'},
        {"work", required_argument, NULL, 'w'},
        {"seconds", required_argument, NULL, 's'},
        {"server", required_argument, NULL, 'S'},
        {"onced", required_argument, NULL, 'o'},
        {"csv", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bench_onced b;
    result res[3];
    int ch, bad = 0;

    while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (ch) {
        case 'n':
            opt.schedulers = atoi(optarg);
            break;
        case 'k':
            opt.contended = atoi(optarg);
            break;
        case 'm':
            opt.machines = atoi(optarg);
            break;
        case 'p':
            opt.pollers = atoi(optarg);
            break;
        case 'w':
            opt.work = atoi(optarg);
            break;
        case 's':
            opt.seconds = atoi(optarg);
            break;
        case 'S':
            opt.server = optarg;
            break;
        case 'o':
            opt.onced = optarg;
            break;
        case 'c':
            opt.csv = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (opt.schedulers < 1 || opt.schedulers > MAX_THREADS ||
        opt.contended < 1 || opt.machines < 1 || opt.pollers < 1 ||
        opt.pollers > MAX_THREADS || opt.work < 0 || opt.seconds < 1 ||
        opt.seconds > 600) {
        fprintf(stderr,
                "bench_grants: --schedulers and --pollers 1..%d, "
                "--contended, --machines >= 1, --work >= 0, "
                "--seconds 1..600\n",
                MAX_THREADS);
        return 2;
    }
    if (opt.server != NULL) {
        url = opt.server;
    } else {
        const char *extra[] = {"--lease-ttl-max", "2h", NULL};
        if (bench_onced_start(&b, opt.onced, extra) != 0) {
            return 1;
        }
        url = b.url;
    }
    bad |= run_schedulers(false, &res[0]) != 0;
    bad |= run_schedulers(true, &res[1]) != 0;
    bad |= run_claims(&res[2]) != 0;

    printf("%-10s %7s %9s %9s %10s %9s %10s %9s %9s %8s %7s  %s\n", "mode",
           "threads", "surfaces", "grants", "grants/s", "refused", "calls/s",
           "p50_us", "p99_us", "fsyncs", "failed", "check");
    for (int i = 0; i < 3; i++) {
        printf("%-10s %7d %9d %9" PRId64 " %10.0f %9" PRId64
               " %10.0f %9.1f %9.1f %8" PRIu64 " %7" PRId64 "  %s\n",
               res[i].mode, res[i].threads, res[i].surfaces, res[i].grants,
               res[i].grants_s, res[i].refused, res[i].calls_s, res[i].p50_us,
               res[i].p99_us, res[i].fsyncs, res[i].failures,
               res[i].check != NULL ? res[i].check : "not run");
    }
    printf("\ndistinct/contended: each grant is RequestGrant + FinishGrant "
           "(calls/s counts both);\nclaims: surfaces = machines, grants = "
           "rows claimed, calls/s = Claim calls/s (p50/p99 per Claim).\n");
    if (opt.csv != NULL) {
        FILE *f = fopen(opt.csv, "w");
        if (f != NULL) {
            fprintf(f, "mode,threads,surfaces,seconds,grants,grants_per_s,"
                       "refused,calls_per_s,p50_us,p99_us,fsyncs,failed,"
                       "check\n");
            for (int i = 0; i < 3; i++) {
                fprintf(f,
                        "%s,%d,%d,%d,%" PRId64 ",%.0f,%" PRId64
                        ",%.0f,%.1f,%.1f,%" PRIu64 ",%" PRId64 ",\"%s\"\n",
                        res[i].mode, res[i].threads, res[i].surfaces,
                        opt.seconds, res[i].grants, res[i].grants_s,
                        res[i].refused, res[i].calls_s, res[i].p50_us,
                        res[i].p99_us, res[i].fsyncs, res[i].failures,
                        res[i].check != NULL ? res[i].check : "");
            }
            fclose(f);
        }
    }
    if (opt.server == NULL) {
        bench_onced_stop(&b);
    }
    return bad ? 1 : 0;
}
