/*
 * fault.h — named fault points for the crash-matrix tests, and switches
 * that break onced on purpose for the history checker (tests/README.md).
 *
 * Owns the one armed point, armed once at start-up by the test build of
 * onced (server/test_seams.c, from the environment variable ONCED_FAULT;
 * the shipped onced never arms one, so every point is a no-op there):
 * "NAME" acts at the first hit of NAME, "NAME@N" at the N-th,
 * and a ":drop" suffix ("batch_written@3:drop") turns a reply point's crash
 * into a lost reply — onced goes on, the client never hears back — and a
 * ":fail" suffix ("mint:fail") makes the operation at a fail point return
 * an error instead of crashing. A crash
 * is raise(SIGKILL): no destructor, no flush, exactly what a power cut
 * leaves behind (LevelDB's synced log stays). Off unless the variable is
 * set; a hit costs one compare when it is off.
 * Never: changes behaviour when no point is armed; acts more than once.
 */
#ifndef STORE_FAULT_H
#define STORE_FAULT_H

#include <stdbool.h>

/* Points, in the order a call passes them. The call points count only
 * calls (or commit groups) that wrote something, so "NAME@N" is the N-th
 * writing call — reads, replays and rejections never move the count. */
#define FAULT_REQUEST_ACCEPTED "request_accepted" /* decoded, admitted */
#define FAULT_BATCH_ENTRY      "batch_entry"      /* a batch entry ran */
#define FAULT_BATCH_STAGED     "batch_staged"     /* grouped, not written */
#define FAULT_WRITE_BETWEEN    "write_between"    /* see commit.c */
#define FAULT_BATCH_WRITTEN    "batch_written"    /* synced, reply not sent */
#define FAULT_REPLY_SENT       "reply_sent"       /* reply handed to the wire */
#define FAULT_ACK_APPLIED      "ack_applied"      /* watermark raised, memory */
#define FAULT_WATERMARK_PERSISTED                                              \
    "watermark_persisted"                       /* durable watermark raised */
#define FAULT_RECORDS_DELETED "records_deleted" /* reclaim synced */
#define FAULT_LEASE_ENDED     "lease_ended"     /* end synced, reclaim not */

/* Fail points (armed with ":fail"; every hit counts, written or not). */
#define FAULT_MINT "mint" /* grants_mint: signing a credential fails */

/* Broken-on-purpose switches, for showing that the history checker
 * (tests/history/check.py) catches a wrong onced: ONCED_BROKEN="a,b" in
 * the test build's environment turns on each named one for the life of
 * the process (and of its re-executions); the shipped onced never turns
 * one on. Each costs one compare when none is on. */
#define FAULT_BROKEN_ACK_EARLY      "ack_before_append" /* store/replicate.c */
#define FAULT_BROKEN_FOLLOWER_READS "follower_reads"    /* repl/notleader.c */
#define FAULT_BROKEN_REPLAY         "replay_executes"   /* server/executor.c */
#define FAULT_BROKEN_TWO_GRANTS     "two_grants"        /* grants/start.c */

/* Turns on the switches list names ("a,b"; NULL or "" none). Call at most
 * once, at start-up, before any thread. */
void fault_break(const char *list);

/* Whether switch name is on. */
bool fault_broken(const char *name);

/* Arms the point spec names (the syntax above; NULL or "" arms nothing).
 * Call at most once, at start-up, before any thread. */
void fault_arm(const char *spec);

/* The point is passed: crash if it is the armed one (a ":drop" arming of
 * this point is not counted here). */
void fault_point(const char *name);

/* A reply point is passed with its reply: true when the armed ":drop" hit
 * is this one and the reply must be thrown away (a crash arming of this
 * point is not counted here). */
bool fault_drop(const char *name);

/* A fail point is passed: true when the armed ":fail" hit is this one and
 * the operation must fail (other armings of this point do nothing here). */
bool fault_fail(const char *name);

#endif /* STORE_FAULT_H */
