/*
 * once/outbox.h — libonce's calls of once.v1.Outbox: durable named
 * consumers of the events a call commits with its effect (docs/outbox.md).
 *
 * Subscribe, Ack and Unsubscribe are mutating calls under an rpc id, as
 * once_call: id NULL or id->seq 0 is a new call (the id is written back
 * when id is not NULL), otherwise a retry of exactly *id. Read and Topics
 * are reads. Events are produced by a KV Txn's emit (<once/kv.h>).
 *
 *     once_outbox_subscribe(c, "jobs", "billing", NULL, &st);
 *     once_outbox_read(c, "jobs", "billing", 100, 5000, &b, &st);
 *     for (size_t i = 0; i < once_outbox_batch_count(b); i++) {
 *         once_outbox_event ev;
 *         once_outbox_batch_at(b, i, &ev);
 *         ... apply ev.payload, remember ev.offset ...
 *     }
 *     once_outbox_ack(c, "jobs", "billing", last, NULL, NULL, &st);
 *     once_outbox_batch_free(b);
 *
 * Delivery is at least once: an event comes again until its offset is
 * acknowledged. A long-poll (wait_ms) must stay below the handle's call
 * timeout.
 */
#ifndef ONCE_OUTBOX_H
#define ONCE_OUTBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <once/client.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One event as a Read returned it; pointers are the batch's. */
typedef struct once_outbox_event {
    uint64_t offset;
    uint64_t client_id; /* the id: the producing call's rpc id ... */
    uint64_t seq;
    uint32_t index; /* ... and its place among that call's events */
    const char *method;
    uint64_t time_unix_ms;
    const void *payload;
    size_t payload_len;
} once_outbox_event;

typedef struct once_outbox_batch once_outbox_batch;

/* Subscribe(topic, consumer); *created (may be NULL): it was new. */
ONCE_API int once_outbox_subscribe(once_client *c, const char *topic,
                                   const char *consumer, once_rpc_id *id,
                                   bool *created, once_status *st);

/* Read: at most max events (0: the server's default) after the
 * consumer's cursor, waiting up to wait_ms (0: none) when there are
 * none. On ONCE_OK *out is the batch (once_outbox_batch_free). */
ONCE_API int once_outbox_read(once_client *c, const char *topic,
                              const char *consumer, uint32_t max,
                              uint64_t wait_ms, once_outbox_batch **out,
                              once_status *st);
/* Read starting after max(cursor, after) instead of the cursor: a
 * receiver that stores its offset with its effect (pattern 1) reads on
 * past events it applied and has not acknowledged yet. An onced older
 * than the field reads from the cursor: skip offsets at or below after. */
ONCE_API int once_outbox_read_after(once_client *c, const char *topic,
                                    const char *consumer, uint64_t after,
                                    uint32_t max, uint64_t wait_ms,
                                    once_outbox_batch **out, once_status *st);
ONCE_API size_t once_outbox_batch_count(const once_outbox_batch *b);
/* ONCE_OK, or ONCE_INVALID_ARGUMENT for i out of range. */
ONCE_API int once_outbox_batch_at(const once_outbox_batch *b, size_t i,
                                  once_outbox_event *out);
/* The topic's low-water mark, head and the consumer's cursor as the
 * Read saw them. */
ONCE_API uint64_t once_outbox_batch_low_water(const once_outbox_batch *b);
ONCE_API uint64_t once_outbox_batch_head(const once_outbox_batch *b);
ONCE_API uint64_t once_outbox_batch_acked(const once_outbox_batch *b);
/* NULL is accepted. */
ONCE_API void once_outbox_batch_free(once_outbox_batch *b);

/* Ack(topic, consumer, offset); *acked (may be NULL): the cursor after. */
ONCE_API int once_outbox_ack(once_client *c, const char *topic,
                             const char *consumer, uint64_t offset,
                             once_rpc_id *id, uint64_t *acked, once_status *st);

/* Unsubscribe(topic, consumer); *existed (may be NULL). */
ONCE_API int once_outbox_unsubscribe(once_client *c, const char *topic,
                                     const char *consumer, once_rpc_id *id,
                                     bool *existed, once_status *st);

/* Topics: every topic; on ONCE_OK *out is the list
 * (once_outbox_topics_free). Pointers are the list's. */
