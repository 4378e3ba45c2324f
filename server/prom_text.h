/*
 * prom_text.h — writing the Prometheus text exposition format (version
 * 0.0.4) into a growing buffer.
 *
 * Owns: the buffer (malloc'd; prom_text_take hands it over). Each family is
 * one prom_text_family line pair (# HELP, # TYPE) followed by its samples;
 * label values are escaped (backslash, double quote, newline) here.
 * Invariant: after an allocation failure every later write is a no-op and
 * prom_text_take reports it, so a caller checks once at the end.
 * Never: knows which metrics exist (metrics.c does), or blocks.
 */
#ifndef SERVER_PROM_TEXT_H
#define SERVER_PROM_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct prom_text {
    char *buf;
    size_t len;
    size_t cap;
    bool failed; /* out of memory: nothing more is written */
} prom_text;

/* "# HELP name help" and "# TYPE name type" (counter, gauge, histogram). */
void prom_text_family(prom_text *t, const char *name, const char *type,
                      const char *help);

/* One sample: name{labels} value. labels are name/value pairs, nlabels of
 * them (0: no braces). */
void prom_text_u64(prom_text *t, const char *name, const char *const *labels,
                   size_t nlabels, uint64_t value);
void prom_text_double(prom_text *t, const char *name, const char *const *labels,
                      size_t nlabels, double value);

/* A histogram's samples: name_bucket{le="..."} cumulated from the
 * per-bucket counts (nbounds + 1 of them, the last one +Inf), name_sum and
 * name_count (the sum of every bucket). A bound is written as
 * bounds[i] / scale (scale 1e6 turns microseconds into seconds); sum is
 * written as given. */
void prom_text_histogram(prom_text *t, const char *name, const uint64_t *bounds,
                         size_t nbounds, double scale, const uint64_t *counts,
                         double sum);

/* Hands the text over: *out (malloc'd, free() it; NUL-terminated) and
 * *len. Returns 0, or ENOMEM when a write failed (nothing is handed over
 * and the buffer is freed). */
int prom_text_take(prom_text *t, char **out, size_t *len);

#endif /* SERVER_PROM_TEXT_H */
