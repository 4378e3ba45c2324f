/*
 * snapshot.c — consistent copies of the whole store, read in chunks
 * (Admin.Snapshot: `oncectl admin backup`, a replica's seeding).
 *
 * A snapshot is one LevelDB snapshot pinned in a slot of the store: every
 * chunk is read from that same moment, so a copy holds each call's
 * completion record together with its effect, and the applied log index
 * (STORE_APPLIED_KEY) of exactly that state. LevelDB holds only synced
 * groups (the overlay of executed-but-unsynced writes is not in it), so
 * the moment is always between two group commits.
 * Owns: the slots (at most STORE_SNAP_SLOTS pinned snapshots, their ids
 * and last use).
 * Invariant: a slot is released after its last chunk, after
 * STORE_SNAP_IDLE_MS without a request, or at store_close; a chunk
 * resumes strictly after the key its caller names.
 * Never: used from more than one thread (the owner's, like transactions);
 * holds a snapshot past store_close.
 */
#include "store/store_impl.h"

#include <errno.h>
#include <string.h>

#include <sodium.h>

static void
snap_release(snap_slot *sl)
{
    if (sl->snap != NULL) {
        leveldb_release_snapshot(sl->db, sl->snap);
    }
    if (sl->ro != NULL) {
        leveldb_readoptions_destroy(sl->ro);
    }
    memset(sl, 0, sizeof(*sl));
}

void
snap_release_all(store *s)
{
    for (size_t i = 0; i < STORE_SNAP_SLOTS; i++) {
        if (s->snaps[i].id != 0) {
            snap_release(&s->snaps[i]);
        }
    }
}

/* Releases idle slots; returns a free one or NULL. */
static snap_slot *
snap_free_slot(store *s, uint64_t now_ms)
{
    snap_slot *free_slot = NULL;

    for (size_t i = 0; i < STORE_SNAP_SLOTS; i++) {
        snap_slot *sl = &s->snaps[i];
        if (sl->id != 0 && now_ms >= sl->used_ms + STORE_SNAP_IDLE_MS) {
            snap_release(sl);
        }
        if (sl->id == 0 && free_slot == NULL) {
            free_slot = sl;
        }
    }
    return free_slot;
}

static int
snap_take(store *s, snap_slot *sl, uint64_t now_ms)
{
    char *err = NULL, *v;
    size_t vlen = 0;

    sl->db = s->db;
    sl->snap = leveldb_create_snapshot(s->db);
    sl->ro = leveldb_readoptions_create();
    leveldb_readoptions_set_verify_checksums(sl->ro, 1);
    leveldb_readoptions_set_fill_cache(sl->ro, 0);
    leveldb_readoptions_set_snapshot(sl->ro, sl->snap);
    v = leveldb_get(s->db, sl->ro, STORE_APPLIED_KEY, strlen(STORE_APPLIED_KEY),
                    &vlen, &err);
    if (err != NULL) {
        snap_release(sl);
        return store_leveldb_error("reading a snapshot", err);
    }
    if (v != NULL) {
        if (vlen == 8) {
            const uint8_t *p = (const uint8_t *)v;
            for (size_t i = 0; i < 8; i++) {
                sl->log_index = sl->log_index << 8 | p[i];
            }
        }
        leveldb_free(v);
    }
    do {
        randombytes_buf(&sl->id, sizeof(sl->id));
    } while (sl->id == 0);
    sl->used_ms = now_ms;
    return 0;
}

int
store_snap_read(store *s, uint64_t *id, uint64_t now_ms, const void *after,
                size_t alen, size_t max_bytes, store_scan_fn fn, void *arg,
                uint64_t *log_index, bool *done)
{
    snap_slot *sl = NULL;
    leveldb_iterator_t *it;
    char *err = NULL;
    size_t bytes = 0, pairs = 0;
    int rv = 0;

    *done = false;
    if (*id == 0) {
        if ((sl = snap_free_slot(s, now_ms)) == NULL) {
            return EBUSY;
        }
        if ((rv = snap_take(s, sl, now_ms)) != 0) {
            return rv;
        }
        *id = sl->id;
    } else {
        (void)snap_free_slot(s, now_ms); /* expire idle ones first */
        for (size_t i = 0; i < STORE_SNAP_SLOTS && sl == NULL; i++) {
            if (s->snaps[i].id == *id) {
                sl = &s->snaps[i];
            }
        }
        if (sl == NULL) {
            return ENOENT;
        }
    }
    sl->used_ms = now_ms;
    *log_index = sl->log_index;
    it = leveldb_create_iterator(s->db, sl->ro);
    if (alen == 0) {
        leveldb_iter_seek_to_first(it);
    } else {
        leveldb_iter_seek(it, after, alen);
        if (leveldb_iter_valid(it)) {
            size_t klen;
            const char *k = leveldb_iter_key(it, &klen);
            if (klen == alen && memcmp(k, after, alen) == 0) {
                leveldb_iter_next(it);
            }
        }
    }
    for (; leveldb_iter_valid(it); leveldb_iter_next(it)) {
        size_t klen, vlen;
        const char *k = leveldb_iter_key(it, &klen);
        const char *v = leveldb_iter_value(it, &vlen);

        if (pairs > 0 && bytes + klen + vlen > max_bytes) {
            break;
        }
        if ((rv = fn(arg, k, klen, v, vlen)) != 0) {
            break;
        }
        bytes += klen + vlen;
        pairs++;
    }
    if (rv == 0 && !leveldb_iter_valid(it)) {
        *done = true;
    }
    leveldb_iter_get_error(it, &err);
    leveldb_iter_destroy(it);
    if (err != NULL) {
        rv = store_leveldb_error("reading a snapshot", err);
    }
    if (*done || rv != 0) {
        snap_release(sl);
    }
    return rv;
}
