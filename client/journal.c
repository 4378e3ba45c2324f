/*
 * journal.c — libonce's journal (once/journal.h): one ChainRecord
 * (journal.proto) per chain, kept in one of two stores — a LevelDB under
 * the key "chain/<chain_id>" (once_journal_open), or a directory of one
 * file per chain (journal_open_files, journal_files.c: the input store's,
 * which many processes may open at once) — and the read-only views of it
 * (list, show) that oncectl uses without a client, on a journal of
 * either store (once_journal_open_existing tells them apart).
 *
 * Owns: the LevelDB handle and its options, or the directory's
 * descriptor; the set of chains open in this process (under claim_lock).
 * Invariant: every write is one leveldb_write (or one rename) of one
 * whole record (or its removal), so a crash leaves the record before or
 * after it, never a mix; every write that records a request or consumes a
 * reply is synced (only a reply's own write may be unsynced: chain.c says
 * why). Writes from many threads and chains share fsyncs: every LevelDB
 * write goes through journal_group.c, which merges the writes waiting at
 * once into one leveldb_write (and says why not LevelDB's own grouping,
 * with the profile of docs/performance.md, "Chains"). The file store pays
 * its own fsyncs per write (a file and its directory), as the input store
 * always did.
 * A reply's unsynced write (the only one) is not a LevelDB write: it is
 * appended to the reply log (journal_replies.c: one write(2), survives
 * the process) and kept in memory until the chain's next synced write
 * (its commit) replaces it, or a synced write carries it into LevelDB
 * when its file must go; reads (journal_get, journal_each) see a kept
 * reply over LevelDB's record. At
 * open, a reply of the log is written to LevelDB (synced) when it answers
 * the step LevelDB holds PENDING under the same rpc id, and the log's
 * files are removed: so a reply written before once_chain_send returned
 * survives the process's death exactly as an unsynced LevelDB write did,
 * and a reply the log holds for a step since committed, forgotten or
 * recorded again is never applied. Decided so after docs/performance.md,
 * "Chains": the reply's LevelDB write waited for the synced group ahead
 * of it.
 * Never: holds claim_lock across a LevelDB call or a file write; sends
 * anything.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <leveldb/c.h>

#include "client/journal_files.h"
#include "client/journal_impl.h"
#include "client/journal_group.h"
#include "client/journal_replies.h"
#include "client/status.h"

#define KEY_PREFIX "chain/"
#define KEY_MAX    (sizeof(KEY_PREFIX) + 256)

struct once_journal {
    leveldb_t *db; /* read-only pointers after open; NULL: the file store */
    int dirfd;     /* the file store's directory; -1 with a LevelDB */
    leveldb_options_t *opts;
    leveldb_readoptions_t *ropts;
    jgroup *jg;   /* every write to db goes through it; NULL: file store */
    jreplies *rl; /* db's unsynced writes (replies); NULL: file store */
    pthread_mutex_t claim_lock; /* protects open_ids, nopen */
    char **open_ids;            /* chains with a handle open */
    size_t nopen;
};

const char *
once_chain_state_name(int state)
{
    switch (state) {
    case ONCE_CHAIN_IDLE:
        return "IDLE";
    case ONCE_CHAIN_PENDING:
        return "PENDING";
    case ONCE_CHAIN_REPLIED:
        return "REPLIED";
    case ONCE_CHAIN_LEASE_ENDED:
        return "LEASE_ENDED";
    default:
        return "?";
    }
}

/* Fills st from a LevelDB error (freed here). */
static int
journal_error(once_status *st, int code, const char *what, char *err)
{
    int rv = status_set(st, code, ONCE_REASON_JOURNAL, "journal: %s: %s", what,
                        err != NULL ? err : "?");
    leveldb_free(err);
    return rv;
}

/* Fills st from an errno of the file store. */
static int
files_error(once_status *st, int code, const char *what, const char *name,
            int e)
{
    return status_set(st, code, ONCE_REASON_JOURNAL, "journal: %s %s: %s", what,
                      name, strerror(e));
}

