/*
 * http_api.h — the JSON API (--http-listen URL): POST /v1/<full method
 * name> on onced's HTTP listener (http_srv.h), answered by the same verifier,
 * executor, records, replays and conflicts as the nng socket (docs/http.md).
 *
 * Owns: the listener's handler for /v1/ and one http_call per request
 * in flight (at most the server's --contexts): the body in proto3's JSON
 * mapping decoded by the method's request descriptor (http/json_pb.h) and
 * packed; the Once-* headers read into exactly the envelope an nng client
 * sends (once.v1.Request: rpc id, first_incomplete, attempt, deadline,
 * principal, payload); the HTTP tag checked with the principal's key
 * (auth_key_copy) over the bytes docs/http.md defines, and the envelope
 * then signed with that key, so the verifier and the executor check it as
 * they check any request; the packed Response turned back into JSON and
 * an HTTP status by gRPC's mapping; the operator console's pages and
 * console tokens on the same listener (http_console.h).
 * Invariant: the record's payload digest is over the packed request
 * message, never the JSON text, so a call made over HTTP and retried over
 * nng under the same rpc id (or the other way round) is one call; a
 * request refused here (its path, headers, type, JSON, tag, size) reaches
 * nothing that writes.
 * Never: blocks in the handler callback or in the reply (both only
 * decode, hash, pack and hand over; the aio is finished from the reply);
 * trusts a Once-Principal without its tag when onced authenticates.
 */
#ifndef SERVER_HTTP_API_H
#define SERVER_HTTP_API_H

#include "server/http_srv.h"
#include "server/server.h"

typedef struct http_api http_api;

/* NULL when url can be served (http://HOST:PORT or https://HOST:PORT,
 * no path but "/", no query), else a static sentence saying what is
 * wrong. */
const char *http_api_url_problem(const char *url);

/* Routes POST /v1/... and the console's pages on hs (before it starts)
 * for the running server srv. 0 or an nng error. */
int http_api_open(http_api **ap, http_srv *hs, server *srv);

/* Frees a; after the listener that routes to it has stopped (its calls
 * in flight answered: http_srv_stop). NULL is ok. */
void http_api_free(http_api *a);

#endif /* SERVER_HTTP_API_H */
