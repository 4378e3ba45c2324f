/*
 * test_outbox.c — once.v1.Outbox and the KV Txn's emit against a real
 * onced and a real LevelDB (issue 24, SPEC section 12).
 *
 * Owns the checks of the server side of the outbox: every produced event
 * appears exactly once per offset, offsets dense from 1, ids (client_id,
 * seq, index) stable across a replayed producer call; an event and its
 * effect are never one without the other across the crash points of a
 * producing call and of an Ack, and a Read cut short by a crash delivers
 * the same events again; retention by acknowledgement (nothing reclaimed
 * while a consumer lags, everything once all acknowledged, an
 * unsubscribed consumer holds nothing), OUTBOX_FULL at the bound with
 * nothing written; a long-poll Read answered when an event commits.
 * Invariant: every wait is bounded; state is read through Read and
 * Topics, never through files.
 * Never: mocks onced or the store.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <once/admin.h>
#include <once/outbox.h>

#include "proto/grants.pb-c.h"
#include "proto/kv.pb-c.h"
#include "proto/outbox.pb-c.h"
#include "tests/harness.h"

#define OB(m)         "/once.v1.Outbox/" m
#define TXN           "/once.v1.KV/Txn"
#define RANGE         "/once.v1.KV/Range"
#define CALL_MS       10000
#define OUTBOX_SYSTEM "once.system"

/* ---- raw calls ------------------------------------------------------------
 */

typedef struct ob_reply {
    int rv; /* 0, or the nng error (no reply) */
    int code;
    char reason[64];
    bool replayed;
    uint8_t payload[64 * 1024];
    size_t plen;
} ob_reply;

/* Sends msg as method under cid:seq (0:0 for a read) on a fresh socket. */
static void
ob_send(const harness *h, const char *method, uint64_t cid, uint64_t seq,
        const ProtobufCMessage *msg, int timeout_ms, ob_reply *out)
{
    size_t plen = protobuf_c_message_get_packed_size(msg), elen;
    uint8_t *pl = malloc(plen + 1), *env = NULL;
    Once__V1__Response *resp = NULL;

    memset(out, 0, sizeof(*out));
    protobuf_c_message_pack(msg, pl);
    if (harness_envelope(method, cid, seq, pl, plen, &env, &elen) != 0) {
        out->rv = -1;
        free(pl);
        return;
    }
    out->rv = harness_raw_rpc(h->url, env, elen, &resp, timeout_ms);
    free(env);
    free(pl);
    if (out->rv != 0) {
        return;
    }
    if (resp->status != NULL) {
        out->code = (int)resp->status->code;
        snprintf(out->reason, sizeof(out->reason), "%s",
                 resp->status->reason != NULL ? resp->status->reason : "");
    }
    out->replayed = resp->replayed;
    if (resp->payload.len > 0 && resp->payload.len <= sizeof(out->payload)) {
        memcpy(out->payload, resp->payload.data, resp->payload.len);
        out->plen = resp->payload.len;
    }
    once__v1__response__free_unpacked(resp, NULL);
}

static void
ok(const ob_reply *r)
{
    if (r->rv != 0 || r->code != 0) {
        fail_msg("call failed: rv %d code %d %s", r->rv, r->code, r->reason);
    }
}

static uint64_t
lease(const harness *h)
{
    once_client *a = NULL;
    once_status st;
    uint64_t cid = 0, granted;

    assert_int_equal(harness_client(h, true, &a), ONCE_OK);
    assert_int_equal(once_lease_open(a, NULL, 600000, &cid, &granted, &st),
                     ONCE_OK);
    once_client_close(a);
    return cid;
}

/* A Txn under cid:seq: put key=val, then nemit events on topic whose
 * payloads are val (and val + "#i" after the first). */
static void
produce(const harness *h, uint64_t cid, uint64_t seq, const char *topic,
        const char *key, const char *val, size_t nemit, int timeout_ms,
        ob_reply *out)
{
    Once__V1__KvTxnRequest req = ONCE__V1__KV_TXN_REQUEST__INIT;
    Once__V1__KvOp op[4], *ops[4];
    Once__V1__KvPut put = ONCE__V1__KV_PUT__INIT;
    Once__V1__KvEmit em[3];

    assert_true(nemit <= 3);
    once__v1__kv_op__init(&op[0]);
    put.key.data = (uint8_t *)key;
    put.key.len = strlen(key);
    put.value.data = (uint8_t *)val;
    put.value.len = strlen(val);
    op[0].op_case = ONCE__V1__KV_OP__OP_PUT;
    op[0].put = &put;
    ops[0] = &op[0];
    for (size_t i = 0; i < nemit; i++) {
        once__v1__kv_emit__init(&em[i]);
        em[i].topic = (char *)topic;
        em[i].payload.data = (uint8_t *)val;
        em[i].payload.len = strlen(val);
        once__v1__kv_op__init(&op[i + 1]);
        op[i + 1].op_case = ONCE__V1__KV_OP__OP_EMIT;
        op[i + 1].emit = &em[i];
        ops[i + 1] = &op[i + 1];
    }
    req.n_then_ops = 1 + nemit;
    req.then_ops = ops;
    ob_send(h, TXN, cid, seq, &req.base, timeout_ms, out);
}

