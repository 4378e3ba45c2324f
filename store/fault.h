/*
 * fault.h — named fault points and holds for the crash-matrix and timing
 * tests, and switches that break onced on purpose for the history checker
 * (tests/README.md); they exist in the test build only.
 *
 * Owns the one armed fault point and the holds, set once at start-up by
 * the test build of onced (server/test_seams.c, from the environment
 * variables ONCED_FAULT, ONCED_EXEC_HOLD_MS and ONCED_COMPACT_HOLD_MS).
 * Call sites use the macros below: with ONCE_TEST_SEAMS defined (the
 * *_test libraries and onced_test: once_library in CMakeLists.txt) they call
 * fault.c; in the shipped build they expand to nothing (a drop or a fail
 * to false), so onced has neither fault.c nor a call to it
 * (scripts/check_no_seams.sh, ctest test_no_seams).
 *
 * ONCED_FAULT: "NAME" acts at the first hit of NAME, "NAME@N" at the N-th,
 * and a ":drop" suffix ("batch_written@3:drop") turns a reply point's crash
 * into a lost reply — onced goes on, the client never hears back — and a
 * ":fail" suffix ("mint:fail") makes the operation at a fail point return
 * an error instead of crashing. A crash is raise(SIGKILL): no destructor,
 * no flush, exactly what a power cut leaves behind (LevelDB's synced log
 * stays). A hit costs one compare when nothing is armed.
 * Never: changes behaviour when no point is armed and no hold set; acts
 * more than once; is compiled into the shipped onced.
 */
#ifndef STORE_FAULT_H
#define STORE_FAULT_H

#include <stdbool.h>
#include <stdint.h>

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

/* The replicated path (onced --replicate; tests/test_repl_crash_matrix.c).
 * There the call points above are passed too, batch_staged after the
 * group's log entry is in etcd (store/replicate.c, the Txn succeeded) and
 * before the local write; batch_written and reply_sent are the listener's,
 * as embedded. The points below count as those do: append_part each part
 * written while more of its entry follow (an entry above REPL_PART_MAX);
 * trim_deleted each trim Txn that deleted log keys; seed_chunk each
 * snapshot chunk loaded; handover_taken each re-executed winner that took
 * its lease back. */
#define FAULT_APPEND_PART    "append_part"    /* repl/lead.c: part in etcd */
#define FAULT_TRIM_DELETED   "trim_deleted"   /* repl/trim.c: not compacted */
#define FAULT_SEED_CHUNK     "seed_chunk"     /* repl/seed.c: not finished */
#define FAULT_HANDOVER_TAKEN "handover_taken" /* repl/handover.c: not led */

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

/* Holds: the thread passing one waits the hold's milliseconds (0: not at
 * all), so a test can act while it certainly waits. */
typedef enum fault_hold_at {
    FAULT_HOLD_EXEC,    /* a call with a deadline, before it runs */
    FAULT_HOLD_COMPACT, /* a compaction, before it starts */
    FAULT_HOLD_COUNT
} fault_hold_at;

#ifdef ONCE_TEST_SEAMS

/* The point is passed: crash if it is the armed one (a ":drop" arming of
 * this point is not counted here). */
#define FAULT_POINT(name) fault_point(name)
/* A reply point is passed with its reply: true when the armed ":drop" hit
 * is this one and the reply must be thrown away (a crash arming of this
 * point is not counted here). */
#define FAULT_DROP(name) fault_drop(name)
/* A fail point is passed: true when the armed ":fail" hit is this one and
 * the operation must fail (other armings of this point do nothing here). */
#define FAULT_FAIL(name) fault_fail(name)
/* A hold is passed: wait its milliseconds. */
#define FAULT_HOLD(at) fault_hold(at)
/* Whether the broken-on-purpose switch name is on. */
#define FAULT_BROKEN(name) fault_broken(name)

/* Turns on the switches list names ("a,b"; NULL or "" none). Call at most
 * once, at start-up, before any thread. */
void fault_break(const char *list);
bool fault_broken(const char *name);

/* Arms the point spec names (the syntax above; NULL or "" arms nothing).
 * Call at most once, at start-up, before any thread. */
void fault_arm(const char *spec);

/* Sets the hold at to ms (0: none). Call at start-up, before any thread. */
void fault_hold_set(fault_hold_at at, uint64_t ms);

void fault_point(const char *name);
bool fault_drop(const char *name);
bool fault_fail(const char *name);
void fault_hold(fault_hold_at at);

#else /* the shipped build: no seam */

#define FAULT_POINT(name)  ((void)0)
#define FAULT_DROP(name)   false
#define FAULT_FAIL(name)   false
#define FAULT_HOLD(at)     ((void)0)
#define FAULT_BROKEN(name) false

#endif /* ONCE_TEST_SEAMS */

#endif /* STORE_FAULT_H */
