/*
 * bench_retention.c — retained completion records and bytes on disk over
 * time, under a steady call rate, with acknowledgements vs lease-only
 * collection (SPEC §5, §8).
 *
 * Owns: the measurement only. For each mode it starts a fresh onced, runs
 * --clients callers that together send --rate increments/s for --seconds,
 * and samples every --sample: records retained and their bytes (Stats) and
 * the bytes of the LevelDB folder on disk. Output: a CSV of the samples and
 * a summary table.
 *   ack         every request carries first_incomplete, so records are
 *               reclaimed as soon as replies are delivered: retention is
 *               bounded by the window, not by rate x time.
 *   lease-only  no acknowledgement: each caller works under a lease of
 *               --ttl that it does not renew, and takes a new one after
 *               0.8 x ttl; the
 *               collector reclaims a lease's records once it has ended, so
 *               retention grows to about rate x ttl.
 * Never: runs unbounded; every loop ends on its count or deadline.
 */
#include <dirent.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench_env.h"
#include "duration.h"
#include "once.pb-c.h"

static struct {
    int rate;
    int seconds;
    int clients;
    uint64_t ttl_ms;
    uint64_t sample_ms;
    const char *onced;
    const char *csv;
} opt = {1000, 20, 4, 5000, 250, ONCED_PATH, "retention.csv"};

typedef struct caller {
    const char *url;
    bool ack;
    int index;
    int64_t start;
    int64_t deadline;
    _Atomic int64_t calls;
    _Atomic int64_t failures;
} caller;

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: bench_retention [options]\n"
            "\n"
            "Retained records and bytes on disk over time at a steady rate,\n"
            "with acknowledgements vs lease-only collection.\n"
            "\n"
            "  --rate N        calls/s in all (default 1000)\n"
            "  --seconds S     per mode (default 20)\n"
            "  --clients N     callers (default 4)\n"
            "  --ttl DUR       lease TTL (default 5s)\n"
            "  --sample DUR    sampling interval (default 250ms)\n"
            "  --onced PATH    the onced to start (default %s)\n"
            "  --csv FILE      samples (default retention.csv)\n"
            "  --help          this text\n",
            ONCED_PATH);
}

static int
renew_lease(nng_socket s, uint64_t id)
{
    Once__V1__RenewLeaseRequest req = ONCE__V1__RENEW_LEASE_REQUEST__INIT;
    int code;
    req.client_id = id;
    return bench_rpc(s, "/once.v1.Lease/RenewLease", 0, 0, 0, &req.base, NULL,
                     NULL, &code) == 0 &&
                   code == 0
               ? 0
               : -1;
}

/* One caller: paced increments under its lease. In ack mode it renews and
 * acknowledges; in lease-only mode it switches to a fresh lease every TTL
 * and lets the old one expire. */
static void *
call_loop(void *p)
{
    caller *c = p;
    double per_s = (double)opt.rate / opt.clients;
    int64_t lease_since = bench_now_ns(), renewed = lease_since;
    uint64_t id, seq = 0;
    char name[32];
    nng_socket s;

    if (bench_dial(&s, c->url) != 0 ||
        (id = bench_open_lease(s, opt.ttl_ms)) == 0) {
        atomic_fetch_add(&c->failures, 1);
        return NULL;
    }
    snprintf(name, sizeof(name), "retention-%d", c->index);
    for (int64_t n = 0; n < (int64_t)per_s * opt.seconds + 1; n++) {
        Once__V1__IncrementRequest req = ONCE__V1__INCREMENT_REQUEST__INIT;
        int64_t due = c->start + (int64_t)((double)n * 1e9 / per_s);
        int64_t now = bench_now_ns();
        int code;

        if (now > c->deadline) {
            break;
        }
        if (due > now) {
            bench_sleep_ms((int)((due - now) / 1000000));
        }
        now = bench_now_ns();
        if (c->ack && now - renewed > (int64_t)opt.ttl_ms * 1000000 / 3) {
            renew_lease(s, id);
            renewed = now;
        }
        /* Switch a little before the TTL so no call meets the expiry. */
        if (!c->ack && now - lease_since > (int64_t)opt.ttl_ms * 800000) {
            uint64_t fresh =
                bench_open_lease(s, opt.ttl_ms); /* the old one will expire */
            if (fresh != 0) {
                id = fresh;
                seq = 0;
                lease_since = now;
            }
        }
        seq++;
        req.name = name;
        req.by = 1;
        if (bench_rpc(s, "/once.v1.Counter/Increment", id, seq,
                      c->ack ? seq : 0, &req.base, NULL, NULL, &code) != 0 ||
            code != 0) {
            if (atomic_fetch_add(&c->failures, 1) == 0) {
                fprintf(stderr,
                        "\nbench_retention: call %llu:%llu failed "
                        "(code %d)\n",
                        (unsigned long long)id, (unsigned long long)seq, code);
            }
            continue;
        }
        atomic_fetch_add(&c->calls, 1);
    }
    nng_close(s);
    return NULL;
}

