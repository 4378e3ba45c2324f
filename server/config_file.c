/*
 * config_file.c — the configuration file as long options (config_file.h).
 *
 * Owns: reading the file, checking each key against the getopt table, and
 * merging file and flags into one argument vector.
 * Invariant: a key is accepted only when it names a long option of the
 * table that is_key allows; the result parses exactly as if the file's lines
 * had been typed before the flags. Never: knows any option by name but `config`
 * (to find the file); which options are no keys is the caller's (is_key).
 */
#include "server/config_file.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/conf_lines.h"

static void
set_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static const struct option *
find_opt(const struct option *opts, const char *name, size_t len)
{
    for (const struct option *o = opts; o->name != NULL; o++) {
        if (strlen(o->name) == len && strncmp(o->name, name, len) == 0) {
            return o;
        }
    }
    return NULL;
}

/* A growing NULL-terminated vector of owned strings. */
typedef struct strvec {
    char **v;
    int n;
    int cap;
} strvec;

static int
vec_push(strvec *s, char *str)
{
    if (str == NULL) {
        return -1;
    }
    if (s->n + 2 > s->cap) {
        int cap = s->cap == 0 ? 16 : s->cap * 2;
        char **v = realloc(s->v, (size_t)cap * sizeof(*v));
        if (v == NULL) {
            free(str);
            return -1;
        }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = str;
    s->v[s->n] = NULL;
    return 0;
}

static void
vec_free(strvec *s)
{
    for (int i = 0; i < s->n; i++) {
        free(s->v[i]);
    }
    free(s->v);
    memset(s, 0, sizeof(*s));
}

static char *
join_opt(const char *name, const char *value)
{
    size_t n = strlen(name) + (value != NULL ? strlen(value) + 1 : 0) + 3;
    char *s = malloc(n);

    if (s != NULL) {
        if (value != NULL) {
            snprintf(s, n, "--%s=%s", name, value);
        } else {
            snprintf(s, n, "--%s", name);
        }
    }
    return s;
}

/*
 * Walks the long options of argv[1..argc) and calls fn(option, value) for
 * each one the table knows (value NULL for options without an argument).
 * Stops at "--". Returns the first non-zero fn result, else 0.
 */
static int
walk_flags(const struct option *opts, int argc, char *const *argv,
           int (*fn)(const struct option *o, const char *value, void *arg),
           void *arg)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *eq, *value = NULL;
        const struct option *o;
        int rv;

        if (strcmp(a, "--") == 0) {
            break;
        }
        if (strncmp(a, "--", 2) != 0) {
            continue;
        }
        a += 2;
        eq = strchr(a, '=');
        o = find_opt(opts, a, eq != NULL ? (size_t)(eq - a) : strlen(a));
        if (o == NULL) {
            continue;
        }
        if (eq != NULL) {
            value = eq + 1;
        } else if (o->has_arg == required_argument && i + 1 < argc) {
            value = argv[++i];
        }
        if ((rv = fn(o, value, arg)) != 0) {
            return rv;
        }
    }
    return 0;
}

static int
find_config(const struct option *o, const char *value, void *arg)
{
    if (strcmp(o->name, "config") == 0 && value != NULL) {
        *(const char **)arg = value;
    }
    return 0;
}

typedef struct seen_args {
    const char *name;
    bool seen;
} seen_args;

static int
find_seen(const struct option *o, const char *value, void *arg)
{
    seen_args *s = arg;

    (void)value;
    if (strcmp(o->name, s->name) == 0) {
        s->seen = true;
        return 1;
    }
    return 0;
}

static bool
flag_given(const struct option *opts, int argc, char *const *argv,
           const char *name)
{
    seen_args s = {name, false};

    walk_flags(opts, argc, argv, find_seen, &s);
    return s.seen;
}

/* What read_file's line callback needs. */
typedef struct file_walk {
    const struct option *opts;
    bool (*is_key)(const char *name);
    int argc;
    char *const *argv;
    strvec *vec;
    char *err;
    size_t errlen;
} file_walk;

/* One line of the file as --key[=value] in w->vec, unless the flags give
 * the key. Returns 0, or -1 with w->err set. */
