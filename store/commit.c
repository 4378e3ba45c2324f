/*
 * commit.c — the group committer.
 *
 * Owns the commit queue and the committer thread. Every transaction handed
 * over is published to the overlay (so the next transaction sees it) and
 * queued in the same critical section, so queue order, ticket order and
 * overlay order agree. The committer thread takes everything queued,
 * merges the batches into one and writes it with sync=true — one fsync for
 * the whole group — then passes the group to the finisher thread, which
 * runs the done callbacks in queue order and settles the overlay. The
 * committer is back at the disk at once: the next group's fsync overlaps
 * the previous group's replies.
 * Invariant: done callbacks run in hand-over order, each only after its
 * batch and every earlier one is durable.
 * Never: runs a done callback before the synced write returned; drops a
 * queued transaction on shutdown.
 */
#include "store_impl.h"

#include "fault.h"

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
            fprintf(stderr, "onced: out of memory publishing a write\n");
            abort();
        }
    }
    t->next = NULL;
    if (s->tail != NULL) {
        s->tail->next = t;
    } else {
        s->head = t;
    }
    s->tail = t;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mtx);
}

/* Takes up to COMMIT_GROUP_MAX queued transactions; NULL when stopping and
 * the queue is empty. */
static store_txn *
commit_take(store *s, size_t *n)
{
    store_txn *first, *last;

    pthread_mutex_lock(&s->mtx);
    while (s->head == NULL && !s->stopping) {
        pthread_cond_wait(&s->cv, &s->mtx);
    }
    first = s->head;
    last = first;
    *n = 0;
    if (first != NULL) {
        *n = 1;
        while (last->next != NULL && *n < COMMIT_GROUP_MAX) {
            last = last->next;
            (*n)++;
        }
        s->head = last->next;
        if (s->head == NULL) {
            s->tail = NULL;
        }
        last->next = NULL;
    }
    pthread_mutex_unlock(&s->mtx);
    return first;
}

static void
commit_write(store *s, store_txn *group, size_t n)
{
    leveldb_writebatch_t *merged = NULL;
    leveldb_writebatch_t *one = NULL;
    uint64_t dirty = 0;
    char *err = NULL;

    for (store_txn *t = group; t != NULL; t = t->next) {
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
        return;
    }
    fault_point(FAULT_BATCH_STAGED);
#ifdef ONCE_SPLIT_WRITES
    /* Test-only builds (tests/CMakeLists.txt): effect and record in two
     * writes, to show the crash matrix catches it. Never in onced. */
    if (merged != NULL) {
        leveldb_writebatch_destroy(merged);
    }
    commit_split_write(s, group);
    return;
#endif
    leveldb_write(s->db, s->wsync, merged != NULL ? merged : one, &err);
    if (merged != NULL) {
        leveldb_writebatch_destroy(merged);
    }
    if (err != NULL) {
        fprintf(stderr,
                "onced: FATAL: synced LevelDB write failed: %s; stopping "
                "without acknowledging it (restart to recover from the "
                "log)\n",
                err);
        abort();
    }
    /* One write holds effect and record: nothing lies between them. */
    fault_point(FAULT_WRITE_BETWEEN);
    atomic_fetch_add(&s->fsyncs, 1);
    atomic_fetch_add(&s->commits, dirty);
    atomic_fetch_add(&s->groups, 1);
    if (n > atomic_load(&s->max_group)) {
        atomic_store(&s->max_group, n);
    }
}

/* Appends a durable group to the finisher's queue. */
static void
commit_pass_on(store *s, store_txn *group)
{
    store_txn *last = group;

    while (last->next != NULL) {
        last = last->next;
    }
    pthread_mutex_lock(&s->mtx);
    if (s->done_tail != NULL) {
        s->done_tail->next = group;
    } else {
        s->done_head = group;
    }
    s->done_tail = last;
    pthread_cond_signal(&s->done_cv);
    pthread_mutex_unlock(&s->mtx);
}

static void *
commit_main(void *arg)
{
    store *s = arg;
    store_txn *group;
    size_t n;

    while ((group = commit_take(s, &n)) != NULL) {
        commit_write(s, group, n);
        commit_pass_on(s, group);
    }
    pthread_mutex_lock(&s->mtx);
    s->committer_exited = true;
    pthread_cond_signal(&s->done_cv);
    pthread_mutex_unlock(&s->mtx);
    return NULL;
}

static void *
finish_main(void *arg)
{
    store *s = arg;

    for (;;) {
        store_txn *group;

        pthread_mutex_lock(&s->mtx);
        while (s->done_head == NULL && !s->committer_exited) {
            pthread_cond_wait(&s->done_cv, &s->mtx);
        }
        group = s->done_head;
        s->done_head = NULL;
        s->done_tail = NULL;
        pthread_mutex_unlock(&s->mtx);
        if (group == NULL) {
            return NULL; /* the committer is gone and nothing is left */
        }
        while (group != NULL) {
            store_txn *t = group;
            group = t->next;
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
}

int
commit_start(store *s)
{
    int rv;
    if ((rv = pthread_create(&s->committer, NULL, commit_main, s)) != 0) {
        return rv;
    }
    if ((rv = pthread_create(&s->finisher, NULL, finish_main, s)) != 0) {
        pthread_mutex_lock(&s->mtx);
        s->stopping = true;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mtx);
        pthread_join(s->committer, NULL);
        return rv;
    }
    s->running = true;
    return 0;
}

void
commit_stop(store *s)
{
    if (!s->running) {
        return;
    }
    pthread_mutex_lock(&s->mtx);
    s->stopping = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mtx);
    pthread_join(s->committer, NULL);
    pthread_join(s->finisher, NULL);
    s->running = false;
}
