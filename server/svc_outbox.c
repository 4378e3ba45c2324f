/*
 * svc_outbox.c — once.v1.Outbox: Subscribe, Read, Ack, Unsubscribe and
 * Topics, the thin layer between the executor and the rules in outbox/
 * (docs/outbox.md).
 *
 * Each handler checks the names and the caller's outbox-read permission
 * on the topic (validate: before the completion record is looked up, on
 * every attempt, never recorded), then runs one outbox/ function over
 * the call's transaction; Topics lists only the topics the caller may
 * read. Subscribe, Ack and Unsubscribe are
 * mutating: their reply is their completion record, so an Ack resent
 * after a lost reply is applied once and answers the same. Read and
 * Topics are reads; a Read with max_wait_ms and nothing to return asks
 * the executor to park it (c->park_ms) and runs again when an event is
 * committed or the wait is over.
 * Never: decides anything about events or cursors itself; waits on the
 * executor thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/outbox.h"
#include "proto/once.pb-c.h"
#include "proto/outbox.pb-c.h"
#include "server/auth.h"
#include "server/service.h"

/* Checks a topic and (when not NULL) a consumer name, then that the
 * caller may read the topic (every attempt: validate runs before the
 * completion record is looked up). */
static void
names_validate(server_call *c, const char *topic, const char *consumer)
{
    outbox_outcome o = {0};

    if (!outbox_name_ok(topic, "topic", &o) ||
        (consumer != NULL && !outbox_name_ok(consumer, "consumer", &o))) {
        call_fail(c, o.code, o.reason, "%s", o.message);
        return;
    }
    (void)auth_topic_permit(c->env->auth, c, topic, false);
}

/* The call's outcome from an outbox/ function's: a store error, a
 * refusal, or OK with resp packed. */
static void
outcome_set(server_call *c, int rv, const outbox_outcome *o,
            const ProtobufCMessage *resp)
{
    if (rv != 0 || o->err != 0) {
        call_store_error(c, rv != 0 ? rv : o->err);
    } else if (o->code != ONCE__V1__CODE__OK) {
        call_fail(c, o->code, o->reason, "%s", o->message);
    } else {
        (void)call_reply(c, resp);
    }
}

static void
subscribe_validate(server_call *c)
{
    const Once__V1__OutboxSubscribeRequest *r = (const void *)c->req;

    names_validate(c, r->topic, r->consumer);
}

static void
subscribe_exec(server_call *c)
{
    Once__V1__OutboxSubscribeResponse resp =
        ONCE__V1__OUTBOX_SUBSCRIBE_RESPONSE__INIT;
    outbox_outcome o = {0};
    int rv = outbox_subscribe(c->txn, (const void *)c->req, &resp, &o);

    outcome_set(c, rv, &o, &resp.base);
}

static void
read_validate(server_call *c)
{
    const Once__V1__OutboxReadRequest *r = (const void *)c->req;

    names_validate(c, r->topic, r->consumer);
}

static void
read_exec(server_call *c)
{
    const Once__V1__OutboxReadRequest *r = (const void *)c->req;
    Once__V1__OutboxReadResponse resp = ONCE__V1__OUTBOX_READ_RESPONSE__INIT;
    outbox_outcome o = {0};
    int rv = outbox_read(c->txn, r, &resp, &o);

    if (rv == 0 && o.code == ONCE__V1__CODE__OK && resp.n_events == 0 &&
        r->max_wait_ms > 0) {
        c->park_ms = r->max_wait_ms < OUTBOX_WAIT_MAX_MS ? r->max_wait_ms
                                                         : OUTBOX_WAIT_MAX_MS;
    }
    outcome_set(c, rv, &o, &resp.base);
    outbox_read_fini(&resp);
}

static void
ack_validate(server_call *c)
{
    const Once__V1__OutboxAckRequest *r = (const void *)c->req;

    names_validate(c, r->topic, r->consumer);
}

static void
ack_exec(server_call *c)
{
    Once__V1__OutboxAckResponse resp = ONCE__V1__OUTBOX_ACK_RESPONSE__INIT;
    outbox_outcome o = {0};
    int rv = outbox_ack(c->txn, (const void *)c->req, &resp, &o);

    outcome_set(c, rv, &o, &resp.base);
}

static void
unsubscribe_validate(server_call *c)
{
    const Once__V1__OutboxUnsubscribeRequest *r = (const void *)c->req;

    names_validate(c, r->topic, r->consumer);
}

static void
unsubscribe_exec(server_call *c)
{
    Once__V1__OutboxUnsubscribeResponse resp =
        ONCE__V1__OUTBOX_UNSUBSCRIBE_RESPONSE__INIT;
    outbox_outcome o = {0};
    int rv = outbox_unsubscribe(c->txn, (const void *)c->req, &resp, &o);

    outcome_set(c, rv, &o, &resp.base);
}

/* Keeps the topics of resp the caller may read first, in order; the
 * others after them (freed with the rest by outbox_topics_fini). Returns
 * how many are kept. */
static size_t
topics_readable(server_call *c, Once__V1__OutboxTopicsResponse *resp)
{
    size_t kept = 0;

    for (size_t i = 0; i < resp->n_topics; i++) {
        Once__V1__OutboxTopic *t = resp->topics[i];
        if (auth_topic_may(c->env->auth, c->who, t->name, false)) {
            resp->topics[i] = resp->topics[kept];
            resp->topics[kept++] = t;
        }
    }
    return kept;
}

static void
topics_exec(server_call *c)
{
    Once__V1__OutboxTopicsResponse resp =
        ONCE__V1__OUTBOX_TOPICS_RESPONSE__INIT;
    outbox_outcome o = {0};
    int rv = outbox_topics(c->txn, &resp);
    size_t all = resp.n_topics;

    if (rv == 0) {
        resp.n_topics = topics_readable(c, &resp);
    }
    outcome_set(c, rv, &o, &resp.base);
    resp.n_topics = all;
    outbox_topics_fini(&resp);
}

#define M(name) "/once.v1.Outbox/" name
static const service_method svc_outbox_methods[] = {
    {M("Subscribe"), SERVICE_MUTATING, subscribe_validate, subscribe_exec,
     NULL},
    {M("Read"), 0, read_validate, read_exec, NULL},
    {M("Ack"), SERVICE_MUTATING, ack_validate, ack_exec, NULL},
    {M("Unsubscribe"), SERVICE_MUTATING, unsubscribe_validate, unsubscribe_exec,
     NULL},
    {M("Topics"), 0, NULL, topics_exec, NULL},
};
#undef M

const service_ops svc_outbox_ops = {
    .name = "once.v1.Outbox",
    .methods = svc_outbox_methods,
    .nmethods = sizeof(svc_outbox_methods) / sizeof(svc_outbox_methods[0]),
};
