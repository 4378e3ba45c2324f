/*
 * trust.c — files that grant authority (trust.h).
 */
#include "base/trust.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Owner and mode of st against the rules; what is wrong into err. */
static int
trust_stat(const char *path, const struct stat *st, bool dir, char *err,
           size_t errlen)
{
    uid_t me = geteuid();

    if (dir ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode)) {
        snprintf(err, errlen, "%s is not a %s: fix: replace it with one", path,
                 dir ? "folder" : "regular file");
        return EPERM;
    }
    if (st->st_uid != me && st->st_uid != 0) {
        snprintf(err, errlen,
                 "%s is owned by uid %u, not by onced's user (uid %u) or "
                 "root: its owner could make itself an operator. Fix: chown "
                 "%u %s",
                 path, (unsigned)st->st_uid, (unsigned)me, (unsigned)me, path);
        return EPERM;
    }
    if ((st->st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        snprintf(err, errlen,
                 "%s is writable by %s (mode %03o): any local user could %s "
                 "and make itself an operator. Fix: chmod %s %s",
                 path, (st->st_mode & S_IWOTH) != 0 ? "everyone" : "its group",
                 (unsigned)(st->st_mode & 0777),
                 dir ? "replace the principals or policy file in it"
                     : "rewrite it",
                 dir ? "700" : "600", path);
        return EPERM;
    }
    return 0;
}

int
trust_open(const char *path, int *fdp, char *err, size_t errlen)
{
    struct stat st;
    int fd, rv;

    *fdp = -1;
    if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0) {
        rv = errno;
        if (rv == ELOOP) {
            snprintf(err, errlen,
                     "%s is a symbolic link: a file that grants authority is "
                     "read only as itself, never through a link. Fix: "
                     "replace the link with a copy of its target (mode 600)",
                     path);
            return EPERM;
        }
        if (rv != ENOENT) {
            snprintf(err, errlen, "cannot read %s: %s", path, strerror(rv));
        }
        return rv;
    }
    if (fstat(fd, &st) != 0) {
        rv = errno;
        snprintf(err, errlen, "cannot stat %s: %s", path, strerror(rv));
        close(fd);
        return rv;
    }
    if ((rv = trust_stat(path, &st, false, err, errlen)) != 0) {
        close(fd);
        return rv;
    }
    /* Back to blocking reads (O_NONBLOCK only kept a FIFO from hanging the
     * open). */
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    *fdp = fd;
    return 0;
}

int
trust_dir(const char *path, char *err, size_t errlen)
{
    struct stat st;
    int rv;

    if (lstat(path, &st) != 0) {
        rv = errno;
        if (rv != ENOENT) {
            snprintf(err, errlen, "cannot stat %s: %s", path, strerror(rv));
        }
        return rv;
    }
    if (S_ISLNK(st.st_mode)) {
        snprintf(err, errlen,
                 "data folder %s is a symbolic link: whoever controls the "
                 "link controls which principals onced believes. Fix: pass "
                 "the folder itself (--data \"$(readlink -f %s)\")",
                 path, path);
        return EPERM;
    }
    return trust_stat(path, &st, true, err, errlen);
}

bool
trust_readable_by_others(const char *path, unsigned *mode)
{
    struct stat st;

    if (stat(path, &st) != 0 || (st.st_mode & 077) == 0) {
        return false;
    }
    *mode = (unsigned)(st.st_mode & 0777);
    return true;
}

int
trust_create(int dirfd, const char *name)
{
    static const int flags =
        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = openat(dirfd, name, flags, 0600);

    if (fd < 0 && errno == EEXIST) {
        if (unlinkat(dirfd, name, 0) != 0 && errno != ENOENT) {
            return -1;
        }
        fd = openat(dirfd, name, flags, 0600);
    }
    return fd;
}

/* Writes all len bytes of p to fd. 0 or an errno. */
static int
trust_write_all(int fd, const unsigned char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);

        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int
trust_replace_at(int dirfd, const char *tmp, const char *name, const void *buf,
                 size_t len, bool sync)
{
    int fd, rv = 0;

    if ((fd = trust_create(dirfd, tmp)) < 0) {
        return errno;
    }
    if (fchmod(fd, 0600) != 0) {
        rv = errno;
    } else if ((rv = trust_write_all(fd, buf, len)) == 0 && sync &&
               fsync(fd) != 0) {
        rv = errno;
    }
    if (close(fd) != 0 && rv == 0) {
        rv = errno;
    }
    if (rv == 0 && renameat(dirfd, tmp, dirfd, name) != 0) {
        rv = errno;
    }
    if (rv != 0) {
        (void)unlinkat(dirfd, tmp, 0);
    }
    return rv;
}

int
trust_write_atomic(const char *path, const char *text, size_t len)
{
    char tmp[4096];

    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >=
        (int)sizeof(tmp)) {
        return ENAMETOOLONG;
    }
    return trust_replace_at(AT_FDCWD, tmp, path, text, len, true);
}
