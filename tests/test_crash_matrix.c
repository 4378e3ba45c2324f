/*
 * test_crash_matrix.c — a crash at every fault point, restart, retry
 * (the crash matrix of tests/README.md).
 *
 * Owns: for every fault point of store/fault.h, a real onced that dies there
 * (SIGKILL) or loses the reply there (":drop"), is restarted on the same
 * data, and gets the same rpc ids again. The effect is a counter increment,
 * so the count of effects of the interrupted call is the counter's move;
 * it must be exactly 1, and the retried reply must equal the original when
 * the original arrived (and the counter it reports). Then the same call
 * path is run against two test-only servers that write effect and record
 * in two separate synced writes (store/split.c), and the matrix must CATCH
 * them: effect first gives a double effect at write_between ([1,2,1] over
 * before/between/after), record first a lost one ([1,0,1]), the shipped
 * atomic write [1,1,1]. A matrix that passed the split builds would prove
 * nothing.
 * Invariant: every wait is bounded; a point that never fires fails the
 * test (a fault point that does not fire would make its row vacuous).
 * Never: uses libonce for the calls under test (its retries would hide
 * which attempt did what); ids, acknowledgements and attempts are explicit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nng/nng.h>

#include "tests/harness.h"

#define INCR     "/once.v1.Counter/Increment"
#define GET      "/once.v1.Counter/Get"
#define CALL_MS  3000  /* one raw attempt */
#define CRASH_MS 10000 /* how long an armed onced may take to die */

/* One raw reply, kept for comparison with a retry's. */
typedef struct reply {
    int rv; /* 0, or the nng error when no reply came */
    int code;
    char reason[64];
    uint8_t payload[64];
    size_t plen;
    bool replayed;
    int64_t value; /* IncrementResponse.value when code is OK */
} reply;

/* Sends Increment(name, by) as (cid, seq) carrying first_incomplete fi. */
static reply
incr(const harness *h, uint64_t cid, uint64_t seq, uint64_t fi,
     const char *name, int timeout_ms)
{
    Once__V1__Response *resp = NULL;
    uint8_t *pl = NULL, *env = NULL;
    size_t plen, elen;
    reply out;

    memset(&out, 0, sizeof(out));
    out.value = -1;
    if (harness_incr_payload(name, 1, &pl, &plen) != 0 ||
        harness_envelope_fi(INCR, cid, seq, fi, pl, plen, &env, &elen) != 0) {
        out.rv = -1;
    } else {
        out.rv = harness_raw_rpc(h->url, env, elen, &resp, timeout_ms);
    }
    free(pl);
    free(env);
    if (out.rv != 0) {
        return out;
    }
    out.code = resp->status != NULL ? (int)resp->status->code : 0;
    if (resp->status != NULL && resp->status->reason != NULL) {
        snprintf(out.reason, sizeof(out.reason), "%s", resp->status->reason);
    }
    out.replayed = resp->replayed;
    if (resp->payload.len > 0 && resp->payload.len <= sizeof(out.payload)) {
        memcpy(out.payload, resp->payload.data, resp->payload.len);
        out.plen = resp->payload.len;
    }
    if (out.code == ONCE__V1__CODE__OK) {
        Once__V1__IncrementResponse *v = once__v1__increment_response__unpack(
            NULL, resp->payload.len, resp->payload.data);
        if (v != NULL) {
            out.value = v->value;
            once__v1__increment_response__free_unpacked(v, NULL);
        }
    }
    once__v1__response__free_unpacked(resp, NULL);
    return out;
}

/* The counter as onced has it now. */
static int64_t
get(const harness *h, const char *name)
{
    Once__V1__GetRequest gr = ONCE__V1__GET_REQUEST__INIT;
    Once__V1__Response *resp = NULL;
    Once__V1__GetResponse *v;
    uint8_t pl[512], *env = NULL;
    size_t plen, elen;
    int64_t value;

    gr.name = (char *)name;
    plen = once__v1__get_request__pack(&gr, pl);
    assert_int_equal(harness_envelope(GET, 0, 0, pl, plen, &env, &elen), 0);
    assert_int_equal(harness_raw_rpc(h->url, env, elen, &resp, CALL_MS), 0);
    free(env);
    assert_non_null(resp->status);
    assert_int_equal(resp->status->code, ONCE__V1__CODE__OK);
    v = once__v1__get_response__unpack(NULL, resp->payload.len,
                                       resp->payload.data);
    assert_non_null(v);
    value = v->value;
    once__v1__get_response__free_unpacked(v, NULL);
    once__v1__response__free_unpacked(resp, NULL);
    return value;
}

