/*
 * json_scalar.c — one JSON value into one scalar field of a protobuf-c
 * message: numbers, booleans, strings, base64 bytes, enums.
 *
 * Owns: proto3's JSON rules for scalars on input: 64-bit integers from
 * strings or exact integral numbers, 32-bit ones from numbers or numeric
 * strings, "NaN"/"Infinity"/"-Infinity", standard or URL-safe base64,
 * padded or not, enums by name or number.
 * Invariant: a value out of its type's range, a fraction for an integer,
 * or a JSON type the field does not take is an error, never a silent
 * truncation; strings and bytes are malloc'd as protobuf-c frees them.
 * Never: stores into the slot on error.
 */
#include "http/json_impl.h"
#include "base/number.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* 2^53: from here on a double cannot tell n from n + 1. */
#define EXACT_MAX 9007199254740992.0

struct integer {
    bool neg;
    uint64_t mag;
};

static int
integer_from_text(struct json_walk *w, const char *s, struct integer *out)
{
    uint64_t mag;
    int rv;

    out->neg = (s[0] == '-');
    rv = number_parse_u64_all(s + (out->neg ? 1 : 0), &mag);
    if (rv == ERANGE) {
        return json_walk_fail(w, "integer out of range");
    }
    if (rv != 0) {
        return json_walk_fail(w, "expected an integer");
    }
    out->mag = mag;
    return 0;
}

static int
integer_read(struct json_walk *w, const cJSON *v, bool wide,
             struct integer *out)
{
    double d;

    if (cJSON_IsString(v)) {
        return integer_from_text(w, v->valuestring, out);
    }
    if (!cJSON_IsNumber(v)) {
        return json_walk_fail(w, "expected an integer");
    }
    d = v->valuedouble;
    if (!isfinite(d)) {
        return json_walk_fail(w, "integer out of range");
    }
    if (d != floor(d)) {
        return json_walk_fail(w, "expected an integer, not a fraction");
    }
    if (fabs(d) >= EXACT_MAX) {
        return json_walk_fail(
            w, wide ? "integer too large for a JSON number: send it as a string"
                    : "integer out of range");
    }
    out->neg = d < 0;
    out->mag = (uint64_t)fabs(d);
    return 0;
}

/* Checks *in against [-neg_max, pos_max] and stores it as the type asks. */
static int
integer_store(struct json_walk *w, const ProtobufCFieldDescriptor *fd,
              const struct integer *in, void *slot)
{
    bool is64 = json_field_size(fd) == 8;
    bool is_signed = fd->type == PROTOBUF_C_TYPE_INT32 ||
                     fd->type == PROTOBUF_C_TYPE_SINT32 ||
                     fd->type == PROTOBUF_C_TYPE_SFIXED32 ||
                     fd->type == PROTOBUF_C_TYPE_INT64 ||
                     fd->type == PROTOBUF_C_TYPE_SINT64 ||
                     fd->type == PROTOBUF_C_TYPE_SFIXED64 ||
                     fd->type == PROTOBUF_C_TYPE_ENUM;
    uint64_t pos_max = is64 ? (is_signed ? INT64_MAX : UINT64_MAX)
                            : (is_signed ? INT32_MAX : UINT32_MAX);
    uint64_t neg_max = is_signed ? pos_max + 1 : 0;

    if (in->mag > (in->neg ? neg_max : pos_max)) {
        return json_walk_fail(w, "integer out of range");
    }
    if (is64 && is_signed) {
        *(int64_t *)slot = in->neg ? (int64_t)(0 - in->mag) : (int64_t)in->mag;
    } else if (is64) {
        *(uint64_t *)slot = in->mag;
    } else if (is_signed) {
        *(int32_t *)slot =
            in->neg ? (int32_t)(0 - (uint32_t)in->mag) : (int32_t)in->mag;
    } else {
        *(uint32_t *)slot = (uint32_t)in->mag;
    }
    return 0;
}

