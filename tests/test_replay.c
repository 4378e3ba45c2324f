/*
 * test_replay.c — one rpc id sent twice is executed once (docs/spec.md).
 *
 * Owns: the replay checks against a real onced: a resend of a completed id
 * returns the stored value with replayed=true and commits nothing; the same
 * holds when onced is SIGKILLed and restarted between the two sends, and
 * when it is SIGKILLed while the first send may still be in flight. A
 * resend after the client acknowledged the seq is STALE_RPC, and after its
 * lease ended LEASE_EXPIRED — neither executes again. libonce's own
 * retries, with backoffs between them, resend the same id: a call whose
 * attempts time out while onced is stopped gets its reply once onced
 * continues, and executes once; a call that never reaches onced ends
 * NOT_SENT and its id executes later, once.
 * Invariant: every check is on an effect that reveals duplicates (a counter
 * incremented by a distinctive amount), so a server that executed twice
 * fails the test.
 * Never: resends an id from the client that received its reply (that client
 * has acknowledged the seq, so the server may rightly answer STALE_RPC);
 * resends go through a second, lease-less client with the explicit id.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <linux/sockios.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "tests/harness.h"

#define BY 5 /* a distinctive increment: a double execution shows as 10 */

/* Sends Increment(name, by) under exactly *id; returns the code. */
static int
incr(once_client *c, const char *name, int64_t by, once_rpc_id *id,
     int64_t *value, once_status *st)
{
    int rv;

    *value = -1;
    memset(st, 0, sizeof(*st));
    rv = once_counter_incr(c, name, by, id, value, st);
    if (rv != ONCE_OK) {
        print_error("once_counter_incr(%s, id %llu/%llu): %s %s %s\n", name,
                    (unsigned long long)id->client_id,
                    (unsigned long long)id->seq, once_strerror(rv), st->reason,
                    st->message);
    }
    return rv;
}

static void
test_resend_same_id(void **state)
{
    harness *h = *state;
    once_client *a = NULL, *b = NULL;
    once_rpc_id id = {0, 0}, fresh = {0, 0};
    once_status st;
    once_stats s0, s1;
    int64_t v;

    assert_int_equal(harness_client(h, false, &a), ONCE_OK);
    assert_int_equal(harness_client(h, true, &b), ONCE_OK);
    assert_int_not_equal(once_client_id(a), 0);

    /* First send: the library assigns the seq and writes it back. */
    assert_int_equal(incr(a, "jobs", BY, &id, &v, &st), ONCE_OK);
    assert_int_equal(v, BY);
    assert_false(st.replayed);
    assert_int_equal(id.client_id, once_client_id(a));
    assert_int_not_equal(id.seq, 0);

    harness_stats(b, &s0);

    /* Resend of exactly that id: stored value, replayed, nothing executed. */
    once_rpc_id again = id;
    assert_int_equal(incr(b, "jobs", BY, &again, &v, &st), ONCE_OK);
    assert_int_equal(v, BY);
    assert_true(st.replayed);
    assert_memory_equal(&again, &id, sizeof(id));
    assert_int_equal(harness_get(b, "jobs"), BY);

    harness_stats(b, &s1);
    assert_int_equal(s1.commits, s0.commits);
    assert_int_equal(s1.records_stored, s0.records_stored);
    assert_true(s1.replays >= s0.replays + 1);

    /* A third send of the same id still replays. */
    again = id;
    assert_int_equal(incr(b, "jobs", BY, &again, &v, &st), ONCE_OK);
    assert_int_equal(v, BY);
    assert_true(st.replayed);
    assert_int_equal(harness_get(b, "jobs"), BY);

    /* A new id is a new call: deduplication is by id, not by content. */
    assert_int_equal(incr(a, "jobs", BY, &fresh, &v, &st), ONCE_OK);
    assert_int_equal(v, 2 * BY);
    assert_false(st.replayed);
    assert_true(fresh.seq > id.seq);
    assert_int_equal(harness_get(b, "jobs"), 2 * BY);

    once_client_close(b);
    once_client_close(a);
}

