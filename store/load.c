/*
 * load.c — writing a snapshot (snapshot.c, received in chunks) into a new
 * data folder: an operator's backup (`oncectl admin backup DIR`) or a
 * replica seeding itself.
 *
 * Owns: the new folder's LevelDB while it is loaded, and the marker key
 * STORE_LOADING_KEY in it.
 * Invariant: a folder is usable only once the whole snapshot is in it:
 * the marker is written (synced) before the first pair and deleted in the
 * last, synced, write; store_open refuses a folder that still holds it
 * (EINPROGRESS). The identity file is written after that, with the store
 * id the snapshot carries (DATADIR_ID_KEY), so the copy is the same store.
 * Never: loads into a folder that holds onced data (datadir_check must
 * allow creating a store there); loads the marker key from a snapshot.
 */
#include "store/store_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store/datadir.h"

/* Unsynced writes of this many bytes each; the last write syncs them. */
#define LOAD_BATCH_BYTES (4u << 20)

struct store_loader {
    char *dir;
    leveldb_t *db;
    leveldb_options_t *opts;
    leveldb_writeoptions_t *wsync;
    leveldb_writeoptions_t *wnosync;
    leveldb_writebatch_t *batch;
    size_t batch_bytes;
    char id[DATADIR_ID_LEN + 1]; /* from the snapshot's DATADIR_ID_KEY */
};

static void
load_msg(char **errmsg, const char *what, const char *dir, const char *why)
{
    if (errmsg != NULL && (*errmsg = malloc(1024)) != NULL) {
        snprintf(*errmsg, 1024, "%s %s: %s", what, dir, why);
    }
}

static void
load_free(store_loader *l)
{
    if (l->batch != NULL) {
        leveldb_writebatch_destroy(l->batch);
    }
    store_leveldb_close(l->db, l->opts, NULL, NULL, NULL, l->wsync, l->wnosync);
    free(l->dir);
    free(l);
}

int
store_load_open(store_loader **lp, const char *dir, char **errmsg)
{
    store_loader *l;
    datadir_state ds;
    bool create = false;
    char *err = NULL;
    int rv;

    if ((rv = datadir_survey(dir, &ds, errmsg)) != 0) {
        return rv;
    }
    if (ds.missing && mkdir(dir, 0700) != 0 && errno != EEXIST) {
        rv = errno;
        load_msg(errmsg, "cannot create the folder", dir, strerror(rv));
        return rv;
    }
    if ((rv = datadir_check(dir, &ds, &create, NULL)) != 0 || !create ||
        ds.other_files > 0) {
        load_msg(errmsg, "will not load a snapshot into", dir,
                 "it already holds onced data or other files; give a new "
                 "or empty folder");
        return EEXIST;
    }
    if ((l = calloc(1, sizeof(*l))) == NULL || (l->dir = strdup(dir)) == NULL) {
        free(l);
        return ENOMEM;
    }
    l->opts = leveldb_options_create();
    leveldb_options_set_create_if_missing(l->opts, 1);
    leveldb_options_set_error_if_exists(l->opts, 1);
    leveldb_options_set_paranoid_checks(l->opts, 1);
    l->wsync = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(l->wsync, 1);
    l->wnosync = leveldb_writeoptions_create();
    l->batch = leveldb_writebatch_create();
    l->db = leveldb_open(l->opts, dir, &err);
    if (err == NULL) {
        leveldb_put(l->db, l->wsync, STORE_LOADING_KEY,
                    strlen(STORE_LOADING_KEY), "1", 1, &err);
    }
    if (err != NULL) {
        load_msg(errmsg, "cannot create a LevelDB in", dir, err);
        leveldb_free(err);
        load_free(l);
        return EIO;
    }
    *lp = l;
    return 0;
}

static int
load_flush(store_loader *l, leveldb_writeoptions_t *wo)
{
    char *err = NULL;

    leveldb_write(l->db, wo, l->batch, &err);
    leveldb_writebatch_clear(l->batch);
    l->batch_bytes = 0;
    if (err != NULL) {
        return store_leveldb_error("loading a snapshot", err);
    }
    return 0;
}

int
store_load_put(store_loader *l, const void *k, size_t klen, const void *v,
               size_t vlen)
{
    if (klen == strlen(STORE_LOADING_KEY) &&
        memcmp(k, STORE_LOADING_KEY, klen) == 0) {
        return EPROTO;
    }
    if (klen == strlen(DATADIR_ID_KEY) &&
        memcmp(k, DATADIR_ID_KEY, klen) == 0) {
        if (vlen != DATADIR_ID_LEN) {
            return EPROTO;
        }
        memcpy(l->id, v, DATADIR_ID_LEN);
        l->id[DATADIR_ID_LEN] = '\0';
    }
    leveldb_writebatch_put(l->batch, k, klen, v, vlen);
    l->batch_bytes += klen + vlen + 16;
    return l->batch_bytes >= LOAD_BATCH_BYTES ? load_flush(l, l->wnosync) : 0;
}

int
store_load_finish(store_loader *l, char **errmsg)
{
    char *dir = l->dir;
    int rv;

    if (l->id[0] == '\0') {
        datadir_new_id(l->id); /* a snapshot of a store without one */
        leveldb_writebatch_put(l->batch, DATADIR_ID_KEY, strlen(DATADIR_ID_KEY),
                               l->id, DATADIR_ID_LEN);
    }
    leveldb_writebatch_delete(l->batch, STORE_LOADING_KEY,
                              strlen(STORE_LOADING_KEY));
    if ((rv = load_flush(l, l->wsync)) != 0) {
        load_msg(errmsg, "cannot write the snapshot into", dir,
                 "LevelDB write failed");
        load_free(l);
        return rv;
    }
    leveldb_close(l->db);
    l->db = NULL;
    rv = datadir_write_id(dir, l->id, errmsg);
    load_free(l);
    return rv;
}

void
store_load_abort(store_loader *l)
{
    if (l != NULL) {
        load_free(l);
    }
}
