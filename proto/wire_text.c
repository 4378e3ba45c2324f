/*
 * wire_text.c — exact text in string fields (wire_text.h).
 */
#include "proto/wire_text.h"

#include "proto/field_scan.h"

#include <stdio.h>
#include <string.h>

#define WT_VARINT  0
#define WT_FIXED64 1
#define WT_LEN     2
#define WT_FIXED32 5

bool
wire_text_ok(const uint8_t *s, size_t len)
{
    size_t i = 0;

    while (i < len) {
        uint8_t b = s[i];
        size_t n;
        uint32_t cp, min;

        if (b == 0) {
            return false;
        }
        if (b < 0x80) {
            i++;
            continue;
        }
        if ((b & 0xe0) == 0xc0) {
            n = 1, cp = b & 0x1f, min = 0x80;
        } else if ((b & 0xf0) == 0xe0) {
            n = 2, cp = b & 0x0f, min = 0x800;
        } else if ((b & 0xf8) == 0xf0) {
            n = 3, cp = b & 0x07, min = 0x10000;
        } else {
            return false; /* a continuation byte or 0xf8..0xff */
        }
        if (len - i <= n) {
            return false; /* truncated */
        }
        for (size_t k = 1; k <= n; k++) {
            if ((s[i + k] & 0xc0) != 0x80) {
                return false;
            }
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
            return false;
        }
        i += n + 1;
    }
    return true;
}

/* Appends ".name" (or "name" at the start) to the path. */
static void
path_push(char *field, size_t fieldlen, const char *name)
{
    size_t used = strlen(field);

    if (used < fieldlen) {
        snprintf(field + used, fieldlen - used, "%s%s", used > 0 ? "." : "",
                 name);
    }
}

static bool
walk(const ProtobufCMessageDescriptor *desc, const uint8_t *p,
     const uint8_t *end, int depth, char *field, size_t fieldlen,
     const char **why)
{
    while (p < end) {
        const ProtobufCFieldDescriptor *f;
        uint64_t key, n;

        if (!field_scan_varint(&p, end, &key)) {
            return true; /* malformed: the decoder's to refuse */
        }
        switch (key & 7) {
        case WT_VARINT:
            if (!field_scan_varint(&p, end, &n)) {
                return true;
            }
            continue;
        case WT_FIXED64:
            if ((size_t)(end - p) < 8) {
                return true;
            }
            p += 8;
            continue;
        case WT_FIXED32:
            if ((size_t)(end - p) < 4) {
                return true;
            }
            p += 4;
            continue;
        case WT_LEN:
            break;
        default:
            return true; /* groups: protobuf-c refuses them */
        }
        if (!field_scan_varint(&p, end, &n) || n > (uint64_t)(end - p)) {
            return true;
        }
        f = key >> 3 <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(
                                         desc, (unsigned)(key >> 3))
                                   : NULL;
        if (f != NULL && f->type == PROTOBUF_C_TYPE_STRING &&
            !wire_text_ok(p, (size_t)n)) {
            path_push(field, fieldlen, f->name);
            *why = memchr(p, 0, (size_t)n) != NULL ? "holds a NUL byte"
                                                   : "is not valid UTF-8";
            return false;
        }
        if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE &&
            depth < WIRE_TEXT_DEPTH_MAX) {
            size_t used = strlen(field);

            path_push(field, fieldlen, f->name);
            if (!walk(f->descriptor, p, p + n, depth + 1, field, fieldlen,
                      why)) {
                return false;
            }
            field[used] = '\0';
        }
        p += n;
    }
    return true;
}

bool
wire_text_check(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                size_t len, char *field, size_t fieldlen, const char **why)
{
    if (fieldlen > 0) {
        field[0] = '\0';
    }
    *why = "";
    return data == NULL ||
           walk(desc, data, data + len, 0, field, fieldlen, why);
}
