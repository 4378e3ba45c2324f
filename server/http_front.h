/*
 * http_front.h — onced's HTTP endpoints as one piece: the listener of
 * --http-listen (the JSON API, the console, and /metrics unless
 * --metrics-listen names another URL) and the one of --metrics-listen.
 *
 * Owns: one http_srv per distinct URL (TLS for https://), the http_api
 * and the metrics routed on them, and their limits: the connections the
 * server leaves to HTTP (server.h, http_conn_max: counted against the
 * open-file limit beside the nng listener's), split between two
 * listeners; --recv-max for bodies; --http-header-timeout.
 * Invariant: stopped before the executor stops, so every HTTP call in
 * flight is answered first.
 * Never: opens a listener nobody asked for.
 */
#ifndef SERVER_HTTP_FRONT_H
#define SERVER_HTTP_FRONT_H

#include "server/server.h"

typedef struct http_front http_front;

/* Serves the JSON API and console at http_url and /metrics at
 * metrics_url (NULL: at http_url, if any) for the running server srv.
 * Both NULL: *fp is NULL. 0, or an nng error (logged) after undoing
 * what was opened. */
int http_front_open(http_front **fp, const char *http_url,
                    const char *metrics_url, server *srv);

/* Stops the listeners (their calls in flight answered first) and the
 * metrics publisher. Call before server_close. NULL is ok. */
void http_front_stop(http_front *f);

/* Frees f after http_front_stop. NULL is ok. */
void http_front_free(http_front *f);

#endif /* SERVER_HTTP_FRONT_H */
