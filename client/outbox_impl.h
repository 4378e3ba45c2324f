/*
 * outbox_impl.h — libonce's internal Outbox calls for the receiver loop
 * (consumer.c): a Read started now and its batch taken later, so the
 * next Read travels while the receiver applies the current batch.
 *
 * Owns nothing beyond what outbox.c's public calls own.
 * Invariant: a started Read is finished (or its future freed) exactly
 * once; it is a read, so dropping one is harmless.
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

#endif /* CLIENT_OUTBOX_IMPL_H */
