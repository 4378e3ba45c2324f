/*
 * envelope.c — the pre-decode scan of a Request envelope (envelope.h).
 */
#include "proto/envelope.h"

#include <string.h>

#define FIELD_PRINCIPAL 7 /* once.v1.Request.principal */
#define FIELD_METADATA  9 /* once.v1.Request.metadata */

/* Reads a base-128 varint at *p (below end) into *v. False when it runs
 * past end or past 10 bytes. */
static bool
envelope_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
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

envelope_result
envelope_scan(const uint8_t *buf, size_t len, envelope_shape *out)
{
    const uint8_t *p = buf, *end = buf + len;

    memset(out, 0, sizeof(*out));
    if (buf == NULL && len > 0) {
        return ENVELOPE_MALFORMED;
    }
    while (p < end) {
        uint64_t key, n;

        if (!envelope_varint(&p, end, &key) || (key >> 3) == 0) {
            return ENVELOPE_MALFORMED;
        }
        switch (key & 7) {
        case 0: /* varint */
            if (!envelope_varint(&p, end, &n)) {
                return ENVELOPE_MALFORMED;
            }
            break;
        case 1: /* 64-bit */
            if ((size_t)(end - p) < 8) {
                return ENVELOPE_MALFORMED;
            }
            p += 8;
            break;
        case 5: /* 32-bit */
            if ((size_t)(end - p) < 4) {
                return ENVELOPE_MALFORMED;
            }
            p += 4;
            break;
        case 2: /* length-delimited */
            if (!envelope_varint(&p, end, &n) || n > (uint64_t)(end - p)) {
                return ENVELOPE_MALFORMED;
            }
            if ((key >> 3) == FIELD_PRINCIPAL) {
                out->principal = p;
                out->principal_len = (size_t)n;
            } else if ((key >> 3) == FIELD_METADATA &&
                       ++out->metadata > ENVELOPE_METADATA_MAX) {
                return ENVELOPE_TOO_MANY_METADATA;
            }
            p += n;
            break;
        default: /* groups (3, 4) and 6, 7: never in a Request */
            return ENVELOPE_MALFORMED;
        }
    }
    return ENVELOPE_OK;
}
