/*
 * store.c — opening and closing the LevelDB, counters, and scans.
 *
 * Owns the LevelDB handle and its options. Which folders may be opened or
 * created, and the identity file, are datadir.c's; store_open follows its
 * verdict and never lets LevelDB create a store where onced data is.
 * Every read verifies LevelDB's block checksums and paranoid checks are on:
 * damaged data is reported (EBADMSG, and a line on stderr), never served.
 * Transactions live in txn.c,
 * group commit in commit.c, the compaction thread in compact.c (closing
 * waits for it before LevelDB is closed).
 */
#include "store/store_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store/datadir.h"
#include "base/log.h"

#define STORE_CACHE_BYTES  (32u << 20)
#define STORE_WRITE_BUFFER (8u << 20)

void
store_leveldb_close(leveldb_t *db, leveldb_options_t *opts,
                    leveldb_filterpolicy_t *filter, leveldb_cache_t *cache,
                    leveldb_readoptions_t *ropts, leveldb_writeoptions_t *wsync,
                    leveldb_writeoptions_t *wnosync)
{
    if (db != NULL) {
        leveldb_close(db);
    }
    if (opts != NULL) {
        leveldb_options_destroy(opts);
    }
    if (filter != NULL) {
        leveldb_filterpolicy_destroy(filter);
    }
    if (cache != NULL) {
        leveldb_cache_destroy(cache);
    }
    if (ropts != NULL) {
        leveldb_readoptions_destroy(ropts);
    }
    if (wsync != NULL) {
        leveldb_writeoptions_destroy(wsync);
    }
    if (wnosync != NULL) {
        leveldb_writeoptions_destroy(wnosync);
    }
}

static void
store_free(store *s)
{
    store_leveldb_close(s->db, s->opts, s->filter, s->cache, s->ropts, s->wsync,
                        s->wnosync);
    overlay_free(s->ov);
    pthread_mutex_destroy(&s->mtx);
    pthread_mutex_destroy(&s->compact_mtx);
    free(s->dir);
    free(s);
}

int
store_leveldb_error(const char *what, char *err)
{
    int rv = strncmp(err, "Corruption: ", 12) == 0 ? EBADMSG : EIO;

    log_error("%s: LevelDB: %s%s", what, err,
              rv == EBADMSG ? " (damaged data: not served; restore the data "
                              "folder from a backup)"
                            : "");
    leveldb_free(err);
    return rv;
}

/* Puts the store id key, synced. */
static int
store_put_id(store *s, const char *id, char **errmsg)
{
    char *err = NULL;

    leveldb_put(s->db, s->wsync, DATADIR_ID_KEY, sizeof(DATADIR_ID_KEY) - 1, id,
                DATADIR_ID_LEN, &err);
    if (err != NULL) {
        if (errmsg != NULL) {
            *errmsg = strdup(err);
        }
        leveldb_free(err);
        return EIO;
    }
    return 0;
}

/*
 * Reconciles the LevelDB's id key with the identity file: creates both for
 * a new store, completes a store whose creation stopped before the file
 * was written, marks a store made before identity files, and refuses a
 * LevelDB that is not the store the file names.
 */
