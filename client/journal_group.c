/*
 * journal_group.c — the LevelDB journal's writes merged across threads
 * (journal_group.h). A caller that finds nothing queued and nothing being
 * written writes alone, itself (no other thread is woken: one chain pays
 * what leveldb_put pays). Otherwise it queues its write and sleeps on its
 * own semaphore; the group's thread takes the whole queue and writes it
 * as one leveldb_write, synced when any write in it asks for it (one
 * fsync for all), then posts each caller.
 *
 * Owns: the thread, the queue of waiting writes and whether a write is in
 * LevelDB (under lock), and the one WriteBatch the thread fills.
 * Invariant: one leveldb_write at a time from here (a lone caller's or
 * the thread's); the queue is taken whole and in order, so a later write
 * of a key wins as it would one by one; a waiter's node lives on its
 * stack and is touched by the thread only until its semaphore is posted.
 *
 * Why not LevelDB's own grouping, which merges concurrent writes too
 * (DBImpl::BuildBatchGroup): profiled at 64 chains (docs/performance.md,
 * "Chains"), 63% of the CPU of a journal write was futex work — each
 * follower of a group is woken by its own condition variable under the
 * DB mutex and then contends for that mutex — and a synced write never
 * joins a group led by an unsynced one, so a chain's two writes per step
 * (a synced commit, an unsynced reply) split the groups and an unsynced
 * write queued behind a synced group waits for its fsync. Here a waiter
 * sleeps once and is woken once, without a lock to take after the wake.
 * An unsynced write merged with synced ones waits for their fsync here
 * too; writing the unsynced ones first, as a write of their own, and
 * waking their callers before the synced write was measured and gained
 * nothing (docs/performance.md), so the simpler one stays. So did a
 * thread that writes every write, a lone one too: it costs one chain two
 * context switches per write.
 * With a reply log (journal_replies.h), a synced write drops, once it
 * succeeded, the kept records of the keys it wrote (it replaced them),
 * and when the log's file is full carries every kept record into
 * LevelDB, first in the batch so the write's own entries win; the full
 * files go after it. A lone write takes the same path as the thread's,
 * one batch of one.
 * Never: holds lock across a LevelDB call; returns to a caller before its
 * write is in LevelDB's log (and synced, when it asked for that).
 */
#include "client/journal_group.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/queue.h"

typedef struct jg_node {
    queue_link link;       /* in jgroup.q, then in the writer's group */
    const char *key, *val; /* val NULL: a delete */
    size_t klen, vlen;
    bool sync;
    sem_t done; /* posted by the writer thread once written */
    char *err;  /* the caller's buffer; filled on failure */
    size_t errcap;
    int rv;
} jg_node;

struct jgroup {
    leveldb_t *db; /* not owned */
    jreplies *rl;  /* not owned; NULL: none */
    leveldb_writeoptions_t *wsync, *wnosync;
    leveldb_writebatch_t *batch; /* the writer thread's only */
    pthread_t thread;
    pthread_mutex_t lock; /* protects q, busy, idle, stop */
    pthread_cond_t work;  /* signalled when the idle thread has work */
    queue q;              /* jg_node: queued for the writer thread */
    bool busy;            /* in leveldb_write: a lone caller or the thread */
    bool idle;            /* the writer thread waits on work */
    bool stop;
};

#define NODE(l) QUEUE_ITEM(l, jg_node, link)

/* The nodes of group as one write, synced when any of them asks for it,
 * after the reply log's kept records when synced; each node's rv and err
 * filled. The caller holds busy (g->batch is the busy writer's). */
static void
jg_write_group(jgroup *g, queue *group)
{
    jreplies_ticket t = {0, false, 0, 0};
    char *err = NULL;
    bool sync = false;
    queue_link *l;

    for (l = group->head; l != NULL; l = l->next) {
        sync = sync || NODE(l)->sync;
    }
    leveldb_writebatch_clear(g->batch);
    if (sync && g->rl != NULL) {
        jreplies_take(g->rl, g->batch, false, &t);
    }
    for (l = group->head; l != NULL; l = l->next) {
        jg_node *m = NODE(l);

        if (m->val != NULL) {
            leveldb_writebatch_put(g->batch, m->key, m->klen, m->val, m->vlen);
        } else {
            leveldb_writebatch_delete(g->batch, m->key, m->klen);
        }
    }
    leveldb_write(g->db, sync ? g->wsync : g->wnosync, g->batch, &err);
    if (sync && g->rl != NULL) {
        jreplies_done(g->rl, &t, err == NULL);
        for (l = group->head; err == NULL && l != NULL; l = l->next) {
            jreplies_drop(g->rl, &t, NODE(l)->key, NODE(l)->klen);
        }
    }
    for (l = group->head; l != NULL; l = l->next) {
        jg_node *n = NODE(l);

        n->rv = err != NULL ? -1 : 0;
        if (err != NULL) {
            snprintf(n->err, n->errcap, "%s", err);
        }
    }
    leveldb_free(err);
}

