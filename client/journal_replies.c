/*
 * journal_replies.c — the LevelDB journal's reply log (journal_replies.h).
 *
 * Why: a chain step's reply need not be synced (docs/chains.md: the
 * server keeps it until the commit that consumes it is synced), only
 * survive the process. As a LevelDB write of its own it waited behind the
 * synced group in progress and cost a second trip through the journal's
 * writer per step (docs/performance.md, "Chains"). Here it is one
 * write(2) to a file of our own, kept in memory beside it; the next
 * synced write of the same key, which comes anyway (the step's commit),
 * makes it stale, and it is dropped once that write is in LevelDB. A
 * reply is written to LevelDB only when its file must go: when the file
 * passes JR_FILE_SIZE, the next synced write carries every record kept
 * and the full files go after it (measured against carrying them on
 * every synced write: docs/performance.md, "Chains").
 *
 * A file is a sequence of records, each one write(2) with O_APPEND:
 *   klen (4 bytes, little-endian), vlen (4), a BLAKE2b-128 of the
 *   lengths, key and value (16), the key, the value.
 * Only the process that opened the journal appends, one record at a time
 * (under lock), so only a file's last record can be cut short by a
 * crash; a failed append starts a new file, so a record cut short is
 * always its file's last. A file's records are read up to the first
 * that is not whole or whose hash is wrong.
 *
 * Owns: the current file and its number, the oldest number that may
 * still exist, and the records kept: the newest of each key that no
 * synced LevelDB write holds or has replaced yet (under lock).
 * Invariant: every record appended is, until it is forgotten, both in
 * memory and in a file numbered >= oldest; it is forgotten only after a
 * synced LevelDB write that carried it or wrote its key after it (or
 * when a newer record of its key replaces it); a file goes only once
 * every record appended to it was forgotten so, its last ones by the
 * write that carried them.
 * Never: syncs a file; holds lock across anything but the append's own
 * write(2); appends after a record it could not write whole, in the same
 * file.
 */
#include "client/journal_replies.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <sodium.h>

#define JR_PREFIX  "replies."
#define JR_HASH    16
#define JR_HDR     (8 + JR_HASH)
#define JR_KEY_MAX 4096
#ifndef JR_FILE_SIZE /* tests/test_journal_group.c builds it smaller */
#define JR_FILE_SIZE (4u << 20) /* a new file after 4 MiB */
#endif

typedef struct jr_rec {
    size_t klen, vlen;
    char *key;    /* key then value, one allocation */
    uint64_t h;   /* jr_key_hash of the key */
    uint64_t gen; /* jreplies.gen when it was appended */
} jr_rec;

struct jreplies {
    char *dir;
    pthread_mutex_t lock; /* protects every field below */
    int fd;               /* the current file; -1 until its first append */
    uint64_t cur;         /* the current file's number */
    uint64_t oldest;      /* the lowest number of a file that may exist */
    size_t size;          /* bytes in the current file */
    jr_rec *recs;         /* kept, one per key, in no order */
    size_t n, cap;
    uint64_t gen; /* appends so far */
};

/* ---- the record's frame -------------------------------------------------- */

static void
put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t
get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

/* The hash of a record: its two lengths (hdr[0..8)), key and value. */
static void
jr_hash(const uint8_t *hdr, const void *key, size_t klen, const void *val,
        size_t vlen, uint8_t out[JR_HASH])
{
    crypto_generichash_state s;

    crypto_generichash_init(&s, NULL, 0, JR_HASH);
    crypto_generichash_update(&s, hdr, 8);
    crypto_generichash_update(&s, key, klen);
    crypto_generichash_update(&s, val, vlen);
    crypto_generichash_final(&s, out, JR_HASH);
}

#define JR_PATH_MAX 4200

/* The path of dir's file number k into path[JR_PATH_MAX]. */
static void
jr_path(const char *dir, uint64_t k, char *path)
{
    snprintf(path, JR_PATH_MAX, "%s/" JR_PREFIX "%" PRIu64, dir, k);
}

