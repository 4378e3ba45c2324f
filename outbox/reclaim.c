/*
 * reclaim.c — the collector's outbox step: deletes the events every
 * consumer of their topic has acknowledged (outbox_reclaim).
 *
 * Owns the rule of retention: an event at offset n of a topic is deleted
 * only when every consumer registered on the topic has a cursor >= n (a
 * topic without consumers holds nothing back), oldest first, at most a
 * budget of events per pass; the topic's low-water mark and retained
 * bytes move in the same batch as the deletions.
 * Invariant: what is deleted is exactly low .. new low - 1, so offsets
 * stay dense from the low-water mark to the head; a topic's state is
 * never deleted (its head must not go back: offsets are never reused).
 * Never: deletes for age; deletes past the lowest cursor.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/outbox_impl.h"

typedef struct reclaim_ctx {
    store_txn *txn;
    uint64_t *budget;
    uint64_t deleted;
    uint64_t bytes;
    uint64_t topics; /* seen by the walk */
} reclaim_ctx;

typedef struct event_del {
    reclaim_ctx *rc;
    uint64_t upto; /* delete offsets <= upto */
    uint64_t n;
    uint64_t bytes;
    uint64_t next; /* one past the last offset deleted */
} event_del;

static int
event_del_one(void *arg, const char *key, size_t klen, const char *val,
              size_t vlen)
{
    event_del *d = arg;
    uint64_t off;
    int rv;

    (void)val;
    if (klen < 8) {
        return EBADMSG;
    }
    off = outbox_be64_get(key + klen - 8);
    if (off > d->upto || *d->rc->budget == 0) {
        return 1; /* done with this topic */
    }
    if ((rv = store_txn_del(d->rc->txn, key, klen)) != 0) {
        return rv;
    }
    (*d->rc->budget)--;
    d->n++;
    d->bytes += vlen;
    d->next = off + 1;
    /* Stop on the last offset wanted, not on the key after it: past a
     * topic's last event come the next topic's deleted events. */
    return off == d->upto ? 1 : 0;
}

/* Reclaims what topic's consumers let go. */
static int
topic_reclaim(reclaim_ctx *rc, const char *topic)
{
    event_del d = {.rc = rc};
    outbox_topic t;
    outbox_key from, pre;
    uint64_t min;
    bool any;
    int rv;

    if ((rv = outbox_topic_read(rc->txn, topic, &t)) != 0 ||
        (rv = outbox_cursor_min(rc->txn, topic, &min, &any)) != 0) {
        return rv;
    }
    d.upto = any && min < t.head ? min : t.head;
    if (t.events == 0 || d.upto < t.low) {
        return 0;
    }
    if ((rv = outbox_key_event(&from, topic, t.low)) != 0) {
        return rv;
    }
    if ((rv = outbox_key_events(&pre, topic)) == 0) {
        rv = store_txn_scan(rc->txn, from.b, from.n, pre.b, pre.n,
                            event_del_one, &d);
        outbox_key_fini(&pre);
    }
    outbox_key_fini(&from);
    if ((rv != 0 && rv != 1) || d.n == 0) {
        return rv == 1 ? 0 : rv;
    }
    t.low = d.next;
    t.events -= d.n;
    t.bytes = t.bytes > d.bytes ? t.bytes - d.bytes : 0;
    rc->deleted += d.n;
    rc->bytes += d.bytes;
    return outbox_topic_write(rc->txn, topic, &t);
}

static int
topic_each(void *arg, const char *key, size_t klen, const char *val,
           size_t vlen)
{
    reclaim_ctx *rc = arg;
    char *topic;
    int rv;

    (void)val;
    (void)vlen;
    rc->topics++;
    if (*rc->budget == 0) {
        return 1;
    }
    if ((topic = malloc(klen - OUTBOX_PREFIX_LEN + 1)) == NULL) {
        return ENOMEM;
    }
    memcpy(topic, key + OUTBOX_PREFIX_LEN, klen - OUTBOX_PREFIX_LEN);
    topic[klen - OUTBOX_PREFIX_LEN] = '\0';
    rv = topic_reclaim(rc, topic);
    free(topic);
    return rv;
}

/* Whether a topic was ever made: its fence is there (a point read, where
 * a walk to the first topic key would step over every record tombstone
 * when there is none). */
static int
topics_fenced(store_txn *txn, bool *fenced)
{
    char *val = NULL;
    size_t vlen = 0;
    int rv =
        store_txn_get(txn, OUTBOX_FENCE_TOPICS, OUTBOX_FENCE_LEN, &val, &vlen);

    free(val);
    *fenced = rv == 0;
    return rv == ENOENT ? 0 : rv;
}

int
outbox_reclaim(store_txn *txn, bool first, uint64_t *budget, uint64_t *deleted,
               uint64_t *bytes)
{
    reclaim_ctx rc = {.txn = txn, .budget = budget};
    bool fenced = false;
    int rv;

    *deleted = *bytes = 0;
    if (!first && ((rv = topics_fenced(txn, &fenced)) != 0 || !fenced)) {
        return rv;
    }
    rv =
        store_txn_scan(txn, OUTBOX_TOPIC_PREFIX, OUTBOX_PREFIX_LEN,
                       OUTBOX_TOPIC_PREFIX, OUTBOX_PREFIX_LEN, topic_each, &rc);
    if ((rv == 0 || rv == 1) && first && rc.topics > 0) {
        rv = outbox_fences_put(txn); /* a store from before fences */
    }
    *deleted = rc.deleted;
    *bytes = rc.bytes;
    return rv == 1 ? 0 : rv;
}
