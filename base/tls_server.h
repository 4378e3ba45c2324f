/*
 * tls_server.h — the server side of tls+tcp://: an nng TLS configuration
 * from a PEM certificate (chain) and key file, for onced's listener
 * (server/listener.c), its HTTP API (server/http_api.c) and a follower's
 * answering socket (repl/notleader.c), which listen on the same URLs in
 * turn. In base/ because two layers use it (server/ and repl/ below it).
 *
 * Owns: nothing after it returns (the configuration is the caller's; the
 * key's text is wiped from memory once nng has parsed it).
 * Never: logs; the caller says what failed with err.
 */
#ifndef BASE_TLS_SERVER_H
#define BASE_TLS_SERVER_H

#include <stddef.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

/* A new server configuration with cert_file and key_file in *out (free
 * with nng_tls_config_free). 0, or an nng error with err saying what
 * (the file that could not be read, or nng's complaint). */
int tls_server_config(nng_tls_config **out, const char *cert_file,
                      const char *key_file, char *err, size_t errlen);

/* Listens on a tls+tcp:// url of s with cfg; the listener in *lp (may be
 * NULL). 0 or an nng error. */
int tls_server_listen(nng_socket s, const char *url, nng_tls_config *cfg,
                      nng_listener *lp);

#endif /* BASE_TLS_SERVER_H */