static int
file_line(const char *file, int lineno, const char *key, const char *value,
          void *arg)
{
    file_walk *w = arg;
    const struct option *o = find_opt(w->opts, key, strlen(key));

    if (o == NULL || (w->is_key != NULL && !w->is_key(o->name))) {
        set_err(w->err, w->errlen,
                "%s:%d: unknown key \"%s\" (the keys are onced's long "
                "options without the dashes; see onced --help)",
                file, lineno, key);
        return -1;
    }
    if (o->has_arg == no_argument) {
        if (*value == '\0' || strcmp(value, "true") == 0 ||
            strcmp(value, "yes") == 0 || strcmp(value, "1") == 0) {
            value = NULL;
        } else if (strcmp(value, "false") == 0 || strcmp(value, "no") == 0 ||
                   strcmp(value, "0") == 0) {
            return 0;
        } else {
            set_err(w->err, w->errlen,
                    "%s:%d: %s takes no value (or true/false), got \"%s\"",
                    file, lineno, key, value);
            return -1;
        }
    } else if (*value == '\0' && o->has_arg == required_argument) {
        set_err(w->err, w->errlen, "%s:%d: %s wants a value", file, lineno,
                key);
        return -1;
    }
    if (flag_given(w->opts, w->argc, w->argv, o->name)) {
        return 0; /* the flag wins */
    }
    if (vec_push(w->vec, join_opt(o->name, value)) != 0) {
        set_err(w->err, w->errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* Reads the file's lines into vec as --key[=value], skipping keys the
 * flags give. */
static int
read_file(const struct option *opts, bool (*is_key)(const char *name),
          const char *file, int argc, char *const *argv, strvec *vec, char *err,
          size_t errlen)
{
    file_walk w = {opts, is_key, argc, argv, vec, err, errlen};

    return conf_lines_read(file, file_line, &w, err, errlen) == 0 ? 0 : -1;
}

int
config_args_build(const struct option *opts, bool (*is_key)(const char *name),
                  int argc, char *const *argv, config_args *out, char *err,
                  size_t errlen)
{
    const char *file = NULL;
    strvec vec = {0};

    memset(out, 0, sizeof(*out));
    walk_flags(opts, argc, argv, find_config, &file);
    if (vec_push(&vec, strdup(argc > 0 ? argv[0] : "onced")) != 0) {
        goto nomem;
    }
    if (file != NULL &&
        read_file(opts, is_key, file, argc, argv, &vec, err, errlen) != 0) {
        vec_free(&vec);
        return -1;
    }
    for (int i = 1; i < argc; i++) {
        if (vec_push(&vec, strdup(argv[i])) != 0) {
            goto nomem;
        }
    }
    out->argc = vec.n;
    out->argv = vec.v;
    out->file = file;
    return 0;
nomem:
    vec_free(&vec);
    set_err(err, errlen, "out of memory");
    return -1;
}

void
config_args_free(config_args *a)
{
    strvec v;

    if (a == NULL) {
        return;
    }
    v.v = a->argv;
    v.n = a->argc;
    v.cap = a->argc;
    if (v.v != NULL) {
        vec_free(&v);
    }
    memset(a, 0, sizeof(*a));
}

typedef struct values_args {
    const char *name;
    char *buf; /* the values, each followed by '\n' ("\1" for none) */
    size_t len;
    bool oom;
} values_args;

static int
collect(const struct option *o, const char *value, void *arg)
{
    values_args *va = arg;
    const char *v = value != NULL ? value : "\1";
    size_t n = strlen(v);
    char *b;

    if (strcmp(o->name, va->name) != 0) {
        return 0;
    }
    if ((b = realloc(va->buf, va->len + n + 2)) == NULL) {
        va->oom = true;
        return 1;
    }
    memcpy(b + va->len, v, n);
    b[va->len + n] = '\n';
    b[va->len + n + 1] = '\0';
    va->buf = b;
    va->len += n + 1;
    return 0;
}

int
config_args_diff(const struct option *opts, const config_args *a,
                 const config_args *b,
                 void (*changed)(const char *name, void *arg), void *arg)
{
    int ndiff = 0;

    for (const struct option *o = opts; o->name != NULL; o++) {
        values_args va = {o->name, NULL, 0, false};
        values_args vb = {o->name, NULL, 0, false};

        walk_flags(opts, a->argc, a->argv, collect, &va);
        walk_flags(opts, b->argc, b->argv, collect, &vb);
        if (va.oom || vb.oom || va.len != vb.len ||
            (va.len != 0 && memcmp(va.buf, vb.buf, va.len) != 0)) {
            changed(o->name, arg);
            ndiff++;
        }
        free(va.buf);
        free(vb.buf);
    }
    return ndiff;
}
