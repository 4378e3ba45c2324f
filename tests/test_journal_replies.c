/*
 * test_journal_replies.c — the journal's reply log (client/journal_replies.h)
 * with the merged writes that carry it (client/journal_group.h), on a real
 * LevelDB in a temp dir; journal_replies.c is built here with a new file
 * every 4 KiB (JR_FILE_SIZE) so that a few records fill one.
 *
 * Owns: the reply log's contract with the writes that carry it:
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
 * Invariant: every loop is bounded by a constant.
 * Never: starts onced or sleeps.
 */
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

typedef struct fixture {
    char dir[256];
    leveldb_options_t *opts;
    leveldb_t *db;
    jreplies *rl;
    jgroup *g;
} fixture;

static int
setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    char *err = NULL;

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/once-jreplies-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    f->opts = leveldb_options_create();
    leveldb_options_set_create_if_missing(f->opts, 1);
    f->db = leveldb_open(f->opts, f->dir, &err);
    assert_null(err);
    assert_int_equal(jreplies_open(f->dir, &f->rl), 0);
    assert_int_equal(jgroup_open(f->db, f->rl, &f->g), 0);
    *state = f;
    return 0;
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

/* Whether LevelDB holds want under key (want NULL: holds nothing). */
static bool
holds(leveldb_t *db, const char *key, const char *want)
{
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    char *err = NULL;
    size_t len = 0;
    char *v = leveldb_get(db, ro, key, strlen(key), &len, &err);
    bool ok = want == NULL ? v == NULL
                           : v != NULL && len == strlen(want) &&
                                 memcmp(v, want, len) == 0;

    leveldb_readoptions_destroy(ro);
    assert_null(err);
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
        cmocka_unit_test_setup_teardown(own_write_wins, setup, teardown),
        cmocka_unit_test_setup_teardown(carried_then_removed, setup, teardown),
        cmocka_unit_test_setup_teardown(replay_reads_back, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
