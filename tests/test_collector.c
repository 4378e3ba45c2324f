/*
 * test_collector.c — the collector against a real onced (docs/spec.md):
 * acknowledgements bound retention, ended leases are reclaimed, and
 * neither a crash between "lease ended" and "records deleted" nor one
 * right after the deletion lets a late retry run again.
 *
 * Owns: the retention check under load (8 clients × 20,000 acknowledged
 * calls), the late duplicate of an acknowledged call (STALE_RPC), the
 * expiry of a lease nobody renews, the two crash points around
 * reclamation (ONCED_FAULT=lease_ended, =records_deleted), and what Stats,
 * LeaseInfo and ListRecords measure of it (the oldest record's age, the
 * reclaim rate, the watermark lag) against the test's own clock.
 * Invariant: every effect is a counter increment, so a call that ran twice
 * shows; every loop is bounded in count and in time; cmocka assertions
 * only on the test's own thread (workers report through their struct).
 * Never: mocks anything — each test starts its own onced with a short
 * --gc-interval; never sleeps for a fixed time where it can poll a
 * condition instead.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/harness.h"

#define WORKERS       8
#define CALLS         20000
#define WINDOW        512 /* onced's default --window */
#define WORKER_MAX_MS 120000
#define POLL_MAX_MS   10000
#define POLL_STEP_MS  20
#define SHORT_TTL_MS  300
#define FAULT_EXIT_MS 10000

static const char *const gc_fast[] = {"--gc-interval", "50ms", NULL};

static int
setup_fast_gc(void **state)
{
    return harness_setup_args(state, gc_fast);
}

/* Records the server holds for cid, per ListRecords. */
static size_t
records_of(once_client *c, uint64_t cid)
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
    assert_false(l->truncated);
    n = l->n_records;
    for (size_t i = 0; i < l->n_records; i++) {
        assert_int_equal(l->records[i].client_id, cid);
    }
    once_free(l);
    return n;
}

/* Polls LeaseInfo until cid is LEASE_COLLECTED (bounded). */
static void
wait_collected(once_client *c, uint64_t cid)
{
    struct once_lease_info li;
    int64_t deadline = harness_now_ms() + POLL_MAX_MS;

    memset(&li, 0, sizeof(li));
    for (int i = 0;
         i < POLL_MAX_MS / POLL_STEP_MS && harness_now_ms() < deadline; i++) {
        harness_lease_info(c, cid, &li);
        if (li.state == ONCE_LEASE_STATE_COLLECTED) {
            break;
        }
        harness_sleep_ms(POLL_STEP_MS);
    }
    if (li.state != ONCE_LEASE_STATE_COLLECTED) {
        print_error("client %llu: state %d, %llu records retained after "
                    "%d ms\n",
                    (unsigned long long)cid, li.state,
                    (unsigned long long)li.records_retained, POLL_MAX_MS);
    }
    assert_int_equal(li.state, ONCE_LEASE_STATE_COLLECTED);
    assert_int_equal(li.records_retained, 0);
    assert_int_equal(records_of(c, cid), 0);
}

/* ---- a) acknowledgements bound retention ------------------------------ */

typedef struct worker {
    const harness *h;
    int index;
    char name[32];
    once_client *c;     /* closed by the test, after the late duplicate */
    once_rpc_id first;  /* the id of call 1 */
    once_rpc_id last;   /* the id of the last call */
    int64_t last_value; /* its value */
    int done;           /* calls that returned OK with the right value */
    char err[512];      /* the first failure, or "" */
} worker;