static bool
key_exists(const harness *h, const char *key)
{
    Once__V1__KvRangeRequest req = ONCE__V1__KV_RANGE_REQUEST__INIT;
    Once__V1__KvRangeResponse *rr;
    ob_reply r;
    bool found;

    req.key.data = (uint8_t *)key;
    req.key.len = strlen(key);
    ob_send(h, RANGE, 0, 0, &req.base, CALL_MS, &r);
    ok(&r);
    assert_non_null(
        rr = once__v1__kv_range_response__unpack(NULL, r.plen, r.payload));
    found = rr->n_kvs == 1;
    once__v1__kv_range_response__free_unpacked(rr, NULL);
    return found;
}

static void
subscribe(const harness *h, uint64_t cid, uint64_t seq, const char *topic,
          const char *consumer)
{
    Once__V1__OutboxSubscribeRequest req =
        ONCE__V1__OUTBOX_SUBSCRIBE_REQUEST__INIT;
    ob_reply r;

    req.topic = (char *)topic;
    req.consumer = (char *)consumer;
    ob_send(h, OB("Subscribe"), cid, seq, &req.base, CALL_MS, &r);
    ok(&r);
}

static void
ack(const harness *h, uint64_t cid, uint64_t seq, const char *topic,
    const char *consumer, uint64_t offset, int timeout_ms, ob_reply *r)
{
    Once__V1__OutboxAckRequest req = ONCE__V1__OUTBOX_ACK_REQUEST__INIT;

    req.topic = (char *)topic;
    req.consumer = (char *)consumer;
    req.offset = offset;
    ob_send(h, OB("Ack"), cid, seq, &req.base, timeout_ms, r);
}

/* A Read; the caller frees the reply (free_unpacked). */
static Once__V1__OutboxReadResponse *
read_events(const harness *h, const char *topic, const char *consumer,
            uint32_t max, uint64_t wait_ms)
{
    Once__V1__OutboxReadRequest req = ONCE__V1__OUTBOX_READ_REQUEST__INIT;
    Once__V1__OutboxReadResponse *rr;
    ob_reply r;

    req.topic = (char *)topic;
    req.consumer = (char *)consumer;
    req.max_events = max;
    req.max_wait_ms = wait_ms;
    ob_send(h, OB("Read"), 0, 0, &req.base, CALL_MS + (int)wait_ms, &r);
    ok(&r);
    assert_non_null(
        rr = once__v1__outbox_read_response__unpack(NULL, r.plen, r.payload));
    return rr;
}

/* Topic name's state from Topics (retained events, low-water mark, head). */
static void
topic_state(const harness *h, const char *name, uint64_t *retained,
            uint64_t *low, uint64_t *head)
{
    Once__V1__OutboxTopicsRequest req = ONCE__V1__OUTBOX_TOPICS_REQUEST__INIT;
    Once__V1__OutboxTopicsResponse *tr;
    ob_reply r;

    ob_send(h, OB("Topics"), 0, 0, &req.base, CALL_MS, &r);
    ok(&r);
    assert_non_null(
        tr = once__v1__outbox_topics_response__unpack(NULL, r.plen, r.payload));
    *retained = *low = *head = 0;
    for (size_t i = 0; i < tr->n_topics; i++) {
        if (strcmp(tr->topics[i]->name, name) == 0) {
            *retained = tr->topics[i]->retained_events;
            *low = tr->topics[i]->low_water;
            *head = tr->topics[i]->head;
        }
    }
    once__v1__outbox_topics_response__free_unpacked(tr, NULL);
}

/* Waits (bounded) until the collector has run `passes` more passes. */
static void
gc_passes(const harness *h, uint64_t passes)
{
    once_client *c = NULL;
    once_stats s;
    once_collector_stats cs;
    uint64_t first;
    int64_t t0 = harness_now_ms();

    assert_int_equal(harness_client(h, true, &c), ONCE_OK);
    harness_collector_stats(c, &s, &cs);
    first = cs.gc_passes;
    do {
        assert_true(harness_now_ms() - t0 < 20000);
        harness_sleep_ms(20);
        harness_collector_stats(c, &s, &cs);
    } while (cs.gc_passes < first + passes);
    once_client_close(c);
}

/* ---- exactly once per offset, dense, stable ids ------------------------- */

static void
t_dense_and_stable(void **state)
{
    harness *h = *state;
    uint64_t cid = lease(h), retained, low, head;
    Once__V1__OutboxReadResponse *rr;
    ob_reply r, r3, again;
    char key[16];

    subscribe(h, cid, 1, "jobs", "billing");
    /* A topic is listed from its first consumer on, before any event. */
    topic_state(h, "jobs", &retained, &low, &head);
    assert_int_equal(low, 1);
    for (uint64_t s = 2; s <= 6; s++) {
        snprintf(key, sizeof(key), "k%llu", (unsigned long long)s);
        produce(h, cid, s, "jobs", key, key, s == 4 ? 2 : 1, CALL_MS,
                s == 3 ? &r3 : &r);
        ok(s == 3 ? &r3 : &r);
    }
    /* The third producer resent: its stored reply, no new event. */
    produce(h, cid, 3, "jobs", "k3", "k3", 1, CALL_MS, &again);
    ok(&again);
    assert_true(again.replayed);
    assert_int_equal(again.plen, r3.plen);
    assert_memory_equal(again.payload, r3.payload, r3.plen);

    rr = read_events(h, "jobs", "billing", 100, 0);
    assert_int_equal(rr->n_events, 6); /* seqs 2..6, two events for 4 */
    assert_int_equal(rr->head, 6);
    assert_int_equal(rr->low_water, 1);
    for (size_t i = 0; i < rr->n_events; i++) {
        Once__V1__OutboxEvent *ev = rr->events[i];
        uint64_t seq = i < 3 ? i + 2 : i + 1;

        assert_int_equal(ev->offset, i + 1); /* dense from 1 */
        assert_int_equal(ev->id->client_id, cid);
        assert_int_equal(ev->id->seq, seq);
        assert_int_equal(ev->id->index, i == 3 ? 1 : 0);
        assert_string_equal(ev->method, TXN);
    }
    once__v1__outbox_read_response__free_unpacked(rr, NULL);
    topic_state(h, "jobs", &retained, &low, &head);
    assert_int_equal(retained, 6);
    assert_int_equal(head, 6);
}