/* chain_id's file name in the file store into name[JFILES_NAME_MAX];
 * ONCE_OK or INVALID_ARGUMENT. */
static int
files_name(const char *chain_id, char *name, once_status *st)
{
    if (jfiles_name(chain_id, name, JFILES_NAME_MAX) != 0) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "a chain id of a file journal is 1 to 249 bytes "
                          "of [A-Za-z0-9._/-], not starting with '.'");
    }
    return ONCE_OK;
}

/* The record in file name, checked to be chain_id's (NULL for any). */
static chain_rec *
files_unpack(const uint8_t *v, size_t vlen, const char *chain_id)
{
    chain_rec *r = once__client__chain_record__unpack(NULL, vlen, v);

    if (r != NULL && chain_id != NULL && strcmp(r->chain_id, chain_id) != 0) {
        once__client__chain_record__free_unpacked(r, NULL);
        return NULL;
    }
    return r;
}

/* journal_get of the file store. */
static int
files_get(once_journal *j, const char *chain_id, chain_rec **out,
          once_status *st)
{
    char name[JFILES_NAME_MAX];
    uint8_t *v;
    size_t vlen;
    int e;

    if ((e = files_name(chain_id, name, st)) != ONCE_OK) {
        return e;
    }
    if ((e = jfiles_read(j->dirfd, name, &v, &vlen)) == ENOENT) {
        return status_set(st, ONCE_NOT_FOUND, ONCE_REASON_NO_CHAIN,
                          "the journal keeps no chain %s", chain_id);
    }
    if (e != 0) {
        return files_error(st, ONCE_INTERNAL, "cannot read", name, e);
    }
    *out = files_unpack(v, vlen, chain_id);
    free(v);
    if (*out == NULL) {
        return status_set(st, ONCE_INTERNAL, ONCE_REASON_JOURNAL,
                          "journal: the record of chain %s does not decode",
                          chain_id);
    }
    return ONCE_OK;
}

/* "chain/<id>" into key[KEY_MAX]; its length, or 0 when id is too long. */
static size_t
journal_key(const char *chain_id, char *key)
{
    int n = snprintf(key, KEY_MAX, KEY_PREFIX "%s", chain_id);

    return n > 0 && (size_t)n < KEY_MAX ? (size_t)n : 0;
}

/* ---- the reply log (journal_replies.c) ----------------------------------- */

typedef struct replay_ctx {
    once_journal *j;
    leveldb_writebatch_t *batch;
    size_t applied;
} replay_ctx;

/* jreplies_replay's callback: a reply from the log goes into the batch
 * when it answers the step LevelDB holds PENDING (the same rpc id) —
 * the reply this process wrote last before it died. Any other (the
 * chain committed, forgotten, re-recorded since, or the reply already in
 * LevelDB) is stale and skipped. */
static void
replay_one(const char *key, size_t klen, const uint8_t *val, size_t vlen,
           void *arg)
{
    replay_ctx *x = arg;
    chain_rec *side = once__client__chain_record__unpack(NULL, vlen, val);
    chain_rec *cur = NULL;
    char *err = NULL, *v;
    size_t curlen = 0;

    if (side == NULL || side->state != ONCE_CHAIN_REPLIED) {
        goto out;
    }
    v = leveldb_get(x->j->db, x->j->ropts, key, klen, &curlen, &err);
    if (v != NULL) {
        cur = once__client__chain_record__unpack(NULL, curlen, (uint8_t *)v);
    }
    leveldb_free(v);
    leveldb_free(err);
    if (cur != NULL && cur->state == ONCE_CHAIN_PENDING &&
        cur->client_id == side->client_id && cur->seq == side->seq &&
        strcmp(cur->chain_id, side->chain_id) == 0) {
        leveldb_writebatch_put(x->batch, key, klen, (const char *)val, vlen);
        x->applied++;
    }
out:
    once__client__chain_record__free_unpacked(cur, NULL);
    once__client__chain_record__free_unpacked(side, NULL);
}