/* A lease of its own (long TTL, nothing renews it) for raw calls. */
static uint64_t
lease(const harness *h, uint64_t ttl_ms)
{
    once_client *a = NULL;
    once_status st;
    uint64_t cid = 0, granted = 0;

    assert_int_equal(harness_client(h, true, &a), ONCE_OK);
    assert_int_equal(once_lease_open(a, NULL, ttl_ms, &cid, &granted, &st),
                     ONCE_OK);
    once_client_close(a);
    assert_int_not_equal(cid, 0);
    return cid;
}

static void
assert_ok(const reply *r, int64_t value)
{
    if (r->rv != 0 || r->code != ONCE__V1__CODE__OK || r->value != value) {
        print_error(
            "expected OK %lld, got rv=%d code=%d reason=%s value=%lld\n",
            (long long)value, r->rv, r->code, r->reason, (long long)r->value);
    }
    assert_int_equal(r->rv, 0);
    assert_int_equal(r->code, ONCE__V1__CODE__OK);
    assert_int_equal(r->value, value);
}

/* The retry's reply is the original's: same status and payload bytes. */
static void
assert_same_reply(const reply *orig, const reply *again)
{
    assert_int_equal(again->rv, 0);
    assert_int_equal(again->code, orig->code);
    assert_string_equal(again->reason, orig->reason);
    assert_int_equal(again->plen, orig->plen);
    assert_memory_equal(again->payload, orig->payload, orig->plen);
}

static void
assert_status(const reply *r, int code, const char *reason)
{
    if (r->rv != 0 || r->code != code || strcmp(r->reason, reason) != 0) {
        print_error("expected %d %s, got rv=%d code=%d reason=%s\n", code,
                    reason, r->rv, r->code, r->reason);
    }
    assert_int_equal(r->rv, 0);
    assert_int_equal(r->code, code);
    assert_string_equal(r->reason, reason);
}

/* onced died of the armed SIGKILL within CRASH_MS. */
static void
assert_crashed(harness *h, const char *fault)
{
    int status = harness_wait_exit(h, CRASH_MS);

    if (status == -1 || !WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
        print_error("onced with ONCED_FAULT=%s did not crash there "
                    "(status %d)\n",
                    fault, status);
        harness_dump_log(h);
    }
    assert_int_not_equal(status, -1);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);
}

/* Restarts the running or dead onced with fault armed (NULL: disarmed). */
static void
restart(harness *h, const char *fault)
{
    if (h->pid != 0) {
        assert_int_not_equal(harness_kill(h, SIGKILL), -1);
    }
    assert_int_equal(harness_set_fault(h, fault), 0);
    assert_int_equal(harness_restart(h), 0);
}

/*
 * The call path. Call 1 completes; onced restarts armed with fault; call 2
 * meets the fault; onced restarts disarmed on the same data; call 2 is
 * retried with its id. Returns the number of effects call 2 left (the
 * counter's move), after checking what holds for every server: the retry
 * is answered OK, a second retry replays the first retry's reply, and the
 * retry equals the original reply when one arrived. The shipped onced must
 * also report the counter it left; the split builds need not — that is
 * what they get wrong.
 */
