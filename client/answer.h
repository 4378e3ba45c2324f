/*
 * answer.h — what the final answer of a call means for a request kept on
 * the client (the journal's chains, the input store): decided, undecided
 * (keep it and re-send it under the same id), or its lease ended.
 *
 * Owns: the one rule both keepers of requests share (answer.c), pure.
 * Invariant: an answer that may leave the request unexecuted AND
 * re-sendable under its id is UNDECIDED; LEASE_EXPIRED and STALE_RPC
 * refusals (the id can no longer be used) are LEASE_ENDED; everything
 * else is the server's decision.
 * Never: does I/O or looks at message text.
 */
#ifndef CLIENT_ANSWER_H
#define CLIENT_ANSWER_H

#include "once/client.h"

typedef enum answer_kind {
    ANSWER_DECIDED = 1,    /* OK or a final refusal: record it */
    ANSWER_UNDECIDED = 2,  /* nothing known: keep, re-send under the id */
    ANSWER_LEASE_ENDED = 3 /* the id's lease ended: never re-send it */
} answer_kind;

/* The meaning of the call's answer rv / st. */
answer_kind answer_classify(int rv, const once_status *st);

#endif /* CLIENT_ANSWER_H */
