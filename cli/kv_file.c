/*
 * kv_file.c — reading a Txn from JSON (kv_file.h) with cJSON.
 *
 * Owns: the walk over the document and its error messages.
 * Invariant: every member of every object is known or refused; strings
 * are taken as their UTF-8 bytes, numbers must be whole and >= 0.
 * Never: accepts a document with trailing bytes or a member twice.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "cli/kv_file.h"

/* A compare's target, as the "target" member names it (index in
 * read_compare's table). */
enum { T_VALUE = 1, T_VERSION = 2, T_EXISTS = 3, T_ABSENT = 4 };

typedef struct reader {
    char *err;
    size_t errlen;
} reader;

static int
fail(reader *r, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(r->err, r->errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* Whether every member of o is one of names (NULL-terminated), once. */
static int
members_known(reader *r, const cJSON *o, const char *where,
              const char *const *names)
{
    for (const cJSON *m = o->child; m != NULL; m = m->next) {
        bool known = false;
        for (int i = 0; names[i] != NULL; i++) {
            known = known || strcmp(m->string, names[i]) == 0;
        }
        if (!known) {
            return fail(r, "%s: unknown member '%s'", where, m->string);
        }
        for (const cJSON *n = m->next; n != NULL; n = n->next) {
            if (strcmp(n->string, m->string) == 0) {
                return fail(r, "%s: member '%s' twice", where, m->string);
            }
        }
    }
    return 0;
}

/* Member name of o as a string: 1 and *s, 0 absent, -1 not a string. */
static int
str_member(reader *r, const cJSON *o, const char *where, const char *name,
           const char **s)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, name);

    if (m == NULL) {
        return 0;
    }
    if (!cJSON_IsString(m)) {
        return fail(r, "%s: '%s' must be a string", where, name);
    }
    *s = m->valuestring;
    return 1;
}

static int
need_str(reader *r, const cJSON *o, const char *where, const char *name,
         const char **s)
{
    int m = str_member(r, o, where, name, s);

    return m == 0 ? fail(r, "%s: '%s' is missing", where, name)
                  : (m < 0 ? -1 : 0);
}

/* A whole number >= 0 that a double holds exactly (below 2^53). */
static int
u64_member(reader *r, const cJSON *o, const char *where, const char *name,
           uint64_t *v)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, name);
    double d;

    if (m == NULL) {
        return 0;
    }
    d = m->valuedouble;
    if (!cJSON_IsNumber(m) || d < 0 || d > 9007199254740992.0 ||
        floor(d) != d) {
        return fail(r, "%s: '%s' must be a whole number >= 0", where, name);
    }
    *v = (uint64_t)d;
    return 1;
}

static int
read_compare(reader *r, once_kv_txn *b, const cJSON *o, const char *where)
{
    static const char *const names[] = {"key",   "target",  "op",
                                        "value", "version", NULL};
    static const char *const targets[] = {"", "value", "version", "exists",
                                          "absent"};
    static const char *const ops[] = {"equal", "less", "greater"};
    const char *key, *target, *op = "equal", *value = NULL;
    uint64_t version = 0;
    int t = 0, c = -1, hv, hn;

    if (members_known(r, o, where, names) != 0 ||
        need_str(r, o, where, "key", &key) != 0 ||
        need_str(r, o, where, "target", &target) != 0 ||
        str_member(r, o, where, "op", &op) < 0 ||
        (hv = str_member(r, o, where, "value", &value)) < 0 ||
        (hn = u64_member(r, o, where, "version", &version)) < 0) {
        return -1;
    }
    for (int i = T_VALUE; i <= T_ABSENT; i++) {
        t = strcmp(target, targets[i]) == 0 ? i : t;
    }
    for (int i = 0; i < 3; i++) {
        c = strcmp(op, ops[i]) == 0 ? i : c;
    }
    if (t == 0 || c < 0) {
        return fail(r,
                    "%s: target is value, version, exists or absent and op "
                    "equal, less or greater (not '%s' / '%s')",
                    where, target, op);
    }
    if ((t == T_VALUE) != (hv == 1) || (t == T_VERSION) != (hn == 1)) {
        return fail(r,
                    "%s: target value takes 'value' (a string), target "
                    "version takes 'version' (a number), the others "
                    "neither",
                    where);
    }
    switch (t) {
    case T_VALUE:
        once_kv_txn_compare_value(b, key, strlen(key), c, value, strlen(value));
        break;
    case T_VERSION:
        once_kv_txn_compare_version(b, key, strlen(key), c, version);
        break;
    case T_EXISTS:
        once_kv_txn_compare_exists(b, key, strlen(key));
        break;
    default:
        once_kv_txn_compare_absent(b, key, strlen(key));
        break;
    }
    return 0; /* a refusal stays in the builder, reported at send */
}

