/*
 * prom_text.c — the Prometheus text exposition format (prom_text.h).
 */
#include "server/prom_text.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool
prom_text_reserve(prom_text *t, size_t more)
{
    size_t cap;
    char *nb;

    if (t->failed) {
        return false;
    }
    if (t->len + more + 1 <= t->cap) {
        return true;
    }
    cap = t->cap == 0 ? 4096 : t->cap;
    while (cap < t->len + more + 1) {
        cap *= 2;
    }
    if ((nb = realloc(t->buf, cap)) == NULL) {
        t->failed = true;
        return false;
    }
    t->buf = nb;
    t->cap = cap;
    return true;
}

static void prom_text_printf(prom_text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
prom_text_printf(prom_text *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !prom_text_reserve(t, (size_t)n)) {
        t->failed = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

/* A label value with \, " and newline escaped. */
static void
prom_text_escaped(prom_text *t, const char *v)
{
    for (; *v != '\0'; v++) {
        switch (*v) {
        case '\\':
            prom_text_printf(t, "\\\\");
            break;
        case '"':
            prom_text_printf(t, "\\\"");
            break;
        case '\n':
            prom_text_printf(t, "\\n");
            break;
        default:
            prom_text_printf(t, "%c", *v);
        }
    }
}

static void
prom_text_name(prom_text *t, const char *name, const char *const *labels,
               size_t nlabels)
{
    prom_text_printf(t, "%s", name);
    if (nlabels == 0) {
        return;
    }
    prom_text_printf(t, "{");
    for (size_t i = 0; i < nlabels; i++) {
        prom_text_printf(t, "%s%s=\"", i > 0 ? "," : "", labels[2 * i]);
        prom_text_escaped(t, labels[2 * i + 1]);
        prom_text_printf(t, "\"");
    }
    prom_text_printf(t, "}");
}

void
prom_text_family(prom_text *t, const char *name, const char *type,
                 const char *help)
{
    prom_text_printf(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void
prom_text_u64(prom_text *t, const char *name, const char *const *labels,
              size_t nlabels, uint64_t value)
{
    prom_text_name(t, name, labels, nlabels);
    prom_text_printf(t, " %llu\n", (unsigned long long)value);
}

void
prom_text_double(prom_text *t, const char *name, const char *const *labels,
                 size_t nlabels, double value)
{
    prom_text_name(t, name, labels, nlabels);
    prom_text_printf(t, " %.9g\n", value);
}

void
prom_text_histogram(prom_text *t, const char *name, const uint64_t *bounds,
                    size_t nbounds, double scale, const uint64_t *counts,
                    double sum)
{
    uint64_t cum = 0;

    for (size_t i = 0; i <= nbounds; i++) {
        cum += counts[i];
        if (i < nbounds) {
            prom_text_printf(t, "%s_bucket{le=\"%.9g\"} %llu\n", name,
                             (double)bounds[i] / scale,
                             (unsigned long long)cum);
        } else {
            prom_text_printf(t, "%s_bucket{le=\"+Inf\"} %llu\n", name,
                             (unsigned long long)cum);
        }
    }
    prom_text_printf(t, "%s_sum %.9g\n%s_count %llu\n", name, sum, name,
                     (unsigned long long)cum);
}

int
prom_text_take(prom_text *t, char **out, size_t *len)
{
    if (t->failed || !prom_text_reserve(t, 0)) {
        free(t->buf);
        memset(t, 0, sizeof(*t));
        return ENOMEM;
    }
    t->buf[t->len] = '\0';
    *out = t->buf;
    *len = t->len;
    memset(t, 0, sizeof(*t));
    return 0;
}
