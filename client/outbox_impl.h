/*
 * outbox_impl.h — libonce's internal Outbox calls for the receiver loop
 * (consumer.c): a Read or an Ack started now and its answer taken
 * later, so they travel while the receiver applies a batch.
 *
 * Owns nothing beyond what outbox.c's public calls own.
 * Invariant: a started call is finished (or its future freed) exactly
 * once; a Read is a read, so dropping one is harmless; an Ack is a
 * mutating call under an rpc id of its own, like once_outbox_ack's.
 * Never: part of the installed API (once/outbox.h).
 */
#ifndef CLIENT_OUTBOX_IMPL_H
#define CLIENT_OUTBOX_IMPL_H

#include <once/outbox.h>

/* Starts Read(topic, consumer, after, max, wait_ms) as an async call; on
 * ONCE_OK *f is its future (outbox_read_finish, or once_future_free to
 * drop it). */
int outbox_read_start(once_client *c, const char *topic, const char *consumer,
                      uint64_t after, uint32_t max, uint64_t wait_ms,
                      once_future **f, once_status *st);

/* Waits for f and frees it; on ONCE_OK *out is the batch
 * (once_outbox_batch_free). */
int outbox_read_finish(once_future *f, once_outbox_batch **out,
                       once_status *st);

/* Starts Ack(topic, consumer, offset) as an async call (a new rpc id);
 * on ONCE_OK *f is its future (outbox_ack_finish). */
int outbox_ack_start(once_client *c, const char *topic, const char *consumer,
                     uint64_t offset, once_future **f, once_status *st);

/* Waits for f and frees it; on ONCE_OK *acked is the cursor after. */
int outbox_ack_finish(once_future *f, uint64_t *acked, once_status *st);

#endif /* CLIENT_OUTBOX_IMPL_H */
