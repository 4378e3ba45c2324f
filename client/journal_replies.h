/*
 * journal_replies.h — the LevelDB journal's reply log (journal_replies.c):
 * a chain step's reply written in one write(2) to an append-only file of
 * the journal's directory (replies.<n>, not synced) and kept in memory
 * until a synced LevelDB write (journal_group.c) of its key replaces it,
 * or carries it when its file must go, instead of a LevelDB write of its
 * own.
 *
 * Owns: declarations only.
 * Invariant: a record appended survives the process (it is in the file
 * when jreplies_append returns) until a synced LevelDB write holds it or
 * a later record of its key; a file is removed only after that holds for
 * every record in it.
 * Never: decides what a record means (journal.c's replay does).
 */
#ifndef CLIENT_JOURNAL_REPLIES_H
#define CLIENT_JOURNAL_REPLIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <leveldb/c.h>

typedef struct jreplies jreplies;

/* What one jreplies_take saw: the appends before it, and whether it
 * carried the records kept into its batch (then the files numbered up
 * to upto may go once the write is synced). */
typedef struct jreplies_ticket {
    uint64_t gen;  /* the appends before the take */
    bool carry;    /* the records kept were put into the batch */
    size_t n;      /* how many that was */
    uint64_t upto; /* files numbered up to it may go; 0: none */
} jreplies_ticket;

/* The reply log of the journal in dir (the directory must hold no reply
 * file: jreplies_replay and jreplies_remove_all first). 0 or an errno. */
int jreplies_open(const char *dir, jreplies **rp);

/* Frees r (NULL is accepted): its records in memory are dropped, its
 * files stay (take them first, with all, to remove them). */
void jreplies_close(jreplies *r);

/* Appends (key, val) to the current file in one write(2) and keeps it in
 * memory; returns once the record is in the file. 0 or an errno (then
 * nothing is kept, and a record cut short is its file's last). */
int jreplies_append(jreplies *r, const char *key, size_t klen,
                    const uint8_t *val, size_t vlen);

/* The newest value of key kept in memory: a malloc'd copy in *val (free
 * with free()), its length in *vlen. 0, ENOENT or ENOMEM. */
int jreplies_get(jreplies *r, const char *key, size_t klen, uint8_t **val,
                 size_t *vlen);

/* Fills *t for a synced write being put together in b. When the current
 * file is large, or always when all, every record kept goes into b
 * (before the write's own entries, so those win over them) and a new
 * file is started; otherwise nothing goes into b: a record is written to
 * LevelDB only when its file must go, since the next synced write of
 * its own key (the chain's commit) replaces it anyway. */
void jreplies_take(jreplies *r, leveldb_writebatch_t *b, bool all,
                   jreplies_ticket *t);

/* After the synced write t was taken for succeeded, for each key that
 * write held: that key's record kept from before t is dropped (LevelDB
 * now holds a later record of the key). */
void jreplies_drop(jreplies *r, const jreplies_ticket *t, const char *key,
                   size_t klen);

/* After the write t was taken for: when it succeeded and was synced and
 * t carried the records, forgets those records and removes the files up
 * to t->upto; otherwise keeps both (a later take carries them). */
void jreplies_done(jreplies *r, const jreplies_ticket *t, bool synced);

/* Calls fn(key, klen, val, vlen, arg) for every whole record of dir's
 * reply files, oldest file first, in append order. A file's tail that is
 * not a whole record (a write cut by a crash: short, or its checksum
 * wrong) ends that file's records, with a line on stderr. 0 or an errno. */
typedef void (*jreplies_fn)(const char *key, size_t klen, const uint8_t *val,
                            size_t vlen, void *arg);
int jreplies_replay(const char *dir, jreplies_fn fn, void *arg);

/* Removes every reply file of dir. 0 or an errno. */
int jreplies_remove_all(const char *dir);

#endif /* CLIENT_JOURNAL_REPLIES_H */
