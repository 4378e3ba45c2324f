/*
 * outbox.h — events that leave onced: topics of events appended in a
 * producing call's transaction, durable named consumers with a cursor
 * each, and reclamation by acknowledgement (docs/outbox.md, SPEC section
 * 12).
 *
 * Owns what the outbox keeps in the store ("o/", docs/design.md) and every
 * rule over it, as functions over one store_txn: appending an event
 * (append.c), subscribing, acknowledging and unsubscribing (consumer.c),
 * reading from a cursor (read.c), listing topics (topics.c),
 * reclaiming acknowledged events (reclaim.c) and onced's own lifecycle
 * events (system.c). server/svc_outbox.c and the
 * producers (kv/txn.c) are thin layers over it; the collector runs
 * outbox_reclaim.
 * Invariant: a topic's offsets are 1, 2, 3, ... in commit order with no
 * gap (the executor runs one transaction at a time, and an offset is
 * taken in the transaction that stores the event); an event is deleted
 * only in a batch that also raises its topic's low-water mark past it,
 * and only when every consumer registered on the topic has acknowledged
 * it. Retained bytes never pass the bound: the append is refused first.
 * Never: deletes an event for its age; reads LevelDB behind the
 * transaction; knows nng, the policy or the services.
 */
#ifndef OUTBOX_OUTBOX_H
#define OUTBOX_OUTBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/outbox.pb-c.h"
#include "store/store.h"

/* onced's defaults (--outbox-max-bytes, --outbox-payload-max). */
#define OUTBOX_MAX_BYTES_DEFAULT   (64ull << 20)
#define OUTBOX_PAYLOAD_MAX_DEFAULT (64u * 1024u)
/* A topic or consumer name: the name rule (proto/names.h), this long. */
#define OUTBOX_NAME_MAX 128u
/* Read: events per reply by default and at most, bytes per reply at most
 * (one event is returned whatever its size), the longest wait. */
#define OUTBOX_READ_DEFAULT 100u
#define OUTBOX_READ_MAX     1000u
#define OUTBOX_READ_BYTES   (1u << 20)
#define OUTBOX_WAIT_MAX_MS  30000u
/* The system topic of grant and lease lifecycle events; topics starting
 * with OUTBOX_RESERVED_PREFIX are onced's own (no emit may name one). */
#define OUTBOX_SYSTEM_TOPIC    "once.system"
#define OUTBOX_RESERVED_PREFIX "once."

typedef struct outbox_limits {
    uint64_t max_bytes;   /* retained bytes per topic; 0: no bound */
    uint64_t payload_max; /* bytes of one event's payload */
} outbox_limits;

/* A topic's state (o/t/<topic>). */
typedef struct outbox_topic {
    uint64_t head;   /* the highest offset given; 0: none yet */
    uint64_t low;    /* the low-water mark: the lowest offset stored
                        (head + 1 when nothing is) */
    uint64_t events; /* events stored */
    uint64_t bytes;  /* their stored bytes */
} outbox_topic;

/* What a function here decided: code once.v1.Code (OK or a refusal with
 * reason and message) or err, a store error (commit nothing). */
typedef struct outbox_outcome {
    int code;
    const char *reason;
    char message[256];
    int err;
} outbox_outcome;

/* The producing call, as an event's id and header take it. */
typedef struct outbox_producer {
    uint64_t client_id;
    uint64_t seq;
    const char *method;
    uint64_t now_ms;
    uint32_t next_index; /* the call's next event index; starts at 0 */
} outbox_producer;

/* Whether name may be a topic or consumer name (proto/names.h's rule,
 * OUTBOX_NAME_MAX). On false, o says why (BAD_NAME); what names it. */
bool outbox_name_ok(const char *name, const char *what, outbox_outcome *o);

/* append.c: stages one event on topic in txn, taking the topic's next
 * offset (*offset) and the producer's next index. Refuses
 * (o->code, nothing staged) a payload past l->payload_max or a topic
 * that would pass l->max_bytes. 0, or a store error (also in o->err). */
int outbox_append(store_txn *txn, const outbox_limits *l, outbox_producer *p,
                  const char *topic, const uint8_t *payload, size_t plen,
                  uint64_t *offset, outbox_outcome *o);

/* system.c: appends ev (packed) to OUTBOX_SYSTEM_TOPIC as outbox_append
 * does (l->max_bytes 0: past any bound, for transitions nobody may
 * refuse). */
int outbox_system_append(store_txn *txn, const outbox_limits *l,
                         outbox_producer *p, const Once__V1__SystemEvent *ev,
                         outbox_outcome *o);

/* topic.c: the topic's state as txn sees it; a topic never written reads
 * as {head 0, low 1}. 0 or a store error. */
int outbox_topic_read(store_txn *txn, const char *topic, outbox_topic *out);

/* consumer.c. Each stages its change in txn and fills its response;
 * returns 0 or a store error; a refusal is in o (nothing staged). */
int outbox_subscribe(store_txn *txn, const Once__V1__OutboxSubscribeRequest *r,
                     Once__V1__OutboxSubscribeResponse *resp,
                     outbox_outcome *o);
int outbox_ack(store_txn *txn, const Once__V1__OutboxAckRequest *r,
               Once__V1__OutboxAckResponse *resp, outbox_outcome *o);
int outbox_unsubscribe(store_txn *txn,
                       const Once__V1__OutboxUnsubscribeRequest *r,
                       Once__V1__OutboxUnsubscribeResponse *resp,
                       outbox_outcome *o);
/* The consumer's cursor: 0 and *acked, ENOENT, or a store error. */
int outbox_cursor_get(store_txn *txn, const char *topic, const char *consumer,
                      uint64_t *acked);

/* read.c: fills resp (initialized by the caller) with the events after
 * the consumer's cursor; outbox_read_fini frees what it holds (also after
 * an error). 0 or a store error; a refusal in o. */
int outbox_read(store_txn *txn, const Once__V1__OutboxReadRequest *r,
                Once__V1__OutboxReadResponse *resp, outbox_outcome *o);
void outbox_read_fini(Once__V1__OutboxReadResponse *resp);

/* topics.c: fills resp with every topic and its consumers, in name order;
 * outbox_topics_fini frees what it holds. 0 or a store error. */
int outbox_topics(store_txn *txn, Once__V1__OutboxTopicsResponse *resp);
void outbox_topics_fini(Once__V1__OutboxTopicsResponse *resp);

/* reclaim.c: stages in txn the deletion of events every consumer of
 * their topic has acknowledged (a topic without consumers: all of
 * them), with each topic's new low-water mark and bytes, at most *budget
 * events (decremented). *deleted and *bytes count what was staged. 0 or
 * a store error (stage nothing then: abort txn). Past the first call of
 * a process (first: false) a store whose topic fence is absent holds no
 * topic and is not walked; the first call walks the topics whatever the
 * fence, and stages the fences when it finds one (a store written before
 * them). */
int outbox_reclaim(store_txn *txn, bool first, uint64_t *budget,
                   uint64_t *deleted, uint64_t *bytes);

#endif /* OUTBOX_OUTBOX_H */
