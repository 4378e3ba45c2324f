/*
 * datadir.h — the data folder around the LevelDB: what it holds, whether a
 * store may be created there, and the identity file marking it as
 * onced's. Used by store_open and store/load.c, and by a replica replacing
 * its store by a snapshot (datadir_remove_store).
 *
 * Owns the files DATADIR_ID_FILE and DATADIR_COMMITTED_FILE in the data
 * folder.
 * Invariant: datadir_check allows creating a store only where no onced
 * data exists (no identity file, no LevelDB file, nothing unknown).
 * Never: removes or rewrites a file it did not just create.
 */
#ifndef STORE_DATADIR_H
#define STORE_DATADIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DATADIR_ID_FILE "once-store"
#define DATADIR_ID_LEN  32 /* hex digits of a 128-bit random id */
#define DATADIR_ID_KEY  "m/store_id"
/* A lower bound of the store's commit counter, kept outside LevelDB. */
#define DATADIR_COMMITTED_FILE "once-committed"

typedef struct datadir_state {
    bool missing;         /* the folder does not exist */
    bool has_id;          /* DATADIR_ID_FILE is there */
    bool has_current;     /* LevelDB's CURRENT is there */
    size_t leveldb_files; /* other LevelDB files (tables, logs, ...) */
    char example[64];     /* the first of them, for messages */
    size_t other_files;   /* neither LevelDB's nor configuration */
    char other[64];       /* the first of them */
} datadir_state;

/* Lists dir into *st (a missing folder is st->missing). Returns 0 or an
 * errno, with *errmsg (malloc'd, free()) when errmsg is not NULL. */
int datadir_survey(const char *dir, datadir_state *st, char **errmsg);

/*
 * Decides from *st: 0 with *create false (a LevelDB is there: open it
 * without creating), 0 with *create true (missing or empty of onced data:
 * create a store), or a refusal — EBADMSG (onced data without a complete
 * LevelDB) or ENOTEMPTY (unknown files) — with *errmsg saying what is
 * missing and what to do.
 */
int datadir_check(const char *dir, const datadir_state *st, bool *create,
                  char **errmsg);

/* A fresh random store id, DATADIR_ID_LEN hex digits and a NUL. */
void datadir_new_id(char id[DATADIR_ID_LEN + 1]);

/* Reads the id from dir's identity file. 0, or an errno with *errmsg:
 * EBADMSG when the file is damaged, EPROTO when a newer format wrote it. */
int datadir_read_id(const char *dir, char id[DATADIR_ID_LEN + 1],
                    char **errmsg);

/* Creates dir's identity file holding id (temp file, fsync, rename, fsync
 * of the folder). 0 or EIO with *errmsg. */
int datadir_write_id(const char *dir, const char *id, char **errmsg);

/* Reads dir's DATADIR_COMMITTED_FILE into *seq. 0, ENOENT when there is
 * none, or EBADMSG with *errmsg when it is damaged. */
int datadir_read_committed(const char *dir, uint64_t *seq, char **errmsg);

/* Writes seq into dir's DATADIR_COMMITTED_FILE as datadir_write_id does
 * (temp file, fsync, rename, fsync of the folder). 0 or EIO. */
int datadir_write_committed(const char *dir, uint64_t seq, char **errmsg);

/* Removes the store from dir: its LevelDB files (CURRENT first) and the
 * identity file; configuration files stay. Only for a replica replacing
 * its store by a snapshot (repl/seed.c). 0 or an errno with *errmsg. */
int datadir_remove_store(const char *dir, char **errmsg);

#endif /* STORE_DATADIR_H */
