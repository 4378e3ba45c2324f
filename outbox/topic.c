/*
 * topic.c — a topic's state (head, low-water mark, what it retains), the
 * lowest cursor of its consumers, and the name rule for topics and
 * consumers.
 *
 * Owns the encoding of o/t/<topic> and its only writer.
 * Invariant: low <= head + 1; events and bytes count o/e/ keys low..head.
 * Never: stages anything but o/t/.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/outbox_impl.h"
#include "proto/names.h"
#include "proto/once.pb-c.h"
#include "proto/reasons.h"

#define TOPIC_VAL_LEN 32

bool
outbox_name_ok(const char *name, const char *what, outbox_outcome *o)
{
    char shown[48];
    size_t at;

    switch (name_check(name, OUTBOX_NAME_MAX, &at)) {
    case NAME_OK:
        return true;
    case NAME_BAD_LENGTH:
        snprintf(o->message, sizeof(o->message),
                 "a %s name is 1 to %u bytes, got %zu", what, OUTBOX_NAME_MAX,
                 at);
        break;
    default:
        name_printable(name, shown, sizeof(shown));
        snprintf(o->message, sizeof(o->message),
                 "%s name \"%s\" holds a control character at byte %zu", what,
                 shown, at);
        break;
    }
    o->code = ONCE__V1__CODE__INVALID_ARGUMENT;
    o->reason = REASON_BAD_NAME;
    return false;
}

int
outbox_topic_read(store_txn *txn, const char *topic, outbox_topic *out)
{
    outbox_key k;
    char *val = NULL;
    size_t vlen = 0;
    int rv;

    memset(out, 0, sizeof(*out));
    out->low = 1;
    if ((rv = outbox_key_topic(&k, topic)) != 0) {
        return rv;
    }
    rv = store_txn_get(txn, k.b, k.n, &val, &vlen);
    outbox_key_fini(&k);
    if (rv == ENOENT) {
        return 0;
    }
    if (rv == 0 && vlen != TOPIC_VAL_LEN) {
        rv = EBADMSG;
    }
    if (rv == 0) {
        out->head = outbox_be64_get(val);
        out->low = outbox_be64_get(val + 8);
        out->events = outbox_be64_get(val + 16);
        out->bytes = outbox_be64_get(val + 24);
    }
    free(val);
    return rv;
}

int
outbox_topic_write(store_txn *txn, const char *topic, const outbox_topic *t)
{
    uint8_t val[TOPIC_VAL_LEN];
    outbox_key k;
    int rv;

    outbox_be64_put(val, t->head);
    outbox_be64_put(val + 8, t->low);
    outbox_be64_put(val + 16, t->events);
    outbox_be64_put(val + 24, t->bytes);
    if ((rv = outbox_key_topic(&k, topic)) != 0) {
        return rv;
    }
    rv = store_txn_put(txn, k.b, k.n, val, sizeof(val));
    outbox_key_fini(&k);
    return rv;
}

typedef struct cursor_min {
    uint64_t min;
    bool any;
} cursor_min;

static int
cursor_min_one(void *arg, const char *key, size_t klen, const char *val,
               size_t vlen)
{
    cursor_min *m = arg;
    uint64_t acked;

    (void)key;
    (void)klen;
    if (vlen != 8) {
        return EBADMSG;
    }
    acked = outbox_be64_get(val);
    if (!m->any || acked < m->min) {
        m->min = acked;
    }
    m->any = true;
    return 0;
}

int
outbox_cursor_min(store_txn *txn, const char *topic, uint64_t *min, bool *any)
{
    cursor_min m = {0, false};
    outbox_key k;
    int rv;

    if ((rv = outbox_key_consumers(&k, topic)) != 0) {
        return rv;
    }
    rv = store_txn_scan(txn, k.b, k.n, k.b, k.n, cursor_min_one, &m);
    outbox_key_fini(&k);
    *min = m.min;
    *any = m.any;
    return rv;
}
