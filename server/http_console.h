/*
 * http_console.h — the operator console on the --http-listen listener
 * (docs/console.md): its pages, and the console token its fetches carry.
 *
 * Owns: serving the files built into onced (console_assets.h) at
 * /console and /console/NAME as static routes of http_srv.h (answered
 * from memory by the listener: no handler runs); the check of
 * Once-Console-Token on a JSON API request (console_token.h): read methods
 * only, the token's tag under its principal's key, its expiry, the principal an
 * operator. Invariant: a request carrying a console token runs only a method of
 * the read list (http_console_reads), whatever the token; with onced
 * authenticating, only when the token verifies, has not expired and
 * names an operator — and then it runs as that principal, its envelope
 * signed with the principal's key, so revocation and the policy are
 * checked by the executor as for any call.
 * Never: serves a file from disk or the internet; lets a token authorise
 * a mutating method; logs a key or a token.
 */
#ifndef SERVER_HTTP_CONSOLE_H
#define SERVER_HTTP_CONSOLE_H

#include <stdbool.h>
#include <stdint.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "proto/auth_tag.h"
#include "proto/principals.h"
#include "server/auth.h"
#include "server/http_head.h"
#include "server/http_srv.h"

/* Adds the console's pages to hs (before it starts). 0 or an nng
 * error. */
int http_console_serve(http_srv *hs);

/* Whether method (full name) is one a console token may call. */
bool http_console_reads(const char *method);

/*
 * A request with Once-Console-Token (token, as received) for method:
 * true with *sign false when onced runs OPEN (h->principal becomes the
 * token's principal, a label); true with *sign and key set (the
 * principal's; the caller wipes it) and h->principal pointing at name
 * (PRINCIPAL_NAME_MAX + 1 bytes, the caller's) when it passes; else false
 * with o set (403 CONSOLE_READ_ONLY, 401 CONSOLE_TOKEN_BAD or
 * CONSOLE_TOKEN_EXPIRED, 403 CONSOLE_NOT_OPERATOR). Any thread.
 */
bool http_console_auth(const char *token, auth *a, const char *method,
                       http_head *h, char *name, uint8_t key[AUTH_KEY_BYTES],
                       bool *sign, http_outcome *o);

#endif /* SERVER_HTTP_CONSOLE_H */
