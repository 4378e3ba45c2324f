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
 * Never: looks inside the bytes it stores.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/trust.h"
#include "client/journal_files.h"

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

    snprintf(tmp, sizeof(tmp), ".tmp-%d-%lu-%s", (int)getpid(),
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

int
jfiles_each(int dirfd, const char *suffix, jfiles_fn fn, void *arg)
{
    size_t sl = strlen(suffix);
    struct dirent *de;
    int dfd, e = 0;
    DIR *d;

    if ((dfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        return errno;
    }
    if ((d = fdopendir(dfd)) == NULL) {
        e = errno;
        close(dfd);
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
