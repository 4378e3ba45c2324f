/*
 * bench_env.c — the onced under benchmark, clocks, percentiles, raw calls.
 */
#include "bench/bench_env.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nng/protocol/reqrep0/req.h>

#include "base/clock.h"
#include "base/close_bounded.h"
#include "proto/once.pb-c.h"
#include "tests/sys_helpers.h"

#define BENCH_CLOSE_MS 2000 /* the most a raw socket's close may take */

#define BENCH_READY_MS 10000
#define BENCH_STOP_MS  10000
#define BENCH_ARGS_MAX 32

int64_t
bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void
bench_sleep_ms(int ms)
{
    clock_sleep_ms((uint64_t)ms);
}

static int
bench_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

double
bench_pct_us(int64_t *ns, size_t n, double p)
{
    size_t i;

    if (n == 0) {
        return 0.0;
    }
    qsort(ns, n, sizeof(*ns), bench_cmp);
    i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
    return (double)ns[i < n ? i : n - 1] / 1000.0;
}

int
bench_dial(nng_socket *s, const char *url)
{
    int rv;

    if ((rv = nng_req0_open(s)) != 0) {
        return rv;
    }
    nng_socket_set_ms(*s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    nng_socket_set_ms(*s, NNG_OPT_RECVTIMEO, 10000);
    nng_socket_set_ms(*s, NNG_OPT_SENDTIMEO, 10000);
    if ((rv = nng_dial(*s, url, NULL, 0)) != 0) {
        nng_close(*s);
    }
    return rv;
}

int
bench_rpc(nng_socket s, const char *method, uint64_t client_id, uint64_t seq,
          uint64_t first_incomplete, const ProtobufCMessage *req,
          const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
          int *code)
{
    Once__V1__Request r = ONCE__V1__REQUEST__INIT;
    Once__V1__Response *rp;
    uint8_t pbuf[65536];
    uint8_t *ebuf;
    size_t plen, elen;
    char *rbuf;
    size_t rlen;
    int rv;

    plen = protobuf_c_message_get_packed_size(req);
    if (plen > sizeof(pbuf)) {
        return -1;
    }
    protobuf_c_message_pack(req, pbuf);
    r.method = (char *)method;
    r.client_id = client_id;
    r.seq = seq;
    r.first_incomplete = first_incomplete;
    r.attempt = 1;
    r.payload.data = pbuf;
    r.payload.len = plen;
    elen = once__v1__request__get_packed_size(&r);
    if ((ebuf = malloc(elen)) == NULL) {
        return -1;
    }
    once__v1__request__pack(&r, ebuf);
    rv = nng_send(s, ebuf, elen, 0);
    free(ebuf);
    if (rv != 0 || nng_recv(s, &rbuf, &rlen, NNG_FLAG_ALLOC) != 0) {
        return -1;
    }
    rp = once__v1__response__unpack(NULL, rlen, (uint8_t *)rbuf);
    nng_free(rbuf, rlen);
    if (rp == NULL) {
        return -1;
    }
    *code = rp->status != NULL ? (int)rp->status->code : 0;
    if (resp != NULL) {
        *resp = NULL;
        if (*code == 0 && resp_desc != NULL) {
            *resp = protobuf_c_message_unpack(resp_desc, NULL, rp->payload.len,
                                              rp->payload.data);
        }
    }
    once__v1__response__free_unpacked(rp, NULL);
    return 0;
}

uint64_t
bench_open_lease(nng_socket s, uint64_t ttl_ms)
{
    Once__V1__OpenLeaseRequest req = ONCE__V1__OPEN_LEASE_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    uint64_t id = 0;
    int code;

    req.principal = "bench";
    req.ttl_ms = ttl_ms;
    if (bench_rpc(s, "/once.v1.Lease/OpenLease", 0, 0, 0, &req.base,
                  &once__v1__open_lease_response__descriptor, &resp,
                  &code) == 0 &&
        resp != NULL) {
        id = ((Once__V1__OpenLeaseResponse *)resp)->client_id;
        protobuf_c_message_free_unpacked(resp, NULL);
    }
    return id;
}

uint64_t
bench_server_fsyncs(const char *url)
{
    Once__V1__StatsRequest req = ONCE__V1__STATS_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    nng_socket s;
    uint64_t f = 0;
    int code;

    if (bench_dial(&s, url) != 0) {
        return 0;
    }
    if (bench_rpc(s, "/once.v1.Admin/Stats", 0, 0, 0, &req.base,
                  &once__v1__stats_response__descriptor, &resp, &code) == 0 &&
        resp != NULL) {
        f = ((Once__V1__StatsResponse *)resp)->fsyncs;
        protobuf_c_message_free_unpacked(resp, NULL);
    }
    /* nng 1.5.2's nng_close can wait for good on a pipe that stays
     * (base/close_bounded.h); a benchmark's probe must not. */
    (void)close_bounded(s, BENCH_CLOSE_MS);
    return f;
}

/* Adds the numbers after "voluntary_ctxt_switches:" and
 * "nonvoluntary_ctxt_switches:" in a /proc status file to *csw. */
static void
proc_status_csw(const char *path, uint64_t *csw)
{
    FILE *f = fopen(path, "r");
    char line[256];
    unsigned long long v;

    if (f == NULL) {
        return;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "voluntary_ctxt_switches: %llu", &v) == 1 ||
            sscanf(line, "nonvoluntary_ctxt_switches: %llu", &v) == 1) {
            *csw += v;
        }
    }
    fclose(f);
}

