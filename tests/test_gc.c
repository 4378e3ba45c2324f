/*
 * test_gc.c — the collector (gc/) against a real LevelDB and lease table,
 * driven by a test clock: the test thread plays the executor (it runs the
 * tasks the collector posts), and time moves only when the test says so.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/queue.h"
#include "gc/gc.h"
#include "lease/lease.h"
#include "outbox/outbox.h"
#include "store/records.h"
#include "store/store.h"
#include "proto/wire.h"

static _Atomic uint64_t test_now = 1000000;

static uint64_t
test_clock(void)
{
    return atomic_load(&test_now);
}

typedef struct task {
    void (*fn)(void *);
    void *arg;
    queue_link link;
} task;

typedef struct fixture {
    char dir[64];
    store *st;
    lease_table *lt;
    gc *g;
    pthread_mutex_t mtx; /* protects the task queue */
    queue tasks;
    uint64_t compact_after; /* the collector's (0: never) */
} fixture;

/* The collector's "run this on the executor": queue it for the test. */
static void
post(void *arg, void (*fn)(void *), void *fn_arg)
{
    fixture *f = arg;
    task *t = malloc(sizeof(*t));
    t->fn = fn;
    t->arg = fn_arg;
    pthread_mutex_lock(&f->mtx);
    queue_push(&f->tasks, &t->link);
    pthread_mutex_unlock(&f->mtx);
}

static int
open_all(fixture *f, uint64_t budget)
{
    /* interval 0: passes only on gc_kick */
    gc_config cfg = {0, budget, f->compact_after};
    uint64_t nrec, nbytes;

    if (store_open(&f->st, f->dir, NULL) != 0 ||
        lease_table_alloc(&f->lt) != 0 ||
        lease_load(f->lt, f->st, test_clock(), &nrec, &nbytes) != 0 ||
        gc_open(&f->g, f->st, f->lt, test_clock, post, f, &cfg) != 0) {
        return -1;
    }
    return 0;
}

static void
close_all(fixture *f)
{
    gc_close(f->g);
    store_close(f->st);
    lease_table_free(f->lt);
    f->g = NULL;
    f->st = NULL;
    f->lt = NULL;
}

static int
setup_budget_compact(void **state, uint64_t budget, uint64_t compact_after)
{
    fixture *f = calloc(1, sizeof(*f));
    pthread_mutex_init(&f->mtx, NULL);
    f->compact_after = compact_after;
    snprintf(f->dir, sizeof(f->dir), "/tmp/once-gc-XXXXXX");
    if (mkdtemp(f->dir) == NULL || open_all(f, budget) != 0) {
        return -1;
    }
    *state = f;
    return 0;
}

static int
setup_budget(void **state, uint64_t budget)
{
    return setup_budget_compact(state, budget, 0);
}

static int
setup(void **state)
{
    return setup_budget(state, 20000);
}

/* Budget 3, an idle compaction after 8 deletions. */
static int
setup_compact(void **state)
{
    return setup_budget_compact(state, 3, 8);
}

static int
setup_small_budget(void **state)
{
    return setup_budget(state, 3);
}

static int
teardown(void **state)
{
    fixture *f = *state;
    char cmd[128];
    close_all(f);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
    (void)system(cmd);
    pthread_mutex_destroy(&f->mtx);
    free(f);
    return 0;
}

/* Kicks one pass and plays executor until it has finished (bounded). */
static void
run_pass(fixture *f)
{
    gc_stats before, now;

    gc_stats_get(f->g, &before);
    gc_kick(f->g);
    for (int i = 0; i < 10000; i++) { /* at most ~10 s */
        queue_link *l;
        pthread_mutex_lock(&f->mtx);
        l = queue_pop(&f->tasks);
        pthread_mutex_unlock(&f->mtx);
        if (l != NULL) {
            task *t = QUEUE_ITEM(l, task, link);
            t->fn(t->arg);
            free(t);
            continue;
        }
        /* Out of tasks: sync, as onced's executor does (the collector's
         * barrier and its pass's end are done callbacks). */
        if (store_sync(f->st) > 0) {
            continue;
        }
        gc_stats_get(f->g, &now);
        if (now.passes > before.passes) {
            return;
        }
        usleep(1000);
    }
    fail_msg("a collector pass did not finish within 10 s");
}

/* Waits until everything handed to the committer is durable: a clean
 * stop and a fresh start (lease entries from before are gone). */
static void
sync_store(fixture *f)
{
    close_all(f);
    assert_int_equal(open_all(f, 20000), 0);
}

static lease_entry *
open_lease(fixture *f, uint64_t ttl)
{
    store_txn *t = store_txn_begin(f->st);
    lease_entry *e;
    assert_int_equal(lease_open(f->lt, t, "test", ttl, test_clock(), &e), 0);
    store_txn_commit(t, NULL, NULL);
    return e;
}

