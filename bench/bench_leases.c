/*
 * bench_leases.c — lease renewals/s with many live leases (issue: leases,
 * acknowledgements and the collector).
 *
 * Owns: the measurement only. It opens --leases leases on an onced of its
 * own (or --server), then renews them from --threads threads for --seconds
 * per mode: "single" (one RenewLease per request) and "batched" (one
 * RenewLeases with --batch ids per request). It reports renewals/s, p50/p99
 * latency per request and how many fsyncs the server did meanwhile —
 * renewals must cost none.
 * Never: runs unbounded: every loop ends on its count or its deadline.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_env.h"
#include "proto/once.pb-c.h"

#define SAMPLES_MAX 200000

static struct {
    int leases;
    int threads;
    int seconds;
    int batch;
    const char *server;
    const char *onced;
    const char *csv;
} opt = {10000, 16, 5, 100, NULL, ONCED_PATH, NULL};

static const char *url;
static uint64_t *ids; /* the leases, opened before the clock starts */

typedef struct worker {
    int index;
    bool batched;
    int64_t deadline;
    int64_t renewals;
    int64_t requests;
    int64_t failures;
    int64_t *lat; /* per request, ns */
    size_t nlat;
} worker;

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: bench_leases [options]\n"
            "\n"
            "Lease renewals/s with many live leases, and the fsyncs they "
            "cost.\n"
            "\n"
            "  --leases N     live leases (default 10000)\n"
            "  --threads N    renewing threads, one connection each "
            "(default 16)\n"
            "  --seconds S    per mode (default 5)\n"
            "  --batch N      ids per RenewLeases request (default 100)\n"
            "  --server URL   use a running onced instead of starting one\n"
            "  --onced PATH   the onced to start (default %s)\n"
            "  --csv FILE     also write the results as CSV\n"
            "  --help         this text\n",
            ONCED_PATH);
}

static void *
open_leases(void *p)
{
    worker *w = p;
    nng_socket s;

    if (bench_dial(&s, url) != 0) {
        w->failures++;
        return NULL;
    }
    for (int i = w->index; i < opt.leases; i += opt.threads) {
        if ((ids[i] = bench_open_lease(s, 3600000)) == 0) {
            w->failures++;
        }
    }
    nng_close(s);
    return NULL;
}

static void *
renew(void *p)
{
    worker *w = p;
    uint64_t *mine = malloc(sizeof(*mine) * (size_t)opt.leases);
    int n = 0, next = 0;
    nng_socket s;

    for (int i = w->index; i < opt.leases; i += opt.threads) {
        mine[n++] = ids[i];
    }
    if (n == 0 || bench_dial(&s, url) != 0) {
        w->failures++;
        free(mine);
        return NULL;
    }
    while (bench_now_ns() < w->deadline) {
        ProtobufCMessage *resp = NULL;
        int64_t t0 = bench_now_ns();
        int code, k = 0;

        if (w->batched) {
            Once__V1__RenewLeasesRequest req =
                ONCE__V1__RENEW_LEASES_REQUEST__INIT;
            uint64_t batch[10000];
            k = opt.batch < n ? opt.batch : n;
            for (int i = 0; i < k; i++) {
                batch[i] = mine[next];
                next = (next + 1) % n;
            }
            req.client_ids = batch;
            req.n_client_ids = (size_t)k;
            if (bench_rpc(s, "/once.v1.Lease/RenewLeases", 0, 0, 0, &req.base,
                          &once__v1__renew_leases_response__descriptor, &resp,
                          &code) != 0 ||
                resp == NULL) {
                w->failures++;
                continue;
            }
            Once__V1__RenewLeasesResponse *r =
                (Once__V1__RenewLeasesResponse *)resp;
            for (size_t i = 0; i < r->n_results; i++) {
                if (r->results[i]->code != 0) {
                    w->failures++;
                    k--;
                }
            }
        } else {
            Once__V1__RenewLeaseRequest req =
                ONCE__V1__RENEW_LEASE_REQUEST__INIT;
            req.client_id = mine[next];
            next = (next + 1) % n;
            k = 1;
            if (bench_rpc(s, "/once.v1.Lease/RenewLease", 0, 0, 0, &req.base,
                          NULL, NULL, &code) != 0 ||
                code != 0) {
                w->failures++;
                continue;
            }
        }
        if (resp != NULL) {
            protobuf_c_message_free_unpacked(resp, NULL);
        }
        w->renewals += k;
        w->requests++;
        if (w->nlat < SAMPLES_MAX) {
            w->lat[w->nlat++] = bench_now_ns() - t0;
        }
    }
    nng_close(s);
    free(mine);
    return NULL;
}

typedef struct result {
    const char *mode;
    int64_t renewals;
    int64_t requests;
    int64_t failures;
    double per_s;
    double p50_us;
    double p99_us;
    uint64_t fsyncs;
} result;

