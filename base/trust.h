/*
 * trust.h — files that grant authority, checked as ssh(1) checks its keys.
 *
 * Owns: the rules a data folder, a principals file and a policy file must
 * meet before onced (or oncectl) believes them, the check behind the
 * warning about a key file others can read (the principals file, the
 * replicas' --replicate-key, --etcd-key), and the creation of temporary
 * files next to them and of such a file's new version (trust_write_atomic).
 * The rules: not a symbolic link; owned by the effective user or root;
 * not writable by group or others; a file is a regular file, a folder a
 * directory. Anyone who can write such a file, or replace it through the
 * folder or a link, can make themselves an operator.
 * Invariant: a file is opened first (O_NOFOLLOW) and its open descriptor
 * checked, so what is checked is what is read; every refusal's message
 * names the path, what is wrong and the command that fixes it.
 * Never: follows a symbolic link; changes a file's mode or owner itself.
 */
#ifndef BASE_TRUST_H
#define BASE_TRUST_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Opens path for reading if it meets the rules. Returns 0 with *fdp the
 * descriptor (the caller closes it); ENOENT when there is no such file;
 * EPERM with err saying what is wrong and how to fix it; another errno
 * with err set when it cannot be opened.
 */
int trust_open(const char *path, int *fdp, char *err, size_t errlen);

/* Checks the folder path against the rules. 0; ENOENT when it does not
 * exist; EPERM or another errno with err set. */
int trust_dir(const char *path, char *err, size_t errlen);

/*
 * True when path exists and its mode lets group or others in at all (any
 * of 077: a key file that others can read), with *mode its permission
 * bits (mode & 0777) for the warning the caller writes; false when it is
 * private to its owner or cannot be stat()ed. Follows a link (the warning
 * is about what is read).
 */
bool trust_readable_by_others(const char *path, unsigned *mode);

/*
 * Creates name in the folder dirfd (AT_FDCWD: name is a path) for writing,
 * mode 0600, with O_EXCL|O_NOFOLLOW: never through a link, never into a
 * file someone else made. A leftover of an earlier crash (a file or a
 * link of that name) is unlinked first — unlinking a link removes the link,
 * not its target — and the creation tried once more. Returns the
 * descriptor, or -1 with errno set.
 */
int trust_create(int dirfd, const char *name);

/*
 * Replaces path with the len bytes of text atomically: a temp file next
 * to it ("<path>.tmp.<pid>", made by trust_create), mode 0600, written,
 * fsynced and renamed over path (the principals file, a replaced key
 * file). 0 or an errno; the temp file never outlives a failure.
 */
int trust_write_atomic(const char *path, const char *text, size_t len);

/*
 * The same in directory dirfd (or AT_FDCWD): tmp made by trust_create,
 * mode 0600, the len bytes of buf written (fsynced when sync) and renamed
 * over name. The directory is not synced: a caller that needs the rename
 * durable fsyncs dirfd. 0 or an errno; tmp never outlives a failure.
 */
int trust_replace_at(int dirfd, const char *tmp, const char *name,
                     const void *buf, size_t len, bool sync);

#endif /* BASE_TRUST_H */
