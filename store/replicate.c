/*
 * replicate.c — the replication seam of the group commit (store.h,
 * "replicate.c"): a group's merged batch as one log entry, and a log entry
 * back into a batch on a follower.
 *
 * Entry format (version 1): the byte 0x01, then per write in batch order
 * the byte 'P' (put) or 'D' (delete), the key length (big-endian u32), the
 * key and, for a put, the value length (u32) and the value. The applied
 * index is not part of an entry: each store writes its own beside it.
 * Owns: the encoding; the applied-index key STORE_APPLIED_KEY.
 * Invariant: an entry decodes into exactly the writes of the batch it was
 * made from, in order; a store's applied index moves in the same LevelDB
 * write as the entry's writes (a crash loses a suffix of whole entries,
 * never part of one).
 * Never: writes a batch the appender did not accept (it does not return
 * then); decodes past an entry's end.
 */
#include "store/store_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/fault.h"
#include "proto/wire.h"
#include "base/log.h"

#define ENTRY_VERSION 1

typedef struct entry_buf {
    uint8_t *p;
    size_t len;
    size_t cap;
    bool nomem;
} entry_buf;

static void
entry_add(entry_buf *b, const void *p, size_t n)
{
    if (b->nomem) {
        return;
    }
    if (b->len + n > b->cap) {
        size_t cap = (b->len + n) * 2 + 256;
        uint8_t *q = realloc(b->p, cap);
        if (q == NULL) {
            b->nomem = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void
entry_add_bytes(entry_buf *b, const char *p, size_t n)
{
    uint8_t l[4] = {(uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8),
                    (uint8_t)n};
    entry_add(b, l, 4);
    entry_add(b, p, n);
}

static void
entry_put(void *arg, const char *k, size_t klen, const char *v, size_t vlen)
{
    entry_buf *b = arg;
    entry_add(b, "P", 1);
    entry_add_bytes(b, k, klen);
    entry_add_bytes(b, v, vlen);
}

static void
entry_del(void *arg, const char *k, size_t klen)
{
    entry_buf *b = arg;
    entry_add(b, "D", 1);
    entry_add_bytes(b, k, klen);
}

static void
applied_put(leveldb_writebatch_t *b, uint64_t index)
{
    uint8_t v[8];
    wire_put_be64(v, index);
    leveldb_writebatch_put(b, STORE_APPLIED_KEY, strlen(STORE_APPLIED_KEY),
                           (const char *)v, sizeof(v));
}

void
store_set_appender(store *s, store_append_fn fn, void *arg)
{
    s->append_fn = fn;
    s->append_arg = arg;
}

bool
store_replicated(const store *s)
{
    return s->append_fn != NULL;
}

void
store_set_log_durable(store *s)
{
    s->wlocal = s->wnosync;
    if (s->commit_seq < s->commit_floor) {
        /* Local writes are not synced here: a trailing store is expected
         * after a machine crash, and etcd's log holds what it lacks. */
        log_info("%s: local store trails by %llu commits; re-applying from "
                 "etcd's log",
                 s->dir, (unsigned long long)(s->commit_floor - s->commit_seq));
    }
}

/* Broken on purpose (FAULT_BROKEN_ACK_EARLY, the test build): the group
 * is answered now and its entry appended later, with the next groups',
 * REPL_LATE_MAX at a time (so a leader killed meanwhile loses what it
 * acknowledged). Executor thread only. */
#define REPL_LATE_MAX 32
static void
replicate_late(store *s, leveldb_writebatch_t *merged, entry_buf b)
{
    static entry_buf held[REPL_LATE_MAX];
    static size_t nheld;
    uint64_t index = 0;

    held[nheld++] = b;
    if (nheld < REPL_LATE_MAX) {
        return;
    }
    for (size_t i = 0; i < nheld; i++) {
        if (s->append_fn(s->append_arg, held[i].p, held[i].len, &index) != 0) {
            abort();
        }
        free(held[i].p);
    }
    nheld = 0;
    applied_put(merged, index);
}

void
replicate_group(store *s, leveldb_writebatch_t *merged)
{
    entry_buf b = {0};
    uint8_t ver = ENTRY_VERSION;
    uint64_t index = 0;

    entry_add(&b, &ver, 1);
    leveldb_writebatch_iterate(merged, &b, entry_put, entry_del);
    if (b.nomem) {
        log_error("out of memory encoding a log entry");
        abort();
    }
    if (FAULT_BROKEN(FAULT_BROKEN_ACK_EARLY)) {
        replicate_late(s, merged, b);
        return;
    }
    if (s->append_fn(s->append_arg, b.p, b.len, &index) != 0) {
        /* The appender returns only when the entry is in the log. */
        log_error("FATAL: log append refused");
        abort();
    }
    free(b.p);
    applied_put(merged, index);
}

void
replicate_gate(store *s)
{
    uint64_t index = 0;

    if (s->append_fn(s->append_arg, NULL, 0, &index) != 0) {
        log_error("FATAL: leadership check refused");
        abort();
    }
}

int
store_applied_index(store *s, uint64_t *index)
{
    char *err = NULL;
    size_t vlen = 0;
    char *v = leveldb_get(s->db, s->ropts, STORE_APPLIED_KEY,
                          strlen(STORE_APPLIED_KEY), &vlen, &err);

    *index = 0;
    if (err != NULL) {
        leveldb_free(err);
        return EIO;
    }
    if (v != NULL) {
        if (vlen == 8) {
            *index = wire_get_be64((const uint8_t *)v);
        }
        leveldb_free(v);
    }
    return 0;
}

/* Reads a u32 length and that many bytes at *pos; false past the end. */
static bool
entry_take(const uint8_t *p, size_t len, size_t *pos, const char **out,
           size_t *outlen)
{
    uint32_t n;

    if (len - *pos < 4) {
        return false;
    }
    n = ((uint32_t)p[*pos] << 24) | ((uint32_t)p[*pos + 1] << 16) |
        ((uint32_t)p[*pos + 2] << 8) | (uint32_t)p[*pos + 3];
    *pos += 4;
    if (len - *pos < n) {
        return false;
    }
    *out = (const char *)p + *pos;
    *outlen = n;
    *pos += n;
    return true;
}

int
store_apply_entry(store *s, const void *entry, size_t len, uint64_t index)
{
    const uint8_t *p = entry;
    leveldb_writebatch_t *b;
    size_t pos = 1;
    char *err = NULL;

    if (len < 1 || p[0] != ENTRY_VERSION) {
        return EPROTO;
    }
    b = leveldb_writebatch_create();
    while (pos < len) {
        const char *k, *v;
        size_t klen, vlen;
        uint8_t op = p[pos++];

        if ((op != 'P' && op != 'D') || !entry_take(p, len, &pos, &k, &klen) ||
            (op == 'P' && !entry_take(p, len, &pos, &v, &vlen))) {
            leveldb_writebatch_destroy(b);
            return EPROTO;
        }
        if (op == 'P') {
            leveldb_writebatch_put(b, k, klen, v, vlen);
        } else {
            leveldb_writebatch_delete(b, k, klen);
        }
    }
    applied_put(b, index);
    leveldb_write(s->db, s->wlocal, b, &err);
    leveldb_writebatch_destroy(b);
    if (err != NULL) {
        log_error("applying log entry %llu failed: %s",
                  (unsigned long long)index, err);
        leveldb_free(err);
        return EIO;
    }
    return 0;
}
