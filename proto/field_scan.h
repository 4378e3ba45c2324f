/*
 * field_scan.h — a bounded count of a protobuf message's fields, read
 * from its wire bytes before protobuf-c decodes them.
 *
 * Owns: one pass over the bytes of a message of a known type (its
 * descriptor), entering each field that the descriptor names as a
 * message, counting every field, the fields the descriptor does not
 * name (unknown: protobuf-c keeps each one as an allocation) and the
 * top-level occurrences of one chosen field (a batch's entries). It
 * stops as soon as a count passes its cap, so the cost is bounded by
 * the caps, not by what the sender packed into the bytes.
 * Invariant: a buffer this accepts is within every cap when protobuf-c
 * decodes it; a packed repeated scalar counts as one field.
 * Never: allocates, reads outside [buf, buf + len), or nests deeper than
 * FIELD_SCAN_DEPTH_MAX.
 */
#ifndef PROTO_FIELD_SCAN_H
#define PROTO_FIELD_SCAN_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most fields (at any depth) one message may carry: above what any
 * shipped client sends (the largest, a RenewLease of 10000 ids, is one
 * packed field; unpacked it would be 10000). */
#define FIELD_SCAN_FIELDS_MAX 16384u
/* Most fields the descriptor does not name: no shipped client sends
 * any; a newer client's few new fields stay well inside. */
#define FIELD_SCAN_UNKNOWN_MAX 64u
/* Deepest nesting of message fields entered. */
#define FIELD_SCAN_DEPTH_MAX 16u

typedef enum {
    FIELD_SCAN_OK = 0,
    FIELD_SCAN_MALFORMED,        /* not a sequence of protobuf fields */
    FIELD_SCAN_TOO_MANY_FIELDS,  /* more than FIELD_SCAN_FIELDS_MAX */
    FIELD_SCAN_TOO_MANY_UNKNOWN, /* more than FIELD_SCAN_UNKNOWN_MAX */
    FIELD_SCAN_TOO_DEEP,         /* nested past FIELD_SCAN_DEPTH_MAX */
    FIELD_SCAN_COUNT_EXCEEDED,   /* the chosen field past count_max */
} field_scan_result;

typedef struct field_scan_counts {
    size_t fields;  /* every field seen (stops past the cap) */
    size_t unknown; /* fields the descriptor does not name */
    size_t counted; /* top-level occurrences of the chosen field */
} field_scan_counts;

/* Reads a base-128 varint at *p (below end) into *v, advancing *p.
 * False when it runs past end or past 10 bytes. */
bool field_scan_varint(const uint8_t **p, const uint8_t *end, uint64_t *v);

/* Scans the len bytes at buf as a message of type d into *out; the
 * top-level field numbered count_number (0: none) may occur at most
 * count_max times. */
field_scan_result field_scan(const ProtobufCMessageDescriptor *d,
                             const uint8_t *buf, size_t len,
                             uint32_t count_number, size_t count_max,
                             field_scan_counts *out);

/* A SCREAMING_SNAKE reason and a sentence for a refusal r. */
const char *field_scan_reason(field_scan_result r);
const char *field_scan_why(field_scan_result r);

#endif /* PROTO_FIELD_SCAN_H */
