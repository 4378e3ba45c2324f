/*
 * envelope.c — the pre-decode scan of a Request envelope (envelope.h).
 */
#include "proto/envelope.h"

#include "proto/field_scan.h"

#include <string.h>

#define FIELD_PRINCIPAL 7 /* once.v1.Request.principal */
#define FIELD_METADATA  9 /* once.v1.Request.metadata */

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

        if (!field_scan_varint(&p, end, &key) || (key >> 3) == 0) {
            return ENVELOPE_MALFORMED;
        }
        switch (key & 7) {
        case 0: /* varint */
            if (!field_scan_varint(&p, end, &n)) {
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
            if (!field_scan_varint(&p, end, &n) || n > (uint64_t)(end - p)) {
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
