/*
 * classify.c — the call engine's decision after an attempt, pure
 * (classify.h).
 *
 * Owns: the verdict for a reply or a failure, and every reason string
 * the call engine compares (all of them from once/client.h).
 * Invariant: no state, no clock, no I/O: the same outcome always gets the
 * same verdict (tests/test_classify.c checks every code and reason).
 * Never: classifies by message text.
 */
#include "client/classify.h"

#include <stddef.h>
#include <string.h>

#include <nng/nng.h>

#include "once/client.h"

static bool
classify_is(const char *reason, const char *name)
{
    return reason != NULL && strcmp(reason, name) == 0;
}

int
classify_code(int wire_code)
{
    return (wire_code < ONCE_OK || wire_code > ONCE_UNAUTHENTICATED)
               ? ONCE_UNKNOWN
               : wire_code;
}

bool
classify_lease_gone(int code, const char *reason)
{
    return (code == ONCE_FAILED_PRECONDITION &&
            classify_is(reason, ONCE_REASON_LEASE_EXPIRED)) ||
           (code == ONCE_PERMISSION_DENIED &&
            classify_is(reason, ONCE_REASON_NOT_YOUR_LEASE));
}

bool
classify_stale(int code, const char *reason)
{
    return code == ONCE_FAILED_PRECONDITION &&
           classify_is(reason, ONCE_REASON_STALE_RPC);
}

static bool
classify_window_full(int code, const char *reason)
{
    return code == ONCE_RESOURCE_EXHAUSTED &&
           classify_is(reason, ONCE_REASON_WINDOW_FULL);
}

/* A reply that refuses the call before execution: it says nothing about
 * an earlier attempt of the same id that went unanswered. */
static bool
classify_refused_unexecuted(int code, const char *reason)
{
    return code == ONCE_DEADLINE_EXCEEDED ||
           classify_window_full(code, reason) ||
           classify_lease_gone(code, reason);
}

classify_reply_out
classify_reply(int code, const char *reason, bool mutating, bool maybe_executed)
{
    classify_reply_out out = {.verdict = CLASSIFY_FINAL};

    if (code == ONCE_UNAVAILABLE) {
        /* IN_PROGRESS and friends: the server asks us to come back (the
         * call may be running meanwhile); or a follower of a replicated
         * cluster refused without looking (docs/replication.md). */
        out.follower = classify_is(reason, ONCE_REASON_NOT_LEADER) ||
                       classify_is(reason, ONCE_REASON_NO_LEADER) ||
                       classify_is(reason, ONCE_REASON_ETCD_UNAVAILABLE);
        out.may_have_run = mutating && !out.follower;
        out.refusal = CLASSIFY_REFUSAL_UNAVAILABLE;
        out.verdict = classify_is(reason, ONCE_REASON_NOT_LEADER)
                          ? CLASSIFY_RETRY_NOW
                          : CLASSIFY_BACK_OFF;
        return out;
    }
    if (mutating && classify_window_full(code, reason)) {
        /* Refused before execution; a later attempt carries a newer
         * acknowledgement and may fit. */
        out.refusal = CLASSIFY_REFUSAL_WINDOW_FULL;
        out.verdict = CLASSIFY_BACK_OFF;
        return out;
    }
    out.lease_gone = classify_lease_gone(code, reason);
    if (mutating && maybe_executed &&
        classify_refused_unexecuted(code, reason)) {
        out.verdict = CLASSIFY_UNKNOWN;
    }
    return out;
}

classify_verdict
classify_no_reply(int err, bool tls_verdict)
{
    if (err == NNG_ECLOSED) {
        return CLASSIFY_GIVE_UP; /* the handle is closing */
    }
    if (tls_verdict) {
        return CLASSIFY_GIVE_UP; /* the certificate will not change */
    }
    return CLASSIFY_BACK_OFF;
}

const char *
classify_leader_hint(const char *leader, const char *message)
{
    static const char tail[] = "the leader is ";
    const char *m;

    if (leader != NULL && leader[0] != '\0') {
        return leader;
    }
    m = message != NULL ? strstr(message, tail) : NULL;
    return m != NULL ? m + sizeof(tail) - 1 : NULL;
}
