/*
 * test_leases.c — leases and acknowledgements end to end (docs/spec.md):
 * live leases survive a restart with their records replayable; a lost
 * lease ends libonce's calls in flight as OUTCOME_UNKNOWN and fails new
 * ones without sending; a spell of NO_LEADER refusals shorter than the TTL
 * (a replicated cluster's election) does not cost the lease; STALE_RPC,
 * WINDOW_FULL and BAD_ACK refuse a call before it runs and write nothing;
 * a lease LeaseInfo reported EXPIRED stays ended across a restart; RenewLeases
 * renews many leases in one message, answers each id on its own and renews only
 * the caller's.
 *
 * Owns: those checks against a real onced (SIGKILL + restart, SIGSTOP /
 * SIGCONT, --window 4, principals added with the real oncectl, a
 * follower's responder from repl/notleader.c in onced's place), through
 * libonce and through raw envelopes that carry a chosen first_incomplete.
 * Invariant: every effect is a counter increment, so a call that ran twice
 * (or under a new id) shows; every loop is bounded in count and in time;
 * cmocka assertions only on the test's own thread; a SIGSTOPped onced is
 * always continued before the test asserts anything.
 * Never: mocks anything; never relies on a fixed sleep where a condition
 * can be polled.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "repl/repl_impl.h"
#include "tests/harness.h"

#define POLL_MAX_MS  10000
#define POLL_STEP_MS 20
#define LOSS_TTL_MS                                                            \
    1500                      /* the lease of the handles whose lease is lost; \
                                 long enough that a busy CI machine still      \
                                 renews it in time before the test stops       \
                                 onced */
#define LOSS_ATTEMPT_MS 20000 /* an attempt waits this long for a reply... */
#define LOSS_PROMPT_MS  5000  /* ...but a lost lease ends it well before */
#define BY              7     /* a distinctive increment */

static const char *const gc_fast[] = {"--gc-interval", "50ms", NULL};
static const char *const window4[] = {"--window", "4", NULL};

static int
setup_fast_gc(void **state)
{
    return harness_setup_args(state, gc_fast);
}

static int
setup_window4(void **state)
{
    return harness_setup_args(state, window4);
}

/* The seqs the server holds records of for cid (at most max), per
 * ListRecords; returns how many. */
static size_t
record_seqs(once_client *c, uint64_t cid, uint64_t *seqs, size_t max)
{
    once_record_list *l = NULL;
    once_status st;
    size_t n;
    int rv = once_admin_list_records(c, cid, 10000, &l, &st);
    if (rv != ONCE_OK) {
        print_error("once_admin_list_records(%llu): %s %s %s\n",
                    (unsigned long long)cid, once_strerror(rv), st.reason,
                    st.message);
    }
    assert_int_equal(rv, ONCE_OK);
    n = l->n_records;
    for (size_t i = 0; i < n && i < max; i++) {
        assert_int_equal(l->records[i].client_id, cid);
        seqs[i] = l->records[i].seq;
    }
    once_free(l);
    return n;
}

/* A libonce handle with its own lease of ttl_ms, whose attempts wait
 * attempt_ms for a reply within deadline_ms. */
static once_client *
open_client(const harness *h, bool no_lease, uint64_t ttl_ms,
            uint32_t deadline_ms, uint32_t attempt_ms)
{
    once_options o;
    once_client *c = NULL;
    once_status st;
    int rv;

    once_options_init(&o);
    o.url = h->url;
    o.no_lease = no_lease;
    o.lease_ttl_ms = ttl_ms;
    o.deadline_ms = deadline_ms;
    o.attempt_timeout_ms = attempt_ms;
    if ((rv = once_client_open(&c, &o, &st)) != ONCE_OK) {
        print_error("once_client_open: %s %s %s\n", once_strerror(rv),
                    st.reason, st.message);
    }
    assert_int_equal(rv, ONCE_OK);
    return c;
}

/* Polls Stats until the collector ran n more passes (bounded). */
static void
wait_gc_passes(once_client *c, uint64_t n)
{
    once_stats s;
    once_collector_stats c0, c1;

    harness_collector_stats(c, &s, &c0);
    c1 = c0;
    for (int i = 0; i < POLL_MAX_MS / POLL_STEP_MS; i++) {
        harness_collector_stats(c, &s, &c1);
        if (c1.gc_passes >= c0.gc_passes + n) {
            break;
        }
        harness_sleep_ms(POLL_STEP_MS);
    }
    assert_true(c1.gc_passes >= c0.gc_passes + n);
}

/* ---- raw envelopes with a chosen first_incomplete ---------------------- */

/* Increment(name, by) as cid:seq carrying first_incomplete fi; *rp is the
 * Response (free with once__v1__response__free_unpacked). */
static void
raw_incr(const harness *h, uint64_t cid, uint64_t seq, uint64_t fi,
         const char *name, int64_t by, Once__V1__Response **rp)
{
    uint8_t *payload = NULL, *buf = NULL;
    size_t plen, len;

    assert_int_equal(harness_incr_payload(name, by, &payload, &plen), 0);
    assert_int_equal(harness_envelope_fi("/once.v1.Counter/Increment", cid, seq,
                                         fi, payload, plen, &buf, &len),
                     0);
    assert_int_equal(harness_raw_rpc(h->url, buf, len, rp, 5000), 0);
    free(buf);
    free(payload);
}

static int
resp_code(const Once__V1__Response *r)
{
    return r->status != NULL ? (int)r->status->code : ONCE_OK;
}

static const char *
resp_reason(const Once__V1__Response *r)
{
    return r->status != NULL && r->status->reason != NULL ? r->status->reason
                                                          : "";
}

/* Sends the raw call and checks its code and reason. */
static void
raw_expect(const harness *h, uint64_t cid, uint64_t seq, uint64_t fi,
           const char *name, int code, const char *reason)
{
    Once__V1__Response *r = NULL;

    raw_incr(h, cid, seq, fi, name, BY, &r);
    if (resp_code(r) != code || strcmp(resp_reason(r), reason) != 0) {
        print_error("raw %llu:%llu fi %llu: code %d %s, expected %d %s\n",
                    (unsigned long long)cid, (unsigned long long)seq,
                    (unsigned long long)fi, resp_code(r), resp_reason(r), code,
                    reason);
    }
    assert_int_equal(resp_code(r), code);
    assert_string_equal(resp_reason(r), reason);
    assert_false(r->replayed);
    once__v1__response__free_unpacked(r, NULL);
}

