/*
 * consumer.c — the receiver loop of libonce (once_consumer_run_opts,
 * once/outbox.h): read, hand each event to a callback, commit the batch,
 * acknowledge — with the next Read already on its way while the receiver
 * applies the current batch, and Acks deferred by the options' rules and
 * sent while the receiver goes on (at most one in flight).
 *
 * Owns the loop's order: an offset is acknowledged only after the
 * receiver committed it (fn, or batch_done when there is one), and an Ack
 * never goes past the last committed offset, so a crash anywhere delivers
 * again only events not yet acknowledged (at least once, never a gap).
 * The Read sent ahead starts after the last offset handed out, so events
 * committed and not acknowledged are not read again within one run.
 * Invariant: offsets handed to the callback only grow within one run, and
 * never reach o->after or below.
 * Never: acknowledges an event the receiver did not commit; retries
 * beyond what once_call does; Acks after a failed call.
 */
#include "base/clock.h"
#include "client/outbox_impl.h"
#include <once/outbox.h>

/* One run's state. */
typedef struct consumer_run {
    once_client *c;
    const char *topic, *consumer;
    const once_consumer_options *o;
    once_consumer_fn fn;
    void *arg;
    once_status *st;
    uint64_t committed; /* the last offset the receiver committed */
    uint64_t acked;     /* the cursor, or the offset of the Ack in flight */
    uint32_t unacked;   /* batches committed since the last Ack */
    uint64_t oldest_ms; /* when the first of them was committed */
    once_future *ahead; /* the next Read, or NULL */
    once_future *ack_f; /* the Ack in flight, or NULL */
} consumer_run;

void
once_consumer_options_init(once_consumer_options *o)
{
    *o = (once_consumer_options){.ack_every = 1};
}

/* Waits for the Ack in flight, if any; its code. */
static int
consumer_ack_wait(consumer_run *r)
{
    uint64_t cursor = 0;
    int rv;

    if (r->ack_f == NULL) {
        return ONCE_OK;
    }
    rv = outbox_ack_finish(r->ack_f, &cursor, r->st);
    r->ack_f = NULL;
    return rv;
}

/* Sends an Ack of r->committed when it is past the cursor, after the one
 * in flight has answered: it travels while the receiver goes on (sync:
 * waits for it too). */
static int
consumer_ack(consumer_run *r, bool sync)
{
    int rv;

    if ((rv = consumer_ack_wait(r)) != ONCE_OK || r->committed <= r->acked) {
        return rv;
    }
    if ((rv = outbox_ack_start(r->c, r->topic, r->consumer, r->committed,
                               &r->ack_f, r->st)) != ONCE_OK) {
        return rv;
    }
    r->acked = r->committed;
    r->unacked = 0;
    return sync ? consumer_ack_wait(r) : ONCE_OK;
}

/* Whether the rules of r->o say Ack now; head: the topic's head as the
 * last Read saw it (caught up: Ack, so an idle consumer's cursor is
 * current). */
static bool
consumer_ack_due(const consumer_run *r, uint64_t head)
{
    const once_consumer_options *o = r->o;

    if (r->committed <= r->acked) {
        return false;
    }
    return r->unacked >= (o->ack_every > 1 ? o->ack_every : 1) ||
           r->committed >= head ||
           (o->ack_interval_ms > 0 &&
            clock_now_ms() - r->oldest_ms >= o->ack_interval_ms);
}

/* Hands b's events past r->committed to fn; *last is the offset of the
 * last one applied (unchanged when none). Returns ONCE_CONSUMER_NEXT to
 * go on, or what stops the run. */
static int
consumer_hand(consumer_run *r, const once_outbox_batch *b, uint64_t *last)
{
    once_outbox_event ev;

    for (size_t i = 0; i < once_outbox_batch_count(b); i++) {
        int step;

        once_outbox_batch_at(b, i, &ev);
        if (ev.offset <= r->committed) {
            continue; /* an onced without Read's `after` */
        }
        if ((step = r->fn(r->arg, &ev)) < 0) {
            return step;
        }
        *last = ev.offset;
        if (r->o->batch_done == NULL) {
            r->committed = ev.offset;
        }
        if (step == ONCE_CONSUMER_STOP) {
            return step;
        }
    }
    return ONCE_CONSUMER_NEXT;
}

/* One batch: fn for each event, then batch_done; moves r->committed.
 * Returns the step (ONCE_CONSUMER_NEXT to go on). */
