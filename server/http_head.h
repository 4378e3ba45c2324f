/*
 * http_head.h — the Once-* headers of a JSON API request (docs/http.md,
 * "Headers" and "Signing").
 *
 * Owns: reading Once-Rpc-Id (C:S), Once-First-Incomplete, Once-Attempt,
 * Once-Deadline-Ms, Once-Principal and Once-Tag (64 hex digits or
 * base64) into what the envelope carries, and the check of the tag: the
 * principal's HMAC (crypto_auth, auth_tag.h) over
 *   full method name LF Once-Rpc-Id LF Once-First-Incomplete LF body
 * (a header absent counts as empty), the values as received.
 * Invariant: with onced authenticating, a request passes only with a
 * principal of the tables in force and a tag that verifies under its key;
 * OPEN, nothing is checked and the principal is a label, as on nng.
 * Never: logs or keeps a key beyond the caller's buffer; compares tags
 * with memcmp.
 */
#ifndef SERVER_HTTP_HEAD_H
#define SERVER_HTTP_HEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "proto/auth_tag.h"
#include "proto/principals.h"
#include "server/auth.h"

/* A refusal: what the JSON body and the HTTP status say. */
typedef struct http_outcome {
    int code;           /* once.v1.Code */
    const char *reason; /* REASON_* */
    char message[320];
    int status; /* 0: by gRPC's mapping of code */
} http_outcome;

/* Sets a refusal on o — status 0: by gRPC's mapping of code — and
 * returns false. */
bool http_refusal(http_outcome *o, int status, int code, const char *reason,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* The headers of one request; the strings point into the request. */
typedef struct http_head {
    uint64_t client_id, seq; /* 0:0 when Once-Rpc-Id is absent */
    uint64_t first_incomplete;
    uint32_t attempt;
    uint64_t deadline_ms;
    const char *rpc_id_text; /* as received; "" when absent */
    const char *first_text;  /* Once-First-Incomplete as received; "" */
    const char *principal;   /* "" when absent */
    const char *tag;         /* NULL when absent */
} http_head;

/* Reads the headers of req into *h; false with o set (400,
 * HTTP_BAD_HEADER naming the header) for one not as documented. */
bool http_head_read(nng_http_req *req, http_head *h, http_outcome *o);

/* Authenticates h for method (full name) and the blen bytes of body:
 * true with *sign false when onced runs OPEN; true with *sign and key set
 * (the principal's, to sign the envelope; the caller wipes it) when the
 * tag verifies; else false with o set (401 MISSING_PRINCIPAL,
 * MISSING_TAG or BAD_TAG; 400 HTTP_BAD_HEADER for a tag that is neither
 * hex nor base64). Any thread. */
bool http_head_auth(const http_head *h, auth *a, const char *method,
                    const void *body, size_t blen, uint8_t key[AUTH_KEY_BYTES],
                    bool *sign, http_outcome *o);

#endif /* SERVER_HTTP_HEAD_H */
