/*
 * json_out.h — writing one JSON object, for oncectl --json.
 *
 * Owns: string escaping (quotes, backslashes, control characters, and
 * invalid UTF-8 replaced by U+FFFD so the output is always valid JSON) and
 * the commas between members and array elements, and the error object
 * every oncectl failure prints. One level of nesting is
 * enough for oncectl: a member may be an array of flat objects.
 * Never: buffers output; never writes anything but the object and a final
 * newline.
 */
#ifndef CLIENT_JSON_OUT_H
#define CLIENT_JSON_OUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct json_obj {
    FILE *f;
    int members; /* members written so far */
    int elems;   /* elements of the array member being written */
} json_obj;

/* One whole object {"code":...,"reason":...,"message":...}: how oncectl
 * reports a failure with --json. */
void json_error(FILE *f, const char *code, const char *reason,
                const char *message);

/* Writes "{" to f. */
void json_begin(json_obj *j, FILE *f);

/* One member each; key is written escaped too. */
void json_str(json_obj *j, const char *key, const char *val);
void json_u64(json_obj *j, const char *key, uint64_t v);
void json_i64(json_obj *j, const char *key, int64_t v);
void json_bool(json_obj *j, const char *key, bool v);

/* Starts an array member: "key":[ . Its elements are objects, each
 * written with json_elem_begin, member calls on the element, and
 * json_elem_end; json_arr_end closes the array. */
void json_arr_begin(json_obj *j, const char *key);
void json_arr_end(json_obj *j);
void json_elem_begin(json_obj *arr, json_obj *e);
void json_elem_end(json_obj *e);

/* Writes "}\n" and flushes. */
void json_end(json_obj *j);

/* Writes s as a quoted, escaped JSON string. */
void json_write_string(FILE *f, const char *s);

/* Writes a finite v as a JSON number (round-trip precision); NaN and the
 * infinities, which JSON cannot express, as null. */
void json_write_f64(FILE *f, double v);

/* Starts a member: the comma before it, then "key": ; the caller writes
 * the value to j->f. */
void json_key(json_obj *j, const char *key);

#endif /* CLIENT_JSON_OUT_H */
