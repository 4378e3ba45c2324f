/*
 * harness.h — test fixtures: a real onced child process per test.
 *
 * Owns: one onced process (fork/exec of ONCED_PATH, the shipped onced, or of
 * ONCED_TEST_PATH, the test build with its seams, when a fault is armed or
 * ONCED_CLOCK_OFFSET_FILE, ONCED_EXEC_HOLD_MS or ONCED_COMPACT_HOLD_MS is
 * set in the test's environment) on a fresh temp data dir
 * (mkdtemp under /tmp) and a unique ipc:///tmp/once-test-<pid>-<n>.ipc
 * address, with optional extra arguments and an armed crash point
 * (ONCED_FAULT); killing, restarting and stopping it, and waiting for it to
 * crash by itself, or for a SIGSTOPped one to stop; removing its files;
 * and the raw nng REQ helpers the hostile-input tests use to speak the
 * envelope protocol without libonce; and the small helpers the test files share
 * (the monotonic clock, sleeping, libonce calls checked with cmocka
 * assertions). Invariant: every wait is bounded in count and time; a harness
 * never shares a directory or address with another harness, in this process or
 * another, so test programs may run in parallel. Never: mocks server behaviour,
 * edits the data dir behind onced's back, or calls cmocka assertions from a
 * thread other than the test's own.
 */
#ifndef TESTS_HARNESS_H
#define TESTS_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <nng/nng.h>
#include <once/client.h>

#include "proto/once.pb-c.h"

/* How long harness_start/harness_restart wait for onced to answer. */
#define HARNESS_READY_MS 10000

/* Most extra onced arguments harness_start_args takes. */
#define HARNESS_MAX_ARGS 16

typedef struct harness {
    char dir[256];  /* the mkdtemp directory, removed at harness_free */
    char data[300]; /* dir/data: onced's --data */
    char log[300];  /* dir/onced.log: onced's stdout and stderr */
    char url[160];  /* ipc:///tmp/once-test-<pid>-<n>.ipc */
    char path[128]; /* the ipc socket's file, unlinked at harness_free */
    pid_t pid;      /* the running onced, or 0 */
    int starts;     /* how many times onced was started */
    /* Extra onced arguments (owned copies, NULL-terminated) and the
     * ONCED_FAULT value ("" = unset) used by every start and restart. */
    char *args[HARNESS_MAX_ARGS + 1];
    char fault[64];
    char onced[256]; /* the binary started ("" = ONCED_PATH, the shipped
                        onced); harness_start_onced sets it */
} harness;

/*
 * Creates the temp dir, starts onced and waits until it answers
 * /once.v1.Admin/Stats (at most HARNESS_READY_MS). On success *hp is the
 * harness (free with harness_free) and 0 is returned; otherwise -1, after
 * printing onced's log to stderr.
 */
int harness_start(harness **hp);

/*
 * harness_start with extra onced arguments, e.g.
 * {"--lease-ttl", "300ms", "--gc-interval", "50ms", NULL}: args is
 * NULL-terminated (NULL means none), copied, at most HARNESS_MAX_ARGS, and
 * kept for every harness_restart. harness_start(hp) is
 * harness_start_args(hp, NULL).
 */
int harness_start_args(harness **hp, const char *const *args);

/*
 * harness_start_args with another server binary (onced: its path; NULL is
 * the shipped onced), kept for every restart. The crash matrix starts the
 * test-only split-write builds this way.
 */
int harness_start_onced(harness **hp, const char *onced,
                        const char *const *args);

/*
 * Arms a crash point for the next start or restart: onced runs with
 * ONCED_FAULT=fault (store/fault.h: "lease_ended", "records_deleted@2",
 * ...); NULL or "" disarms it (onced then runs without ONCED_FAULT, even if
 * the test process has one). 0, or -1 when fault is too long.
 */
int harness_set_fault(harness *h, const char *fault);

/*
 * Waits up to ms for onced to exit by itself (an armed crash point) and
 * reaps it. Returns the wait status, or -1 when it still runs (it is left
 * running) or nothing was running.
 */
int harness_wait_exit(harness *h, int ms);

/* Starts onced again on the same data dir and address (the previous process
 * must have been killed or stopped) and waits until it answers. 0 or -1. */
int harness_restart(harness *h);

/* Sends sig to onced and reaps it (bounded: SIGKILL after 10 s). Returns the
 * wait status, or -1 when nothing was running. */
int harness_kill(harness *h, int sig);

/* Waits (bounded: 10 s) until every thread of pid is stopped:
 * kill(SIGSTOP) returns before a thread running on another CPU has
 * stopped. True when they all did. */
bool harness_wait_stopped(pid_t pid);

/* SIGSTOPs onced and waits until it has stopped (cmocka assertions, test
 * thread only): on failure it sends SIGCONT and fails the test. SIGCONT
 * resumes it. */
void harness_pause(harness *h);

/* SIGTERM, then waitpid (bounded). Returns 0 only when onced exited on its
 * own with status 0; otherwise prints what happened and returns -1. */
