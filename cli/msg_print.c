/*
 * msg_print.c — descriptor-driven printing of flat protobuf-c messages.
 *
 * Owns: reading a scalar field at its descriptor offset and formatting it.
 * Never: touches fields it does not understand (messages, bytes, repeated
 * and oneof-less optional fields without a value are skipped).
 */
#include "cli/msg_print.h"

#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

/* One scalar field's value, in the widest type of its kind. */
typedef struct msg_value {
    enum { MSG_INT, MSG_UINT, MSG_DOUBLE, MSG_BOOL, MSG_STR } kind;
    int64_t i;
    uint64_t u;
    double d;
    bool b;
    const char *s;
} msg_value;

/* Reads field f of m into *v; false when the field is skipped. */
static bool
msg_read(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
         msg_value *v)
{
    const char *p = (const char *)m + f->offset;

    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        return false;
    }
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset != 0 &&
        f->type != PROTOBUF_C_TYPE_STRING &&
        f->type != PROTOBUF_C_TYPE_MESSAGE) {
        protobuf_c_boolean has;
        memcpy(&has, (const char *)m + f->quantifier_offset, sizeof(has));
        if (!has) {
            return false;
        }
    }
    memset(v, 0, sizeof(*v));
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32: {
        int32_t x;
        memcpy(&x, p, sizeof(x));
        v->kind = MSG_INT;
        v->i = x;
        return true;
    }
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        memcpy(&v->i, p, sizeof(v->i));
        v->kind = MSG_INT;
        return true;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: {
        uint32_t x;
        memcpy(&x, p, sizeof(x));
        v->kind = MSG_UINT;
        v->u = x;
        return true;
    }
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        memcpy(&v->u, p, sizeof(v->u));
        v->kind = MSG_UINT;
        return true;
    case PROTOBUF_C_TYPE_FLOAT: {
        float x;
        memcpy(&x, p, sizeof(x));
        v->kind = MSG_DOUBLE;
        v->d = x;
        return true;
    }
    case PROTOBUF_C_TYPE_DOUBLE:
        memcpy(&v->d, p, sizeof(v->d));
        v->kind = MSG_DOUBLE;
        return true;
    case PROTOBUF_C_TYPE_BOOL: {
        protobuf_c_boolean x;
        memcpy(&x, p, sizeof(x));
        v->kind = MSG_BOOL;
        v->b = x != 0;
        return true;
    }
    case PROTOBUF_C_TYPE_ENUM: {
        int x;
        const ProtobufCEnumValue *ev;
        memcpy(&x, p, sizeof(x));
        ev = protobuf_c_enum_descriptor_get_value(
            (const ProtobufCEnumDescriptor *)f->descriptor, x);
        if (ev == NULL) {
            v->kind = MSG_INT;
            v->i = x;
        } else {
            v->kind = MSG_STR;
            v->s = ev->name;
        }
        return true;
    }
    case PROTOBUF_C_TYPE_STRING: {
        const char *s;
        memcpy(&s, p, sizeof(s));
        v->kind = MSG_STR;
        v->s = s != NULL ? s : "";
        return true;
    }
    default:
        return false; /* bytes, nested messages */
    }
}

void
msg_print_json(json_obj *j, const ProtobufCMessage *m)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;

    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        msg_value v;
        if (!msg_read(m, f, &v)) {
            continue;
        }
        switch (v.kind) {
        case MSG_INT:
            json_i64(j, f->name, v.i);
            break;
        case MSG_UINT:
            json_u64(j, f->name, v.u);
            break;
        case MSG_DOUBLE:
            json_f64(j, f->name, v.d);
            break;
        case MSG_BOOL:
            json_bool(j, f->name, v.b);
            break;
        case MSG_STR:
            json_str(j, f->name, v.s);
            break;
        }
    }
}

void
msg_print_text(FILE *out, const ProtobufCMessage *m)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;

    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        msg_value v;
        if (!msg_read(m, f, &v)) {
            continue;
        }
        fprintf(out, "%-22s ", f->name);
        switch (v.kind) {
        case MSG_INT:
            fprintf(out, "%" PRId64 "\n", v.i);
            break;
        case MSG_UINT:
            fprintf(out, "%" PRIu64 "\n", v.u);
            break;
        case MSG_DOUBLE:
            fprintf(out, "%g\n", v.d);
            break;
        case MSG_BOOL:
            fprintf(out, "%s\n", v.b ? "true" : "false");
            break;
        case MSG_STR:
            fprintf(out, "%s\n", v.s);
            break;
        }
    }
}