static int
call_point(const char *onced, const char *fault)
{
    const char *args[] = {"--gc-interval", "10m", NULL};
    bool drop = strstr(fault, ":drop") != NULL;
    harness *h = NULL;
    reply r1, r2, r2b, r2c, r3;
    uint64_t cid;
    int64_t after;

    assert_int_equal(harness_start_onced(&h, onced, args), 0);
    cid = lease(h, 600000);
    r1 = incr(h, cid, 1, 0, "m", CALL_MS);
    assert_ok(&r1, 1);

    restart(h, fault);
    r2 = incr(h, cid, 2, 0, "m", 1000);
    if (drop) {
        /* Lost reply, onced alive: the retry goes to the same process,
         * then once more across a plain crash. */
        assert_int_equal(r2.rv, NNG_ETIMEDOUT);
        assert_int_equal(harness_wait_exit(h, 100), -1);
        r2b = incr(h, cid, 2, 0, "m", CALL_MS);
        assert_ok(&r2b, 2);
        assert_true(r2b.replayed);
        restart(h, NULL);
    } else {
        assert_crashed(h, fault);
        assert_int_equal(harness_set_fault(h, NULL), 0);
        assert_int_equal(harness_restart(h), 0);
        r2b = incr(h, cid, 2, 0, "m", CALL_MS);
    }
    assert_int_equal(r2b.rv, 0);
    assert_int_equal(r2b.code, ONCE__V1__CODE__OK);
    if (r2.rv == 0) {
        assert_same_reply(&r2, &r2b);
    }
    after = get(h, "m");
    r2c = incr(h, cid, 2, 0, "m", CALL_MS);
    assert_same_reply(&r2b, &r2c);
    assert_true(r2c.replayed);
    assert_int_equal(get(h, "m"), after);
    if (onced == NULL) {
        assert_int_equal(r2b.value, after); /* the reply tells the truth */
    }
    r3 = incr(h, cid, 3, 0, "m", CALL_MS);
    assert_ok(&r3, after + 1);
    print_message("  %-22s original %s, retry %s value %lld, counter %lld: "
                  "%lld effect(s)\n",
                  fault, r2.rv == 0 ? "arrived" : "lost",
                  r2b.replayed ? "replayed" : "executed", (long long)r2b.value,
                  (long long)after, (long long)(after - 1));
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
    return (int)(after - 1);
}

/* The call-path points, in the order a call passes them; write_between and
 * its neighbours are the crash matrix's before/between/after columns. */
static const char *const call_points[] = {
    "request_accepted", "batch_staged", "write_between",
    "batch_written",    "reply_sent",
};
#define NCALL (sizeof(call_points) / sizeof(call_points[0]))

static void
row(const char *onced, const char *label, int effects[NCALL])
{
    print_message("%s:\n", label);
    for (size_t i = 0; i < NCALL; i++) {
        effects[i] = call_point(onced, call_points[i]);
    }
    print_message("%s: before/between/after the write = [%d,%d,%d]\n", label,
                  effects[1], effects[2], effects[3]);
}

static void
test_call_path_atomic(void **state)
{
    int e[NCALL];

    row(NULL, "onced (atomic)", e);
    for (size_t i = 0; i < NCALL; i++) {
        assert_int_equal(e[i], 1);
    }
    /* A lost reply at either reply point: the retry replays, no second
     * effect. */
    assert_int_equal(call_point(NULL, "batch_written:drop"), 1);
    assert_int_equal(call_point(NULL, "reply_sent:drop"), 1);
}

static void
test_call_path_effect_first(void **state)
{
    int e[NCALL];

    row(ONCED_SPLIT_EFFECT_FIRST, "onced_split_effect_first", e);
    /* The matrix catches it: an effect without its record is run again. */
    assert_int_equal(e[1], 1);
    assert_int_equal(e[2], 2);
    assert_int_equal(e[3], 1);
}

static void
test_call_path_record_first(void **state)
{
    int e[NCALL];

    row(ONCED_SPLIT_RECORD_FIRST, "onced_split_record_first", e);
    /* The matrix catches it: a record without its effect replays a
     * result that never happened. */
    assert_int_equal(e[1], 1);
    assert_int_equal(e[2], 0);
    assert_int_equal(e[3], 1);
}

/*
 * ack_applied: call 3 carries the acknowledgement of 1 and 2 and onced dies
 * right after applying it in memory. After the restart the watermark is
 * the durable one again, so a late retry of 2 is answered from its record
 * (the same reply) or STALE_RPC — never run again; 3's retry runs once.
 */