typedef struct once_outbox_topics_list once_outbox_topics_list;
typedef struct once_outbox_topic_info {
    const char *name;
    uint64_t head;      /* the highest offset given */
    uint64_t low_water; /* nothing below it is delivered again */
    uint64_t retained_events;
    uint64_t retained_bytes;
    size_t nconsumers;
} once_outbox_topic_info;
typedef struct once_outbox_consumer_info {
    const char *name;
    uint64_t acked;
    uint64_t lag;
} once_outbox_consumer_info;

ONCE_API int once_outbox_topics(once_client *c, once_outbox_topics_list **out,
                                once_status *st);
ONCE_API size_t once_outbox_topics_count(const once_outbox_topics_list *l);
/* ONCE_OK, or ONCE_INVALID_ARGUMENT for an index out of range. */
ONCE_API int once_outbox_topics_at(const once_outbox_topics_list *l, size_t i,
                                   once_outbox_topic_info *out);
ONCE_API int once_outbox_topics_consumer(const once_outbox_topics_list *l,
                                         size_t i, size_t j,
                                         once_outbox_consumer_info *out);
/* NULL is accepted. */
ONCE_API void once_outbox_topics_free(once_outbox_topics_list *l);

/* ---- a receiver loop (consumer.c) -------------------------------------- */

/* What a consumer callback answers for one event. */
enum once_consumer_step {
    ONCE_CONSUMER_NEXT = 0, /* applied: go on */
    ONCE_CONSUMER_STOP = 1, /* applied: acknowledge it and return */
    /* Any negative value: not applied — return it without acknowledging
     * this event (it comes again on the next run). */
};

typedef int (*once_consumer_fn)(void *arg, const once_outbox_event *ev);

/* Called after fn was given every event of a batch (up to the one it
 * stopped on): the receiver commits its transaction here, storing last
 * as its offset. Answers as fn does; negative: not committed — the run
 * returns it, acknowledging none of the batch. */
typedef int (*once_consumer_batch_fn)(void *arg, uint64_t last);

/* How once_consumer_run_opts reads and acknowledges
 * (once_consumer_options_init gives the defaults, once_consumer_run's
 * behaviour). */
typedef struct once_consumer_options {
    uint32_t max;     /* events per Read (0: the server's default, 100) */
    uint64_t wait_ms; /* a Read's long-poll when there are none (0: none) */
    /* The offset the receiver stored with its effect (0: none): events at
     * or below it are neither read nor handed to fn, and the cursor is
     * moved there by the first Ack. */
    uint64_t after;
    /* Ack after every ack_every batches committed (0 or 1: after each),
     * or once ack_interval_ms (0: no time rule) passed since the oldest
     * one not acknowledged, or when the run has caught up with the
     * topic's head, or when it returns. Above 1, the events applied and
     * not yet acknowledged come again after a crash (at most ack_every
     * batches): only for a receiver that skips offsets at or below the
     * one it stored with its effect (pattern 1; start it with after). */
    uint32_t ack_every;
    uint64_t ack_interval_ms;
    once_consumer_batch_fn batch_done; /* NULL: fn's return commits */
} once_consumer_options;

ONCE_API void once_consumer_options_init(once_consumer_options *o);

/*
 * The receiver loop: subscribes consumer to topic (again is fine), reads
 * (the next Read is sent while the receiver applies the current batch),
 * hands each event to fn in offset order, then batch_done, and
 * acknowledges by o's rules — until fn or batch_done answers
 * ONCE_CONSUMER_STOP (returns ONCE_OK) or a negative value (returns it),
 * or a call fails (its code, st saying why). Before it returns on STOP or
 * a negative answer it acknowledges what was committed; after a failed
 * call it acknowledges nothing more. Needs a handle with a lease
 * (Subscribe and Ack are mutating). Delivery is at least once: after a
 * crash, the events committed and not acknowledged come again — make fn
 * idempotent by storing the offset with its effect and starting with it
 * as o->after, or dedupe by id (docs/outbox.md, "The receiver contract").
 */
ONCE_API int once_consumer_run_opts(once_client *c, const char *topic,
                                    const char *consumer,
                                    const once_consumer_options *o,
                                    once_consumer_fn fn, void *arg,
                                    once_status *st);

/* once_consumer_run_opts with max and wait_ms and the defaults: each
 * batch acknowledged once fn applied it. */
ONCE_API int once_consumer_run(once_client *c, const char *topic,
                               const char *consumer, uint32_t max,
                               uint64_t wait_ms, once_consumer_fn fn, void *arg,
                               once_status *st);

#ifdef __cplusplus
}
#endif

#endif /* ONCE_OUTBOX_H */