static void
test_resend_after_sigkill(void **state)
{
    harness *h = *state;
    once_client *a = NULL, *b = NULL;
    once_rpc_id id = {0, 0};
    once_status st;
    int64_t v;

    assert_int_equal(harness_client(h, false, &a), ONCE_OK);
    assert_int_equal(incr(a, "crash", BY, &id, &v, &st), ONCE_OK);
    assert_int_equal(v, BY);
    assert_false(st.replayed);
    /* `a` stays open across the crashes: closing it would close its lease,
     * and a retry under an ended lease is rightly refused (LEASE_EXPIRED). */

    /* The reply was delivered, so the batch was synced: it must survive. */
    assert_int_not_equal(harness_kill(h, SIGKILL), -1);
    assert_int_equal(harness_restart(h), 0);

    assert_int_equal(harness_client(h, true, &b), ONCE_OK);
    assert_int_equal(harness_get(b, "crash"), BY);

    once_rpc_id again = id;
    assert_int_equal(incr(b, "crash", BY, &again, &v, &st), ONCE_OK);
    assert_int_equal(v, BY);
    assert_true(st.replayed);
    assert_int_equal(harness_get(b, "crash"), BY);

    /* And once more across a second crash. */
    once_client_close(b);
    assert_int_not_equal(harness_kill(h, SIGKILL), -1);
    assert_int_equal(harness_restart(h), 0);
    assert_int_equal(harness_client(h, true, &b), ONCE_OK);
    again = id;
    assert_int_equal(incr(b, "crash", BY, &again, &v, &st), ONCE_OK);
    assert_int_equal(v, BY);
    assert_true(st.replayed);
    assert_int_equal(harness_get(b, "crash"), BY);
    once_client_close(b);
    once_client_close(a);
}

/* Once the client has acknowledged a seq (its next call carries
 * first_incomplete above it), a late resend is STALE_RPC, never re-executed. */
static void
test_resend_after_ack_is_stale(void **state)
{
    harness *h = *state;
    once_client *a = NULL, *b = NULL;
    once_rpc_id id = {0, 0}, next = {0, 0};
    once_status st;
    int64_t v;
    int rv;

    assert_int_equal(harness_client(h, false, &a), ONCE_OK);
    assert_int_equal(harness_client(h, true, &b), ONCE_OK);
    assert_int_equal(incr(a, "acked", BY, &id, &v, &st), ONCE_OK);
    assert_int_equal(v, BY);
    /* The next call acknowledges id.seq. */
    assert_int_equal(incr(a, "other", 1, &next, &v, &st), ONCE_OK);
    assert_true(once_client_first_incomplete(a) > id.seq);

    once_rpc_id again = id;
    rv = once_counter_incr(b, "acked", BY, &again, &v, &st);
    print_message("resend after the acknowledgement: %s reason=\"%s\"\n",
                  once_strerror(rv), st.reason);
    assert_int_equal(rv, ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "STALE_RPC");
    assert_int_equal(harness_get(b, "acked"), BY);

    once_client_close(b);
    once_client_close(a);
}

/* Once the client's lease has ended (CloseLease), a resend of its id is
 * LEASE_EXPIRED, never re-executed — across a restart too. */
static void
test_resend_after_lease_end(void **state)
{
    harness *h = *state;
    once_client *a = NULL, *b = NULL;
    once_rpc_id id = {0, 0};
    once_status st;
    int64_t v;
    int rv;

    assert_int_equal(harness_client(h, false, &a), ONCE_OK);
    assert_int_equal(incr(a, "ended", BY, &id, &v, &st), ONCE_OK);
    assert_int_equal(v, BY);
    assert_int_equal(once_lease_close(a, id.client_id, NULL, &st), ONCE_OK);
    once_client_close(a);

    assert_int_equal(harness_client(h, true, &b), ONCE_OK);
    once_rpc_id again = id;
    rv = once_counter_incr(b, "ended", BY, &again, &v, &st);
    print_message("resend after the lease ended: %s reason=\"%s\"\n",
                  once_strerror(rv), st.reason);
    assert_int_equal(rv, ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "LEASE_EXPIRED");
    assert_int_equal(harness_get(b, "ended"), BY);
    once_client_close(b);

    /* A restart never revives an ended lease. */
    assert_int_not_equal(harness_kill(h, SIGKILL), -1);
    assert_int_equal(harness_restart(h), 0);
    assert_int_equal(harness_client(h, true, &b), ONCE_OK);
    again = id;
    rv = once_counter_incr(b, "ended", BY, &again, &v, &st);
    assert_int_equal(rv, ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "LEASE_EXPIRED");
    assert_int_equal(harness_get(b, "ended"), BY);
    once_client_close(b);
}

