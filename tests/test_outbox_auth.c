/*
 * test_outbox_auth.c — per-topic permissions of the outbox (issue 24):
 * the policy's outbox-read / outbox-emit prefix rules against a real
 * authenticating onced.
 *
 * Owns the checks that Subscribe, Read, Ack and Unsubscribe need an
 * outbox-read rule covering their topic and a KV Txn's emit (either
 * branch) an outbox-emit rule; that neither gives the other; that "*"
 * covers no once.* topic while a rule naming once.system does; that an
 * operator reads every topic without a rule; that Topics lists only the
 * topics the caller may read; that a refusal is
 * PERMISSION_DENIED/OUTBOX_TOPIC_DENIED and writes nothing (no key, no
 * event, no consumer, no cursor move); and that the check runs on every
 * attempt: an Ack and a Txn that ran, resent under their rpc ids after
 * the rule went, are refused, not answered from their records.
 * Invariant: every wait is bounded; state is read through the API (as an
 * operator), never through files.
 * Never: mocks onced or the store.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <once/kv.h>
#include <once/outbox.h>

#include "tests/harness.h"

#define S(s)     (s), strlen(s)
#define DENIED   "OUTBOX_TOPIC_DENIED"
#define RESERVED "once.system"

#define POLICY_BASE                                                            \
    "operator *\n"                                                             \
    "scheduler /once.v1.Lease/* /once.v1.KV/* /once.v1.Outbox/*\n"             \
    "agent /once.v1.Lease/* /once.v1.KV/* /once.v1.Outbox/*\n"                 \
    "billing /once.v1.Lease/* /once.v1.Outbox/*\n"                             \
    "dash /once.v1.Lease/* /once.v1.Outbox/*\n"                                \
    "scheduler kv-write jobs/\n"                                               \
    "agent kv-write agents/{name}/\n"                                          \
    "agent outbox-emit agents/{name}/\n"                                       \
    "dash outbox-read *\n"

/* The two rules check_every_attempt takes away and gives back. */
#define POLICY_RULES                                                           \
    "scheduler outbox-emit billing/\n"                                         \
    "billing outbox-read billing/ once.system\n"

/* Fails naming the caller's line unless rv/st is code/reason. */
static void
status_is(int rv, const once_status *st, int code, const char *reason, int line)
{
    if (rv != code || strcmp(st->reason, reason) != 0) {
        fail_msg("line %d: wanted %s/%s, got %s/%s (%s)", line,
                 once_strerror(code), reason, once_strerror(rv), st->reason,
                 st->message);
    }
}

#define assert_denied(rv, st)                                                  \
    status_is((rv), (st), ONCE_PERMISSION_DENIED, DENIED, __LINE__)

static once_client *
as(const harness *h, const char *name)
{
    once_client *c = NULL;
    once_status st;

    if (harness_client_as(h, name, false, &c, &st) != ONCE_OK) {
        fail_msg("client as %s: %s (%s)", name, st.reason, st.message);
    }
    return c;
}

/* A Txn: put key (when not NULL) in then, emit to topic in branch; under
 * *id (seq 0: new, written back). */
static int
emit_txn(once_client *c, const char *key, int branch, const char *topic,
         once_rpc_id *id, once_status *st)
{
    once_kv_txn *t;
    int rv;

    assert_int_equal(once_kv_txn_new(&t), ONCE_OK);
    if (branch == ONCE_KV_ELSE) {
        /* Never false for a fresh key: the else branch never runs, and
         * is checked all the same. */
        assert_int_equal(once_kv_txn_compare_absent(t, S(key)), ONCE_OK);
    }
    assert_int_equal(once_kv_txn_put(t, ONCE_KV_THEN, S(key), S("v"), false),
                     ONCE_OK);
    assert_int_equal(once_kv_txn_emit(t, branch, topic, S("ev")), ONCE_OK);
    rv = once_kv_txn_exec(c, t, id, st);
    once_kv_txn_free(t);
    return rv;
}

