/*
 * outbox_impl.h — what the files of outbox/ share: the key layout
 * (keys.c) and the topic state's encoding (topic.c).
 *
 * The LevelDB namespace "o/" (docs/design.md, "What is stored"):
 *   o/t/<topic>                          be64 x4: head, low, events, bytes
 *   o/e/<topic>\0<offset:be64>           an OutboxEvent (outbox.proto)
 *   o/c/<topic>\0<consumer>              be64: the consumer's cursor
 *   o/d, o/u                             empty: the fences (below)
 * Names hold no NUL (wire_text.h refuses it), so "<topic>\0" is a prefix
 * of exactly that topic's keys.
 * Invariant: o/t/<topic> counts exactly the o/e/ keys of the topic, whose
 * offsets are low..head; outbox_topic_write is the only writer of o/t/.
 * Never: included outside outbox/.
 */
#ifndef OUTBOX_OUTBOX_IMPL_H
#define OUTBOX_OUTBOX_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "outbox/outbox.h"

#define OUTBOX_TOPIC_PREFIX    "o/t/"
#define OUTBOX_EVENT_PREFIX    "o/e/"
#define OUTBOX_CONSUMER_PREFIX "o/c/"
#define OUTBOX_PREFIX_LEN      4

/* The fences: live, empty keys just past the o/c/ and o/t/ families.
 * LevelDB's iterators have no upper bound, so a scan that reaches the end
 * of a family steps over every deleted key after it until it meets a live
 * one, and the completion records' tombstones ("r/") come right after
 * "o/". A fence ends that walk at once. Written with a topic's first event
 * or a consumer's subscription, and by the collector's first pass over a
 * store written before fences existed (outbox_reclaim); never deleted. */
#define OUTBOX_FENCE_CONSUMERS "o/d"
#define OUTBOX_FENCE_TOPICS    "o/u"
#define OUTBOX_FENCE_LEN       3

/* A built LevelDB key (malloc'd b; outbox_key_fini frees it). */
typedef struct outbox_key {
    char *b;
    size_t n;
} outbox_key;

/* keys.c: each returns 0 or ENOMEM. */
int outbox_key_topic(outbox_key *k, const char *topic);
int outbox_key_event(outbox_key *k, const char *topic, uint64_t offset);
/* o/e/<topic>\0 or o/c/<topic>\0: every event or consumer of topic. */
int outbox_key_events(outbox_key *k, const char *topic);
int outbox_key_consumers(outbox_key *k, const char *topic);
int outbox_key_consumer(outbox_key *k, const char *topic, const char *name);
void outbox_key_fini(outbox_key *k);

/* keys.c: stages both fences in txn (idempotent). 0 or a store error. */
int outbox_fences_put(store_txn *txn);

uint64_t outbox_be64_get(const void *p);
void outbox_be64_put(void *p, uint64_t v);

/* topic.c: stages the topic's state. 0 or ENOMEM. */
int outbox_topic_write(store_txn *txn, const char *topic,
                       const outbox_topic *t);
/* The lowest cursor of the topic's consumers (*any false: none). 0 or a
 * store error. */
int outbox_cursor_min(store_txn *txn, const char *topic, uint64_t *min,
                      bool *any);
/* consumer.c: the topic's state and the consumer's cursor: 0, ENOENT
 * (no such consumer; *t is read), or a store error. */
int outbox_topic_cursor(store_txn *txn, const char *topic, const char *consumer,
                        outbox_topic *t, uint64_t *acked);
/* consumer.c: the refusal of a consumer not subscribed to topic. */
void outbox_no_consumer(outbox_outcome *o, const char *topic,
                        const char *consumer);

#endif /* OUTBOX_OUTBOX_IMPL_H */
