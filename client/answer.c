/*
 * answer.c — answer_classify (answer.h): what a call's final answer makes
 * of a request kept on the client.
 *
 * Owns: the mapping from (code, reason) to decided / undecided / lease
 * ended.
 * Invariant: pure; the same answer always gives the same kind.
 * Never: reads message text.
 */
#include "client/answer.h"

answer_kind
answer_classify(int rv, const once_status *st)
{
    if (rv == ONCE_FAILED_PRECONDITION && st != NULL &&
        (once_status_is(st, ONCE_REASON_LEASE_EXPIRED) ||
         once_status_is(st, ONCE_REASON_STALE_RPC))) {
        return ANSWER_LEASE_ENDED;
    }
    switch (rv) {
    case ONCE_UNKNOWN:
    case ONCE_UNAVAILABLE:
    case ONCE_DEADLINE_EXCEEDED:
    case ONCE_RESOURCE_EXHAUSTED:
    case ONCE_ABORTED:
    case ONCE_CANCELLED:
        return ANSWER_UNDECIDED;
    default:
        return ANSWER_DECIDED;
    }
}
