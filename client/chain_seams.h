/*
 * chain_seams.h — the chain's test seams: crash points and the
 * write-after-send switch, present only in the test library
 * (libonce_seams, built with ONCE_TEST_SEAMS from chain_seams.c); in the
 * shipped libonce they are empty macros, so no seam code or variable name
 * is in it (ctest test_no_chain_seams checks the strings).
 *
 * Owns: the names of the crash points, in the order a step meets them:
 *   before_record  before the write that records a request and its id
 *   after_record   after it, before the send
 *   after_send     after the answer came, before it is written
 *   after_reply    after the reply is written (appended to the journal's
 *                  reply log, not yet in LevelDB), before the commit
 *   after_commit   after the commit is written, before the next send
 * and the input store's import of its files of before (inputs_import.c):
 *   import_written after an imported chain is written (or found kept),
 *                  before its old file is unlinked
 * Invariant: a point fires only when ONCE_CHAIN_CRASH names it, on the
 * hit given after '@' (default 1), counted per process; it SIGKILLs the
 * process. ONCE_CHAIN_WRITE_AFTER_SEND=1 makes the journal record a
 * request only together with its reply (the broken order the crash
 * matrix must catch).
 * Never: compiled into the shipped libonce.
 */
#ifndef CLIENT_CHAIN_SEAMS_H
#define CLIENT_CHAIN_SEAMS_H

#include <stdbool.h>

#ifdef ONCE_TEST_SEAMS
/* SIGKILLs the process when point is armed and due. */
void chain_crash_point(const char *point);
/* Whether requests are recorded only after they were sent. */
bool chain_write_after_send(void);
#else
#define chain_crash_point(point) ((void)0)
#define chain_write_after_send() false
#endif

#endif /* CLIENT_CHAIN_SEAMS_H */
