/*
 * outbox.c — libonce's calls of once.v1.Outbox (once/outbox.h).
 *
 * Owns packing each request, the call through once_call, and the
 * batches and topic lists handed out (the unpacked reply behind an opaque
 * handle).
 * Invariant: a mutating call goes through once_call with its id, so a
 * retry sends the same bytes under the same id.
 * Never: retries by itself beyond once_call; keeps a caller's buffer.
 */
#include <stdlib.h>
#include <string.h>

#include "client/outbox_impl.h"
#include "client/status.h"
#include "proto/outbox.pb-c.h"
#include <once/outbox.h>

#define OUTBOX_METHOD(m) "/once.v1.Outbox/" m

/* What a handle holds: one unpacked reply (each handle's first and only
 * member, so outbox_fetch fills both kinds). */
typedef struct outbox_held {
    ProtobufCMessage *m;
} outbox_held;

struct once_outbox_batch {
    outbox_held h; /* an OutboxReadResponse */
};

struct once_outbox_topics_list {
    outbox_held h; /* an OutboxTopicsResponse */
};

#define BATCH(b)  ((const Once__V1__OutboxReadResponse *)(b)->h.m)
#define TOPICS(l) ((const Once__V1__OutboxTopicsResponse *)(l)->h.m)

/* Packs msg, calls method, and unpacks the reply with desc into *out
 * (NULL: the reply is dropped). */
static int
outbox_call(once_client *c, const char *method, bool mutating, once_rpc_id *id,
            const ProtobufCMessage *msg, const ProtobufCMessageDescriptor *desc,
            ProtobufCMessage **out, once_status *st)
{
    size_t len = protobuf_c_message_get_packed_size(msg), rlen = 0;
    uint8_t *buf = malloc(len > 0 ? len : 1);
    void *resp = NULL;
    int rv;

    if (buf == NULL) {
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "packing %s", method);
    }
    protobuf_c_message_pack(msg, buf);
    rv = once_call(c, method, mutating, id, buf, len, &resp, &rlen, st);
    free(buf);
    if (rv == ONCE_OK && out != NULL &&
        (*out = protobuf_c_message_unpack(desc, NULL, rlen, resp)) == NULL) {
        rv = status_set(st, ONCE_INTERNAL, ONCE_REASON_BAD_RESPONSE,
                        "the reply of %s is not a %s", method, desc->name);
    }
    once_free(resp);
    return rv;
}

/* A read whose reply is handed out behind a handle of hsize bytes
 * (*out, malloc'd; what names it in an out-of-memory status). */
static int
outbox_fetch(once_client *c, const char *method, const ProtobufCMessage *req,
             const ProtobufCMessageDescriptor *desc, size_t hsize,
             const char *what, void **out, once_status *st)
{
    ProtobufCMessage *m = NULL;
    outbox_held *h;
    int rv = outbox_call(c, method, false, NULL, req, desc, &m, st);

    if (rv != ONCE_OK) {
        return rv;
    }
    if ((h = malloc(hsize)) == NULL) {
        protobuf_c_message_free_unpacked(m, NULL);
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "%s", what);
    }
    h->m = m;
    *out = h;
    return ONCE_OK;
}

/* Packs msg and starts method as an async call (*f its future). */
static int
outbox_async(once_client *c, const char *method, bool mutating,
             const ProtobufCMessage *msg, once_future **f, once_status *st)
{
    size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(len > 0 ? len : 1);
    int rv;

    if (buf == NULL) {
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "packing %s", method);
    }
    protobuf_c_message_pack(msg, buf);
    rv =
        once_call_async(c, method, mutating, NULL, buf, len, NULL, NULL, f, st);
    free(buf);
    return rv;
}

/* Waits for f, frees it, and unpacks its reply with desc into *out. */
static int
outbox_async_reply(once_future *f, const ProtobufCMessageDescriptor *desc,
                   ProtobufCMessage **out, once_status *st)
{
    void *resp = NULL;
    size_t rlen = 0;
    int rv = once_wait(f, st);

    if (rv == ONCE_OK) {
        (void)once_future_response(f, &resp, &rlen);
        if ((*out = protobuf_c_message_unpack(desc, NULL, rlen, resp)) ==
            NULL) {
            rv = status_set(st, ONCE_INTERNAL, ONCE_REASON_BAD_RESPONSE,
                            "a reply is not a %s", desc->name);
        }
        once_free(resp);
    }
    once_future_free(f);
    return rv;
}

static int
names_ok(const char *topic, const char *consumer, once_status *st)
{
    if (topic == NULL || consumer == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "topic and consumer are required");
    }
    return ONCE_OK;
}