/* FNV-1a of a key: kept records are found by it first. */
static uint64_t
jr_key_hash(const char *key, size_t klen)
{
    uint64_t h = 14695981039346656037ull;

    for (size_t i = 0; i < klen; i++) {
        h = (h ^ (uint8_t)key[i]) * 1099511628211ull;
    }
    return h;
}

/* The index of key's kept record, or r->n (caller holds lock). */
static size_t
jr_find(const jreplies *r, uint64_t h, const char *key, size_t klen)
{
    size_t i;

    for (i = 0; i < r->n; i++) {
        const jr_rec *c = &r->recs[i];

        if (c->h == h && c->klen == klen && memcmp(c->key, key, klen) == 0) {
            break;
        }
    }
    return i;
}

/* Forgets kept record i (caller holds lock). */
static void
jr_forget(jreplies *r, size_t i)
{
    free(r->recs[i].key);
    r->recs[i] = r->recs[--r->n];
}

/* ---- open / close -------------------------------------------------------- */

int
jreplies_open(const char *dir, jreplies **rp)
{
    jreplies *r;

    *rp = NULL;
    if ((r = calloc(1, sizeof(*r))) == NULL || (r->dir = strdup(dir)) == NULL) {
        free(r);
        return ENOMEM;
    }
    pthread_mutex_init(&r->lock, NULL);
    r->fd = -1;
    r->cur = r->oldest = 1;
    *rp = r;
    return 0;
}

void
jreplies_close(jreplies *r)
{
    if (r == NULL) {
        return;
    }
    if (r->fd >= 0) {
        close(r->fd);
    }
    for (size_t i = 0; i < r->n; i++) {
        free(r->recs[i].key);
    }
    free(r->recs);
    pthread_mutex_destroy(&r->lock);
    free(r->dir);
    free(r);
}

/* ---- append, read back --------------------------------------------------- */

/* The current file opened when it is not (caller holds lock). */
static int
jr_file(jreplies *r)
{
    char path[JR_PATH_MAX];

    if (r->fd >= 0) {
        return 0;
    }
    jr_path(r->dir, r->cur, path);
    r->fd =
        open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    r->size = 0;
    return r->fd >= 0 ? 0 : errno;
}

/* Writes the record's three parts in one writev (caller holds lock); a
 * failed or short write closes the file, so the next append starts the
 * next one. 0 or an errno. */
static int
jr_write(jreplies *r, const struct iovec *iov, size_t total)
{
    ssize_t w;
    int e;

    if ((e = jr_file(r)) != 0) {
        return e;
    }
    do {
        w = writev(r->fd, iov, 3);
    } while (w < 0 && errno == EINTR);
    if (w == (ssize_t)total) {
        r->size += total;
        return 0;
    }
    e = w < 0 ? errno : EIO;
    close(r->fd);
    r->fd = -1;
    r->cur++;
    return e;
}

int
jreplies_append(jreplies *r, const char *key, size_t klen, const uint8_t *val,
                size_t vlen)
{
    uint8_t hdr[JR_HDR];
    jr_rec rec = {klen, vlen, NULL, jr_key_hash(key, klen), 0};
    size_t i;
    int e;

    if (klen > JR_KEY_MAX || vlen > UINT32_MAX) {
        return EINVAL;
    }
    if ((rec.key = malloc(klen + vlen + 1)) == NULL) {
        return ENOMEM;
    }
    memcpy(rec.key, key, klen);
    memcpy(rec.key + klen, val, vlen);
    put_u32(hdr, (uint32_t)klen);
    put_u32(hdr + 4, (uint32_t)vlen);
    jr_hash(hdr, key, klen, val, vlen, hdr + 8);
    struct iovec iov[3] = {
        {hdr, JR_HDR}, {rec.key, klen}, {rec.key + klen, vlen}};

    pthread_mutex_lock(&r->lock);
    if (r->n == r->cap) {
        size_t want = r->cap != 0 ? r->cap * 2 : 64;
        jr_rec *g = realloc(r->recs, want * sizeof(*g));
        if (g == NULL) {
            e = ENOMEM;
            goto out;
        }
        r->recs = g;
        r->cap = want;
    }
    if ((e = jr_write(r, iov, JR_HDR + klen + vlen)) == 0) {
        rec.gen = ++r->gen;
        if ((i = jr_find(r, rec.h, key, klen)) < r->n) {
            free(r->recs[i].key); /* an older reply of the same key */
        } else {
            r->n++;
        }
        r->recs[i] = rec;
        rec.key = NULL;
    }
out:
    pthread_mutex_unlock(&r->lock);
    free(rec.key);
    return e;
}

