/*
 * envelope.h — the shape of a Request envelope, read before it is decoded.
 *
 * Owns: one pass over the top-level protobuf fields of the bytes as
 * received — no allocation, no copy — that checks every field is well
 * formed and inside the buffer, counts the repeated metadata entries
 * (stopping as soon as there are more than ENVELOPE_METADATA_MAX) and
 * finds the principal. onced runs it first, so a request is refused for
 * its shape or for its tag (auth_tag.h) before protobuf-c allocates
 * anything for it: an unsigned 1 MiB envelope of half a million empty
 * metadata entries costs one bounded scan, not a decode.
 * Invariant: a buffer this accepts with at most ENVELOPE_METADATA_MAX
 * metadata entries is the same message protobuf-c decodes; the principal
 * found is the last one, as protobuf's "last value wins".
 * Never: allocates, reads outside [buf, buf + len), or recurses.
 */
#ifndef PROTO_ENVELOPE_H
#define PROTO_ENVELOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most metadata entries one Request may carry; more are refused
 * INVALID_ARGUMENT/TOO_MANY_METADATA. */
#define ENVELOPE_METADATA_MAX 64

typedef struct envelope_shape {
    const uint8_t *principal; /* inside the buffer; NULL: none */
    size_t principal_len;
    size_t metadata; /* entries counted (stops past the maximum) */
} envelope_shape;

typedef enum {
    ENVELOPE_OK = 0,
    ENVELOPE_MALFORMED,         /* not a sequence of protobuf fields */
    ENVELOPE_TOO_MANY_METADATA, /* more than ENVELOPE_METADATA_MAX */
} envelope_result;

/* Scans the len bytes at buf (a Request as received) into *out. */
envelope_result envelope_scan(const uint8_t *buf, size_t len,
                              envelope_shape *out);

#endif /* PROTO_ENVELOPE_H */