/* A REQ socket dialed to url (the connection made), resending never. */
static int
dial_req(const char *url, nng_socket *s)
{
    int rv;

    if ((rv = nng_req0_open(s)) != 0) {
        return rv;
    }
    nng_socket_set_ms(*s, NNG_OPT_SENDTIMEO, 2000);
    nng_socket_set_ms(*s, NNG_OPT_REQ_RESENDTIME, 3600 * 1000);
    return nng_dial(*s, url, NULL, 0);
}

/* Sends one raw Increment on s (dial_req) and returns without waiting for
 * the reply. */
static int
send_no_wait(nng_socket *s, uint64_t cid, uint64_t seq, const char *name,
             int64_t by)
{
    uint8_t *payload = NULL, *env = NULL;
    size_t plen, elen;
    int rv;

    if (harness_incr_payload(name, by, &payload, &plen) != 0 ||
        harness_envelope("/once.v1.Counter/Increment", cid, seq, payload, plen,
                         &env, &elen) != 0) {
        free(payload);
        return NNG_ENOMEM;
    }
    rv = nng_send(*s, env, elen, 0);
    free(payload);
    free(env);
    return rv;
}

#define KILL_PAUSED  (-1) /* onced SIGSTOPped before the send: never read */
#define KILL_REPLIED (-2) /* after the reply came back: committed */

/*
 * onced is SIGKILLed at several points after a request left the client —
 * before it was read (onced stopped), after 0 µs to 50 ms (while it
 * executes, or after the commit), after the reply. Whatever the point, the
 * retry after restart must leave exactly one effect and report the value
 * that single execution produced. The two ends are certain, so the points
 * are shown to differ: the first retry's execution is its first, the last
 * one's a replay.
 */
static void
test_sigkill_in_flight(void **state)
{
    static const int delay_us[] = {KILL_PAUSED, 0,     100,   500,
                                   2000,        10000, 50000, KILL_REPLIED};
    bool replayed_at[sizeof(delay_us) / sizeof(delay_us[0])];
    const int n = (int)(sizeof(delay_us) / sizeof(delay_us[0]));
    harness *h = *state;
    once_client *a = NULL, *b = NULL;
    once_status st;
    uint64_t cid = 0, ttl = 0;
    int replays = 0;

    assert_int_equal(harness_client(h, true, &a), ONCE_OK);
    assert_int_equal(once_lease_open(a, NULL, 120000, &cid, &ttl, &st),
                     ONCE_OK);
    assert_int_not_equal(cid, 0);
    once_client_close(a);

    for (int i = 0; i < n; i++) {
        nng_socket s = NNG_SOCKET_INITIALIZER;
        once_rpc_id id = {cid, (uint64_t)i + 1};
        int64_t v;

        assert_int_equal(dial_req(h->url, &s), 0);
        if (delay_us[i] == KILL_PAUSED) {
            harness_pause(h); /* connected: the send lands unread */
        }
        assert_int_equal(send_no_wait(&s, cid, id.seq, "inflight", BY), 0);
        if (delay_us[i] == KILL_REPLIED) {
            void *rep = NULL;
            size_t rep_len = 0;
            nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 30000);
            assert_int_equal(nng_recv(s, &rep, &rep_len, NNG_FLAG_ALLOC), 0);
            nng_free(rep, rep_len);
        } else if (delay_us[i] > 0) {
            usleep((useconds_t)delay_us[i]);
        }
        assert_int_not_equal(harness_kill(h, SIGKILL), -1);
        nng_close(s);
        assert_int_equal(harness_restart(h), 0);

        assert_int_equal(harness_client(h, true, &b), ONCE_OK);
        assert_int_equal(incr(b, "inflight", BY, &id, &v, &st), ONCE_OK);
        assert_int_equal(v, (int64_t)(i + 1) * BY);
        replays += st.replayed ? 1 : 0;
        replayed_at[i] = st.replayed;
        assert_int_equal(harness_get(b, "inflight"), (int64_t)(i + 1) * BY);

        /* A further resend is a replay now, whatever happened before. */
        id = (once_rpc_id){cid, (uint64_t)i + 1};
        assert_int_equal(incr(b, "inflight", BY, &id, &v, &st), ONCE_OK);
        assert_int_equal(v, (int64_t)(i + 1) * BY);
        assert_true(st.replayed);
        once_client_close(b);
        b = NULL;
    }
    print_message("sigkill in flight: %d of %d first executions had "
                  "committed before the kill\n",
                  replays, n);
    /* The kill points differed: one before the request was read, one
     * after its reply. */
    assert_false(replayed_at[0]);
    assert_true(replayed_at[n - 1]);
    assert_true(replays >= 1 && replays <= n - 1);
}