static int
read_op(reader *r, once_kv_txn *b, int branch, const cJSON *o,
        const char *where)
{
    static const char *const names[] = {"op",     "key",   "value",   "lease",
                                        "prefix", "topic", "payload", NULL};
    const cJSON *lease = cJSON_GetObjectItemCaseSensitive(o, "lease");
    const char *op, *key = NULL, *value = NULL;

    if (members_known(r, o, where, names) != 0 ||
        need_str(r, o, where, "op", &op) != 0) {
        return -1;
    }
    if (lease != NULL && (!cJSON_IsBool(lease) || strcmp(op, "put") != 0)) {
        return fail(r, "%s: 'lease' is true or false, on a put only", where);
    }
    if (strcmp(op, "put") == 0) {
        if (need_str(r, o, where, "key", &key) != 0 ||
            need_str(r, o, where, "value", &value) != 0) {
            return -1;
        }
        once_kv_txn_put(b, branch, key, strlen(key), value, strlen(value),
                        lease != NULL && cJSON_IsTrue(lease));
    } else if (strcmp(op, "delete") == 0 || strcmp(op, "get") == 0) {
        if (need_str(r, o, where, "key", &key) != 0) {
            return -1;
        }
        (op[0] == 'd' ? once_kv_txn_del : once_kv_txn_get)(b, branch, key,
                                                           strlen(key));
    } else if (strcmp(op, "delete_prefix") == 0) {
        if (need_str(r, o, where, "prefix", &key) != 0) {
            return -1;
        }
        once_kv_txn_del_prefix(b, branch, key, strlen(key));
    } else if (strcmp(op, "emit") == 0) {
        if (need_str(r, o, where, "topic", &key) != 0 ||
            str_member(r, o, where, "payload", &value) < 0) {
            return -1;
        }
        once_kv_txn_emit(b, branch, key, value,
                         value != NULL ? strlen(value) : 0);
    } else {
        return fail(r,
                    "%s: op is put, delete, delete_prefix, get or emit "
                    "(not '%s')",
                    where, op);
    }
    /* Members that belong to another op are mistakes too. */
    {
        const bool put = strcmp(op, "put") == 0;
        const bool pre = strcmp(op, "delete_prefix") == 0;
        const bool emit = strcmp(op, "emit") == 0;
        const char *stray =
            (!put && cJSON_HasObjectItem(o, "value"))        ? "value"
            : (pre || emit) && cJSON_HasObjectItem(o, "key") ? "key"
            : !pre && cJSON_HasObjectItem(o, "prefix")       ? "prefix"
            : !emit && (cJSON_HasObjectItem(o, "topic") ||
                        cJSON_HasObjectItem(o, "payload"))
                ? "topic/payload"
                : NULL;
        if (stray != NULL) {
            return fail(r, "%s: '%s' does not go with op %s", where, stray, op);
        }
    }
    return 0;
}

/* The array member name of doc: each element through the reader. */
static int
read_list(reader *r, once_kv_txn *b, const cJSON *doc, const char *name,
          int branch)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(doc, name);
    char where[64];
    int i = 0;

    if (a == NULL) {
        return 0;
    }
    if (!cJSON_IsArray(a)) {
        return fail(r, "'%s' must be an array", name);
    }
    for (const cJSON *e = a->child; e != NULL; e = e->next) {
        snprintf(where, sizeof(where), "%s[%d]", name, ++i);
        if (!cJSON_IsObject(e)) {
            return fail(r, "%s: must be an object", where);
        }
        if ((branch < 0 ? read_compare(r, b, e, where)
                        : read_op(r, b, branch, e, where)) != 0) {
            return -1;
        }
    }
    return 0;
}

/* The whole file (at most KV_FILE_MAX bytes) as a NUL-terminated string. */
static char *
slurp(reader *r, const char *path)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0, n;

    if (f == NULL) {
        fail(r, "%s: %s", path, strerror(errno));
        return NULL;
    }
    do {
        if (len + 4096 + 1 > cap) {
            char *nb;
            cap = cap == 0 ? 8192 : cap * 2;
            if (cap > KV_FILE_MAX + 4097 || (nb = realloc(buf, cap)) == NULL) {
                fail(r, "%s: larger than %u bytes", path, KV_FILE_MAX);
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
        }
        n = fread(buf + len, 1, 4096, f);
        len += n;
    } while (n > 0);
    if (buf != NULL && ferror(f)) {
        fail(r, "%s: %s", path, strerror(errno));
        free(buf);
        buf = NULL;
    }
    if (f != stdin) {
        fclose(f);
    }
    if (buf != NULL) {
        buf[len] = '\0';
    }
    return buf;
}

int
kv_file_load(const char *path, once_kv_txn *b, char *err, size_t errlen)
{
    static const char *const top[] = {"compares", "then", "else", NULL};
    reader r = {err, errlen};
    const char *end = NULL;
    char *text = slurp(&r, path);
    cJSON *doc;
    int rv = -1;

    if (text == NULL) {
        return -1;
    }
    doc = cJSON_ParseWithOpts(text, &end, true);
    if (doc == NULL || !cJSON_IsObject(doc)) {
        fail(&r, "%s: not a JSON object%s%.20s", path,
             doc == NULL && end != NULL ? " near: " : "",
             doc == NULL && end != NULL ? end : "");
    } else if (members_known(&r, doc, path, top) == 0 &&
               read_list(&r, b, doc, "compares", -1) == 0 &&
               read_list(&r, b, doc, "then", ONCE_KV_THEN) == 0 &&
               read_list(&r, b, doc, "else", ONCE_KV_ELSE) == 0) {
        rv = 0;
    }
    cJSON_Delete(doc);
    free(text);
    return rv;
}
