/*
 * auth_outbox.c — which outbox topics a caller may read and emit to: the
 * outbox-read / outbox-emit prefix rules of the policy (parsed with the
 * key rules by auth_kv.c).
 *
 * "WHO outbox-read PREFIX..." gives the role (or "@NAME") Subscribe, Read,
 * Ack and Unsubscribe on the topics that start with a PREFIX, and their
 * lines in Topics; "WHO outbox-emit PREFIX..." the KV Txn's emit to them.
 * Neither implies the other. "{name}" is the caller's principal name; a
 * lone "*" is every topic except onced's own (names starting "once.", as
 * once.system): those are readable only by a rule whose prefix names
 * them, and never emitted to (kv/check.c refuses it first). An operator
 * reads every topic whatever the rules say; in OPEN mode everything is
 * allowed.
 * Invariant: checked on every attempt, before the completion record is
 * looked up (the validate of svc_outbox.c and svc_kv.c), from the tables
 * in force only; a refusal writes nothing and is not recorded.
 * Never: lets "*" cover a once.* topic; lets an emit rule read, or a read
 * rule emit.
 */
#include <stdio.h>
#include <string.h>

#include "outbox/outbox.h"
#include "proto/names.h"
#include "proto/reasons.h"
#include "server/auth.h"
#include "server/auth_impl.h"
#include "server/call.h"

bool
auth_topic_may(const auth *a, const auth_who *w, const char *topic, bool emit)
{
    size_t len = strlen(topic);
    bool own = strncmp(topic, OUTBOX_RESERVED_PREFIX,
                       strlen(OUTBOX_RESERVED_PREFIX)) == 0;

    if (w == NULL || w->open || (!emit && w->operator_)) {
        return true;
    }
    for (size_t i = 0; i < a->t.nkv; i++) {
        const auth_kv_rule *r = &a->t.kv[i];
        if (r->topic && r->write == emit && !(own && r->all) &&
            auth_rule_mine(r->who, w) &&
            auth_prefix_covers(r, w->name, (const uint8_t *)topic, len)) {
            return true;
        }
    }
    return false;
}

bool
auth_topic_permit(const auth *a, server_call *c, const char *topic, bool emit)
{
    const auth_who *w = c->who;
    char shown[72];

    if (auth_topic_may(a, w, topic, emit)) {
        return true;
    }
    name_printable(topic, shown, sizeof(shown));
    call_fail(c, ONCE__V1__CODE__PERMISSION_DENIED, REASON_OUTBOX_TOPIC_DENIED,
              "principal \"%s\" (role %s) may not %s topic \"%s\": no policy "
              "line \"%s outbox-%s PREFIX\" covers it",
              w->name, w->role, emit ? "emit to" : "read", shown, w->role,
              emit ? "emit" : "read");
    return false;
}
