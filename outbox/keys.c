/*
 * keys.c — the outbox's LevelDB keys (outbox_impl.h has the layout).
 *
 * Owns the bytes of every "o/" key, so no other file spells one.
 * Invariant: an event key sorts by its topic, then by offset (big-endian).
 * Never: reads the store; writes only the fences (outbox_fences_put).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/outbox_impl.h"

uint64_t
outbox_be64_get(const void *p)
{
    const uint8_t *b = p;
    uint64_t v = 0;

    for (int i = 0; i < 8; i++) {
        v = (v << 8) | b[i];
    }
    return v;
}

void
outbox_be64_put(void *p, uint64_t v)
{
    uint8_t *b = p;

    for (int i = 7; i >= 0; i--) {
        b[i] = (uint8_t)v;
        v >>= 8;
    }
}

/* prefix, topic, then (when sep) a NUL and tail of tlen bytes. */
static int
key_build(outbox_key *k, const char *prefix, const char *topic, bool sep,
          const void *tail, size_t tlen)
{
    size_t tn = strlen(topic);

    k->n = OUTBOX_PREFIX_LEN + tn + (sep ? 1 + tlen : 0);
    if ((k->b = malloc(k->n)) == NULL) {
        return ENOMEM;
    }
    memcpy(k->b, prefix, OUTBOX_PREFIX_LEN);
    memcpy(k->b + OUTBOX_PREFIX_LEN, topic, tn);
    if (sep) {
        k->b[OUTBOX_PREFIX_LEN + tn] = '\0';
        if (tlen > 0) {
            memcpy(k->b + OUTBOX_PREFIX_LEN + tn + 1, tail, tlen);
        }
    }
    return 0;
}

int
outbox_key_topic(outbox_key *k, const char *topic)
{
    return key_build(k, OUTBOX_TOPIC_PREFIX, topic, false, NULL, 0);
}

int
outbox_key_event(outbox_key *k, const char *topic, uint64_t offset)
{
    uint8_t be[8];

    outbox_be64_put(be, offset);
    return key_build(k, OUTBOX_EVENT_PREFIX, topic, true, be, sizeof(be));
}

int
outbox_key_events(outbox_key *k, const char *topic)
{
    return key_build(k, OUTBOX_EVENT_PREFIX, topic, true, NULL, 0);
}

int
outbox_key_consumers(outbox_key *k, const char *topic)
{
    return key_build(k, OUTBOX_CONSUMER_PREFIX, topic, true, NULL, 0);
}

int
outbox_key_consumer(outbox_key *k, const char *topic, const char *name)
{
    return key_build(k, OUTBOX_CONSUMER_PREFIX, topic, true, name,
                     strlen(name));
}

int
outbox_fences_put(store_txn *txn)
{
    int rv =
        store_txn_put(txn, OUTBOX_FENCE_CONSUMERS, OUTBOX_FENCE_LEN, "", 0);

    return rv != 0 ? rv
                   : store_txn_put(txn, OUTBOX_FENCE_TOPICS, OUTBOX_FENCE_LEN,
                                   "", 0);
}

void
outbox_key_fini(outbox_key *k)
{
    free(k->b);
    k->b = NULL;
    k->n = 0;
}