int
jreplies_get(jreplies *r, const char *key, size_t klen, uint8_t **val,
             size_t *vlen)
{
    uint64_t h = jr_key_hash(key, klen);
    size_t i;
    int e = ENOENT;

    *val = NULL;
    *vlen = 0;
    pthread_mutex_lock(&r->lock);
    if ((i = jr_find(r, h, key, klen)) < r->n) {
        const jr_rec *c = &r->recs[i];

        e = (*val = malloc(c->vlen + 1)) != NULL ? 0 : ENOMEM;
        if (e == 0) {
            memcpy(*val, c->key + klen, c->vlen);
            *vlen = c->vlen;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return e;
}

/* ---- carried into LevelDB ------------------------------------------------ */

void
jreplies_take(jreplies *r, leveldb_writebatch_t *b, bool all,
              jreplies_ticket *t)
{
    pthread_mutex_lock(&r->lock);
    t->gen = r->gen;
    t->upto = 0;
    t->carry = all || (r->fd >= 0 && r->size >= JR_FILE_SIZE);
    t->n = t->carry ? r->n : 0;
    for (size_t i = 0; i < t->n; i++) {
        const jr_rec *c = &r->recs[i];

        leveldb_writebatch_put(b, c->key, c->klen, c->key + c->klen, c->vlen);
    }
    if (t->carry && r->fd >= 0) {
        close(r->fd);
        r->fd = -1;
        t->upto = r->cur++;
    } else if (t->carry && r->cur > r->oldest) {
        t->upto = r->cur - 1; /* the current one not started yet */
    }
    pthread_mutex_unlock(&r->lock);
}

void
jreplies_drop(jreplies *r, const jreplies_ticket *t, const char *key,
              size_t klen)
{
    uint64_t h = jr_key_hash(key, klen);
    size_t i;

    pthread_mutex_lock(&r->lock);
    if ((i = jr_find(r, h, key, klen)) < r->n && r->recs[i].gen <= t->gen) {
        jr_forget(r, i);
    }
    pthread_mutex_unlock(&r->lock);
}

void
jreplies_done(jreplies *r, const jreplies_ticket *t, bool synced)
{
    uint64_t from;
    char path[JR_PATH_MAX];

    if (!synced || !t->carry) {
        return;
    }
    pthread_mutex_lock(&r->lock);
    for (size_t i = r->n; i-- > 0;) {
        if (r->recs[i].gen <= t->gen) {
            jr_forget(r, i); /* carried */
        }
    }
    from = r->oldest;
    if (t->upto >= r->oldest) {
        r->oldest = t->upto + 1;
    }
    pthread_mutex_unlock(&r->lock);
    for (uint64_t k = from; k <= t->upto; k++) {
        jr_path(r->dir, k, path);
        (void)unlink(path); /* a file never started is not there */
    }
}

/* ---- after a crash ------------------------------------------------------- */

/* The number of a reply file's name, or 0 when it is not one. */
static uint64_t
jr_number(const char *name)
{
    const char *p = name + strlen(JR_PREFIX);
    char *end;
    unsigned long long k;

    if (strncmp(name, JR_PREFIX, strlen(JR_PREFIX)) != 0 || *p < '1' ||
        *p > '9') {
        return 0;
    }
    errno = 0;
    k = strtoull(p, &end, 10);
    return *end == '\0' && errno == 0 ? (uint64_t)k : 0;
}

static int
u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* The numbers of dir's reply files, ascending, in *out (free()). */
static int
jr_list(const char *dir, uint64_t **out, size_t *n)
{
    size_t cap = 0;
    struct dirent *d;
    DIR *dp;
    int e = 0;

    *out = NULL;
    *n = 0;
    if ((dp = opendir(dir)) == NULL) {
        return errno;
    }
    while (e == 0 && (d = readdir(dp)) != NULL) {
        uint64_t k = jr_number(d->d_name), *g;

        if (k == 0) {
            continue;
        }
        if (*n == cap) {
            cap = cap != 0 ? cap * 2 : 8;
            if ((g = realloc(*out, cap * sizeof(*g))) == NULL) {
                e = ENOMEM;
                break;
            }
            *out = g;
        }
        (*out)[(*n)++] = k;
    }
    closedir(dp);
    if (*n > 1) {
        qsort(*out, *n, sizeof(**out), u64_cmp);
    }
    return e;
}

/* The whole of path in *buf (free()), *len bytes. 0 or an errno. */
static int
jr_slurp(const char *path, uint8_t **buf, size_t *len)
{
    struct stat sb;
    size_t got = 0;
    int fd, e = 0;

    *buf = NULL;
    *len = 0;
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        return errno;
    }
    if (fstat(fd, &sb) != 0) {
        e = errno;
    } else if ((*buf = malloc((size_t)sb.st_size + 1)) == NULL) {
        e = ENOMEM;
    }
    while (e == 0 && got < (size_t)sb.st_size) {
        ssize_t r = read(fd, *buf + got, (size_t)sb.st_size - got);

        if (r < 0 && errno != EINTR) {
            e = errno;
        } else if (r == 0) {
            break; /* shrank meanwhile: what was read */
        } else if (r > 0) {
            got += (size_t)r;
        }
    }
    close(fd);
    *len = got;
    return e;
}

/* Calls fn for the whole records of one file's content; says on stderr
 * where a tail that is not one was ignored. */
static void
jr_parse(const char *path, const uint8_t *b, size_t len, jreplies_fn fn,
         void *arg)
{
    size_t off = 0;

    while (off < len) {
        uint8_t h[JR_HASH];
        size_t klen, vlen, left = len - off;

        if (left < JR_HDR) {
            break;
        }
        klen = get_u32(b + off);
        vlen = get_u32(b + off + 4);
        if (klen > JR_KEY_MAX || klen + vlen > left - JR_HDR) {
            break;
        }
        jr_hash(b + off, b + off + JR_HDR, klen, b + off + JR_HDR + klen, vlen,
                h);
        if (sodium_memcmp(h, b + off + 8, JR_HASH) != 0) {
            break;
        }
        fn((const char *)b + off + JR_HDR, klen, b + off + JR_HDR + klen, vlen,
           arg);
        off += JR_HDR + klen + vlen;
    }
    if (off < len) {
        fprintf(stderr,
                "libonce: journal reply log %s: the last %zu bytes (from "
                "offset %zu) are not a whole record (a write cut short by "
                "a crash); ignored\n",
                path, len - off, off);
    }
}

int
jreplies_replay(const char *dir, jreplies_fn fn, void *arg)
{
    uint64_t *ks;
    size_t n;
    int e;

    if ((e = jr_list(dir, &ks, &n)) != 0) {
        free(ks);
        return e;
    }
    for (size_t i = 0; e == 0 && i < n; i++) {
        char path[JR_PATH_MAX];
        uint8_t *b;
        size_t len;

        jr_path(dir, ks[i], path);
        if ((e = jr_slurp(path, &b, &len)) == 0) {
            jr_parse(path, b, len, fn, arg);
        }
        free(b);
    }
    free(ks);
    return e;
}

int
jreplies_remove_all(const char *dir)
{
    uint64_t *ks;
    size_t n;
    int e = jr_list(dir, &ks, &n);

    for (size_t i = 0; e == 0 && i < n; i++) {
        char path[JR_PATH_MAX];

        jr_path(dir, ks[i], path);
        if (unlink(path) != 0 && errno != ENOENT) {
            e = errno;
        }
    }
    free(ks);
    return e;
}