/* What the executor does for an executed call: stage its record. */
static void
put_records(fixture *f, lease_entry *e, uint64_t from, uint64_t to)
{
    store_txn *t = store_txn_begin(f->st);
    for (uint64_t seq = from; seq <= to; seq++) {
        record rec = ONCE__STORE__V1__COMPLETION_RECORD__INIT;
        uint8_t digest[RECORD_DIGEST_LEN] = {0};
        uint64_t bytes;
        rec.method = "/once.v1.Counter/Increment";
        rec.digest.data = digest;
        rec.digest.len = sizeof(digest);
        rec.completed_unix_ms = test_clock();
        assert_int_equal(records_put(t, e->client_id, seq, &rec, &bytes), 0);
        lease_entry_record_added(e, seq, bytes, test_clock());
    }
    store_txn_commit(t, NULL, NULL);
}

static bool
has_record(fixture *f, uint64_t client, uint64_t seq)
{
    store_txn *t = store_txn_begin(f->st);
    record *r = NULL;
    int rv = records_get(t, client, seq, &r);
    records_free(r);
    store_txn_abort(t);
    return rv == 0;
}

static uint64_t
persisted_watermark(fixture *f, uint64_t client)
{
    uint8_t key[LEASE_KEY_LEN];
    store_txn *t = store_txn_begin(f->st);
    char *v;
    size_t len;
    uint64_t w = 0;

    lease_watermark_key(client, key);
    if (store_txn_get(t, key, sizeof(key), &v, &len) == 0) {
        assert_int_equal(len, 8);
        w = wire_get_be64((uint8_t *)v);
        free(v);
    }
    store_txn_abort(t);
    return w;
}

static void
test_ack_reclaims_below_watermark_only(void **state)
{
    fixture *f = *state;
    lease_entry *e = open_lease(f, 30000);
    uint64_t id = e->client_id;

    put_records(f, e, 1, 10);
    run_pass(f); /* nothing acknowledged: nothing reclaimed */
    for (uint64_t s = 1; s <= 10; s++) {
        assert_true(has_record(f, id, s));
    }
    lease_entry_ack(e, 6); /* replies of seqs 1..5 delivered */
    run_pass(f);
    for (uint64_t s = 1; s <= 5; s++) {
        assert_false(has_record(f, id, s));
    }
    for (uint64_t s = 6; s <= 10; s++) {
        assert_true(has_record(f, id, s));
    }
    assert_int_equal(e->retained, 5);
    assert_int_equal(e->watermark_durable, 6);
    sync_store(f);
    /* The watermark was persisted with the deletions. */
    assert_int_equal(persisted_watermark(f, id), 6);
}

static void
test_live_lease_kept_until_ttl_then_reclaimed(void **state)
{
    fixture *f = *state;
    lease_entry *e = open_lease(f, 30000);
    uint64_t id = e->client_id;
    gc_stats gs;

    put_records(f, e, 1, 4);
    atomic_fetch_add(&test_now, 29999); /* one ms before the TTL */
    run_pass(f);
    assert_non_null(lease_table_find(f->lt, id));
    assert_int_equal(lease_table_find(f->lt, id)->state, LEASE_STATE_LIVE);
    for (uint64_t s = 1; s <= 4; s++) {
        assert_true(has_record(f, id, s));
    }
    atomic_fetch_add(&test_now, 1); /* the TTL is over: no sleep needed */
    run_pass(f);
    for (uint64_t s = 1; s <= 4; s++) {
        assert_false(has_record(f, id, s));
    }
    /* Ended, reclaimed, forgotten — but the id stays issued. */
    assert_null(lease_table_find(f->lt, id));
    assert_true(lease_table_next_id(f->lt) > id);
    gc_stats_get(f->g, &gs);
    assert_int_equal(gs.leases_expired, 1);
    assert_int_equal(gs.reclaimed_total, 4);
}