static int
float_read(struct json_walk *w, const ProtobufCFieldDescriptor *fd,
           const cJSON *v, void *slot)
{
    double d;

    if (cJSON_IsNumber(v)) {
        d = v->valuedouble;
        if (!isfinite(d)) {
            return json_walk_fail(w, "number out of range");
        }
    } else if (cJSON_IsString(v)) {
        const char *s = v->valuestring;
        char *end;

        if (strcmp(s, "NaN") == 0) {
            d = NAN;
        } else if (strcmp(s, "Infinity") == 0) {
            d = INFINITY;
        } else if (strcmp(s, "-Infinity") == 0) {
            d = -INFINITY;
        } else {
            errno = 0;
            d = strtod(s, &end);
            if (s[0] == '\0' || *end != '\0' || s[0] == ' ' || !isfinite(d) ||
                errno == ERANGE) {
                return json_walk_fail(w, "expected a number");
            }
        }
    } else {
        return json_walk_fail(w, "expected a number");
    }
    if (fd->type == PROTOBUF_C_TYPE_DOUBLE) {
        *(double *)slot = d;
    } else if (isfinite(d) && fabs(d) > FLT_MAX) {
        return json_walk_fail(w, "number out of range for a float");
    } else {
        *(float *)slot = (float)d;
    }
    return 0;
}

static int
bytes_read(struct json_walk *w, const cJSON *v, ProtobufCBinaryData *slot)
{
    const char *s;
    size_t len, max, got;
    int variant;
    unsigned char *bin;

    if (!cJSON_IsString(v)) {
        return json_walk_fail(w, "expected base64 text");
    }
    s = v->valuestring;
    len = strlen(s);
    if (strpbrk(s, "-_") != NULL) {
        variant = sodium_base64_VARIANT_URLSAFE;
    } else {
        variant = sodium_base64_VARIANT_ORIGINAL;
    }
    if (len == 0 || s[len - 1] != '=') {
        variant = variant == sodium_base64_VARIANT_URLSAFE
                      ? sodium_base64_VARIANT_URLSAFE_NO_PADDING
                      : sodium_base64_VARIANT_ORIGINAL_NO_PADDING;
    }
    max = len / 4 * 3 + 3;
    if ((bin = malloc(max)) == NULL) {
        return ENOMEM;
    }
    if (sodium_base642bin(bin, max, s, len, NULL, &got, NULL, variant) != 0) {
        free(bin);
        return json_walk_fail(w, "invalid base64");
    }
    if (got == 0) {
        free(bin);
        bin = NULL;
    }
    slot->data = bin;
    slot->len = got;
    return 0;
}

static int
string_read(struct json_walk *w, const cJSON *v, char **slot)
{
    char *copy;

    if (!cJSON_IsString(v)) {
        return json_walk_fail(w, "expected a string");
    }
    if (!json_utf8_valid(v->valuestring)) {
        return json_walk_fail(w, "invalid UTF-8");
    }
    if ((copy = strdup(v->valuestring)) == NULL) {
        return ENOMEM;
    }
    *slot = copy;
    return 0;
}

static int
enum_read(struct json_walk *w, const ProtobufCFieldDescriptor *fd,
          const cJSON *v, void *slot)
{
    const ProtobufCEnumDescriptor *ed = fd->descriptor;
    struct integer n;
    int rv;

    if (cJSON_IsString(v)) {
        const ProtobufCEnumValue *ev =
            protobuf_c_enum_descriptor_get_value_by_name(ed, v->valuestring);

        if (ev == NULL) {
            return json_walk_fail(w, "unknown enum value name");
        }
        *(int32_t *)slot = ev->value;
        return 0;
    }
    if (!cJSON_IsNumber(v)) {
        return json_walk_fail(w, "expected an enum name or number");
    }
    if ((rv = integer_read(w, v, false, &n)) != 0) {
        return rv;
    }
    return integer_store(w, fd, &n, slot);
}

int
json_scalar_read(struct json_walk *w, const ProtobufCFieldDescriptor *fd,
                 const cJSON *v, void *slot)
{
    struct integer n;
    int rv;

    switch (fd->type) {
    case PROTOBUF_C_TYPE_BOOL:
        if (!cJSON_IsBool(v)) {
            return json_walk_fail(w, "expected true or false");
        }
        *(protobuf_c_boolean *)slot = cJSON_IsTrue(v) ? 1 : 0;
        return 0;
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE:
        return float_read(w, fd, v, slot);
    case PROTOBUF_C_TYPE_STRING:
        return string_read(w, v, slot);
    case PROTOBUF_C_TYPE_BYTES:
        return bytes_read(w, v, slot);
    case PROTOBUF_C_TYPE_ENUM:
        return enum_read(w, fd, v, slot);
    case PROTOBUF_C_TYPE_MESSAGE:
        return json_walk_fail(w, "expected an object");
    default:
        break;
    }
    if ((rv = integer_read(w, v, json_field_size(fd) == 8, &n)) != 0) {
        return rv;
    }
    return integer_store(w, fd, &n, slot);
}
