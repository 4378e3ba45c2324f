/*
 * msg_print.h — printing a flat protobuf-c message field by field, driven
 * by its descriptor (oncectl stats prints every StatsResponse field this
 * way, so a field added to the .proto shows up without touching oncectl).
 *
 * Owns: the mapping of scalar field types to JSON values and to text lines.
 * Invariant: fields appear in descriptor (field number) order; proto3
 * scalars are printed even when zero.
 * Never: prints nested messages, repeated fields or bytes (skipped); never
 * frees or changes the message.
 */
#ifndef CLIENT_MSG_PRINT_H
#define CLIENT_MSG_PRINT_H

#include <stdio.h>

#include <protobuf-c/protobuf-c.h>

#include "cli/json_out.h"

/* Adds one member per scalar field of m to the open object j. */
void msg_print_json(json_obj *j, const ProtobufCMessage *m);

/* Writes one "name value" line per scalar field of m to f. */
void msg_print_text(FILE *f, const ProtobufCMessage *m);

#endif /* CLIENT_MSG_PRINT_H */
