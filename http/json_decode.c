/*
 * json_decode.c — JSON text into a protobuf-c message of a given
 * descriptor (proto3's JSON mapping, docs/http.md).
 *
 * Owns: parsing the text (cJSON), walking objects field by field (by
 * lowerCamelCase or original name), arrays into repeated fields, nested
 * messages, oneof cases and presence, and the message's memory.
 * Invariant: at every step the message under construction is one that
 * protobuf_c_message_free_unpacked(m, NULL) frees completely (arrays are
 * zeroed and counted before their elements are read; a value is stored
 * only once read whole), so an error anywhere frees everything.
 * Never: accepts a field twice, an unknown field, two members of one
 * oneof, trailing bytes after the object, or messages nested deeper than
 * JSON_PB_MAX_DEPTH, or a string holding \u0000 (cJSON would cut it
 * short); recurses but by message depth.
 */
#include "http/json_impl.h"
#include "http/json_pb.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int decode_message(struct json_walk *w,
                          const ProtobufCMessageDescriptor *desc,
                          const cJSON *obj, ProtobufCMessage **out);

/* One element (a repeated field's or a singular field's value) at slot. */
static int
decode_value(struct json_walk *w, const ProtobufCFieldDescriptor *fd,
             const cJSON *v, void *slot)
{
    if (fd->type == PROTOBUF_C_TYPE_MESSAGE) {
        return decode_message(w, fd->descriptor, v, slot);
    }
    return json_scalar_read(w, fd, v, slot);
}

static int
decode_repeated(struct json_walk *w, ProtobufCMessage *m,
                const ProtobufCFieldDescriptor *fd, const cJSON *v)
{
    size_t n, i = 0;
    void *arr;
    const cJSON *e;
    int rv;

    if (!cJSON_IsArray(v)) {
        return json_walk_fail(w, "expected an array");
    }
    n = (size_t)cJSON_GetArraySize(v);
    if (n == 0) {
        return 0;
    }
    if ((arr = calloc(n, json_field_size(fd))) == NULL) {
        return ENOMEM;
    }
    *(void **)((char *)m + fd->offset) = arr;
    *json_field_count(m, fd) = n;
    cJSON_ArrayForEach(e, v)
    {
        size_t plen = json_walk_index(w, i);

        if (cJSON_IsNull(e)) {
            rv = json_walk_fail(w, "null in an array");
        } else {
            rv = decode_value(w, fd, e, json_field_at(m, fd, i));
        }
        if (rv != 0) {
            return rv;
        }
        json_walk_pop(w, plen);
        i++;
    }
    return 0;
}

/* A singular field: its value, then its oneof case or presence flag. */
static int
decode_singular(struct json_walk *w, ProtobufCMessage *m,
                const ProtobufCFieldDescriptor *fd, const cJSON *v)
{
    uint32_t *oneof_case = NULL;
    int rv;

    if (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        oneof_case = (uint32_t *)((char *)m + fd->quantifier_offset);
        if (*oneof_case != 0) {
            return json_walk_fail(w, "another member of its oneof is set");
        }
    }
    if ((rv = decode_value(w, fd, v, json_field_at(m, fd, 0))) != 0) {
        return rv;
    }
    if (oneof_case != NULL) {
        *oneof_case = fd->id;
    } else if (fd->label == PROTOBUF_C_LABEL_OPTIONAL &&
               fd->type != PROTOBUF_C_TYPE_STRING &&
               fd->type != PROTOBUF_C_TYPE_MESSAGE) {
        *(protobuf_c_boolean *)((char *)m + fd->quantifier_offset) = 1;
    }
    return 0;
}

/* The key as a path element: itself when it looks like a name. */
static const char *
key_for_path(const char *key)
{
    size_t n = strspn(key, "abcdefghijklmnopqrstuvwxyz"
                           "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");

    return (n > 0 && n <= 64 && key[n] == '\0') ? key : "?";
}

static int
decode_fields(struct json_walk *w, ProtobufCMessage *m, const cJSON *obj,
              unsigned char *seen)
{
    const ProtobufCMessageDescriptor *desc = m->descriptor;
    char camel[JSON_NAME_MAX];
    const cJSON *v;
    int rv = 0;

    cJSON_ArrayForEach(v, obj)
    {
        const ProtobufCFieldDescriptor *fd = json_field_find(desc, v->string);
        size_t plen;

        if (fd == NULL) {
            json_walk_push(w, key_for_path(v->string));
            return json_walk_fail(w, "unknown field");
        }
        plen =
            json_walk_push(w, json_field_camel(fd, camel) ? camel : fd->name);
        if (seen[fd - desc->fields]++ != 0) {
            return json_walk_fail(w, "given twice");
        }
        if (cJSON_IsNull(v)) {
            rv = 0; /* null: the field keeps its default */
        } else if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
            rv = decode_repeated(w, m, fd, v);
        } else {
            rv = decode_singular(w, m, fd, v);
        }
        if (rv != 0) {
            return rv;
        }
        json_walk_pop(w, plen);
    }
    return 0;
}

static int
decode_message(struct json_walk *w, const ProtobufCMessageDescriptor *desc,
               const cJSON *obj, ProtobufCMessage **out)
{
    ProtobufCMessage *m;
    unsigned char *seen;
    int rv;

    if (!cJSON_IsObject(obj)) {
        return json_walk_fail(w, "expected an object");
    }
    if (w->depth >= JSON_PB_MAX_DEPTH) {
        return json_walk_fail(w, "messages nested too deep");
    }
    if ((m = malloc(desc->sizeof_message)) == NULL) {
        return ENOMEM;
    }
    desc->message_init(m);
    if ((seen = calloc(desc->n_fields + 1, 1)) == NULL) {
        free(m);
        return ENOMEM;
    }
    w->depth++;
    rv = decode_fields(w, m, obj, seen);
    w->depth--;
    free(seen);
    if (rv != 0) {
        protobuf_c_message_free_unpacked(m, NULL);
        return rv;
    }
    *out = m;
    return 0;
}

/* Whether text holds the escape \u0000: cJSON would end the string there
 * and hand on what comes before it as the whole string (or key). A
 * backslash inside a string always starts an escape, outside one the text
 * is not JSON anyway. */
static bool
has_nul_escape(const char *text, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (text[i] != '\\') {
            continue;
        }
        if (text[i + 1] == 'u' && i + 5 < len &&
            memcmp(text + i + 2, "0000", 4) == 0) {
            return true;
        }
        i++; /* the escaped character */
    }
    return false;
}

int
json_pb_decode(const ProtobufCMessageDescriptor *desc, const char *text,
               size_t len, ProtobufCMessage **out, char *err, size_t errlen)
{
    struct json_walk w = {.err = err, .errlen = errlen};
    const char *end = NULL;
    cJSON *root;
    int rv;

    *out = NULL;
    if (has_nul_escape(text, len)) {
        return json_walk_fail(&w, "\\u0000 in a string");
    }
    root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (root == NULL) {
        return json_walk_fail(&w, "not valid JSON");
    }
    while (end < text + len && *end != '\0' && strchr(" \t\r\n", *end)) {
        end++;
    }
    if (end != text + len) {
        rv = json_walk_fail(&w, "bytes after the JSON value");
    } else {
        rv = decode_message(&w, desc, root, out);
    }
    cJSON_Delete(root);
    return rv;
}
