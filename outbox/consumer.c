/*
 * consumer.c — durable named consumers: Subscribe, Ack, Unsubscribe, and
 * the cursor they keep (o/c/<topic>\0<consumer>: the highest offset the
 * consumer acknowledged).
 *
 * Owns the cursor's rules: a new consumer starts just below the topic's
 * low-water mark (it reads every event still stored); an Ack only moves a
 * cursor forward and never past the topic's head; an unsubscribed
 * consumer holds nothing back.
 * Invariant: a cursor is never below low - 1 (reclaim.c deletes only
 * what every cursor passed), so nothing a consumer has not acknowledged
 * is ever gone.
 * Never: deletes events (the collector does, reclaim.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/outbox_impl.h"
#include "proto/once.pb-c.h"
#include "proto/reasons.h"

int
outbox_cursor_get(store_txn *txn, const char *topic, const char *consumer,
                  uint64_t *acked)
{
    outbox_key k;
    char *val = NULL;
    size_t vlen = 0;
    int rv;

    if ((rv = outbox_key_consumer(&k, topic, consumer)) != 0) {
        return rv;
    }
    rv = store_txn_get(txn, k.b, k.n, &val, &vlen);
    outbox_key_fini(&k);
    if (rv == 0 && vlen != 8) {
        rv = EBADMSG;
    }
    if (rv == 0) {
        *acked = outbox_be64_get(val);
    }
    free(val);
    return rv;
}

static int
cursor_put(store_txn *txn, const char *topic, const char *consumer,
           uint64_t acked)
{
    uint8_t be[8];
    outbox_key k;
    int rv;

    outbox_be64_put(be, acked);
    if ((rv = outbox_key_consumer(&k, topic, consumer)) != 0) {
        return rv;
    }
    rv = store_txn_put(txn, k.b, k.n, be, sizeof(be));
    outbox_key_fini(&k);
    return rv;
}

int
outbox_topic_cursor(store_txn *txn, const char *topic, const char *consumer,
                    outbox_topic *t, uint64_t *acked)
{
    int rv = outbox_topic_read(txn, topic, t);

    return rv != 0 ? rv : outbox_cursor_get(txn, topic, consumer, acked);
}

int
outbox_subscribe(store_txn *txn, const Once__V1__OutboxSubscribeRequest *r,
                 Once__V1__OutboxSubscribeResponse *resp, outbox_outcome *o)
{
    outbox_topic t;
    uint64_t acked;
    int rv;

    o->code = ONCE__V1__CODE__OK;
    rv = outbox_topic_cursor(txn, r->topic, r->consumer, &t, &acked);
    if (rv == ENOENT) {
        acked = t.low - 1;
        rv = cursor_put(txn, r->topic, r->consumer, acked);
        resp->created = true;
        if (rv == 0) {
            /* The topic exists from its first consumer on (Topics). */
            rv = outbox_topic_write(txn, r->topic, &t);
        }
        if (rv == 0) {
            rv = outbox_fences_put(txn);
        }
    }
    resp->acked = acked;
    resp->head = t.head;
    resp->low_water = t.low;
    return o->err = rv;
}

void
outbox_no_consumer(outbox_outcome *o, const char *topic, const char *consumer)
{
    o->code = ONCE__V1__CODE__NOT_FOUND;
    o->reason = REASON_OUTBOX_NO_CONSUMER;
    snprintf(o->message, sizeof(o->message),
             "no consumer \"%.48s\" on topic \"%.64s\": subscribe it first",
             consumer, topic);
}

int
outbox_ack(store_txn *txn, const Once__V1__OutboxAckRequest *r,
           Once__V1__OutboxAckResponse *resp, outbox_outcome *o)
{
    outbox_topic t;
    uint64_t acked;
    int rv;

    o->code = ONCE__V1__CODE__OK;
    rv = outbox_topic_cursor(txn, r->topic, r->consumer, &t, &acked);
    if (rv == ENOENT) {
        outbox_no_consumer(o, r->topic, r->consumer);
        return 0;
    }
    if (rv != 0) {
        return o->err = rv;
    }
    if (r->offset > t.head) {
        o->code = ONCE__V1__CODE__INVALID_ARGUMENT;
        o->reason = REASON_OUTBOX_BAD_OFFSET;
        snprintf(o->message, sizeof(o->message),
                 "offset %llu is past topic \"%.64s\"'s head %llu: "
                 "acknowledge only offsets a Read returned",
                 (unsigned long long)r->offset, r->topic,
                 (unsigned long long)t.head);
        return 0;
    }
    if (r->offset > acked) {
        acked = r->offset;
        rv = cursor_put(txn, r->topic, r->consumer, acked);
    }
    resp->acked = acked;
    resp->low_water = t.low;
    return o->err = rv;
}

int
outbox_unsubscribe(store_txn *txn, const Once__V1__OutboxUnsubscribeRequest *r,
                   Once__V1__OutboxUnsubscribeResponse *resp, outbox_outcome *o)
{
    outbox_key k;
    uint64_t acked;
    int rv;

    o->code = ONCE__V1__CODE__OK;
    rv = outbox_cursor_get(txn, r->topic, r->consumer, &acked);
    if (rv == ENOENT) {
        return 0;
    }
    if (rv == 0 && (rv = outbox_key_consumer(&k, r->topic, r->consumer)) == 0) {
        rv = store_txn_del(txn, k.b, k.n);
        outbox_key_fini(&k);
        resp->existed = true;
    }
    return o->err = rv;
}