/* At open: the replies of dir's reply log that LevelDB lacks written to
 * it in one synced write, then the log's files removed. */
static int
replies_recover(once_journal *j, const char *dir, once_status *st)
{
    replay_ctx x = {j, leveldb_writebatch_create(), 0};
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    char *err = NULL;
    int e;

    leveldb_writeoptions_set_sync(wo, 1);
    if ((e = jreplies_replay(dir, replay_one, &x)) == 0 && x.applied > 0) {
        leveldb_write(j->db, wo, x.batch, &err);
    }
    leveldb_writeoptions_destroy(wo);
    leveldb_writebatch_destroy(x.batch);
    if (err != NULL) {
        return journal_error(st, ONCE_FAILED_PRECONDITION, "reply log", err);
    }
    if (e != 0 || (e = jreplies_remove_all(dir)) != 0) {
        return status_set(st, ONCE_FAILED_PRECONDITION, ONCE_REASON_JOURNAL,
                          "journal: the reply log of %s: %s", dir, strerror(e));
    }
    return ONCE_OK;
}

/* At close: the replies kept in memory written to LevelDB (synced), then
 * the log's files removed; on a failure both stay for the next open. */
static void
replies_settle(once_journal *j)
{
    leveldb_writebatch_t *b;
    leveldb_writeoptions_t *wo;
    jreplies_ticket t;
    char *err = NULL;

    if (j->rl == NULL) {
        return;
    }
    b = leveldb_writebatch_create();
    wo = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(wo, 1);
    jreplies_take(j->rl, b, true, &t);
    if (t.n > 0) {
        leveldb_write(j->db, wo, b, &err);
    }
    jreplies_done(j->rl, &t, err == NULL);
    leveldb_free(err);
    leveldb_writeoptions_destroy(wo);
    leveldb_writebatch_destroy(b);
}

/* ---- open / close -------------------------------------------------------- */

/* Opens the LevelDB journal in dir (created when missing if create). */
static int
db_open(const char *dir, bool create, once_journal **jp, once_status *st)
{
    once_journal *j;
    char *err = NULL;
    int rv;

    if ((j = calloc(1, sizeof(*j))) == NULL) {
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "journal");
    }
    j->dirfd = -1;
    j->opts = leveldb_options_create();
    leveldb_options_set_create_if_missing(j->opts, create);
    j->ropts = leveldb_readoptions_create();
    pthread_mutex_init(&j->claim_lock, NULL);
    if ((j->db = leveldb_open(j->opts, dir, &err)) == NULL) {
        once_journal_close(j);
        return journal_error(st, ONCE_FAILED_PRECONDITION, dir, err);
    }
    if ((rv = replies_recover(j, dir, st)) != ONCE_OK) {
        once_journal_close(j);
        return rv;
    }
    if (jreplies_open(dir, &j->rl) != 0 ||
        jgroup_open(j->db, j->rl, &j->jg) != 0) {
        once_journal_close(j);
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "journal");
    }
    *jp = j;
    return ONCE_OK;
}

/* Opens the journal of files in dir; a writer creates dir when missing
 * and sweeps the temp files crashed writers left (jfiles_sweep). */
static int
files_open(const char *dir, bool writer, once_journal **jp, once_status *st)
{
    once_journal *j;
    size_t swept;
    int e;

    if (writer && mkdir(dir, 0700) != 0 && errno != EEXIST) {
        return files_error(st, ONCE_FAILED_PRECONDITION, "cannot create", dir,
                           errno);
    }
    if ((j = calloc(1, sizeof(*j))) == NULL) {
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "journal");
    }
    pthread_mutex_init(&j->claim_lock, NULL);
    if ((j->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        e = errno;
        once_journal_close(j);
        return files_error(st, ONCE_FAILED_PRECONDITION, "cannot open", dir, e);
    }
    /* Housekeeping only: a temp file that stays is never read as a
     * record, so a failed sweep does not fail the open. */
    if (writer) {
        (void)jfiles_sweep(j->dirfd, &swept);
    }
    *jp = j;
    return ONCE_OK;
}

