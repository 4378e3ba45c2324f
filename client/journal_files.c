/*
 * journal_files.c — the journal's store of one file per record
 * (journal_files.h): what the input store's directory is made of
 * (docs/chains.md, "The input store").
 *
 * Owns: the file names of records ("<chain id, '/' as '+'>.chain") and
 * the durable replace (temp file, fsync, rename, fsync of the directory)
 * and removal (unlink, fsync of the directory) of a file.
 * Invariant: a file is replaced only by a rename, so a reader in any
 * process sees its whole content before or after a write, never a mix;
 * no lock is taken, so any number of processes may open the directory.
 * Temp files are named per process and write (".tmp-<pid>-<n>-<name>"),
 * so two writers never write through the same one; a crash mid-write
 * leaves its hidden temp file behind (never read as a record).
 * Leftover temp files are swept at open (jfiles_sweep). No process owns
 * the directory (no lock; the input store is open in many processes at
 * once), so "remove every .tmp-*" would pull a file from under another
 * process's write, whose rename would then fail: the sweep removes only
 * those whose <pid> is no live process (kill(pid, 0) says ESRCH) and
 * whose last change is JFILES_TMP_STALE_S old — a writer in another pid
 * namespace sharing the directory (a container) looks dead by its pid,
 * but no write keeps a temp file that long. A reused pid only delays a
 * sweep.
 * Never: looks inside the bytes it stores; removes a temp file a live
 * process may still rename.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/trust.h"
#include "client/journal_files.h"

#define TMP_PREFIX ".tmp-"

/* Makes each temp file of this process a name of its own (two threads,
 * or two handles on one directory, never write through the same one). */
static _Atomic unsigned long tmp_serial;

int
jfiles_name(const char *chain_id, char *name, size_t cap)
{
    size_t n = strlen(chain_id);

    if (n == 0 || chain_id[0] == '.' || n + sizeof(JFILES_SUFFIX) > cap) {
        return EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        char ch = chain_id[i];
        bool safe = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' ||
                    ch == '.' || ch == '/';
        if (!safe) {
            return EINVAL;
        }
        name[i] = ch == '/' ? '+' : ch;
    }
    memcpy(name + n, JFILES_SUFFIX, sizeof(JFILES_SUFFIX));
    return 0;
}

int
jfiles_read(int dirfd, const char *name, uint8_t **out, size_t *out_len)
{
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    int fd, rv = 0;

    *out = NULL;
    *out_len = 0;
    if ((fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
        return errno;
    }
    for (;;) {
        ssize_t n;
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap = cap != 0 ? cap * 2 : 4096);
            if (nb == NULL) {
                rv = ENOMEM;
                break;
            }
            buf = nb;
        }
        if ((n = read(fd, buf + len, cap - len)) < 0) {
            if (errno == EINTR) {
                continue;
            }
            rv = errno;
            break;
        }
        if (n == 0) {
            break;
        }
        len += (size_t)n;
    }
    close(fd);
    if (rv != 0) {
        free(buf);
        return rv;
    }
    *out = buf;
    *out_len = len;
    return 0;
}

int
jfiles_write(int dirfd, const char *name, const uint8_t *buf, size_t len,
             bool sync)
{
    char tmp[JFILES_NAME_MAX + 48];
    int rv;

    snprintf(tmp, sizeof(tmp), TMP_PREFIX "%d-%lu-%s", (int)getpid(),
             atomic_fetch_add(&tmp_serial, 1), name);
    if ((rv = trust_replace_at(dirfd, tmp, name, buf, len, sync)) != 0) {
        return rv;
    }
    return sync && fsync(dirfd) != 0 ? errno : 0;
}

int
jfiles_remove(int dirfd, const char *name)
{
    if (unlinkat(dirfd, name, 0) != 0 && errno != ENOENT) {
        return errno;
    }
    return fsync(dirfd) != 0 ? errno : 0;
}

/* A stream over dirfd's entries of its own (dirfd stays open and
 * unmoved); closed with closedir. 0 or an errno. */
static int
dir_open(int dirfd, DIR **d)
{
    int dfd, e;

    if ((dfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        return errno;
    }
    if ((*d = fdopendir(dfd)) == NULL) {
        e = errno;
        close(dfd);
        return e;
    }
    return 0;
}

int
jfiles_each(int dirfd, const char *suffix, jfiles_fn fn, void *arg)
{
    size_t sl = strlen(suffix);
    struct dirent *de;
    int e;
    DIR *d;

    if ((e = dir_open(dirfd, &d)) != 0) {
        return e;
    }
    while (e == 0 && (de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);

        if (de->d_name[0] == '.' || l <= sl || l >= JFILES_NAME_MAX ||
            strcmp(de->d_name + l - sl, suffix) != 0) {
            continue;
        }
        e = fn(de->d_name, arg);
    }
    closedir(d);
    return e;
}

/* Whether name is a temp file of jfiles_write whose writer is gone:
 * ".tmp-<pid>-..." with <pid> no live process, unchanged for
 * JFILES_TMP_STALE_S. */
static bool
tmp_abandoned(int dirfd, const char *name, time_t now)
{
    const char *p = name + strlen(TMP_PREFIX);
    struct stat sb;
    char *end;
    long pid;

    if (strncmp(name, TMP_PREFIX, strlen(TMP_PREFIX)) != 0) {
        return false;
    }
    errno = 0;
    pid = strtol(p, &end, 10);
    if (end == p || *end != '-' || errno != 0 || pid <= 0 ||
        pid == (long)getpid()) {
        return false;
    }
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) {
        return false; /* alive, or not ours to signal (EPERM): alive */
    }
    return fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
           S_ISREG(sb.st_mode) && now - sb.st_mtime >= JFILES_TMP_STALE_S;
}

int
jfiles_sweep(int dirfd, size_t *removed)
{
    time_t now = time(NULL);
    struct dirent *de;
    int e;
    DIR *d;

    *removed = 0;
    if ((e = dir_open(dirfd, &d)) != 0) {
        return e;
    }
    while ((de = readdir(d)) != NULL) {
        if (!tmp_abandoned(dirfd, de->d_name, now)) {
            continue;
        }
        if (unlinkat(dirfd, de->d_name, 0) == 0) {
            (*removed)++;
        } else if (errno != ENOENT && e == 0) {
            e = errno;
        }
    }
    closedir(d);
    return e;
}
