/*
 * classify.h — what an attempt's outcome means for the call: the call
 * engine's one decision, as pure functions of the outcome (code, reason,
 * and two facts about the call), so a table can test every case.
 *
 * Owns: the mapping from an attempt's reply (its code and reason) or its
 * failure (an nng error) to a verdict — final, retry now, back off,
 * unknown, give up — and every comparison of the call engine with a
 * reason string (the reasons are the public header's ONCE_REASON_*).
 * Invariant: a verdict depends only on the arguments: no clock, no
 * handle, no lock, no I/O. A reply that may say nothing ran (refused
 * before execution) is never taken as "nothing ran" when an earlier
 * attempt of the same id may have run.
 * Never: reads a message text to classify (the NOT_LEADER hint of an
 * onced older than Status.leader is the one reading of a message, and
 * only for where to send next); never acts on its verdict (call.c does).
 */
#ifndef CLIENT_CLASSIFY_H
#define CLIENT_CLASSIFY_H

#include <stdbool.h>
#include <stdint.h>

typedef enum classify_verdict {
    CLASSIFY_FINAL,     /* the reply is the call's answer */
    CLASSIFY_RETRY_NOW, /* a follower refused and named the leader: the
                           next attempt goes there without a backoff when
                           the route moved (else it backs off) */
    CLASSIFY_BACK_OFF,  /* not run, or asked to come back: the same rpc id
                           again after a backoff */
    CLASSIFY_UNKNOWN,   /* refused before execution, but an earlier
                           attempt may have run: ends OUTCOME_UNKNOWN */
    CLASSIFY_GIVE_UP,   /* no reply, and none will come: end now */
} classify_verdict;

/* Which refusal a retry remembers, to report if the call gives up on it. */
typedef enum classify_refusal {
    CLASSIFY_REFUSAL_NONE,
    CLASSIFY_REFUSAL_UNAVAILABLE, /* UNAVAILABLE, any reason */
    CLASSIFY_REFUSAL_WINDOW_FULL, /* RESOURCE_EXHAUSTED/WINDOW_FULL */
} classify_refusal;

/* What a reply means. */
typedef struct classify_reply_out {
    classify_verdict verdict;
    classify_refusal refusal; /* set with a retry verdict */
    bool follower;            /* a replicated cluster's follower refused without
                                 looking (UNAVAILABLE NOT_LEADER, NO_LEADER,
                                 ETCD_UNAVAILABLE): not run, and the target does
                                 not serve calls */
    bool may_have_run;        /* the reply leaves the call possibly running
                                 (UNAVAILABLE from a server, mutating call) */
    bool lease_gone;          /* the reply says the call's lease is gone */
} classify_reply_out;

/* A reply's code as enum once_code: numbers outside it are ONCE_UNKNOWN. */
int classify_code(int wire_code);

/*
 * A reply with code (enum once_code) and reason (NULL: none) to a call,
 * mutating or not; maybe_executed: an earlier attempt of this call was
 * sent and not answered, or answered UNAVAILABLE (it may have run).
 */
classify_reply_out classify_reply(int code, const char *reason, bool mutating,
                                  bool maybe_executed);

/* An attempt that got no reply: err, the nng error it ended with;
 * tls_verdict, a TLS diagnosis ended it unsent (the certificate will not
 * change by itself). GIVE_UP or BACK_OFF. */
classify_verdict classify_no_reply(int err, bool tls_verdict);

/* Whether code and reason say the call's lease is gone:
 * FAILED_PRECONDITION/LEASE_EXPIRED, or PERMISSION_DENIED/NOT_YOUR_LEASE
 * (what an authenticated onced answers for a collected lease). */
bool classify_lease_gone(int code, const char *reason);

/* Whether the final answer is FAILED_PRECONDITION/STALE_RPC: the id was
 * acknowledged away. */
bool classify_stale(int code, const char *reason);

/* The leader a NOT_LEADER reply names: its leader field, or (an onced
 * older than that field, leader NULL or "") the URL at the end of its
 * message. NULL: none. Points into leader or message. */
const char *classify_leader_hint(const char *leader, const char *message);

#endif /* CLIENT_CLASSIFY_H */
