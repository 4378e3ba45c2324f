/*
 * split.c — TEST-ONLY: the unsafe write orders the crash matrix must catch.
 *
 * Compiled only into onced_split_effect_first (ONCE_SPLIT_WRITES=1) and
 * onced_split_record_first (ONCE_SPLIT_WRITES=2), never into onced or
 * once_store (their commit.c object takes the place of once_store_test's).
 * Writes each transaction of a group as two synced LevelDB writes — its
 * effect keys and its completion record ("r/...") — in the build's order,
 * with the fault point write_between after the first. A crash there leaves
 * an effect without its record (a retry runs it again: two effects) or a
 * record without its effect (a retry replays a result whose effect is
 * gone: none). docs/spec.md forbids exactly this.
 *
 * Never: used by anything but the crash-matrix tests.
 */
#ifdef ONCE_SPLIT_WRITES

#include "store/store_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/fault.h"

static bool
split_is_record(const txn_write *w)
{
    return w->klen == 18 && memcmp(w->key, "r/", 2) == 0;
}

/* Writes t's writes of one kind (records or not) in one synced write.
 * Returns how many writes that was. */
static size_t
split_write_part(store *s, const store_txn *t, bool records)
{
    leveldb_writebatch_t *b = leveldb_writebatch_create();
    size_t n = 0;
    char *err = NULL;

    for (size_t i = 0; i < t->nwrites; i++) {
        const txn_write *w = &t->writes[i];
        if (split_is_record(w) != records) {
            continue;
        }
        if (w->val != NULL) {
            leveldb_writebatch_put(b, w->key, w->klen, w->val, w->vlen);
        } else {
            leveldb_writebatch_delete(b, w->key, w->klen);
        }
        n++;
    }
    if (n > 0) {
        leveldb_write(s->db, s->wsync, b, &err);
        if (err != NULL) {
            fprintf(stderr, "onced (split build): write failed: %s\n", err);
            abort();
        }
    }
    leveldb_writebatch_destroy(b);
    return n;
}

void
commit_split_write(store *s, const queue *group)
{
    const bool effect_first = ONCE_SPLIT_WRITES == 1;

    for (queue_link *l = group->head; l != NULL; l = l->next) {
        store_txn *t = QUEUE_ITEM(l, store_txn, link);
        size_t first = split_write_part(s, t, !effect_first);
        if (first > 0 && first < t->nwrites) {
            FAULT_POINT(FAULT_WRITE_BETWEEN);
        }
        split_write_part(s, t, effect_first);
        atomic_fetch_add(&s->fsyncs, 2);
        atomic_fetch_add(&s->commits, 1);
    }
    atomic_fetch_add(&s->groups, 1);
}

#endif /* ONCE_SPLIT_WRITES */