/* Whether dir (or jp) is no argument an opener takes; fills st then. */
static bool
open_args_bad(const char *dir, once_journal **jp, const char *fn,
              once_status *st)
{
    status_clear(st);
    if (dir == NULL || dir[0] == '\0' || jp == NULL) {
        status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                   "%s needs a directory", fn);
        return true;
    }
    *jp = NULL;
    return false;
}

int
once_journal_open(const char *dir, once_journal **jp, once_status *st)
{
    if (open_args_bad(dir, jp, "once_journal_open", st)) {
        return st->code;
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        return status_set(st, ONCE_FAILED_PRECONDITION, ONCE_REASON_JOURNAL,
                          "journal: cannot create %s: %s", dir,
                          strerror(errno));
    }
    return db_open(dir, true, jp, st);
}

int
journal_open_files(const char *dir, once_journal **jp, once_status *st)
{
    *jp = NULL;
    return files_open(dir, true, jp, st);
}

int
once_journal_open_existing(const char *dir, once_journal **jp, once_status *st)
{
    static const char *const leveldb_files[] = {"CURRENT", "LOCK"};
    char path[4096];
    struct stat sb;

    if (open_args_bad(dir, jp, "once_journal_open_existing", st)) {
        return st->code;
    }
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        return status_set(st, ONCE_FAILED_PRECONDITION, ONCE_REASON_JOURNAL,
                          "journal: %s is no directory", dir);
    }
    /* LevelDB's own files tell its directory: CURRENT names the manifest
     * and LOCK is there from the first open on (a LOCK without CURRENT
     * is a damaged LevelDB, which leveldb_open then reports). */
    for (size_t i = 0; i < sizeof(leveldb_files) / sizeof(*leveldb_files);
         i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, leveldb_files[i]);
        if (access(path, F_OK) == 0) {
            return db_open(dir, false, jp, st);
        }
    }
    return files_open(dir, false, jp, st);
}

void
once_journal_close(once_journal *j)
{
    if (j == NULL) {
        return;
    }
    jgroup_close(j->jg);
    replies_settle(j);
    jreplies_close(j->rl);
    if (j->db != NULL) {
        leveldb_close(j->db);
    }
    if (j->dirfd >= 0) {
        close(j->dirfd);
    }
    leveldb_readoptions_destroy(j->ropts);
    leveldb_options_destroy(j->opts);
    pthread_mutex_destroy(&j->claim_lock);
    free(j->open_ids);
    free(j);
}

/* ---- records ------------------------------------------------------------- */

/* key's newest reply kept by the reply log (newer than LevelDB's record
 * of it), malloc'd; NULL when there is none (or no memory: LevelDB's
 * record is then read, which the reply log never makes wrong, only old). */
static char *
replies_get(once_journal *j, const char *key, size_t klen, size_t *vlen)
{
    uint8_t *v;

    return j->rl != NULL && jreplies_get(j->rl, key, klen, &v, vlen) == 0
               ? (char *)v
               : NULL;
}

int
journal_get(once_journal *j, const char *chain_id, chain_rec **out,
            once_status *st)
{
    char key[KEY_MAX], *err = NULL, *v;
    size_t klen = journal_key(chain_id, key), vlen = 0;

    *out = NULL;
    if (j->db == NULL) {
        return files_get(j, chain_id, out, st);
    }
    if (klen == 0) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "a chain id is 1 to 256 bytes");
    }
    if ((v = replies_get(j, key, klen, &vlen)) != NULL) {
        *out = once__client__chain_record__unpack(NULL, vlen, (uint8_t *)v);
        free(v);
    } else {
        v = leveldb_get(j->db, j->ropts, key, klen, &vlen, &err);
        if (err != NULL) {
            return journal_error(st, ONCE_INTERNAL, "read", err);
        }
        if (v == NULL) {
            return status_set(st, ONCE_NOT_FOUND, ONCE_REASON_NO_CHAIN,
                              "the journal keeps no chain %s", chain_id);
        }
        *out = once__client__chain_record__unpack(NULL, vlen, (uint8_t *)v);
        leveldb_free(v);
    }
    if (*out == NULL) {
        return status_set(st, ONCE_INTERNAL, ONCE_REASON_JOURNAL,
                          "journal: the record of chain %s does not decode",
                          chain_id);
    }
    return ONCE_OK;
}

