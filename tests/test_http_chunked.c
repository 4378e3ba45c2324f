/*
 * test_http_chunked.c — the chunked-body decoder (server/http_chunked.h)
 * on its own: a body split anywhere (every byte a feed of its own, or all
 * at once) decodes to the same bytes and stops right after the final
 * CRLF; extensions and trailers are dropped; broken framing is BAD; a
 * body past max is TOO_LARGE at the size line, before its data.
 * Never: starts onced (test_py_http_limits sends chunks to a real one).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "server/http_chunked.h"

typedef struct decoded {
    http_chunked_result r;
    uint8_t *body;
    size_t len, cap;
    size_t used; /* of the input, in all */
    const char *why;
} decoded;

/* in fed step bytes at a time (0: all at once), until a result other
 * than MORE or the end of in. */
static decoded
decode(const char *in, size_t step, size_t max)
{
    http_chunked d;
    decoded out = {HTTP_CHUNKED_MORE, NULL, 0, 0, 0, NULL};
    size_t n = strlen(in);

    http_chunked_init(&d);
    while (out.used < n && out.r == HTTP_CHUNKED_MORE) {
        size_t give = step == 0 || n - out.used < step ? n - out.used : step;
        size_t used = 0;

        out.r = http_chunked_feed(&d, in + out.used, give, &used, &out.body,
                                  &out.len, &out.cap, max, &out.why);
        assert_true(used <= give);
        assert_true(out.r != HTTP_CHUNKED_MORE || used == give);
        out.used += used;
    }
    return out;
}

static void
test_split_anywhere(void **state)
{
    const char *in = "5;name=val\r\nhello\r\n1\r\n \r\n"
                     "6\r\nworld!\r\n0\r\nX-Trailer: 1\r\n\r\n"
                     "GET / HTTP/1.1\r\n";
    size_t body_end = strlen(in) - strlen("GET / HTTP/1.1\r\n");

    (void)state;
    for (size_t step = 0; step <= 7; step++) {
        decoded d = decode(in, step, 1024);

        assert_int_equal(d.r, HTTP_CHUNKED_DONE);
        assert_int_equal(d.len, 12);
        assert_memory_equal(d.body, "hello world!", 12);
        assert_int_equal(d.used, body_end); /* the next request is left */
        free(d.body);
    }
}

/* in decoded (fed step bytes at a time) to r with len bytes of body. */
static void
expect(const char *in, size_t step, size_t max, http_chunked_result r,
       size_t len)
{
    decoded d = decode(in, step, max);

    assert_int_equal(d.r, r);
    assert_int_equal(d.len, len);
    free(d.body);
}

static void
test_empty_and_exact(void **state)
{
    (void)state;
    expect("0\r\n\r\n", 0, 16, HTTP_CHUNKED_DONE, 0);
    /* exactly max */
    expect("8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n", 1, 16,
           HTTP_CHUNKED_DONE, 16);
}

static void
test_too_large_at_the_size_line(void **state)
{
    (void)state;
    /* the size line alone: no data needed to refuse */
    expect("11\r\n", 0, 16, HTTP_CHUNKED_TOO_LARGE, 0);
    /* no overflow */
    expect("FFFFFFFFFFFFFFFFFFFFFFFFFFFF", 1, 1u << 20, HTTP_CHUNKED_TOO_LARGE,
           0);
    expect("10\r\n0123456789abcdef\r\n1\r\n", 0, 16, HTTP_CHUNKED_TOO_LARGE,
           16);
}

/* head, then fill up to n bytes in all: BAD, its reason naming what. */
static void
expect_too_long(const char *head, char fill, size_t n, const char *what)
{
    char *in = malloc(n + 1);
    decoded d;

    memset(in, fill, n);
    memcpy(in, head, strlen(head));
    in[n] = '\0';
    d = decode(in, 0, 1024);
    assert_int_equal(d.r, HTTP_CHUNKED_BAD);
    assert_non_null(strstr(d.why, what));
    free(d.body);
    free(in);
}

static void
test_broken_framing(void **state)
{
    static const char *const bad[] = {
        "zz\r\n",               /* not hexadecimal */
        "\r\n",                 /* no size */
        "5\nhello\r\n",         /* LF alone */
        "5\r\nhelloX\r\n",      /* data not followed by CRLF */
        "5\r\nhello\rX",        /* CR then not LF */
        "5 x\r\n",              /* not an extension */
        "0\r\nX: 1\rY\r\n\r\n", /* trailer line not ending CRLF */
        "0\r\n\rX",             /* the final CRLF broken */
    };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        decoded d = decode(bad[i], 0, 1024);

        assert_int_equal(d.r, HTTP_CHUNKED_BAD);
        assert_non_null(d.why);
        free(d.body);
    }
    expect_too_long("1;", 'e', HTTP_CHUNKED_LINE_MAX + 15, "4 KiB");
    expect_too_long("0\r\nX: ", 't', HTTP_CHUNKED_TRAILER_MAX + 15, "16 KiB");
}

static void
test_framing_bounded(void **state)
{
    /* one data byte a chunk, each with a 4000-byte extension: the body
     * stays far below max, the framing does not */
    enum { CHUNKS = 20, EXT = 4000, ONE = EXT + 7 };
    char *in = malloc(CHUNKS * ONE + 1);
    decoded d;

    (void)state;
    for (int i = 0; i < CHUNKS; i++) {
        char *c = in + i * ONE;
        memcpy(c, "1;", 2);
        memset(c + 2, 'e', EXT);
        memcpy(c + 2 + EXT, "\r\nx\r\n", 5);
    }
    in[CHUNKS * ONE] = '\0';
    d = decode(in, 0, 1024);
    assert_int_equal(d.r, HTTP_CHUNKED_BAD);
    assert_non_null(strstr(d.why, "framing"));
    assert_true(d.len < CHUNKS);
    free(d.body);
    free(in);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_anywhere),
        cmocka_unit_test(test_empty_and_exact),
        cmocka_unit_test(test_too_large_at_the_size_line),
        cmocka_unit_test(test_broken_framing),
        cmocka_unit_test(test_framing_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
