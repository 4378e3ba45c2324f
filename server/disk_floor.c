/*
 * disk_floor.c — reading the data folder's free space (disk_floor.h).
 *
 * Owns nothing beyond the disk_floor it is given; the executor thread is
 * the only one that takes readings, Stats only reads the atomics.
 */
#include "server/disk_floor.h"

#include <string.h>
#include <sys/statvfs.h>

#include "base/clock.h"
#include "base/log.h"

static void
disk_floor_read(disk_floor *d)
{
    struct statvfs sv;
    uint64_t free_bytes;
    bool low, was;

    if (statvfs(d->dir, &sv) != 0) {
        return; /* keep the last reading */
    }
    free_bytes = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
    low = d->min_free > 0 && free_bytes < d->min_free;
    atomic_store(&d->free_bytes, free_bytes);
    was = atomic_exchange(&d->low, low);
    if (low && !was) {
        log_warn("disk low: %llu bytes free on the file system of %s, below "
                 "--disk-free-min %llu: new mutating calls and OpenLease are "
                 "refused RESOURCE_EXHAUSTED/DISK_LOW until space comes back "
                 "(reads, renewals, acknowledgements, CloseLease and the "
                 "collector go on)",
                 (unsigned long long)free_bytes, d->dir,
                 (unsigned long long)d->min_free);
    } else if (!low && was) {
        log_info("disk space is back: %llu bytes free on the file system of "
                 "%s (--disk-free-min %llu): mutating calls are accepted again",
                 (unsigned long long)free_bytes, d->dir,
                 (unsigned long long)d->min_free);
    }
}

void
disk_floor_init(disk_floor *d, const char *dir, uint64_t min_free)
{
    memset(d, 0, sizeof(*d));
    d->dir = dir;
    d->min_free = min_free;
    d->last_ms = clock_now_ms();
    disk_floor_read(d);
}

bool
disk_floor_refresh(disk_floor *d)
{
    d->last_ms = clock_now_ms();
    disk_floor_read(d);
    return atomic_load(&d->low);
}

bool
disk_floor_low(disk_floor *d)
{
    uint64_t now;

    if (d->min_free == 0) {
        return false;
    }
    now = clock_now_ms();
    if (now - d->last_ms >= DISK_FLOOR_RECHECK_MS) {
        d->last_ms = now;
        disk_floor_read(d);
    }
    return atomic_load(&d->low);
}
