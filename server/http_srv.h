/*
 * http_srv.h — onced's HTTP/1.1 listener (--http-listen, --metrics-listen)
 * on nng's stream API: connections, reading one request at a time,
 * routing it to a handler, writing the response; replaces nng's HTTP
 * server, which bounds none of these (docs/http.md, "The listener").
 *
 * Owns: the stream listener (TLS for https://), one http_sconn per open
 * connection, and the routes: a handler route runs an nng-style handler
 * (void cb(nng_aio *)) with the aio's inputs as nng's HTTP server sets
 * them — input 0 the nng_http_req (body copied in), input 1 the route's
 * data — and sends the nng_http_res it outputs (status, Content-Type,
 * Connection, body); a static route answers bytes from memory.
 * Invariant: at most conn_max connections are held open, at most
 * per_peer of them from one IP address (one more is answered 429 and
 * closed, displacing nobody), and at most HTTP_SRV_REFUSING more are
 * being closed (one that waited a second or more for a request head,
 * displaced by a new one) or answered 503 (when none did) or 429, so the
 * HTTP listener never takes the descriptors the nng listener needs; a
 * request's line and headers are at most 16 KiB and arrive within
 * head_ms of its first byte, its body (a Content-Length, or chunks
 * decoded as they arrive: at most body_max either way, refused 413 as
 * soon as it would be more) within 30 s after them, an idle keep-alive
 * connection is closed after 60 s and a response the peer does not take
 * within 10 s closes it; each refusal is an HTTP status with the JSON
 * body of docs/http.md, counted in lim.stats (with the connections open
 * and those evicted). One request per connection is read, answered, then
 * the next one (pipelined requests wait their turn).
 * Never: blocks in an nng callback (a handler hands work on, as
 * http_api.c does; static files and /metrics answer from memory); frees a
 * connection inside its own aio's callback (a reaper thread does).
 */
#ifndef SERVER_HTTP_SRV_H
#define SERVER_HTTP_SRV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "server/http_stats.h"

typedef struct http_srv http_srv;

/* Connections being answered 503 (or 429: their address's cap) or closed
 * to make room, beyond conn_max. */
#define HTTP_SRV_REFUSING 8

typedef struct http_srv_limits {
    size_t conn_max;   /* connections held open */
    size_t per_peer;   /* of them, from one address (0: no such cap) */
    size_t body_max;   /* largest body read (--recv-max), as sent with a
                          Content-Length or decoded from chunks */
    uint64_t head_ms;  /* request line and headers, from the first byte */
    http_stats *stats; /* refusals, evictions, connections open are
                          counted here (shared by listeners; NULL: not) */
} http_srv_limits;

/* Listens at url (http:// or https:// with tls, which stays the
 * caller's and must outlive s) once started. 0 or an nng error. */
int http_srv_open(http_srv **sp, const char *url, nng_tls_config *tls,
                  const http_srv_limits *lim);

/* Routes method ("POST", or "GET", which serves HEAD too) on path (tree:
 * path and everything under path/) to cb with data as input 1. Before
 * http_srv_start. 0 or NNG_ENOMEM. */
int http_srv_handle(http_srv *s, const char *method, const char *path,
                    bool tree, void (*cb)(nng_aio *), void *data);

/* GET path answers type and data (static: never copied nor freed). */
int http_srv_static(http_srv *s, const char *path, const char *type,
                    const void *data, size_t len);

/* Listens and accepts. 0 or an nng error. */
int http_srv_start(http_srv *s);

/* The address listened at (for a port chosen by the system). */
int http_srv_addr(http_srv *s, nng_sockaddr *sa);

/* Stops accepting, closes every connection and waits for the handler
 * calls in flight to finish (whoever runs them must still run). NULL is
 * ok; twice is ok. */
void http_srv_stop(http_srv *s);

/* Frees s after http_srv_stop. NULL is ok. */
void http_srv_free(http_srv *s);

#endif /* SERVER_HTTP_SRV_H */
