/*
 * conf_lines.c — configuration file lines as key and value (conf_lines.h).
 *
 * Owns: trimming, the key/value split, unquoting, the line-length check.
 * Invariant: every line reaches the callback as the user wrote it, minus
 * surrounding blanks, the `=`, a leading `--` and one pair of quotes.
 * Never: interprets a key or a value.
 */
#include "base/conf_lines.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void
conf_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static char *
trim(char *s)
{
    char *e;

    while (isspace((unsigned char)*s)) {
        s++;
    }
    e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) {
        *--e = '\0';
    }
    return s;
}

/* Splits a trimmed line into key and value in place. Returns 0, or -1 for
 * an unterminated quote. */
static int
split_line(char *line, char **key, char **value)
{
    char *p, *v;
    size_t n;

    for (p = line; *p != '\0' && *p != '=' && !isspace((unsigned char)*p);
         p++) {
    }
    v = trim(p);
    if (*v == '=') {
        v = trim(v + 1);
    }
    *p = '\0';
    if (line[0] == '-' && line[1] == '-') {
        line += 2; /* "--window 4" reads as "window 4" */
    }
    if (*v == '"') {
        n = strlen(v);
        if (n < 2 || v[n - 1] != '"') {
            return -1;
        }
        v[n - 1] = '\0';
        v++;
    }
    *key = line;
    *value = v;
    return 0;
}

int
conf_lines_read(const char *file, conf_line_fn fn, void *arg, char *err,
                size_t errlen)
{
    char line[CONF_LINE_MAX];
    FILE *f;
    int lineno = 0, rv = 0;

    if ((f = fopen(file, "r")) == NULL) {
        conf_err(err, errlen, "cannot read the configuration file %s: %s", file,
                 strerror(errno));
        return -1;
    }
    while (rv == 0 && fgets(line, sizeof(line), f) != NULL) {
        char *key, *value, *s;

        lineno++;
        if (strchr(line, '\n') == NULL && !feof(f)) {
            conf_err(err, errlen, "%s:%d: line longer than %d bytes", file,
                     lineno, CONF_LINE_MAX - 2);
            rv = -1;
            break;
        }
        s = trim(line);
        if (*s == '\0' || *s == '#') {
            continue;
        }
        if (split_line(s, &key, &value) != 0) {
            conf_err(err, errlen, "%s:%d: unterminated quote", file, lineno);
            rv = -1;
            break;
        }
        rv = fn(file, lineno, key, value, arg);
    }
    if (rv == 0 && ferror(f)) {
        conf_err(err, errlen, "cannot read the configuration file %s", file);
        rv = -1;
    }
    fclose(f);
    return rv;
}
