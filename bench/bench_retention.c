/*
 * bench_retention.c — retained completion records and bytes on disk over
 * time, under a steady call rate, with acknowledgements vs lease-only
 * collection (docs/spec.md, docs/performance.md), and bytes on disk per
 * retained record after a forced compaction.
 *
 * Owns: the measurement only. For each mode it starts a fresh onced, runs
 * --clients callers that together send --rate increments/s for --seconds,
 * and samples every --sample: records retained and their bytes (Stats) and
 * the bytes of the LevelDB folder on disk (Stats.disk_bytes). Output: a
 * CSV of the samples, a summary CSV and a summary table.
 *   ack         every request carries first_incomplete, so records are
 *               reclaimed as soon as replies are delivered: retention is
 *               bounded by the window, not by rate x time.
 *   lease-only  no acknowledgement: each caller works under a lease of
 *               --ttl that it does not renew, and takes a new one after
 *               0.8 x ttl; the
 *               collector reclaims a lease's records once it has ended, so
 *               retention grows to about rate x ttl.
 * After the load (callers stopped, records still retained), with
 * --compact (the default): Admin.Compact, waited for, then records and
 * disk bytes again — bytes on disk per retained record once LevelDB has
 * rewritten its log and tables into one compacted level. Then, in both
 * modes, the drain: sampling past the TTL (the callers' leases end) until
 * records_stored stops dropping, bounded; and a last Compact for the
 * folder's floor with what the collector left (the marginal table bytes
 * per record are measured against it).
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

#include "bench/bench_env.h"
#include "base/duration.h"
#include "proto/once.pb-c.h"

/* The capacity model λ·W·b: 128 bytes of payload per completion record
 * (docs/performance.md), before index, replication and allocator overhead. */
#define MODEL_RECORD_BYTES 128
/* Bounds of the phases after the load. */
#define COMPACT_MAX_MS  120000 /* one Compact, waited for */
#define DRAIN_SETTLE_MS 1000   /* records_stored unchanged this long */
#define DRAIN_EXTRA_MS  15000  /* past the TTL, at most */
#define GC_INTERVAL     "100ms"

static struct {
    int rate;
    int seconds;
    int clients;
    uint64_t ttl_ms;
    uint64_t sample_ms;
    bool compact;
    bool same_payload;
    const char *onced;
    const char *csv;
    const char *summary; /* NULL: derived from csv */
} opt = {1000, 20, 4, 5000, 250, true, false, ONCED_PATH, "retention.csv",
         NULL};

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
            "  --compact       after the load, compact (Admin.Compact) and\n"
            "                  measure bytes on disk per retained record\n"
            "                  again; and once more after the drain "
            "(default)\n"
            "  --no-compact    skip both compactions\n"
            "  --same-payload  every call of a caller sends Increment(by 1)\n"
            "                  (default: by 1, 2, 3, ... so each record has\n"
            "                  a digest of its own, as distinct calls do)\n"
            "  --onced PATH    the onced to start (default %s)\n"
            "  --csv FILE      samples (default retention.csv): mode, t_s,\n"
            "                  records, record_bytes, disk_bytes,\n"
            "                  reclaimed_per_s, phase (load, end,\n"
            "                  compacted, drain, final)\n"
            "  --summary FILE  one row per mode (default: the --csv name\n"
            "                  with -summary before .csv)\n"
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
        /* A payload of its own per call (by = 1, 2, 3, ...), as real calls
         * carry different arguments: every record then holds a digest of
         * its own, 32 bytes no compressor shortens. --same-payload sends
         * by = 1 every time (one digest per caller: LevelDB's snappy
         * blocks then shrink the records far below what they cost). */
        req.by = opt.same_payload ? 1 : n + 1;
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

/* Bytes of LevelDB's table files (*.ldb, *.sst) in dir: where the records
 * live once compacted (the rest is the write-ahead log, the manifest,
 * LevelDB's info log and onced's key files). */
static uint64_t
table_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    uint64_t total = 0;

    if (d == NULL) {
        return 0;
    }
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        char path[1024];
        struct stat sb;

        if (n < 4 || (strcmp(e->d_name + n - 4, ".ldb") != 0 &&
                      strcmp(e->d_name + n - 4, ".sst") != 0)) {
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
            total += (uint64_t)sb.st_size;
        }
    }
    closedir(d);
    return total;
}