static void
test_ack_applied(void **state)
{
    harness *h = NULL;
    reply r[3], a;
    uint64_t cid;

    assert_int_equal(harness_start(&h), 0);
    cid = lease(h, 600000);
    for (int i = 0; i < 2; i++) {
        r[i] = incr(h, cid, (uint64_t)i + 1, 0, "a", CALL_MS);
        assert_ok(&r[i], i + 1);
    }
    restart(h, "ack_applied");
    r[2] = incr(h, cid, 3, 3, "a", 1000);
    assert_int_not_equal(r[2].rv, 0);
    assert_crashed(h, "ack_applied");
    restart(h, NULL);
    a = incr(h, cid, 2, 0, "a", CALL_MS);
    if (a.code == ONCE__V1__CODE__OK) {
        assert_same_reply(&r[1], &a);
    } else {
        assert_status(&a, ONCE__V1__CODE__FAILED_PRECONDITION, "STALE_RPC");
    }
    a = incr(h, cid, 3, 3, "a", CALL_MS);
    assert_ok(&a, 3);
    a = incr(h, cid, 2, 0, "a", CALL_MS);
    assert_status(&a, ONCE__V1__CODE__FAILED_PRECONDITION, "STALE_RPC");
    assert_int_equal(get(h, "a"), 3);
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

/*
 * The collector's points. Calls 1..5 complete unacknowledged; onced
 * restarts armed; call 6 acknowledges 1..5 and the next collector pass
 * persists the watermark (with budget 2: deletes 1 and 2, durable watermark
 * 3, acknowledged records 3..5 still stored) or deletes all five, and onced
 * dies after that batch is durable. After the restart each retry of 1..6 is
 * its original reply or STALE_RPC, and the counter stays 6.
 */
static void
gc_point(const char *fault, const char *budget, int stale_below)
{
    const char *args[] = {"--gc-interval", "50ms", "--gc-budget", budget, NULL};
    harness *h = NULL;
    reply r[6], a;
    uint64_t cid;

    assert_int_equal(harness_start_args(&h, args), 0);
    cid = lease(h, 600000);
    for (int i = 0; i < 5; i++) {
        r[i] = incr(h, cid, (uint64_t)i + 1, 0, "g", CALL_MS);
        assert_ok(&r[i], i + 1);
    }
    restart(h, fault);
    r[5] = incr(h, cid, 6, 6, "g", CALL_MS);
    assert_crashed(h, fault);
    restart(h, NULL);
    for (int i = 0; i < 6; i++) {
        a = incr(h, cid, (uint64_t)i + 1, 0, "g", CALL_MS);
        if (i + 1 < stale_below) {
            assert_status(&a, ONCE__V1__CODE__FAILED_PRECONDITION, "STALE_RPC");
        } else if (r[i].rv == 0) {
            assert_same_reply(&r[i], &a);
        } else {
            assert_ok(&a, 6); /* call 6 ran exactly once, before or now */
        }
    }
    assert_int_equal(get(h, "g"), 6);
    a = incr(h, cid, 7, 7, "g", CALL_MS);
    assert_ok(&a, 7);
    print_message("  %-22s retries of 1..%d STALE_RPC, the rest replayed; "
                  "counter 7 after call 7\n",
                  fault, stale_below - 1);
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

static void
test_watermark_persisted(void **state)
{
    gc_point("watermark_persisted", "2", 3);
}

static void
test_records_deleted(void **state)
{
    gc_point("records_deleted", "20000", 6);
}

/*
 * lease_ended: a lease of 1 s is left to expire after calls 1 and 2; onced
 * dies once the end is durable, before any record is reclaimed. After the
 * restart the lease stays ended: retries are LEASE_EXPIRED and the counter
 * stays 2.
 */
static void
test_lease_ended(void **state)
{
    const char *args[] = {"--gc-interval", "50ms", NULL};
    harness *h = NULL;
    reply r, a;
    uint64_t cid;

    assert_int_equal(harness_start_args(&h, args), 0);
    restart(h, "lease_ended"); /* no lease yet: nothing ends before ours */
    cid = lease(h, 1000);
    for (int i = 0; i < 2; i++) {
        r = incr(h, cid, (uint64_t)i + 1, 0, "l", CALL_MS);
        assert_ok(&r, i + 1);
    }
    assert_crashed(h, "lease_ended");
    restart(h, NULL);
    for (int i = 0; i < 2; i++) {
        a = incr(h, cid, (uint64_t)i + 1, 0, "l", CALL_MS);
        assert_status(&a, ONCE__V1__CODE__FAILED_PRECONDITION, "LEASE_EXPIRED");
    }
    assert_int_equal(get(h, "l"), 2);
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_call_path_atomic),
        cmocka_unit_test(test_call_path_effect_first),
        cmocka_unit_test(test_call_path_record_first),
        cmocka_unit_test(test_ack_applied),
        cmocka_unit_test(test_watermark_persisted),
        cmocka_unit_test(test_records_deleted),
        cmocka_unit_test(test_lease_ended),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