/* ---- c) a restart keeps live leases and their records ----------------- */

static void
test_restart_keeps_live_leases(void **state)
{
    harness *h = *state;
    once_client *a = NULL, *b = NULL;
    once_rpc_id ids[3];
    struct once_lease_info li;
    once_status st;
    uint64_t cid = 0, ttl = 0, seqs[8];
    int64_t v;

    /* A libonce handle: it acknowledges as it goes, so only its last seq
     * is certain to be kept. */
    assert_int_equal(harness_client(h, false, &a), ONCE_OK);
    for (int i = 0; i < 3; i++) {
        ids[i] = (once_rpc_id){0, 0};
        assert_int_equal(once_counter_incr(a, "c-lib", BY, &ids[i], &v, &st),
                         ONCE_OK);
        assert_int_equal(v, (i + 1) * BY);
    }
    /* An explicit lease with explicit ids: nothing acknowledged, so every
     * record must be kept while the lease lives. */
    assert_int_equal(harness_client(h, true, &b), ONCE_OK);
    assert_int_equal(once_lease_open(b, NULL, 120000, &cid, &ttl, &st),
                     ONCE_OK);
    for (uint64_t s = 1; s <= 3; s++) {
        assert_int_equal(harness_incr_id(b, "c-explicit", BY, cid, s, &v, &st),
                         ONCE_OK);
        assert_int_equal(v, (int64_t)s * BY);
    }
    wait_gc_passes(b, 3); /* a collector that deletes live records has run */

    assert_int_not_equal(harness_kill(h, SIGKILL), -1);
    assert_int_equal(harness_restart(h), 0);
    wait_gc_passes(b, 3);

    harness_lease_info(b, cid, &li);
    assert_int_equal(li.state, ONCE_LEASE_STATE_LIVE);
    assert_int_equal(li.records_retained, 3);
    assert_int_equal(record_seqs(b, cid, seqs, 8), 3);
    harness_lease_info(b, once_client_id(a), &li);
    assert_int_equal(li.state, ONCE_LEASE_STATE_LIVE);
    /* Client ids are never reused across the restart (docs/spec.md). */
    {
        uint64_t fresh = 0;
        assert_int_equal(once_lease_open(b, NULL, 120000, &fresh, &ttl, &st),
                         ONCE_OK);
        assert_true(fresh > cid && fresh > once_client_id(a));
    }

    for (uint64_t s = 1; s <= 3; s++) {
        assert_int_equal(harness_incr_id(b, "c-explicit", BY, cid, s, &v, &st),
                         ONCE_OK);
        assert_true(st.replayed);
        assert_int_equal(v, (int64_t)s * BY);
    }
    assert_int_equal(harness_get(b, "c-explicit"), 3 * BY);

    /* a's last call was never acknowledged: it replays. Its earlier ones
     * were: each replays or is STALE_RPC, and never runs again. */
    assert_int_equal(
        harness_incr_id(b, "c-lib", BY, ids[2].client_id, ids[2].seq, &v, &st),
        ONCE_OK);
    assert_true(st.replayed);
    assert_int_equal(v, 3 * BY);
    for (int i = 0; i < 2; i++) {
        int rv = harness_incr_id(b, "c-lib", BY, ids[i].client_id, ids[i].seq,
                                 &v, &st);
        if (rv == ONCE_OK) {
            assert_true(st.replayed);
            assert_int_equal(v, (i + 1) * BY);
        } else {
            assert_int_equal(rv, ONCE_FAILED_PRECONDITION);
            assert_string_equal(st.reason, "STALE_RPC");
        }
    }
    assert_int_equal(harness_get(b, "c-lib"), 3 * BY);

    /* And a's lease is still its own: new calls run. */
    assert_int_equal(once_counter_incr(a, "c-lib", BY, NULL, &v, &st), ONCE_OK);
    assert_false(st.replayed);
    assert_int_equal(v, 4 * BY);
    assert_int_not_equal(once_client_lease_state(a), ONCE_CLIENT_LEASE_LOST);
    once_client_close(a);
    once_client_close(b);
}

/* ---- d) a lost lease ends calls in flight ----------------------------- */

typedef struct lost_seen {
    atomic_int calls;
    uint64_t client_id;
    char reason[64];
    char message[256];
} lost_seen;

static void
on_lost(once_client *c, uint64_t client_id, const once_status *why, void *arg)
{
    lost_seen *ls = arg;

    (void)c;
    ls->client_id = client_id;
    snprintf(ls->reason, sizeof(ls->reason), "%s", why->reason);
    snprintf(ls->message, sizeof(ls->message), "%s", why->message);
    atomic_fetch_add(&ls->calls, 1);
}

/* The lease-lost callback runs just after the state turns LOST (outside
 * the handle's lock): waits, bounded, until it has run, and returns how
 * many times it ran. */
static int
lost_calls(lost_seen *ls)
{
    for (int i = 0; i < POLL_MAX_MS / POLL_STEP_MS; i++) {
        if (atomic_load(&ls->calls) > 0) {
            break;
        }
        harness_sleep_ms(POLL_STEP_MS);
    }
    return atomic_load(&ls->calls);
}

typedef struct inflight {
    once_client *c;
    const char *name;
    once_rpc_id id;
    int rv;
    once_status st;
    int64_t elapsed_ms;
    atomic_int done;
} inflight;

static void *
inflight_main(void *arg)
{
    inflight *f = arg;
    int64_t t0 = harness_now_ms(), v;

    f->rv = once_counter_incr(f->c, f->name, 1, &f->id, &v, &f->st);
    f->elapsed_ms = harness_now_ms() - t0;
    atomic_store(&f->done, 1);
    return NULL;
}

/* Waits (bounded) for the in-flight call to return; true when it did. */
static bool
inflight_wait(inflight *f, int ms)
{
    int64_t deadline = harness_now_ms() + ms;

    for (int i = 0; i < ms / 10 + 1 && harness_now_ms() < deadline; i++) {
        if (atomic_load(&f->done)) {
            return true;
        }
        harness_sleep_ms(10);
    }
    return atomic_load(&f->done) != 0;
}