/* One handle across three server crashes: its next call after each restart
 * goes through (on a fresh nng context: the kept ones talked over the dead
 * connection, client/slot.h) in at most two attempts, runs once,
 * and the counter counts every call exactly once. */
static void
test_same_handle_across_crashes(void **state)
{
    harness *h = *state;
    once_client *a = NULL;
    once_rpc_id id;
    once_status st;
    int64_t v;

    assert_int_equal(harness_client(h, false, &a), ONCE_OK);
    for (int round = 1; round <= 3; round++) {
        int64_t t0;

        for (int i = 0; i < 4; i++) { /* several slots kept */
            id = (once_rpc_id){0, 0};
            assert_int_equal(incr(a, "handle", 1, &id, &v, &st), ONCE_OK);
        }
        assert_int_not_equal(harness_kill(h, SIGKILL), -1);
        assert_int_equal(harness_restart(h), 0);
        t0 = harness_now_ms();
        id = (once_rpc_id){0, 0};
        if (incr(a, "handle", 1, &id, &v, &st) != ONCE_OK) {
            fail_msg("round %d: the call after the restart: %s %s %s", round,
                     once_strerror(st.code), st.reason, st.message);
        }
        print_message("  round %d: first call after the restart took %lld "
                      "ms\n",
                      round, (long long)(harness_now_ms() - t0));
        assert_int_equal(v, (int64_t)round * 5);
        assert_true(st.attempts <= 2); /* no attempt lost to a stale context */
    }
    assert_int_equal(harness_get(a, "handle"), 15);
    once_client_close(a);
}

/* A handle whose attempts wait attempt_ms for a reply, with backoffs of
 * backoff_ms to 2 * backoff_ms at most between them (jittered: any amount
 * up to that), at most max_attempts within deadline_ms. */
static once_client *
open_retrying(const harness *h, bool no_lease, uint32_t attempt_ms,
              uint32_t backoff_ms, uint32_t max_attempts, uint32_t deadline_ms)
{
    once_options o;
    once_client *c = NULL;
    once_status st;
    int rv;

    once_options_init(&o);
    o.url = h->url;
    o.no_lease = no_lease;
    o.lease_ttl_ms = 120000;
    o.deadline_ms = deadline_ms;
    o.attempt_timeout_ms = attempt_ms;
    o.max_attempts = max_attempts;
    o.backoff_initial_ms = backoff_ms;
    o.backoff_max_ms = 2 * backoff_ms;
    if ((rv = once_client_open(&c, &o, &st)) != ONCE_OK) {
        print_error("once_client_open: %s %s %s\n", once_strerror(rv),
                    st.reason, st.message);
    }
    assert_int_equal(rv, ONCE_OK);
    return c;
}

/* One libonce call on its own thread (cmocka assertions stay on the
 * test's thread: this one only records). */
typedef struct background {
    once_client *c;
    const char *name;
    once_rpc_id id;
    int rv;
    int64_t value;
    once_status st;
    atomic_int done;
} background;

