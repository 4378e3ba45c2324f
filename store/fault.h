/*
 * fault.h — named crash points for the crash-matrix tests (SPEC §7).
 *
 * Owns the one armed point, read once from the environment variable
 * ONCED_FAULT: "NAME" crashes at the first hit of NAME, "NAME@N" at the
 * N-th. A crash is raise(SIGKILL): no destructor, no flush, exactly what a
 * power cut leaves behind (LevelDB's synced log stays). Off unless the
 * variable is set; a hit costs one compare when it is off.
 * Never: changes behaviour when no point is armed.
 */
#ifndef STORE_FAULT_H
#define STORE_FAULT_H

/* Points, in the order a call passes them. */
#define FAULT_LEASE_ENDED         "lease_ended" /* end synced, reclaim not */
#define FAULT_RECORDS_DELETED     "records_deleted" /* reclaim synced */
#define FAULT_ACK_APPLIED         "ack_applied"     /* watermark raised */
#define FAULT_WATERMARK_PERSISTED "watermark_persisted"

/* Reads ONCED_FAULT. Call once at start-up, before any thread. */
void fault_init(void);

/* The point is passed: crash if it is the armed one. */
void fault_point(const char *name);

#endif /* STORE_FAULT_H */
