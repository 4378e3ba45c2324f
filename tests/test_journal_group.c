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
 * and the reply log the group's synced writes carry
 * (client/journal_replies.h; journal_replies.c built here with a new
 * file every 4 KiB, JR_FILE_SIZE, so that a few records fill one):
 *   own_write_wins      a kept reply of key x is replaced by the next
 *                       synced write of x: LevelDB holds that write, the
 *                       log keeps nothing of x; and when the write that
 *                       carries the kept replies (the file full) holds x
 *                       too, x's own write wins over its kept reply.
 *   carried_then_removed  a file's records are written to LevelDB by the
 *                       first synced write after the file is full, and
 *                       the file is removed only then; a record appended
 *                       after it goes to the next file.
 *   replay_reads_back   records of a log never carried are read back by
 *                       jreplies_replay in order, a cut last record
 *                       left out.
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
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <leveldb/c.h>

#include "client/journal_group.h"
#include "client/journal_replies.h"
#include "tests/sys_helpers.h"

#define THREADS 16
#define ROUNDS  400
#define KEYS    3 /* per thread */

typedef struct fixture {
    char dir[256];
    leveldb_options_t *opts;
    leveldb_t *db;
    jreplies *rl; /* NULL but in the reply log's cases */
    jgroup *g;
} fixture;

/* A jgroup on a LevelDB in a new temp dir, with a reply log there when
 * with_log. */
static int
open_fixture(void **state, bool with_log)
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
    if (with_log) {
        assert_int_equal(jreplies_open(f->dir, &f->rl), 0);
    }
    assert_int_equal(jgroup_open(f->db, f->rl, &f->g), 0);
    *state = f;
    return 0;
}

static int
setup(void **state)
{
    return open_fixture(state, false);
}

static int
setup_log(void **state)
{
    return open_fixture(state, true);
}

static int
teardown(void **state)
{
    fixture *f = *state;

    jgroup_close(f->g);
    jreplies_close(f->rl);
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

/* ---- the reply log ------------------------------------------------------- */

/* Whether LevelDB holds want under key (want NULL: holds nothing). */
static bool
holds(leveldb_t *db, const char *key, const char *want)
{
    size_t len = 0;
    char *v = get(db, key, &len);
    bool ok = want == NULL ? v == NULL
                           : v != NULL && len == strlen(want) &&
                                 memcmp(v, want, len) == 0;

    leveldb_free(v);
    return ok;
}

static void
append(fixture *f, const char *key, const char *val)
{
    assert_int_equal(jreplies_append(f->rl, key, strlen(key),
                                     (const uint8_t *)val, strlen(val)),
                     0);
}

static void
put_synced(fixture *f, const char *key, const char *val)
{
    char msg[256];

    assert_int_equal(jgroup_write(f->g, key, strlen(key), val, strlen(val),
                                  true, msg, sizeof(msg)),
                     0);
}

/* Whether the reply log keeps a record of key. */
static bool
kept(fixture *f, const char *key)
{
    uint8_t *v;
    size_t len;
    int e = jreplies_get(f->rl, key, strlen(key), &v, &len);

    free(v);
    return e == 0;
}

/* Whether dir's reply file number k exists. */
static bool
file_exists(const fixture *f, int k)
{
    char path[300];
    struct stat sb;

    snprintf(path, sizeof(path), "%s/replies.%d", f->dir, k);
    return stat(path, &sb) == 0;
}

/* Appends filler records ("fill<i>", 100 bytes each) until the current
 * file holds more than 4 KiB. */
static void
fill_file(fixture *f)
{
    char key[32], val[101];

    memset(val, 'v', 100);
    val[100] = '\0';
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof(key), "fill%d", i);
        append(f, key, val);
    }
}

static void
own_write_wins(void **state)
{
    fixture *f = *state;

    append(f, "x", "reply1");
    assert_true(kept(f, "x"));
    put_synced(f, "x", "commit1"); /* file not full: carries nothing */
    assert_true(holds(f->db, "x", "commit1"));
    assert_false(kept(f, "x"));
    append(f, "x", "reply2");
    fill_file(f);
    put_synced(f, "x", "commit2"); /* carries the kept ones, x's first */
    assert_true(holds(f->db, "x", "commit2"));
    assert_false(holds(f->db, "fill0", NULL)); /* carried */
    assert_false(kept(f, "x"));
    assert_false(kept(f, "fill0"));
}

static void
carried_then_removed(void **state)
{
    fixture *f = *state;

    fill_file(f);
    assert_true(file_exists(f, 1));
    assert_true(holds(f->db, "fill7", NULL)); /* only in the log */
    assert_true(kept(f, "fill7"));
    put_synced(f, "other", "o");
    assert_false(holds(f->db, "fill7", NULL));
    assert_false(kept(f, "fill7"));
    assert_false(file_exists(f, 1));
    append(f, "late", "l");
    assert_true(file_exists(f, 2));
    assert_true(holds(f->db, "late", NULL));
}

typedef struct seen {
    int n;
    char last[32];
} seen;

static void
count_record(const char *key, size_t klen, const uint8_t *val, size_t vlen,
             void *arg)
{
    seen *s = arg;

    (void)val;
    (void)vlen;
    s->n++;
    snprintf(s->last, sizeof(s->last), "%.*s", (int)klen, key);
}

static void
replay_reads_back(void **state)
{
    fixture *f = *state;
    char path[300];
    struct stat sb;
    seen s = {0, ""};

    append(f, "a", "1");
    append(f, "b", "2");
    append(f, "c", "3");
    assert_int_equal(jreplies_replay(f->dir, count_record, &s), 0);
    assert_int_equal(s.n, 3);
    assert_string_equal(s.last, "c");
    snprintf(path, sizeof(path), "%s/replies.1", f->dir);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(truncate(path, sb.st_size - 1), 0);
    s = (seen){0, ""};
    assert_int_equal(jreplies_replay(f->dir, count_record, &s), 0);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.last, "b");
    assert_int_equal(jreplies_remove_all(f->dir), 0);
    assert_false(file_exists(f, 1));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(every_write_lands, setup, teardown),
        cmocka_unit_test_setup_teardown(lone_write, setup, teardown),
        cmocka_unit_test_setup_teardown(survives_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(own_write_wins, setup_log, teardown),
        cmocka_unit_test_setup_teardown(carried_then_removed, setup_log,
                                        teardown),
        cmocka_unit_test_setup_teardown(replay_reads_back, setup_log, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
