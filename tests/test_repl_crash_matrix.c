/*
 * test_repl_crash_matrix.c — the crash matrix of the replicated path
 * (onced --replicate; tests/README.md "Crash matrix"): a replica dies at
 * each fault point of store/fault.h that the replicated path passes, a
 * call in flight is retried under the same rpc id through the replica
 * that takes over, and every effect happened exactly once.
 *
 * Owns: one etcd member and two onced_test replicas (tests/cluster.c),
 * reused by every row: replica 0 ("A") carries the armed point
 * (ONCED_FAULT in its environment), replica 1 ("B") never does. A leader
 * row: A leads; calls under explicit ids of one lease go to A until it
 * dies there (SIGKILL, within a bound: a point that never fires fails the
 * row); B takes over once A's etcd lease lapsed; every call of the row is
 * sent again under its id to B until answered — each must report its own
 * value (the counter before the row plus its place), the same reply bytes
 * when the original arrived — and the counter, read through B, moved once
 * per call. Then A, restarted, must catch up: B stops, A leads, and A
 * reports the same counter. The handover row crashes A as it takes over
 * from B; the seed row crashes A, wiped, while it loads B's snapshot. The
 * split-append row's call is a KV Txn larger than one log part: the KV
 * revision must have moved once.
 * Invariant: every wait is bounded and waits for a condition.
 * Never: uses libonce for the row's calls (its retries would hide which
 * attempt did what): ids and attempts are explicit.
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

#include "proto/kv.pb-c.h"
#include "repl/etcd.h"
#include "tests/cluster.h"
#include "tests/harness.h"

#define TTL_S    2     /* the replicas' etcd lease */
#define CALL_MS  2000  /* one raw attempt */
#define CRASH_MS 15000 /* how long an armed replica may take to die */
#define RETRY_MS 30000 /* a failover ends within this */
#define ROW_MAX  40    /* calls of one leader row, at most */
#define A        0     /* the replica that carries the fault */
#define B        1

#define INCR     "/once.v1.Counter/Increment"
#define KV_TXN   "/once.v1.KV/Txn"
#define KV_RANGE "/once.v1.KV/Range"
#define COUNTER  "rc"
/* The split row's Txn: BIG_PUTS values of BIG_VALUE bytes, above one log
 * part (REPL_PART_MAX, 768 KiB) together. */
#define BIG_PUTS  13
#define BIG_VALUE 65536

/* One call: its envelope (sent again unchanged) and its first reply. */
typedef struct call {
    uint8_t *env;
    size_t len;
    bool kv; /* a KV Txn (value: its revision), else an Increment */
    int rv;  /* 0: the original reply arrived */
    int code;
    char reason[64];
    uint8_t payload[1024];
    size_t plen;
    int64_t value;
} call;

typedef struct fixture {
    etcd_cluster *etcd;
    replica_set *rs;
    uint64_t cid;    /* the lease every row's calls run under */
    uint64_t seq;    /* the next seq of cid */
    int64_t counter; /* what the counter must be now */
    call calls[ROW_MAX];
    size_t ncalls;
} fixture;

/* Sends c's envelope to url and keeps the reply's code and payload. */
static void
call_send(call *c, const char *url, int timeout_ms)
{
    Once__V1__Response *resp = NULL;

    c->rv = harness_raw_rpc(url, c->env, c->len, &resp, timeout_ms);
    c->code = -1;
    c->plen = 0;
    c->value = -1;
    if (c->rv != 0) {
        return;
    }
    c->code = resp->status != NULL ? (int)resp->status->code : 0;
    snprintf(c->reason, sizeof(c->reason), "%s",
             resp->status != NULL && resp->status->reason != NULL
                 ? resp->status->reason
                 : "");
    /* (no memcpy from the NULL data of an empty payload: UBSan) */
    if (resp->payload.len > 0 && resp->payload.len <= sizeof(c->payload)) {
        memcpy(c->payload, resp->payload.data, resp->payload.len);
        c->plen = resp->payload.len;
    }
    if (c->code == ONCE__V1__CODE__OK && c->kv) {
        Once__V1__KvTxnResponse *t = once__v1__kv_txn_response__unpack(
            NULL, resp->payload.len, resp->payload.data);
        c->value = t != NULL ? (int64_t)t->revision : -1;
        once__v1__kv_txn_response__free_unpacked(t, NULL);
    } else if (c->code == ONCE__V1__CODE__OK) {
        Once__V1__IncrementResponse *v = once__v1__increment_response__unpack(
            NULL, resp->payload.len, resp->payload.data);
        c->value = v != NULL ? v->value : -1;
        once__v1__increment_response__free_unpacked(v, NULL);
    }
    once__v1__response__free_unpacked(resp, NULL);
}