/* The write of journal_put_packed in the file store. */
static int
files_put(once_journal *j, const char *chain_id, const uint8_t *buf, size_t len,
          bool sync, once_status *st)
{
    char name[JFILES_NAME_MAX];
    int e;

    if ((e = files_name(chain_id, name, st)) == ONCE_OK &&
        (e = jfiles_write(j->dirfd, name, buf, len, sync)) != 0) {
        e = files_error(st, ONCE_INTERNAL, "cannot write", name, e);
    }
    return e;
}

/* chain_id's record in the LevelDB set to (val, vlen), or removed when
 * val is NULL, through the merged writes (journal_group.c). */
static int
db_write(once_journal *j, const char *chain_id, const uint8_t *val, size_t vlen,
         bool sync, once_status *st)
{
    char key[KEY_MAX], msg[256];
    size_t klen = journal_key(chain_id, key);

    if (klen == 0) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "a chain id is 1 to 256 bytes");
    }
    if (!sync && val != NULL) { /* a reply: the reply log's */
        int e = jreplies_append(j->rl, key, klen, val, vlen);
        return e == 0 ? ONCE_OK
                      : status_set(st, ONCE_INTERNAL, ONCE_REASON_JOURNAL,
                                   "journal: reply log: %s", strerror(e));
    }
    if (jgroup_write(j->jg, key, klen, (const char *)val, vlen, true, msg,
                     sizeof(msg)) != 0) {
        return status_set(st, ONCE_INTERNAL, ONCE_REASON_JOURNAL,
                          "journal: %s: %s", val != NULL ? "write" : "delete",
                          msg);
    }
    return ONCE_OK;
}

int
journal_put_packed(once_journal *j, const char *chain_id, const uint8_t *buf,
                   size_t len, bool sync, once_status *st)
{
    return j->db == NULL ? files_put(j, chain_id, buf, len, sync, st)
                         : db_write(j, chain_id, buf, len, sync, st);
}

int
journal_put(once_journal *j, const chain_rec *r, bool sync, once_status *st)
{
    size_t len = once__client__chain_record__get_packed_size(r);
    uint8_t *buf;
    int rv;

    if ((buf = malloc(len + 1)) == NULL) {
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "journal record");
    }
    once__client__chain_record__pack(r, buf);
    rv = journal_put_packed(j, r->chain_id, buf, len, sync, st);
    free(buf);
    return rv;
}

int
journal_del(once_journal *j, const char *chain_id, once_status *st)
{
    char name[JFILES_NAME_MAX];
    int e;

    if (j->db != NULL) {
        return db_write(j, chain_id, NULL, 0, true, st);
    }
    if ((e = files_name(chain_id, name, st)) == ONCE_OK &&
        (e = jfiles_remove(j->dirfd, name)) != 0) {
        e = files_error(st, ONCE_INTERNAL, "cannot remove", name, e);
    }
    return e;
}

/* ---- claims -------------------------------------------------------------- */

