/*
 * json_field.c — a walk's field path, where a field's values live in a
 * protobuf-c message, and a field's JSON name.
 *
 * Owns: the path text of error messages, element sizes and addresses by
 * descriptor, lowerCamelCase names, the UTF-8 check of strings.
 * Invariant: the path stays NUL-terminated within its buffer, cut short
 * rather than overrun.
 * Never: allocates; reads a repeated field past its count (callers pass
 * i below it).
 */
#include "http/json_impl.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The most of a path an error text shows: its last bytes. */
#define PATH_SHOWN 96

static size_t
walk_append(struct json_walk *w, const char *text)
{
    size_t old = w->plen;
    size_t room = sizeof(w->path) - w->plen;
    int n = snprintf(w->path + w->plen, room, "%s", text);

    w->plen += (n < 0 || (size_t)n >= room) ? room - 1 : (size_t)n;
    return old;
}

size_t
json_walk_push(struct json_walk *w, const char *name)
{
    size_t old = w->plen;

    if (w->plen > 0) {
        walk_append(w, ".");
    }
    walk_append(w, name);
    return old;
}

size_t
json_walk_index(struct json_walk *w, size_t i)
{
    char buf[32];

    snprintf(buf, sizeof(buf), "[%zu]", i);
    return walk_append(w, buf);
}

void
json_walk_pop(struct json_walk *w, size_t plen)
{
    w->plen = plen;
    w->path[plen] = '\0';
}

int
json_walk_fail(struct json_walk *w, const char *what)
{
    /* a long path keeps its end, where the fault is */
    const char *cut = w->plen > PATH_SHOWN ? "..." : "";
    const char *path = w->path + (*cut ? w->plen - PATH_SHOWN : 0);

    if (w->err != NULL && w->errlen > 0) {
        if (w->plen > 0) {
            snprintf(w->err, w->errlen, "field \"%s%s\": %s", cut, path, what);
        } else {
            snprintf(w->err, w->errlen, "body: %s", what);
        }
    }
    return EINVAL;
}

size_t
json_field_size(const ProtobufCFieldDescriptor *fd)
{
    switch (fd->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_ENUM:
        return 4;
    case PROTOBUF_C_TYPE_FLOAT:
        return sizeof(float);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return 8;
    case PROTOBUF_C_TYPE_DOUBLE:
        return sizeof(double);
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    }
    return 0;
}

void *
json_field_at(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *fd,
              size_t i)
{
    char *base = (char *)m + fd->offset;

    if (fd->label != PROTOBUF_C_LABEL_REPEATED) {
        return base;
    }
    return *(char **)base + i * json_field_size(fd);
}

size_t *
json_field_count(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *fd)
{
    return (size_t *)((char *)m + fd->quantifier_offset);
}

bool
json_field_camel(const ProtobufCFieldDescriptor *fd, char *out)
{
    size_t n = 0;
    bool up = false;

    for (const char *p = fd->name; *p != '\0'; p++) {
        if (*p == '_') {
            up = true;
            continue;
        }
        if (n + 1 >= JSON_NAME_MAX) {
            return false;
        }
        out[n++] = (up && *p >= 'a' && *p <= 'z') ? (char)(*p - 'a' + 'A') : *p;
        up = false;
    }
    out[n] = '\0';
    return true;
}

const ProtobufCFieldDescriptor *
json_field_find(const ProtobufCMessageDescriptor *desc, const char *key)
{
    char camel[JSON_NAME_MAX];

    for (unsigned i = 0; i < desc->n_fields; i++) {
        const ProtobufCFieldDescriptor *fd = &desc->fields[i];

        if (strcmp(fd->name, key) == 0) {
            return fd;
        }
        if (json_field_camel(fd, camel) && strcmp(camel, key) == 0) {
            return fd;
        }
    }
    return NULL;
}

/* The length of the UTF-8 sequence at s, 0 when it is not one. */
static size_t
utf8_seq(const unsigned char *s)
{
    uint32_t cp;
    size_t n;

    if (s[0] < 0x80) {
        return 1;
    } else if ((s[0] & 0xe0) == 0xc0) {
        n = 2, cp = s[0] & 0x1f;
    } else if ((s[0] & 0xf0) == 0xe0) {
        n = 3, cp = s[0] & 0x0f;
    } else if ((s[0] & 0xf8) == 0xf0) {
        n = 4, cp = s[0] & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            return 0; /* also stops at the NUL */
        }
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) ||
        (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff)) {
        return 0;
    }
    return n;
}

bool
json_utf8_valid(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;

    while (*p != '\0') {
        size_t n = utf8_seq(p);

        if (n == 0) {
            return false;
        }
        p += n;
    }
    return true;
}
