/*
 * journal_impl.h — the journal's store as the chain layer sees it: one
 * ChainRecord per chain, read and written whole (journal.c), in a LevelDB
 * or in a directory of one file per chain (journal_open_files: the input
 * store's). Layers above include once/journal.h, never this.
 *
 * Owns: declarations of journal.c's record access and the in-process
 * claim of a chain (one open handle per chain per journal).
 * Invariant: a record is replaced in one LevelDB write, so a reader after
 * any crash sees a whole record, the one before or the one after.
 * Never: sends anything; included by the call engine.
 */
#ifndef CLIENT_JOURNAL_IMPL_H
#define CLIENT_JOURNAL_IMPL_H

#include <stdbool.h>

#include "client/journal.pb-c.h"
#include <once/journal.h>

typedef Once__Client__ChainRecord chain_rec;

/* Opens (creating it, mode 0700, when missing) a journal of one file per
 * chain in dir (journal_files.h): no lock, so any number of processes may
 * open it at once; chain ids are limited to [A-Za-z0-9._/-]. Removes the
 * temp files crashed writers left there (jfiles_sweep). Closed with
 * once_journal_close. */
int journal_open_files(const char *dir, once_journal **jp, once_status *st);

/* Reads chain_id's record. ONCE_OK (*out freed with
 * once__client__chain_record__free_unpacked), NOT_FOUND / NO_CHAIN, or
 * INTERNAL / JOURNAL. */
int journal_get(once_journal *j, const char *chain_id, chain_rec **out,
                once_status *st);

/* Replaces r's record (key r->chain_id) in one write, synced when sync
 * (an unsynced write survives the process, not the machine: another
 * thread's synced write need not sync it, journal_group.c). ONCE_OK or
 * INTERNAL / JOURNAL. */
int journal_put(once_journal *j, const chain_rec *r, bool sync,
                once_status *st);

/* journal_put of a record already packed: (buf, len), chain_id's
 * record's packing (buf stays the caller's). */
int journal_put_packed(once_journal *j, const char *chain_id,
                       const uint8_t *buf, size_t len, bool sync,
                       once_status *st);

/* Removes chain_id's record in one synced write. */
int journal_del(once_journal *j, const char *chain_id, once_status *st);

/* Calls fn(record, arg) for every chain (LevelDB: in chain id order;
 * files: in directory order); stops at fn's first non-zero return
 * (an errno). Records that do not decode are skipped. */
typedef int (*journal_each_fn)(const chain_rec *r, void *arg);
int journal_each(once_journal *j, journal_each_fn fn, void *arg,
                 once_status *st);

/* Room for one more row in a growing array of rows of size bytes (*rows,
 * *cap; n in use): doubles it when full (16 at first). 0 or ENOMEM
 * (*rows and *cap unchanged). For journal_each callbacks that list. */
int journal_rows_grow(void **rows, size_t *cap, size_t n, size_t size);

/* Marks chain_id open in this process; false when it already is. */
bool journal_claim(once_journal *j, const char *chain_id);

/* Undoes journal_claim. */
void journal_release(once_journal *j, const char *chain_id);

/* *o from r (strings truncated). */
void journal_info_fill(once_chain_info *o, const chain_rec *r);

/* A malloc'd copy of (p, len) into *out (NULL when len is 0); ENOMEM. */
int journal_copy_out(const void *p, size_t len, void **out, size_t *out_len);

#endif /* CLIENT_JOURNAL_IMPL_H */