static bool
key_exists(once_client *c, const char *key)
{
    once_kv_range *r;
    once_status st;
    bool found;

    assert_int_equal(once_kv_range_get(c, S(key), false, 1, NULL, 0, &r, &st),
                     ONCE_OK);
    found = once_kv_range_count(r) == 1;
    once_kv_range_free(r);
    return found;
}

/* The topic's head (0: no such topic) and, when consumer is not NULL,
 * that consumer's cursor in *acked (UINT64_MAX: not subscribed), as c's
 * Topics shows them; *listed: whether the topic is listed at all. */
static uint64_t
topic_head(once_client *c, const char *topic, const char *consumer,
           uint64_t *acked, bool *listed)
{
    once_outbox_topics_list *l;
    once_outbox_topic_info ti;
    once_outbox_consumer_info ci;
    once_status st;
    uint64_t head = 0;

    if (acked != NULL) {
        *acked = UINT64_MAX;
    }
    if (listed != NULL) {
        *listed = false;
    }
    assert_int_equal(once_outbox_topics(c, &l, &st), ONCE_OK);
    for (size_t i = 0; i < once_outbox_topics_count(l); i++) {
        assert_int_equal(once_outbox_topics_at(l, i, &ti), ONCE_OK);
        if (strcmp(ti.name, topic) != 0) {
            continue;
        }
        head = ti.head;
        if (listed != NULL) {
            *listed = true;
        }
        for (size_t j = 0; consumer != NULL && j < ti.nconsumers; j++) {
            assert_int_equal(once_outbox_topics_consumer(l, i, j, &ci),
                             ONCE_OK);
            if (strcmp(ci.name, consumer) == 0 && acked != NULL) {
                *acked = ci.acked;
            }
        }
    }
    once_outbox_topics_free(l);
    return head;
}

static size_t
read_count(once_client *c, const char *topic, const char *consumer,
           once_status *st, int *rv)
{
    once_outbox_batch *b = NULL;
    size_t n = 0;

    *rv = once_outbox_read(c, topic, consumer, 100, 0, &b, st);
    if (*rv == ONCE_OK) {
        n = once_outbox_batch_count(b);
    }
    once_outbox_batch_free(b);
    return n;
}

/* c's Txn putting ok_key and emitting to ok_topic runs; the one putting
 * bad_key and emitting to bad_topic is refused. */
static void
emits(once_client *c, const char *ok_key, const char *ok_topic,
      const char *bad_key, const char *bad_topic)
{
    once_rpc_id id = {0, 0};
    once_status st;

    assert_int_equal(emit_txn(c, ok_key, ONCE_KV_THEN, ok_topic, &id, &st),
                     ONCE_OK);
    id.seq = 0;
    assert_denied(emit_txn(c, bad_key, ONCE_KV_THEN, bad_topic, &id, &st), &st);
}

/* {name}: agent m3 emits under agents/m3/, not agents/m4/. */
static void
agent_emits_own(once_client *m3)
{
    emits(m3, "agents/m3/a", "agents/m3/ev", "agents/m3/b", "agents/m4/ev");
}

/* Emitting: by the outbox-emit rules only, in both branches; a refusal
 * writes neither the key nor the event. */
static void
check_emit(const harness *h, once_client *op)
{
    once_client *sched = as(h, "sched"), *m3 = as(h, "m3");
    once_rpc_id id = {0, 0};
    once_status st;

    emits(sched, "jobs/1", "billing/done", "jobs/2", "agents/m3/ev");
    assert_denied(emit_txn(sched, "jobs/3", ONCE_KV_ELSE, "other/x", &id, &st),
                  &st);
    assert_true(strstr(st.message, "scheduler outbox-emit") != NULL);
    assert_false(key_exists(op, "jobs/2"));
    assert_false(key_exists(op, "jobs/3"));
    assert_int_equal(topic_head(op, "agents/m3/ev", NULL, NULL, NULL), 0);
    assert_int_equal(topic_head(op, "other/x", NULL, NULL, NULL), 0);

    agent_emits_own(m3);
    assert_false(key_exists(op, "agents/m3/b"));
    assert_int_equal(topic_head(op, "agents/m4/ev", NULL, NULL, NULL), 0);
    assert_int_equal(topic_head(op, "billing/done", NULL, NULL, NULL), 1);
    assert_int_equal(topic_head(op, "agents/m3/ev", NULL, NULL, NULL), 1);
    /* Emitting gives no reading. */
    assert_denied(
        once_outbox_subscribe(sched, "billing/done", "s", NULL, NULL, &st),
        &st);
    once_client_close(m3);
    once_client_close(sched);
}