/* ---- retention by acknowledgement --------------------------------------- */

static void
t_retention(void **state)
{
    harness *h = *state;
    uint64_t cid = lease(h), retained, low, head, seq = 1;
    Once__V1__OutboxReadResponse *rr;
    ob_reply r;

    subscribe(h, cid, seq++, "t", "a");
    subscribe(h, cid, seq++, "t", "b");
    for (int i = 0; i < 4; i++) {
        produce(h, cid, seq++, "t", "k", "v", 1, CALL_MS, &r);
        ok(&r);
    }
    ack(h, cid, seq++, "t", "a", 4, CALL_MS, &r);
    ok(&r);
    /* b lags: nothing goes, however many passes run. */
    gc_passes(h, 3);
    topic_state(h, "t", &retained, &low, &head);
    assert_int_equal(retained, 4);
    assert_int_equal(low, 1);
    /* b acknowledges 2: exactly 1 and 2 go. */
    ack(h, cid, seq++, "t", "b", 2, CALL_MS, &r);
    ok(&r);
    gc_passes(h, 3);
    topic_state(h, "t", &retained, &low, &head);
    assert_int_equal(retained, 2);
    assert_int_equal(low, 3);
    rr = read_events(h, "t", "b", 100, 0);
    assert_int_equal(rr->n_events, 2);
    assert_int_equal(rr->events[0]->offset, 3);
    assert_int_equal(rr->low_water, 3);
    once__v1__outbox_read_response__free_unpacked(rr, NULL);
    /* b unsubscribes: it holds nothing back any more. */
    {
        Once__V1__OutboxUnsubscribeRequest u =
            ONCE__V1__OUTBOX_UNSUBSCRIBE_REQUEST__INIT;
        u.topic = "t";
        u.consumer = "b";
        ob_send(h, OB("Unsubscribe"), cid, seq++, &u.base, CALL_MS, &r);
        ok(&r);
    }
    gc_passes(h, 3);
    topic_state(h, "t", &retained, &low, &head);
    assert_int_equal(retained, 0);
    assert_int_equal(low, 5);
    assert_int_equal(head, 4);
    rr = read_events(h, "t", "a", 100, 0);
    assert_int_equal(rr->n_events, 0);
    assert_int_equal(rr->low_water, 5);
    once__v1__outbox_read_response__free_unpacked(rr, NULL);
    /* Reading b now: not subscribed. */
    {
        Once__V1__OutboxReadRequest q = ONCE__V1__OUTBOX_READ_REQUEST__INIT;
        q.topic = "t";
        q.consumer = "b";
        ob_send(h, OB("Read"), 0, 0, &q.base, CALL_MS, &r);
        assert_int_equal(r.code, ONCE__V1__CODE__NOT_FOUND);
        assert_string_equal(r.reason, "OUTBOX_NO_CONSUMER");
    }
}

/* ---- the bound ----------------------------------------------------------- */

static int
setup_full(void **state)
{
    static const char *const args[] = {"--outbox-max-bytes", "200",
                                       "--gc-interval", "100ms", NULL};
    return harness_setup_args(state, args);
}

static void
t_full(void **state)
{
    harness *h = *state;
    uint64_t cid = lease(h), retained, low, head, seq = 1, full_seq = 0;
    char val[61];
    ob_reply r;
    int n;

    memset(val, 'p', 60);
    val[60] = '\0';
    subscribe(h, cid, seq++, "f", "slow");
    for (n = 0; n < 10; n++) {
        char key[16];

        snprintf(key, sizeof(key), "f%d", n);
        produce(h, cid, seq, "f", key, val, 1, CALL_MS, &r);
        assert_int_equal(r.rv, 0);
        if (r.code != 0) {
            full_seq = seq;
            break;
        }
        seq++;
    }
    assert_true(n > 0 && n < 10);
    assert_int_equal(r.code, ONCE__V1__CODE__RESOURCE_EXHAUSTED);
    assert_string_equal(r.reason, "OUTBOX_FULL");
    /* Nothing written: neither the key nor an event. */
    {
        char key[16];
        snprintf(key, sizeof(key), "f%d", n);
        assert_false(key_exists(h, key));
    }
    topic_state(h, "f", &retained, &low, &head);
    assert_int_equal(head, (uint64_t)n);
    /* Reads and acknowledgements go on; once acknowledged and collected,
     * the same rpc id runs (the refusal was not recorded). */
    ack(h, cid, seq + 1, "f", "slow", (uint64_t)n, CALL_MS, &r);
    ok(&r);
    gc_passes(h, 3);
    topic_state(h, "f", &retained, &low, &head);
    assert_int_equal(retained, 0);
    {
        char key[16];
        snprintf(key, sizeof(key), "f%d", n);
        produce(h, cid, full_seq, "f", key, val, 1, CALL_MS, &r);
        ok(&r);
        assert_false(r.replayed);
        assert_true(key_exists(h, key));
    }
    topic_state(h, "f", &retained, &low, &head);
    assert_int_equal(head, (uint64_t)n + 1);
}