/* What one Stats reply says about retention and the disk. */
typedef struct snap {
    uint64_t records;
    uint64_t record_bytes;
    uint64_t disk; /* Stats.disk_bytes: every file in the data folder */
    double reclaimed_per_s;
    bool compacting;
    uint64_t compactions;
} snap;

static int
stats_snap(nng_socket s, snap *out)
{
    Once__V1__StatsRequest req = ONCE__V1__STATS_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    Once__V1__StatsResponse *st;
    int code;

    if (bench_rpc(s, "/once.v1.Admin/Stats", 0, 0, 0, &req.base,
                  &once__v1__stats_response__descriptor, &resp, &code) != 0 ||
        resp == NULL) {
        return -1;
    }
    st = (Once__V1__StatsResponse *)resp;
    out->records = st->records_stored;
    out->record_bytes = st->records_bytes;
    out->disk = st->disk_bytes;
    out->reclaimed_per_s = st->reclaimed_per_sec;
    out->compacting = st->compacting;
    out->compactions = st->compactions;
    protobuf_c_message_free_unpacked(resp, NULL);
    return 0;
}

static void
csv_row(FILE *csv, const char *mode, const char *phase, int64_t t0,
        const snap *sn)
{
    fprintf(csv, "%s,%.3f,%llu,%llu,%llu,%.0f,%s\n", mode,
            (double)(bench_now_ns() - t0) / 1e9,
            (unsigned long long)sn->records,
            (unsigned long long)sn->record_bytes, (unsigned long long)sn->disk,
            sn->reclaimed_per_s, phase);
}

/* Admin.Compact, then Stats every 50 ms until it has ended (at most
 * COMPACT_MAX_MS). *after is the Stats that saw it ended, *ms the time
 * from the request. 0, or -1 (said on stderr). */
static int
compact_wait(nng_socket s, snap *after, int64_t *ms)
{
    Once__V1__CompactRequest req = ONCE__V1__COMPACT_REQUEST__INIT;
    int64_t t0 = bench_now_ns();
    int code;

    if (bench_rpc(s, "/once.v1.Admin/Compact", 0, 0, 0, &req.base, NULL, NULL,
                  &code) != 0 ||
        code != 0) {
        fprintf(stderr, "\nbench_retention: Compact failed (code %d)\n", code);
        return -1;
    }
    for (int i = 0; i < COMPACT_MAX_MS / 50; i++) {
        if (stats_snap(s, after) == 0 && !after->compacting) {
            *ms = (bench_now_ns() - t0) / 1000000;
            return 0;
        }
        bench_sleep_ms(50);
    }
    fprintf(stderr, "\nbench_retention: the compaction still runs after %d s\n",
            COMPACT_MAX_MS / 1000);
    return -1;
}

typedef struct summary {
    const char *mode;
    int64_t calls;
    int64_t failures;
    uint64_t max_records; /* over the load's samples */
    uint64_t max_bytes;
    uint64_t max_disk;
    snap end;              /* the load over, callers stopped */
    bool compacted;        /* the fields below were measured */
    snap compacted_at;     /* right after the compaction ended */
    uint64_t tables_after; /* table files then */
    int64_t compact_ms;
    snap drained; /* the collector done (after its compaction, if any) */
    uint64_t tables_drained;
    int64_t drain_ms;
} summary;

static double
per(uint64_t bytes, uint64_t records)
{
    return records != 0 ? (double)bytes / (double)records : 0.0;
}

/* Fewer records than this between the two compactions say nothing about
 * one record (ack mode keeps a handful): no marginal figure then. */
#define MARGINAL_MIN_RECORDS 100

/* (table bytes after the compaction at the end of the load) - (table
 * bytes after the one once drained), per record the collector took in
 * between: what one retained record adds to a compacted store, the fixed
 * part (counters, lease ids, LevelDB's block index and footer) taken off;
 * LevelDB's manifest and info log, which grow with every compaction, are
 * not tables. -1 when there is no such figure. */