int harness_stop(harness *h);

/* Kills onced if it still runs, removes the temp dir and the ipc file, and
 * frees h. NULL is accepted. */
void harness_free(harness *h);

/* Makes a test program that dies without cmocka's word say so on stderr:
 * a fatal signal cmocka does not catch (SIGPIPE, SIGTERM, SIGABRT, SIGBUS,
 * SIGHUP, SIGINT, SIGALRM, ...) is named, with the pid, before it takes
 * the process down as it would have; an exit with a non-zero status is
 * named too. Call first in main. */
void harness_trap_exit(const char *prog);

/* Inside a test body (cmocka installs its own handlers around each test,
 * and on a thread other than the test's its handler turns a crash into a
 * silent exit(-1)): SIGSEGV, SIGBUS, SIGILL and SIGFPE on any thread print
 * the signal, the thread and a backtrace, then take the default action (a
 * core dump where allowed). cmocka restores its handlers after the test. */
void harness_trap_crashes(void);

/* CLOCK_MONOTONIC in milliseconds. */
int64_t harness_now_ms(void);

/* A TCP port on 127.0.0.1 that nothing listens on right now (bound and
 * released: another process may still take it), or -1. */
int harness_free_port(void);

/* Sleeps ms milliseconds (the whole time, across EINTR). */
void harness_sleep_ms(int ms);

/* Prints onced's log to stderr (for failure diagnosis). */
void harness_dump_log(const harness *h);

/* Opens a libonce client on h->url. no_lease as in once_options. Returns the
 * once_open code (ONCE_OK is 0). */
int harness_client(const harness *h, bool no_lease, once_client **cp);

/* cmocka fixtures: setup starts a harness into *state; teardown stops onced
 * with SIGTERM (failing the test unless it exits 0) and frees the harness. */
int harness_setup(void **state);
int harness_teardown(void **state);

/* harness_setup with extra onced arguments, as in harness_start_args. */
int harness_setup_args(void **state, const char *const *args);

/* onced arguments that keep the collector's timer out of the way (one pass
 * an hour): its passes are commits (a raised watermark persisted, an ended
 * lease's records deleted), and tests that compare Stats.commits to show a
 * request wrote nothing must not count them. */
extern const char *const harness_no_gc[];

/* harness_setup_args(state, harness_no_gc). */
int harness_setup_no_gc(void **state);

/* ---- checked libonce calls ----------------------------------------------
 * Each fails the test (cmocka assertion, after printing the code, reason and
 * message) unless the call returns ONCE_OK; call them from the test's own
 * thread only. */

/* once_admin_stats into *s. */
void harness_stats(once_client *c, once_stats *s);

/* The whole Admin.Stats reply, fields libonce's once_stats (a fixed ABI)
 * does not carry included, as c's principal. Returns the code; on OK *out
 * is the reply (once__v1__stats_response__free_unpacked), else NULL. */
int harness_stats_all(once_client *c, Once__V1__StatsResponse **out);

/* Stats batch_entries of the running onced (entries of batch envelopes
 * since it started), read by a handle of its own; 0 when it did not
 * answer (not asserted: onced may be dying). */
uint64_t harness_batch_entries(const harness *h);

/* once_admin_collector_stats into *s and *cs. */
void harness_collector_stats(once_client *c, once_stats *s,
                             once_collector_stats *cs);

/* The value of counter name (once_counter_get). */
int64_t harness_get(once_client *c, const char *name);

/* A well-behaved caller beside an attack: its calls, how many answered
 * OK, and their latencies. */
typedef struct harness_calls {
    int calls;
    int ok;
    int64_t worst_ms;
    int64_t median_ms;
} harness_calls;

/* Increments counter name through c once every period_ms (a call that
 * took longer is followed at once by the next) until dur_ms have passed
 * or max calls were made (at most 4096), timing each. A call that does
 * not answer OK is printed, never asserted: the caller asserts p->ok ==
 * p->calls and the counter's value. */
void harness_probe_run(once_client *c, const char *name, int period_ms,
                       int64_t dur_ms, int max, harness_calls *p);

/* harness_get through a client of its own (no lease), opened and closed. */
int64_t harness_counter(const harness *h, const char *name);

/* The counter name as the onced at url has it now, by one raw Counter/Get
 * (no retry: libonce's would hide a failed attempt); fails the test
 * unless answered OK in 3 s. */
int64_t harness_raw_counter(const char *url, const char *name);

/* once_lease_info of cid into *li. */
void harness_lease_info(once_client *c, uint64_t cid,
                        struct once_lease_info *li);

/* Not checked: sends Increment(name, by) under exactly cid:seq (*value -1
 * and *st zeroed first) and returns the code. */
int harness_incr_id(once_client *c, const char *name, int64_t by, uint64_t cid,
                    uint64_t seq, int64_t *value, once_status *st);

/* ---- raw envelopes (no libonce) ---------------------------------------- */