static int
consumer_batch(consumer_run *r, const once_outbox_batch *b)
{
    uint64_t before = r->committed, last = r->committed;
    int step = consumer_hand(r, b, &last), done;

    if (step >= 0 && last > before && r->o->batch_done != NULL) {
        if ((done = r->o->batch_done(r->arg, last)) < 0) {
            return done;
        }
        r->committed = last;
        step = step == ONCE_CONSUMER_STOP ? step : done;
    }
    if (r->committed > before && r->unacked++ == 0) {
        r->oldest_ms = clock_now_ms();
    }
    return step;
}

/* The last offset of b, or r->committed when that is higher or b is
 * empty: where the Read after b starts. */
static uint64_t
consumer_end(const consumer_run *r, const once_outbox_batch *b)
{
    size_t n = once_outbox_batch_count(b);
    once_outbox_event ev;

    if (n == 0 || once_outbox_batch_at(b, n - 1, &ev) != ONCE_OK ||
        ev.offset < r->committed) {
        return r->committed;
    }
    return ev.offset;
}

/* Sends the Read after offset after (r->ahead). */
static int
consumer_read(consumer_run *r, uint64_t after)
{
    return outbox_read_start(r->c, r->topic, r->consumer, after, r->o->max,
                             r->o->wait_ms, &r->ahead, r->st);
}

/* One Read's batch handed over; *step what the receiver answered. While
 * the topic has more, the next Read is sent before the receiver gets the
 * batch; once caught up it is sent after (so no long-poll is left behind
 * when the receiver stops). An ONCE_* code. */
static int
consumer_turn(consumer_run *r, int *step)
{
    once_outbox_batch *b = NULL;
    uint64_t head, before = r->committed;
    bool stale;
    int rv;

    if (r->ahead == NULL && (rv = consumer_read(r, r->committed)) != ONCE_OK) {
        return rv;
    }
    rv = outbox_read_finish(r->ahead, &b, r->st);
    r->ahead = NULL;
    if (rv != ONCE_OK) {
        return rv;
    }
    head = once_outbox_batch_head(b);
    if (once_outbox_batch_acked(b) > r->acked) {
        r->acked = once_outbox_batch_acked(b);
    }
    if (consumer_end(r, b) < head &&
        (rv = consumer_read(r, consumer_end(r, b))) != ONCE_OK) {
        once_outbox_batch_free(b);
        return rv;
    }
    /* Events, none of them new: an onced without Read's `after` resends
     * what is not acknowledged, so Ack now rather than read them again. */
    stale = once_outbox_batch_count(b) > 0;
    *step = consumer_batch(r, b);
    stale = stale && r->committed == before;
    once_outbox_batch_free(b);
    if (*step == ONCE_CONSUMER_NEXT && (stale || consumer_ack_due(r, head))) {
        rv = consumer_ack(r, false);
    }
    return rv;
}

int
once_consumer_run_opts(once_client *c, const char *topic, const char *consumer,
                       const once_consumer_options *o, once_consumer_fn fn,
                       void *arg, once_status *st)
{
    consumer_run r = {.c = c,
                      .topic = topic,
                      .consumer = consumer,
                      .o = o,
                      .fn = fn,
                      .arg = arg,
                      .st = st,
                      .committed = o->after};
    int rv, step = ONCE_CONSUMER_NEXT;

    if ((rv = once_outbox_subscribe(c, topic, consumer, NULL, NULL, st)) !=
        ONCE_OK) {
        return rv;
    }
    while (rv == ONCE_OK && step == ONCE_CONSUMER_NEXT) {
        rv = consumer_turn(&r, &step);
    }
    once_future_free(r.ahead); /* a read: dropping it is harmless */
    if (rv != ONCE_OK) {
        (void)consumer_ack_wait(&r); /* a failed call: no Ack after it */
        return rv;
    }
    /* The receiver stopped: what it committed is acknowledged. */
    if ((rv = consumer_ack(&r, true)) != ONCE_OK) {
        return rv;
    }
    return step == ONCE_CONSUMER_STOP ? ONCE_OK : step;
}

int
once_consumer_run(once_client *c, const char *topic, const char *consumer,
                  uint32_t max, uint64_t wait_ms, once_consumer_fn fn,
                  void *arg, once_status *st)
{
    once_consumer_options o;

    once_consumer_options_init(&o);
    o.max = max;
    o.wait_ms = wait_ms;
    return once_consumer_run_opts(c, topic, consumer, &o, fn, arg, st);
}