/* The row's next call, zeroed. */
static call *
call_new(fixture *f)
{
    call *c;

    assert_true(f->ncalls < ROW_MAX);
    c = &f->calls[f->ncalls++];
    memset(c, 0, sizeof(*c));
    return c;
}

/* A new Increment of COUNTER by 1 under the next id of the row's lease. */
static call *
call_incr(fixture *f)
{
    call *c = call_new(f);
    uint8_t *pl = NULL;
    size_t plen;

    assert_int_equal(harness_incr_payload(COUNTER, 1, &pl, &plen), 0);
    assert_int_equal(
        harness_envelope(INCR, f->cid, f->seq++, pl, plen, &c->env, &c->len),
        0);
    free(pl);
    return c;
}

/* A new KV Txn of BIG_PUTS puts (one log entry of several parts). */
static call *
call_big_txn(fixture *f)
{
    Once__V1__KvTxnRequest t = ONCE__V1__KV_TXN_REQUEST__INIT;
    Once__V1__KvOp ops[BIG_PUTS], *opp[BIG_PUTS];
    Once__V1__KvPut puts[BIG_PUTS];
    char keys[BIG_PUTS][16];
    uint8_t *value = malloc(BIG_VALUE), *pl;
    call *c = call_new(f);
    size_t plen;

    assert_non_null(value);
    memset(value, 'v', BIG_VALUE);
    for (int i = 0; i < BIG_PUTS; i++) {
        once__v1__kv_op__init(&ops[i]);
        once__v1__kv_put__init(&puts[i]);
        snprintf(keys[i], sizeof(keys[i]), "big/%02d", i);
        puts[i].key.data = (uint8_t *)keys[i];
        puts[i].key.len = strlen(keys[i]);
        puts[i].value.data = value;
        puts[i].value.len = BIG_VALUE;
        ops[i].op_case = ONCE__V1__KV_OP__OP_PUT;
        ops[i].put = &puts[i];
        opp[i] = &ops[i];
    }
    t.then_ops = opp;
    t.n_then_ops = BIG_PUTS;
    plen = once__v1__kv_txn_request__get_packed_size(&t);
    assert_non_null(pl = malloc(plen));
    once__v1__kv_txn_request__pack(&t, pl);
    assert_int_equal(
        harness_envelope(KV_TXN, f->cid, f->seq++, pl, plen, &c->env, &c->len),
        0);
    c->kv = true;
    free(pl);
    free(value);
    return c;
}

static void
calls_free(fixture *f)
{
    for (size_t i = 0; i < f->ncalls; i++) {
        free(f->calls[i].env);
    }
    f->ncalls = 0;
}

/* A read (no rpc id) through replica i: the response's payload unpacked
 * by the caller; fails the test unless OK. */
static Once__V1__Response *
read_at(fixture *f, int i, const char *method, const void *pl, size_t plen)
{
    Once__V1__Response *resp = NULL;
    uint8_t *env = NULL;
    size_t elen;

    assert_int_equal(harness_envelope(method, 0, 0, pl, plen, &env, &elen), 0);
    assert_int_equal(harness_raw_rpc(f->rs->url[i], env, elen, &resp, CALL_MS),
                     0);
    free(env);
    assert_non_null(resp->status);
    assert_int_equal(resp->status->code, ONCE__V1__CODE__OK);
    return resp;
}

/* The counter as replica i (leading) has it. */
static int64_t
counter_at(fixture *f, int i)
{
    return harness_raw_counter(f->rs->url[i], COUNTER);
}

/* The KV store's revision as replica i (leading) has it. */
static int64_t
kv_revision_at(fixture *f, int i)
{
    Once__V1__KvRangeRequest rq = ONCE__V1__KV_RANGE_REQUEST__INIT;
    Once__V1__Response *resp;
    Once__V1__KvRangeResponse *v;
    uint8_t pl[64];
    int64_t rev;

    rq.key.data = (uint8_t *)"big/";
    rq.key.len = 4;
    rq.prefix = true;
    rq.keys_only = true;
    resp =
        read_at(f, i, KV_RANGE, pl, once__v1__kv_range_request__pack(&rq, pl));
    v = once__v1__kv_range_response__unpack(NULL, resp->payload.len,
                                            resp->payload.data);
    assert_non_null(v);
    rev = (int64_t)v->revision;
    once__v1__kv_range_response__free_unpacked(v, NULL);
    once__v1__response__free_unpacked(resp, NULL);
    return rev;
}