/* ---- long-poll ------------------------------------------------------------
 */

static int
setup_two_contexts(void **state)
{
    static const char *const args[] = {"--contexts", "2", NULL};
    return harness_setup_args(state, args);
}

typedef struct poller {
    const harness *h;
    uint64_t wait_ms;
    int64_t done_ms;
    size_t nevents;
    int rv, code;
} poller;

static void *
poll_main(void *arg)
{
    poller *p = arg;
    Once__V1__OutboxReadRequest req = ONCE__V1__OUTBOX_READ_REQUEST__INIT;
    Once__V1__OutboxReadResponse *rr;
    ob_reply *r = malloc(sizeof(*r));

    req.topic = "lp";
    req.consumer = "c";
    req.max_wait_ms = p->wait_ms;
    ob_send(p->h, OB("Read"), 0, 0, &req.base, (int)p->wait_ms + CALL_MS, r);
    p->done_ms = harness_now_ms();
    p->rv = r->rv;
    p->code = r->code;
    if (r->rv == 0 && r->code == 0 &&
        (rr = once__v1__outbox_read_response__unpack(NULL, r->plen,
                                                     r->payload)) != NULL) {
        p->nevents = rr->n_events;
        once__v1__outbox_read_response__free_unpacked(rr, NULL);
    }
    free(r);
    return NULL;
}

static void
t_long_poll(void **state)
{
    harness *h = *state;
    uint64_t cid = lease(h);
    poller p = {.h = h, .wait_ms = 400};
    pthread_t th;
    int64_t t0, committed;
    ob_reply r;

    subscribe(h, cid, 1, "lp", "c");
    /* Nothing comes: answered empty at the deadline, not before — every
     * time, also on a server context that parked a read before (onced
     * runs with 2 contexts here, so the later reads reuse them). */
    for (int i = 0; i < 4; i++) {
        t0 = harness_now_ms();
        poll_main(&p);
        assert_int_equal(p.rv, 0);
        assert_int_equal(p.nevents, 0);
        print_message("  empty long-poll answered after %lld ms (wait 400)\n",
                      (long long)(p.done_ms - t0));
        assert_true(p.done_ms - t0 >= 400);
        assert_true(p.done_ms - t0 < 5000);
    }

    /* An event comes: answered when it commits, long before the wait. */
    p.wait_ms = 20000;
    t0 = harness_now_ms();
    assert_int_equal(pthread_create(&th, NULL, poll_main, &p), 0);
    harness_sleep_ms(300); /* lets the Read reach onced: the ordering */
    produce(h, cid, 2, "lp", "lpk", "x", 1, CALL_MS, &r);
    committed = harness_now_ms();
    ok(&r);
    pthread_join(th, NULL);
    assert_int_equal(p.rv, 0);
    assert_int_equal(p.code, 0);
    assert_int_equal(p.nevents, 1);
    print_message("  long-poll answered %lld ms after the producer's reply, "
                  "%lld ms after it was sent\n",
                  (long long)(p.done_ms - committed),
                  (long long)(p.done_ms - t0));
    assert_true(p.done_ms - t0 >= 300);
    assert_true(p.done_ms - committed < 2000);
}

/* Long-polls never take every server context: with 4, two park and the
 * third is answered at once; other calls still get through. */
static int
setup_four_contexts(void **state)
{
    static const char *const args[] = {"--contexts", "4", NULL};
    return harness_setup_args(state, args);
}

static void
t_park_bound(void **state)
{
    harness *h = *state;
    uint64_t cid = lease(h), retained, low, head;
    poller p[3];
    pthread_t th[3];
    int64_t t0, t1;
    int quick = 0;

    subscribe(h, cid, 1, "lp", "c");
    t0 = harness_now_ms();
    for (int i = 0; i < 3; i++) {
        memset(&p[i], 0, sizeof(p[i]));
        p[i].h = h;
        p[i].wait_ms = 3000;
        assert_int_equal(pthread_create(&th[i], NULL, poll_main, &p[i]), 0);
    }
    harness_sleep_ms(300); /* lets the reads reach onced: the ordering */
    topic_state(h, "lp", &retained, &low, &head); /* not starved */
    t1 = harness_now_ms();
    assert_true(t1 - t0 < 2500);
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(p[i].rv, 0);
        quick += p[i].done_ms - t0 < 2500;
    }
    print_message("  3 long-polls on 4 contexts: %d answered at once, a "
                  "Topics call took %lld ms\n",
                  quick, (long long)(t1 - t0 - 300));
    assert_int_equal(quick, 1);
}

