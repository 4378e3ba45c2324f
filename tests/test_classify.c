/*
 * test_classify.c — the call engine's outcome classifier
 * (client/classify.h): the verdict for every status code with every
 * reason of the public header, for a read, a fresh mutating call and a
 * mutating call an earlier attempt of which may have run.
 *
 * Owns: the tables below — one row a code (its verdict for any reason)
 * and one row for each (code, reason) the classifier tells apart — and
 * the exhaustive walk that checks each code against each reason through
 * them; the mapping of wire codes, the verdict without a reply, the
 * leader hint, the stale and lease-gone predicates.
 * Invariant: the expected verdicts are written out, never computed by a
 * copy of the classifier; every row is used by the walk (a row that
 * matches nothing fails).
 * Never: touches the network, a handle or onced.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <nng/nng.h>

#include "once/client.h"
#include "client/classify.h"

#define F      CLASSIFY_FINAL
#define NOW    CLASSIFY_RETRY_NOW
#define BACK   CLASSIFY_BACK_OFF
#define UNK    CLASSIFY_UNKNOWN
#define R_NONE CLASSIFY_REFUSAL_NONE
#define R_UNAV CLASSIFY_REFUSAL_UNAVAILABLE
#define R_WF   CLASSIFY_REFUSAL_WINDOW_FULL

/* ANY as a row's reason: the code's row for every reason without one. */
static const char ANY[] = "(any)";

typedef struct row {
    int code;
    const char *reason;
    classify_verdict read;    /* a call that is not mutating */
    classify_verdict fresh;   /* mutating, no earlier attempt may have run */
    classify_verdict after;   /* mutating, an earlier attempt may have run */
    classify_refusal refusal; /* remembered by a retry verdict */
    bool follower;
    bool may_have_run; /* for a mutating call (never for a read) */
    bool lease_gone;
} row;

static const row rows[] = {
    {ONCE_OK, ANY, F, F, F, R_NONE, false, false, false},
    {ONCE_CANCELLED, ANY, F, F, F, R_NONE, false, false, false},
    {ONCE_UNKNOWN, ANY, F, F, F, R_NONE, false, false, false},
    {ONCE_INVALID_ARGUMENT, ANY, F, F, F, R_NONE, false, false, false},
    /* Refused before execution: unknown after an attempt that may have
     * run, whatever the reason. */
    {ONCE_DEADLINE_EXCEEDED, ANY, F, F, UNK, R_NONE, false, false, false},
    {ONCE_NOT_FOUND, ANY, F, F, F, R_NONE, false, false, false},
    {ONCE_ALREADY_EXISTS, ANY, F, F, F, R_NONE, false, false, false},
    {ONCE_PERMISSION_DENIED, ANY, F, F, F, R_NONE, false, false, false},
    {ONCE_PERMISSION_DENIED, ONCE_REASON_NOT_YOUR_LEASE, F, F, UNK, R_NONE,
     false, false, true},
    {ONCE_RESOURCE_EXHAUSTED, ANY, F, F, F, R_NONE, false, false, false},
    /* A read never backs off on WINDOW_FULL (it has no seq). */
    {ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_WINDOW_FULL, F, BACK, BACK, R_WF,
     false, false, false},
    {ONCE_FAILED_PRECONDITION, ANY, F, F, F, R_NONE, false, false, false},
    {ONCE_FAILED_PRECONDITION, ONCE_REASON_LEASE_EXPIRED, F, F, UNK, R_NONE,
     false, false, true},
    {ONCE_ABORTED, ANY, F, F, F, R_NONE, false, false, false},
    {ONCE_OUT_OF_RANGE, ANY, F, F, F, R_NONE, false, false, false},
    {ONCE_UNIMPLEMENTED, ANY, F, F, F, R_NONE, false, false, false},
    {ONCE_INTERNAL, ANY, F, F, F, R_NONE, false, false, false},
    /* Come back later: the call may be running meanwhile. */
    {ONCE_UNAVAILABLE, ANY, BACK, BACK, BACK, R_UNAV, false, true, false},
    /* A follower's refusals: nothing ran. */
    {ONCE_UNAVAILABLE, ONCE_REASON_NOT_LEADER, NOW, NOW, NOW, R_UNAV, true,
     false, false},
    {ONCE_UNAVAILABLE, ONCE_REASON_NO_LEADER, BACK, BACK, BACK, R_UNAV, true,
     false, false},
    {ONCE_UNAVAILABLE, ONCE_REASON_ETCD_UNAVAILABLE, BACK, BACK, BACK, R_UNAV,
     true, false, false},
    {ONCE_DATA_LOSS, ANY, F, F, F, R_NONE, false, false, false},
    {ONCE_UNAUTHENTICATED, ANY, F, F, F, R_NONE, false, false, false},
};