/* Replica i died of the armed SIGKILL at point (within CRASH_MS). */
static void
assert_died_at(fixture *f, int i, const char *point)
{
    char line[96];
    int status = replicas_wait_exit(f->rs, i, CRASH_MS);

    /* The log names the point without its "@N". */
    snprintf(line, sizeof(line), "fault point \"%.*s\": crashing",
             (int)strcspn(point, "@"), point);
    if (status == -1 || !WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL ||
        !replicas_log_has(f->rs, i, line)) {
        replicas_dump(f->rs);
        fail_msg("replica %d armed with %s did not die there (status %d)", i,
                 point, status);
    }
}

/* Sends c again, unchanged, to replica i until it answers other than
 * UNAVAILABLE (a follower's refusal, or no reply during the failover);
 * fails the test unless OK with value, and the original's bytes when the
 * original reply arrived. */
static void
retry_until_answered(fixture *f, int i, const call *c, int64_t value)
{
    int64_t until = harness_now_ms() + RETRY_MS;
    call again = *c;

    do {
        call_send(&again, f->rs->url[i], CALL_MS);
        if (again.rv == 0 && again.code != ONCE__V1__CODE__UNAVAILABLE) {
            break;
        }
        harness_sleep_ms(50);
    } while (harness_now_ms() < until);
    if (again.code != ONCE__V1__CODE__OK || again.value != value) {
        replicas_dump(f->rs);
        fail_msg("retry at replica %d: rv %d code %d %s value %lld, not OK "
                 "%lld",
                 i, again.rv, again.code, again.reason, (long long)again.value,
                 (long long)value);
    }
    if (c->rv == 0 && c->code == ONCE__V1__CODE__OK) {
        assert_int_equal(again.plen, c->plen);
        assert_memory_equal(again.payload, c->payload, c->plen);
    }
}

/* Restarts replica i with env ("" none) in its environment. */
static void
restart_with(fixture *f, int i, const char *env)
{
    snprintf(f->rs->env[i], sizeof(f->rs->env[i]), "%s", env);
    if (replicas_restart(f->rs, i) != 0) {
        replicas_dump(f->rs);
        fail_msg("replica %d did not come back", i);
    }
}

/* Waits (at most RETRY_MS) until A leads or died; whether it leads. */
static bool
a_leads_or_died(fixture *f)
{
    int64_t until = harness_now_ms() + RETRY_MS;

    while (harness_now_ms() < until) {
        if (replicas_wait_exit(f->rs, A, 0) != -1) {
            return false;
        }
        if (replicas_leader(f->rs, B, 200) == A) {
            return true;
        }
    }
    replicas_dump(f->rs);
    fail_msg("replica 0 neither led nor died after replica 1 stopped");
    return false;
}

/* A, restarted armed with env ("" none), catches up and leads: B stops
 * cleanly (its leader key released) and A takes over; with check A must
 * report the counter (it applied the log to its end). B comes back
 * unarmed and follows. */
static void
promote_a(fixture *f, const char *env, bool check)
{
    restart_with(f, A, env);
    replicas_kill(f->rs, B, SIGTERM);
    if (!a_leads_or_died(f) && check) {
        replicas_dump(f->rs);
        fail_msg("replica 0 died taking over (armed: \"%s\")", env);
    }
    if (check) {
        assert_int_equal(counter_at(f, A), f->counter);
    }
    restart_with(f, B, "");
}

/* A stops cleanly and B (following) takes over. */
static void
demote_a(fixture *f)
{
    replicas_kill(f->rs, A, SIGTERM);
    if (replicas_leader(f->rs, A, RETRY_MS) != B) {
        replicas_dump(f->rs);
        fail_msg("replica 1 did not take over after replica 0 stopped");
    }
}

/* A is dead (or stopped) and B took over: every call of the row, sent
 * again under its id to B, reports its value — the increments the
 * counter before the row plus their place, the KV Txn the revision rev0
 * + 1 — and the original's bytes when that arrived; B's counter moved
 * once per increment and (rev0 >= 0) its KV revision once. */
