/*
 * http_chunked.c — the chunked-body decoder of http_chunked.h: a state
 * machine fed byte by byte, but for chunk data, copied whole.
 */
#include "server/http_chunked.h"

#include <stdlib.h>
#include <string.h>

enum {
    CK_SIZE,     /* chunk-size [chunk-ext] */
    CK_SIZE_LF,  /* its CR read */
    CK_DATA,     /* the chunk's bytes */
    CK_DATA_CR,  /* after them: CR */
    CK_DATA_LF,  /* and LF */
    CK_TRAILER,  /* at the start of a trailer line (or the final CRLF) */
    CK_FIELD,    /* in a trailer field line */
    CK_FIELD_LF, /* its CR read */
    CK_END_LF,   /* the final CR read */
};

void
http_chunked_init(http_chunked *d)
{
    memset(d, 0, sizeof(*d));
    d->state = CK_SIZE;
}

static int
hex_value(char ch)
{
    if (ch >= '0' && ch <= '9') {
        return ch - '0';
    }
    if (ch >= 'a' && ch <= 'f') {
        return ch - 'a' + 10;
    }
    if (ch >= 'A' && ch <= 'F') {
        return ch - 'A' + 10;
    }
    return -1;
}

/* Room for more bytes in *body, at most max in all (more fits: checked). */
static bool
chunked_reserve(uint8_t **body, size_t len, size_t *cap, size_t more,
                size_t max)
{
    size_t want = len + more;
    uint8_t *nb;

    if (want <= *cap) {
        return true;
    }
    if (want < 2 * *cap) {
        want = 2 * *cap < max ? 2 * *cap : max;
    }
    if ((nb = realloc(*body, want > 0 ? want : 1)) == NULL) {
        return false;
    }
    *body = nb;
    *cap = want;
    return true;
}

/* One byte of a size line; the result, or -1 to go on. */
static int
chunked_size_byte(http_chunked *d, char ch, size_t len, size_t max,
                  const char **why)
{
    int v = hex_value(ch);

    if (++d->line > HTTP_CHUNKED_LINE_MAX) {
        *why = "a chunk's size line is over 4 KiB";
        return HTTP_CHUNKED_BAD;
    }
    if (ch == '\r') {
        if (!d->digits) {
            *why = "a chunk's size line has no hexadecimal size";
            return HTTP_CHUNKED_BAD;
        }
        d->state = CK_SIZE_LF;
    } else if (!d->ext && !d->bws && v >= 0) {
        d->digits = true;
        d->size = d->size * 16 + (uint64_t)v;
        if (d->size > max - len) { /* grows only: refused at once */
            return HTTP_CHUNKED_TOO_LARGE;
        }
    } else if (d->digits && !d->ext && (ch == ' ' || ch == '\t')) {
        d->bws = true;
    } else if (d->digits && ch == ';') {
        d->ext = true; /* an extension: read, dropped */
    } else if (!d->ext || ch == '\n') {
        *why = "a chunk's size is not a hexadecimal number ending CRLF";
        return HTTP_CHUNKED_BAD;
    }
    return -1;
}

/* One byte of the trailer (after the last chunk); the result, or -1. */
static int
chunked_trailer_byte(http_chunked *d, char ch, const char **why)
{
    if (++d->line > HTTP_CHUNKED_TRAILER_MAX) {
        *why = "the trailer after the last chunk is over 16 KiB";
        return HTTP_CHUNKED_BAD;
    }
    switch (d->state) {
    case CK_TRAILER:
        d->state = ch == '\r' ? CK_END_LF : CK_FIELD;
        break;
    case CK_FIELD:
        d->state = ch == '\r' ? CK_FIELD_LF : CK_FIELD;
        break;
    case CK_FIELD_LF:
    case CK_END_LF:
        if (ch != '\n') {
            *why = "a trailer line does not end CRLF";
            return HTTP_CHUNKED_BAD;
        }
        if (d->state == CK_END_LF) {
            return HTTP_CHUNKED_DONE;
        }
        d->state = CK_TRAILER;
        break;
    }
    return -1;
}

http_chunked_result
http_chunked_feed(http_chunked *d, const char *in, size_t n, size_t *used,
                  uint8_t **body, size_t *len, size_t *cap, size_t max,
                  const char **why)
{
    size_t i = 0;
    int rv = -1;

    while (i < n && rv < 0) {
        char ch = in[i];

        if (d->state != CK_DATA &&
            ++d->framing > max + HTTP_CHUNKED_FRAMING_SLACK) {
            *why = "the chunks' framing (size lines, extensions, trailer) "
                   "is over --recv-max plus 64 KiB: send larger chunks";
            rv = HTTP_CHUNKED_BAD;
            break;
        }
        switch (d->state) {
        case CK_SIZE:
            rv = chunked_size_byte(d, ch, *len, max, why);
            i++;
            break;
        case CK_SIZE_LF:
            i++;
            if (ch != '\n') {
                *why = "a chunk's size line does not end CRLF";
                rv = HTTP_CHUNKED_BAD;
            } else if (d->size == 0) { /* the last chunk */
                d->state = CK_TRAILER;
                d->line = 0;
            } else if (!chunked_reserve(body, *len, cap, d->size, max)) {
                rv = HTTP_CHUNKED_NOMEM;
            } else {
                d->state = CK_DATA;
            }
            break;
        case CK_DATA: {
            size_t take = n - i < d->size ? n - i : (size_t)d->size;
            memcpy(*body + *len, in + i, take);
            *len += take;
            i += take;
            d->size -= take;
            d->state = d->size == 0 ? CK_DATA_CR : CK_DATA;
            break;
        }
        case CK_DATA_CR:
        case CK_DATA_LF:
            i++;
            if (ch != (d->state == CK_DATA_CR ? '\r' : '\n')) {
                *why = "a chunk's data is not followed by CRLF (its size "
                       "is wrong?)";
                rv = HTTP_CHUNKED_BAD;
            } else if (d->state == CK_DATA_CR) {
                d->state = CK_DATA_LF;
            } else {
                d->state = CK_SIZE; /* the next size line */
                d->size = 0;
                d->line = 0;
                d->digits = d->bws = d->ext = false;
            }
            break;
        default:
            rv = chunked_trailer_byte(d, ch, why);
            i++;
        }
    }
    *used = i;
    return rv < 0 ? HTTP_CHUNKED_MORE : (http_chunked_result)rv;
}