/* ---- the receiver loop (once_consumer_run) ------------------------------ */

typedef struct seen {
    uint64_t offsets[16];
    size_t n;
    uint64_t stop_at;   /* ONCE_CONSUMER_STOP at this offset */
    uint64_t refuse_at; /* -1 (not applied) at this offset */
} seen;

static int
seen_one(void *arg, const once_outbox_event *ev)
{
    seen *s = arg;

    if (ev->offset == s->refuse_at) {
        s->refuse_at = 0;
        return -1;
    }
    if (s->n < 16) {
        s->offsets[s->n++] = ev->offset;
    }
    return ev->offset == s->stop_at ? ONCE_CONSUMER_STOP : ONCE_CONSUMER_NEXT;
}

/* once_outbox_read_after(after) of "rc"/"loop" gives n events from
 * offset first on. */
static void
read_after_is(once_client *c, uint64_t after, uint64_t first, size_t n)
{
    once_outbox_batch *b = NULL;
    once_outbox_event ev;
    once_status st;

    assert_int_equal(
        once_outbox_read_after(c, "rc", "loop", after, 100, 0, &b, &st),
        ONCE_OK);
    assert_int_equal(once_outbox_batch_count(b), n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(once_outbox_batch_at(b, i, &ev), ONCE_OK);
        assert_int_equal(ev.offset, first + i);
    }
    once_outbox_batch_free(b);
}

static void
t_consumer(void **state)
{
    harness *h = *state;
    uint64_t cid = lease(h);
    once_client *c = NULL;
    once_status st;
    seen s = {.stop_at = 5, .refuse_at = 3};
    Once__V1__OutboxReadResponse *rr;
    ob_reply r;

    assert_int_equal(harness_client(h, false, &c), ONCE_OK);
    subscribe(h, cid, 1, "rc", "loop");
    for (uint64_t q = 2; q <= 6; q++) {
        produce(h, cid, q, "rc", "rck", "v", 1, CALL_MS, &r);
        ok(&r);
    }
    /* Event 3 refused: 1 and 2 applied and acknowledged, the run ends. */
    assert_int_equal(
        once_consumer_run(c, "rc", "loop", 2, 200, seen_one, &s, &st), -1);
    assert_int_equal(s.n, 2);
    /* Again: from 3 on, each once, stopping after 5 (acknowledged). */
    assert_int_equal(
        once_consumer_run(c, "rc", "loop", 2, 200, seen_one, &s, &st), ONCE_OK);
    assert_int_equal(s.n, 5);
    for (size_t i = 0; i < s.n; i++) {
        assert_int_equal(s.offsets[i], i + 1);
    }
    rr = read_events(h, "rc", "loop", 100, 0);
    assert_int_equal(rr->acked, 5);
    assert_int_equal(rr->head, 5);
    assert_int_equal(rr->n_events, 0);
    once__v1__outbox_read_response__free_unpacked(rr, NULL);
    for (uint64_t q = 7; q <= 9; q++) {
        produce(h, cid, q, "rc", "rck", "v", 1, CALL_MS, &r);
        ok(&r);
    }
    /* Read's after: past max(cursor 5, after). */
    read_after_is(c, 6, 7, 2);
    read_after_is(c, 2, 6, 3);
    read_after_is(c, 100, 0, 0);
    once_client_close(c);
}

/* ---- oncectl and /metrics ------------------------------------------------ */

static char metrics_url[96];

static int
setup_metrics(void **state)
{
    static char listen[64];
    static const char *args[] = {"--metrics-listen", listen, "--gc-interval",
                                 "100ms", NULL};

    snprintf(listen, sizeof(listen), "http://127.0.0.1:%d",
             harness_free_port());
    snprintf(metrics_url, sizeof(metrics_url), "%s/metrics", listen);
    return harness_setup_args(state, args);
}

/* Waits (bounded: the figures are published every second) until /metrics
 * holds line. */
static void
metrics_wait(const char *line)
{
    static char out[1 << 16];
    const char *args[] = {"-s", "--max-time", "5", metrics_url, NULL};
    int64_t t0 = harness_now_ms();

    for (;;) {
        out[0] = '\0';
        (void)harness_run("/usr/bin/curl", args, out, sizeof(out), NULL);
        if (strstr(out, line) != NULL) {
            return;
        }
        if (harness_now_ms() - t0 > 10000) {
            fail_msg("/metrics never showed \"%s\"", line);
        }
        harness_sleep_ms(100);
    }
}