static void
recover_at_b(fixture *f, const char *point, int64_t rev0)
{
    int64_t before = f->counter;
    size_t arrived = 0;

    for (size_t i = 0; i < f->ncalls; i++) {
        const call *c = &f->calls[i];
        int64_t want = c->kv ? rev0 + 1 : ++f->counter;

        if (c->rv == 0 && c->code == ONCE__V1__CODE__OK) {
            assert_int_equal(c->value, want);
            arrived++;
        }
        retry_until_answered(f, B, c, want);
    }
    assert_int_equal(counter_at(f, B), f->counter);
    if (rev0 >= 0) {
        assert_int_equal(kv_revision_at(f, B), rev0 + 1);
    }
    print_message("  %-18s %zu call(s), %zu original repl%s arrived; "
                  "counter %lld -> %lld through the new leader%s\n",
                  point, f->ncalls, arrived, arrived == 1 ? "y" : "ies",
                  (long long)before, (long long)f->counter,
                  rev0 >= 0 ? ", KV revision moved once" : "");
    calls_free(f);
}

/* Sends c to A until A answers it OK or died (a refusal or no reply
 * while A lives: A does not lead yet; the same id again). Whether A
 * answered. */
static bool
send_to_a(fixture *f, call *c)
{
    int64_t until = harness_now_ms() + CRASH_MS;

    do {
        call_send(c, f->rs->url[A], CALL_MS);
        if (c->rv == 0 && c->code == ONCE__V1__CODE__OK) {
            return true;
        }
        harness_sleep_ms(50);
    } while (replicas_wait_exit(f->rs, A, 0) == -1 && harness_now_ms() < until);
    return false;
}

/* Calls go to A (armed with point) until it died there: an Increment,
 * then (big) one KV Txn of several log parts, or Increments, ROW_MAX
 * calls at most. */
static void
calls_until_a_died(fixture *f, const char *point, bool big)
{
    for (;;) {
        call *c = big && f->ncalls == 1 ? call_big_txn(f) : call_incr(f);

        if (!send_to_a(f, c) || replicas_wait_exit(f->rs, A, 0) != -1 ||
            f->ncalls == ROW_MAX) {
            break;
        }
        harness_sleep_ms(100);
    }
    assert_died_at(f, A, point);
}

/* A leader row: A leads armed with point (checking it caught up after the
 * previous row), calls until it died there, B takes over. */
static void
leader_row(fixture *f, const char *point, bool big)
{
    char env[96];
    int64_t rev0;

    snprintf(env, sizeof(env), "ONCED_FAULT=%s", point);
    promote_a(f, env, true);
    rev0 = big ? kv_revision_at(f, A) : -1;
    calls_until_a_died(f, point, big);
    recover_at_b(f, point, rev0);
}

static int
setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    once_client *c = NULL;
    once_options o;
    once_status st;
    uint64_t granted = 0;

    if (f == NULL || etcd_cluster_start(&f->etcd, 1) != 0 ||
        replicas_start_led(&f->rs, f->etcd, 2, TTL_S, ONCED_TEST_PATH, NULL) !=
            0) {
        return -1;
    }
    once_options_init(&o);
    o.url = f->rs->url[A];
    o.no_lease = true;
    if (once_client_open(&c, &o, &st) != ONCE_OK ||
        once_lease_open(c, NULL, 3600000, &f->cid, &granted, &st) != ONCE_OK) {
        return -1;
    }
    once_client_close(c);
    f->seq = 1;
    *state = f;
    /* Every row starts with A stopped and B leading. */
    replicas_kill(f->rs, A, SIGTERM);
    return replicas_leader(f->rs, A, RETRY_MS) == B ? 0 : -1;
}

static int
teardown(void **state)
{
    fixture *f = *state;
    int rv = replicas_stop(f->rs);

    calls_free(f);
    replicas_free(f->rs);
    etcd_cluster_free(f->etcd);
    free(f);
    return rv;
}

/* The log's first index kept (/once/<cluster>/first; 1 when absent). */
static uint64_t
log_first(fixture *f)
{
    char key[128];
    etcd *e = NULL;
    etcd_kv *kvs = NULL;
    size_t n = 0;
    uint64_t first = 1;

    snprintf(key, sizeof(key), "/once/%s/first", f->rs->name);
    assert_int_equal(etcd_cluster_client(f->etcd, 2000, &e), 0);
    assert_int_equal(
        etcd_range(e, key, strlen(key), NULL, 0, 1, &kvs, &n, NULL, NULL), 0);
    if (n == 1) {
        first = strtoull(kvs[0].val, NULL, 10);
    }
    etcd_kvs_free(kvs, n);
    etcd_close(e);
    return first;
}

