/*
 * overlay.h — the writes that are executed but not yet durable.
 *
 * Owns: an in-memory map from LevelDB key to the newest staged value (or a
 * tombstone) of every key written by a transaction that has been handed to
 * over for group commit but whose batch is not yet synced.
 * Invariant: a key is in the overlay from the moment its transaction is
 * published until the batch holding its newest write is in LevelDB; so a
 * reader that checks the overlay first and LevelDB second never misses a
 * write, and never sees one older than the newest executed.
 * Never: writes to LevelDB, or blocks on I/O while holding its lock.
 */
#ifndef STORE_OVERLAY_H
#define STORE_OVERLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct overlay overlay;

int overlay_alloc(overlay **op);
void overlay_free(overlay *o);

/* Records that the transaction with this ticket wrote key (val NULL: a
 * delete). Copies key and value. Returns 0 or ENOMEM. */
int overlay_put(overlay *o, const void *key, size_t klen, const void *val,
                size_t vlen, bool deleted, uint64_t ticket);

/*
 * Looks key up. Returns 1 when the overlay decides the answer: *deleted says
 * whether the newest write was a delete, otherwise *val is a malloc'd copy
 * (the caller frees it with free()) of *vlen bytes. Returns 0 when the key is
 * not in the overlay (read LevelDB), or ENOMEM as a negative number.
 */
int overlay_get(overlay *o, const void *key, size_t klen, char **val,
                size_t *vlen, bool *deleted);

/* The write of key by the transaction with this ticket is durable: forget
 * the key unless a later transaction has written it again. */
void overlay_settle(overlay *o, const void *key, size_t klen, uint64_t ticket);

/* Calls fn for every key held that starts with the plen bytes at prefix
 * (val NULL: its newest write is a delete), in no particular order, with
 * the lock held: fn copies what it keeps and never calls back in. */
typedef void (*overlay_each_fn)(void *arg, const char *key, size_t klen,
                                const char *val, size_t vlen);
void overlay_each_prefix(overlay *o, const void *prefix, size_t plen,
                         overlay_each_fn fn, void *arg);

/* Number of keys held (for stats and tests). */
size_t overlay_count(overlay *o);

#endif /* STORE_OVERLAY_H */