static void *
worker_main(void *arg)
{
    worker *w = arg;
    int64_t deadline = harness_now_ms() + WORKER_MAX_MS;

    if (harness_client(w->h, false, &w->c) != ONCE_OK) {
        snprintf(w->err, sizeof(w->err), "cannot open a client");
        return NULL;
    }
    for (int i = 0; i < CALLS; i++) {
        once_rpc_id id = {0, 0};
        once_status st;
        int64_t v = -1;
        int rv = once_counter_incr(w->c, w->name, 1, &id, &v, &st);

        if (rv != ONCE_OK || v != i + 1 || st.replayed) {
            snprintf(w->err, sizeof(w->err),
                     "call %d: %s %s %s value %lld replayed %d", i + 1,
                     once_strerror(rv), st.reason, st.message, (long long)v,
                     st.replayed);
            return NULL;
        }
        if (i == 0) {
            w->first = id;
        }
        w->last = id;
        w->last_value = v;
        w->done++;
        if ((i & 255) == 0 && harness_now_ms() > deadline) {
            snprintf(w->err, sizeof(w->err), "only %d calls within %d ms",
                     i + 1, WORKER_MAX_MS);
            return NULL;
        }
    }
    return NULL;
}

static void
test_acks_bound_retention(void **state)
{
    harness *h = *state;
    worker ws[WORKERS];
    pthread_t tids[WORKERS];
    once_client *b = NULL;
    once_stats s0, s1;
    once_collector_stats c0, c1;
    int64_t t0 = harness_now_ms(), v;
    once_status st;

    memset(ws, 0, sizeof(ws));
    for (int i = 0; i < WORKERS; i++) {
        ws[i].h = h;
        ws[i].index = i;
        snprintf(ws[i].name, sizeof(ws[i].name), "acks-%d", i);
        assert_int_equal(pthread_create(&tids[i], NULL, worker_main, &ws[i]),
                         0);
    }
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(tids[i], NULL);
    }
    print_message("%d × %d acknowledged calls in %lld ms\n", WORKERS, CALLS,
                  (long long)(harness_now_ms() - t0));
    for (int i = 0; i < WORKERS; i++) {
        if (ws[i].err[0] != '\0') {
            print_error("worker %d: %s\n", i, ws[i].err);
        }
        assert_string_equal(ws[i].err, "");
        assert_int_equal(ws[i].done, CALLS);
    }

    assert_int_equal(harness_client(h, true, &b), ONCE_OK);
    for (int i = 0; i < WORKERS; i++) {
        assert_int_equal(harness_get(b, ws[i].name), CALLS); /* no duplicate */
    }

    /* Let the collector run two more passes, then look at what is left. */
    harness_collector_stats(b, &s0, &c0);
    for (int i = 0; i < POLL_MAX_MS / POLL_STEP_MS; i++) {
        harness_collector_stats(b, &s1, &c1);
        if (c1.gc_passes >= c0.gc_passes + 2 &&
            s1.records_stored <= (uint64_t)WORKERS * WINDOW) {
            break;
        }
        harness_sleep_ms(POLL_STEP_MS);
    }
    print_message("after the collector: %llu records (%llu bytes) retained, "
                  "%llu reclaimed\n",
                  (unsigned long long)s1.records_stored,
                  (unsigned long long)c1.records_bytes,
                  (unsigned long long)c1.reclaimed_total);
    assert_true(c1.gc_passes >= c0.gc_passes + 2);
    assert_true(s1.records_stored <= (uint64_t)WORKERS * WINDOW);
    assert_true(c1.reclaimed_total >= (uint64_t)WORKERS * (CALLS - WINDOW));

    /* A late duplicate of an acknowledged call: refused, nothing runs. */
    for (int i = 0; i < WORKERS; i++) {
        memset(&st, 0, sizeof(st));
        assert_int_equal(harness_incr_id(b, ws[i].name, 1,
                                         ws[i].first.client_id, ws[i].first.seq,
                                         &v, &st),
                         ONCE_FAILED_PRECONDITION);
        assert_string_equal(st.reason, "STALE_RPC");
        assert_int_equal(harness_get(b, ws[i].name), CALLS);
    }
    harness_collector_stats(b, &s0, &c0);
    assert_true(c0.stale >= c1.stale + WORKERS);
    assert_int_equal(s0.commits, s1.commits);

    /* The last call of each client was never acknowledged (no call came
     * after it): its record must still be there and replay. */
    for (int i = 0; i < WORKERS; i++) {
        memset(&st, 0, sizeof(st));
        assert_int_equal(harness_incr_id(b, ws[i].name, 1, ws[i].last.client_id,
                                         ws[i].last.seq, &v, &st),
                         ONCE_OK);
        assert_true(st.replayed);
        assert_int_equal(v, ws[i].last_value);
        assert_int_equal(harness_get(b, ws[i].name), CALLS);
    }

    for (int i = 0; i < WORKERS; i++) {
        once_client_close(ws[i].c);
    }
    once_client_close(b);
}