int
bench_proc_usage(pid_t pid, uint64_t *cpu_ns, uint64_t *csw)
{
    char path[128];
    struct dirent *d;
    DIR *dir;

    *cpu_ns = 0;
    *csw = 0;
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    if ((dir = opendir(path)) == NULL) {
        return -1;
    }
    /* At most a few hundred threads: bounded by the directory. */
    while ((d = readdir(dir)) != NULL) {
        unsigned long long ns;
        FILE *f;

        if (d->d_name[0] == '.') {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/%d/task/%.32s/schedstat", (int)pid,
                 d->d_name);
        if ((f = fopen(path, "r")) != NULL) {
            if (fscanf(f, "%llu", &ns) == 1) {
                *cpu_ns += ns;
            }
            fclose(f);
        }
        snprintf(path, sizeof(path), "/proc/%d/task/%.32s/status", (int)pid,
                 d->d_name);
        proc_status_csw(path, csw);
    }
    closedir(dir);
    return 0;
}

static int
bench_wait_ready(bench_onced *b)
{
    int64_t deadline = bench_now_ns() + (int64_t)BENCH_READY_MS * 1000000;

    for (int i = 0; i < 1000 && bench_now_ns() < deadline; i++) {
        Once__V1__StatsRequest req = ONCE__V1__STATS_REQUEST__INIT;
        nng_socket s;
        int status, code = -1;

        if (waitpid(b->pid, &status, WNOHANG) == b->pid) {
            fprintf(stderr, "bench: onced exited (status 0x%x); see %s\n",
                    status, b->log);
            b->pid = 0;
            return -1;
        }
        if (bench_dial(&s, b->url) == 0) {
            nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 300);
            if (bench_rpc(s, "/once.v1.Admin/Stats", 0, 0, 0, &req.base, NULL,
                          NULL, &code) == 0 &&
                (code == 0 || code == 16 /* UNAUTHENTICATED: it runs with
                                            principals */)) {
                (void)close_bounded(s, BENCH_CLOSE_MS);
                return 0;
            }
            (void)close_bounded(s, BENCH_CLOSE_MS);
        }
        bench_sleep_ms(50);
    }
    fprintf(stderr, "bench: onced did not answer on %s; see %s\n", b->url,
            b->log);
    return -1;
}

