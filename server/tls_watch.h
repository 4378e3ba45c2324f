/*
 * tls_watch.h — failed TLS handshakes on onced's tls+tcp:// listeners,
 * told in the log.
 *
 * nng 1.5.2 hands a listener's failed handshakes to no callback: a client
 * that rejects onced's certificate (another CA, another name) makes no
 * pipe, and nng only counts the failure in the listener's "auth"
 * statistic. A thread reads those counters once a second and logs a
 * warning with the count: the first failure at once, then at most one
 * line per TLS_WATCH_LOG_MS per listener.
 *
 * Owns: the thread and the count of each watched listener.
 * Invariant: a listener is watched only while the socket is open (stop
 * before nng_close); the log is rate-limited whatever the clients do.
 * Never: runs in an nng callback; never touches the listener itself.
 */
#ifndef SERVER_TLS_WATCH_H
#define SERVER_TLS_WATCH_H

#include <nng/nng.h>

typedef struct tls_watch tls_watch;

/* An empty watch (no thread yet). Returns 0 or NNG_ENOMEM. */
int tls_watch_open(tls_watch **wp);

/* Watches listener nl, serving url (copied). Before tls_watch_start.
 * Returns 0, NNG_ENOMEM, or NNG_EINVAL when the watch is full. */
int tls_watch_add(tls_watch *w, const char *url, nng_listener nl);

/* Listener old was replaced by nl on the same URL (listen_watch.h): its
 * count is read from nl from now on. Atomics only; any thread. NULL w is
 * fine. */
void tls_watch_moved(tls_watch *w, nng_listener old, nng_listener nl);

/* Starts the thread. Returns 0 or an nng error. */
int tls_watch_start(tls_watch *w);

/* Stops and joins the thread (logging the failures not yet told). NULL
 * and a watch never started are fine. */
void tls_watch_stop(tls_watch *w);

/* Frees w after tls_watch_stop. NULL is fine. */
void tls_watch_free(tls_watch *w);

#endif /* SERVER_TLS_WATCH_H */