/*
 * Sends len bytes as one message on a fresh REQ socket dialed to url (an
 * ipc:// url: a plain AF_UNIX socket speaking SP by hand, sp_ipc.h) and
 * waits up to timeout_ms for the reply. On success returns 0 and *resp is a
 * malloc'd copy of the reply (the caller frees it with free()); otherwise an
 * nng error (NNG_ETIMEDOUT when no reply came) and *resp is NULL.
 */
int harness_raw_call(const char *url, const void *req, size_t len,
                     uint8_t **resp, size_t *resp_len, int timeout_ms);

/*
 * Closes sock on a thread of its own and waits for that at most wait_ms:
 * nng 1.5.2's nng_close can wait for good (a message half sent, a pipe
 * onced has dropped). Returns true when the close returned; false when it
 * is left behind (said on stdout, naming what): whatever the socket uses
 * must then stay allocated, and harness_exit leaves by _exit.
 */
bool harness_close_bounded(nng_socket sock, const char *what, int wait_ms);

/* Runs the shell command fmt (printf-style, at most 2 KiB) with
 * system(); returns system's result. */
int harness_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * main's end: returns rc, or leaves by _exit(rc) after flushing stdio when
 * a harness_close_bounded left a socket behind (exit() would wait in nng's
 * teardown for the socket still closing; the results are out).
 */
int harness_exit(int rc);

/*
 * Packs a Request envelope. payload may be NULL. *out is malloc'd (free()).
 * Returns 0 or -1.
 */
int harness_envelope(const char *method, uint64_t client_id, uint64_t seq,
                     const void *payload, size_t payload_len, uint8_t **out,
                     size_t *out_len);

/* harness_envelope carrying first_incomplete fi (harness_envelope sends
 * 0). */
int harness_envelope_fi(const char *method, uint64_t client_id, uint64_t seq,
                        uint64_t fi, const void *payload, size_t payload_len,
                        uint8_t **out, size_t *out_len);

/* Packs the batch envelope (once.v1.Batch) around the packed Request
 * envelopes entries[0, n) (n may be 0: an empty batch). *out is malloc'd
 * (free()). 0 or -1. */
int harness_batch_envelope(uint8_t *const *entries, const size_t *lens,
                           size_t n, uint8_t **out, size_t *out_len);

/* Packs an IncrementRequest. *out is malloc'd (free()). 0 or -1. */
int harness_incr_payload(const char *name, int64_t by, uint8_t **out,
                         size_t *out_len);

/*
 * Sends a raw request and decodes the Response envelope. On success returns
 * 0 and *rp is the unpacked Response (free with
 * once__v1__response__free_unpacked(*rp, NULL)); returns the nng error when
 * no reply came, or -1 when the reply was not a Response.
 */
int harness_raw_rpc(const char *url, const void *req, size_t len,
                    Once__V1__Response **rp, int timeout_ms);

/* Runs the program at path prog with ARGS (NULL-terminated, after the
 * program name; 30 at most), its stdout into out (at most cap - 1 bytes,
 * NUL-terminated, *outlen of them when outlen is not NULL; the rest, or
 * all of it when out is NULL, read and dropped); asserts it exited and
 * returns its exit status. */
int harness_run(const char *prog, const char *const *args, char *out,
                size_t cap, size_t *outlen);

/* harness_run of the real oncectl. */
int harness_oncectl_run(const char *const *args, char *out, size_t cap,
                        size_t *outlen);

/* oncectl principal add NAME --role ROLE --data DATA --key-out
 * DIR/NAME.key (it edits the data folder); asserts it succeeded. When
 * onced runs, then waits (bounded) until it has the principal in force:
 * onced re-reads the file on its own thread, so the next call must not
 * race that reload. */
void harness_add_principal(const harness *h, const char *name,
                           const char *role);

/* Signs the envelope buf[0, len) as principal name with its key file
 * (DIR/name.key): appends the tag trailer (buf must have
 * AUTH_TAG_TRAILER bytes of room after len) and returns the new length.
 * Asserts the key file reads. */
size_t harness_sign(const harness *h, const char *name, uint8_t *buf,
                    size_t len);

/* Writes text as DATA/policy (mode 0600, by a rename: onced never reads
 * half a file); onced puts it in force within its recheck interval. */
void harness_write_policy(const harness *h, const char *text);

/* The oncectl half of harness_add_principal, without the wait. */
void harness_add_principal_nowait(const harness *h, const char *name,
                                  const char *role);

/* Opens a handle signing as principal name with its key file
 * (DIR/name.key from harness_add_principal): lease TTL 120 s unless
 * no_lease, deadline 5 s, at most 3 attempts. Returns its status. */
int harness_client_as(const harness *h, const char *name, bool no_lease,
                      once_client **cp, once_status *st);

/* Runs the real oncectl --server URL [--key-file KEY] --json ARGS...
 * (NULL-terminated), its stdout into out (at most cap - 1 bytes, *outlen
 * of them when outlen is not NULL); returns its exit status. */
int harness_oncectl(const harness *h, const char *key, char *out, size_t cap,
                    size_t *outlen, const char *const *args);

#endif /* TESTS_HARNESS_H */
