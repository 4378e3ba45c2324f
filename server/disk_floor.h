/*
 * disk_floor.h — the free-space floor of the data folder.
 *
 * Owns the last free-space reading of the data folder's file system and
 * whether it is below --disk-free-min. Below the floor, new mutating calls
 * (and OpenLease) are refused RESOURCE_EXHAUSTED/DISK_LOW before they
 * execute, so LevelDB never meets ENOSPC in a synced write (which is fatal,
 * store.h); replays, reads, renewals, acknowledgements, CloseLease and the
 * collector keep working, so space can come back.
 * Invariant: a transition (low or back) is logged once.
 * Never: blocks beyond one statvfs; refuses a call that cannot add data.
 */
#ifndef SERVER_DISK_FLOOR_H
#define SERVER_DISK_FLOOR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define DISK_FLOOR_RECHECK_MS 100 /* readings are reused this long */

typedef struct disk_floor {
    const char *dir;             /* the data folder */
    uint64_t min_free;           /* bytes; 0: no floor */
    uint64_t last_ms;            /* executor thread only: monotonic time of the
                                    last reading */
    _Atomic uint64_t free_bytes; /* the last reading (Stats) */
    _Atomic bool low;            /* below min_free at the last reading */
    _Atomic uint64_t refused;    /* calls refused DISK_LOW */
} disk_floor;

/* Sets up the floor for dir and takes a first reading. */
void disk_floor_init(disk_floor *d, const char *dir, uint64_t min_free);

/* Whether the data folder is below the floor now (a reading at most
 * DISK_FLOOR_RECHECK_MS old). Executor thread only. */
bool disk_floor_low(disk_floor *d);

/* A fresh reading (Stats), with or without a floor; returns whether it
 * is below the floor. Executor thread only. */
bool disk_floor_refresh(disk_floor *d);

#endif /* SERVER_DISK_FLOOR_H */
