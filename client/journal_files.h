/*
 * journal_files.h — a directory of files, one per record, each replaced
 * durably and atomically (journal_files.c): the journal's store that many
 * processes may open at once (the input store's), and the file helpers
 * the input store's import of its old files uses.
 *
 * Owns: declarations only.
 * Invariant: a written file is whole (rename), and durable when written
 * with sync (fsync of the file, then of the directory).
 * Never: takes a lock across processes; knows what a record means.
 */
#ifndef CLIENT_JOURNAL_FILES_H
#define CLIENT_JOURNAL_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JFILES_SUFFIX   ".chain"
#define JFILES_NAME_MAX 256
/* How long a dead writer's temp file stays before a sweep removes it. */
#define JFILES_TMP_STALE_S 60

/* The file name of chain_id into name[cap]: the id with '/' as '+', then
 * ".chain". 0, or EINVAL when the id is empty, starts with '.', has a
 * character outside [A-Za-z0-9._/-], or does not fit. */
int jfiles_name(const char *chain_id, char *name, size_t cap);

/* The whole content of name in dirfd; *out freed with free(). 0, ENOENT,
 * or another errno. */
int jfiles_read(int dirfd, const char *name, uint8_t **out, size_t *out_len);

/* Replaces name with (buf, len): temp file, [fsync,] rename over name
 * [, fsync of the directory]; the fsyncs only when sync. 0 or an errno. */
int jfiles_write(int dirfd, const char *name, const uint8_t *buf, size_t len,
                 bool sync);

/* Removes name durably (unlink, fsync of the directory); a file already
 * gone is 0. 0 or an errno. */
int jfiles_remove(int dirfd, const char *name);

/* Calls fn(name, arg) for each file of dirfd whose name ends with suffix
 * (not hidden); stops at fn's first non-zero return, which it returns. */
typedef int (*jfiles_fn)(const char *name, void *arg);
int jfiles_each(int dirfd, const char *suffix, jfiles_fn fn, void *arg);

/* Removes the temp files of jfiles_write that crashed writers left in
 * dirfd: ".tmp-<pid>-..." whose pid is no live process, unchanged for
 * JFILES_TMP_STALE_S (journal_files.c says why not every one); *removed
 * counts them. Another process's temp file is never removed while it
 * lives. 0, or the first errno (the sweep goes on past it). */
int jfiles_sweep(int dirfd, size_t *removed);

#endif /* CLIENT_JOURNAL_FILES_H */
