/*
 * test_store.c — store/: transactions, the overlay, the group committer,
 * against a real LevelDB in a temp dir.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "store/store.h"

typedef struct fixture {
    char dir[64];
    store *st;
} fixture;

static int
setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/once-store-XXXXXX");
    if (mkdtemp(f->dir) == NULL || store_open(&f->st, f->dir, NULL) != 0) {
        return -1;
    }
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    fixture *f = *state;
    char cmd[128];
    store_close(f->st);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
    (void)system(cmd);
    free(f);
    return 0;
}

static char *
get_str(store_txn *t, const char *key)
{
    char *v;
    size_t len;
    char *s;
    if (store_txn_get(t, key, strlen(key), &v, &len) != 0) {
        return NULL;
    }
    s = malloc(len + 1);
    memcpy(s, v, len);
    s[len] = '\0';
    free(v);
    return s;
}

static void
test_reads_see_own_and_published_writes(void **state)
{
    fixture *f = *state;
    store_txn *a = store_txn_begin(f->st);
    store_txn *b;
    char *v;

    assert_int_equal(store_txn_put(a, "k", 1, "one", 3), 0);
    v = get_str(a, "k");
    assert_string_equal(v, "one");
    free(v);
    assert_int_equal(store_txn_put(a, "k", 1, "two", 3), 0);
    v = get_str(a, "k");
    assert_string_equal(v, "two");
    free(v);

    /* Not yet handed over: invisible to others. */
    b = store_txn_begin(f->st);
    assert_null(get_str(b, "k"));
    store_txn_abort(b);

    /* Handed over: the next transaction sees it at once, durable or not. */
    store_txn_commit(a, NULL, NULL);
    b = store_txn_begin(f->st);
    v = get_str(b, "k");
    assert_string_equal(v, "two");
    free(v);
    assert_int_equal(store_txn_del(b, "k", 1), 0);
    assert_null(get_str(b, "k"));
    store_txn_commit(b, NULL, NULL);
    b = store_txn_begin(f->st);
    assert_null(get_str(b, "k"));
    store_txn_abort(b);
}

/* store_txn_scan: the keys of a prefix as a transaction sees them —
 * durable ones (LevelDB), executed-but-unsynced ones (the overlay) and its
 * own staged writes, deletes hiding keys, in key order, each once. */
typedef struct scan_seen {
    char text[256];
} scan_seen;

static int
scan_collect(void *arg, const char *key, size_t klen, const char *val,
             size_t vlen)
{
    scan_seen *s = arg;
    size_t n = strlen(s->text);

    snprintf(s->text + n, sizeof(s->text) - n, "%.*s=%.*s ", (int)klen, key,
             (int)vlen, val);
    return 0;
}

static void
test_scan_merges_layers(void **state)
{
    fixture *f = *state;
    store_txn *t = store_txn_begin(f->st);
    scan_seen s = {""};

    /* Durable: p/a, p/c, p/e; and q/x outside the prefix. */
    assert_int_equal(store_txn_put(t, "p/a", 3, "1", 1), 0);
    assert_int_equal(store_txn_put(t, "p/c", 3, "1", 1), 0);
    assert_int_equal(store_txn_put(t, "p/e", 3, "1", 1), 0);
    assert_int_equal(store_txn_put(t, "q/x", 3, "1", 1), 0);
    store_txn_commit(t, NULL, NULL);
    store_sync(f->st);
    /* Executed, not synced: p/b new, p/c deleted, p/e changed. */
    t = store_txn_begin(f->st);
    assert_int_equal(store_txn_put(t, "p/b", 3, "2", 1), 0);
    assert_int_equal(store_txn_del(t, "p/c", 3), 0);
    assert_int_equal(store_txn_put(t, "p/e", 3, "2", 1), 0);
    store_txn_commit(t, NULL, NULL);
    /* Own writes: p/d new, p/a deleted, p/b changed twice. */
    t = store_txn_begin(f->st);
    assert_int_equal(store_txn_put(t, "p/d", 3, "3", 1), 0);
    assert_int_equal(store_txn_del(t, "p/a", 3), 0);
    assert_int_equal(store_txn_put(t, "p/b", 3, "3", 1), 0);
    assert_int_equal(store_txn_put(t, "p/b", 3, "4", 1), 0);
    assert_int_equal(store_txn_scan(t, "p/", 2, "p/", 2, scan_collect, &s), 0);
    assert_string_equal(s.text, "p/b=4 p/d=3 p/e=2 ");
    /* From a start key on. */
    s.text[0] = '\0';
    assert_int_equal(store_txn_scan(t, "p/c", 3, "p/", 2, scan_collect, &s), 0);
    assert_string_equal(s.text, "p/d=3 p/e=2 ");
    store_txn_abort(t);
    store_sync(f->st);
}