/* Bytes of the regular files in dir (LevelDB keeps a flat folder). */
static uint64_t
dir_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    uint64_t total = 0;

    if (d == NULL) {
        return 0;
    }
    while ((e = readdir(d)) != NULL) {
        char path[1024];
        struct stat sb;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
            total += (uint64_t)sb.st_size;
        }
    }
    closedir(d);
    return total;
}

typedef struct summary {
    const char *mode;
    int64_t calls;
    int64_t failures;
    uint64_t max_records;
    uint64_t max_bytes;
    uint64_t max_disk;
    uint64_t end_records;
} summary;

static int
run_mode(bool ack, FILE *csv, summary *sum)
{
    char window[32], ttl[32];
    const char *extra[] = {"--window",      window,  "--lease-ttl", ttl,
                           "--gc-interval", "100ms", NULL};
    pthread_t th[64];
    caller cs[64];
    bench_onced b;
    nng_socket s;
    int64_t t0;

    /* Lease-only callers never acknowledge: the window must hold a whole
     * lease's worth of calls. */
    snprintf(window, sizeof(window), "%llu",
             ack ? 512ULL
                 : (unsigned long long)(opt.rate * (opt.ttl_ms / 1000 + 2)));
    duration_format(opt.ttl_ms, ttl, sizeof(ttl));
    if (bench_onced_start(&b, opt.onced, extra) != 0 ||
        bench_dial(&s, b.url) != 0) {
        return -1;
    }
    memset(sum, 0, sizeof(*sum));
    sum->mode = ack ? "ack" : "lease-only";
    t0 = bench_now_ns();
    for (int i = 0; i < opt.clients; i++) {
        memset(&cs[i], 0, sizeof(cs[i]));
        cs[i].url = b.url;
        cs[i].ack = ack;
        cs[i].index = i;
        cs[i].start = t0;
        cs[i].deadline = t0 + (int64_t)opt.seconds * 1000000000;
        pthread_create(&th[i], NULL, call_loop, &cs[i]);
    }
    for (uint64_t k = 0; k <= (uint64_t)opt.seconds * 1000 / opt.sample_ms;
         k++) {
        Once__V1__StatsRequest req = ONCE__V1__STATS_REQUEST__INIT;
        ProtobufCMessage *resp = NULL;
        int64_t due = t0 + (int64_t)(k * opt.sample_ms) * 1000000;
        int64_t now = bench_now_ns();
        int code;

        if (due > now) {
            bench_sleep_ms((int)((due - now) / 1000000));
        }
        if (bench_rpc(s, "/once.v1.Admin/Stats", 0, 0, 0, &req.base,
                      &once__v1__stats_response__descriptor, &resp,
                      &code) == 0 &&
            resp != NULL) {
            Once__V1__StatsResponse *st = (Once__V1__StatsResponse *)resp;
            uint64_t disk = dir_bytes(b.data);
            double t = (double)(bench_now_ns() - t0) / 1e9;
            fprintf(csv, "%s,%.3f,%llu,%llu,%llu,%.0f\n", sum->mode, t,
                    (unsigned long long)st->records_stored,
                    (unsigned long long)st->records_bytes,
                    (unsigned long long)disk, st->reclaimed_per_sec);
            if (st->records_stored > sum->max_records) {
                sum->max_records = st->records_stored;
            }
            if (st->records_bytes > sum->max_bytes) {
                sum->max_bytes = st->records_bytes;
            }
            if (disk > sum->max_disk) {
                sum->max_disk = disk;
            }
            sum->end_records = st->records_stored;
            protobuf_c_message_free_unpacked(resp, NULL);
        }
        bench_progress(sum->mode,
                       (double)k * opt.sample_ms / (opt.seconds * 1000.0), 0);
    }
    bench_progress(sum->mode, 1.0, 1);
    for (int i = 0; i < opt.clients; i++) {
        pthread_join(th[i], NULL);
        sum->calls += cs[i].calls;
        sum->failures += cs[i].failures;
    }
    nng_close(s);
    bench_onced_stop(&b);
    return 0;
}