static double
marginal(const summary *m)
{
    uint64_t dr = m->compacted_at.records > m->drained.records
                      ? m->compacted_at.records - m->drained.records
                      : 0;

    if (!m->compacted || dr < MARGINAL_MIN_RECORDS ||
        m->tables_after < m->tables_drained) {
        return -1.0;
    }
    return (double)(m->tables_after - m->tables_drained) / (double)dr;
}

/* The drain: samples until the callers' leases have ended (the TTL has
 * passed since the load stopped) and records_stored has not moved for
 * DRAIN_SETTLE_MS; at most TTL + DRAIN_EXTRA_MS. */
static void
drain(nng_socket s, FILE *csv, int64_t t0, summary *sum)
{
    int64_t start = bench_now_ns(), still_since = start;
    int64_t min_ns = (int64_t)opt.ttl_ms * 1000000;
    int64_t max_ns = min_ns + (int64_t)DRAIN_EXTRA_MS * 1000000;
    uint64_t last = sum->end.records;
    char label[32];
    snap sn;

    snprintf(label, sizeof(label), "%s: drain", sum->mode);
    sum->drained = sum->end;
    for (int64_t k = 1; k <= max_ns / ((int64_t)opt.sample_ms * 1000000) + 1;
         k++) {
        int64_t now;

        bench_sleep_ms((int)opt.sample_ms);
        now = bench_now_ns();
        if (stats_snap(s, &sn) == 0) {
            csv_row(csv, sum->mode, "drain", t0, &sn);
            sum->drained = sn;
            if (sn.records != last) {
                last = sn.records;
                still_since = now;
            }
        }
        bench_progress(label, (double)(now - start) / (double)max_ns, 0);
        if ((now - start >= min_ns &&
             now - still_since >= (int64_t)DRAIN_SETTLE_MS * 1000000) ||
            now - start >= max_ns) {
            break;
        }
    }
    bench_progress(label, 1.0, 1);
    sum->drain_ms = (bench_now_ns() - start) / 1000000;
}

