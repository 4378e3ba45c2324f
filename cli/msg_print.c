/*
 * msg_print.c — descriptor-driven printing of protobuf-c messages.
 *
 * Owns: finding a field's elements at their descriptor offsets and
 * formatting each value.
 * Never: reads past a repeated field's count.
 */
#include "cli/msg_print.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>

static void
msg_hex(FILE *f, const ProtobufCBinaryData *b)
{
    for (size_t i = 0; i < b->len; i++) {
        fprintf(f, "%02x", b->data[i]);
    }
}

/* The address of element i of field fd in m (i ignored for singular). */
static const void *
msg_field_at(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *fd,
             size_t i)
{
    const char *base = (const char *)m + fd->offset;
    size_t sz;

    if (fd->label != PROTOBUF_C_LABEL_REPEATED) {
        return base;
    }
    switch (fd->type) {
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        sz = 8;
        break;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE:
        sz = sizeof(void *);
        break;
    case PROTOBUF_C_TYPE_BYTES:
        sz = sizeof(ProtobufCBinaryData);
        break;
    case PROTOBUF_C_TYPE_BOOL:
        sz = sizeof(protobuf_c_boolean);
        break;
    default:
        sz = 4;
    }
    return *(const char *const *)base + i * sz;
}

/* How many values field fd of m has: a repeated field's count, 0 for an
 * absent nested message, else 1. */
static size_t
msg_field_count(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *fd)
{
    if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
        return *(const size_t *)((const char *)m + fd->quantifier_offset);
    }
    if (fd->type == PROTOBUF_C_TYPE_MESSAGE) {
        return *(const void *const *)msg_field_at(m, fd, 0) != NULL ? 1 : 0;
    }
    return 1;
}

/* Writes the scalar at p (a field of type fd) as JSON, or as text: doubles
 * as %g. */
static void
msg_scalar(FILE *f, const ProtobufCFieldDescriptor *fd, const void *p,
           bool text)
{
    switch (fd->type) {
    case PROTOBUF_C_TYPE_STRING:
        json_write_string(f, *(const char *const *)p);
        break;
    case PROTOBUF_C_TYPE_BYTES:
        fputc('"', f);
        msg_hex(f, p);
        fputc('"', f);
        break;
    case PROTOBUF_C_TYPE_BOOL:
        fputs(*(const protobuf_c_boolean *)p ? "true" : "false", f);
        break;
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(
            fd->descriptor, *(const int *)p);
        if (ev != NULL) {
            json_write_string(f, ev->name);
        } else {
            fprintf(f, "%d", *(const int *)p);
        }
        break;
    }
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        fprintf(f, "%" PRIu64, *(const uint64_t *)p);
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        fprintf(f, "%" PRId64, *(const int64_t *)p);
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        fprintf(f, "%" PRIu32, *(const uint32_t *)p);
        break;
    case PROTOBUF_C_TYPE_DOUBLE:
    case PROTOBUF_C_TYPE_FLOAT: {
        double d = fd->type == PROTOBUF_C_TYPE_DOUBLE
                       ? *(const double *)p
                       : (double)*(const float *)p;
        if (text) {
            fprintf(f, "%g", d);
        } else {
            json_write_f64(f, d);
        }
        break;
    }
    default:
        fprintf(f, "%" PRId32, *(const int32_t *)p);
    }
}

void
msg_print_json(json_obj *j, const ProtobufCMessage *m)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;

    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *fd = &d->fields[i];
        size_t cnt = msg_field_count(m, fd);
        bool rep = fd->label == PROTOBUF_C_LABEL_REPEATED;

        if (!rep && cnt == 0) {
            continue; /* an absent message */
        }
        json_key(j, fd->name);
        if (rep) {
            fputc('[', j->f);
        }
        for (size_t k = 0; k < cnt; k++) {
            const void *p = msg_field_at(m, fd, k);
            fputs(k > 0 ? "," : "", j->f);
            if (fd->type == PROTOBUF_C_TYPE_MESSAGE) {
                json_obj sub = {j->f, 0, 0};
                fputc('{', j->f);
                msg_print_json(&sub, *(const ProtobufCMessage *const *)p);
                fputc('}', j->f);
            } else {
                msg_scalar(j->f, fd, p, false);
            }
        }
        if (rep) {
            fputc(']', j->f);
        }
    }
}

static void
msg_text(FILE *f, const char *prefix, const ProtobufCMessage *m, int width)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;

    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *fd = &d->fields[i];
        size_t cnt = msg_field_count(m, fd);
        bool rep = fd->label == PROTOBUF_C_LABEL_REPEATED;

        if (rep && cnt == 0) {
            fprintf(f, "%s%s (none)\n", prefix, fd->name);
        }
        for (size_t k = 0; k < cnt; k++) {
            char path[256];
            const void *p = msg_field_at(m, fd, k);

            if (rep) {
                snprintf(path, sizeof(path), "%s%s[%zu]", prefix, fd->name, k);
            } else {
                snprintf(path, sizeof(path), "%s%s", prefix, fd->name);
            }
            if (fd->type == PROTOBUF_C_TYPE_MESSAGE) {
                char sub[260];
                snprintf(sub, sizeof(sub), "%s.", path);
                msg_text(f, sub, *(const ProtobufCMessage *const *)p, width);
            } else if (fd->type == PROTOBUF_C_TYPE_STRING) {
                const char *s = *(const char *const *)p;
                fprintf(f, "%-*s %s\n", width, path, s != NULL ? s : "");
            } else {
                fprintf(f, "%-*s ", width, path);
                msg_scalar(f, fd, p, true);
                fputc('\n', f);
            }
        }
    }
}

void
msg_print_text(FILE *f, const ProtobufCMessage *m, int width)
{
    msg_text(f, "", m, width);
}
