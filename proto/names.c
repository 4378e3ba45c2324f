/*
 * names.c — the name rule and printable copies (names.h).
 */
#include "proto/names.h"

#include <string.h>

name_fault
name_check(const char *s, size_t max, size_t *at)
{
    size_t len = strlen(s);

    *at = len;
    if (len == 0 || len > max) {
        return NAME_BAD_LENGTH;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch == 0x7f) {
            *at = i;
            return NAME_CONTROL;
        }
    }
    return NAME_OK;
}

void
name_printable(const char *in, char *out, size_t outlen)
{
    size_t j = 0;

    for (size_t i = 0; in[i] != '\0' && j + 4 < outlen; i++) {
        unsigned char ch = (unsigned char)in[i];
        out[j++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    if (in[0] != '\0' && j + 4 >= outlen) {
        memcpy(out + j, "...", 3);
        j += 3;
    }
    out[j] = '\0';
}
