/*
 * test_lease_oracle.c — no lease oracle (issue 12 item 7): with
 * authentication on, RenewLease, RenewLeases, CloseLease and LeaseInfo
 * answer another principal's client id, a never-issued one and a
 * collected one the same way, PERMISSION_DENIED/NOT_YOUR_LEASE, against a
 * real onced; so does a mutating call (Counter.Increment) under each.
 *
 * Owns: principals op (operator), alice and bob (schedulers) written with
 * the real oncectl; alice's live lease, a lease of alice's that is closed
 * and collected, and an id never issued, each asked about by bob through
 * libonce (signed with his key file).
 * Invariant: the answers are compared whole — code, reason, and the
 * message with the id written as "N" — so no field tells the cases apart;
 * alice's lease is untouched by bob's attempts; OPEN mode keeps its
 * NOT_FOUND for a never-issued id; the operator still sees every lease;
 * `oncectl lease --help` says what renew answers for an unknown id;
 * mutating calls (Counter.Increment) answer the three ids alike too; a
 * handle whose own lease was collected takes NOT_YOUR_LEASE as the loss
 * of its lease (t_own_collected_is_lost).
 * Never: sleeps a fixed time to decide anything (the collection is polled,
 * bounded).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"
#include "proto/grants.pb-c.h"
#include "proto/once.pb-c.h"

#define POLL_MAX_MS 10000

/* The answer to one question about one id, the id written as "N". */
typedef struct answer {
    int code;
    char reason[64];
    char message[256];
} answer;

static void
answer_set(answer *a, uint64_t id, int code, const once_status *st)
{
    char num[32];
    const char *p;
    size_t n;

    a->code = code;
    snprintf(a->reason, sizeof(a->reason), "%s", st->reason);
    snprintf(num, sizeof(num), "%llu", (unsigned long long)id);
    n = strlen(num);
    a->message[0] = '\0';
    for (p = st->message; *p != '\0';) {
        size_t used = strlen(a->message);
        if (strncmp(p, num, n) == 0 && (p[n] < '0' || p[n] > '9')) {
            snprintf(a->message + used, sizeof(a->message) - used, "N");
            p += n;
        } else {
            snprintf(a->message + used, sizeof(a->message) - used, "%c", *p);
            p++;
        }
    }
}

/* RenewLeases([id]) as c: the one result's code. */
static int
renew_many(once_client *c, uint64_t id)
{
    Once__V1__RenewLeasesRequest r = ONCE__V1__RENEW_LEASES_REQUEST__INIT;
    Once__V1__RenewLeasesResponse *resp;
    uint8_t buf[32];
    void *out = NULL;
    size_t out_len = 0;
    once_status st;
    int code;

    r.n_client_ids = 1;
    r.client_ids = &id;
    assert_int_equal(once_call(c, "/once.v1.Lease/RenewLeases", false, NULL,
                               buf,
                               once__v1__renew_leases_request__pack(&r, buf),
                               &out, &out_len, &st),
                     ONCE_OK);
    resp = once__v1__renew_leases_response__unpack(NULL, out_len, out);
    assert_non_null(resp);
    assert_int_equal(resp->n_results, 1);
    code = (int)resp->results[0]->code;
    once__v1__renew_leases_response__free_unpacked(resp, NULL);
    once_free(out);
    return code;
}

/* bob's four questions about id. */
static void
ask(once_client *b, uint64_t id, answer out[3], int *many)
{
    once_status st;
    uint64_t x, y;
    struct once_lease_info li;

    answer_set(&out[0], id, once_lease_renew(b, id, &x, &y, &st), &st);
    answer_set(&out[1], id, once_lease_close(b, id, &x, &st), &st);
    answer_set(&out[2], id, once_lease_info(b, id, &li, &st), &st);
    *many = renew_many(b, id);
}

/* bob's mutating call under id: Counter.Increment at seq 1. */
static void
ask_incr(once_client *b, uint64_t id, answer *out)
{
    once_status st;
    int64_t v;

    answer_set(out, id, harness_incr_id(b, "oracle", 1, id, 1, &v, &st), &st);
}

/* Grants.Claim(m1) as b under rpc id (id, 1): its answer. */
static void
ask_claim(once_client *b, uint64_t id, answer *out)
{
    Once__V1__ClaimRequest r = ONCE__V1__CLAIM_REQUEST__INIT;
    once_rpc_id rid = {id, 1};
    once_status st;
    uint8_t buf[64];
    void *resp = NULL;
    size_t resp_len = 0;
    int rc;

    r.machine = "m1";
    rc = once_call(b, "/once.v1.Grants/Claim", true, &rid, buf,
                   once__v1__claim_request__pack(&r, buf), &resp, &resp_len,
                   &st);
    once_free(resp);
    answer_set(out, id, rc, &st);
}

