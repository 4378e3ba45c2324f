/*
 * read.c — Outbox.Read: the events after a consumer's cursor, in offset
 * order (outbox_read).
 *
 * Owns where a read starts (past the cursor, or past the request's
 * `after` when that is higher; never below the low-water mark) and how
 * much one reply holds (max_events, OUTBOX_READ_BYTES, one event
 * whatever its size).
 * Invariant: stages nothing; the cursor moves only by Ack.
 * Never: waits (server/svc_outbox.c parks a long-poll outside the
 * executor's work).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/outbox_impl.h"
#include "proto/once.pb-c.h"

typedef struct read_ctx {
    Once__V1__OutboxReadResponse *resp;
    size_t max;
    size_t bytes;
} read_ctx;

static int
read_one(void *arg, const char *key, size_t klen, const char *val, size_t vlen)
{
    read_ctx *x = arg;
    Once__V1__OutboxEvent *ev;

    (void)key;
    (void)klen;
    if (x->resp->n_events >= x->max ||
        (x->resp->n_events > 0 && x->bytes + vlen > OUTBOX_READ_BYTES)) {
        return 1; /* full: stop */
    }
    if ((ev = once__v1__outbox_event__unpack(NULL, vlen,
                                             (const uint8_t *)val)) == NULL) {
        return EBADMSG;
    }
    x->resp->events[x->resp->n_events++] = ev;
    x->bytes += vlen;
    return 0;
}

int
outbox_read(store_txn *txn, const Once__V1__OutboxReadRequest *r,
            Once__V1__OutboxReadResponse *resp, outbox_outcome *o)
{
    read_ctx x = {resp, r->max_events, 0};
    outbox_topic t;
    outbox_key from, pre;
    uint64_t acked, start;
    int rv;

    o->code = ONCE__V1__CODE__OK;
    if (x.max == 0 || x.max > OUTBOX_READ_MAX) {
        x.max = x.max == 0 ? OUTBOX_READ_DEFAULT : OUTBOX_READ_MAX;
    }
    rv = outbox_topic_cursor(txn, r->topic, r->consumer, &t, &acked);
    if (rv == ENOENT) {
        outbox_no_consumer(o, r->topic, r->consumer);
        return 0;
    }
    if (rv != 0) {
        return o->err = rv;
    }
    resp->acked = acked;
    resp->head = t.head;
    resp->low_water = t.low;
    start = acked > r->after ? acked : r->after; /* the last one not read */
    if (start >= t.head) {
        return 0;
    }
    start = start + 1 > t.low ? start + 1 : t.low;
    if ((resp->events = calloc(x.max, sizeof(*resp->events))) == NULL) {
        return o->err = ENOMEM;
    }
    if ((rv = outbox_key_event(&from, r->topic, start)) != 0) {
        return o->err = rv;
    }
    if ((rv = outbox_key_events(&pre, r->topic)) == 0) {
        rv = store_txn_scan(txn, from.b, from.n, pre.b, pre.n, read_one, &x);
        outbox_key_fini(&pre);
    }
    outbox_key_fini(&from);
    return o->err = rv == 1 ? 0 : rv;
}

void
outbox_read_fini(Once__V1__OutboxReadResponse *resp)
{
    for (size_t i = 0; i < resp->n_events; i++) {
        once__v1__outbox_event__free_unpacked(resp->events[i], NULL);
    }
    free(resp->events);
    resp->events = NULL;
    resp->n_events = 0;
}
