/*
 * principals.c — reading and writing the principals file and key files
 * (formats in principals.h).
 */
#include "proto/principals.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "base/trust.h"

#define LINE_MAX_BYTES 1024

static bool
name_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '@' ||
           ch == '-';
}

static bool
word_ok(const char *s, size_t len, size_t max, bool role_word)
{
    if (len == 0 || len > max) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        bool ok = role_word
                      ? ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                         ch == '_' || ch == '-')
                      : name_char(ch);
        if (!ok) {
            return false;
        }
    }
    return true;
}

bool
principal_name_ok(const char *s)
{
    return s != NULL && word_ok(s, strlen(s), PRINCIPAL_NAME_MAX, false);
}

bool
principal_role_ok(const char *s)
{
    const char *colon;

    if (s == NULL) {
        return false;
    }
    if ((colon = strchr(s, ':')) == NULL) {
        return word_ok(s, strlen(s), 31, true);
    }
    return word_ok(s, (size_t)(colon - s), 31, true) &&
           word_ok(colon + 1, strlen(colon + 1), PRINCIPAL_NAME_MAX, false);
}

static int
hex_key(const char *hex, uint8_t key[AUTH_KEY_BYTES])
{
    size_t bin_len = 0;

    if (strlen(hex) != 2 * AUTH_KEY_BYTES ||
        sodium_hex2bin(key, AUTH_KEY_BYTES, hex, strlen(hex), NULL, &bin_len,
                       NULL) != 0 ||
        bin_len != AUTH_KEY_BYTES) {
        return EINVAL;
    }
    return 0;
}

/* Splits line into at most max whitespace-separated words (in place). A
 * '#' starts a comment. Returns the number of words, or max + 1 when there
 * are more. */
static size_t
split_words(char *line, char **w, size_t max)
{
    size_t n = 0;
    char *p = line, *hash = strchr(line, '#');

    if (hash != NULL) {
        *hash = '\0';
    }
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') {
            p++;
        }
        if (*p == '\0') {
            return n;
        }
        if (n == max) {
            return max + 1;
        }
        w[n++] = p;
        while (*p != '\0' && *p != ' ' && *p != '\t' && *p != '\r' &&
               *p != '\n') {
            p++;
        }
        if (*p != '\0') {
            *p++ = '\0';
        }
    }
}

int
principals_read(const char *path, principal_list *out, char *err, size_t errlen)
{
    char line[LINE_MAX_BYTES];
    FILE *f;
    int fd, lineno = 0, rv;

    if ((rv = trust_open(path, &fd, err, errlen)) != 0) {
        return rv;
    }
    if ((f = fdopen(fd, "r")) == NULL) {
        rv = errno;
        close(fd);
        return rv;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        principal_entry e;
        char *w[4];
        size_t n;

        lineno++;
        if (strchr(line, '\n') == NULL && !feof(f)) {
            snprintf(err, errlen, "%s line %d: longer than %d bytes", path,
                     lineno, LINE_MAX_BYTES - 1);
            rv = EINVAL;
            break;
        }
        if ((n = split_words(line, w, 4)) == 0) {
            continue;
        }
        memset(&e, 0, sizeof(e));
        if (n < 3 || n > 4 || (n == 4 && strcmp(w[3], "revoked") != 0)) {
            snprintf(err, errlen,
                     "%s line %d: want \"NAME ROLE KEYHEX [revoked]\"", path,
                     lineno);
            rv = EINVAL;
        } else if (!principal_name_ok(w[0]) || !principal_role_ok(w[1])) {
            snprintf(err, errlen, "%s line %d: bad principal name or role",
                     path, lineno);
            rv = EINVAL;
        } else if (hex_key(w[2], e.key) != 0) {
            snprintf(err, errlen, "%s line %d: the key is not %d hex digits",
                     path, lineno, 2 * AUTH_KEY_BYTES);
            rv = EINVAL;
        } else if (principals_find(out, w[0]) != NULL) {
            snprintf(err, errlen, "%s line %d: principal %s appears twice",
                     path, lineno, w[0]);
            rv = EINVAL;
        } else {
            snprintf(e.name, sizeof(e.name), "%s", w[0]);
            snprintf(e.role, sizeof(e.role), "%s", w[1]);
            e.revoked = (n == 4);
            rv = principals_append(out, &e);
        }
        sodium_memzero(&e, sizeof(e));
        if (rv != 0) {
            break;
        }
    }
    sodium_memzero(line, sizeof(line));
    if (rv == 0 && ferror(f)) {
        rv = EIO;
    }
    fclose(f);
    if (rv != 0) {
        principals_fini(out);
    }
    return rv;
}

/* Writes text to a fresh temp file next to path (created O_EXCL|O_NOFOLLOW:
 * trust_create), fsyncs it and renames it over path; mode 0600. */
static int
write_atomic(const char *path, const char *text, size_t len)
{
    char tmp[4096];
    int fd, rv = 0;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >=
        (int)sizeof(tmp)) {
        return ENAMETOOLONG;
    }
    if ((fd = trust_create(AT_FDCWD, tmp)) < 0) {
        return errno;
    }
    if (fchmod(fd, 0600) != 0 || write(fd, text, len) != (ssize_t)len ||
        fsync(fd) != 0) {
        rv = errno != 0 ? errno : EIO;
    }
    if (close(fd) != 0 && rv == 0) {
        rv = errno;
    }
    if (rv == 0 && rename(tmp, path) != 0) {
        rv = errno;
    }
    if (rv != 0) {
        unlink(tmp);
    }
    return rv;
}

