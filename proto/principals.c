/*
 * principals.c — reading and writing the principals file (format in
 * principals.h); its words, names and keys are read as a key file's are
 * (base/keyfile.h).
 */
#include "proto/principals.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "base/keyfile.h"
#include "base/trust.h"

#define LINE_MAX_BYTES 1024

_Static_assert(AUTH_KEY_BYTES == KEYFILE_KEY_BYTES,
               "a key file holds the key the wire's tag is made with");
_Static_assert(PRINCIPAL_NAME_MAX == KEYFILE_NAME_MAX,
               "a key file names a principal");

/* A word of [a-z0-9_-] of 1..max bytes (a role's first word). */
static bool
role_word_ok(const char *s, size_t len, size_t max)
{
    if (len == 0 || len > max) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];

        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '-')) {
            return false;
        }
    }
    return true;
}

bool
principal_name_ok(const char *s)
{
    return keyfile_name_ok(s);
}

bool
principal_role_ok(const char *s)
{
    const char *colon;

    if (s == NULL) {
        return false;
    }
    if ((colon = strchr(s, ':')) == NULL) {
        return role_word_ok(s, strlen(s), 31);
    }
    return role_word_ok(s, (size_t)(colon - s), 31) &&
           keyfile_name_ok(colon + 1);
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
        if ((n = keyfile_split_words(line, w, 4)) == 0) {
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
        } else if (keyfile_key_from_hex(w[2], e.key) != 0) {
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
    rv = trust_write_atomic(path, text, len);
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