static int
store_identity(store *s, const char *dir, bool created, bool has_file,
               char **errmsg)
{
    char file_id[DATADIR_ID_LEN + 1], db_id[DATADIR_ID_LEN + 1] = "";
    char *err = NULL, *v;
    size_t vlen = 0;
    int rv;

    v = leveldb_get(s->db, s->ropts, DATADIR_ID_KEY, sizeof(DATADIR_ID_KEY) - 1,
                    &vlen, &err);
    if (err != NULL) {
        if ((rv = store_leveldb_error("reading the store id", err)) ==
                EBADMSG &&
            errmsg != NULL && (*errmsg = malloc(1024)) != NULL) {
            snprintf(*errmsg, 1024,
                     "the LevelDB in %s is damaged (its store id does not "
                     "read back). onced will not start on it; restore the "
                     "whole folder from a backup",
                     dir);
        }
        return rv;
    }
    if (v != NULL) {
        if (vlen == DATADIR_ID_LEN) {
            memcpy(db_id, v, DATADIR_ID_LEN);
            db_id[DATADIR_ID_LEN] = '\0';
        }
        leveldb_free(v);
    }
    if (has_file) {
        if ((rv = datadir_read_id(dir, file_id, errmsg)) != 0) {
            return rv;
        }
        if (strcmp(file_id, db_id) != 0) {
            if (errmsg != NULL &&
                (*errmsg = malloc(DATADIR_ID_LEN * 2 + 512)) != NULL) {
                snprintf(*errmsg, DATADIR_ID_LEN * 2 + 512,
                         "the LevelDB in %s is not the store its identity "
                         "file %s names (file: %s, LevelDB: %s): the folder "
                         "was put together from different stores. onced "
                         "will not start on it; restore the whole folder "
                         "from a backup",
                         dir, DATADIR_ID_FILE, file_id,
                         db_id[0] != '\0' ? db_id : "no id");
            }
            return EBADMSG;
        }
        return 0;
    }
    if (db_id[0] == '\0') {
        datadir_new_id(db_id);
        if ((rv = store_put_id(s, db_id, errmsg)) != 0) {
            return rv;
        }
        if (!created) {
            log_info("%s: a store from before identity files; "
                     "marked it as store %s",
                     dir, db_id);
        }
    }
    if ((rv = datadir_write_id(dir, db_id, errmsg)) != 0) {
        return rv;
    }
    log_info("%s: %s store %s (identity file %s written)", dir,
             created ? "created" : "completed", db_id, DATADIR_ID_FILE);
    return 0;
}

/* A folder a snapshot was being loaded into when the load stopped holds
 * only part of it: refused (load.c). */
static int
store_loading(store *s, const char *dir, char **errmsg)
{
    char *err = NULL;
    size_t vlen = 0;
    char *v = leveldb_get(s->db, s->ropts, STORE_LOADING_KEY,
                          strlen(STORE_LOADING_KEY), &vlen, &err);

    if (err != NULL) {
        return store_leveldb_error("opening", err);
    }
    if (v == NULL) {
        return 0;
    }
    leveldb_free(v);
    if (errmsg != NULL && (*errmsg = malloc(1024)) != NULL) {
        snprintf(*errmsg, 1024,
                 "%s holds an unfinished snapshot load (a backup or a "
                 "replica's seeding that stopped): it is not a whole store. "
                 "Remove the folder and take the backup again (a replica "
                 "reseeds itself)",
                 dir);
    }
    return EINPROGRESS;
}

/* Reads the commit counter back, and the sidecar DATADIR_COMMITTED_FILE
 * into s->commit_floor (store_commits_verify decides). */
static int
store_commit_read(store *s, const char *dir, char **errmsg)
{
    char *err = NULL, *v;
    size_t vlen = 0;
    int rv;

    v = leveldb_get(s->db, s->ropts, STORE_COMMIT_SEQ_KEY,
                    sizeof(STORE_COMMIT_SEQ_KEY) - 1, &vlen, &err);
    if (err != NULL) {
        return store_leveldb_error("reading the commit counter", err);
    }
    for (size_t i = 0; v != NULL && vlen == 8 && i < 8; i++) {
        s->commit_seq = s->commit_seq << 8 | (unsigned char)v[i];
    }
    leveldb_free(v);
    rv = datadir_read_committed(dir, &s->commit_floor, errmsg);
    return rv == ENOENT ? 0 : rv; /* none: floor 0, rewritten */
}

