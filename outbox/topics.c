/*
 * topics.c — Outbox.Topics: every topic's offsets, retained events and
 * bytes, low-water mark, and its consumers with their cursor and lag.
 *
 * Owns the listing (name order, as the keys sort).
 * Invariant: stages nothing.
 * Never: decides anything.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/outbox_impl.h"

typedef struct topics_ctx {
    store_txn *txn;
    Once__V1__OutboxTopicsResponse *resp;
    size_t cap;
    Once__V1__OutboxTopic *cur; /* consumers are being added to it */
    size_t ccap;
    size_t skip; /* consumer keys: bytes before the name */
} topics_ctx;

static char *
strndup_(const char *s, size_t n)
{
    char *d = malloc(n + 1);

    if (d != NULL) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static int
consumer_one(void *arg, const char *key, size_t klen, const char *val,
             size_t vlen)
{
    topics_ctx *x = arg;
    Once__V1__OutboxTopic *tp = x->cur;
    Once__V1__OutboxConsumer *c;

    if (vlen != 8 || klen < x->skip) {
        return EBADMSG;
    }
    if (tp->n_consumers == x->ccap) {
        size_t ncap = x->ccap == 0 ? 4 : x->ccap * 2;
        void *p = realloc(tp->consumers, ncap * sizeof(*tp->consumers));
        if (p == NULL) {
            return ENOMEM;
        }
        tp->consumers = p;
        x->ccap = ncap;
    }
    if ((c = malloc(sizeof(*c))) == NULL) {
        return ENOMEM;
    }
    once__v1__outbox_consumer__init(c);
    tp->consumers[tp->n_consumers++] = c;
    if ((c->name = strndup_(key + x->skip, klen - x->skip)) == NULL) {
        return ENOMEM;
    }
    c->acked = outbox_be64_get(val);
    c->lag = tp->head > c->acked ? tp->head - c->acked : 0;
    return 0;
}

/* Adds the topic named in key (o/t/<name>) and its consumers. */
static int
topic_one(void *arg, const char *key, size_t klen, const char *val, size_t vlen)
{
    topics_ctx *x = arg;
    Once__V1__OutboxTopic *tp;
    outbox_topic t;
    outbox_key k;
    int rv;

    (void)val;
    (void)vlen;
    if (x->resp->n_topics == x->cap) {
        size_t ncap = x->cap == 0 ? 8 : x->cap * 2;
        void *p = realloc(x->resp->topics, ncap * sizeof(*x->resp->topics));
        if (p == NULL) {
            return ENOMEM;
        }
        x->resp->topics = p;
        x->cap = ncap;
    }
    if ((tp = malloc(sizeof(*tp))) == NULL) {
        return ENOMEM;
    }
    once__v1__outbox_topic__init(tp);
    x->resp->topics[x->resp->n_topics++] = tp;
    tp->name = strndup_(key + OUTBOX_PREFIX_LEN, klen - OUTBOX_PREFIX_LEN);
    if (tp->name == NULL) {
        return ENOMEM;
    }
    if ((rv = outbox_topic_read(x->txn, tp->name, &t)) != 0) {
        return rv;
    }
    tp->head = t.head;
    tp->low_water = t.low;
    tp->retained_events = t.events;
    tp->retained_bytes = t.bytes;
    if ((rv = outbox_key_consumers(&k, tp->name)) != 0) {
        return rv;
    }
    x->cur = tp;
    x->ccap = 0;
    x->skip = k.n;
    rv = store_txn_scan(x->txn, k.b, k.n, k.b, k.n, consumer_one, x);
    outbox_key_fini(&k);
    return rv;
}

int
outbox_topics(store_txn *txn, Once__V1__OutboxTopicsResponse *resp)
{
    topics_ctx x = {.txn = txn, .resp = resp};

    return store_txn_scan(txn, OUTBOX_TOPIC_PREFIX, OUTBOX_PREFIX_LEN,
                          OUTBOX_TOPIC_PREFIX, OUTBOX_PREFIX_LEN, topic_one,
                          &x);
}

void
outbox_topics_fini(Once__V1__OutboxTopicsResponse *resp)
{
    for (size_t i = 0; i < resp->n_topics; i++) {
        Once__V1__OutboxTopic *tp = resp->topics[i];

        for (size_t j = 0; j < tp->n_consumers; j++) {
            free(tp->consumers[j]->name);
            free(tp->consumers[j]);
        }
        free(tp->consumers);
        free(tp->name);
        free(tp);
    }
    free(resp->topics);
    resp->topics = NULL;
    resp->n_topics = 0;
}