#define NROWS (sizeof(rows) / sizeof(rows[0]))

/* Every reason of the public header, none, empty, and one it never
 * names. */
static const char *const reasons[] = {
    NULL,
    "",
    "other",
    ONCE_REASON_OUTCOME_UNKNOWN,
    ONCE_REASON_NOT_SENT,
    ONCE_REASON_NO_REPLY,
    ONCE_REASON_LEASE_EXPIRED,
    ONCE_REASON_NOT_YOUR_LEASE,
    ONCE_REASON_WINDOW_FULL,
    ONCE_REASON_RPC_ID_CONFLICT,
    ONCE_REASON_STALE_RPC,
    ONCE_REASON_RPC_ID_COMPLETED,
    ONCE_REASON_NO_LEASE,
    ONCE_REASON_BAD_ARGUMENT,
    ONCE_REASON_BAD_RPC_ID,
    ONCE_REASON_NO_MEMORY,
    ONCE_REASON_REQUEST_TOO_LARGE,
    ONCE_REASON_BAD_RESPONSE,
    ONCE_REASON_UNKNOWN_CLIENT,
    ONCE_REASON_NOT_LEADER,
    ONCE_REASON_NO_LEADER,
    ONCE_REASON_ETCD_UNAVAILABLE,
    ONCE_REASON_TLS_UNTRUSTED,
    ONCE_REASON_TLS_NAME_MISMATCH,
    ONCE_REASON_TLS_HANDSHAKE,
};

#define NREASONS (sizeof(reasons) / sizeof(reasons[0]))