/* The call path: before the log append (request_accepted), after it and
 * before the local write (batch_staged: in the replicated path the entry
 * is in etcd there), after the local write (batch_written), after the
 * reply went out (reply_sent); call 1 of the row passes each, call 2
 * meets it. */
static void
test_request_accepted(void **state)
{
    leader_row(*state, "request_accepted@2", false);
}

static void
test_batch_staged(void **state)
{
    leader_row(*state, "batch_staged@2", false);
}

static void
test_batch_written(void **state)
{
    leader_row(*state, "batch_written@2", false);
}

static void
test_reply_sent(void **state)
{
    leader_row(*state, "reply_sent@2", false);
}

/* Between the parts of one entry (repl/lead.c): the run cut short is never
 * applied, by B or by A restarted; the Txn's retry runs it once. */
static void
test_append_part(void **state)
{
    leader_row(*state, "append_part", true);
}

/* The leader's trim thread (repl/trim.c) dies after deleting log keys,
 * before compacting etcd, while calls go on. Armed only after A caught up
 * (its first trim may come as it takes over). */
static void
test_trim_deleted(void **state)
{
    fixture *f = *state;

    promote_a(f, "", true);
    demote_a(f);
    promote_a(f, "ONCED_FAULT=trim_deleted", false);
    calls_until_a_died(f, "trim_deleted", false);
    recover_at_b(f, "trim_deleted", -1);
}

/* A wins as B stops and dies in the new process (repl/handover.c) after
 * taking the lease back, before it serves: nobody leads until that lease
 * lapses; B, back, takes over; a call sent to A meanwhile is retried. */
static void
test_handover_taken(void **state)
{
    fixture *f = *state;
    call *c;

    promote_a(f, "", true);
    demote_a(f);
    restart_with(f, A, "ONCED_FAULT=handover_taken");
    c = call_incr(f);
    call_send(c, f->rs->url[B], CALL_MS);
    assert_int_equal(c->code, ONCE__V1__CODE__OK);
    replicas_kill(f->rs, B, SIGTERM);
    call_send(call_incr(f), f->rs->url[A], CALL_MS);
    assert_died_at(f, A, "handover_taken");
    restart_with(f, B, "");
    recover_at_b(f, "handover_taken", -1);
}

/* A, wiped while the log no longer starts at 1, seeds from B's snapshot
 * (repl/seed.c) and dies after loading it, before finishing it; restarted,
 * it seeds again and, leading, reports the counter. */
static void
test_seed_chunk(void **state)
{
    fixture *f = *state;
    int64_t until = harness_now_ms() + RETRY_MS;
    call *c;

    promote_a(f, "", true);
    while (log_first(f) <= 1 && f->ncalls < ROW_MAX &&
           harness_now_ms() < until) {
        assert_true(send_to_a(f, call_incr(f)));
        harness_sleep_ms(100);
    }
    assert_true(log_first(f) > 1);
    demote_a(f);
    recover_at_b(f, "(before seeding)", -1);
    replicas_wipe(f->rs, A);
    snprintf(f->rs->env[A], sizeof(f->rs->env[A]), "ONCED_FAULT=seed_chunk");
    (void)replicas_restart(f->rs, A); /* it may die before it answers */
    c = call_incr(f);
    call_send(c, f->rs->url[B], CALL_MS);
    assert_died_at(f, A, "seed_chunk");
    recover_at_b(f, "seed_chunk", -1);
    restart_with(f, A, "");
    /* Seeded again before B stops (B is the only source). */
    while (!replicas_log_has(f->rs, A, "seeded from a snapshot") &&
           harness_now_ms() < until + RETRY_MS) {
        harness_sleep_ms(50);
    }
    assert_true(replicas_log_has(f->rs, A, "seeded from a snapshot"));
    replicas_kill(f->rs, A, SIGTERM);
    promote_a(f, "", true);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_accepted),
        cmocka_unit_test(test_batch_staged),
        cmocka_unit_test(test_batch_written),
        cmocka_unit_test(test_reply_sent),
        cmocka_unit_test(test_append_part),
        cmocka_unit_test(test_trim_deleted),
        cmocka_unit_test(test_handover_taken),
        cmocka_unit_test(test_seed_chunk),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