/* Reading: Subscribe, Read, Ack, Unsubscribe by the outbox-read rules;
 * "*" is no once.* topic; Topics lists what may be read. */
static void
check_read(const harness *h, once_client *op)
{
    once_client *bill = as(h, "bill"), *dash = as(h, "dash");
    once_status st;
    uint64_t acked;
    bool listed;
    int rv;

    assert_int_equal(
        once_outbox_subscribe(bill, RESERVED, "b", NULL, NULL, &st), ONCE_OK);
    assert_int_equal(read_count(bill, "billing/done", "b", &st, &rv), 1);
    assert_int_equal(rv, ONCE_OK);
    assert_int_equal(
        once_outbox_ack(bill, "billing/done", "b", 1, NULL, NULL, &st),
        ONCE_OK);
    /* Outside its prefixes: every method refused, nothing written. */
    assert_denied(
        once_outbox_subscribe(bill, "agents/m3/ev", "b", NULL, NULL, &st), &st);
    assert_true(strstr(st.message, "billing outbox-read") != NULL);
    read_count(bill, "agents/m3/ev", "b", &st, &rv);
    assert_denied(rv, &st);
    assert_denied(
        once_outbox_ack(bill, "agents/m3/ev", "b", 1, NULL, NULL, &st), &st);
    assert_denied(
        once_outbox_unsubscribe(bill, "agents/m3/ev", "b", NULL, NULL, &st),
        &st);
    topic_head(op, "agents/m3/ev", "b", &acked, NULL);
    assert_true(acked == UINT64_MAX); /* no consumer b was made */

    /* "*" reads every topic but onced's own. */
    assert_int_equal(read_count(dash, "agents/m3/ev", "d", &st, &rv), 1);
    assert_denied(once_outbox_subscribe(dash, RESERVED, "d", NULL, NULL, &st),
                  &st);
    read_count(dash, RESERVED, "b", &st, &rv);
    assert_denied(rv, &st);
    /* Topics: each sees what it may read; the operator every topic. */
    topic_head(dash, RESERVED, NULL, NULL, &listed);
    assert_false(listed);
    topic_head(dash, "billing/done", NULL, NULL, &listed);
    assert_true(listed);
    topic_head(bill, RESERVED, NULL, NULL, &listed);
    assert_true(listed);
    topic_head(bill, "agents/m3/ev", NULL, NULL, &listed);
    assert_false(listed);
    topic_head(op, RESERVED, NULL, NULL, &listed);
    assert_true(listed);
    assert_int_equal(once_outbox_subscribe(op, RESERVED, "o", NULL, NULL, &st),
                     ONCE_OK);
    read_count(op, RESERVED, "o", &st, &rv);
    assert_int_equal(rv, ONCE_OK);
    once_client_close(dash);
    once_client_close(bill);
}

/* On every attempt: a Txn with an emit and an Ack that ran, resent under
 * their ids (from other handles, as a restarted process would) after
 * their rules are gone, are refused (not replayed), and the cursor
 * stays; with the rules back they are answered from their records. */
