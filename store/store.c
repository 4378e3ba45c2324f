/*
 * store.c — opening and closing the LevelDB, counters, and scans.
 *
 * Owns the LevelDB handle and its options. Transactions live in txn.c,
 * group commit in commit.c, the compaction thread in compact.c (closing
 * waits for it before LevelDB is closed).
 */
#include "store_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define STORE_CACHE_BYTES  (32u << 20)
#define STORE_WRITE_BUFFER (8u << 20)

static void
store_free(store *s)
{
    if (s->db != NULL) {
        leveldb_close(s->db);
    }
    if (s->opts != NULL) {
        leveldb_options_destroy(s->opts);
    }
    if (s->filter != NULL) {
        leveldb_filterpolicy_destroy(s->filter);
    }
    if (s->cache != NULL) {
        leveldb_cache_destroy(s->cache);
    }
    if (s->ropts != NULL) {
        leveldb_readoptions_destroy(s->ropts);
    }
    if (s->wsync != NULL) {
        leveldb_writeoptions_destroy(s->wsync);
    }
    if (s->wnosync != NULL) {
        leveldb_writeoptions_destroy(s->wnosync);
    }
    overlay_free(s->ov);
    pthread_mutex_destroy(&s->mtx);
    pthread_mutex_destroy(&s->compact_mtx);
    free(s->dir);
    free(s);
}

int
store_open(store **sp, const char *dir, char **errmsg)
{
    store *s;
    char *err = NULL;
    int rv;

    if ((s = calloc(1, sizeof(*s))) == NULL) {
        return ENOMEM;
    }
    pthread_mutex_init(&s->mtx, NULL);
    compact_init(s);
    s->next_ticket = 1;
    if ((s->dir = strdup(dir)) == NULL) {
        store_free(s);
        return ENOMEM;
    }
    if ((rv = overlay_alloc(&s->ov)) != 0) {
        store_free(s);
        return rv;
    }
    (void)mkdir(dir, 0700);

    s->opts = leveldb_options_create();
    s->filter = leveldb_filterpolicy_create_bloom(10);
    s->cache = leveldb_cache_create_lru(STORE_CACHE_BYTES);
    leveldb_options_set_create_if_missing(s->opts, 1);
    leveldb_options_set_paranoid_checks(s->opts, 1);
    leveldb_options_set_filter_policy(s->opts, s->filter);
    leveldb_options_set_cache(s->opts, s->cache);
    leveldb_options_set_write_buffer_size(s->opts, STORE_WRITE_BUFFER);
    s->ropts = leveldb_readoptions_create();
    s->wsync = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(s->wsync, 1);
    s->wnosync = leveldb_writeoptions_create();

    s->db = leveldb_open(s->opts, dir, &err);
    if (err != NULL) {
        if (errmsg != NULL) {
            *errmsg = strdup(err);
        }
        leveldb_free(err);
        store_free(s);
        return EIO;
    }
    *sp = s;
    return 0;
}

void
store_close(store *s)
{
    if (s == NULL) {
        return;
    }
    store_sync(s);   /* nothing handed over is dropped */
    compact_join(s); /* a running compaction ends before LevelDB does */
    store_free(s);
}

void
store_counters_get(store *s, store_counters *out)
{
    out->commits = atomic_load(&s->commits);
    out->fsyncs = atomic_load(&s->fsyncs);
    out->groups = atomic_load(&s->groups);
    out->max_group = atomic_load(&s->max_group);
}

int
store_scan(store *s, const void *prefix, size_t plen, store_scan_fn fn,
           void *arg)
{
    return store_scan_from(s, prefix, plen, prefix, plen, fn, arg);
}

int
store_scan_from(store *s, const void *start, size_t slen, const void *prefix,
                size_t plen, store_scan_fn fn, void *arg)
{
    leveldb_iterator_t *it = leveldb_create_iterator(s->db, s->ropts);
    char *err = NULL;
    int rv = 0;

    for (leveldb_iter_seek(it, start, slen); leveldb_iter_valid(it);
         leveldb_iter_next(it)) {
        size_t klen, vlen;
        const char *k = leveldb_iter_key(it, &klen);
        const char *v = leveldb_iter_value(it, &vlen);
        if (klen < plen || memcmp(k, prefix, plen) != 0) {
            break;
        }
        if ((rv = fn(arg, k, klen, v, vlen)) != 0) {
            break;
        }
    }
    leveldb_iter_get_error(it, &err);
    if (err != NULL) {
        leveldb_free(err);
        rv = EIO;
    }
    leveldb_iter_destroy(it);
    return rv;
}
