/*
 * json_impl.h — what the files of the JSON mapping share (json_field.c,
 * json_decode.c, json_scalar.c, json_encode.c); not part of json_pb.h.
 *
 * Owns: a walk's state (the field path for error text, the depth), where a
 * field's elements live in a message, the JSON name of a field.
 * Invariant: the path always holds a NUL-terminated prefix of the real
 * path; a push is undone by the pop of the length it returned.
 * Never: allocates.
 */
#ifndef HTTP_JSON_IMPL_H
#define HTTP_JSON_IMPL_H

#include <cjson/cJSON.h>
#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>

/* The longest field name we write in lowerCamelCase (and read). */
#define JSON_NAME_MAX 128

struct json_walk {
    char path[256]; /* "lease.ttlMs", "results[1].put" */
    size_t plen;
    int depth; /* messages entered, the top one is 1 */
    char *err; /* the caller's error buffer */
    size_t errlen;
};

/* Appends ".name" (or "name" at the top) to the path; the old length. */
size_t json_walk_push(struct json_walk *w, const char *name);
/* Appends "[i]" to the path; the old length. */
size_t json_walk_index(struct json_walk *w, size_t i);
/* Back to the length a push returned. */
void json_walk_pop(struct json_walk *w, size_t plen);
/* Writes `field "PATH": what` (or `body: what` at the top) into the error
 * buffer; returns EINVAL. */
int json_walk_fail(struct json_walk *w, const char *what);

/* Bytes one element of fd takes in a message (or a repeated array). */
size_t json_field_size(const ProtobufCFieldDescriptor *fd);
/* The address of fd's value in m, or of element i of a repeated fd. */
void *json_field_at(const ProtobufCMessage *m,
                    const ProtobufCFieldDescriptor *fd, size_t i);
/* The element count of a repeated fd in m (its quantifier). */
size_t *json_field_count(const ProtobufCMessage *m,
                         const ProtobufCFieldDescriptor *fd);
/* fd's name in lowerCamelCase ("ttl_ms" -> "ttlMs") into out[JSON_NAME_MAX];
 * false when it does not fit. */
bool json_field_camel(const ProtobufCFieldDescriptor *fd, char *out);
/* The field of desc whose lowerCamelCase or original name is key. */
const ProtobufCFieldDescriptor *
json_field_find(const ProtobufCMessageDescriptor *desc, const char *key);
/* s is valid UTF-8 (no overlong forms, no surrogates, at most U+10FFFF). */
bool json_utf8_valid(const char *s);

/* Stores the JSON value v as one element of scalar (non-message) field fd
 * at slot. 0, or EINVAL/ENOMEM with the error written (json_scalar.c). */
int json_scalar_read(struct json_walk *w, const ProtobufCFieldDescriptor *fd,
                     const cJSON *v, void *slot);

#endif /* HTTP_JSON_IMPL_H */