static void
same(const answer *a, const answer *b)
{
    assert_int_equal(a->code, b->code);
    assert_string_equal(a->reason, b->reason);
    assert_string_equal(a->message, b->message);
}

/* Waits until onced answers unsigned requests UNAUTHENTICATED. */
static void
wait_auth_on(const harness *h)
{
    once_client *c = NULL;
    int64_t end = harness_now_ms() + POLL_MAX_MS;
    int rv = ONCE_OK;

    for (int i = 0; i < 500 && harness_now_ms() < end; i++) {
        once_stats s;
        once_status st;

        if (c == NULL && harness_client(h, true, &c) != ONCE_OK) {
            break;
        }
        if ((rv = once_admin_stats(c, &s, &st)) == ONCE_UNAUTHENTICATED) {
            break;
        }
        harness_sleep_ms(20);
    }
    once_client_close(c);
    assert_int_equal(rv, ONCE_UNAUTHENTICATED);
}

/* Waits, bounded, until the operator op sees lease id COLLECTED. */
static void
wait_collected(once_client *op, uint64_t id)
{
    struct once_lease_info li;
    int64_t end = harness_now_ms() + POLL_MAX_MS;

    memset(&li, 0, sizeof(li));
    while (harness_now_ms() < end) {
        harness_lease_info(op, id, &li);
        if (li.state == ONCE_LEASE_STATE_COLLECTED) {
            break;
        }
        harness_sleep_ms(20);
    }
    assert_int_equal(li.state, ONCE_LEASE_STATE_COLLECTED);
}

