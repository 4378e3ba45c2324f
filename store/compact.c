/*
 * compact.c — full-range LevelDB compaction on a thread of the store's own,
 * and the bytes of the store's folder on disk.
 *
 * Owns the compaction thread: at most one runs; store_compact_start starts
 * it and returns at once (the executor never waits for a compaction), a
 * start while one runs only says so, and store_close joins it before
 * LevelDB is closed. Deleted completion records leave the disk only when
 * the tables and the log holding them are compacted; leveldb_compact_range
 * over the whole key range does that for everything written so far, which
 * is what Stats.disk_bytes per retained record measures afterwards.
 * Invariant: compactions is raised before compacting is cleared, so
 * whoever sees compacting false also sees the count of the one that ended;
 * clearing compacting is the thread's last act, so joining a thread whose
 * compacting is false never waits.
 * Never: touches the overlay, the commit queue or a transaction — a
 * compaction rewrites LevelDB's files, not its contents, and runs beside
 * the owner's writes (LevelDB's handle is thread-safe).
 *
 * Test-only: when onced starts with ONCED_COMPACT_HOLD_MS=N set, the
 * thread waits N ms (at most 60000) before compacting, so a test can act
 * while a compaction is certainly running. Unset, nothing waits.
 */
#include "store_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

#define COMPACT_HOLD_MAX_MS 60000

static uint64_t
compact_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
compact_hold(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void *
compact_main(void *arg)
{
    store *s = arg;
    uint64_t t0 = compact_now_ms();

    if (s->compact_hold_ms > 0) {
        compact_hold(s->compact_hold_ms);
    }
    leveldb_compact_range(s->db, NULL, 0, NULL, 0);
    fprintf(stderr,
            "onced: compaction of the whole key range finished in "
            "%llu ms\n",
            (unsigned long long)(compact_now_ms() - t0));
    atomic_fetch_add(&s->compactions, 1);
    atomic_store(&s->compacting, false);
    return NULL;
}

void
compact_init(store *s)
{
    const char *v = getenv("ONCED_COMPACT_HOLD_MS");
    unsigned long ms;
    char *end;

    pthread_mutex_init(&s->compact_mtx, NULL);
    s->compact_joinable = false;
    atomic_init(&s->compacting, false);
    atomic_init(&s->compactions, 0);
    s->compact_hold_ms = 0;
    if (v != NULL && v[0] != '\0') {
        ms = strtoul(v, &end, 10);
        if (*end == '\0' && ms > 0) {
            s->compact_hold_ms =
                (unsigned)(ms > COMPACT_HOLD_MAX_MS ? COMPACT_HOLD_MAX_MS : ms);
            fprintf(stderr,
                    "onced: test hold: compactions wait %u ms before "
                    "starting (ONCED_COMPACT_HOLD_MS)\n",
                    s->compact_hold_ms);
        }
    }
}

void
compact_join(store *s)
{
    pthread_mutex_lock(&s->compact_mtx);
    if (s->compact_joinable) {
        if (atomic_load(&s->compacting)) {
            fprintf(stderr, "onced: waiting for the running compaction\n");
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
