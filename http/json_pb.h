/*
 * json_pb.h — proto3's JSON mapping for protobuf-c messages, driven by
 * their descriptors (docs/http.md, "JSON mapping"): the wire format of the
 * HTTP front door.
 *
 * Owns: the two directions between JSON text and a ProtobufCMessage of a
 * given descriptor, and the short error text naming the field at fault.
 * Invariant: a decoded message is allocated as protobuf-c's unpacker
 * allocates one, so protobuf_c_message_free_unpacked(msg, NULL) frees all
 * of it; encoding then decoding gives a message that packs to the same
 * bytes.
 * Never: recurses deeper than JSON_PB_MAX_DEPTH messages; keeps state
 * between calls; reads past the length it is given.
 */
#ifndef HTTP_JSON_PB_H
#define HTTP_JSON_PB_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

/* Messages nested deeper than this (the top one is depth 1) are refused. */
#define JSON_PB_MAX_DEPTH 32

/* Room for an error text: the field path and what was wrong with it. */
#define JSON_PB_ERR_MAX 192

/* Reads the JSON object text[0..len) as a message of desc into *out.
 * 0, *out set (free with protobuf_c_message_free_unpacked(*out, NULL));
 * EINVAL with err holding e.g. `field "lease.ttlMs": expected an integer`,
 * ENOMEM; *out is NULL on error. err has room for errlen bytes. */
int json_pb_decode(const ProtobufCMessageDescriptor *desc, const char *text,
                   size_t len, ProtobufCMessage **out, char *err,
                   size_t errlen);

/* Writes m as one line of JSON into *out (NUL-terminated, length *outlen;
 * free with free()). 0; EINVAL with err naming the field (a string field
 * that is not UTF-8); ENOMEM. */
int json_pb_encode(const ProtobufCMessage *m, char **out, size_t *outlen,
                   char *err, size_t errlen);

#endif /* HTTP_JSON_PB_H */