static void
run_mode(bool batched, result *r)
{
    pthread_t th[256];
    worker *ws = calloc((size_t)opt.threads, sizeof(*ws));
    int64_t *all;
    size_t nall = 0;
    uint64_t f0 = bench_server_fsyncs(url);
    int64_t t0 = bench_now_ns();

    for (int i = 0; i < opt.threads; i++) {
        ws[i].index = i;
        ws[i].batched = batched;
        ws[i].deadline = t0 + (int64_t)opt.seconds * 1000000000;
        ws[i].lat = malloc(sizeof(int64_t) * SAMPLES_MAX);
        pthread_create(&th[i], NULL, renew, &ws[i]);
    }
    for (int s = 0; s < opt.seconds * 10; s++) {
        bench_progress(batched ? "renew (batched)" : "renew (single)",
                       (double)s / (opt.seconds * 10), 0);
        bench_sleep_ms(100);
    }
    bench_progress(batched ? "renew (batched)" : "renew (single)", 1.0, 1);
    all = malloc(sizeof(int64_t) * SAMPLES_MAX * (size_t)opt.threads);
    memset(r, 0, sizeof(*r));
    r->mode = batched ? "batched" : "single";
    for (int i = 0; i < opt.threads; i++) {
        pthread_join(th[i], NULL);
        r->renewals += ws[i].renewals;
        r->requests += ws[i].requests;
        r->failures += ws[i].failures;
        memcpy(all + nall, ws[i].lat, ws[i].nlat * sizeof(int64_t));
        nall += ws[i].nlat;
        free(ws[i].lat);
    }
    r->per_s = (double)r->renewals * 1e9 / (double)(bench_now_ns() - t0);
    r->p50_us = bench_pct_us(all, nall, 50);
    r->p99_us = bench_pct_us(all, nall, 99);
    r->fsyncs = bench_server_fsyncs(url) - f0;
    free(all);
    free(ws);
}

int
main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"leases", required_argument, NULL, 'l'},
        {"threads", required_argument, NULL, 't'},
        {"seconds", required_argument, NULL, 's'},
        {"batch", required_argument, NULL, 'b'},
        {"server", required_argument, NULL, 'S'},
        {"onced", required_argument, NULL, 'o'},
        {"csv", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bench_onced b;
    pthread_t th[256];
    worker ws[256];
    result res[2];
    int ch, failed = 0;

    while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (ch) {
        case 'l':
            opt.leases = atoi(optarg);
            break;
        case 't':
            opt.threads = atoi(optarg);
            break;
        case 's':
            opt.seconds = atoi(optarg);
            break;
        case 'b':
            opt.batch = atoi(optarg);
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
    if (opt.leases < 1 || opt.threads < 1 || opt.threads > 256 ||
        opt.seconds < 1 || opt.seconds > 600 || opt.batch < 1 ||
        opt.batch > 10000) {
        fprintf(stderr, "bench_leases: --leases >= 1, --threads 1..256, "
                        "--seconds 1..600, --batch 1..10000\n");
        return 2;
    }
    if (opt.server != NULL) {
        url = opt.server;
    } else {
        /* --leases may exceed onced's default lease caps. */
        const char *extra[] = {
            "--lease-ttl-max",           "2h", "--lease-max", "0",
            "--lease-max-per-principal", "0",  NULL};
        if (bench_onced_start(&b, opt.onced, extra) != 0) {
            return 1;
        }
        url = b.url;
    }
    ids = calloc((size_t)opt.leases, sizeof(*ids));
    fprintf(stderr, "opening %d leases from %d threads...\n", opt.leases,
            opt.threads);
    memset(ws, 0, sizeof(ws));
    for (int i = 0; i < opt.threads; i++) {
        ws[i].index = i;
        pthread_create(&th[i], NULL, open_leases, &ws[i]);
    }
    for (int i = 0; i < opt.threads; i++) {
        pthread_join(th[i], NULL);
        failed += ws[i].failures != 0;
    }
    if (failed) {
        fprintf(stderr, "bench_leases: could not open every lease\n");
    } else {
        run_mode(false, &res[0]);
        run_mode(true, &res[1]);
        printf("%-8s %7s %8s %10s %12s %9s %9s %7s %8s\n", "mode", "threads",
               "batch", "renewals", "renewals/s", "p50_us", "p99_us", "fsyncs",
               "failed");
        for (int i = 0; i < 2; i++) {
            printf("%-8s %7d %8d %10lld %12.0f %9.1f %9.1f %7llu %8lld\n",
                   res[i].mode, opt.threads, i == 0 ? 1 : opt.batch,
                   (long long)res[i].renewals, res[i].per_s, res[i].p50_us,
                   res[i].p99_us, (unsigned long long)res[i].fsyncs,
                   (long long)res[i].failures);
        }
        printf("\n%d live leases; batched/single = %.1fx\n", opt.leases,
               res[1].per_s / (res[0].per_s > 0 ? res[0].per_s : 1));
        if (opt.csv != NULL) {
            FILE *f = fopen(opt.csv, "w");
            if (f != NULL) {
                fprintf(f, "mode,threads,batch,leases,renewals,renewals_per_s,"
                           "p50_us,p99_us,fsyncs,failed\n");
                for (int i = 0; i < 2; i++) {
                    fprintf(f, "%s,%d,%d,%d,%lld,%.0f,%.1f,%.1f,%llu,%lld\n",
                            res[i].mode, opt.threads, i == 0 ? 1 : opt.batch,
                            opt.leases, (long long)res[i].renewals,
                            res[i].per_s, res[i].p50_us, res[i].p99_us,
                            (unsigned long long)res[i].fsyncs,
                            (long long)res[i].failures);
                }
                fclose(f);
            }
        }
    }
    if (opt.server == NULL) {
        bench_onced_stop(&b);
    }
    free(ids);
    return failed || res[0].failures || res[1].failures ? 1 : 0;
}