static void
test_restart_keeps_ended_and_live_state(void **state)
{
    fixture *f = *state;
    lease_entry *live = open_lease(f, 30000);
    lease_entry *gone = open_lease(f, 500);
    uint64_t live_id = live->client_id, gone_id = gone->client_id;
    store_txn *t;
    lease_entry *e;

    put_records(f, live, 1, 8);
    lease_entry_ack(live, 4);
    run_pass(f); /* persists watermark 4 for the live lease */
    put_records(f, gone, 1, 3);
    /* End the second lease durably, then "crash" before any reclaim. */
    t = store_txn_begin(f->st);
    assert_int_equal(lease_end(t, gone, LEASE_STATE_CLOSED, test_clock()), 0);
    store_txn_commit(t, NULL, NULL);
    close_all(f);

    atomic_fetch_add(&test_now, 60000); /* down for a minute */
    assert_int_equal(open_all(f, 20000), 0);
    e = lease_table_find(f->lt, live_id);
    assert_non_null(e);
    /* A live lease gets a full TTL from the restart: never shortened. */
    assert_true(lease_entry_live(e, test_clock() + 29999));
    assert_int_equal(e->watermark_durable, 4);
    assert_int_equal(e->retained, 5);
    e = lease_table_find(f->lt, gone_id);
    assert_non_null(e);
    assert_int_equal(e->state, LEASE_STATE_CLOSED); /* never revived */
    assert_int_equal(e->retained, 3);
    run_pass(f);
    assert_null(lease_table_find(f->lt, gone_id));
    assert_false(has_record(f, gone_id, 1));
    assert_true(has_record(f, live_id, 4));
    assert_false(has_record(f, live_id, 3));
}

static void
test_budget_bounds_each_pass(void **state)
{
    fixture *f = *state;
    lease_entry *e = open_lease(f, 30000);
    uint64_t id = e->client_id;

    put_records(f, e, 1, 10);
    lease_entry_ack(e, 11);
    run_pass(f);
    assert_int_equal(e->retained, 7); /* budget 3 */
    assert_int_equal(e->watermark_durable, 4);
    assert_false(has_record(f, id, 3));
    assert_true(has_record(f, id, 4));
    for (int i = 0; i < 3; i++) {
        run_pass(f);
    }
    assert_int_equal(e->retained, 0);
    assert_int_equal(e->watermark_durable, 11);
    sync_store(f);
    assert_int_equal(persisted_watermark(f, id), 11);
}

/* Expiry is bounded per pass too: five leases past their TTL, budget 3:
 * three end in the first pass, the other two in the next. */
static void
test_budget_bounds_expiry(void **state)
{
    fixture *f = *state;
    lease_entry *e[5];
    uint64_t ids[5];
    gc_stats gs;
    int live = 0;

    for (int i = 0; i < 5; i++) {
        e[i] = open_lease(f, 500);
        ids[i] = e[i]->client_id;
    }
    atomic_fetch_add(&test_now, 1000);
    run_pass(f);
    gc_stats_get(f->g, &gs);
    assert_int_equal(gs.leases_expired, 3);
    for (int i = 0; i < 5; i++) {
        lease_entry *x = lease_table_find(f->lt, ids[i]);
        live += x != NULL && x->state == LEASE_STATE_LIVE;
    }
    assert_int_equal(live, 2);
    run_pass(f);
    gc_stats_get(f->g, &gs);
    assert_int_equal(gs.leases_expired, 5);
}

/* Under a backlog larger than the budget, with every lease acknowledging
 * more each pass, the walk resumes past the lease that ran out the budget:
 * no lease is starved because others come first in the table. */
static void
test_budget_rotates_across_leases(void **state)
{
    fixture *f = *state;
    lease_entry *e[4];
    uint64_t next[4];

    for (int i = 0; i < 4; i++) {
        e[i] = open_lease(f, 30000);
        next[i] = 1;
    }
    for (int pass = 0; pass < 8; pass++) {
        for (int i = 0; i < 4; i++) {
            put_records(f, e[i], next[i], next[i] + 2);
            next[i] += 3;
            lease_entry_ack(e[i], next[i]);
        }
        run_pass(f); /* budget 3: one lease's new records per pass */
    }
    for (int i = 0; i < 4; i++) {
        assert_true(e[i]->watermark_durable > 1);
    }
}

/* An acknowledgement of 1 acknowledges nothing (seqs start at 1): no pass
 * persists a watermark for it, so a lease's first call costs the collector
 * no write. */
static void
test_ack_of_one_writes_nothing(void **state)
{
    fixture *f = *state;
    lease_entry *e = open_lease(f, 30000);
    uint64_t id = e->client_id;

    put_records(f, e, 1, 1);
    lease_entry_ack(e, 1);
    run_pass(f);
    assert_int_equal(e->watermark_durable, 0);
    sync_store(f);
    assert_int_equal(persisted_watermark(f, id), 0);
}

/* Compactions the store finished, waiting (bounded) for one running. */
static uint64_t
compactions(fixture *f)
{
    bool running = true;
    uint64_t done = 0;

    for (int i = 0; i < 1000 && running; i++) {
        store_compact_state(f->st, &running, &done);
        if (running) {
            usleep(10000);
        }
    }
    assert_false(running);
    return done;
}

/* --compact-after: passes that delete do not compact, however many they
 * deleted; the first pass that finds nothing to delete after 8 deletions
 * compacts, once; with 0 (setup) no pass compacts. */