/* ---- b) a lease nobody renews ----------------------------------------- */

/*
 * Opens a short lease on a lease-less handle (so nothing renews it) and
 * makes one call under it. Returns the client id.
 */
static uint64_t
one_call_short_lease(once_client *a, const char *name)
{
    uint64_t cid = 0, ttl = 0;
    once_status st;
    int64_t v;

    assert_int_equal(once_lease_open(a, NULL, SHORT_TTL_MS, &cid, &ttl, &st),
                     ONCE_OK);
    assert_int_not_equal(cid, 0);
    assert_int_equal(ttl, SHORT_TTL_MS);
    assert_int_equal(harness_incr_id(a, name, 1, cid, 1, &v, &st), ONCE_OK);
    assert_int_equal(v, 1);
    assert_false(st.replayed);
    return cid;
}

/* The late retry of cid:1 after its lease ended: LEASE_EXPIRED, nothing
 * runs. */
static void
expect_lease_expired(once_client *a, const char *name, uint64_t cid)
{
    once_status st;
    int64_t v;

    memset(&st, 0, sizeof(st));
    assert_int_equal(harness_incr_id(a, name, 1, cid, 1, &v, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "LEASE_EXPIRED");
    assert_int_equal(harness_get(a, name), 1);
}

/*
 * The part of test_unrenewed_lease_reclaimed that needs the lease alive:
 * one call under a lease of ttl_ms, the lease LIVE with its one record,
 * the call's retry a replay. False when the lease ended before all of it
 * ran (a slow machine): the caller tries again with a longer TTL, so no
 * fixed time decides the outcome. Any other deviation fails the test.
 */
static bool
live_phase(once_client *a, const char *name, uint64_t ttl_ms, uint64_t *cidp)
{
    struct once_lease_info li;
    uint64_t cid = 0, ttl = 0;
    once_status st;
    int64_t v;
    int rv;

    assert_int_equal(once_lease_open(a, NULL, ttl_ms, &cid, &ttl, &st),
                     ONCE_OK);
    assert_int_equal(ttl, ttl_ms);
    *cidp = cid;
    rv = harness_incr_id(a, name, 1, cid, 1, &v, &st);
    if (rv == ONCE_FAILED_PRECONDITION &&
        strcmp(st.reason, "LEASE_EXPIRED") == 0) {
        return false;
    }
    assert_int_equal(rv, ONCE_OK);
    assert_int_equal(v, 1);
    assert_false(st.replayed);
    harness_lease_info(a, cid, &li);
    if (li.state != ONCE_LEASE_STATE_LIVE) {
        return false;
    }
    assert_int_equal(li.records_retained, 1);
    assert_int_equal(records_of(a, cid), 1);
    /* While the lease lives, the record replays (no acknowledgement was
     * sent: first_incomplete is 0 on an explicit id of another client). */
    rv = harness_incr_id(a, name, 1, cid, 1, &v, &st);
    if (rv == ONCE_FAILED_PRECONDITION &&
        strcmp(st.reason, "LEASE_EXPIRED") == 0) {
        return false;
    }
    assert_int_equal(rv, ONCE_OK);
    assert_true(st.replayed);
    assert_int_equal(v, 1);
    return true;
}

static void
test_unrenewed_lease_reclaimed(void **state)
{
    harness *h = *state;
    once_client *a = NULL;
    once_stats s0, s1;
    once_collector_stats c0, c1;
    uint64_t cid = 0, ttl_ms = SHORT_TTL_MS;
    char name[64];
    bool live = false;

    assert_int_equal(harness_client(h, true, &a), ONCE_OK);
    for (int i = 0; i < 5 && !live; i++, ttl_ms *= 2) {
        snprintf(name, sizeof(name), "unrenewed-%d", i);
        live = live_phase(a, name, ttl_ms, &cid);
        if (!live) {
            print_message("  the %llu ms lease ended before its checks ran: "
                          "again with twice the TTL\n",
                          (unsigned long long)ttl_ms);
        }
    }
    assert_true(live);
    harness_collector_stats(a, &s0, &c0);

    wait_collected(a, cid);
    harness_collector_stats(a, &s1, &c1);
    assert_true(c1.reclaimed_total >= c0.reclaimed_total + 1);

    expect_lease_expired(a, name, cid);
    harness_collector_stats(a, &s0, &c0);
    assert_true(c0.lease_expired >= c1.lease_expired + 1);
    assert_int_equal(s0.commits, s1.commits);
    once_client_close(a);
}

/*
 * onced crashes by itself at `fault` (armed from a restart on an empty
 * data dir) while it reclaims the one record of a lease nobody renews;
 * restarted without the fault, the late retry is still LEASE_EXPIRED,
 * the counter is still 1, and the record is gone.
 */
static void
crash_around_reclaim(harness *h, const char *fault, const char *name)
{
    once_client *a = NULL;
    uint64_t cid;
    int status;

    assert_int_equal(harness_stop(h), 0);
    assert_int_equal(harness_set_fault(h, fault), 0);
    assert_int_equal(harness_restart(h), 0);

    assert_int_equal(harness_client(h, true, &a), ONCE_OK);
    cid = one_call_short_lease(a, name);

    status = harness_wait_exit(h, FAULT_EXIT_MS);
    if (status == -1 || !WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
        print_error("onced with ONCED_FAULT=%s: status 0x%x\n", fault,
                    (unsigned)status);
        harness_dump_log(h);
    }
    assert_int_not_equal(status, -1);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);

    assert_int_equal(harness_set_fault(h, NULL), 0);
    assert_int_equal(harness_restart(h), 0);

    /* The end was durable before the crash: no restart revives it. */
    expect_lease_expired(a, name, cid);
    wait_collected(a, cid);
    expect_lease_expired(a, name, cid);
    once_client_close(a);
}