int
principals_write(const char *path, const principal_list *l)
{
    static const char head[] =
        "# once principals: NAME ROLE KEY [revoked]. Written by `oncectl\n"
        "# principal add|revoke|restore --data DIR`; keep mode 0600.\n";
    size_t cap =
        sizeof(head) + l->n * (PRINCIPAL_NAME_MAX + PRINCIPAL_ROLE_MAX +
                               2 * AUTH_KEY_BYTES + 16);
    char *text = malloc(cap);
    size_t len;
    int rv;

    if (text == NULL) {
        return ENOMEM;
    }
    memcpy(text, head, sizeof(head) - 1);
    len = sizeof(head) - 1;
    for (size_t i = 0; i < l->n; i++) {
        const principal_entry *e = &l->v[i];
        char hex[2 * AUTH_KEY_BYTES + 1];

        sodium_bin2hex(hex, sizeof(hex), e->key, AUTH_KEY_BYTES);
        len += (size_t)snprintf(text + len, cap - len, "%s %s %s%s\n", e->name,
                                e->role, hex, e->revoked ? " revoked" : "");
        sodium_memzero(hex, sizeof(hex));
    }
    rv = write_atomic(path, text, len);
    sodium_memzero(text, cap);
    free(text);
    return rv;
}

principal_entry *
principals_find(principal_list *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++) {
        if (strcmp(l->v[i].name, name) == 0) {
            return &l->v[i];
        }
    }
    return NULL;
}

int
principals_append(principal_list *l, const principal_entry *e)
{
    if (l->n == l->cap) {
        size_t ncap = l->cap != 0 ? 2 * l->cap : 8;
        principal_entry *nv = calloc(ncap, sizeof(*nv));

        if (nv == NULL) {
            return ENOMEM;
        }
        if (l->n > 0) {
            memcpy(nv, l->v, l->n * sizeof(*nv));
            sodium_memzero(l->v, l->n * sizeof(*nv));
        }
        free(l->v);
        l->v = nv;
        l->cap = ncap;
    }
    l->v[l->n++] = *e;
    return 0;
}

void
principals_fini(principal_list *l)
{
    if (l->v != NULL) {
        sodium_memzero(l->v, l->cap * sizeof(*l->v));
    }
    free(l->v);
    memset(l, 0, sizeof(*l));
}

/* The "NAME KEYHEX" line of the key file f (named path in err). */
static int
keyfile_parse(FILE *f, const char *path, char *name,
              uint8_t key[AUTH_KEY_BYTES], char *err, size_t errlen)
{
    char line[LINE_MAX_BYTES];
    int rv = EINVAL;

    snprintf(err, errlen, "key file %s holds no \"NAME KEYHEX\" line", path);
    while (fgets(line, sizeof(line), f) != NULL) {
        char *w[2];
        size_t n = split_words(line, w, 2);

        if (n == 0) {
            continue;
        }
        if (n == 2 && principal_name_ok(w[0]) && hex_key(w[1], key) == 0) {
            snprintf(name, PRINCIPAL_NAME_MAX + 1, "%s", w[0]);
            rv = 0;
        } else {
            snprintf(err, errlen, "key file %s: want one line \"NAME KEYHEX\"",
                     path);
        }
        break;
    }
    sodium_memzero(line, sizeof(line));
    return rv;
}

int
keyfile_read(const char *path, char *name, uint8_t key[AUTH_KEY_BYTES],
             char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    int rv;

    if (f == NULL) {
        snprintf(err, errlen, "cannot read key file %s: %s", path,
                 strerror(errno));
        return errno;
    }
    rv = keyfile_parse(f, path, name, key, err, errlen);
    fclose(f);
    return rv;
}

int
keyfile_read_trusted(const char *path, char *name, uint8_t key[AUTH_KEY_BYTES],
                     char *err, size_t errlen)
{
    FILE *f;
    int fd, rv;

    if ((rv = trust_open(path, &fd, err, errlen)) != 0) {
        if (rv == ENOENT) {
            snprintf(err, errlen, "key file %s does not exist", path);
        }
        return rv;
    }
    if ((f = fdopen(fd, "r")) == NULL) {
        rv = errno;
        close(fd);
        snprintf(err, errlen, "cannot read key file %s: %s", path,
                 strerror(rv));
        return rv;
    }
    rv = keyfile_parse(f, path, name, key, err, errlen);
    fclose(f);
    return rv;
}

int
keyfile_write(const char *path, const char *name,
              const uint8_t key[AUTH_KEY_BYTES], bool replace)
{
    char text[PRINCIPAL_NAME_MAX + 2 * AUTH_KEY_BYTES + 160];
    char hex[2 * AUTH_KEY_BYTES + 1];
    size_t len;
    int fd, rv = 0;

    sodium_bin2hex(hex, sizeof(hex), key, AUTH_KEY_BYTES);
    len = (size_t)snprintf(text, sizeof(text),
                           "# once key of principal %s: keep it secret "
                           "(mode 0600)\n%s %s\n",
                           name, name, hex);
    sodium_memzero(hex, sizeof(hex));
    if (replace) {
        rv = write_atomic(path, text, len);
        sodium_memzero(text, sizeof(text));
        return rv;
    }
    if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                   0600)) < 0) {
        sodium_memzero(text, sizeof(text));
        return errno;
    }
    if (write(fd, text, len) != (ssize_t)len || fsync(fd) != 0) {
        rv = errno != 0 ? errno : EIO;
    }
    if (close(fd) != 0 && rv == 0) {
        rv = errno;
    }
    sodium_memzero(text, sizeof(text));
    if (rv != 0) {
        unlink(path);
    }
    return rv;
}
