/*
 * test_journal_group.c — the journal's merged LevelDB writes
 * (client/journal_group.h) on a real LevelDB in a temp dir.
 *
 * Owns: the group's contract under concurrency:
 *   every_write_lands   16 threads each write their own keys 400 times
 *                       (synced or not, some deletes) through one jgroup:
 *                       after they return, every key holds the last value
 *                       its thread wrote, or is gone when that was a
 *                       delete — no write of a merged group is lost or
 *                       reordered behind an earlier one of its key.
 *   lone_write          one caller alone: its put and delete are read back
 *                       at once.
 *   survives_reopen     writes through a jgroup, the group closed and the
 *                       LevelDB closed and opened again: all are there.
 * Invariant: every loop is bounded by a constant; threads are joined.
 * Never: starts onced or sleeps.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <leveldb/c.h>

#include "client/journal_group.h"
#include "tests/sys_helpers.h"

#define THREADS 16
#define ROUNDS  400
#define KEYS    3 /* per thread */

typedef struct fixture {
    char dir[256];
    leveldb_options_t *opts;
    leveldb_t *db;
    jgroup *g;
} fixture;

static int
setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    char *err = NULL;

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/once-jgroup-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    f->opts = leveldb_options_create();
    leveldb_options_set_create_if_missing(f->opts, 1);
    f->db = leveldb_open(f->opts, f->dir, &err);
    assert_null(err);
    assert_int_equal(jgroup_open(f->db, NULL, &f->g), 0);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    fixture *f = *state;

    jgroup_close(f->g);
    leveldb_close(f->db);
    leveldb_options_destroy(f->opts);
    sys_rm_tree(f->dir);
    free(f);
    return 0;
}

/* The value of key, or NULL (freed by the caller with leveldb_free). */
static char *
get(leveldb_t *db, const char *key, size_t *len)
{
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    char *err = NULL;
    char *v = leveldb_get(db, ro, key, strlen(key), len, &err);

    leveldb_readoptions_destroy(ro);
    assert_null(err);
    return v;
}

typedef struct writer {
    jgroup *g;
    int id;
    int failures;
} writer;

/* Round r of key k: a delete every seventh round, else the value "r". */
static bool
is_delete(int r, int k)
{
    return (r + k) % 7 == 0;
}

static void *
writer_run(void *arg)
{
    writer *w = arg;
    char key[32], val[32], msg[128];

    for (int r = 0; r < ROUNDS; r++) {
        for (int k = 0; k < KEYS; k++) {
            snprintf(key, sizeof(key), "t%d.k%d", w->id, k);
            snprintf(val, sizeof(val), "%d", r);
            if (jgroup_write(w->g, key, strlen(key),
                             is_delete(r, k) ? NULL : val, strlen(val),
                             (r + w->id) % 2 == 0, msg, sizeof(msg)) != 0) {
                w->failures++;
            }
        }
    }
    return NULL;
}

static void
every_write_lands(void **state)
{
    fixture *f = *state;
    pthread_t tid[THREADS];
    writer w[THREADS];
    char key[32], want[32];

    for (int i = 0; i < THREADS; i++) {
        w[i] = (writer){f->g, i, 0};
        assert_int_equal(pthread_create(&tid[i], NULL, writer_run, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(tid[i], NULL);
        assert_int_equal(w[i].failures, 0);
    }
    for (int i = 0; i < THREADS; i++) {
        for (int k = 0; k < KEYS; k++) {
            size_t len = 0;
            char *v;

            snprintf(key, sizeof(key), "t%d.k%d", i, k);
            snprintf(want, sizeof(want), "%d", ROUNDS - 1);
            v = get(f->db, key, &len);
            if (is_delete(ROUNDS - 1, k)) {
                assert_null(v);
            } else {
                assert_non_null(v);
                assert_int_equal(len, strlen(want));
                assert_memory_equal(v, want, len);
            }
            leveldb_free(v);
        }
    }
}

static void
lone_write(void **state)
{
    fixture *f = *state;
    char msg[128];
    size_t len = 0;
    char *v;

    assert_int_equal(
        jgroup_write(f->g, "a", 1, "one", 3, false, msg, sizeof(msg)), 0);
    v = get(f->db, "a", &len);
    assert_non_null(v);
    assert_memory_equal(v, "one", 3);
    leveldb_free(v);
    assert_int_equal(
        jgroup_write(f->g, "a", 1, NULL, 0, true, msg, sizeof(msg)), 0);
    assert_null(get(f->db, "a", &len));
}

static void
survives_reopen(void **state)
{
    fixture *f = *state;
    char key[32], msg[128], *err = NULL;

    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof(key), "r%d", i);
        assert_int_equal(jgroup_write(f->g, key, strlen(key), key, strlen(key),
                                      i % 2 == 0, msg, sizeof(msg)),
                         0);
    }
    jgroup_close(f->g);
    leveldb_close(f->db);
    f->db = leveldb_open(f->opts, f->dir, &err);
    assert_null(err);
    assert_int_equal(jgroup_open(f->db, NULL, &f->g), 0);
    for (int i = 0; i < 50; i++) {
        size_t len = 0;
        char *v;

        snprintf(key, sizeof(key), "r%d", i);
        v = get(f->db, key, &len);
        assert_non_null(v);
        assert_memory_equal(v, key, len);
        leveldb_free(v);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(every_write_lands, setup, teardown),
        cmocka_unit_test_setup_teardown(lone_write, setup, teardown),
        cmocka_unit_test_setup_teardown(survives_reopen, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