int
once_outbox_subscribe(once_client *c, const char *topic, const char *consumer,
                      once_rpc_id *id, bool *created, once_status *st)
{
    Once__V1__OutboxSubscribeRequest req =
        ONCE__V1__OUTBOX_SUBSCRIBE_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    int rv;

    if ((rv = names_ok(topic, consumer, st)) != ONCE_OK) {
        return rv;
    }
    req.topic = (char *)topic;
    req.consumer = (char *)consumer;
    rv = outbox_call(c, OUTBOX_METHOD("Subscribe"), true, id, &req.base,
                     &once__v1__outbox_subscribe_response__descriptor, &m, st);
    if (rv == ONCE_OK && created != NULL) {
        *created = ((Once__V1__OutboxSubscribeResponse *)m)->created;
    }
    if (m != NULL) {
        protobuf_c_message_free_unpacked(m, NULL);
    }
    return rv;
}

/* The Read request of the arguments into *req (pointers are the
 * caller's), or a bad-argument status. */
static int
read_request(const char *topic, const char *consumer, uint64_t after,
             uint32_t max, uint64_t wait_ms, void *out,
             Once__V1__OutboxReadRequest *req, once_status *st)
{
    int rv;

    if ((rv = names_ok(topic, consumer, st)) != ONCE_OK) {
        return rv;
    }
    if (out == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "out is required");
    }
    req->topic = (char *)topic;
    req->consumer = (char *)consumer;
    req->max_events = max;
    req->max_wait_ms = wait_ms;
    req->after = after;
    return ONCE_OK;
}

int
once_outbox_read_after(once_client *c, const char *topic, const char *consumer,
                       uint64_t after, uint32_t max, uint64_t wait_ms,
                       once_outbox_batch **out, once_status *st)
{
    Once__V1__OutboxReadRequest req = ONCE__V1__OUTBOX_READ_REQUEST__INIT;
    void *h = NULL;
    int rv = read_request(topic, consumer, after, max, wait_ms, out, &req, st);

    if (rv != ONCE_OK) {
        return rv;
    }
    rv = outbox_fetch(c, OUTBOX_METHOD("Read"), &req.base,
                      &once__v1__outbox_read_response__descriptor,
                      sizeof(**out), "a batch of events", &h, st);
    *out = h;
    return rv;
}

int
once_outbox_read(once_client *c, const char *topic, const char *consumer,
                 uint32_t max, uint64_t wait_ms, once_outbox_batch **out,
                 once_status *st)
{
    return once_outbox_read_after(c, topic, consumer, 0, max, wait_ms, out, st);
}

int
outbox_read_start(once_client *c, const char *topic, const char *consumer,
                  uint64_t after, uint32_t max, uint64_t wait_ms,
                  once_future **f, once_status *st)
{
    Once__V1__OutboxReadRequest req = ONCE__V1__OUTBOX_READ_REQUEST__INIT;
    int rv = read_request(topic, consumer, after, max, wait_ms, f, &req, st);

    if (rv != ONCE_OK) {
        return rv;
    }
    return outbox_async(c, OUTBOX_METHOD("Read"), false, &req.base, f, st);
}

int
outbox_read_finish(once_future *f, once_outbox_batch **out, once_status *st)
{
    ProtobufCMessage *m = NULL;
    int rv = outbox_async_reply(f, &once__v1__outbox_read_response__descriptor,
                                &m, st);

    if (rv == ONCE_OK && (*out = malloc(sizeof(**out))) == NULL) {
        protobuf_c_message_free_unpacked(m, NULL);
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "a batch of events");
    }
    if (rv == ONCE_OK) {
        (*out)->h.m = m;
    }
    return rv;
}

size_t
once_outbox_batch_count(const once_outbox_batch *b)
{
    return b != NULL ? BATCH(b)->n_events : 0;
}

int
once_outbox_batch_at(const once_outbox_batch *b, size_t i,
                     once_outbox_event *out)
{
    const Once__V1__OutboxEvent *ev;

    if (out == NULL || i >= once_outbox_batch_count(b)) {
        return ONCE_INVALID_ARGUMENT;
    }
    ev = BATCH(b)->events[i];
    memset(out, 0, sizeof(*out));
    out->offset = ev->offset;
    if (ev->id != NULL) {
        out->client_id = ev->id->client_id;
        out->seq = ev->id->seq;
        out->index = ev->id->index;
    }
    out->method = ev->method;
    out->time_unix_ms = ev->time_unix_ms;
    out->payload = ev->payload.data;
    out->payload_len = ev->payload.len;
    return ONCE_OK;
}

uint64_t
once_outbox_batch_low_water(const once_outbox_batch *b)
{
    return b != NULL ? BATCH(b)->low_water : 0;
}

uint64_t
once_outbox_batch_head(const once_outbox_batch *b)
{
    return b != NULL ? BATCH(b)->head : 0;
}

uint64_t
once_outbox_batch_acked(const once_outbox_batch *b)
{
    return b != NULL ? BATCH(b)->acked : 0;
}

void
once_outbox_batch_free(once_outbox_batch *b)
{
    if (b != NULL) {
        protobuf_c_message_free_unpacked(b->h.m, NULL);
        free(b);
    }
}

/* The Ack request of the arguments into *req (pointers are the
 * caller's), or a bad-argument status. */