static int
run_mode(bool ack, FILE *csv, summary *sum)
{
    char window[32], ttl[32], label[32];
    const char *extra[] = {"--window",      window,      "--lease-ttl", ttl,
                           "--gc-interval", GC_INTERVAL, NULL};
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
        int64_t due = t0 + (int64_t)(k * opt.sample_ms) * 1000000;
        int64_t now = bench_now_ns();
        snap sn;

        if (due > now) {
            bench_sleep_ms((int)((due - now) / 1000000));
        }
        if (stats_snap(s, &sn) == 0) {
            csv_row(csv, sum->mode, "load", t0, &sn);
            if (sn.records > sum->max_records) {
                sum->max_records = sn.records;
            }
            if (sn.record_bytes > sum->max_bytes) {
                sum->max_bytes = sn.record_bytes;
            }
            if (sn.disk > sum->max_disk) {
                sum->max_disk = sn.disk;
            }
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

    /* The load is over and the callers have stopped; the records of their
     * last leases (lease-only) or last calls (ack) are still retained. */
    if (stats_snap(s, &sum->end) == 0) {
        csv_row(csv, sum->mode, "end", t0, &sum->end);
    }
    if (opt.compact) {
        snprintf(label, sizeof(label), "%s: compact", sum->mode);
        bench_progress(label, 0.0, 0);
        if (compact_wait(s, &sum->compacted_at, &sum->compact_ms) == 0) {
            sum->compacted = true;
            sum->tables_after = table_bytes(b.data);
            csv_row(csv, sum->mode, "compacted", t0, &sum->compacted_at);
        }
        bench_progress(label, 1.0, 1);
    }
    drain(s, csv, t0, sum);
    if (opt.compact && sum->compacted) {
        snap fin;
        int64_t ms;

        snprintf(label, sizeof(label), "%s: compact", sum->mode);
        bench_progress(label, 0.0, 0);
        if (compact_wait(s, &fin, &ms) == 0) {
            sum->drained = fin;
            sum->tables_drained = table_bytes(b.data);
            csv_row(csv, sum->mode, "final", t0, &fin);
        } else {
            sum->compacted = false;
        }
        bench_progress(label, 1.0, 1);
    }
    nng_close(s);
    bench_onced_stop(&b);
    return 0;
}

/* "retention.csv" -> "retention-summary.csv"; into buf. */
static const char *
summary_name(const char *csv, char *buf, size_t len)
{
    size_t n = strlen(csv);

    if (n > 4 && strcmp(csv + n - 4, ".csv") == 0) {
        snprintf(buf, len, "%.*s-summary.csv", (int)(n - 4), csv);
    } else {
        snprintf(buf, len, "%s-summary.csv", csv);
    }
    return buf;
}

/* v with one decimal into buf, or "" when v < 0 (no figure). */
static const char *
fmt1(double v, char *buf, size_t len)
{
    if (v < 0) {
        buf[0] = '\0';
    } else {
        snprintf(buf, len, "%.1f", v);
    }
    return buf;
}

static int
write_summary(const char *path, const summary *sums, int n)
{
    FILE *f = fopen(path, "w");
    char mbuf[32];

    if (f == NULL) {
        perror(path);
        return -1;
    }
    fprintf(f, "mode,rate,ttl_s,seconds,calls,failures,peak_records,"
               "peak_record_bytes,end_records,end_record_bytes,"
               "end_disk_bytes,compacted,compacted_records,"
               "compacted_disk_bytes,compacted_table_bytes,compact_ms,"
               "drained_records,drained_disk_bytes,drained_table_bytes,"
               "logical_bytes_per_record,disk_bytes_per_record_before,"
               "disk_bytes_per_record_after,table_bytes_per_record_after,"
               "marginal_table_bytes_per_record,model_bytes_per_record\n");
    for (int m = 0; m < n; m++) {
        const summary *x = &sums[m];
        fprintf(
            f,
            "%s,%d,%.3f,%d,%lld,%lld,%llu,%llu,%llu,%llu,%llu,%d,%llu,"
            "%llu,%llu,%lld,%llu,%llu,%llu,%.1f,%.1f,%.1f,%.1f,%s,%d\n",
            x->mode, opt.rate, (double)opt.ttl_ms / 1000.0, opt.seconds,
            (long long)x->calls, (long long)x->failures,
            (unsigned long long)x->max_records,
            (unsigned long long)x->max_bytes,
            (unsigned long long)x->end.records,
            (unsigned long long)x->end.record_bytes,
            (unsigned long long)x->end.disk, x->compacted ? 1 : 0,
            (unsigned long long)x->compacted_at.records,
            (unsigned long long)x->compacted_at.disk,
            (unsigned long long)x->tables_after, (long long)x->compact_ms,
            (unsigned long long)x->drained.records,
            (unsigned long long)x->drained.disk,
            (unsigned long long)x->tables_drained,
            per(x->end.record_bytes, x->end.records),
            per(x->end.disk, x->end.records),
            x->compacted ? per(x->compacted_at.disk, x->compacted_at.records)
                         : 0.0,
            x->compacted ? per(x->tables_after, x->compacted_at.records) : 0.0,
            fmt1(marginal(x), mbuf, sizeof(mbuf)), MODEL_RECORD_BYTES);
    }
    fclose(f);
    return 0;
}

static void
print_summary(const summary *sums, int n, const char *sumpath)
{
    const summary *lo = &sums[1];
    char mbuf[32];
    double after;

    printf("%-11s %8s %8s %12s %14s %14s %12s\n", "mode", "calls", "failed",
           "max_records", "max_rec_bytes", "max_disk_bytes", "end_records");
    for (int m = 0; m < n; m++) {
        printf("%-11s %8lld %8lld %12llu %14llu %14llu %12llu\n", sums[m].mode,
               (long long)sums[m].calls, (long long)sums[m].failures,
               (unsigned long long)sums[m].max_records,
               (unsigned long long)sums[m].max_bytes,
               (unsigned long long)sums[m].max_disk,
               (unsigned long long)sums[m].end.records);
    }
    printf("\nbytes per retained record at the end of the load (the capacity "
           "model: %d B of payload):\n",
           MODEL_RECORD_BYTES);
    printf("%-11s %9s %10s %12s %12s %12s %12s %10s\n", "mode", "records",
           "logical", "disk before", "disk after", "tables after", "marginal",
           "compact");
    for (int m = 0; m < n; m++) {
        const summary *x = &sums[m];
        printf("%-11s %9llu %10.1f %12.1f", x->mode,
               (unsigned long long)x->end.records,
               per(x->end.record_bytes, x->end.records),
               per(x->end.disk, x->end.records));
        if (x->compacted) {
            fmt1(marginal(x), mbuf, sizeof(mbuf));
            printf(" %12.1f %12.1f %12s %8lldms\n",
                   per(x->compacted_at.disk, x->compacted_at.records),
                   per(x->tables_after, x->compacted_at.records),
                   mbuf[0] != '\0' ? mbuf : "-", (long long)x->compact_ms);
        } else {
            printf(" %12s %12s %12s %10s\n", "-", "-", "-", "-");
        }
    }
    for (int m = 0; m < n; m++) {
        const summary *x = &sums[m];
        if (x->compacted && x->compacted_at.records != x->end.records) {
            printf("(%s: %llu records at the end of the load, %llu when the "
                   "compaction ended: the collector went on)\n",
                   x->mode, (unsigned long long)x->end.records,
                   (unsigned long long)x->compacted_at.records);
        }
    }
    for (int m = 0; m < n; m++) {
        const summary *x = &sums[m];
        printf("%s drained in %.1f s: %llu records left, %llu B on disk%s\n",
               x->mode, (double)x->drain_ms / 1000.0,
               (unsigned long long)x->drained.records,
               (unsigned long long)x->drained.disk,
               x->compacted ? " after a compaction (the folder's floor)" : "");
    }
    printf("\nmodel (lease-only): rate x ttl = %llu records; lease-only peak "
           "%llu records, %.0f B each as onced counts them (key + value)\n",
           (unsigned long long)(opt.rate * opt.ttl_ms / 1000),
           (unsigned long long)lo->max_records,
           per(lo->max_bytes, lo->max_records));
    after = lo->compacted ? per(lo->compacted_at.disk, lo->compacted_at.records)
                          : 0.0;
    printf(
        "the model's example, 1000 calls/s kept 3600 s: %.1f MB at %d B; %.1f "
        "MB at the logical %.0f B",
        3600000.0 * MODEL_RECORD_BYTES / 1e6, MODEL_RECORD_BYTES,
        3600000.0 * per(lo->end.record_bytes, lo->end.records) / 1e6,
        per(lo->end.record_bytes, lo->end.records));
    if (after > 0) {
        printf("; %.1f MB at %.0f B on disk after compaction",
               3600000.0 * after / 1e6, after);
    }
    printf("\nsamples in %s, summary in %s\n", opt.csv, sumpath);
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
        {"compact", no_argument, NULL, 'C'},
        {"no-compact", no_argument, NULL, 'N'},
        {"same-payload", no_argument, NULL, 'P'},
        {"onced", required_argument, NULL, 'o'},
        {"csv", required_argument, NULL, 'f'},
        {"summary", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    summary sums[2];
    char sumbuf[1024];
    const char *sumpath;
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
        case 'C':
            opt.compact = true;
            break;
        case 'N':
            opt.compact = false;
            break;
        case 'P':
            opt.same_payload = true;
            break;
        case 'o':
            opt.onced = optarg;
            break;
        case 'f':
            opt.csv = optarg;
            break;
        case 'S':
            opt.summary = optarg;
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
        opt.ttl_ms < 100 || opt.ttl_ms > 600000) {
        fprintf(stderr, "bench_retention: --rate 1..100000, --seconds "
                        "1..3600, --clients 1..64, --ttl 100ms..10m\n");
        return 2;
    }
    sumpath = opt.summary != NULL
                  ? opt.summary
                  : summary_name(opt.csv, sumbuf, sizeof(sumbuf));
    if ((csv = fopen(opt.csv, "w")) == NULL) {
        perror(opt.csv);
        return 1;
    }
    fprintf(csv,
            "mode,t_s,records,record_bytes,disk_bytes,reclaimed_per_s,phase\n");
    for (int m = 0; m < 2; m++) {
        if (run_mode(m == 0, csv, &sums[m]) != 0) {
            fclose(csv);
            return 1;
        }
        fflush(csv);
    }
    fclose(csv);
    if (write_summary(sumpath, sums, 2) != 0) {
        return 1;
    }
    print_summary(sums, 2, sumpath);
    return sums[0].failures || sums[1].failures ||
                   (opt.compact && (!sums[0].compacted || !sums[1].compacted))
               ? 1
               : 0;
}