bool
journal_claim(once_journal *j, const char *chain_id)
{
    char *dup, **grown;
    bool ok = false;

    pthread_mutex_lock(&j->claim_lock);
    for (size_t i = 0; i < j->nopen; i++) {
        if (strcmp(j->open_ids[i], chain_id) == 0) {
            goto out;
        }
    }
    grown = realloc(j->open_ids, (j->nopen + 1) * sizeof(*grown));
    if (grown != NULL) {
        j->open_ids = grown;
        if ((dup = strdup(chain_id)) != NULL) {
            j->open_ids[j->nopen++] = dup;
            ok = true;
        }
    }
out:
    pthread_mutex_unlock(&j->claim_lock);
    return ok;
}

void
journal_release(once_journal *j, const char *chain_id)
{
    pthread_mutex_lock(&j->claim_lock);
    for (size_t i = 0; i < j->nopen; i++) {
        if (strcmp(j->open_ids[i], chain_id) == 0) {
            free(j->open_ids[i]);
            j->open_ids[i] = j->open_ids[--j->nopen];
            break;
        }
    }
    pthread_mutex_unlock(&j->claim_lock);
}

/* ---- views --------------------------------------------------------------- */

void
journal_info_fill(once_chain_info *o, const chain_rec *r)
{
    memset(o, 0, sizeof(*o));
    snprintf(o->chain_id, sizeof(o->chain_id), "%s", r->chain_id);
    snprintf(o->principal, sizeof(o->principal), "%s", r->principal);
    o->state = (int)r->state;
    o->steps = r->steps;
    snprintf(o->method, sizeof(o->method), "%s", r->method);
    o->id.client_id = r->client_id;
    o->id.seq = r->seq;
    o->lease_ttl_ms = r->lease_ttl_ms;
    o->sends = r->sends;
    o->code = r->code;
    snprintf(o->reason, sizeof(o->reason), "%s", r->reason);
    snprintf(o->message, sizeof(o->message), "%s", r->message);
    o->context_len = r->context.len;
    o->request_len = r->request.len;
    o->reply_len = r->reply.len;
    o->created_unix_ms = r->created_unix_ms;
    o->updated_unix_ms = r->updated_unix_ms;
}

int
journal_copy_out(const void *p, size_t len, void **out, size_t *out_len)
{
    if (out_len != NULL) {
        *out_len = 0;
    }
    if (out == NULL) {
        return 0;
    }
    *out = NULL;
    if (len == 0) {
        return 0;
    }
    if ((*out = malloc(len)) == NULL) {
        return ENOMEM;
    }
    memcpy(*out, p, len);
    if (out_len != NULL) {
        *out_len = len;
    }
    return 0;
}

/* Calls fn for the record at (v, vlen); undecodable values are skipped. */
static int
each_value(const void *v, size_t vlen, journal_each_fn fn, void *arg)
{
    chain_rec *r = files_unpack(v, vlen, NULL);
    int e;

    if (r == NULL) {
        return 0;
    }
    e = fn(r, arg);
    once__client__chain_record__free_unpacked(r, NULL);
    return e;
}

typedef struct files_walk {
    once_journal *j;
    journal_each_fn fn;
    void *arg;
} files_walk;

/* jfiles_each's callback: one record file. A file that vanished or
 * cannot be read between the listing and the read is skipped. */
static int
files_each_one(const char *name, void *arg)
{
    files_walk *w = arg;
    uint8_t *v;
    size_t vlen;
    int e;

    if (jfiles_read(w->j->dirfd, name, &v, &vlen) != 0) {
        return 0;
    }
    e = each_value(v, vlen, w->fn, w->arg);
    free(v);
    return e;
}

