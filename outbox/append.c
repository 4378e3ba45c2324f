/*
 * append.c — one event appended to a topic in the producing call's
 * transaction (outbox_append).
 *
 * Owns the order of an append: check the payload's size, read the topic's
 * state through the transaction (so a second event of the same call sees
 * the first), refuse when the topic's retained bytes would pass the
 * bound, then stage the event at head + 1 and the topic's new state.
 * Invariant: the event, its offset and the topic's head are staged
 * together; a refusal stages nothing.
 * Never: commits; drops an event silently.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/outbox_impl.h"
#include "proto/once.pb-c.h"
#include "proto/reasons.h"

/* Fills o with a refusal: the payload (plen) or the topic's bytes. */
static void
refuse(outbox_outcome *o, const outbox_limits *l, const char *topic,
       size_t plen, const outbox_topic *t, size_t size)
{
    if (plen > l->payload_max) {
        o->code = ONCE__V1__CODE__INVALID_ARGUMENT;
        o->reason = REASON_OUTBOX_PAYLOAD_TOO_LARGE;
        snprintf(o->message, sizeof(o->message),
                 "an event payload of %zu bytes; at most %llu (onced "
                 "--outbox-payload-max): nothing was written",
                 plen, (unsigned long long)l->payload_max);
        return;
    }
    o->code = ONCE__V1__CODE__RESOURCE_EXHAUSTED;
    o->reason = REASON_OUTBOX_FULL;
    snprintf(o->message, sizeof(o->message),
             "topic \"%.64s\" retains %llu bytes; this event (%zu) would "
             "pass --outbox-max-bytes (%llu): nothing was written — let its "
             "consumers acknowledge, then retry the same rpc id",
             topic, (unsigned long long)t->bytes, size,
             (unsigned long long)l->max_bytes);
}

int
outbox_append(store_txn *txn, const outbox_limits *l, outbox_producer *p,
              const char *topic, const uint8_t *payload, size_t plen,
              uint64_t *offset, outbox_outcome *o)
{
    Once__V1__OutboxEvent ev = ONCE__V1__OUTBOX_EVENT__INIT;
    Once__V1__EventId id = ONCE__V1__EVENT_ID__INIT;
    outbox_topic t;
    outbox_key k;
    size_t size;
    int rv;

    o->code = ONCE__V1__CODE__OK;
    if (plen > l->payload_max) {
        refuse(o, l, topic, plen, NULL, 0);
        return 0;
    }
    if ((rv = outbox_topic_read(txn, topic, &t)) != 0) {
        return o->err = rv;
    }
    id.client_id = p->client_id;
    id.seq = p->seq;
    id.index = p->next_index;
    ev.offset = t.head + 1;
    ev.id = &id;
    ev.method = (char *)p->method;
    ev.time_unix_ms = p->now_ms;
    ev.payload.data = (uint8_t *)payload;
    ev.payload.len = plen;
    size = once__v1__outbox_event__get_packed_size(&ev);
    if (l->max_bytes != 0 && t.bytes + size > l->max_bytes) {
        refuse(o, l, topic, plen, &t, size);
        return 0;
    }
    if ((rv = outbox_key_event(&k, topic, ev.offset)) != 0) {
        return o->err = rv;
    }
    rv = store_txn_put_msg(txn, k.b, k.n, &ev.base);
    outbox_key_fini(&k);
    t.head = ev.offset;
    t.events++;
    t.bytes += size;
    if (rv == 0) {
        rv = outbox_topic_write(txn, topic, &t);
    }
    if (rv == 0 && t.head == 1) { /* the topic's first event */
        rv = outbox_fences_put(txn);
    }
    if (rv == 0) {
        *offset = ev.offset;
        p->next_index++;
    }
    return o->err = rv;
}