static void
t_oncectl(void **state)
{
    harness *h = *state;
    uint64_t cid = lease(h);
    char out[4096];
    ob_reply r;
    const char *sub[] = {"outbox", "subscribe", "cl", "--consumer", "x", NULL};
    const char *rd[] = {"outbox", "read", "cl", "--consumer", "x", NULL};
    const char *ak[] = {"outbox", "ack", "cl", "--consumer", "x", "2", NULL};
    const char *tp[] = {"outbox", "topics", NULL};
    const char *ra[] = {"outbox", "read",    "cl", "--consumer",
                        "x",      "--after", "1",  NULL};
    const char *bad[] = {"outbox", "read",    "cl", "--consumer",
                         "x",      "--after", "-1", NULL};

    assert_int_equal(harness_oncectl(h, NULL, out, sizeof(out), NULL, sub), 0);
    assert_non_null(strstr(out, "\"created\":true"));
    produce(h, cid, 1, "cl", "clk", "hello", 1, CALL_MS, &r);
    ok(&r);
    produce(h, cid, 2, "cl", "clk2", "world", 1, CALL_MS, &r);
    ok(&r);
    assert_int_equal(harness_oncectl(h, NULL, out, sizeof(out), NULL, rd), 0);
    assert_non_null(strstr(out, "\"events\":[{\"offset\":1,"));
    assert_non_null(strstr(out, "\"payload\":\"hello\""));
    assert_non_null(strstr(out, "\"low_water\":1"));
    /* --after 1: past max(cursor 0, 1), the same shape, offset 2 only. */
    assert_int_equal(harness_oncectl(h, NULL, out, sizeof(out), NULL, ra), 0);
    assert_non_null(strstr(out, "{\"events\":[{\"offset\":2,"));
    assert_null(strstr(out, "\"payload\":\"hello\""));
    assert_non_null(strstr(out, "\"low_water\":1,\"head\":2,\"acked\":0}"));
    assert_int_equal(harness_oncectl(h, NULL, out, sizeof(out), NULL, bad),
                     2); /* a usage error */
    assert_int_equal(harness_oncectl(h, NULL, out, sizeof(out), NULL, ak), 0);
    assert_non_null(strstr(out, "\"acked\":2"));
    assert_int_equal(harness_oncectl(h, NULL, out, sizeof(out), NULL, tp), 0);
    assert_non_null(strstr(out, "\"name\":\"cl\",\"head\":2"));
    assert_non_null(strstr(out, "\"lag\":0"));
    /* /metrics: the low-water mark rises once the collector reclaims. */
    metrics_wait("once_outbox_head{topic=\"cl\"} 2\n");
    metrics_wait("once_outbox_low_water{topic=\"cl\"} 3\n");
    metrics_wait("once_outbox_retained_events{topic=\"cl\"} 0\n");
}

/* ---- the system topic: grant and lease lifecycle ------------------------- */

static void
t_system_events(void **state)
{
    harness *h = *state;
    uint64_t cid = lease(h), grant_id;
    Once__V1__SetPlacementRequest pl = ONCE__V1__SET_PLACEMENT_REQUEST__INIT;
    Once__V1__SetPlacementResponse *pr;
    Once__V1__RequestGrantRequest rq = ONCE__V1__REQUEST_GRANT_REQUEST__INIT;
    Once__V1__RequestGrantResponse *gr;
    Once__V1__FinishGrantRequest fin = ONCE__V1__FINISH_GRANT_REQUEST__INIT;
    Once__V1__OutboxReadResponse *rr;
    static const char *const kinds[] = {"grant.issued", "grant.finished",
                                        "lease.ended"};
    once_client *other = NULL;
    ob_reply r, again;

    subscribe(h, cid, 1, OUTBOX_SYSTEM, "audit");
    pl.surface = "s1";
    pl.machine = "m1";
    pl.location = "L";
    ob_send(h, "/once.v1.Grants/SetPlacement", cid, 2, &pl.base, CALL_MS, &r);
    ok(&r);
    assert_non_null(
        pr = once__v1__set_placement_response__unpack(NULL, r.plen, r.payload));
    rq.request_id = "r1";
    rq.attempt = 1;
    rq.surface = "s1";
    rq.machine = "m1";
    rq.location = "L";
    rq.generation = pr->generation;
    once__v1__set_placement_response__free_unpacked(pr, NULL);
    ob_send(h, "/once.v1.Grants/RequestGrant", cid, 3, &rq.base, CALL_MS, &r);
    ok(&r);
    ob_send(h, "/once.v1.Grants/RequestGrant", cid, 3, &rq.base, CALL_MS,
            &again);
    ok(&again);
    assert_true(again.replayed); /* no second grant.issued */
    assert_non_null(
        gr = once__v1__request_grant_response__unpack(NULL, r.plen, r.payload));
    grant_id = gr->grant->grant_id;
    once__v1__request_grant_response__free_unpacked(gr, NULL);
    fin.grant_id = grant_id;
    fin.outcome = ONCE__V1__GRANT_OUTCOME__SUCCEEDED;
    ob_send(h, "/once.v1.Grants/FinishGrant", cid, 4, &fin.base, CALL_MS, &r);
    ok(&r);
    /* A lease of its own, closed: lease.ended. */
    assert_int_equal(harness_client(h, false, &other), ONCE_OK);
    once_client_close(other);

    /* Nobody forges one: an emit to once.* is refused, nothing written. */
    produce(h, cid, 5, OUTBOX_SYSTEM, "forged", "x", 1, CALL_MS, &r);
    assert_int_equal(r.code, ONCE__V1__CODE__PERMISSION_DENIED);
    assert_string_equal(r.reason, "OUTBOX_RESERVED_TOPIC");
    assert_false(key_exists(h, "forged"));

    rr = read_events(h, OUTBOX_SYSTEM, "audit", 100, 0);
    assert_int_equal(rr->n_events, 3);
    for (size_t i = 0; i < 3; i++) {
        Once__V1__SystemEvent *ev = once__v1__system_event__unpack(
            NULL, rr->events[i]->payload.len, rr->events[i]->payload.data);

        assert_non_null(ev);
        assert_int_equal(rr->events[i]->offset, i + 1);
        assert_string_equal(ev->kind, kinds[i]);
        if (i < 2) {
            assert_int_equal(rr->events[i]->id->client_id, cid);
            assert_int_equal(rr->events[i]->id->seq, i + 3);
            assert_int_equal(ev->grant->grant_id, grant_id);
        } else {
            assert_int_not_equal(ev->client_id, 0);
            assert_int_equal(rr->events[i]->id->client_id, ev->client_id);
        }
        if (i == 1) {
            assert_int_equal(ev->grant->outcome,
                             ONCE__V1__GRANT_OUTCOME__SUCCEEDED);
        }
        once__v1__system_event__free_unpacked(ev, NULL);
    }
    once__v1__outbox_read_response__free_unpacked(rr, NULL);
}

