/*
 * system.c — onced's own lifecycle events on the system topic
 * (OUTBOX_SYSTEM_TOPIC): a grant issued, finished, cancelled; work
 * queued, claimed, expired; a lease ended (outbox_system_append).
 *
 * Owns the packing of a SystemEvent (outbox.proto) and its append in the
 * transition's own transaction.
 * Invariant: the event commits with the transition it reports, or not at
 * all (a refusal of the append refuses the transition's call).
 * Never: decides when a transition happens (grants/, lease/ do).
 */
#include <errno.h>
#include <stdlib.h>

#include "outbox/outbox.h"
#include "proto/once.pb-c.h"

int
outbox_system_append(store_txn *txn, const outbox_limits *l, outbox_producer *p,
                     const Once__V1__SystemEvent *ev, outbox_outcome *o)
{
    size_t len = once__v1__system_event__get_packed_size(ev);
    uint8_t *buf = malloc(len > 0 ? len : 1);
    uint64_t offset;
    int rv;

    if (buf == NULL) {
        return o->err = ENOMEM;
    }
    once__v1__system_event__pack(ev, buf);
    rv = outbox_append(txn, l, p, OUTBOX_SYSTEM_TOPIC, buf, len, &offset, o);
    free(buf);
    return rv;
}