int
bench_spawn(bench_onced *b, const char *path, const char *const *extra)
{
    static int n;
    const char *argv[BENCH_ARGS_MAX];
    size_t argc = 0;
    int fd;

    memset(b, 0, sizeof(*b));
    snprintf(b->dir, sizeof(b->dir), "/tmp/once-bench-XXXXXX");
    if (mkdtemp(b->dir) == NULL) {
        perror("bench: mkdtemp");
        return -1;
    }
    snprintf(b->data, sizeof(b->data), "%s/data", b->dir);
    snprintf(b->log, sizeof(b->log), "%s/onced.log", b->dir);
    snprintf(b->url, sizeof(b->url), "ipc:///tmp/once-bench-%d-%d.ipc",
             (int)getpid(), n++);
    argv[argc++] = path;
    argv[argc++] = "--data";
    argv[argc++] = b->data;
    argv[argc++] = "--listen";
    argv[argc++] = b->url;
    for (size_t i = 0; extra != NULL && extra[i] != NULL; i++) {
        if (argc + 1 < BENCH_ARGS_MAX) {
            argv[argc++] = extra[i];
        }
    }
    argv[argc] = NULL;
    if ((fd = open(b->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) <
        0) {
        perror("bench: log");
        return -1;
    }
    if ((b->pid = fork()) < 0) {
        perror("bench: fork");
        close(fd);
        return -1;
    }
    if (b->pid == 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        execv(path, (char *const *)argv);
        _exit(127);
    }
    close(fd);
    return 0;
}

int
bench_onced_start(bench_onced *b, const char *path, const char *const *extra)
{
    if (bench_spawn(b, path, extra) != 0) {
        return -1;
    }
    return bench_wait_ready(b);
}

void
bench_onced_stop(bench_onced *b)
{
    int64_t deadline = bench_now_ns() + (int64_t)BENCH_STOP_MS * 1000000;
    int status;

    if (b->pid != 0) {
        kill(b->pid, SIGTERM);
        while (waitpid(b->pid, &status, WNOHANG) != b->pid) {
            if (bench_now_ns() > deadline) {
                fprintf(stderr, "bench: onced ignored SIGTERM; killing it\n");
                kill(b->pid, SIGKILL);
                waitpid(b->pid, &status, 0);
                break;
            }
            bench_sleep_ms(10);
        }
        b->pid = 0;
    }
    if (b->dir[0] != '\0') {
        sys_rm_tree(b->dir);
        unlink(b->url + strlen("ipc://"));
        b->dir[0] = '\0';
    }
}

void
bench_progress(const char *label, double frac, int done)
{
    int width = 30;
    int fill = (int)(frac * width + 0.5);

    if (fill > width) {
        fill = width;
    }
    fprintf(stderr, "\r%-24s [%.*s%*s] %3d%%%s", label, fill,
            "##############################", width - fill, "",
            (int)(frac * 100 + 0.5), done ? "\n" : "");
}

int
bench_parse_levels(const char *s, int *out, int max_n, int max_v)
{
    int n = 0;

    while (*s != '\0' && n < max_n) {
        char *end;
        long v = strtol(s, &end, 10);

        if (end == s || v < 1 || v > max_v || (*end != ',' && *end != '\0')) {
            return -1;
        }
        out[n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
    }
    return n > 0 && *s == '\0' ? n : -1;
}

int
bench_floor_ready(bench_onced *b)
{
    int64_t deadline = bench_now_ns() + 10 * 1000000000LL;

    for (int i = 0; i < 200 && bench_now_ns() < deadline; i++) {
        nng_socket s;
        nng_msg *m = NULL;
        int status, rv = -1;

        if (waitpid(b->pid, &status, WNOHANG) == b->pid) {
            fprintf(stderr, "once_floor exited; see %s\n", b->log);
            b->pid = 0;
            return -1;
        }
        if (bench_dial(&s, b->url) == 0) {
            nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 300);
            if ((rv = nng_send(s, "?", 1, 0)) == 0 &&
                (rv = nng_recvmsg(s, &m, 0)) == 0) {
                nng_msg_free(m);
            }
            nng_close(s);
        }
        if (rv == 0) {
            return 0;
        }
        bench_sleep_ms(50);
    }
    fprintf(stderr, "once_floor did not answer; see %s\n", b->log);
    return -1;
}