/* jg_write_group, then each node posted (gone once posted). */
static void
jg_write_posted(jgroup *g, queue *group)
{
    queue_link *l;

    jg_write_group(g, group);
    while ((l = queue_pop(group)) != NULL) {
        sem_post(&NODE(l)->done);
    }
}

/* The writer thread: writes the whole queue at a time while no lone
 * caller is writing. */
static void *
jg_main(void *arg)
{
    jgroup *g = arg;
    queue group;

    pthread_mutex_lock(&g->lock);
    for (;;) {
        while ((queue_empty(&g->q) || g->busy) && !g->stop) {
            g->idle = true;
            pthread_cond_wait(&g->work, &g->lock);
            g->idle = false;
        }
        if (queue_empty(&g->q)) {
            break; /* stopped, nothing queued */
        }
        group = (queue){0};
        (void)queue_take(&g->q, &group, SIZE_MAX);
        g->busy = true;
        pthread_mutex_unlock(&g->lock);
        jg_write_posted(g, &group);
        pthread_mutex_lock(&g->lock);
        g->busy = false;
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

int
jgroup_open(leveldb_t *db, jreplies *rl, jgroup **gp)
{
    jgroup *g;
    int e;

    *gp = NULL;
    if ((g = calloc(1, sizeof(*g))) == NULL) {
        return ENOMEM;
    }
    g->db = db;
    g->rl = rl;
    g->wsync = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(g->wsync, 1);
    g->wnosync = leveldb_writeoptions_create();
    g->batch = leveldb_writebatch_create();
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->work, NULL);
    if ((e = pthread_create(&g->thread, NULL, jg_main, g)) != 0) {
        g->stop = true; /* nothing to join */
        jgroup_close(g);
        return e;
    }
    *gp = g;
    return 0;
}

void
jgroup_close(jgroup *g)
{
    bool running;

    if (g == NULL) {
        return;
    }
    pthread_mutex_lock(&g->lock);
    running = !g->stop;
    g->stop = true;
    pthread_cond_signal(&g->work);
    pthread_mutex_unlock(&g->lock);
    if (running) {
        pthread_join(g->thread, NULL);
    }
    leveldb_writebatch_destroy(g->batch);
    leveldb_writeoptions_destroy(g->wsync);
    leveldb_writeoptions_destroy(g->wnosync);
    pthread_cond_destroy(&g->work);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

/* A lone write n, by its caller (nothing queued, nothing being
 * written): no thread is woken for it. 0 or -1 as jgroup_write. */
static int
jg_write_alone(jgroup *g, jg_node *n)
{
    queue one = {0};

    queue_push(&one, &n->link);
    jg_write_group(g, &one);
    pthread_mutex_lock(&g->lock);
    g->busy = false;
    if (!queue_empty(&g->q) && g->idle) {
        pthread_cond_signal(&g->work); /* queued behind this write */
    }
    pthread_mutex_unlock(&g->lock);
    return n->rv;
}

int
jgroup_write(jgroup *g, const char *key, size_t klen, const char *val,
             size_t vlen, bool sync, char *err, size_t errcap)
{
    jg_node n = {.key = key,
                 .klen = klen,
                 .val = val,
                 .vlen = vlen,
                 .sync = sync,
                 .err = err,
                 .errcap = errcap};

    pthread_mutex_lock(&g->lock);
    if (!g->busy && queue_empty(&g->q)) {
        g->busy = true;
        pthread_mutex_unlock(&g->lock);
        return jg_write_alone(g, &n);
    }
    sem_init(&n.done, 0, 0);
    queue_push(&g->q, &n.link);
    if (g->idle && !g->busy) {
        pthread_cond_signal(&g->work);
    }
    pthread_mutex_unlock(&g->lock);
    while (sem_wait(&n.done) != 0 && errno == EINTR) {
    }
    sem_destroy(&n.done);
    return n.rv;
}
