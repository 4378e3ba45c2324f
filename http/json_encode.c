/*
 * json_encode.c — a protobuf-c message as JSON text (proto3's JSON
 * mapping, docs/http.md).
 *
 * Owns: which fields are written (proto3 defaults are left out; a oneof
 * member by its case, an optional field by its presence, a submessage
 * when set) and how each value is written: lowerCamelCase names, 64-bit
 * integers as strings, bytes as padded standard base64, enums by name,
 * "NaN"/"Infinity"/"-Infinity".
 * Invariant: what it writes, json_decode.c reads back into a message that
 * packs to the same bytes.
 * Never: writes a string that is not UTF-8 (an error instead); recurses
 * deeper than JSON_PB_MAX_DEPTH messages.
 */
#include "http/json_impl.h"
#include "http/json_pb.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int encode_message(struct json_walk *w, const ProtobufCMessage *m,
                          cJSON **out);

/* d as JSON; a float's value with the 9 digits that tell floats apart
 * rather than the 17 of its double. */
static cJSON *
encode_float(double d, bool is_float)
{
    char text[32];

    if (isnan(d)) {
        return cJSON_CreateString("NaN");
    }
    if (isinf(d)) {
        return cJSON_CreateString(d > 0 ? "Infinity" : "-Infinity");
    }
    if (d == 0 && signbit(d)) {
        return cJSON_CreateRaw("-0"); /* cJSON would write 0 */
    }
    if (is_float) {
        snprintf(text, sizeof(text), "%.9g", d);
        d = strtod(text, NULL);
    }
    return cJSON_CreateNumber(d);
}

static cJSON *
encode_bytes(const ProtobufCBinaryData *b)
{
    size_t n =
        sodium_base64_encoded_len(b->len, sodium_base64_VARIANT_ORIGINAL);
    char *text = malloc(n);
    cJSON *v;

    if (text == NULL) {
        return NULL;
    }
    sodium_bin2base64(text, n, b->len ? b->data : (const unsigned char *)"",
                      b->len, sodium_base64_VARIANT_ORIGINAL);
    v = cJSON_CreateString(text);
    free(text);
    return v;
}

static cJSON *
encode_enum(const ProtobufCFieldDescriptor *fd, int32_t value)
{
    const ProtobufCEnumValue *ev =
        protobuf_c_enum_descriptor_get_value(fd->descriptor, value);

    return ev != NULL ? cJSON_CreateString(ev->name)
                      : cJSON_CreateNumber((double)value);
}

/* One element at slot as a JSON value in *out. */
static int
encode_value(struct json_walk *w, const ProtobufCFieldDescriptor *fd,
             const void *slot, cJSON **out)
{
    char num[24];

    switch (fd->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        *out = cJSON_CreateNumber(*(const int32_t *)slot);
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        *out = cJSON_CreateNumber(*(const uint32_t *)slot);
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        snprintf(num, sizeof(num), "%" PRId64, *(const int64_t *)slot);
        *out = cJSON_CreateString(num);
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        snprintf(num, sizeof(num), "%" PRIu64, *(const uint64_t *)slot);
        *out = cJSON_CreateString(num);
        break;
    case PROTOBUF_C_TYPE_FLOAT:
        *out = encode_float(*(const float *)slot, true);
        break;
    case PROTOBUF_C_TYPE_DOUBLE:
        *out = encode_float(*(const double *)slot, false);
        break;
    case PROTOBUF_C_TYPE_BOOL:
        *out = cJSON_CreateBool(*(const protobuf_c_boolean *)slot);
        break;
    case PROTOBUF_C_TYPE_ENUM:
        *out = encode_enum(fd, *(const int32_t *)slot);
        break;
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)slot;

        if (s == NULL) {
            s = "";
        }
        if (!json_utf8_valid(s)) {
            return json_walk_fail(w, "string is not UTF-8");
        }
        *out = cJSON_CreateString(s);
        break;
    }
    case PROTOBUF_C_TYPE_BYTES:
        *out = encode_bytes(slot);
        break;
    case PROTOBUF_C_TYPE_MESSAGE:
        return encode_message(w, *(ProtobufCMessage *const *)slot, out);
    }
    return *out != NULL ? 0 : ENOMEM;
}

