/*
 * names.h — names as the services take them (a counter, a surface, a
 * machine, a request id), and received text made safe to print.
 *
 * Owns the rule every such name follows: 1 to max bytes, no control
 * character (below 0x20, or 0x7f). The caller words the refusal: only it
 * knows which name it was. wire_text.h has already refused NUL bytes and
 * invalid UTF-8 before a handler sees the name.
 * Never: allocates; writes past outlen.
 */
#ifndef PROTO_NAMES_H
#define PROTO_NAMES_H

#include <stddef.h>

/* What name_check found. */
typedef enum name_fault {
    NAME_OK = 0,
    NAME_BAD_LENGTH, /* empty or longer than max */
    NAME_CONTROL,    /* a control character at byte *at */
} name_fault;

/* Checks s against the rule above. *at: the length of s (NAME_OK,
 * NAME_BAD_LENGTH) or the offset of the first control character. */
name_fault name_check(const char *s, size_t max, size_t *at);

/* Copies in to out (outlen > 4) with every byte outside printable ASCII
 * replaced by '?', ending in "..." when in did not fit: text a peer sent,
 * ready for a log line or an error message. */
void name_printable(const char *in, char *out, size_t outlen);

#endif /* PROTO_NAMES_H */
