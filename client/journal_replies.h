/*
 * journal_replies.h — the LevelDB journal's reply log (journal_replies.c):
 * a chain step's reply written in one write(2) to an append-only file of
 * the journal's directory (replies.<n>, not synced) and kept in memory
 * until the journal's next synced LevelDB write carries it
 * (journal_group.c), instead of a LevelDB write of its own.
 *
 * Owns: declarations only.
 * Invariant: a record appended survives the process (it is in the file
 * when jreplies_append returns) until a synced LevelDB write holds it; a
 * file is removed only after such a write holds every record in it.
 * Never: decides what a record means (journal.c's replay does).
 */
#ifndef CLIENT_JOURNAL_REPLIES_H
#define CLIENT_JOURNAL_REPLIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <leveldb/c.h>

typedef struct jreplies jreplies;

/* What one jreplies_take took: its records, and the files that may go
 * once the write that carries them is synced. */
typedef struct jreplies_ticket {
    size_t n;      /* records taken: the first n kept */
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

/* Puts every record kept into b (in append order, so the newest of a key
 * wins; before the write's own entries, so those win over them) and
 * fills *t. A new file is started when the current one is large, or
 * always when all. */
void jreplies_take(jreplies *r, leveldb_writebatch_t *b, bool all,
                   jreplies_ticket *t);

/* After the write of the batch t was taken into: when it succeeded and
 * was synced, forgets the records taken and removes the files up to
 * t->upto; otherwise keeps both (the next take carries them again). */
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
