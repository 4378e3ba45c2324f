/*
 * bench_env.h — what every benchmark needs around the thing it measures:
 * an onced of its own (temp data dir, ipc address), a monotonic clock,
 * percentiles, a raw request/reply helper and a progress line on stderr.
 *
 * Owns: the onced child process and its temp dir, from start to stop.
 * Invariant: every wait is bounded in count and time; the temp dir is
 * removed at stop.
 * Never: measures anything itself, or talks to an address other than the
 * loopback ipc path it made.
 */
#ifndef BENCH_BENCH_ENV_H
#define BENCH_BENCH_ENV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <nng/nng.h>
#include <protobuf-c/protobuf-c.h>

typedef struct bench_onced {
    char dir[256];  /* mkdtemp dir, removed at stop */
    char data[300]; /* dir/data */
    char log[300];  /* dir/onced.log */
    char url[160];  /* ipc:///tmp/once-bench-<pid>-<n>.ipc */
    pid_t pid;
} bench_onced;

/*
 * Starts path (the onced binary) on a fresh temp dir and ipc address with
 * extra arguments (NULL-terminated, may be NULL), and waits up to 10 s for
 * it to answer Stats. Returns 0, or -1 after saying why on stderr.
 */
int bench_onced_start(bench_onced *b, const char *path,
                      const char *const *extra);

/*
 * The start of bench_onced_start without the wait: path (any server taking
 * --data DIR --listen URL) on a fresh temp dir and ipc address, its output
 * in b->log. Returns 0 once it is forked; readiness is the caller's to
 * check. bench_onced_stop stops it.
 */
int bench_spawn(bench_onced *b, const char *path, const char *const *extra);

/* Waits (10 s at most) until once_floor (floor_server.c), spawned with
 * bench_spawn, echoes a probe. 0, or -1 after saying why on stderr. */
int bench_floor_ready(bench_onced *b);

/* SIGTERM (SIGKILL after 10 s), reap, remove the temp dir. */
void bench_onced_stop(bench_onced *b);

/*
 * Extra onced arguments for a benchmark whose callers are many handles of
 * one process: all are one peer (this uid over ipc), and onced's default
 * --conn-max-per-peer (128) would evict the longest-idle of them. Separate
 * agents would be separate peers; the benchmark gives its peer room.
 */
#define BENCH_ONCED_MANY_PEERS "--conn-max-per-peer", "1024"

int64_t bench_now_ns(void);
void bench_sleep_ms(int ms);

/* The p-th percentile (0..100) of n durations in ns, in microseconds.
 * Sorts ns in place. */
double bench_pct_us(int64_t *ns, size_t n, double p);

/*
 * One raw call on a REQ socket: packs a Request envelope (method, rpc id,
 * first_incomplete, the packed req), sends it, waits for the Response.
 * On success returns 0, *code is the status code and, when resp_desc is
 * not NULL and the code is OK, *resp is the unpacked payload (free with
 * protobuf_c_message_free_unpacked). Returns -1 on a transport error.
 */
int bench_rpc(nng_socket s, const char *method, uint64_t client_id,
              uint64_t seq, uint64_t first_incomplete,
              const ProtobufCMessage *req,
              const ProtobufCMessageDescriptor *resp_desc,
              ProtobufCMessage **resp, int *code);

/* OpenLease for principal "bench" with ttl_ms (0: the server's default).
 * The client id, or 0 when no lease came back. */
uint64_t bench_open_lease(nng_socket s, uint64_t ttl_ms);

/* The server's fsync count (Stats.fsyncs) over a connection of its own,
 * or 0 when it cannot be read. */
uint64_t bench_server_fsyncs(const char *url);

/* The CPU time (ns on a core, from /proc/PID/task/N/schedstat) and the
 * context switches (voluntary and not) of every live thread of pid, summed.
 * Threads that exited are not counted. 0, or -1 when pid cannot be read. */
int bench_proc_usage(pid_t pid, uint64_t *cpu_ns, uint64_t *csw);

/* A REQ socket dialed to url (blocking dial, nng's own resend off).
 * 0 or an nng error. */
int bench_dial(nng_socket *s, const char *url);

/* A comma-separated list of at most max_n levels, each 1..max_v, into
 * out: how many, or -1 when s is not such a list. */
int bench_parse_levels(const char *s, int *out, int max_n, int max_v);

/* "label [#####     ] 50%" on stderr, redrawn in place; done adds a
 * newline. */
void bench_progress(const char *label, double frac, int done);

#endif /* BENCH_BENCH_ENV_H */