/* ---- a backup carries the outbox ----------------------------------------- */

static void
t_backup(void **state)
{
    harness *h = *state;
    uint64_t cid = lease(h);
    char backup[400], old[420], out[1024];
    const char *args[] = {"admin", "backup", backup, NULL};
    Once__V1__OutboxReadResponse *rr;
    ob_reply r;

    subscribe(h, cid, 1, "bk", "c");
    for (uint64_t s = 2; s <= 4; s++) {
        produce(h, cid, s, "bk", "bkk", "v", 1, CALL_MS, &r);
        ok(&r);
    }
    ack(h, cid, 5, "bk", "c", 1, CALL_MS, &r);
    ok(&r);
    snprintf(backup, sizeof(backup), "%s/backup", h->dir);
    assert_int_equal(harness_oncectl(h, NULL, out, sizeof(out), NULL, args), 0);
    /* onced on the backup: events, the cursor and the head came along. */
    assert_int_equal(harness_stop(h), 0);
    snprintf(old, sizeof(old), "%s.old", h->data);
    assert_int_equal(rename(h->data, old), 0);
    assert_int_equal(rename(backup, h->data), 0);
    assert_int_equal(harness_restart(h), 0);
    rr = read_events(h, "bk", "c", 100, 0);
    assert_int_equal(rr->acked, 1);
    assert_int_equal(rr->n_events, 2);
    assert_int_equal(rr->events[0]->offset, 2);
    assert_int_equal(rr->events[1]->id->seq, 4);
    once__v1__outbox_read_response__free_unpacked(rr, NULL);
    ack(h, cid, 5, "bk", "c", 1, CALL_MS, &r); /* its record came too */
    ok(&r);
    assert_true(r.replayed);
    produce(h, cid, 6, "bk", "bkk", "w", 1, CALL_MS, &r);
    ok(&r);
    rr = read_events(h, "bk", "c", 100, 0);
    assert_int_equal(rr->head, 4);
    once__v1__outbox_read_response__free_unpacked(rr, NULL);
}

/* ---- crash points ---------------------------------------------------------
 */

static void
restart_with(harness *h, const char *fault)
{
    if (h->pid != 0) {
        assert_int_not_equal(harness_kill(h, SIGKILL), -1);
    }
    assert_int_equal(harness_set_fault(h, fault), 0);
    assert_int_equal(harness_restart(h), 0);
}

/* After a crash armed at fault (NULL: a plain SIGKILL) or a dropped
 * reply: waits for the crash and restarts without the fault. */
static void
settle(harness *h, const char *fault, const ob_reply *first)
{
    if (strstr(fault, ":drop") != NULL) {
        assert_int_equal(first->rv, NNG_ETIMEDOUT);
    } else {
        int status = harness_wait_exit(h, 10000);
        assert_true(status != -1 && WIFSIGNALED(status));
    }
    restart_with(h, NULL);
}

static const char *const points[] = {
    "request_accepted", "batch_staged", "write_between",
    "batch_written",    "reply_sent",   "batch_written:drop",
    "reply_sent:drop",
};
#define NPOINTS (sizeof(points) / sizeof(points[0]))

/* The producer crashed at fault, then resent: the key and the event are
 * both there, or (never) one without the other. Returns how many events
 * the one rpc id left (onced: 1; NULL onced is the shipped one). */
static size_t
crash_producer(const char *onced, const char *fault)
{
    static const char *const args[] = {"--gc-interval", "10m", NULL};
    harness *h = NULL;
    uint64_t cid, retained, low, head;
    Once__V1__OutboxReadResponse *rr;
    ob_reply r1, r2;
    size_t n;

    assert_int_equal(harness_start_onced(&h, onced, args), 0);
    cid = lease(h);
    subscribe(h, cid, 1, "cm", "c");
    restart_with(h, fault);
    produce(h, cid, 2, "cm", "cmk", "v", 1, 1000, &r1);
    settle(h, fault, &r1);
    /* Before the resend: the effect and the event together, or neither. */
    topic_state(h, "cm", &retained, &low, &head);
    assert_int_equal(key_exists(h, "cmk"), head == 1);
    produce(h, cid, 2, "cm", "cmk", "v", 1, CALL_MS, &r2);
    ok(&r2);
    if (r1.rv == 0 && onced == NULL) {
        assert_int_equal(r2.plen, r1.plen);
        assert_memory_equal(r2.payload, r1.payload, r1.plen);
    }
    assert_true(key_exists(h, "cmk"));
    rr = read_events(h, "cm", "c", 100, 0);
    n = rr->n_events;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(rr->events[i]->offset, i + 1);
        assert_int_equal(rr->events[i]->id->seq, 2);
    }
    print_message("  producer %-20s %s, resend %s: %zu event(s)\n", fault,
                  r1.rv == 0 ? "answered" : "lost",
                  r2.replayed ? "replayed" : "executed", n);
    once__v1__outbox_read_response__free_unpacked(rr, NULL);
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
    return n;
}