static void
check_every_attempt(const harness *h, once_client *op)
{
    once_client *sched = as(h, "sched"), *bill = as(h, "bill"), *probe, *again;
    once_rpc_id tid = {0, 0}, aid = {0, 0};
    once_status st;
    uint64_t acked;
    int rv = ONCE_OK;

    assert_int_equal(
        emit_txn(sched, "jobs/9", ONCE_KV_THEN, "billing/done", &tid, &st),
        ONCE_OK);
    assert_int_equal(
        once_outbox_ack(bill, "billing/done", "b", 2, &aid, &acked, &st),
        ONCE_OK);
    assert_int_equal(acked, 2);
    harness_write_policy(h,
                         POLICY_BASE); /* no billing read, no scheduler emit */
    probe = as(h, "bill");
    again = as(h, "sched");
    /* Bounded: until onced has the new policy in force. */
    for (int i = 0; i < 100 && rv == ONCE_OK; i++) {
        rv = once_outbox_subscribe(probe, "billing/done", "p", NULL, NULL, &st);
        if (rv == ONCE_OK) {
            harness_sleep_ms(50);
        }
    }
    assert_denied(rv, &st);
    assert_denied(
        once_outbox_ack(probe, "billing/done", "b", 2, &aid, &acked, &st), &st);
    assert_false(st.replayed);
    assert_denied(
        emit_txn(again, "jobs/9", ONCE_KV_THEN, "billing/done", &tid, &st),
        &st);
    assert_false(st.replayed);
    /* The rule is back: the same ids are answered from their records. */
    harness_write_policy(h, POLICY_BASE POLICY_RULES);
    rv = ONCE_PERMISSION_DENIED;
    for (int i = 0; i < 100 && rv != ONCE_OK; i++) {
        rv = once_outbox_ack(probe, "billing/done", "b", 2, &aid, &acked, &st);
        if (rv != ONCE_OK) {
            harness_sleep_ms(50);
        }
    }
    assert_int_equal(rv, ONCE_OK);
    assert_true(st.replayed);
    assert_int_equal(
        emit_txn(again, "jobs/9", ONCE_KV_THEN, "billing/done", &tid, &st),
        ONCE_OK);
    assert_true(st.replayed);
    assert_int_equal(topic_head(op, "billing/done", "b", &acked, NULL), 2);
    assert_int_equal(acked, 2);
    once_client_close(again);
    once_client_close(probe);
    once_client_close(bill);
    once_client_close(sched);
}

static void
t_topic_permissions(void **state)
{
    harness *h = *state;
    once_client *op;

    once_client *bill, *dash;
    once_status st;

    harness_write_policy(h, POLICY_BASE POLICY_RULES);
    harness_add_principal(h, "op", "operator");
    harness_add_principal(h, "sched", "scheduler");
    harness_add_principal(h, "m3", "agent");
    harness_add_principal(h, "bill", "billing");
    harness_add_principal(h, "dash", "dash");
    op = as(h, "op");
    /* The consumers first: a topic without one keeps no event. */
    bill = as(h, "bill");
    dash = as(h, "dash");
    assert_int_equal(
        once_outbox_subscribe(bill, "billing/done", "b", NULL, NULL, &st),
        ONCE_OK);
    assert_int_equal(
        once_outbox_subscribe(dash, "agents/m3/ev", "d", NULL, NULL, &st),
        ONCE_OK);
    once_client_close(dash);
    once_client_close(bill);
    check_emit(h, op);
    check_read(h, op);
    check_every_attempt(h, op);
    once_client_close(op);
}

/* The built-in default policy (no policy file): schedulers emit to every
 * topic, an agent to agents/<its name>/ only. */
static void
t_default_policy(void **state)
{
    harness *h = *state;
    once_client *m3, *sched;
    once_rpc_id id = {0, 0};
    once_status st;

    harness_add_principal(h, "m3", "agent");
    harness_add_principal(h, "sched", "scheduler");
    m3 = as(h, "m3");
    sched = as(h, "sched");
    assert_int_equal(
        emit_txn(sched, "jobs/1", ONCE_KV_THEN, "anything/x", &id, &st),
        ONCE_OK);
    agent_emits_own(m3);
    once_client_close(sched);
    once_client_close(m3);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(t_topic_permissions, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(t_default_policy, harness_setup,
                                        harness_teardown),
    };

    harness_trap_exit("test_outbox_auth");
    return harness_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
