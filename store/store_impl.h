/*
 * store_impl.h — the structures store.c, txn.c and commit.c share. Not for
 * use outside store/.
 */
#ifndef STORE_STORE_IMPL_H
#define STORE_STORE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include <leveldb/c.h>

#include "overlay.h"
#include "store.h"

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
    struct store_txn *next; /* commit queue link */
};

struct store {
    leveldb_t *db;
    leveldb_options_t *opts;
    leveldb_filterpolicy_t *filter;
    leveldb_cache_t *cache;
    leveldb_readoptions_t *ropts;
    leveldb_writeoptions_t *wsync;
    overlay *ov;

    pthread_mutex_t mtx; /* protects the queue, queued and next_ticket */
    store_txn *head;     /* handed over, not yet written */
    store_txn *tail;
    size_t queued;
    uint64_t next_ticket;

    _Atomic uint64_t commits;
    _Atomic uint64_t fsyncs;
    _Atomic uint64_t groups;
    _Atomic uint64_t max_group;
};

/* split.c: test-only split builds (ONCE_SPLIT_WRITES), see there. */
void commit_split_write(store *s, store_txn *group);

/* txn.c */
void txn_free(store_txn *t);

#endif /* STORE_STORE_IMPL_H */