int
journal_each(once_journal *j, journal_each_fn fn, void *arg, once_status *st)
{
    size_t plen = strlen(KEY_PREFIX);
    leveldb_iterator_t *it;
    int e = 0;

    if (j->db == NULL) {
        files_walk w = {j, fn, arg};
        e = jfiles_each(j->dirfd, JFILES_SUFFIX, files_each_one, &w);
        return e == 0 ? ONCE_OK
                      : files_error(st,
                                    e == ENOMEM ? ONCE_RESOURCE_EXHAUSTED
                                                : ONCE_INTERNAL,
                                    "cannot list", "the journal", e);
    }
    it = leveldb_create_iterator(j->db, j->ropts);
    for (leveldb_iter_seek(it, KEY_PREFIX, plen);
         e == 0 && leveldb_iter_valid(it); leveldb_iter_next(it)) {
        size_t klen, vlen;
        const char *k = leveldb_iter_key(it, &klen);
        const char *v = leveldb_iter_value(it, &vlen);

        if (klen < plen || memcmp(k, KEY_PREFIX, plen) != 0) {
            break;
        }
        size_t kept_len;
        char *kept = replies_get(j, k, klen, &kept_len);
        e = kept != NULL ? each_value(kept, kept_len, fn, arg)
                         : each_value(v, vlen, fn, arg);
        free(kept);
    }
    leveldb_iter_destroy(it);
    return e == 0 ? ONCE_OK
                  : status_set(st, ONCE_RESOURCE_EXHAUSTED,
                               ONCE_REASON_NO_MEMORY, "journal list");
}

int
journal_rows_grow(void **rows, size_t *cap, size_t n, size_t size)
{
    size_t want = *cap != 0 ? *cap * 2 : 16;
    void *g;

    if (n < *cap) {
        return 0;
    }
    if ((g = realloc(*rows, want * size)) == NULL) {
        return ENOMEM;
    }
    *rows = g;
    *cap = want;
    return 0;
}

typedef struct list_rows {
    once_chain_info *rows;
    size_t n, cap;
} list_rows;

/* journal_each's callback of once_journal_list; ENOMEM. */
static int
list_add(const chain_rec *r, void *arg)
{
    list_rows *l = arg;

    if (journal_rows_grow((void **)&l->rows, &l->cap, l->n, sizeof(*l->rows)) !=
        0) {
        return ENOMEM;
    }
    journal_info_fill(&l->rows[l->n++], r);
    return 0;
}

static int
info_cmp_id(const void *a, const void *b)
{
    return strcmp(((const once_chain_info *)a)->chain_id,
                  ((const once_chain_info *)b)->chain_id);
}

int
once_journal_list(once_journal *j, once_chain_info **rows, size_t *n,
                  once_status *st)
{
    list_rows l = {NULL, 0, 0};
    int rv;

    status_clear(st);
    if (j == NULL || rows == NULL || n == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "once_journal_list needs a journal and outputs");
    }
    *rows = NULL;
    *n = 0;
    if ((rv = journal_each(j, list_add, &l, st)) != ONCE_OK) {
        free(l.rows);
        return rv;
    }
    if (j->db == NULL && l.n > 1) { /* LevelDB lists in key order */
        qsort(l.rows, l.n, sizeof(*l.rows), info_cmp_id);
    }
    *rows = l.rows;
    *n = l.n;
    return ONCE_OK;
}

int
once_journal_show(once_journal *j, const char *chain_id, once_chain_info *info,
                  void **context, size_t *context_len, void **payload,
                  size_t *payload_len, once_status *st)
{
    chain_rec *r;
    int rv;

    status_clear(st);
    if (j == NULL || chain_id == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "once_journal_show needs a journal and a chain id");
    }
    if ((rv = journal_get(j, chain_id, &r, st)) != ONCE_OK) {
        return rv;
    }
    if (info != NULL) {
        journal_info_fill(info, r);
    }
    const ProtobufCBinaryData *p = r->state == ONCE_CHAIN_REPLIED ? &r->reply
                                   : r->state == ONCE_CHAIN_IDLE  ? NULL
                                                                  : &r->request;
    if (journal_copy_out(r->context.data, r->context.len, context,
                         context_len) != 0 ||
        journal_copy_out(p != NULL ? p->data : NULL, p != NULL ? p->len : 0,
                         payload, payload_len) != 0) {
        if (context != NULL) {
            free(*context);
            *context = NULL;
        }
        rv = status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                        "chain state");
    }
    once__client__chain_record__free_unpacked(r, NULL);
    return rv;
}
