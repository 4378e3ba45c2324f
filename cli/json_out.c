/*
 * json_out.c — a flat JSON object writer with proper string escaping.
 *
 * Owns: the escaping rules of RFC 8259 section 7, UTF-8 validation, and
 * the separators of members and array elements, and oncectl's error
 * object (json_error).
 * Never: emits bytes that are not valid UTF-8 inside a string.
 */
#include "cli/json_out.h"

#include <inttypes.h>
#include <math.h>

/* Length of the valid UTF-8 sequence at p (1-4), or 0 when it is not one
 * (bad lead byte, bad continuation, overlong, surrogate, > U+10FFFF). */
static int
json_utf8_len(const unsigned char *p)
{
    unsigned c = p[0];

    if (c < 0x80) {
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        return (p[1] & 0xc0) == 0x80 ? 2 : 0;
    }
    if (c >= 0xe0 && c <= 0xef) {
        if ((p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80) {
            return 0;
        }
        if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0)) {
            return 0; /* overlong or surrogate */
        }
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if ((p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 ||
            (p[3] & 0xc0) != 0x80) {
            return 0;
        }
        if ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90)) {
            return 0; /* overlong or beyond U+10FFFF */
        }
        return 4;
    }
    return 0;
}

void
json_write_string(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s != NULL ? s : "");

    fputc('"', f);
    while (*p != '\0') {
        int n;

        switch (*p) {
        case '"':
            fputs("\\\"", f);
            p++;
            continue;
        case '\\':
            fputs("\\\\", f);
            p++;
            continue;
        case '\n':
            fputs("\\n", f);
            p++;
            continue;
        case '\r':
            fputs("\\r", f);
            p++;
            continue;
        case '\t':
            fputs("\\t", f);
            p++;
            continue;
        default:
            break;
        }
        if (*p < 0x20 || *p == 0x7f) {
            fprintf(f, "\\u%04x", *p);
            p++;
            continue;
        }
        /* Continuation bytes are checked one at a time, so the NUL at the
         * end stops a truncated sequence before it is read past. */
        if ((n = json_utf8_len(p)) == 0) {
            fputs("\\ufffd", f);
            p++;
            continue;
        }
        fwrite(p, 1, (size_t)n, f);
        p += n;
    }
    fputc('"', f);
}

void
json_key(json_obj *j, const char *key)
{
    if (j->members++ > 0) {
        fputc(',', j->f);
    }
    json_write_string(j->f, key);
    fputc(':', j->f);
}

void
json_begin(json_obj *j, FILE *f)
{
    j->f = f;
    j->members = 0;
    j->elems = 0;
    fputc('{', f);
}

void
json_str(json_obj *j, const char *key, const char *val)
{
    json_key(j, key);
    json_write_string(j->f, val);
}

void
json_u64(json_obj *j, const char *key, uint64_t v)
{
    json_key(j, key);
    fprintf(j->f, "%" PRIu64, v);
}

void
json_i64(json_obj *j, const char *key, int64_t v)
{
    json_key(j, key);
    fprintf(j->f, "%" PRId64, v);
}

void
json_bool(json_obj *j, const char *key, bool v)
{
    json_key(j, key);
    fputs(v ? "true" : "false", j->f);
}

void
json_write_f64(FILE *f, double v)
{
    if (isfinite(v)) {
        fprintf(f, "%.17g", v);
    } else {
        fputs("null", f);
    }
}

void
json_end(json_obj *j)
{
    fputs("}\n", j->f);
    fflush(j->f);
}

void
json_arr_begin(json_obj *j, const char *key)
{
    json_key(j, key);
    j->elems = 0;
    fputc('[', j->f);
}

void
json_arr_end(json_obj *j)
{
    fputc(']', j->f);
}

void
json_elem_begin(json_obj *arr, json_obj *e)
{
    if (arr->elems++ > 0) {
        fputc(',', arr->f);
    }
    e->f = arr->f;
    e->members = 0;
    e->elems = 0;
    fputc('{', e->f);
}

void
json_elem_end(json_obj *e)
{
    fputc('}', e->f);
}

void
json_error(FILE *f, const char *code, const char *reason, const char *message)
{
    json_obj j;

    json_begin(&j, f);
    json_str(&j, "code", code);
    json_str(&j, "reason", reason);
    json_str(&j, "message", message);
    json_end(&j);
}
