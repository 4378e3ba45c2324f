/*
 * commit.c — group commit, driven by the store's owner.
 *
 * Owns the commit queue. Every transaction handed over is published to the
 * overlay (so the next transaction sees it) and queued, in one critical
 * section, so queue order, ticket order and overlay order agree.
 * store_sync — called by the owner (onced's executor) whenever it has run
 * out of queued calls — takes everything queued, merges the batches into
 * one and writes it with sync=true: one fsync for the whole group; then it
 * runs the done callbacks in queue order and settles the overlay. Calls
 * that arrive during the fsync queue up behind it and form the next group,
 * as in Redis's event loop with appendfsync always: no thread hand-off per
 * call (a committer thread and a finisher thread were measured and cost
 * more in hand-offs than they gave in overlap; see README "Where the time
 * goes").
 * Invariant: done callbacks run in hand-over order, each only after its
 * batch and every earlier one is durable.
 * Never: runs a done callback before the synced write returned; drops a
 * queued transaction on close.
 */
#include "store/store_impl.h"

#include "store/fault.h"
#include "base/log.h"

#include <stdio.h>
#include <stdlib.h>

/* At most this many transactions in one synced write. */
#define COMMIT_GROUP_MAX 4096

void
store_txn_commit(store_txn *t, store_done_fn done, void *arg)
{
    store *s = t->s;

    t->done = done;
    t->arg = arg;
    pthread_mutex_lock(&s->mtx);
    t->ticket = s->next_ticket++;
    for (size_t i = 0; i < t->nwrites; i++) {
        txn_write *w = &t->writes[i];
        if (overlay_put(s->ov, w->key, w->klen, w->val, w->vlen, w->val == NULL,
                        t->ticket) != 0) {
            /* Later transactions would not see this write; refusing to go
             * on is the only safe answer. */
            log_error("out of memory publishing a write");
            abort();
        }
    }
    queue_push(&s->handed, &t->link);
    pthread_mutex_unlock(&s->mtx);
}

size_t
store_pending(store *s)
{
    size_t n;
    pthread_mutex_lock(&s->mtx);
    n = s->handed.len;
    pthread_mutex_unlock(&s->mtx);
    return n;
}

/* Moves up to COMMIT_GROUP_MAX queued transactions into the empty group;
 * how many (0 when none). */
static size_t
commit_take(store *s, queue *group)
{
    size_t n;

    pthread_mutex_lock(&s->mtx);
    n = queue_take(&s->handed, group, COMMIT_GROUP_MAX);
    pthread_mutex_unlock(&s->mtx);
    return n;
}

static void
commit_write(store *s, const queue *group, size_t n)
{
    leveldb_writebatch_t *merged = NULL;
    leveldb_writebatch_t *one = NULL;
    uint64_t dirty = 0;
    char *err = NULL;

    for (queue_link *l = group->head; l != NULL; l = l->next) {
        store_txn *t = QUEUE_ITEM(l, store_txn, link);
        if (t->nwrites == 0) {
            continue;
        }
        dirty++;
        if (one == NULL) {
            one = t->batch;
        } else {
            if (merged == NULL) {
                merged = leveldb_writebatch_create();
                leveldb_writebatch_append(merged, one);
            }
            leveldb_writebatch_append(merged, t->batch);
        }
    }
    if (dirty == 0) {
        if (s->append_fn != NULL) {
            replicate_gate(s);
        }
        return;
    }
    if (s->append_fn != NULL) {
        /* Replicated (onced --replicate): the log entry first. */
        if (merged == NULL) {
            merged = leveldb_writebatch_create();
            leveldb_writebatch_append(merged, one);
        }
        replicate_group(s, merged);
    }
    FAULT_POINT(FAULT_BATCH_STAGED);
#ifndef ONCE_SPLIT_WRITES
    {
        /* The commit counter rides in the same write: no extra fsync. */
        char seq[8];
        s->commit_seq++;
        for (int i = 0; i < 8; i++) {
            seq[i] = (char)(s->commit_seq >> (56 - 8 * i));
        }
        leveldb_writebatch_put(merged != NULL ? merged : one,
                               STORE_COMMIT_SEQ_KEY,
                               sizeof(STORE_COMMIT_SEQ_KEY) - 1, seq, 8);
    }
#endif
#ifdef ONCE_SPLIT_WRITES
    /* Test-only builds (tests/CMakeLists.txt): effect and record in two
     * writes, to show the crash matrix catches it. Never in onced. */
    if (merged != NULL) {
        leveldb_writebatch_destroy(merged);
    }
    commit_split_write(s, group);
    return;
#endif
    leveldb_write(s->db, s->wlocal, merged != NULL ? merged : one, &err);
    if (merged != NULL) {
        leveldb_writebatch_destroy(merged);
    }
    if (err != NULL) {
        log_error("FATAL: LevelDB write failed: %s; stopping "
                  "without acknowledging it (restart to recover from the "
                  "log)",
                  err);
        abort();
    }
    /* One write holds effect and record: nothing lies between them. */
    FAULT_POINT(FAULT_WRITE_BETWEEN);
    if (s->wlocal == s->wsync) {
        atomic_fetch_add(&s->fsyncs, 1);
    }
    atomic_fetch_add(&s->commits, dirty);
    atomic_fetch_add(&s->groups, 1);
    if (n > atomic_load(&s->max_group)) {
        atomic_store(&s->max_group, n);
    }
}

/* Runs the done callbacks of a durable group, in order, and settles the
 * overlay. */
static void
commit_finish(store *s, queue *group)
{
    queue_link *l;

    while ((l = queue_pop(group)) != NULL) {
        store_txn *t = QUEUE_ITEM(l, store_txn, link);
        if (t->done != NULL) {
            t->done(t->arg);
        }
        for (size_t i = 0; i < t->nwrites; i++) {
            overlay_settle(s->ov, t->writes[i].key, t->writes[i].klen,
                           t->ticket);
        }
        txn_free(t);
    }
}

size_t
store_sync(store *s)
{
    queue group = {0};
    size_t n, total = 0;

    /* Callbacks may hand over more (the collector's barrier does): loop
     * until the queue is empty. */
    while ((n = commit_take(s, &group)) > 0) {
        commit_write(s, &group, n);
        commit_finish(s, &group);
        total += n;
    }
    return total;
}