static void
test_crash_after_lease_ended(void **state)
{
    crash_around_reclaim(*state, "lease_ended", "fault-ended");
}

static void
test_crash_after_records_deleted(void **state)
{
    crash_around_reclaim(*state, "records_deleted", "fault-deleted");
}

/* ---- c) what Stats, LeaseInfo and ListRecords measure ------------------ */

#define AGE_GAP_MS   400 /* between the two records of the age test */
#define AGE_SLACK_MS 20  /* ms rounding on both sides */
#define RATE_RECORDS 100

/* Increment(name, 1) as cid:seq carrying first_incomplete fi, sent raw (no
 * libonce); asserts it ran (OK, not a replay). */
static void
raw_incr_ack(const harness *h, uint64_t cid, uint64_t seq, uint64_t fi,
             const char *name)
{
    Once__V1__Response *r = NULL;
    uint8_t *payload = NULL, *buf = NULL;
    size_t plen, len;

    assert_int_equal(harness_incr_payload(name, 1, &payload, &plen), 0);
    assert_int_equal(harness_envelope_fi("/once.v1.Counter/Increment", cid, seq,
                                         fi, payload, plen, &buf, &len),
                     0);
    assert_int_equal(harness_raw_rpc(h->url, buf, len, &r, 5000), 0);
    assert_null(r->status != NULL && r->status->code != 0 ? r->status : NULL);
    assert_false(r->replayed);
    once__v1__response__free_unpacked(r, NULL);
    free(buf);
    free(payload);
}

