/*
 * compact.c — full-range LevelDB compaction on a thread of the store's own,
 * and the bytes of the store's folder on disk.
 *
 * Owns the compaction thread: at most one runs; store_compact_start starts
 * it and returns at once (the executor never waits for a compaction), a
 * start while one runs only says so, and store_close joins it before
 * LevelDB is closed. Deleted completion records leave the disk only when
 * the tables and the log holding them are compacted into the deepest level
 * that has files; after a compaction here, Stats.disk_bytes is what the
 * kept keys cost.
 *
 * leveldb_compact_range(NULL, NULL) alone is not always that: it compacts
 * levels 0 .. L-1 down into L, the deepest level holding files *before*
 * it flushed the memtable, and LevelDB places a flushed memtable whose key
 * range overlaps no table as deep as level 2. So on a store whose writes
 * are all still in the memtable (no table yet) the flush lands in level 2
 * as it is — every overwritten value, every deleted record and its
 * tombstone — and nothing compacts it; and a flush covering part of the
 * key range only merges the deepest level's tables it overlaps. So before
 * compacting, the thread deletes two keys no one ever writes, "\x00" and
 * "\xff" (below and above every key of onced: they all start with a
 * letter): the memtable then spans the whole key range, its flush stops
 * above the tables it overlaps, and the compaction merges every table into
 * the deepest level, where the tombstones (those two included) are
 * dropped. When the store had no table at all, the first pass only creates
 * one, and a second pass compacts it.
 *
 * Invariant: compactions is raised before compacting is cleared, so
 * whoever sees compacting false also sees the count of the one that ended;
 * clearing compacting is the thread's last act, so joining a thread whose
 * compacting is false never waits.
 * Never: touches the overlay, the commit queue or a transaction, or
 * changes what any key reads — deleting two keys that never exist is its
 * one write, unsynced, beside the owner's (LevelDB's handle is
 * thread-safe); a compaction rewrites LevelDB's files, not its contents.
 *
 * Test build only: the hold FAULT_HOLD_COMPACT (store/fault.h,
 * ONCED_COMPACT_HOLD_MS) makes the thread wait before compacting, so a
 * test can act while a compaction is certainly running; the shipped onced
 * has no hold.
 */
#include "store/store_impl.h"

#include "base/clock.h"
#include "store/fault.h"
#include "base/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

/* Table files in all levels, from LevelDB's properties. */
static uint64_t
compact_table_files(store *s)
{
    uint64_t n = 0;

    for (int level = 0; level < 7; level++) {
        char name[40];
        char *v;

        snprintf(name, sizeof(name), "leveldb.num-files-at-level%d", level);
        if ((v = leveldb_property_value(s->db, name)) != NULL) {
            n += strtoull(v, NULL, 10);
            leveldb_free(v);
        }
    }
    return n;
}

/* One pass: the two spanning deletes, then the full-range compaction.
 * Returns 0, or -1 when the deletes could not be written (the compaction
 * still ran). */
static int
compact_pass(store *s)
{
    static const char lo[] = {'\x00'};
    static const char hi[] = {'\xff'};
    leveldb_writebatch_t *b = leveldb_writebatch_create();
    char *err = NULL;

    leveldb_writebatch_delete(b, lo, sizeof(lo));
    leveldb_writebatch_delete(b, hi, sizeof(hi));
    leveldb_write(s->db, s->wnosync, b, &err);
    leveldb_writebatch_destroy(b);
    leveldb_compact_range(s->db, NULL, 0, NULL, 0);
    if (err != NULL) {
        log_error("compaction: the spanning deletes failed: %s", err);
        leveldb_free(err);
        return -1;
    }
    return 0;
}

static void *
compact_main(void *arg)
{
    store *s = arg;
    uint64_t t0 = clock_now_ms();
    int passes = 1;

    FAULT_HOLD(FAULT_HOLD_COMPACT); /* test build only */
    if (compact_table_files(s) == 0) {
        passes = 2; /* the first flush only makes the first table */
    }
    for (int i = 0; i < passes; i++) {
        if (compact_pass(s) != 0) {
            break;
        }
    }
    log_info("compaction of the whole key range finished in %llu ms "
             "(%d pass%s)",
             (unsigned long long)(clock_now_ms() - t0), passes,
             passes == 1 ? "" : "es");
    atomic_fetch_add(&s->compactions, 1);
    atomic_store(&s->compacting, false);
    return NULL;
}

void
compact_init(store *s)
{
    pthread_mutex_init(&s->compact_mtx, NULL);
    s->compact_joinable = false;
    atomic_init(&s->compacting, false);
    atomic_init(&s->compactions, 0);
}

void
compact_join(store *s)
{
    pthread_mutex_lock(&s->compact_mtx);
    if (s->compact_joinable) {
        if (atomic_load(&s->compacting)) {
            log_info("waiting for the running compaction");
        }
        pthread_join(s->compact_thread, NULL);
        s->compact_joinable = false;
    }
    pthread_mutex_unlock(&s->compact_mtx);
}

int
store_compact_start(store *s, bool *already_running)
{
    int rv = 0;

    pthread_mutex_lock(&s->compact_mtx);
    *already_running = atomic_load(&s->compacting);
    if (!*already_running) {
        if (s->compact_joinable) { /* the last one has ended: reap it */
            pthread_join(s->compact_thread, NULL);
            s->compact_joinable = false;
        }
        atomic_store(&s->compacting, true);
        if ((rv = pthread_create(&s->compact_thread, NULL, compact_main, s)) ==
            0) {
            s->compact_joinable = true;
        } else {
            atomic_store(&s->compacting, false);
        }
    }
    pthread_mutex_unlock(&s->compact_mtx);
    return rv;
}

void
store_compact_state(store *s, bool *running, uint64_t *finished)
{
    /* running first: the thread raises the count before it clears
     * compacting, so running false here means the count read next holds
     * that compaction (one ending in between may show as both running and
     * counted, never as neither). */
    *running = atomic_load(&s->compacting);
    *finished = atomic_load(&s->compactions);
}

int
store_disk_bytes(store *s, uint64_t *bytes)
{
    DIR *d = opendir(s->dir);
    struct dirent *e;
    uint64_t total = 0;
    int fd;

    if (d == NULL) {
        return errno;
    }
    fd = dirfd(d);
    while ((e = readdir(d)) != NULL) {
        struct stat sb;
        /* A file LevelDB removes between readdir and here is skipped. */
        if (fstatat(fd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISREG(sb.st_mode)) {
            total += (uint64_t)sb.st_size;
        }
    }
    closedir(d);
    *bytes = total;
    return 0;
}
