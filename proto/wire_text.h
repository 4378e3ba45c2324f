/*
 * wire_text.h — exact text: every string field of a message, as received,
 * is valid UTF-8 without a NUL byte.
 *
 * Owns: a walk over protobuf wire bytes guided by a message descriptor.
 * protobuf-c hands a string field to C as a NUL-terminated char *, so a
 * name "a\0b" would read as "a" and "/once.v1.Counter/Increment\0junk" as
 * Increment; only the bytes as received still carry the length. The walk
 * looks at every length-delimited field whose descriptor says string
 * (nested messages and repeated fields included) before anything relies
 * on the decoded copy.
 * Invariant: linear in the bytes, depth bounded by WIRE_TEXT_DEPTH_MAX;
 * bytes that are not a well-formed message are left to the decoder to
 * refuse (the walk says nothing about them).
 * Never: allocates; reads past len.
 */
#ifndef PROTO_WIRE_TEXT_H
#define PROTO_WIRE_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#define WIRE_TEXT_DEPTH_MAX 16

/* Whether the len bytes at s are valid UTF-8 (no overlong forms, no
 * surrogates, nothing above U+10FFFF) and hold no NUL byte. */
bool wire_text_ok(const uint8_t *s, size_t len);

/*
 * Checks every string field of the message desc encoded in the len bytes
 * at data. Returns true when all are exact text (or the bytes do not parse:
 * the decoder refuses those). Otherwise false, with field set to the
 * field's path ("name", "metadata.key"; at most fieldlen bytes) and *why
 * to "holds a NUL byte" or "is not valid UTF-8" (static strings).
 */
bool wire_text_check(const ProtobufCMessageDescriptor *desc,
                     const uint8_t *data, size_t len, char *field,
                     size_t fieldlen, const char **why);

#endif /* PROTO_WIRE_TEXT_H */
