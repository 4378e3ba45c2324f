/*
 * keyfile.c — reading and writing key files (format in keyfile.h).
 */
#include "base/keyfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "base/trust.h"

/* Longest line read, newline included. */
#define KEYFILE_LINE_MAX 1024

bool
keyfile_name_ok(const char *s)
{
    size_t len;

    if (s == NULL || (len = strlen(s)) == 0 || len > KEYFILE_NAME_MAX) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];

        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '@' ||
              ch == '-')) {
            return false;
        }
    }
    return true;
}

int
keyfile_key_from_hex(const char *hex, uint8_t key[KEYFILE_KEY_BYTES])
{
    size_t bin_len = 0;

    if (strlen(hex) != 2 * KEYFILE_KEY_BYTES ||
        sodium_hex2bin(key, KEYFILE_KEY_BYTES, hex, strlen(hex), NULL, &bin_len,
                       NULL) != 0 ||
        bin_len != KEYFILE_KEY_BYTES) {
        return EINVAL;
    }
    return 0;
}

size_t
keyfile_split_words(char *line, char **w, size_t max)
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

/* The "NAME KEYHEX" line of the key file f (named path in err). */
static int
keyfile_parse(FILE *f, const char *path, char *name,
              uint8_t key[KEYFILE_KEY_BYTES], char *err, size_t errlen)
{
    char line[KEYFILE_LINE_MAX];
    int rv = EINVAL;

    snprintf(err, errlen, "key file %s holds no \"NAME KEYHEX\" line", path);
    while (fgets(line, sizeof(line), f) != NULL) {
        char *w[2];
        size_t n = keyfile_split_words(line, w, 2);

        if (n == 0) {
            continue;
        }
        if (n == 2 && keyfile_name_ok(w[0]) &&
            keyfile_key_from_hex(w[1], key) == 0) {
            snprintf(name, KEYFILE_NAME_MAX + 1, "%s", w[0]);
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
keyfile_read(const char *path, char *name, uint8_t key[KEYFILE_KEY_BYTES],
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
keyfile_read_trusted(const char *path, char *name,
                     uint8_t key[KEYFILE_KEY_BYTES], char *err, size_t errlen)
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
              const uint8_t key[KEYFILE_KEY_BYTES], bool replace)
{
    char text[KEYFILE_NAME_MAX + 2 * KEYFILE_KEY_BYTES + 160];
    char hex[2 * KEYFILE_KEY_BYTES + 1];
    size_t len;
    int fd, rv = 0;

    sodium_bin2hex(hex, sizeof(hex), key, KEYFILE_KEY_BYTES);
    len = (size_t)snprintf(text, sizeof(text),
                           "# once key of principal %s: keep it secret "
                           "(mode 0600)\n%s %s\n",
                           name, name, hex);
    sodium_memzero(hex, sizeof(hex));
    if (replace) {
        rv = trust_write_atomic(path, text, len);
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