/* The Ack crashed at fault, then resent: the cursor moved exactly to it,
 * and a Read delivers what follows. */
static void
crash_ack(const char *fault)
{
    static const char *const args[] = {"--gc-interval", "10m", NULL};
    harness *h = NULL;
    uint64_t cid;
    Once__V1__OutboxReadResponse *rr;
    ob_reply r, r1, r2;

    assert_int_equal(harness_start_args(&h, args), 0);
    cid = lease(h);
    subscribe(h, cid, 1, "cm", "c");
    for (uint64_t s = 2; s <= 4; s++) {
        produce(h, cid, s, "cm", "k", "v", 1, CALL_MS, &r);
        ok(&r);
    }
    restart_with(h, fault);
    ack(h, cid, 5, "cm", "c", 2, 1000, &r1);
    settle(h, fault, &r1);
    ack(h, cid, 5, "cm", "c", 2, CALL_MS, &r2);
    ok(&r2);
    rr = read_events(h, "cm", "c", 100, 0);
    assert_int_equal(rr->acked, 2);
    assert_int_equal(rr->n_events, 1);
    assert_int_equal(rr->events[0]->offset, 3);
    once__v1__outbox_read_response__free_unpacked(rr, NULL);
    print_message("  ack      %-20s %s, resend %s\n", fault,
                  r1.rv == 0 ? "answered" : "lost",
                  r2.replayed ? "replayed" : "executed");
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

/* A crash before and after a Read's reply: the cursor did not move, the
 * same events come again (at least once). */
static void
crash_read(void)
{
    static const char *const args[] = {"--gc-interval", "10m", NULL};
    harness *h = NULL;
    uint64_t cid;
    Once__V1__OutboxReadResponse *a, *b;
    poller p;
    pthread_t th;
    ob_reply r;

    assert_int_equal(harness_start_args(&h, args), 0);
    cid = lease(h);
    subscribe(h, cid, 1, "lp", "c");
    produce(h, cid, 2, "lp", "k", "v", 2, CALL_MS, &r);
    ok(&r);
    a = read_events(h, "lp", "c", 100, 0); /* after the reply: kill */
    restart_with(h, NULL);
    b = read_events(h, "lp", "c", 100, 0);
    assert_int_equal(b->n_events, a->n_events);
    assert_int_equal(b->n_events, 2);
    for (size_t i = 0; i < a->n_events; i++) {
        assert_int_equal(b->events[i]->offset, a->events[i]->offset);
        assert_int_equal(b->events[i]->id->index, a->events[i]->id->index);
    }
    once__v1__outbox_read_response__free_unpacked(a, NULL);
    once__v1__outbox_read_response__free_unpacked(b, NULL);
    /* Before a reply: a long-poll parked when onced is killed. */
    ack(h, cid, 3, "lp", "c", 2, CALL_MS, &r);
    ok(&r);
    memset(&p, 0, sizeof(p));
    p.h = h;
    p.wait_ms = 3000;
    assert_int_equal(pthread_create(&th, NULL, poll_main, &p), 0);
    harness_sleep_ms(300);
    restart_with(h, NULL);
    pthread_join(th, NULL);
    assert_int_not_equal(p.rv, 0); /* no reply came */
    produce(h, cid, 4, "lp", "k", "w", 1, CALL_MS, &r);
    ok(&r);
    b = read_events(h, "lp", "c", 100, 0);
    assert_int_equal(b->n_events, 1);
    assert_int_equal(b->events[0]->offset, 3);
    once__v1__outbox_read_response__free_unpacked(b, NULL);
    print_message("  read     killed after a reply and while parked: the "
                  "same events again\n");
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

static void
t_crash_matrix(void **state)
{
    (void)state;
    for (size_t i = 0; i < NPOINTS; i++) {
        assert_int_equal(crash_producer(NULL, points[i]), 1);
    }
    /* The check catches a server that writes the effect (and its event)
     * apart from the record: a crash between the two writes leaves an
     * event whose call then runs again — a second event for one id. */
    print_message("onced_split_effect_first:\n");
    assert_int_equal(crash_producer(ONCED_SPLIT_EFFECT_FIRST, "write_between"),
                     2);
    for (size_t i = 0; i < NPOINTS; i++) {
        crash_ack(points[i]);
    }
    crash_read();
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(t_dense_and_stable, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(t_retention, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(t_full, setup_full, harness_teardown),
        cmocka_unit_test_setup_teardown(t_long_poll, setup_two_contexts,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(t_consumer, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(t_park_bound, setup_four_contexts,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(t_oncectl, setup_metrics,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(t_system_events, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(t_backup, harness_setup,
                                        harness_teardown),
        cmocka_unit_test(t_crash_matrix),
    };

    harness_trap_exit("test_outbox");
    return harness_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
