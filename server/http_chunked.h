/*
 * http_chunked.h — decoding a chunked request body (Transfer-Encoding:
 * chunked, RFC 9112 section 7.1) as its bytes arrive, for http_srv.c.
 *
 * Owns: the decoder's state between two reads, and the growth of the body
 * it writes (realloc'd, never beyond the caller's max).
 * Invariant: the decoded body never exceeds max: a chunk size that would
 * take it past max is refused as soon as its size line is read, before a
 * byte of its data is (so a peer cannot make onced read forever); a size
 * line (with its extensions) is at most HTTP_CHUNKED_LINE_MAX bytes and
 * the trailer at most HTTP_CHUNKED_TRAILER_MAX, and all of the framing
 * at most max + HTTP_CHUNKED_FRAMING_SLACK (so a body costs at most
 * 2 max + 64 KiB of bytes read, however small its chunks); extensions and
 * trailer fields are read and dropped.
 * Never: reads beyond what it is given, blocks, or keeps a pointer to the
 * bytes it is given.
 */
#ifndef SERVER_HTTP_CHUNKED_H
#define SERVER_HTTP_CHUNKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_CHUNKED_LINE_MAX    4096
#define HTTP_CHUNKED_TRAILER_MAX (16 * 1024)
/* The framing of one body (every byte but the chunks' data) beyond max. */
#define HTTP_CHUNKED_FRAMING_SLACK (64 * 1024)

typedef enum {
    HTTP_CHUNKED_MORE,      /* every byte used; more to come */
    HTTP_CHUNKED_DONE,      /* the last chunk and trailer read */
    HTTP_CHUNKED_BAD,       /* broken framing; *why says how */
    HTTP_CHUNKED_TOO_LARGE, /* the body would exceed max */
    HTTP_CHUNKED_NOMEM,
} http_chunked_result;

typedef struct http_chunked {
    int state;
    uint64_t size;  /* of the chunk whose size line is read, or whose data
                       is (then: its bytes still to come) */
    size_t line;    /* bytes of the size line, or of the trailer, so far */
    size_t framing; /* bytes of the body's framing so far */
    bool digits;    /* the size line has a digit */
    bool bws;       /* blanks after the digits: ';' or CR may follow */
    bool ext;       /* in an extension (after ';'): read up to CR */
} http_chunked;

/* Ready for a new body. */
void http_chunked_init(http_chunked *d);

/* Decodes in[0..n): appends the chunks' data to *body (*len bytes used of
 * *cap; realloc'd, the caller frees it) up to max bytes, and sets *used
 * to the bytes of in read (on DONE, what follows the body is not: the
 * next request's). On BAD, *why is a static sentence. */
http_chunked_result http_chunked_feed(http_chunked *d, const char *in, size_t n,
                                      size_t *used, uint8_t **body, size_t *len,
                                      size_t *cap, size_t max,
                                      const char **why);

#endif /* SERVER_HTTP_CHUNKED_H */
