/*
 * journal_group.h — the LevelDB journal's writes merged across threads
 * (journal_group.c): every put and delete of the journal's LevelDB goes
 * through one jgroup, so writes that arrive while one is being written
 * are merged by its thread into the next leveldb_write (one fsync when
 * any of them asks for it); a write that finds nothing to wait for is
 * written by its caller.
 *
 * Owns: declarations only.
 * Invariant: a call returns only after its write is in LevelDB's log
 * (written to the OS: it survives the process) and, when sync, after the
 * log is synced (it survives the machine).
 * Never: returns before its write is in the log.
 */
#ifndef CLIENT_JOURNAL_GROUP_H
#define CLIENT_JOURNAL_GROUP_H

#include <stdbool.h>
#include <stddef.h>

#include <leveldb/c.h>

#include "client/journal_replies.h"

typedef struct jgroup jgroup;

/* A jgroup (and its thread) writing to db (not owned; it must outlive
 * the jgroup). With a reply log rl (not owned, outliving the jgroup; NULL
 * for none), a synced write drops rl's kept records of the keys it wrote
 * and carries the others into LevelDB ahead of its own entries when rl
 * says its file is full (jreplies_take); then no unsynced write may be
 * given to the jgroup (it would not drop them, and a record carried
 * later would win over it). 0, or an errno. */
int jgroup_open(leveldb_t *db, jreplies *rl, jgroup **gp);

/* Stops the thread once the queued writes are written, and frees g
 * (NULL is accepted); no caller may be writing. */
void jgroup_close(jgroup *g);

/* Puts (key, val), or deletes key when val is NULL, in the next merged
 * write, synced when sync, and returns once it is written. 0, or -1 with
 * LevelDB's error in err[errcap]. */
int jgroup_write(jgroup *g, const char *key, size_t klen, const char *val,
                 size_t vlen, bool sync, char *err, size_t errcap);

#endif /* CLIENT_JOURNAL_GROUP_H */
