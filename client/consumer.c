/*
 * consumer.c — the receiver loop of libonce (once_consumer_run,
 * once/outbox.h): read, hand each event to a callback, acknowledge.
 *
 * Owns the loop's order: an event is acknowledged only after the
 * callback said it applied it, and the Ack covers exactly the events
 * applied, so a crash anywhere delivers again only events not yet
 * acknowledged (at least once, never a gap).
 * Invariant: offsets handed to the callback only grow within one run.
 * Never: acknowledges an event the callback refused; retries beyond
 * what once_call does.
 */
#include <once/outbox.h>

/* Hands b's events to fn; *last is the offset of the last one applied.
 * Returns ONCE_CONSUMER_NEXT to go on, or what stops the run. */
static int
consumer_batch(const once_outbox_batch *b, once_consumer_fn fn, void *arg,
               uint64_t *last)
{
    once_outbox_event ev;

    for (size_t i = 0; i < once_outbox_batch_count(b); i++) {
        int step;

        once_outbox_batch_at(b, i, &ev);
        if ((step = fn(arg, &ev)) < 0) {
            return step;
        }
        *last = ev.offset;
        if (step == ONCE_CONSUMER_STOP) {
            return step;
        }
    }
    return ONCE_CONSUMER_NEXT;
}

int
once_consumer_run(once_client *c, const char *topic, const char *consumer,
                  uint32_t max, uint64_t wait_ms, once_consumer_fn fn,
                  void *arg, once_status *st)
{
    int rv;

    if ((rv = once_outbox_subscribe(c, topic, consumer, NULL, NULL, st)) !=
        ONCE_OK) {
        return rv;
    }
    for (;;) {
        once_outbox_batch *b = NULL;
        uint64_t acked, last;
        int step;

        if ((rv = once_outbox_read(c, topic, consumer, max, wait_ms, &b, st)) !=
            ONCE_OK) {
            return rv;
        }
        acked = last = once_outbox_batch_acked(b);
        step = consumer_batch(b, fn, arg, &last);
        once_outbox_batch_free(b);
        if (last > acked && (rv = once_outbox_ack(c, topic, consumer, last,
                                                  NULL, NULL, st)) != ONCE_OK) {
            return rv;
        }
        if (step != ONCE_CONSUMER_NEXT) {
            return step == ONCE_CONSUMER_STOP ? ONCE_OK : step;
        }
    }
}