static void
test_idle_pass_compacts_after_deletions(void **state)
{
    fixture *f = *state;
    lease_entry *e = open_lease(f, 30000);

    put_records(f, e, 1, 10);
    lease_entry_ack(e, 11);
    for (int i = 0; i < 4; i++) { /* 3 + 3 + 3 + 1 deleted */
        run_pass(f);
        assert_int_equal(compactions(f), 0);
    }
    assert_int_equal(e->retained, 0);
    run_pass(f); /* nothing to delete: 10 >= 8 since the last one */
    assert_int_equal(compactions(f), 1);
    run_pass(f); /* still nothing, but nothing deleted since */
    assert_int_equal(compactions(f), 1);
}

static void
test_no_compaction_when_off(void **state)
{
    fixture *f = *state;
    lease_entry *e = open_lease(f, 30000);

    put_records(f, e, 1, 10);
    lease_entry_ack(e, 11);
    run_pass(f);
    run_pass(f);
    assert_int_equal(e->retained, 0);
    assert_int_equal(compactions(f), 0);
}

/* ---- the outbox's step and its fences ---------------------------------- */

/* Appends n one-byte events to topic (no consumer: each may go at once). */
static void
append_events(fixture *f, const char *topic, int n)
{
    store_txn *t = store_txn_begin(f->st);
    outbox_limits l = {0, 64};
    outbox_producer p = {1, 1, "test", test_clock(), 0};
    uint64_t off;

    for (int i = 0; i < n; i++) {
        outbox_outcome o;
        memset(&o, 0, sizeof(o));
        assert_int_equal(
            outbox_append(t, &l, &p, topic, (const uint8_t *)"x", 1, &off, &o),
            0);
        assert_int_equal(o.code, ONCE__V1__CODE__OK);
    }
    store_txn_commit(t, NULL, NULL);
}

static uint64_t
topic_events(fixture *f, const char *topic)
{
    store_txn *t = store_txn_begin(f->st);
    outbox_topic tp;

    assert_int_equal(outbox_topic_read(t, topic, &tp), 0);
    store_txn_abort(t);
    return tp.events;
}

/* The outbox's fences are "o/d" and "o/u" (outbox/outbox_impl.h). */
static bool
fenced(fixture *f)
{
    store_txn *t = store_txn_begin(f->st);
    char *val = NULL;
    size_t vlen = 0;
    int rv = store_txn_get(t, "o/u", 3, &val, &vlen);

    free(val);
    store_txn_abort(t);
    assert_true(rv == 0 || rv == ENOENT);
    return rv == 0;
}

/* A topic's first event stages the fences, so the passes after a
 * process's first one, which trust them, still find the topic. */
static void
test_outbox_topic_made_after_first_pass(void **state)
{
    fixture *f = *state;

    run_pass(f); /* the process's first: no topic yet */
    assert_false(fenced(f));
    append_events(f, "t", 5);
    assert_true(fenced(f));
    assert_int_equal(topic_events(f, "t"), 5);
    run_pass(f);
    assert_int_equal(topic_events(f, "t"), 0);
}

/* A store written before fences: a process's first pass walks the topics
 * anyway, reclaims, and fences them for the passes after it. */
static void
test_outbox_store_from_before_fences(void **state)
{
    fixture *f = *state;
    store_txn *t;

    append_events(f, "t", 5);
    t = store_txn_begin(f->st);
    assert_int_equal(store_txn_del(t, "o/d", 3), 0);
    assert_int_equal(store_txn_del(t, "o/u", 3), 0);
    store_txn_commit(t, NULL, NULL);
    sync_store(f); /* a new process */
    assert_false(fenced(f));
    run_pass(f);
    assert_int_equal(topic_events(f, "t"), 0);
    assert_true(fenced(f));
    append_events(f, "t", 3); /* not its first event: stages no fence */
    run_pass(f);
    assert_int_equal(topic_events(f, "t"), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ack_reclaims_below_watermark_only,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_live_lease_kept_until_ttl_then_reclaimed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_keeps_ended_and_live_state,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_budget_bounds_each_pass,
                                        setup_small_budget, teardown),
        cmocka_unit_test_setup_teardown(test_ack_of_one_writes_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_budget_rotates_across_leases,
                                        setup_small_budget, teardown),
        cmocka_unit_test_setup_teardown(test_budget_bounds_expiry,
                                        setup_small_budget, teardown),
        cmocka_unit_test_setup_teardown(test_idle_pass_compacts_after_deletions,
                                        setup_compact, teardown),
        cmocka_unit_test_setup_teardown(test_no_compaction_when_off, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_outbox_topic_made_after_first_pass,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_outbox_store_from_before_fences,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