/* Polls LeaseInfo until cid's durable watermark is wm (bounded). */
static void
wait_durable(once_client *c, uint64_t cid, uint64_t wm)
{
    struct once_lease_info li;

    memset(&li, 0, sizeof(li));
    for (int i = 0; i < POLL_MAX_MS / POLL_STEP_MS; i++) {
        harness_lease_info(c, cid, &li);
        if (li.watermark_durable == wm) {
            break;
        }
        harness_sleep_ms(POLL_STEP_MS);
    }
    assert_int_equal(li.watermark_durable, wm);
}

/* cid's ListRecords summary row into *row. */
static void
client_row(once_client *c, uint64_t cid, once_client_records *row)
{
    once_record_list *l = NULL;
    once_status st;

    assert_int_equal(once_admin_list_records(c, cid, 1, &l, &st), ONCE_OK);
    assert_int_equal(l->n_clients, 1);
    assert_int_equal(l->clients[0].client_id, cid);
    *row = l->clients[0];
    once_free(l);
}

/*
 * The oldest record's age as LeaseInfo, Stats and ListRecords report it,
 * when the oldest record of cid (the only client with records) completed
 * between the test's times from and to: each must lie between the times
 * elapsed since then, measured around the three calls. Returns LeaseInfo's.
 */
static uint64_t
oldest_age_between(once_client *c, uint64_t cid, int64_t from, int64_t to)
{
    struct once_lease_info li;
    once_stats s;
    once_collector_stats cs;
    once_client_records row;
    int64_t ta = harness_now_ms(), tb, lo, hi;

    harness_lease_info(c, cid, &li);
    harness_collector_stats(c, &s, &cs);
    client_row(c, cid, &row);
    tb = harness_now_ms();
    lo = ta - to - AGE_SLACK_MS;
    hi = tb - from + AGE_SLACK_MS;
    print_message("  oldest record age: LeaseInfo %llu, Stats %llu, "
                  "ListRecords %llu ms (between %lld and %lld)\n",
                  (unsigned long long)li.oldest_record_age_ms,
                  (unsigned long long)cs.oldest_record_age_ms,
                  (unsigned long long)row.oldest_record_age_ms, (long long)lo,
                  (long long)hi);
    assert_true((int64_t)li.oldest_record_age_ms >= lo);
    assert_true((int64_t)li.oldest_record_age_ms <= hi);
    assert_true((int64_t)cs.oldest_record_age_ms >= lo);
    assert_true((int64_t)cs.oldest_record_age_ms <= hi);
    assert_true((int64_t)row.oldest_record_age_ms >= lo);
    assert_true((int64_t)row.oldest_record_age_ms <= hi);
    return li.oldest_record_age_ms;
}

/*
 * oldest_record_age_ms (Stats, LeaseInfo, ListRecords) is 0 while no
 * record is kept, is the age of the oldest record kept — not of the
 * newest — growing while it is retained, moves to the next record once the
 * collector reclaimed the oldest below an acknowledgement, and is 0 again
 * once the lease's records are all reclaimed.
 */
