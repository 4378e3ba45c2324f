/*
 * json_out.h — writing one flat JSON object, for oncectl --json.
 *
 * Owns: string escaping (quotes, backslashes, control characters, and
 * invalid UTF-8 replaced by U+FFFD so the output is always valid JSON) and
 * the commas between members.
 * Never: nests objects or buffers output; never writes anything but the
 * object and a final newline.
 */
#ifndef CLIENT_JSON_OUT_H
#define CLIENT_JSON_OUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct json_obj {
    FILE *f;
    int members; /* members written so far */
} json_obj;

/* Writes "{" to f. */
void json_begin(json_obj *j, FILE *f);

/* One member each; key is written escaped too. */
void json_str(json_obj *j, const char *key, const char *val);
void json_u64(json_obj *j, const char *key, uint64_t v);
void json_i64(json_obj *j, const char *key, int64_t v);
void json_bool(json_obj *j, const char *key, bool v);
/* A finite double as a JSON number (round-trip precision); NaN and the
 * infinities, which JSON cannot express, as null. */
void json_f64(json_obj *j, const char *key, double v);

/* Writes "}\n" and flushes. */
void json_end(json_obj *j);

/* Writes s as a quoted, escaped JSON string. */
void json_write_string(FILE *f, const char *s);

#endif /* CLIENT_JSON_OUT_H */