int
store_commits_verify(store *s, char **errmsg)
{
    if (s->commit_seq < s->commit_floor) {
        if (errmsg != NULL && (*errmsg = malloc(1024)) != NULL) {
            snprintf(*errmsg, 1024,
                     "the LevelDB in %s lost %llu acknowledged commits "
                     "(its counter is %llu, %s says at least %llu were "
                     "made): its .log was deleted or cut. onced will not "
                     "start on it (calls would run twice); restore the "
                     "whole folder from a backup",
                     s->dir,
                     (unsigned long long)(s->commit_floor - s->commit_seq),
                     (unsigned long long)s->commit_seq, DATADIR_COMMITTED_FILE,
                     (unsigned long long)s->commit_floor);
        }
        return EBADMSG;
    }
    return datadir_write_committed(s->dir, s->commit_seq, errmsg);
}

int
store_open(store **sp, const char *dir, char **errmsg)
{
    store *s;
    datadir_state ds;
    bool create = false;
    char *err = NULL;
    int rv;

    if ((rv = datadir_survey(dir, &ds, errmsg)) != 0) {
        return rv;
    }
    if (ds.missing && mkdir(dir, 0700) != 0 && errno != EEXIST) {
        rv = errno;
        if (errmsg != NULL && (*errmsg = malloc(512)) != NULL) {
            snprintf(*errmsg, 512, "cannot create the data folder %s: %s", dir,
                     strerror(rv));
        }
        return rv;
    }
    if ((rv = datadir_check(dir, &ds, &create, errmsg)) != 0) {
        return rv;
    }
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

    s->opts = leveldb_options_create();
    s->filter = leveldb_filterpolicy_create_bloom(10);
    s->cache = leveldb_cache_create_lru(STORE_CACHE_BYTES);
    /* Only datadir_check's verdict creates: never over onced data. */
    leveldb_options_set_create_if_missing(s->opts, create);
    leveldb_options_set_error_if_exists(s->opts, create);
    leveldb_options_set_paranoid_checks(s->opts, 1);
    leveldb_options_set_filter_policy(s->opts, s->filter);
    leveldb_options_set_cache(s->opts, s->cache);
    leveldb_options_set_write_buffer_size(s->opts, STORE_WRITE_BUFFER);
    s->ropts = leveldb_readoptions_create();
    leveldb_readoptions_set_verify_checksums(s->ropts, 1);
    s->wsync = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(s->wsync, 1);
    s->wnosync = leveldb_writeoptions_create();
    s->wlocal = s->wsync;

    s->db = leveldb_open(s->opts, dir, &err);
    if (err != NULL) {
        /* Damaged or incomplete (a file the manifest names is gone), as
         * opposed to a held lock or a permission. */
        bool corrupt = strncmp(err, "Corruption: ", 12) == 0 ||
                       strstr(err, "No such file") != NULL;
        if (errmsg != NULL && (*errmsg = malloc(2048)) != NULL) {
            snprintf(*errmsg, 2048,
                     corrupt ? "the LevelDB in %s is damaged (%s). onced "
                               "will not start on it; restore the whole "
                               "folder from a backup"
                             : "%s: %s",
                     dir, err);
        }
        leveldb_free(err);
        store_free(s);
        return corrupt ? EBADMSG : EIO;
    }
    if ((rv = store_loading(s, dir, errmsg)) != 0 ||
        (rv = store_identity(s, dir, create, ds.has_id, errmsg)) != 0 ||
        (rv = store_commit_read(s, dir, errmsg)) != 0) {
        store_free(s);
        return rv;
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
    if (s->wlocal == s->wsync && s->commit_seq >= s->commit_floor) {
        /* Every commit is synced (and a refused store's bound stays): the
         * counter is a lower bound from now on (a replica's local writes are
         * not synced, see there). */
        char *msg = NULL;
        if (datadir_write_committed(s->dir, s->commit_seq, &msg) != 0) {
            log_error("%s", msg != NULL ? msg : "cannot write the counter");
            free(msg);
        }
    }
    snap_release_all(s);
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
        rv = store_leveldb_error("scanning", err);
    }
    leveldb_iter_destroy(it);
    return rv;
}