/* A proto3 field without presence that holds its default (left out). */
static bool
is_default(const ProtobufCFieldDescriptor *fd, const void *slot)
{
    static const char zero[sizeof(double)];

    switch (fd->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)slot;

        return s == NULL || s[0] == '\0';
    }
    case PROTOBUF_C_TYPE_BYTES:
        return ((const ProtobufCBinaryData *)slot)->len == 0;
    case PROTOBUF_C_TYPE_MESSAGE:
        return *(void *const *)slot == NULL;
    default:
        /* bit pattern, as protobuf-c's packer decides: -0.0 is written */
        return memcmp(slot, zero, json_field_size(fd)) == 0;
    }
}

/* Whether fd is written at all. */
static bool
is_present(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *fd)
{
    const char *q = (const char *)m + fd->quantifier_offset;

    if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
        return *(const size_t *)q > 0;
    }
    if (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        return *(const uint32_t *)q == fd->id;
    }
    if (fd->label == PROTOBUF_C_LABEL_REQUIRED) {
        return true;
    }
    if (fd->label == PROTOBUF_C_LABEL_OPTIONAL &&
        fd->type != PROTOBUF_C_TYPE_STRING &&
        fd->type != PROTOBUF_C_TYPE_MESSAGE) {
        return *(const protobuf_c_boolean *)q != 0;
    }
    if (fd->label == PROTOBUF_C_LABEL_OPTIONAL) {
        return *(void *const *)json_field_at(m, fd, 0) != NULL;
    }
    return !is_default(fd, json_field_at(m, fd, 0));
}

static int
encode_field(struct json_walk *w, const ProtobufCMessage *m,
             const ProtobufCFieldDescriptor *fd, cJSON **out)
{
    size_t n;
    cJSON *arr, *e = NULL;
    int rv;

    if (fd->label != PROTOBUF_C_LABEL_REPEATED) {
        return encode_value(w, fd, json_field_at(m, fd, 0), out);
    }
    if ((arr = cJSON_CreateArray()) == NULL) {
        return ENOMEM;
    }
    n = *json_field_count(m, fd);
    for (size_t i = 0; i < n; i++) {
        size_t plen = json_walk_index(w, i);

        if ((rv = encode_value(w, fd, json_field_at(m, fd, i), &e)) != 0) {
            cJSON_Delete(arr);
            return rv;
        }
        cJSON_AddItemToArray(arr, e);
        json_walk_pop(w, plen);
    }
    *out = arr;
    return 0;
}

static int
encode_message(struct json_walk *w, const ProtobufCMessage *m, cJSON **out)
{
    const ProtobufCMessageDescriptor *desc = m->descriptor;
    char camel[JSON_NAME_MAX];
    cJSON *obj, *v;
    int rv = 0;

    if (w->depth >= JSON_PB_MAX_DEPTH) {
        return json_walk_fail(w, "messages nested too deep");
    }
    if ((obj = cJSON_CreateObject()) == NULL) {
        return ENOMEM;
    }
    w->depth++;
    for (unsigned i = 0; i < desc->n_fields && rv == 0; i++) {
        const ProtobufCFieldDescriptor *fd = &desc->fields[i];
        size_t plen;

        if (!is_present(m, fd)) {
            continue;
        }
        if (!json_field_camel(fd, camel)) {
            rv = json_walk_fail(w, "field name too long");
            break;
        }
        plen = json_walk_push(w, camel);
        if ((rv = encode_field(w, m, fd, &v)) == 0) {
            cJSON_AddItemToObject(obj, camel, v);
            json_walk_pop(w, plen);
        }
    }
    w->depth--;
    if (rv != 0) {
        cJSON_Delete(obj);
        return rv;
    }
    *out = obj;
    return 0;
}

int
json_pb_encode(const ProtobufCMessage *m, char **out, size_t *outlen, char *err,
               size_t errlen)
{
    struct json_walk w = {.err = err, .errlen = errlen};
    cJSON *root = NULL;
    int rv;

    *out = NULL;
    if ((rv = encode_message(&w, m, &root)) != 0) {
        return rv;
    }
    *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (*out == NULL) {
        return ENOMEM;
    }
    *outlen = strlen(*out);
    return 0;
}