#define ORDER_N 2000

typedef struct order_log {
    int seen[ORDER_N];
    int n;
} order_log;

typedef struct order_arg {
    order_log *log;
    int i;
} order_arg;

static void
order_done(void *arg)
{
    order_arg *a = arg;
    a->log->seen[a->log->n++] = a->i; /* finisher thread only */
}

static void
test_done_in_order_and_grouped(void **state)
{
    fixture *f = *state;
    static order_log log;
    static order_arg args[ORDER_N];
    store_counters sc;
    char key[32];

    memset(&log, 0, sizeof(log));
    for (int i = 0; i < ORDER_N; i++) {
        store_txn *t = store_txn_begin(f->st);
        args[i].log = &log;
        args[i].i = i;
        if (i % 5 != 0) { /* every fifth one writes nothing */
            snprintf(key, sizeof(key), "order/%d", i);
            assert_int_equal(store_txn_put(t, key, strlen(key), "x", 1), 0);
        }
        store_txn_commit(t, order_done, &args[i]);
    }
    /* Closing waits for every handed-over transaction. */
    store_close(f->st);
    f->st = NULL;
    assert_int_equal(log.n, ORDER_N);
    for (int i = 0; i < ORDER_N; i++) {
        assert_int_equal(log.seen[i], i);
    }
    assert_int_equal(store_open(&f->st, f->dir, NULL), 0);
    store_counters_get(f->st, &sc); /* counters restart with the handle */
    assert_int_equal(sc.commits, 0);
}

static void
test_durable_across_reopen(void **state)
{
    fixture *f = *state;
    char key[32];

    for (int i = 0; i < 1000; i++) {
        store_txn *t = store_txn_begin(f->st);
        snprintf(key, sizeof(key), "g/%d", i);
        assert_int_equal(store_txn_put(t, key, strlen(key), "x", 1), 0);
        store_txn_commit(t, NULL, NULL);
    }
    store_close(f->st);
    f->st = NULL;
    assert_int_equal(store_open(&f->st, f->dir, NULL), 0);
    /* Durable across close/open. */
    for (int i = 0; i < 1000; i += 111) {
        store_txn *t = store_txn_begin(f->st);
        char *v;
        snprintf(key, sizeof(key), "g/%d", i);
        v = get_str(t, key);
        assert_non_null(v);
        free(v);
        store_txn_abort(t);
    }
}

static int barrier_hit;

static void
barrier_done(void *arg)
{
    (void)arg;
    __atomic_store_n(&barrier_hit, 1, __ATOMIC_SEQ_CST);
}

static void
test_fsyncs_fewer_than_commits(void **state)
{
    fixture *f = *state;
    store_counters sc;
    char key[32];

    barrier_hit = 0;
    for (int i = 0; i < 1000; i++) {
        store_txn *t = store_txn_begin(f->st);
        snprintf(key, sizeof(key), "f/%d", i);
        assert_int_equal(store_txn_put(t, key, strlen(key), "x", 1), 0);
        store_txn_commit(t, NULL, NULL);
    }
    store_txn_commit(store_txn_begin(f->st), barrier_done, NULL);
    assert_int_equal(store_pending(f->st), 1001);
    assert_false(barrier_hit); /* nothing is durable before the sync */
    assert_int_equal(store_sync(f->st), 1001);
    assert_true(barrier_hit);
    assert_int_equal(store_pending(f->st), 0);
    store_counters_get(f->st, &sc);
    assert_int_equal(sc.commits, 1000);
    /* 1000 transactions handed over back to back share fsyncs. */
    assert_true(sc.fsyncs < sc.commits / 2);
    assert_true(sc.max_group > 1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reads_see_own_and_published_writes,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_done_in_order_and_grouped, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_scan_merges_layers, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_durable_across_reopen, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fsyncs_fewer_than_commits, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
