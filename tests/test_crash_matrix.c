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
 * nothing. Every call-path row runs twice: with one call, and with one
 * batch envelope (once.v1.Batch) of three new calls around a conflicting
 * reuse of an id and garbage, which must fail alone. Then libonce's own
 * batches (tests/load.c): a shared handle and async calls in flight
 * through a crash or a lost reply at each point, values exactly {1..N}.
 * Invariant: every wait is bounded; a point that never fires fails the
 * test (a fault point that does not fire would make its row vacuous).
 * Never: uses libonce for the calls of the raw rows (its retries would
 * hide which attempt did what): ids, acknowledgements, attempts and
 * batches are explicit there; the load rows use it on purpose.
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
#include "tests/load.h"

#define INCR     "/once.v1.Counter/Increment"
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

/* The reply of one call, from its decoded Response (resp NULL: rv). */
static reply
reply_of(int rv, const Once__V1__Response *resp)
{
    reply out;

    memset(&out, 0, sizeof(out));
    out.value = -1;
    out.rv = rv;
    if (rv != 0 || resp == NULL) {
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
    return out;
}

/* Packs Increment(name, by) as (cid, seq) carrying first_incomplete fi
 * into *env (malloc'd). 0 or -1. */
static int
incr_env(uint64_t cid, uint64_t seq, uint64_t fi, const char *name, int64_t by,
         uint8_t **env, size_t *elen)
{
    uint8_t *pl = NULL;
    size_t plen;
    int rv = -1;

    *env = NULL;
    if (harness_incr_payload(name, by, &pl, &plen) == 0 &&
        harness_envelope_fi(INCR, cid, seq, fi, pl, plen, env, elen) == 0) {
        rv = 0;
    }
    free(pl);
    return rv;
}

/* Sends Increment(name, by) as (cid, seq) carrying first_incomplete fi. */
static reply
incr(const harness *h, uint64_t cid, uint64_t seq, uint64_t fi,
     const char *name, int timeout_ms)
{
    Once__V1__Response *resp = NULL;
    uint8_t *env = NULL;
    size_t elen;
    reply out;

    if (incr_env(cid, seq, fi, name, 1, &env, &elen) != 0) {
        out = reply_of(-1, NULL);
    } else {
        int rv = harness_raw_rpc(h->url, env, elen, &resp, timeout_ms);
        out = reply_of(rv, resp);
    }
    free(env);
    if (resp != NULL) {
        once__v1__response__free_unpacked(resp, NULL);
    }
    return out;
}

/* The counter as onced has it now. */
static int64_t
get(const harness *h, const char *name)
{
    return harness_raw_counter(h->url, name);
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
 * What meets the fault: one Increment (call 2), or one batch envelope
 * (once.v1.Batch) whose entries are, in order, new calls 2 and 3, a reuse
 * of call 1's id with another payload, bytes that are no envelope, and new
 * call 4. The conflict and the garbage must fail alone, every time, and
 * the three increments beside them must each leave exactly one effect.
 */
typedef enum unit_kind { UNIT_PLAIN, UNIT_BATCH } unit_kind;

typedef enum ent_kind { ENT_INCR, ENT_CONFLICT, ENT_GARBAGE } ent_kind;

static const ent_kind batch_ents[] = {ENT_INCR, ENT_CONFLICT, ENT_INCR,
                                      ENT_GARBAGE, ENT_INCR};
#define NENT (sizeof(batch_ents) / sizeof(batch_ents[0]))

typedef struct unit {
    unit_kind kind;
    size_t n;      /* entries: 1, or NENT */
    int incs;      /* increments among them */
    uint64_t next; /* the first seq after the unit's */
    reply r[NENT];
} unit;

static ent_kind
unit_ent(const unit *u, size_t i)
{
    return u->kind == UNIT_PLAIN ? ENT_INCR : batch_ents[i];
}

/* Sends the unit under the same ids every time (a resend is what a client
 * does when the reply was lost): each entry's reply, or all rv when none
 * came. */
static unit
send_unit(const harness *h, unit_kind kind, uint64_t cid, int timeout_ms)
{
    Once__V1__Response *resp = NULL;
    Once__V1__BatchResponse *br = NULL;
    uint8_t *ents[NENT], *env = NULL;
    size_t lens[NENT], elen;
    uint64_t seq = 2;
    unit u;
    int rv;

    memset(&u, 0, sizeof(u));
    u.kind = kind;
    if (kind == UNIT_PLAIN) {
        u.n = 1;
        u.incs = 1;
        u.next = 3;
        u.r[0] = incr(h, cid, 2, 0, "m", timeout_ms);
        return u;
    }
    u.n = NENT;
    for (size_t i = 0; i < NENT; i++) {
        switch (batch_ents[i]) {
        case ENT_INCR:
            assert_int_equal(
                incr_env(cid, seq++, 0, "m", 1, &ents[i], &lens[i]), 0);
            u.incs++;
            break;
        case ENT_CONFLICT: /* call 1's id, another payload */
            assert_int_equal(incr_env(cid, 1, 0, "m", 5, &ents[i], &lens[i]),
                             0);
            break;
        case ENT_GARBAGE:
            assert_non_null(ents[i] =
                                (uint8_t *)strdup("\xff\xff no envelope"));
            lens[i] = strlen((char *)ents[i]);
            break;
        }
    }
    u.next = seq;
    assert_int_equal(harness_batch_envelope(ents, lens, NENT, &env, &elen), 0);
    rv = harness_raw_rpc(h->url, env, elen, &resp, timeout_ms);
    if (rv == 0) {
        /* The batch itself is transport: always OK, its entries carry the
         * outcomes. */
        assert_true(resp->status == NULL || resp->status->code == 0);
        br = once__v1__batch_response__unpack(NULL, resp->payload.len,
                                              resp->payload.data);
        assert_non_null(br);
        assert_int_equal(br->n_responses, NENT);
    }
    for (size_t i = 0; i < NENT; i++) {
        Once__V1__Response *er = NULL;

        if (br != NULL) {
            er = once__v1__response__unpack(NULL, br->responses[i].len,
                                            br->responses[i].data);
            assert_non_null(er);
        }
        u.r[i] = reply_of(rv, er);
        if (er != NULL) {
            once__v1__response__free_unpacked(er, NULL);
        }
        free(ents[i]);
    }
    if (br != NULL) {
        once__v1__batch_response__free_unpacked(br, NULL);
    }
    if (resp != NULL) {
        once__v1__response__free_unpacked(resp, NULL);
    }
    free(env);
    return u;
}

/* Every entry answered as its kind must be: increments OK, the conflict
 * RPC_ID_CONFLICT, the garbage MALFORMED_ENVELOPE. */
static void
assert_unit_answered(const unit *u)
{
    for (size_t i = 0; i < u->n; i++) {
        switch (unit_ent(u, i)) {
        case ENT_INCR:
            assert_int_equal(u->r[i].rv, 0);
            assert_int_equal(u->r[i].code, ONCE__V1__CODE__OK);
            break;
        case ENT_CONFLICT:
            assert_status(&u->r[i], ONCE__V1__CODE__ALREADY_EXISTS,
                          "RPC_ID_CONFLICT");
            break;
        case ENT_GARBAGE:
            assert_status(&u->r[i], ONCE__V1__CODE__INVALID_ARGUMENT,
                          "MALFORMED_ENVELOPE");
            break;
        }
    }
}

/* Entry by entry, again is orig (status and payload bytes); replayed says
 * whether every increment of again must be a replay. */
static void
assert_same_unit(const unit *orig, const unit *again, bool replayed)
{
    for (size_t i = 0; i < orig->n; i++) {
        assert_same_reply(&orig->r[i], &again->r[i]);
        if (replayed && unit_ent(orig, i) == ENT_INCR) {
            assert_true(again->r[i].replayed);
        }
    }
}

/* The increments' values as the shipped onced must report them: in entry
 * order, the last one the counter. */
static void
assert_unit_truthful(const unit *u, int64_t counter)
{
    int64_t want = counter - u->incs + 1;

    for (size_t i = 0; i < u->n; i++) {
        if (unit_ent(u, i) == ENT_INCR) {
            assert_int_equal(u->r[i].value, want);
            want++;
        }
    }
}

/*
 * The call path. Call 1 completes; onced restarts armed with fault; the
 * unit (call 2, or the batch) meets the fault; onced restarts disarmed on
 * the same data; the unit is sent again under the same ids. Returns the
 * number of effects the unit left (the counter's move), after checking
 * what holds for every server: every entry is answered as its kind must
 * be (the conflict and the garbage alone fail), a second resend replays
 * the first resend's replies, and the resend equals the original reply
 * when one arrived. The shipped onced must also report the counter it
 * left; the split builds need not — that is what they get wrong.
 */
static int
call_point(const char *onced, const char *fault, unit_kind kind)
{
    const char *args[] = {"--gc-interval", "10m", NULL};
    bool drop = strstr(fault, ":drop") != NULL;
    harness *h = NULL;
    reply r1, r3;
    unit u2, u2b, u2c;
    uint64_t cid;
    int64_t after;

    assert_int_equal(harness_start_onced(&h, onced, args), 0);
    cid = lease(h, 600000);
    r1 = incr(h, cid, 1, 0, "m", CALL_MS);
    assert_ok(&r1, 1);

    restart(h, fault);
    u2 = send_unit(h, kind, cid, 1000);
    if (drop) {
        /* Lost reply, onced alive: the resend goes to the same process,
         * then once more across a plain crash. */
        assert_int_equal(u2.r[0].rv, NNG_ETIMEDOUT);
        assert_int_equal(harness_wait_exit(h, 100), -1);
        u2b = send_unit(h, kind, cid, CALL_MS);
        assert_unit_answered(&u2b);
        for (size_t i = 0; i < u2b.n; i++) {
            if (unit_ent(&u2b, i) == ENT_INCR) {
                assert_true(u2b.r[i].replayed);
            }
        }
        restart(h, NULL);
    } else {
        assert_crashed(h, fault);
        assert_int_equal(harness_set_fault(h, NULL), 0);
        assert_int_equal(harness_restart(h), 0);
        u2b = send_unit(h, kind, cid, CALL_MS);
    }
    assert_unit_answered(&u2b);
    if (u2.r[0].rv == 0) {
        assert_same_unit(&u2, &u2b, false);
    }
    after = get(h, "m");
    u2c = send_unit(h, kind, cid, CALL_MS);
    assert_same_unit(&u2b, &u2c, true);
    assert_int_equal(get(h, "m"), after);
    if (onced == NULL) {
        assert_unit_truthful(&u2b, after); /* the replies tell the truth */
    }
    r3 = incr(h, cid, u2.next, 0, "m", CALL_MS);
    assert_ok(&r3, after + 1);
    print_message("  %-22s original %s, resend %s, counter %lld: "
                  "%lld effect(s) of %d\n",
                  fault, u2.r[0].rv == 0 ? "arrived" : "lost",
                  u2b.r[0].replayed ? "replayed" : "executed", (long long)after,
                  (long long)(after - 1), u2.incs);
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
row(const char *onced, const char *label, unit_kind kind, int effects[NCALL])
{
    print_message("%s, %s:\n", label,
                  kind == UNIT_PLAIN ? "one call" : "one batch");
    for (size_t i = 0; i < NCALL; i++) {
        effects[i] = call_point(onced, call_points[i], kind);
    }
    print_message("%s: before/between/after the write = [%d,%d,%d]\n", label,
                  effects[1], effects[2], effects[3]);
}

/* The shipped onced: exactly one effect per increment at every point;
 * for a batch also a crash in the middle of it (entry 2 ran, in memory
 * only) and a lost batch reply at either reply point. */
static void
call_path_atomic(unit_kind kind)
{
    int e[NCALL], incs = kind == UNIT_PLAIN ? 1 : 3;

    row(NULL, "onced (atomic)", kind, e);
    for (size_t i = 0; i < NCALL; i++) {
        assert_int_equal(e[i], incs);
    }
    if (kind == UNIT_BATCH) {
        assert_int_equal(call_point(NULL, "batch_entry@2", kind), incs);
    }
    /* A lost reply at either reply point: the resend replays, no second
     * effect. */
    assert_int_equal(call_point(NULL, "batch_written:drop", kind), incs);
    assert_int_equal(call_point(NULL, "reply_sent:drop", kind), incs);
}

static void
test_call_path_atomic(void **state)
{
    call_path_atomic(UNIT_PLAIN);
}

static void
test_batch_path_atomic(void **state)
{
    call_path_atomic(UNIT_BATCH);
}

/* The split builds, caught in both forms: effect first runs an effect
 * without its record again (one effect too many), record first replays a
 * result that never happened (one too few). In a batch the split write
 * crashes between the first increment's two writes, so one of its three
 * is doubled or lost: [1,2,1] / [1,0,1] for one call, [3,4,3] / [3,2,3]
 * for the batch. */
static void
split_row(const char *onced, const char *label, unit_kind kind, int delta)
{
    int e[NCALL], incs = kind == UNIT_PLAIN ? 1 : 3;

    row(onced, label, kind, e);
    assert_int_equal(e[1], incs);
    assert_int_equal(e[2], incs + delta);
    assert_int_equal(e[3], incs);
}

static void
test_call_path_effect_first(void **state)
{
    split_row(ONCED_SPLIT_EFFECT_FIRST, "onced_split_effect_first", UNIT_PLAIN,
              1);
    split_row(ONCED_SPLIT_EFFECT_FIRST, "onced_split_effect_first", UNIT_BATCH,
              1);
}

static void
test_call_path_record_first(void **state)
{
    split_row(ONCED_SPLIT_RECORD_FIRST, "onced_split_record_first", UNIT_PLAIN,
              -1);
    split_row(ONCED_SPLIT_RECORD_FIRST, "onced_split_record_first", UNIT_BATCH,
              -1);
}

/*
 * The same points under libonce's own batches: LOAD_N increments on one
 * handle (16 threads sharing it, or one thread with 32 async calls in
 * flight) while onced, armed with fault, dies there (or loses that reply)
 * and is restarted disarmed. Calls that ended OUTCOME_UNKNOWN are resent
 * by libonce or retried under their ids (tests/load.c). The values must be
 * exactly {1..LOAD_N} and the counter LOAD_N. batch_entry fires only
 * inside a batch, so its crash proves the batch; for every point Stats
 * batch_entries of the restarted onced must show the load kept coalescing.
 */
#define LOAD_N 200

/* Whether onced's log has line (the fault seam logs what it did). */
static bool
log_has(const harness *h, const char *line)
{
    char buf[512];
    bool found = false;
    FILE *f = fopen(h->log, "r");

    while (f != NULL && !found && fgets(buf, sizeof(buf), f) != NULL) {
        found = strstr(buf, line) != NULL;
    }
    if (f != NULL) {
        fclose(f);
    }
    return found;
}

static void
load_point(load_mode mode, const char *fault)
{
    const char *args[] = {"--gc-interval", "10m", NULL};
    bool drop = strstr(fault, ":drop") != NULL, died = false;
    harness *h = NULL;
    load *l = NULL;
    load_opts o = {0};
    uint64_t batched;
    int64_t end;
    size_t n;

    assert_int_equal(harness_start_args(&h, args), 0);
    restart(h, fault);
    o.url = h->url;
    o.counter = "load";
    o.mode = mode;
    o.width = mode == LOAD_SHARED ? 16 : 32;
    o.max_calls = LOAD_N;
    o.stop_ms = harness_now_ms() + 120000;
    load_start(&l, &o);
    end = harness_now_ms() + 180000;
    while (load_running(l) && harness_now_ms() < end) {
        int status;

        if (!died && (status = harness_wait_exit(h, 50)) != -1) {
            if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
                harness_dump_log(h);
            }
            assert_true(WIFSIGNALED(status));
            assert_int_equal(WTERMSIG(status), SIGKILL);
            died = true;
            assert_int_equal(harness_set_fault(h, NULL), 0);
            assert_int_equal(harness_restart(h), 0);
        } else if (died || drop) {
            harness_sleep_ms(50);
        }
    }
    n = load_join(l); /* values exactly {1..n} */
    batched = harness_batch_entries(h);
    assert_int_equal(n, LOAD_N);
    assert_int_equal(get(h, "load"), LOAD_N);
    if (drop) {
        assert_false(died);
        assert_true(log_has(h, "dropping the reply"));
    } else {
        assert_true(died);
    }
    print_message("  %-8s %-22s %s, %zu values exactly {1..%zu}, %llu "
                  "resolved after OUTCOME_UNKNOWN, %llu batch entries after "
                  "the restart\n",
                  load_mode_name(mode), fault, drop ? "reply lost" : "crashed",
                  n, n, (unsigned long long)load_unknown(l),
                  (unsigned long long)batched);
    assert_true(batched > 0);
    load_free(l);
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

/* Hit 3 of each point: past the first two messages, which leave alone
 * while nothing of the handle is in flight. */
static const char *const load_points[] = {
    "batch_entry@3",        "request_accepted@3", "batch_staged@3",
    "write_between@3",      "batch_written@3",    "reply_sent@3",
    "batch_written@3:drop",
};

static void
load_row(load_mode mode)
{
    for (size_t i = 0; i < sizeof(load_points) / sizeof(load_points[0]); i++) {
        load_point(mode, load_points[i]);
    }
}

static void
test_load_shared(void **state)
{
    load_row(LOAD_SHARED);
}

static void
test_load_async(void **state)
{
    load_row(LOAD_ASYNC);
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
        cmocka_unit_test(test_batch_path_atomic),
        cmocka_unit_test(test_call_path_effect_first),
        cmocka_unit_test(test_call_path_record_first),
        cmocka_unit_test(test_load_shared),
        cmocka_unit_test(test_load_async),
        cmocka_unit_test(test_ack_applied),
        cmocka_unit_test(test_watermark_persisted),
        cmocka_unit_test(test_records_deleted),
        cmocka_unit_test(test_lease_ended),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
