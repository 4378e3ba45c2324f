/*
 * field_scan.c — the bounded field count before a decode (field_scan.h).
 */
#include "proto/field_scan.h"

#include <string.h>

#include "proto/reasons.h"

bool
field_scan_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;

    for (unsigned shift = 0; shift < 70 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;

        x |= (uint64_t)(b & 0x7f) << shift;
        if ((b & 0x80) == 0) {
            *v = x;
            return true;
        }
    }
    return false;
}

typedef struct scan_ctx {
    uint32_t count_number;
    size_t count_max;
    field_scan_counts *out;
} scan_ctx;

static field_scan_result scan_message(const scan_ctx *sc,
                                      const ProtobufCMessageDescriptor *d,
                                      const uint8_t *p, const uint8_t *end,
                                      unsigned depth);

/* Counts the field numbered number of d (at depth) and checks the caps. */
static field_scan_result
scan_count(const scan_ctx *sc, const ProtobufCFieldDescriptor *f,
           uint32_t number, unsigned depth)
{
    field_scan_counts *o = sc->out;

    if (++o->fields > FIELD_SCAN_FIELDS_MAX) {
        return FIELD_SCAN_TOO_MANY_FIELDS;
    }
    if (f == NULL && ++o->unknown > FIELD_SCAN_UNKNOWN_MAX) {
        return FIELD_SCAN_TOO_MANY_UNKNOWN;
    }
    if (depth == 0 && number == sc->count_number &&
        ++o->counted > sc->count_max) {
        return FIELD_SCAN_COUNT_EXCEEDED;
    }
    return FIELD_SCAN_OK;
}

/* Skips (or, for a message field of d, enters) one length-delimited
 * value at *p. */
static field_scan_result
scan_bytes(const scan_ctx *sc, const ProtobufCFieldDescriptor *f,
           const uint8_t **p, const uint8_t *end, unsigned depth)
{
    uint64_t n;
    field_scan_result r = FIELD_SCAN_OK;

    if (!field_scan_varint(p, end, &n) || n > (uint64_t)(end - *p)) {
        return FIELD_SCAN_MALFORMED;
    }
    if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE) {
        if (depth + 1 >= FIELD_SCAN_DEPTH_MAX) {
            return FIELD_SCAN_TOO_DEEP;
        }
        r = scan_message(sc, f->descriptor, *p, *p + n, depth + 1);
    }
    *p += n;
    return r;
}

static field_scan_result
scan_message(const scan_ctx *sc, const ProtobufCMessageDescriptor *d,
             const uint8_t *p, const uint8_t *end, unsigned depth)
{
    while (p < end) {
        uint64_t key, n;
        const ProtobufCFieldDescriptor *f;
        field_scan_result r;

        if (!field_scan_varint(&p, end, &key) || (key >> 3) == 0 ||
            (key >> 3) > UINT32_MAX) {
            return FIELD_SCAN_MALFORMED;
        }
        f = protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3));
        if ((r = scan_count(sc, f, (uint32_t)(key >> 3), depth)) !=
            FIELD_SCAN_OK) {
            return r;
        }
        switch (key & 7) {
        case 0: /* varint */
            if (!field_scan_varint(&p, end, &n)) {
                return FIELD_SCAN_MALFORMED;
            }
            break;
        case 1: /* 64-bit */
        case 5: /* 32-bit */
            if ((size_t)(end - p) < ((key & 7) == 1 ? 8u : 4u)) {
                return FIELD_SCAN_MALFORMED;
            }
            p += (key & 7) == 1 ? 8 : 4;
            break;
        case 2: /* length-delimited */
            if ((r = scan_bytes(sc, f, &p, end, depth)) != FIELD_SCAN_OK) {
                return r;
            }
            break;
        default: /* groups (3, 4) and 6, 7: never in these protos */
            return FIELD_SCAN_MALFORMED;
        }
    }
    return FIELD_SCAN_OK;
}

field_scan_result
field_scan(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t len,
           uint32_t count_number, size_t count_max, field_scan_counts *out)
{
    scan_ctx sc = {count_number, count_max, out};

    memset(out, 0, sizeof(*out));
    if (buf == NULL) {
        return len > 0 ? FIELD_SCAN_MALFORMED : FIELD_SCAN_OK;
    }
    return scan_message(&sc, d, buf, buf + len, 0);
}

const char *
field_scan_reason(field_scan_result r)
{
    return r == FIELD_SCAN_MALFORMED ? REASON_MALFORMED_PAYLOAD
                                     : REASON_TOO_MANY_FIELDS;
}

const char *
field_scan_why(field_scan_result r)
{
    switch (r) {
    case FIELD_SCAN_TOO_MANY_FIELDS:
        return "more than 16384 fields";
    case FIELD_SCAN_TOO_MANY_UNKNOWN:
        return "more than 64 fields its type does not name";
    case FIELD_SCAN_TOO_DEEP:
        return "messages nested more than 16 deep";
    case FIELD_SCAN_COUNT_EXCEEDED:
        return "too many entries";
    default:
        return "bytes that are not protobuf fields";
    }
}