static void
test_oldest_record_age(void **state)
{
    harness *h = *state;
    once_client *b = NULL;
    once_stats s;
    once_collector_stats cs;
    once_status st;
    uint64_t cid = 0, ttl = 0, age1, age2;
    int64_t t0, t1, t2, t3, v;

    assert_int_equal(harness_client(h, true, &b), ONCE_OK);
    harness_collector_stats(b, &s, &cs);
    assert_int_equal(s.records_stored, 0);
    assert_int_equal(cs.oldest_record_age_ms, 0);

    /* A lease-less handle with explicit ids: nothing is acknowledged. */
    assert_int_equal(once_lease_open(b, NULL, 120000, &cid, &ttl, &st),
                     ONCE_OK);
    t0 = harness_now_ms();
    assert_int_equal(harness_incr_id(b, "age", 1, cid, 1, &v, &st), ONCE_OK);
    t1 = harness_now_ms();
    harness_sleep_ms(AGE_GAP_MS);
    t2 = harness_now_ms();
    assert_int_equal(harness_incr_id(b, "age", 1, cid, 2, &v, &st), ONCE_OK);
    t3 = harness_now_ms();
    age1 = oldest_age_between(b, cid, t0, t1);
    assert_true(age1 >= AGE_GAP_MS); /* seq 1's, not seq 2's */
    harness_sleep_ms(200);
    age2 = oldest_age_between(b, cid, t0, t1);
    assert_true(age2 >= age1 + 200 - AGE_SLACK_MS);

    /* Seq 3 acknowledges seq 1; the collector reclaims it, and the oldest
     * record kept is seq 2. */
    raw_incr_ack(h, cid, 3, 2, "age");
    wait_durable(b, cid, 2);
    oldest_age_between(b, cid, t2, t3);

    assert_int_equal(once_lease_close(b, cid, NULL, &st), ONCE_OK);
    wait_collected(b, cid);
    harness_collector_stats(b, &s, &cs);
    assert_int_equal(s.records_stored, 0);
    assert_int_equal(cs.oldest_record_age_ms, 0);
    once_client_close(b);
}

/* When the collector's first pass ran onced had been started at or after
 * this time (setup_rate_gc). */
static int64_t rate_setup_ms;

/* A pass every 200 ms: the 64 samples of the rate then reach back past
 * its 10-second window. */
static int
setup_rate_gc(void **state)
{
    static const char *const args[] = {"--gc-interval", "200ms", NULL};

    rate_setup_ms = harness_now_ms();
    return harness_setup_args(state, args);
}

/*
 * Stats reclaimed_per_sec is 0 before anything was reclaimed and, right
 * after a lease's RATE_RECORDS records were reclaimed, the number
 * reclaimed over the time since a pass before them: at least
 * RATE_RECORDS over the time since onced started, and (while that pass is
 * still inside the 10-second window) at most RATE_RECORDS over the time
 * from that pass to the lease's close.
 */
static void
test_reclaim_rate(void **state)
{
    harness *h = *state;
    once_client *b = NULL;
    once_stats s;
    once_collector_stats cs;
    once_status st;
    uint64_t cid = 0, ttl = 0, retained = 0;
    int64_t w, c, tq, v;
    double lo, hi;

    assert_int_equal(harness_client(h, true, &b), ONCE_OK);
    memset(&cs, 0, sizeof(cs));
    for (int i = 0; i < POLL_MAX_MS / POLL_STEP_MS; i++) {
        harness_collector_stats(b, &s, &cs);
        if (cs.gc_passes >= 1) {
            break;
        }
        harness_sleep_ms(POLL_STEP_MS);
    }
    w = harness_now_ms(); /* after the first pass */
    assert_true(cs.gc_passes >= 1);
    assert_int_equal(cs.reclaimed_total, 0);
    assert_true(cs.reclaimed_per_sec == 0.0);

    assert_int_equal(once_lease_open(b, NULL, 120000, &cid, &ttl, &st),
                     ONCE_OK);
    for (uint64_t seq = 1; seq <= RATE_RECORDS; seq++) {
        assert_int_equal(harness_incr_id(b, "rate", 1, cid, seq, &v, &st),
                         ONCE_OK);
    }
    c = harness_now_ms();
    assert_int_equal(once_lease_close(b, cid, &retained, &st), ONCE_OK);
    assert_int_equal(retained, RATE_RECORDS);
    wait_collected(b, cid);
    harness_collector_stats(b, &s, &cs);
    tq = harness_now_ms();
    lo = RATE_RECORDS * 1000.0 / (double)(tq - rate_setup_ms);
    hi = RATE_RECORDS * 1000.0 / (double)(c - w);
    print_message("  %llu reclaimed, %.1f/s (between %.1f and %.1f)\n",
                  (unsigned long long)cs.reclaimed_total, cs.reclaimed_per_sec,
                  lo, hi);
    assert_int_equal(cs.reclaimed_total, RATE_RECORDS);
    assert_true(cs.reclaimed_per_sec > 0.0);
    assert_true(cs.reclaimed_per_sec >= lo);
    if (tq - w < 9500) {
        assert_true(cs.reclaimed_per_sec <= hi);
    } else {
        print_message("  slow run (%lld ms): upper bound not checked\n",
                      (long long)(tq - w));
    }
    once_client_close(b);
}

