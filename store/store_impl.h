/*
 * store_impl.h — the structures store.c, txn.c and commit.c share. Not for
 * use outside store/.
 *
 * The files that include it are the inside of one module, the store, and
 * may call each other both ways (scripts/check_layers.py reads this line):
 * Module: store.c commit.c snapshot.c txn.c
 */
#ifndef STORE_STORE_IMPL_H
#define STORE_STORE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include <leveldb/c.h>

#include "base/queue.h"
#include "store/overlay.h"
#include "store/store.h"

typedef struct txn_write {
    char *key;
    size_t klen;
    char *val; /* NULL for a delete */
    size_t vlen;
} txn_write;

struct store_txn {
    store *s;
    leveldb_writebatch_t *batch;
    txn_write *writes; /* in staging order; newest last */
    size_t nwrites;
    size_t cap;
    uint64_t ticket; /* set when handed over (store_txn_commit) */
    store_done_fn done;
    void *arg;
    queue_link link; /* in store.handed, then in its group */
};

/* snapshot.c: one pinned snapshot. */
typedef struct snap_slot {
    uint64_t id; /* 0: free */
    leveldb_t *db;
    const leveldb_snapshot_t *snap;
    leveldb_readoptions_t *ro;
    uint64_t log_index;
    uint64_t used_ms;
} snap_slot;

struct store {
    leveldb_t *db;
    leveldb_options_t *opts;
    leveldb_filterpolicy_t *filter;
    leveldb_cache_t *cache;
    leveldb_readoptions_t *ropts;
    leveldb_writeoptions_t *wsync;
    leveldb_writeoptions_t *wnosync; /* compact.c's spanning deletes */
    overlay *ov;

    pthread_mutex_t mtx; /* protects handed and next_ticket */
    queue handed;        /* store_txn handed over, not yet written */
    uint64_t next_ticket;

    _Atomic uint64_t commits;
    _Atomic uint64_t fsyncs;
    _Atomic uint64_t groups;
    _Atomic uint64_t max_group;

    char *dir; /* the LevelDB folder (store_disk_bytes) */

    /* commit.c: groups with writes so far, stored under
     * STORE_COMMIT_SEQ_KEY in each group's own batch; the committer's
     * thread only (store_open, store_close before and after it). */
    uint64_t commit_seq;
    uint64_t commit_floor; /* the sidecar's value at open (0: none) */

    /* replicate.c: set before any transaction, then read-only. */
    store_append_fn append_fn;
    void *append_arg;
    /* The group commit's and store_apply_entry's write options: wsync, or
     * wnosync once store_set_log_durable says etcd's log holds every
     * write (set before any transaction, then read-only). */
    leveldb_writeoptions_t *wlocal;

    /* compact.c: the one compaction thread. */
    pthread_mutex_t compact_mtx; /* protects compact_thread, compact_joinable
                                    against store_close; the starter is the
                                    owner */
    pthread_t compact_thread;
    bool compact_joinable;        /* started, not yet joined */
    _Atomic bool compacting;      /* set by the starter, cleared by the
                                     thread as its last act */
    _Atomic uint64_t compactions; /* finished; raised before compacting is
                                     cleared */

    /* snapshot.c: the owner's thread only. */
    snap_slot snaps[STORE_SNAP_SLOTS];
};

#define STORE_COMMIT_SEQ_KEY "m/commit_seq"

/* split.c: test-only split builds (ONCE_SPLIT_WRITES), see there. */
void commit_split_write(store *s, const queue *group);

/* store.c: frees a LevelDB error err after writing it to stderr with
 * what; returns EBADMSG when LevelDB found damaged data (a checksum or
 * format error), EIO otherwise. */
int store_leveldb_error(const char *what, char *err);

/* store.c: closes db, then destroys what it was opened and used with —
 * each argument only when not NULL (a half-made store or loader), in the
 * order LevelDB needs (the database before its options, filter and
 * cache). The one teardown of the store (store_close) and of a loader
 * (load.c). */
void store_leveldb_close(leveldb_t *db, leveldb_options_t *opts,
                         leveldb_filterpolicy_t *filter, leveldb_cache_t *cache,
                         leveldb_readoptions_t *ropts,
                         leveldb_writeoptions_t *wsync,
                         leveldb_writeoptions_t *wnosync);

/* replicate.c: hands a group's merged batch to the appender and adds the
 * applied index to it; replicate_gate asks for a group without writes. */
void replicate_group(store *s, leveldb_writebatch_t *merged);
void replicate_gate(store *s);

/* snapshot.c: releases every pinned snapshot (store_close). */
void snap_release_all(store *s);

/* txn.c */
void txn_free(store_txn *t);
/* A malloc'd copy of len bytes (at least one byte allocated), or NULL. */
char *store_dup(const void *p, size_t len);

/* compact.c: compact_init before any compaction (store_open);
 * compact_join waits for a running one (store_close, before LevelDB is
 * closed). */
void compact_init(store *s);
void compact_join(store *s);

#endif /* STORE_STORE_IMPL_H */
