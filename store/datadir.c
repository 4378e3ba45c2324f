/*
 * datadir.c — deciding whether a data folder may be opened, created, or
 * must be refused, and the identity file that marks a folder as onced's.
 *
 * Owns the file DATADIR_ID_FILE ("once-store": a format line, the store's
 * random id, the creation time) and the LevelDB key "m/store_id" holding
 * the same id. A store is created only in a folder that is missing, empty,
 * or holds nothing but onced's own configuration (principals, policy, key
 * files, which oncectl may write before the first start): LevelDB first
 * (its id key synced), then the identity file (written, synced, renamed,
 * folder synced). A crash in between leaves a complete LevelDB without the
 * identity file, which the next start adopts.
 * Invariant: a folder holding the identity file or any LevelDB file but no
 * CURRENT is never handed to LevelDB with create_if_missing: LevelDB would
 * make an empty store there and delete the old tables, and every
 * acknowledged rpc id would run again.
 * Never: deletes or rewrites anything already in the folder (the identity
 * file is only ever created where none is) — except datadir_remove_store,
 * which a replica calls only to replace its store by a snapshot.
 */
#include "store/datadir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "base/clock.h"

#define DATADIR_FORMAT  1
#define DATADIR_MSG_MAX 1024
#define DATADIR_RESTORE                                                        \
    "onced will not start on it: an empty store would run acknowledged "       \
    "calls a second time. Restore the folder from a backup (stop onced, "      \
    "replace the whole folder, start onced); see docs/operations.md"

static void
datadir_msg(char **errmsg, const char *fmt, ...)
{
    va_list ap;
    char *m;

    if (errmsg == NULL || (m = malloc(DATADIR_MSG_MAX)) == NULL) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(m, DATADIR_MSG_MAX, fmt, ap);
    va_end(ap);
    *errmsg = m;
}

static bool
has_suffix(const char *name, const char *suffix)
{
    size_t n = strlen(name), s = strlen(suffix);
    return n >= s && strcmp(name + n - s, suffix) == 0;
}

/* A file LevelDB writes in its folder. */
static bool
datadir_is_leveldb(const char *name)
{
    return strcmp(name, "CURRENT") == 0 || strcmp(name, "LOCK") == 0 ||
           strcmp(name, "LOG") == 0 || strcmp(name, "LOG.old") == 0 ||
           strncmp(name, "MANIFEST-", 9) == 0 || has_suffix(name, ".ldb") ||
           has_suffix(name, ".sst") || has_suffix(name, ".log") ||
           has_suffix(name, ".dbtmp");
}

/* A configuration file oncectl or onced writes beside the store, which
 * may exist before the store does. */
static bool
datadir_is_config(const char *name)
{
    return strncmp(name, "principals", 10) == 0 ||
           strncmp(name, "policy", 6) == 0 || has_suffix(name, ".key") ||
           strstr(name, ".key.tmp") != NULL;
}

int
datadir_survey(const char *dir, datadir_state *st, char **errmsg)
{
    DIR *d;
    struct dirent *e;

    memset(st, 0, sizeof(*st));
    if ((d = opendir(dir)) == NULL) {
        if (errno == ENOENT) {
            st->missing = true;
            return 0;
        }
        datadir_msg(errmsg, "cannot list the data folder %s: %s", dir,
                    strerror(errno));
        return errno;
    }
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0) {
            continue;
        }
        if (strcmp(n, DATADIR_ID_FILE) == 0) {
            st->has_id = true;
        } else if (strncmp(n, DATADIR_COMMITTED_FILE,
                           strlen(DATADIR_COMMITTED_FILE)) == 0) {
            /* with the identity file: not LevelDB data on its own */
        } else if (strcmp(n, "CURRENT") == 0) {
            st->has_current = true;
        } else if (datadir_is_leveldb(n)) {
            st->leveldb_files++;
            if (st->example[0] == '\0') {
                snprintf(st->example, sizeof(st->example), "%.63s", n);
            }
        } else if (!datadir_is_config(n)) {
            st->other_files++;
            if (st->other[0] == '\0') {
                snprintf(st->other, sizeof(st->other), "%.63s", n);
            }
        }
    }
    closedir(d);
    return 0;
}

int
datadir_check(const char *dir, const datadir_state *st, bool *create,
              char **errmsg)
{
    *create = false;
    if (st->has_current) {
        return 0; /* LevelDB opens it without create_if_missing */
    }
    if (st->has_id || st->leveldb_files > 0) {
        datadir_msg(errmsg,
                    "data folder %s holds onced data (%s%s%s%s) but its "
                    "LevelDB is incomplete: the file CURRENT is missing. %s",
                    dir, st->has_id ? "the identity file " DATADIR_ID_FILE : "",
                    st->has_id && st->leveldb_files > 0 ? ", " : "",
                    st->leveldb_files > 0 ? "LevelDB files such as " : "",
                    st->leveldb_files > 0 ? st->example : "", DATADIR_RESTORE);
        return EBADMSG;
    }
    if (st->other_files > 0) {
        datadir_msg(errmsg,
                    "data folder %s is not empty (it holds %s%s) and is not "
                    "an onced store: onced creates a store only in a new or "
                    "empty folder. Name an empty or missing folder with "
                    "--data, or restore the store's folder from a backup",
                    dir, st->other,
                    st->other_files > 1 ? " and other files" : "");
        return ENOTEMPTY;
    }
    *create = true;
    return 0;
}

void
datadir_new_id(char id[DATADIR_ID_LEN + 1])
{
    unsigned char raw[DATADIR_ID_LEN / 2];

    randombytes_buf(raw, sizeof(raw));
    sodium_bin2hex(id, DATADIR_ID_LEN + 1, raw, sizeof(raw));
}