/*
 * ListRecords watermark_lag is the number of seqs issued and not yet
 * acknowledged, max_seq + 1 - watermark (with nothing acknowledged,
 * watermark 0, every seq from 1 to max_seq), in the client's own row and
 * in the list of all clients, and reclamation below the watermark does not
 * change it.
 */
static void
test_watermark_lag(void **state)
{
    harness *h = *state;
    once_client *b = NULL;
    once_client_records row;
    once_record_list *l = NULL;
    struct once_lease_info li;
    once_status st;
    uint64_t cid = 0, ttl = 0;
    int64_t v;
    bool found = false;

    assert_int_equal(harness_client(h, true, &b), ONCE_OK);
    assert_int_equal(once_lease_open(b, NULL, 120000, &cid, &ttl, &st),
                     ONCE_OK);
    for (uint64_t seq = 1; seq <= 5; seq++) {
        assert_int_equal(harness_incr_id(b, "lag", 1, cid, seq, &v, &st),
                         ONCE_OK);
    }
    client_row(b, cid, &row);
    assert_int_equal(row.watermark, 0);
    assert_int_equal(row.max_seq, 5);
    assert_int_equal(row.watermark_lag, 5);

    /* Seq 6 acknowledges 1 to 3: seqs 4, 5 and 6 are not. */
    raw_incr_ack(h, cid, 6, 4, "lag");
    harness_lease_info(b, cid, &li);
    assert_int_equal(li.watermark, 4);
    assert_int_equal(li.max_seq, 6);
    client_row(b, cid, &row);
    assert_int_equal(row.watermark, 4);
    assert_int_equal(row.max_seq, 6);
    assert_int_equal(row.watermark_lag, row.max_seq + 1 - row.watermark);
    assert_int_equal(row.watermark_lag, 3);
    assert_int_equal(once_admin_list_records(b, 0, 100, &l, &st), ONCE_OK);
    for (size_t i = 0; i < l->n_clients; i++) {
        if (l->clients[i].client_id == cid) {
            found = true;
            assert_int_equal(l->clients[i].watermark_lag, 3);
        }
    }
    once_free(l);
    assert_true(found);

    wait_durable(b, cid, 4);
    client_row(b, cid, &row);
    assert_int_equal(row.records, 3);
    assert_int_equal(row.watermark_lag, 3);
    once_client_close(b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_acks_bound_retention,
                                        setup_fast_gc, harness_teardown),
        cmocka_unit_test_setup_teardown(test_unrenewed_lease_reclaimed,
                                        setup_fast_gc, harness_teardown),
        cmocka_unit_test_setup_teardown(test_crash_after_lease_ended,
                                        setup_fast_gc, harness_teardown),
        cmocka_unit_test_setup_teardown(test_crash_after_records_deleted,
                                        setup_fast_gc, harness_teardown),
        cmocka_unit_test_setup_teardown(test_oldest_record_age, setup_fast_gc,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_reclaim_rate, setup_rate_gc,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_watermark_lag, setup_fast_gc,
                                        harness_teardown),
    };

    if (getenv("ONCE_TEST_FILTER") != NULL) { /* e.g. "test_oldest*" */
        cmocka_set_test_filter(getenv("ONCE_TEST_FILTER"));
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
