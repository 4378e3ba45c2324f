/*
 * peer_leveldb.c — the disk's limit through the store once uses: LevelDB
 * synced puts (leveldb_put with sync=true) from one writer thread per
 * caller, on a database in the peer's temp dir. LevelDB merges concurrent
 * writers into one log write and one fsync (DBImpl::BuildBatchGroup), so
 * this is the group-commit ceiling of the disk with no RPC around it.
 *
 * Owns: the LevelDB handle and its options.
 * Invariant: a put returns only after its log record is synced.
 * Never: counts a put whose error it saw.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <leveldb/c.h>

#include "bench/compare_peer.h"

typedef struct ldb_env {
    leveldb_t *db;
    leveldb_options_t *opts;
    leveldb_writeoptions_t *sync;
    size_t value_bytes;
} ldb_env;

typedef struct ldb_conn {
    ldb_env *e;
    int level, index;
    char *value;
} ldb_conn;

static void
ldb_stop(void *env)
{
    ldb_env *e = env;

    if (e == NULL) {
        return;
    }
    if (e->db != NULL) {
        leveldb_close(e->db);
    }
    if (e->sync != NULL) {
        leveldb_writeoptions_destroy(e->sync);
    }
    if (e->opts != NULL) {
        leveldb_options_destroy(e->opts);
    }
    free(e);
}

static int
ldb_start(const compare_config *cfg, void **envp)
{
    ldb_env *e = calloc(1, sizeof(*e));
    char path[300];
    char *err = NULL;

    if (e == NULL) {
        return -1;
    }
    e->value_bytes = cfg->put_bytes;
    snprintf(path, sizeof(path), "%s/leveldb", cfg->dir);
    e->opts = leveldb_options_create();
    leveldb_options_set_create_if_missing(e->opts, 1);
    e->sync = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(e->sync, 1);
    e->db = leveldb_open(e->opts, path, &err);
    if (err != NULL) {
        fprintf(stderr, "bench_compare: leveldb_open %s: %s\n", path, err);
        leveldb_free(err);
        ldb_stop(e);
        return -1;
    }
    *envp = e;
    return 0;
}

static int
ldb_open(void *env, const compare_caller *who, void **connp, char *err)
{
    ldb_env *e = env;
    ldb_conn *k = calloc(1, sizeof(*k));

    if (k == NULL || (k->value = malloc(e->value_bytes)) == NULL) {
        free(k);
        snprintf(err, COMPARE_ERR_LEN, "out of memory");
        return -1;
    }
    memset(k->value, 'v', e->value_bytes);
    k->e = e;
    k->level = who->level;
    k->index = who->index;
    *connp = k;
    return 0;
}

static int
ldb_call(void *conn, uint64_t n, int64_t *value, char *err)
{
    ldb_conn *k = conn;
    char key[64], *lerr = NULL;
    int klen = snprintf(key, sizeof(key), "k/%d/%d/%llu", k->level, k->index,
                        (unsigned long long)n);

    *value = 0;
    leveldb_put(k->e->db, k->e->sync, key, (size_t)klen, k->value,
                k->e->value_bytes, &lerr);
    if (lerr != NULL) {
        snprintf(err, COMPARE_ERR_LEN, "leveldb_put: %s", lerr);
        leveldb_free(lerr);
        return -1;
    }
    return 0;
}

static void
ldb_close(void *conn)
{
    ldb_conn *k = conn;

    if (k != NULL) {
        free(k->value);
        free(k);
    }
}

const compare_peer compare_peer_leveldb = {
    .name = "leveldb",
    .what = "LevelDB synced puts, one writer thread per caller, no RPC",
    .exactly_once = false,
    .start = ldb_start,
    .stop = ldb_stop,
    .open = ldb_open,
    .call = ldb_call,
    .close = ldb_close,
};