static bool
datadir_id_ok(const char *id)
{
    if (strlen(id) != DATADIR_ID_LEN) {
        return false;
    }
    for (const char *p = id; *p != '\0'; p++) {
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) {
            return false;
        }
    }
    return true;
}

int
datadir_read_id(const char *dir, char id[DATADIR_ID_LEN + 1], char **errmsg)
{
    char path[4096], line[256], key[32];
    FILE *f;
    int format = 0;
    bool have_id = false;

    snprintf(path, sizeof(path), "%s/%s", dir, DATADIR_ID_FILE);
    if ((f = fopen(path, "r")) == NULL) {
        datadir_msg(errmsg, "cannot read %s: %s", path, strerror(errno));
        return errno;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        char val[128];
        if (sscanf(line, "%31s %127s", key, val) != 2) {
            continue;
        }
        if (strcmp(key, "once-store") == 0) {
            format = atoi(val);
        } else if (strcmp(key, "id") == 0 && strlen(val) <= DATADIR_ID_LEN) {
            snprintf(id, DATADIR_ID_LEN + 1, "%.32s", val);
            have_id = datadir_id_ok(id);
        }
    }
    fclose(f);
    if (format > DATADIR_FORMAT) {
        datadir_msg(errmsg,
                    "%s says store format %d; this onced knows format %d "
                    "only: run the onced that wrote it",
                    path, format, DATADIR_FORMAT);
        return EPROTO;
    }
    if (format != DATADIR_FORMAT || !have_id) {
        datadir_msg(errmsg,
                    "%s is damaged (no \"once-store %d\" line or no valid id "
                    "line). Restore the folder from a backup; see "
                    "docs/operations.md",
                    path, DATADIR_FORMAT);
        return EBADMSG;
    }
    return 0;
}

/* Writes text as dir/name: a temp file, fsync, rename, fsync of the
 * folder. 0 or EIO with *errmsg. */
static int
datadir_write_file(const char *dir, const char *name, const char *text, int n,
                   char **errmsg)
{
    char path[4096], tmp[4200];
    int fd, dfd;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    (void)unlink(tmp);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, text, (size_t)n) != n || fsync(fd) != 0) {
        datadir_msg(errmsg, "cannot write %s: %s", tmp, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return EIO;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        datadir_msg(errmsg, "cannot rename %s to %s: %s", tmp, path,
                    strerror(errno));
        return EIO;
    }
    if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return 0;
}

int
datadir_write_id(const char *dir, const char *id, char **errmsg)
{
    char text[256], when[32];
    time_t now = (time_t)(clock_wall_ms() / 1000);
    struct tm tm;
    int n;

    gmtime_r(&now, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    n = snprintf(text, sizeof(text),
                 "once-store %d\nid %s\ncreated %s\n"
                 "# onced's data folder: never edit; restore the whole "
                 "folder from a backup\n",
                 DATADIR_FORMAT, id, when);
    return datadir_write_file(dir, DATADIR_ID_FILE, text, n, errmsg);
}

int
datadir_write_committed(const char *dir, uint64_t seq, char **errmsg)
{
    char text[256];
    int n = snprintf(text, sizeof(text),
                     "committed %llu\n"
                     "# a lower bound of the store's commit counter: a store "
                     "below it lost commits; never edit\n",
                     (unsigned long long)seq);
    return datadir_write_file(dir, DATADIR_COMMITTED_FILE, text, n, errmsg);
}

int
datadir_read_committed(const char *dir, uint64_t *seq, char **errmsg)
{
    char path[4096];
    unsigned long long v;
    FILE *f;
    int got;

    snprintf(path, sizeof(path), "%s/%s", dir, DATADIR_COMMITTED_FILE);
    if ((f = fopen(path, "r")) == NULL) {
        if (errno == ENOENT) {
            return ENOENT;
        }
        datadir_msg(errmsg, "cannot read %s: %s", path, strerror(errno));
        return EIO;
    }
    got = fscanf(f, "committed %llu", &v);
    fclose(f);
    if (got != 1) {
        datadir_msg(errmsg,
                    "%s is damaged (no \"committed N\" line). Restore the "
                    "whole folder from a backup; see docs/operations.md",
                    path);
        return EBADMSG;
    }
    *seq = (uint64_t)v;
    return 0;
}

int
datadir_remove_store(const char *dir, char **errmsg)
{
    char path[4096];
    DIR *d;
    struct dirent *e;
    int rv = 0;

    /* CURRENT first: a folder left half-removed is refused (EBADMSG by
     * datadir_check), never opened as a store. */
    snprintf(path, sizeof(path), "%s/CURRENT", dir);
    if (unlink(path) != 0 && errno != ENOENT) {
        rv = errno;
        datadir_msg(errmsg, "cannot remove %s: %s", path, strerror(rv));
        return rv;
    }
    if ((d = opendir(dir)) == NULL) {
        rv = errno;
        datadir_msg(errmsg, "cannot list %s: %s", dir, strerror(rv));
        return rv;
    }
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (strcmp(n, DATADIR_ID_FILE) != 0 &&
            strcmp(n, DATADIR_COMMITTED_FILE) != 0 && !datadir_is_leveldb(n)) {
            continue; /* principals, policy, key files stay */
        }
        snprintf(path, sizeof(path), "%s/%s", dir, n);
        if (unlink(path) != 0 && errno != ENOENT && rv == 0) {
            rv = errno;
            datadir_msg(errmsg, "cannot remove %s: %s", path, strerror(rv));
        }
    }
    closedir(d);
    return rv;
}