static bool
same(const char *a, const char *b)
{
    return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* The row for (code, reason): its own, else the code's. */
static const row *
row_for(int code, const char *reason, bool *used)
{
    const row *any = NULL;

    for (size_t i = 0; i < NROWS; i++) {
        if (rows[i].code != code) {
            continue;
        }
        if (rows[i].reason != ANY && same(rows[i].reason, reason)) {
            used[i] = true;
            return &rows[i];
        }
        if (rows[i].reason == ANY) {
            any = &rows[i];
            used[i] = true;
        }
    }
    return any;
}

static void
check(const row *w, int code, const char *reason, bool mutating, bool maybe,
      classify_verdict want)
{
    classify_reply_out o = classify_reply(code, reason, mutating, maybe);
    bool retry = want == NOW || want == BACK;
    classify_refusal refusal = retry ? w->refusal : R_NONE;

    if (o.verdict != want || o.refusal != refusal ||
        o.follower != w->follower ||
        o.may_have_run != (mutating && w->may_have_run) ||
        o.lease_gone != w->lease_gone) {
        fail_msg("code %d reason %s mutating %d maybe_executed %d: verdict "
                 "%d (want %d), refusal %d (%d), follower %d (%d), "
                 "may_have_run %d, lease_gone %d (%d)",
                 code, reason != NULL ? reason : "(null)", mutating, maybe,
                 o.verdict, want, o.refusal, refusal, o.follower, w->follower,
                 o.may_have_run, o.lease_gone, w->lease_gone);
    }
}

/* Every code with every reason, for the three kinds of call. */
static void
test_every_code_and_reason(void **state)
{
    bool used[NROWS] = {false};

    (void)state;
    for (int code = ONCE_OK; code <= ONCE_UNAUTHENTICATED; code++) {
        for (size_t j = 0; j < NREASONS; j++) {
            const row *w = row_for(code, reasons[j], used);

            assert_non_null(w);
            check(w, code, reasons[j], false, false, w->read);
            check(w, code, reasons[j], false, true, w->read);
            check(w, code, reasons[j], true, false, w->fresh);
            check(w, code, reasons[j], true, true, w->after);
        }
    }
    for (size_t i = 0; i < NROWS; i++) {
        if (!used[i]) {
            fail_msg("row %zu (code %d) matches nothing", i, rows[i].code);
        }
    }
}

/* Wire codes outside enum once_code are UNKNOWN; the others themselves. */
static void
test_code(void **state)
{
    static const struct {
        int wire, code;
    } t[] = {
        {-1, ONCE_UNKNOWN},
        {INT_MIN, ONCE_UNKNOWN},
        {ONCE_UNAUTHENTICATED + 1, ONCE_UNKNOWN},
        {INT_MAX, ONCE_UNKNOWN},
    };

    (void)state;
    for (int c = ONCE_OK; c <= ONCE_UNAUTHENTICATED; c++) {
        assert_int_equal(classify_code(c), c);
    }
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        assert_int_equal(classify_code(t[i].wire), t[i].code);
    }
}

/* No reply: only a closing handle and a TLS verdict end the call. */
static void
test_no_reply(void **state)
{
    static const struct {
        int err;
        bool tls;
        classify_verdict want;
    } t[] = {
        {NNG_ETIMEDOUT, false, BACK},
        {NNG_ECANCELED, false, BACK},
        {NNG_ECONNREFUSED, false, BACK},
        {NNG_ECONNSHUT, false, BACK},
        {NNG_ENOMEM, false, BACK},
        {EPROTO, false, BACK},
        {NNG_ECLOSED, false, CLASSIFY_GIVE_UP},
        {NNG_ECRYPTO, true, CLASSIFY_GIVE_UP},
        {NNG_ETIMEDOUT, true, CLASSIFY_GIVE_UP},
        {NNG_ECLOSED, true, CLASSIFY_GIVE_UP},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        assert_int_equal(classify_no_reply(t[i].err, t[i].tls), t[i].want);
    }
}

/* STALE_RPC is told apart only under FAILED_PRECONDITION. */
static void
test_stale(void **state)
{
    (void)state;
    for (int code = ONCE_OK; code <= ONCE_UNAUTHENTICATED; code++) {
        for (size_t j = 0; j < NREASONS; j++) {
            bool want = code == ONCE_FAILED_PRECONDITION &&
                        same(reasons[j], ONCE_REASON_STALE_RPC);

            assert_int_equal(classify_stale(code, reasons[j]), want);
        }
    }
}

/* The leader field first; an older onced's message text after it. */
static void
test_leader_hint(void **state)
{
    static const char url[] = "tcp://10.0.0.2:7400";
    static const char msg[] = "not the leader; the leader is tcp://b:1";

    (void)state;
    assert_string_equal(classify_leader_hint(url, msg), url);
    assert_string_equal(classify_leader_hint(NULL, msg), "tcp://b:1");
    assert_string_equal(classify_leader_hint("", msg), "tcp://b:1");
    assert_null(classify_leader_hint(NULL, "no leader known"));
    assert_null(classify_leader_hint("", NULL));
    assert_null(classify_leader_hint(NULL, NULL));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_code_and_reason),
        cmocka_unit_test(test_code),
        cmocka_unit_test(test_no_reply),
        cmocka_unit_test(test_stale),
        cmocka_unit_test(test_leader_hint),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
