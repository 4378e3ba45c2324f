/*
 * msg_print.h — printing any protobuf-c message field by field, driven by
 * its descriptor (oncectl stats prints every StatsResponse field this way,
 * so a field added to the .proto shows up without touching oncectl; the
 * grants subcommands print every reply this way).
 *
 * Owns: the walk over a message's fields (nested messages, repeated
 * fields) and the formatting of each value in JSON and in text.
 * Invariant: fields appear in descriptor (field number) order; proto3
 * scalars are printed even when zero; an absent nested message is left
 * out.
 * Never: frees or changes the message.
 */
#ifndef CLIENT_MSG_PRINT_H
#define CLIENT_MSG_PRINT_H

#include <stdio.h>

#include <protobuf-c/protobuf-c.h>

#include "cli/json_out.h"

/* Adds one member per field of m to the open object j: nested messages as
 * objects, repeated fields as arrays, enums by name, bytes as lowercase
 * hex strings. */
void msg_print_json(json_obj *j, const ProtobufCMessage *m);

/* Writes one "path value" line per field of m to f, the path padded to
 * width: a nested message's fields as name.field, repeated ones as
 * name[i] ("name (none)" when empty); values as in JSON but strings bare
 * and doubles as %g. */
void msg_print_text(FILE *f, const ProtobufCMessage *m, int width);

#endif /* CLIENT_MSG_PRINT_H */