int
main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"rate", required_argument, NULL, 'r'},
        {"seconds", required_argument, NULL, 's'},
        {"clients", required_argument, NULL, 'c'},
        {"ttl", required_argument, NULL, 't'},
        {"sample", required_argument, NULL, 'p'},
        {"onced", required_argument, NULL, 'o'},
        {"csv", required_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    summary sums[2];
    FILE *csv;
    int ch;

    while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (ch) {
        case 'r':
            opt.rate = atoi(optarg);
            break;
        case 's':
            opt.seconds = atoi(optarg);
            break;
        case 'c':
            opt.clients = atoi(optarg);
            break;
        case 't':
            if (duration_parse(optarg, &opt.ttl_ms) != 0) {
                fprintf(stderr, "bench_retention: --ttl like 5s\n");
                return 2;
            }
            break;
        case 'p':
            if (duration_parse(optarg, &opt.sample_ms) != 0 ||
                opt.sample_ms == 0) {
                fprintf(stderr, "bench_retention: --sample like 250ms\n");
                return 2;
            }
            break;
        case 'o':
            opt.onced = optarg;
            break;
        case 'f':
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
    if (opt.rate < 1 || opt.rate > 100000 || opt.seconds < 1 ||
        opt.seconds > 3600 || opt.clients < 1 || opt.clients > 64 ||
        opt.ttl_ms < 100) {
        fprintf(stderr, "bench_retention: --rate 1..100000, --seconds "
                        "1..3600, --clients 1..64, --ttl >= 100ms\n");
        return 2;
    }
    if ((csv = fopen(opt.csv, "w")) == NULL) {
        perror(opt.csv);
        return 1;
    }
    fprintf(csv, "mode,t_s,records,record_bytes,disk_bytes,reclaimed_per_s\n");
    for (int m = 0; m < 2; m++) {
        if (run_mode(m == 0, csv, &sums[m]) != 0) {
            fclose(csv);
            return 1;
        }
    }
    fclose(csv);
    printf("%-11s %8s %8s %12s %14s %14s %12s\n", "mode", "calls", "failed",
           "max_records", "max_rec_bytes", "max_disk_bytes", "end_records");
    for (int m = 0; m < 2; m++) {
        printf("%-11s %8lld %8lld %12llu %14llu %14llu %12llu\n", sums[m].mode,
               (long long)sums[m].calls, (long long)sums[m].failures,
               (unsigned long long)sums[m].max_records,
               (unsigned long long)sums[m].max_bytes,
               (unsigned long long)sums[m].max_disk,
               (unsigned long long)sums[m].end_records);
    }
    printf("\nmodel (lease-only): rate x ttl = %llu records; bytes per "
           "retained record (lease-only peak): %.0f\nsamples in %s\n",
           (unsigned long long)(opt.rate * opt.ttl_ms / 1000),
           sums[1].max_records
               ? (double)sums[1].max_bytes / (double)sums[1].max_records
               : 0.0,
           opt.csv);
    return sums[0].failures || sums[1].failures ? 1 : 0;
}