static void
t_no_oracle(void **state)
{
    static const char *const args[] = {"--gc-interval", "50ms", NULL};
    harness *h;
    once_client *a = NULL, *b = NULL, *m = NULL, *op = NULL;
    once_status st;
    uint64_t live, gone, never, ttl, x, y;
    struct once_lease_info li;
    answer ans[3][3], incr[3], claim[3];
    int many[3];

    (void)state;
    assert_int_equal(harness_start_args(&h, args), 0);
    harness_add_principal(h, "op", "operator");
    harness_add_principal(h, "alice", "scheduler");
    harness_add_principal(h, "bob", "scheduler");
    harness_add_principal(h, "carol", "agent:m1");
    wait_auth_on(h);
    assert_int_equal(harness_client_as(h, "alice", true, &a, &st), ONCE_OK);
    assert_int_equal(harness_client_as(h, "bob", true, &b, &st), ONCE_OK);
    assert_int_equal(harness_client_as(h, "carol", true, &m, &st), ONCE_OK);
    assert_int_equal(harness_client_as(h, "op", true, &op, &st), ONCE_OK);

    /* alice: one lease closed (then collected), one live */
    assert_int_equal(once_lease_open(a, NULL, 60000, &gone, &ttl, &st),
                     ONCE_OK);
    assert_int_equal(once_lease_close(a, gone, &x, &st), ONCE_OK);
    assert_int_equal(once_lease_open(a, NULL, 60000, &live, &ttl, &st),
                     ONCE_OK);
    never = live + 1000;
    wait_collected(op, gone);

    ask(b, live, ans[0], &many[0]);
    ask(b, never, ans[1], &many[1]);
    ask(b, gone, ans[2], &many[2]);
    for (int q = 0; q < 3; q++) {
        assert_int_equal(ans[0][q].code, ONCE_PERMISSION_DENIED);
        assert_string_equal(ans[0][q].reason, "NOT_YOUR_LEASE");
        same(&ans[0][q], &ans[1][q]);
        same(&ans[0][q], &ans[2][q]);
    }
    assert_int_equal(many[0], ONCE_PERMISSION_DENIED);
    assert_int_equal(many[1], ONCE_PERMISSION_DENIED);
    assert_int_equal(many[2], ONCE_PERMISSION_DENIED);
    /* mutating calls under the three ids: one answer too */
    ask_incr(b, live, &incr[0]);
    ask_incr(b, never, &incr[1]);
    ask_incr(b, gone, &incr[2]);
    assert_int_equal(incr[0].code, ONCE_PERMISSION_DENIED);
    assert_string_equal(incr[0].reason, "NOT_YOUR_LEASE");
    same(&incr[0], &incr[1]);
    same(&incr[0], &incr[2]);
    /* Grants.Claim by an agent (its role permits Claim on m1) too */
    ask_claim(m, live, &claim[0]);
    ask_claim(m, never, &claim[1]);
    ask_claim(m, gone, &claim[2]);
    assert_int_equal(claim[0].code, ONCE_PERMISSION_DENIED);
    assert_string_equal(claim[0].reason, "NOT_YOUR_LEASE");
    same(&claim[0], &claim[1]);
    same(&claim[0], &claim[2]);
    assert_int_equal(harness_get(a, "oracle"), 0);

    /* alice's lease is untouched and still hers */
    assert_int_equal(once_lease_renew(a, live, &x, &y, &st), ONCE_OK);
    assert_int_equal(once_lease_info(a, live, &li, &st), ONCE_OK);
    assert_int_equal(li.state, ONCE_LEASE_STATE_LIVE);
    /* the operator sees every lease, and is told the truth */
    assert_int_equal(once_lease_info(op, never, &li, &st), ONCE_NOT_FOUND);
    assert_string_equal(st.reason, "UNKNOWN_CLIENT");
    harness_lease_info(op, live, &li);
    assert_int_equal(li.state, ONCE_LEASE_STATE_LIVE);

    once_client_close(a);
    once_client_close(m);
    once_client_close(b);
    once_client_close(op);
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

/* With authentication on, a handle's own lease that another handle of
 * the same principal closed, once collected, answers NOT_YOUR_LEASE like
 * any id that is not the caller's: libonce must take that as the loss of
 * its lease (state LOST at once, the next call refused without sending),
 * not as a plain refusal that leaves the handle thinking it is live. */
static void
t_own_collected_is_lost(void **state)
{
    static const char *const args[] = {"--gc-interval", "50ms", NULL};
    harness *h;
    once_client *a = NULL, *a2 = NULL, *op = NULL;
    once_status st;
    uint64_t id, x;
    int64_t v = 0;

    (void)state;
    assert_int_equal(harness_start_args(&h, args), 0);
    harness_add_principal(h, "op", "operator");
    harness_add_principal(h, "alice", "scheduler");
    wait_auth_on(h);
    assert_int_equal(harness_client_as(h, "alice", false, &a, &st), ONCE_OK);
    assert_int_equal(harness_client_as(h, "alice", true, &a2, &st), ONCE_OK);
    assert_int_equal(harness_client_as(h, "op", true, &op, &st), ONCE_OK);
    id = once_client_id(a);
    assert_int_equal(once_counter_incr(a, "own", 1, NULL, &v, &st), ONCE_OK);
    assert_int_equal(once_lease_close(a2, id, &x, &st), ONCE_OK);
    wait_collected(op, id);
    assert_int_equal(once_client_lease_state(a), ONCE_CLIENT_LEASE_LIVE);
    assert_int_equal(once_counter_incr(a, "own", 1, NULL, &v, &st),
                     ONCE_PERMISSION_DENIED);
    assert_string_equal(st.reason, ONCE_REASON_NOT_YOUR_LEASE);
    assert_int_equal(once_client_lease_state(a), ONCE_CLIENT_LEASE_LOST);
    assert_int_equal(once_counter_incr(a, "own", 1, NULL, &v, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, ONCE_REASON_LEASE_EXPIRED);
    assert_int_equal(st.attempts, 0);

    once_client_close(a);
    once_client_close(a2);
    once_client_close(op);
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

/* OPEN mode: nothing is secret, a never-issued id is NOT_FOUND. */
static void
t_open_mode_unchanged(void **state)
{
    harness *h;
    once_client *c = NULL;
    once_status st;
    uint64_t cid, ttl, x, y;
    struct once_lease_info li;

    (void)state;
    assert_int_equal(harness_start(&h), 0);
    assert_int_equal(harness_client(h, true, &c), ONCE_OK);
    assert_int_equal(once_lease_open(c, NULL, 60000, &cid, &ttl, &st), ONCE_OK);
    assert_int_equal(once_lease_info(c, cid + 1000, &li, &st), ONCE_NOT_FOUND);
    assert_int_equal(once_lease_close(c, cid + 1000, &x, &st), ONCE_NOT_FOUND);
    assert_int_equal(once_lease_renew(c, cid + 1000, &x, &y, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "LEASE_EXPIRED");
    once_client_close(c);
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

/* `oncectl lease --help` says what renew answers for an unknown id. */
static void
t_help_says(void **state)
{
    static const char *const args[] = {"lease", "--help", NULL};
    char out[8192];

    (void)state;
    assert_int_equal(harness_oncectl_run(args, out, sizeof(out), NULL), 0);
    assert_non_null(strstr(out, "renew answers FAILED_PRECONDITION"));
    assert_non_null(strstr(out, "PERMISSION_DENIED\n(NOT_YOUR_LEASE)"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_no_oracle),
        cmocka_unit_test(t_own_collected_is_lost),
        cmocka_unit_test(t_open_mode_unchanged),
        cmocka_unit_test(t_help_says),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