static void *
background_main(void *arg)
{
    background *b = arg;

    b->rv = once_counter_incr(b->c, b->name, BY, &b->id, &b->value, &b->st);
    atomic_store(&b->done, 1);
    return NULL;
}

/* Waits (bounded) for the background call to return; true when it did. */
static bool
background_wait(background *b, int ms)
{
    for (int i = 0; i < ms / 10 + 1; i++) {
        if (atomic_load(&b->done)) {
            return true;
        }
        harness_sleep_ms(10);
    }
    return atomic_load(&b->done) != 0;
}

/*
 * The bytes waiting unread in the sockets of process pid (SIOCINQ on a copy
 * of each socket descriptor, pidfd_getfd(2): onced is our child). While
 * onced is stopped, each attempt a client sends adds to it. -1 when the
 * kernel or a sandbox does not let us look.
 */
static long
queued_bytes(pid_t pid)
{
    char dir[64], path[600], link[64];
    struct dirent *d;
    DIR *dp;
    long sum = 0;
    int pfd;

    if ((pfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0) {
        return -1;
    }
    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
    if ((dp = opendir(dir)) == NULL) {
        close(pfd);
        return -1;
    }
    while ((d = readdir(dp)) != NULL) {
        ssize_t n;
        int fd, q = 0;

        snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
        if ((n = readlink(path, link, sizeof(link) - 1)) <= 0) {
            continue;
        }
        link[n] = '\0';
        if (strncmp(link, "socket:", 7) != 0) {
            continue;
        }
        if ((fd = (int)syscall(SYS_pidfd_getfd, pfd, atoi(d->d_name), 0)) < 0) {
            sum = -1;
            break;
        }
        if (ioctl(fd, SIOCINQ, &q) == 0 && q > 0) {
            sum += q;
        }
        close(fd);
    }
    closedir(dp);
    close(pfd);
    return sum;
}

/*
 * onced is SIGSTOPped while a call waits for its reply: its attempts (150
 * ms each) time out and are retried with the same id after backoffs of up
 * to 80 ms. Once onced continues it works off every copy; the call gets a
 * reply (the first copy's result or its replay), the counter moved exactly
 * once, and the handle's next call goes through on the first attempt.
 * (With the backoff sleeping on the aio that also receives, nng 1.5 said 0
 * with no message for the next timed-out receive: without a guard, a
 * reply that was never there.)
 */
static void
test_backoff_then_reply(void **state)
{
    harness *h = *state;
    once_client *a;
    once_rpc_id id = {0, 0};
    once_status st;
    background bg;
    pthread_t t;
    bool returned;
    int64_t v;

    memset(&bg, 0, sizeof(bg));
    a = open_retrying(h, false, 150, 40, 60, 20000);
    assert_int_equal(incr(a, "backoff-warm", 1, &id, &v, &st), ONCE_OK);

    harness_pause(h);
    bg.c = a;
    bg.name = "backoff";
    if (pthread_create(&t, NULL, background_main, &bg) != 0) {
        kill(h->pid, SIGCONT);
        fail_msg("pthread_create");
    }
    /* onced stays stopped until two attempts have reached its socket
     * (the unread bytes grew twice), however slow the machine. */
    {
        int64_t end = harness_now_ms() + 30000;
        long last = 0, now = 0;
        int grew = 0;

        while (grew < 2 && harness_now_ms() < end &&
               (now = queued_bytes(h->pid)) >= 0) {
            if (now > last) {
                grew++;
                last = now;
            }
            harness_sleep_ms(5);
        }
        if (now < 0) {
            /* Cannot look (no pidfd_getfd here): the attempts time out
             * by themselves; 600 ms is three attempts on a quiet machine. */
            print_message("  (cannot read onced's socket queue: waiting "
                          "600 ms instead)\n");
            harness_sleep_ms(600);
        } else if (grew < 2) {
            kill(h->pid, SIGCONT);
            fail_msg("after 30 s, %d attempt(s) reached the stopped onced",
                     grew);
        }
    }
    kill(h->pid, SIGCONT);
    returned = background_wait(&bg, 30000);
    pthread_join(t, NULL);
    print_message("call across the stop: %s %s after %u attempt(s)%s\n",
                  once_strerror(bg.rv), bg.st.reason, bg.st.attempts,
                  bg.st.replayed ? ", replayed" : "");
    assert_true(returned);
    assert_int_equal(bg.rv, ONCE_OK);
    assert_int_equal(bg.value, BY);
    assert_true(bg.st.attempts >= 2);
    assert_int_equal(bg.id.client_id, once_client_id(a));
    assert_int_equal(bg.id.seq, id.seq + 1); /* one seq for all attempts */
    assert_int_equal(harness_get(a, "backoff"), BY);

    /* The slot that slept is kept and reused: the next call is one
     * attempt, a new execution. */
    id = (once_rpc_id){0, 0};
    assert_int_equal(incr(a, "backoff", BY, &id, &v, &st), ONCE_OK);
    assert_int_equal(v, 2 * BY);
    assert_false(st.replayed);
    assert_int_equal(st.attempts, 1);
    assert_int_equal(harness_get(a, "backoff"), 2 * BY);
    once_client_close(a);
}

/*
 * With onced down, every send of a call times out (100 ms attempts, 4 of
 * them, backoffs between): it ends UNAVAILABLE/NOT_SENT with 0 attempts.
 * That is the truth: after a restart the counter is untouched and the same
 * id executes for the first time. (With the backoff sleeping on the aio
 * that also sends, nng 1.5 said 0 for the next timed-out send with the
 * message still on the aio: without a guard, an attempt counted as sent,
 * and the call ended OUTCOME_UNKNOWN.)
 */
static void
test_backoff_not_sent(void **state)
{
    harness *h = *state;
    once_client *a = NULL, *c;
    once_status st;
    uint64_t cid = 0, ttl = 0;
    int64_t v;
    int rv;

    assert_int_equal(harness_client(h, true, &a), ONCE_OK);
    assert_int_equal(once_lease_open(a, NULL, 120000, &cid, &ttl, &st),
                     ONCE_OK);
    once_client_close(a);
    a = NULL;
    assert_int_not_equal(harness_kill(h, SIGKILL), -1);

    c = open_retrying(h, true, 100, 20, 4, 10000);
    rv = harness_incr_id(c, "unsent", BY, cid, 1, &v, &st);
    print_message("call with onced down: %s %s after %u attempt(s): %s\n",
                  once_strerror(rv), st.reason, st.attempts, st.message);
    assert_int_equal(rv, ONCE_UNAVAILABLE);
    assert_string_equal(st.reason, "NOT_SENT");
    assert_int_equal(st.attempts, 0);
    once_client_close(c);

    assert_int_equal(harness_restart(h), 0);
    assert_int_equal(harness_client(h, true, &a), ONCE_OK);
    assert_int_equal(harness_get(a, "unsent"), 0);
    assert_int_equal(harness_incr_id(a, "unsent", BY, cid, 1, &v, &st),
                     ONCE_OK);
    assert_int_equal(v, BY);
    assert_false(st.replayed);
    assert_int_equal(harness_get(a, "unsent"), BY);
    once_client_close(a);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_resend_same_id,
                                        harness_setup_no_gc, harness_teardown),
        cmocka_unit_test_setup_teardown(test_resend_after_sigkill,
                                        harness_setup_no_gc, harness_teardown),
        cmocka_unit_test_setup_teardown(test_same_handle_across_crashes,
                                        harness_setup_no_gc, harness_teardown),
        cmocka_unit_test_setup_teardown(test_resend_after_ack_is_stale,
                                        harness_setup_no_gc, harness_teardown),
        cmocka_unit_test_setup_teardown(test_resend_after_lease_end,
                                        harness_setup_no_gc, harness_teardown),
        cmocka_unit_test_setup_teardown(test_sigkill_in_flight,
                                        harness_setup_no_gc, harness_teardown),
        cmocka_unit_test_setup_teardown(test_backoff_then_reply,
                                        harness_setup_no_gc, harness_teardown),
        cmocka_unit_test_setup_teardown(test_backoff_not_sent,
                                        harness_setup_no_gc, harness_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