/* The lease is lost: new mutating calls under it fail at once, sending
 * nothing (the server's request count does not move). */
static void
expect_fail_fast(once_client *a, once_client *b, const char *name)
{
    once_stats s0, s1;
    once_collector_stats c0, c1;
    once_status st;
    int64_t v;
    int64_t t0;

    /* Requests sent before the loss may still be reaching onced (a server
     * that was SIGSTOPped works off its backlog after SIGCONT): wait until
     * only our own Stats calls move the count (bounded: 5 s). */
    harness_collector_stats(b, &s0, &c0);
    for (int i = 0; i < 100; i++) {
        harness_sleep_ms(50);
        harness_collector_stats(b, &s1, &c1);
        if (s1.requests == s0.requests + 1) {
            s0 = s1;
            break;
        }
        s0 = s1;
    }
    t0 = harness_now_ms();
    assert_int_equal(once_counter_incr(a, name, 1, NULL, &v, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "LEASE_EXPIRED");
    assert_int_equal(st.attempts, 0);
    /* An explicit retry of the handle's own id: the same. */
    assert_int_equal(harness_incr_id(a, name, 1, once_client_id(a), 1, &v, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "LEASE_EXPIRED");
    assert_int_equal(st.attempts, 0);
    assert_true(harness_now_ms() - t0 < 1000);
    harness_collector_stats(b, &s1, &c1);
    assert_int_equal(s1.requests, s0.requests + 1); /* the second Stats */
}

static void
test_stopped_server_ends_inflight(void **state)
{
    harness *h = *state;
    once_client *a, *b = NULL;
    lost_seen ls;
    inflight f;
    pthread_t t;
    once_status st;
    uint64_t seqs[8];
    size_t n;
    bool returned;
    int64_t v;

    memset(&ls, 0, sizeof(ls));
    memset(&f, 0, sizeof(f));
    a = open_client(h, false, LOSS_TTL_MS, 60000, LOSS_ATTEMPT_MS);
    once_client_on_lease_lost(a, on_lost, &ls);
    assert_int_equal(once_client_lease_state(a), ONCE_CLIENT_LEASE_LIVE);
    assert_int_equal(once_counter_incr(a, "d-stop", 1, NULL, &v, &st), ONCE_OK);
    assert_int_equal(v, 1);

    /* onced stops answering anything: renewals and the call hang. */
    harness_pause(h);
    f.c = a;
    f.name = "d-stop-inflight";
    if (pthread_create(&t, NULL, inflight_main, &f) != 0) {
        kill(h->pid, SIGCONT);
        fail_msg("pthread_create");
    }
    returned = inflight_wait(&f, 3 * LOSS_PROMPT_MS);
    kill(h->pid, SIGCONT);
    if (!returned) {
        /* Without the loss the attempt timeout would end it; join then. */
        inflight_wait(&f, 2 * LOSS_ATTEMPT_MS);
    }
    pthread_join(t, NULL);
    print_message("in-flight call ended after %lld ms: %s %s (%u attempt(s))\n",
                  (long long)f.elapsed_ms, once_strerror(f.rv), f.st.reason,
                  f.st.attempts);
    assert_true(returned);
    assert_int_equal(f.rv, ONCE_UNKNOWN);
    assert_string_equal(f.st.reason, "OUTCOME_UNKNOWN");
    assert_true(f.st.attempts >= 1);
    assert_true(f.elapsed_ms < LOSS_PROMPT_MS);
    assert_int_equal(f.id.client_id, once_client_id(a));

    assert_int_equal(once_client_lease_state(a), ONCE_CLIENT_LEASE_LOST);
    assert_int_equal(lost_calls(&ls), 1);
    assert_int_equal(ls.client_id, once_client_id(a));
    assert_string_equal(ls.reason, "LEASE_EXPIRED");

    assert_int_equal(harness_client(h, true, &b), ONCE_OK);
    expect_fail_fast(a, b, "d-stop");
    /* The server saw at most the one rpc id of the in-flight call: the
     * counter moved at most once, and no record exists under any seq but
     * the two this handle used. */
    assert_true(harness_get(b, "d-stop-inflight") <= 1);
    assert_int_equal(harness_get(b, "d-stop"), 1);
    n = record_seqs(b, once_client_id(a), seqs, 8);
    assert_true(n <= 2);
    for (size_t i = 0; i < n; i++) {
        assert_true(seqs[i] == 1 || seqs[i] == f.id.seq);
    }
    once_client_close(a);
    once_client_close(b);
}

/*
 * The same with the calls in their backoff rather than waiting for a
 * reply: attempts of 100 ms, backoffs of up to 60 s, onced stopped. The
 * loss cancels the sleeps (each on an aio of its own, tracked with its
 * call), so every call ends within LOSS_PROMPT_MS, not at the end of its
 * backoff. (The backoff is jittered: the loss finds a call asleep with
 * more than LOSS_PROMPT_MS of it left about nine times in ten, so with
 * BACKOFF_CALLS calls a loss that left sleeps running fails the test
 * almost surely.)
 */
#define BACKOFF_CALLS 4

static void
test_stopped_server_ends_backoff(void **state)
{
    harness *h = *state;
    once_client *a, *b = NULL;
    once_options o;
    lost_seen ls;
    inflight f[BACKOFF_CALLS];
    pthread_t t[BACKOFF_CALLS];
    once_status st;
    bool returned = true;
    int started = 0;
    int64_t v;

    memset(&ls, 0, sizeof(ls));
    memset(f, 0, sizeof(f));
    once_options_init(&o);
    o.url = h->url;
    o.lease_ttl_ms = LOSS_TTL_MS;
    o.deadline_ms = 120000;
    o.attempt_timeout_ms = 100;
    o.max_attempts = 10;
    o.backoff_initial_ms = 60000;
    o.backoff_max_ms = 60000;
    assert_int_equal(once_client_open(&a, &o, &st), ONCE_OK);
    once_client_on_lease_lost(a, on_lost, &ls);
    assert_int_equal(once_counter_incr(a, "d-sleep", 1, NULL, &v, &st),
                     ONCE_OK);

    harness_pause(h);
    for (; started < BACKOFF_CALLS; started++) {
        f[started].c = a;
        f[started].name = "d-sleep-inflight";
        if (pthread_create(&t[started], NULL, inflight_main, &f[started]) !=
            0) {
            break;
        }
    }
    for (int i = 0; i < started; i++) {
        returned = inflight_wait(&f[i], 3 * LOSS_PROMPT_MS) && returned;
    }
    kill(h->pid, SIGCONT);
    for (int i = 0; i < started; i++) {
        inflight_wait(&f[i], 70000); /* a sleep left running: <= 60 s */
        pthread_join(t[i], NULL);
        print_message("call %d in its backoff ended after %lld ms: %s %s "
                      "(%u attempt(s))\n",
                      i, (long long)f[i].elapsed_ms, once_strerror(f[i].rv),
                      f[i].st.reason, f[i].st.attempts);
    }
    assert_int_equal(started, BACKOFF_CALLS);
    assert_true(returned);
    for (int i = 0; i < BACKOFF_CALLS; i++) {
        assert_int_equal(f[i].rv, ONCE_UNKNOWN);
        assert_string_equal(f[i].st.reason, "OUTCOME_UNKNOWN");
        assert_true(f[i].st.attempts >= 1);
        assert_true(f[i].elapsed_ms < LOSS_PROMPT_MS);
    }
    assert_int_equal(once_client_lease_state(a), ONCE_CLIENT_LEASE_LOST);
    assert_int_equal(lost_calls(&ls), 1);

    assert_int_equal(harness_client(h, true, &b), ONCE_OK);
    expect_fail_fast(a, b, "d-sleep");
    /* Each call ran at most once. */
    assert_true(harness_get(b, "d-sleep-inflight") <= BACKOFF_CALLS);
    assert_int_equal(harness_get(b, "d-sleep"), 1);
    once_client_close(a);
    once_client_close(b);
}

/*
 * A spell without a leader shorter than the lease's TTL: the lease
 * survives. onced is SIGKILLed and in its place a follower's responder
 * (repl/notleader.c, in this process) refuses every request
 * UNAVAILABLE/NO_LEADER at once, as a replicated cluster does during an
 * election; onced comes back (a restart gives live leases a fresh TTL, as
 * a new leader does) spell_back_ms() before the end of the TTL the handle
 * last heard of. Its renewals must reach it in that time: one attempt per
 * renewal (max_attempts 1) makes every refusal instant, so the renewal
 * thread's own spacing is all there is. Without retrying a refused renewal
 * soon (it waited TTL/6, and never tried in the last TTL/6 before the end),
 * the handle declared its lease lost at the end of the TTL although onced
 * held it live — the leases bench_failover saw lost at S = 5 s.
 */
/* onced SIGKILLed, a follower's responder answering NO_LEADER on its
 * address: a replicated cluster in an election, to its clients. Close it
 * with notleader_close before harness_restart. */
static notleader *
leaderless_begin(harness *h)
{
    const char *urls[1] = {h->url};
    notleader *nl = NULL;

    assert_true(harness_kill(h, SIGKILL) >= 0);
    unlink(h->path); /* the killed onced's socket file */
    assert_int_equal(notleader_open(&nl, urls, 1, NULL, NULL, NULL), 0);
    return nl;
}

/* The lease's TTL: renewals every TTL/3, the old retries TTL/6 apart.
 * Under a wrapper (valgrind) onced takes seconds to start again, so the
 * TTL, and with it the time onced is back before its end, is longer. */
static int64_t
spell_ttl_ms(void)
{
    return getenv("ONCE_TEST_ONCED_WRAPPER") != NULL ? 60000 : 24000;
}

/* onced is back this long before the TTL's end: just after the old code's
 * last retry (TTL - TTL/6; 3.7 s at 24 s, time for a sanitized onced to
 * start). */
static int64_t
spell_back_ms(void)
{
    return spell_ttl_ms() / 6 - 300;
}

static void
test_leaderless_spell_keeps_lease(void **state)
{
    harness *h = *state;
    notleader *nl;
    once_client *a, *b = NULL;
    struct once_lease_info info;
    once_options o;
    once_status st;
    lost_seen ls;
    int64_t t0, back, end;
    int state_at_back, state_after;
    int64_t v;

    memset(&ls, 0, sizeof(ls));
    once_options_init(&o);
    o.url = h->url;
    o.lease_ttl_ms = (uint32_t)spell_ttl_ms();
    o.max_attempts = 1;
    assert_int_equal(once_client_open(&a, &o, &st), ONCE_OK);
    t0 = harness_now_ms(); /* the handle's TTL runs from before this */
    once_client_on_lease_lost(a, on_lost, &ls);
    assert_int_equal(once_counter_incr(a, "spell", 1, NULL, &v, &st), ONCE_OK);

    nl = leaderless_begin(h);
    back = t0 + spell_ttl_ms() - spell_back_ms();
    while (harness_now_ms() < back &&
           once_client_lease_state(a) != ONCE_CLIENT_LEASE_LOST) {
        harness_sleep_ms(POLL_STEP_MS);
    }
    state_at_back = once_client_lease_state(a);
    notleader_close(nl);
    assert_int_equal(harness_restart(h), 0);

    /* Renewed (LIVE) or lost, bounded by the TTL's end and a margin. */
    end = t0 + spell_ttl_ms() + 5000;
    while (harness_now_ms() < end &&
           once_client_lease_state(a) == ONCE_CLIENT_LEASE_FAILING) {
        harness_sleep_ms(POLL_STEP_MS);
    }
    state_after = once_client_lease_state(a);
    assert_int_equal(harness_client(h, true, &b), ONCE_OK);
    assert_int_equal(once_lease_info(b, once_client_id(a), &info, &st),
                     ONCE_OK);
    print_message("handle's lease state %d when onced came back %lld ms after "
                  "the open, %d %lld ms after the open; onced's: %s\n",
                  state_at_back, (long long)(back - t0), state_after,
                  (long long)(harness_now_ms() - t0),
                  once_lease_state_name(info.state));
    assert_int_equal(info.state, ONCE_LEASE_STATE_LIVE);
    assert_int_equal(state_at_back, ONCE_CLIENT_LEASE_FAILING);
    assert_int_equal(state_after, ONCE_CLIENT_LEASE_LIVE);
    assert_int_equal(atomic_load(&ls.calls), 0);
    /* onced agrees: the handle's next call runs under the same id. */
    assert_int_equal(once_counter_incr(a, "spell", 1, NULL, &v, &st), ONCE_OK);
    assert_int_equal(v, 2);
    once_client_close(a);
    once_client_close(b);
}

/*
 * The contract when the spell outlasts the TTL: the lease is lost at the
 * end of the TTL the handle last heard of, whatever a new leader would
 * say, and the loss says a failover outlasted the TTL (the operator's cue
 * to choose a longer one, docs/replication.md); new calls then fail
 * LEASE_EXPIRED without sending.
 */
static void
test_leaderless_past_ttl_loses_lease(void **state)
{
    harness *h = *state;
    notleader *nl;
    once_client *a;
    once_status st;
    lost_seen ls;
    int64_t v;

    memset(&ls, 0, sizeof(ls));
    a = open_client(h, false, LOSS_TTL_MS, 10000, 1000);
    once_client_on_lease_lost(a, on_lost, &ls);
    nl = leaderless_begin(h);
    for (int i = 0; i < POLL_MAX_MS / POLL_STEP_MS &&
                    once_client_lease_state(a) != ONCE_CLIENT_LEASE_LOST;
         i++) {
        harness_sleep_ms(POLL_STEP_MS);
    }
    notleader_close(nl);
    assert_int_equal(once_client_lease_state(a), ONCE_CLIENT_LEASE_LOST);
    assert_int_equal(lost_calls(&ls), 1);
    print_message("lost: %s %s\n", ls.reason, ls.message);
    assert_string_equal(ls.reason, "LEASE_EXPIRED");
    assert_non_null(strstr(ls.message, "outlasted the lease's TTL"));
    assert_int_equal(once_counter_incr(a, "past", 1, NULL, &v, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "LEASE_EXPIRED");
    assert_int_equal(st.attempts, 0);
    once_client_close(a);
}

static void
test_closed_lease_fails_fast(void **state)
{
    harness *h = *state;
    once_client *a, *b = NULL;
    lost_seen ls, late;
    once_status st;
    uint64_t retained = 0;
    int64_t v;
    int i;

    memset(&ls, 0, sizeof(ls));
    memset(&late, 0, sizeof(late));
    a = open_client(h, false, LOSS_TTL_MS, 10000, 2000);
    once_client_on_lease_lost(a, on_lost, &ls);
    assert_int_equal(once_counter_incr(a, "d-close", 1, NULL, &v, &st),
                     ONCE_OK);

    /* Another handle ends a's lease; a's next renewal learns it. */
    assert_int_equal(harness_client(h, true, &b), ONCE_OK);
    assert_int_equal(once_lease_close(b, once_client_id(a), &retained, &st),
                     ONCE_OK);
    assert_int_equal(retained, 1);
    for (i = 0; i < POLL_MAX_MS / POLL_STEP_MS; i++) {
        if (once_client_lease_state(a) == ONCE_CLIENT_LEASE_LOST) {
            break;
        }
        harness_sleep_ms(POLL_STEP_MS);
    }
    assert_int_equal(once_client_lease_state(a), ONCE_CLIENT_LEASE_LOST);
    assert_int_equal(lost_calls(&ls), 1);
    assert_string_equal(ls.reason, "LEASE_EXPIRED");

    expect_fail_fast(a, b, "d-close");
    assert_int_equal(harness_get(b, "d-close"), 1);

    /* A callback runs at most once per handle: one set after it ran does
     * not run, and the first never runs again. */
    once_client_on_lease_lost(a, on_lost, &late);
    assert_int_equal(atomic_load(&late.calls), 0);
    assert_int_equal(atomic_load(&ls.calls), 1);

    /* Closing or renewing an ended lease: OK and LEASE_EXPIRED. */
    assert_int_equal(once_lease_close(b, once_client_id(a), NULL, &st),
                     ONCE_OK);
    assert_int_equal(once_lease_renew(b, once_client_id(a), NULL, NULL, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "LEASE_EXPIRED");
    /* An id never issued. */
    assert_int_equal(once_lease_close(b, UINT64_C(1) << 40, NULL, &st),
                     ONCE_NOT_FOUND);
    assert_string_equal(st.reason, "UNKNOWN_CLIENT");
    once_client_close(a);
    once_client_close(b);
}

/* once_client_close ends the lease when nothing is incomplete. */
static void
test_close_ends_lease(void **state)
{
    harness *h = *state;
    once_client *a = NULL, *b = NULL;
    struct once_lease_info li;
    once_rpc_id id = {0, 0};
    once_status st;
    uint64_t cid, ttl = 0, remaining = 0;
    int64_t v;

    assert_int_equal(harness_client(h, false, &a), ONCE_OK);
    assert_int_equal(harness_client(h, true, &b), ONCE_OK);
    cid = once_client_id(a);
    assert_int_equal(once_counter_incr(a, "close", BY, &id, &v, &st), ONCE_OK);
    assert_int_equal(once_lease_renew(a, 0, &ttl, &remaining, &st), ONCE_OK);
    assert_int_equal(ttl, 120000);
    assert_true(remaining > 0 && remaining <= ttl);
    harness_lease_info(b, cid, &li);
    assert_int_equal(li.state, ONCE_LEASE_STATE_LIVE);
    assert_int_equal(li.max_seq, id.seq);
    once_client_close(a);

    harness_lease_info(b, cid, &li);
    assert_true(li.state == ONCE_LEASE_STATE_CLOSED ||
                li.state == ONCE_LEASE_STATE_COLLECTED);
    assert_int_equal(
        harness_incr_id(b, "close", BY, id.client_id, id.seq, &v, &st),
        ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "LEASE_EXPIRED");
    assert_int_equal(harness_get(b, "close"), BY);
    once_client_close(b);
}

/* ---- e) refusals before execution write nothing ----------------------- */

static void
test_window_full(void **state)
{
    harness *h = *state;
    once_client *a;
    once_stats s0, s1;
    once_collector_stats c0, c1;
    once_status st;
    uint64_t cid = 0, ttl = 0, seqs[8];
    int64_t v;

    /* Lease-less handle, explicit ids: first_incomplete is 0, nothing is
     * ever acknowledged. A short deadline bounds the WINDOW_FULL retries. */
    a = open_client(h, true, 0, 500, 200);
    assert_int_equal(once_lease_open(a, NULL, 120000, &cid, &ttl, &st),
                     ONCE_OK);
    /* --window 4: four unacknowledged calls are allowed... */
    for (uint64_t s = 1; s <= 4; s++) {
        int rv = harness_incr_id(a, "e-window", 1, cid, s, &v, &st);
        if (rv != ONCE_OK) {
            print_error("seq %llu of 4 allowed: %s %s %s\n",
                        (unsigned long long)s, once_strerror(rv), st.reason,
                        st.message);
        }
        assert_int_equal(rv, ONCE_OK);
        assert_int_equal(v, (int64_t)s);
    }
    /* ...the fifth is refused, retried within the deadline, and never
     * runs. */
    harness_collector_stats(a, &s0, &c0);
    assert_int_equal(harness_incr_id(a, "e-window", 1, cid, 5, &v, &st),
                     ONCE_RESOURCE_EXHAUSTED);
    assert_string_equal(st.reason, "WINDOW_FULL");
    assert_true(st.attempts >= 2);
    harness_collector_stats(a, &s1, &c1);
    assert_int_equal(s1.commits, s0.commits);
    assert_int_equal(s1.records_stored, s0.records_stored);
    assert_true(c1.window_full >= c0.window_full + st.attempts);
    assert_int_equal(harness_get(a, "e-window"), 4);
    assert_int_equal(record_seqs(a, cid, seqs, 8), 4);
    once_client_close(a);
}

static void
test_stale_and_bad_ack(void **state)
{
    harness *h = *state;
    once_client *a = NULL;
    Once__V1__Response *r = NULL;
    Once__V1__IncrementResponse *ir;
    struct once_lease_info li;
    once_stats s0, s1;
    once_collector_stats c0, c1;
    once_status st;
    uint64_t cid = 0, ttl = 0, seqs[8];
    int64_t v;
    int i;

    assert_int_equal(harness_client(h, true, &a), ONCE_OK);
    assert_int_equal(once_lease_open(a, NULL, 120000, &cid, &ttl, &st),
                     ONCE_OK);
    for (uint64_t s = 1; s <= 3; s++) {
        assert_int_equal(harness_incr_id(a, "e-ack", BY, cid, s, &v, &st),
                         ONCE_OK);
        assert_int_equal(v, (int64_t)s * BY);
    }
    /* Seq 3 again, acknowledging 1 and 2: a replay that raises the
     * watermark to 3. */
    raw_incr(h, cid, 3, 3, "e-ack", BY, &r);
    assert_int_equal(resp_code(r), ONCE_OK);
    assert_true(r->replayed);
    ir = once__v1__increment_response__unpack(NULL, r->payload.len,
                                              r->payload.data);
    assert_non_null(ir);
    assert_int_equal(ir->value, 3 * BY);
    once__v1__increment_response__free_unpacked(ir, NULL);
    once__v1__response__free_unpacked(r, NULL);

    /* The collector reclaims 1 and 2 with the watermark in the same
     * batch; wait for that so the commit count below is ours alone. */
    memset(&li, 0, sizeof(li));
    for (i = 0; i < POLL_MAX_MS / POLL_STEP_MS; i++) {
        harness_lease_info(a, cid, &li);
        if (li.watermark_durable == 3) {
            break;
        }
        harness_sleep_ms(POLL_STEP_MS);
    }
    assert_int_equal(li.watermark, 3);
    assert_int_equal(li.watermark_durable, 3);
    assert_int_equal(record_seqs(a, cid, seqs, 8), 1);
    assert_int_equal(seqs[0], 3);
    harness_collector_stats(a, &s0, &c0);

    /* Late duplicates of acknowledged calls: STALE_RPC, raw or libonce. */
    raw_expect(h, cid, 2, 0, "e-ack", ONCE_FAILED_PRECONDITION, "STALE_RPC");
    assert_int_equal(harness_incr_id(a, "e-ack", BY, cid, 1, &v, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "STALE_RPC");
    /* ...also when it carries an acknowledgement above its own seq (as a
     * resend of the same seq with the sender's current ack would): the
     * seq is stale first (docs/spec.md), not a bad acknowledgement. */
    raw_expect(h, cid, 2, 3, "e-ack", ONCE_FAILED_PRECONDITION, "STALE_RPC");
    /* An acknowledgement above the call's own seq: BAD_ACK, and the
     * watermark does not move. */
    raw_expect(h, cid, 4, 5, "e-ack", ONCE_INVALID_ARGUMENT, "BAD_ACK");

    harness_collector_stats(a, &s1, &c1);
    assert_int_equal(s1.commits, s0.commits);
    assert_int_equal(s1.records_stored, s0.records_stored);
    assert_true(c1.stale >= c0.stale + 3);
    assert_int_equal(harness_get(a, "e-ack"), 3 * BY);
    harness_lease_info(a, cid, &li);
    assert_int_equal(li.watermark, 3);
    assert_int_equal(record_seqs(a, cid, seqs, 8), 1);

    /* Seq 4 was never burnt: with a valid acknowledgement it runs once. */
    raw_incr(h, cid, 4, 4, "e-ack", BY, &r);
    assert_int_equal(resp_code(r), ONCE_OK);
    assert_false(r->replayed);
    once__v1__response__free_unpacked(r, NULL);
    assert_int_equal(harness_get(a, "e-ack"), 4 * BY);
    once_client_close(a);
}

/*
 * LeaseInfo on a lease past its TTL (the collector is off, so nothing
 * else ends it) answers EXPIRED, and that end is durable: after a SIGKILL
 * and restart, which gives live leases a fresh TTL, the lease is still
 * EXPIRED and its calls are refused LEASE_EXPIRED.
 */
static void
test_lease_info_ends_overdue_lease(void **state)
{
    harness *h = *state;
    once_client *b = NULL;
    struct once_lease_info li;
    once_status st;
    uint64_t cid = 0, ttl = 0;
    int64_t v;

    assert_int_equal(harness_client(h, true, &b), ONCE_OK);
    assert_int_equal(once_lease_open(b, NULL, 1000, &cid, &ttl, &st), ONCE_OK);
    assert_int_equal(harness_incr_id(b, "c-overdue", BY, cid, 1, &v, &st),
                     ONCE_OK);
    /* TTL 1 s (long enough for the call under valgrind): poll until
     * LeaseInfo finds it past its TTL. */
    for (int i = 0; i < POLL_MAX_MS / POLL_STEP_MS; i++) {
        harness_lease_info(b, cid, &li);
        if (li.state != ONCE_LEASE_STATE_LIVE) {
            break;
        }
        harness_sleep_ms(POLL_STEP_MS);
    }
    assert_int_equal(li.state, ONCE_LEASE_STATE_EXPIRED);

    assert_int_not_equal(harness_kill(h, SIGKILL), -1);
    assert_int_equal(harness_restart(h), 0);
    harness_lease_info(b, cid, &li);
    assert_int_equal(li.state, ONCE_LEASE_STATE_EXPIRED);
    assert_int_equal(harness_incr_id(b, "c-overdue", BY, cid, 2, &v, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "LEASE_EXPIRED");
    assert_int_equal(harness_get(b, "c-overdue"), BY);
    once_client_close(b);
}

/* ---- f) RenewLeases: many leases in one message ----------------------- */

#define BATCH_TTL_MS 5000

/* RenewLeases of the n ids through c; on OK *out is the reply (free with
 * once__v1__renew_leases_response__free_unpacked), otherwise NULL. */
static int
renew_leases(once_client *c, const uint64_t *ids, size_t n,
             Once__V1__RenewLeasesResponse **out, once_status *st)
{
    Once__V1__RenewLeasesRequest r = ONCE__V1__RENEW_LEASES_REQUEST__INIT;
    uint8_t *buf;
    void *resp = NULL;
    size_t len, rlen = 0;
    int rv;

    r.n_client_ids = n;
    r.client_ids = (uint64_t *)ids;
    len = once__v1__renew_leases_request__get_packed_size(&r);
    assert_non_null(buf = malloc(len + 1));
    once__v1__renew_leases_request__pack(&r, buf);
    rv = once_call(c, "/once.v1.Lease/RenewLeases", false, NULL, buf, len,
                   &resp, &rlen, st);
    free(buf);
    *out = NULL;
    if (rv == ONCE_OK) {
        *out = once__v1__renew_leases_response__unpack(NULL, rlen, resp);
        assert_non_null(*out);
    }
    once_free(resp);
    return rv;
}

/* Polls LeaseInfo of cid (through c) until at least ms of its TTL has run
 * down (bounded); returns its remaining_ms then. */
static uint64_t
wait_ran_down(once_client *c, uint64_t cid, uint64_t ms)
{
    struct once_lease_info li;

    memset(&li, 0, sizeof(li));
    for (int i = 0; i < POLL_MAX_MS / POLL_STEP_MS; i++) {
        harness_lease_info(c, cid, &li);
        if (li.remaining_ms + ms <= li.ttl_ms) {
            break;
        }
        harness_sleep_ms(POLL_STEP_MS);
    }
    assert_int_equal(li.state, ONCE_LEASE_STATE_LIVE);
    assert_true(li.remaining_ms + ms <= li.ttl_ms);
    return li.remaining_ms;
}

/* The lease's remaining_ms per LeaseInfo through c. */
static uint64_t
remaining(once_client *c, uint64_t cid)
{
    struct once_lease_info li;

    harness_lease_info(c, cid, &li);
    return li.remaining_ms;
}

/*
 * RenewLeases renews several leases in one message and answers each id on
 * its own, in the order sent: the live leases get OK and a full TTL again
 * (remaining_ms in the reply and in LeaseInfo back above what it was); a
 * closed lease, one past its TTL and an id never issued get
 * FAILED_PRECONDITION and no time. The overdue one is ended durably: after
 * a SIGKILL and a restart (which gives live leases a fresh TTL) it is still
 * EXPIRED. An empty batch is refused. The collector is off, so nothing but
 * these calls ends a lease.
 */
static void
test_renew_leases_batch(void **state)
{
    harness *h = *state;
    once_client *b = NULL;
    Once__V1__RenewLeasesResponse *r = NULL;
    struct once_lease_info li;
    once_status st;
    uint64_t live1 = 0, live2 = 0, closed = 0, overdue = 0, ttl = 0;
    uint64_t before1, before2, ids[5];

    assert_int_equal(harness_client(h, true, &b), ONCE_OK);
    assert_int_equal(once_lease_open(b, NULL, BATCH_TTL_MS, &live1, &ttl, &st),
                     ONCE_OK);
    assert_int_equal(once_lease_open(b, NULL, BATCH_TTL_MS, &live2, &ttl, &st),
                     ONCE_OK);
    assert_int_equal(once_lease_open(b, NULL, BATCH_TTL_MS, &closed, &ttl, &st),
                     ONCE_OK);
    assert_int_equal(once_lease_close(b, closed, NULL, &st), ONCE_OK);
    /* 1 s: past it below, yet alive for a moment after a restart. */
    assert_int_equal(once_lease_open(b, NULL, 1000, &overdue, &ttl, &st),
                     ONCE_OK);
    /* Let 1.2 s of the live leases' TTL run down (LeaseInfo of the
     * overdue one would end it itself); live1 was opened first. */
    before2 = wait_ran_down(b, live2, 1200);
    before1 = remaining(b, live1);
    assert_true(before1 <= before2);

    ids[0] = live1;
    ids[1] = closed;
    ids[2] = overdue;
    ids[3] = live2;
    ids[4] = UINT64_C(1) << 40; /* never issued */
    assert_int_equal(renew_leases(b, ids, 5, &r, &st), ONCE_OK);
    assert_int_equal(r->n_results, 5);
    for (size_t i = 0; i < 5; i++) {
        print_message("  %llu: code %d remaining %llu ms\n",
                      (unsigned long long)r->results[i]->client_id,
                      (int)r->results[i]->code,
                      (unsigned long long)r->results[i]->remaining_ms);
        assert_int_equal(r->results[i]->client_id, ids[i]);
    }
    assert_int_equal(r->results[0]->code, ONCE_OK);
    assert_true(r->results[0]->remaining_ms > before1 + 1000);
    assert_true(r->results[0]->remaining_ms <= BATCH_TTL_MS);
    assert_int_equal(r->results[3]->code, ONCE_OK);
    assert_true(r->results[3]->remaining_ms > before2 + 1000);
    assert_true(r->results[3]->remaining_ms <= BATCH_TTL_MS);
    for (size_t i = 1; i < 5; i += i == 2 ? 2 : 1) {
        assert_int_equal(r->results[i]->code, ONCE_FAILED_PRECONDITION);
        assert_int_equal(r->results[i]->remaining_ms, 0);
    }
    once__v1__renew_leases_response__free_unpacked(r, NULL);

    /* The server's view: extended, and the ended leases stay ended. */
    assert_true(remaining(b, live1) > before1 + 1000);
    assert_true(remaining(b, live2) > before2 + 1000);
    harness_lease_info(b, closed, &li);
    assert_int_equal(li.state, ONCE_LEASE_STATE_CLOSED);
    assert_int_not_equal(harness_kill(h, SIGKILL), -1);
    assert_int_equal(harness_restart(h), 0);
    harness_lease_info(b, overdue, &li);
    assert_int_equal(li.state, ONCE_LEASE_STATE_EXPIRED);
    harness_lease_info(b, live1, &li);
    assert_int_equal(li.state, ONCE_LEASE_STATE_LIVE);

    assert_int_equal(renew_leases(b, NULL, 0, &r, &st), ONCE_INVALID_ARGUMENT);
    assert_string_equal(st.reason, "BAD_BATCH");
    once_client_close(b);
}

/* A signed lease-less client as principal name (key file DIR/name.key
 * written by harness_add_principal). */
static once_client *
signed_client(const harness *h, const char *name)
{
    once_client *c = NULL;
    once_status st;

    assert_int_equal(harness_client_as(h, name, true, &c, &st), ONCE_OK);
    return c;
}

/* Waits (bounded) until an unsigned Stats is refused UNAUTHENTICATED:
 * onced has read the principals file. */
static void
wait_auth_on(const harness *h)
{
    Once__V1__Response *r = NULL;
    uint8_t *req;
    size_t len;
    int code = ONCE_OK;

    assert_int_equal(
        harness_envelope("/once.v1.Admin/Stats", 0, 0, NULL, 0, &req, &len), 0);
    for (int i = 0; i < POLL_MAX_MS / POLL_STEP_MS; i++) {
        assert_int_equal(harness_raw_rpc(h->url, req, len, &r, 5000), 0);
        code = resp_code(r);
        once__v1__response__free_unpacked(r, NULL);
        if (code == ONCE_UNAUTHENTICATED) {
            break;
        }
        harness_sleep_ms(POLL_STEP_MS);
    }
    free(req);
    assert_int_equal(code, ONCE_UNAUTHENTICATED);
}

/*
 * With principals, RenewLeases renews only the caller's own leases: in one
 * message from alice, her lease is renewed and bob's is answered
 * PERMISSION_DENIED and left running down (per the operator's LeaseInfo);
 * bob himself can still renew it.
 */
static void
test_renew_leases_only_own(void **state)
{
    harness *h = *state;
    once_client *alice, *bob, *op;
    Once__V1__RenewLeasesResponse *r = NULL;
    once_status st;
    uint64_t la = 0, lb = 0, ttl = 0, before_a, before_b, ids[2];

    harness_add_principal(h, "op", "operator");
    harness_add_principal(h, "alice", "scheduler");
    harness_add_principal(h, "bob", "scheduler");
    wait_auth_on(h);
    alice = signed_client(h, "alice");
    bob = signed_client(h, "bob");
    op = signed_client(h, "op");
    assert_int_equal(once_lease_open(alice, NULL, BATCH_TTL_MS, &la, &ttl, &st),
                     ONCE_OK);
    assert_int_equal(once_lease_open(bob, NULL, BATCH_TTL_MS, &lb, &ttl, &st),
                     ONCE_OK);
    before_b = wait_ran_down(op, lb, 500);
    before_a = remaining(op, la);
    assert_true(before_a + 500 <= BATCH_TTL_MS);

    ids[0] = la;
    ids[1] = lb;
    assert_int_equal(renew_leases(alice, ids, 2, &r, &st), ONCE_OK);
    assert_int_equal(r->n_results, 2);
    assert_int_equal(r->results[0]->client_id, la);
    assert_int_equal(r->results[0]->code, ONCE_OK);
    assert_true(r->results[0]->remaining_ms > before_a);
    assert_int_equal(r->results[1]->client_id, lb);
    assert_int_equal(r->results[1]->code, ONCE_PERMISSION_DENIED);
    assert_int_equal(r->results[1]->remaining_ms, 0);
    once__v1__renew_leases_response__free_unpacked(r, NULL);
    assert_true(remaining(op, la) > before_a);
    assert_true(remaining(op, lb) <= before_b);

    assert_int_equal(renew_leases(bob, &lb, 1, &r, &st), ONCE_OK);
    assert_int_equal(r->results[0]->code, ONCE_OK);
    assert_true(r->results[0]->remaining_ms > before_b);
    once__v1__renew_leases_response__free_unpacked(r, NULL);
    once_client_close(alice);
    once_client_close(bob);
    once_client_close(op);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_restart_keeps_live_leases,
                                        setup_fast_gc, harness_teardown),
        cmocka_unit_test_setup_teardown(test_stopped_server_ends_inflight,
                                        harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_stopped_server_ends_backoff,
                                        harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_leaderless_spell_keeps_lease,
                                        harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_leaderless_past_ttl_loses_lease,
                                        harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_closed_lease_fails_fast,
                                        harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_close_ends_lease, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_window_full, setup_window4,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_stale_and_bad_ack, setup_fast_gc,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_lease_info_ends_overdue_lease,
                                        harness_setup_no_gc, harness_teardown),
        cmocka_unit_test_setup_teardown(test_renew_leases_batch,
                                        harness_setup_no_gc, harness_teardown),
        cmocka_unit_test_setup_teardown(test_renew_leases_only_own,
                                        harness_setup_no_gc, harness_teardown),
    };

    if (getenv("ONCE_TEST_FILTER") != NULL) { /* e.g. "test_renew*" */
        cmocka_set_test_filter(getenv("ONCE_TEST_FILTER"));
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