static int
ack_request(const char *topic, const char *consumer, uint64_t offset,
            Once__V1__OutboxAckRequest *req, once_status *st)
{
    int rv;

    if ((rv = names_ok(topic, consumer, st)) != ONCE_OK) {
        return rv;
    }
    req->topic = (char *)topic;
    req->consumer = (char *)consumer;
    req->offset = offset;
    return ONCE_OK;
}

int
once_outbox_ack(once_client *c, const char *topic, const char *consumer,
                uint64_t offset, once_rpc_id *id, uint64_t *acked,
                once_status *st)
{
    Once__V1__OutboxAckRequest req = ONCE__V1__OUTBOX_ACK_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    int rv;

    if ((rv = ack_request(topic, consumer, offset, &req, st)) != ONCE_OK) {
        return rv;
    }
    rv = outbox_call(c, OUTBOX_METHOD("Ack"), true, id, &req.base,
                     &once__v1__outbox_ack_response__descriptor, &m, st);
    if (rv == ONCE_OK && acked != NULL) {
        *acked = ((Once__V1__OutboxAckResponse *)m)->acked;
    }
    if (m != NULL) {
        protobuf_c_message_free_unpacked(m, NULL);
    }
    return rv;
}

int
outbox_ack_start(once_client *c, const char *topic, const char *consumer,
                 uint64_t offset, once_future **f, once_status *st)
{
    Once__V1__OutboxAckRequest req = ONCE__V1__OUTBOX_ACK_REQUEST__INIT;
    int rv;

    if ((rv = ack_request(topic, consumer, offset, &req, st)) != ONCE_OK) {
        return rv;
    }
    return outbox_async(c, OUTBOX_METHOD("Ack"), true, &req.base, f, st);
}

int
outbox_ack_finish(once_future *f, uint64_t *acked, once_status *st)
{
    ProtobufCMessage *m = NULL;
    int rv = outbox_async_reply(f, &once__v1__outbox_ack_response__descriptor,
                                &m, st);

    if (rv == ONCE_OK) {
        *acked = ((Once__V1__OutboxAckResponse *)m)->acked;
        protobuf_c_message_free_unpacked(m, NULL);
    }
    return rv;
}

int
once_outbox_unsubscribe(once_client *c, const char *topic, const char *consumer,
                        once_rpc_id *id, bool *existed, once_status *st)
{
    Once__V1__OutboxUnsubscribeRequest req =
        ONCE__V1__OUTBOX_UNSUBSCRIBE_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    int rv;

    if ((rv = names_ok(topic, consumer, st)) != ONCE_OK) {
        return rv;
    }
    req.topic = (char *)topic;
    req.consumer = (char *)consumer;
    rv =
        outbox_call(c, OUTBOX_METHOD("Unsubscribe"), true, id, &req.base,
                    &once__v1__outbox_unsubscribe_response__descriptor, &m, st);
    if (rv == ONCE_OK && existed != NULL) {
        *existed = ((Once__V1__OutboxUnsubscribeResponse *)m)->existed;
    }
    if (m != NULL) {
        protobuf_c_message_free_unpacked(m, NULL);
    }
    return rv;
}

int
once_outbox_topics(once_client *c, once_outbox_topics_list **out,
                   once_status *st)
{
    Once__V1__OutboxTopicsRequest req = ONCE__V1__OUTBOX_TOPICS_REQUEST__INIT;
    void *h = NULL;
    int rv;

    if (out == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "out is required");
    }
    rv = outbox_fetch(c, OUTBOX_METHOD("Topics"), &req.base,
                      &once__v1__outbox_topics_response__descriptor,
                      sizeof(**out), "a list of topics", &h, st);
    *out = h;
    return rv;
}

size_t
once_outbox_topics_count(const once_outbox_topics_list *l)
{
    return l != NULL ? TOPICS(l)->n_topics : 0;
}

int
once_outbox_topics_at(const once_outbox_topics_list *l, size_t i,
                      once_outbox_topic_info *out)
{
    const Once__V1__OutboxTopic *t;

    if (out == NULL || i >= once_outbox_topics_count(l)) {
        return ONCE_INVALID_ARGUMENT;
    }
    t = TOPICS(l)->topics[i];
    out->name = t->name;
    out->head = t->head;
    out->low_water = t->low_water;
    out->retained_events = t->retained_events;
    out->retained_bytes = t->retained_bytes;
    out->nconsumers = t->n_consumers;
    return ONCE_OK;
}

int
once_outbox_topics_consumer(const once_outbox_topics_list *l, size_t i,
                            size_t j, once_outbox_consumer_info *out)
{
    const Once__V1__OutboxConsumer *cs;

    if (out == NULL || i >= once_outbox_topics_count(l) ||
        j >= TOPICS(l)->topics[i]->n_consumers) {
        return ONCE_INVALID_ARGUMENT;
    }
    cs = TOPICS(l)->topics[i]->consumers[j];
    out->name = cs->name;
    out->acked = cs->acked;
    out->lag = cs->lag;
    return ONCE_OK;
}

void
once_outbox_topics_free(once_outbox_topics_list *l)
{
    if (l != NULL) {
        protobuf_c_message_free_unpacked(l->h.m, NULL);
        free(l);
    }
}
