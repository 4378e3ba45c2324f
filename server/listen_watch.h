/*
 * listen_watch.h — keeps onced's ipc:// and tls+tcp:// listeners accepting.
 *
 * nng 1.5.2 (Debian 12's) ends a listener for good when one incoming
 * connection fails its SP handshake with NNG_ECLOSED (the socket core's
 * accept callback takes "no further action" on that error), and over
 * ipc:// a handshake write that meets EPIPE is reported as NNG_ECLOSED. So
 * one local process that connects to the socket path and hangs up before
 * onced has written its header — a port scanner, a health check, a client
 * that gives up on a dial — leaves onced serving the connections it has
 * and accepting none: later clients connect into the kernel's backlog and
 * are never answered. (tcp:// sees ECONNRESET there, after which nng
 * accepts again.) tls+tcp:// listeners end the same way: nng's TLS layer
 * reports NNG_ECLOSED for some peers that go away mid-handshake (seen in
 * CI: clients that reject onced's certificate, then a trusted client
 * whose calls were never answered; tls_probe.h).
 *
 * The watch: a thread of its own reads each ipc:// listener's "other"
 * error count in nng's statistics every 200 ms (nng counts there the
 * error that ends it) and, when it grew, probes the listener at once with
 * a short wait (300 ms); and it probes each ipc:// listener every
 * interval (a tls+tcp:// one every 30 s at most: a probe costs onced a
 * TLS handshake, and the error that ends it is always counted) — it connects to
 * the socket path as an SP REQ peer (a plain socket, see watch_probe; over TLS,
 * tls_probe.h) and waits for the REP socket to report a new pipe from that
 * listener (NNG_PIPE_EV_ADD_PRE). No new pipe within LISTEN_WATCH_PROBE_MS,
 * twice in a row (a TLS probe after an error, too: a handshake under load is
 * slow): the listener has stopped (or its socket file is gone). It closes that
 * listener, removes an ipc:// socket file, listens on the same URL again
 * (tls+tcp:// with the same configuration) and says so in the log. Closing the
 * listener closes its connections too — the ones it negotiated but never handed
 * over (clients that connected after it stopped would otherwise wait for good)
 * and the ones it served: their clients reconnect, and libonce resends a call
 * in flight under the same rpc id, which onced answers once.
 *
 * Owns: the watch thread, its probe sockets and the table of watched
 * listeners (url, the current listener, pipes counted); a listener it
 * started again is its own until the socket closes.
 * Invariant: the nng pipe callback only counts (atomics, no lock, never
 * blocks); everything else runs on the watch thread.
 * Never: touches tcp:// listeners; closes a listener that answered its
 * probe.
 */
#ifndef SERVER_LISTEN_WATCH_H
#define SERVER_LISTEN_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

/* How long a probe waits for its connection to be accepted. */
#define LISTEN_WATCH_PROBE_MS 2000

typedef struct listen_watch listen_watch;

/* A watch over sock's listeners, probing every interval_ms (> 0) and
 * adding 1 to *restarts (the caller's, Stats) for every listener it starts
 * again; it starts with listen_watch_start. Returns 0 or an nng error. */
int listen_watch_open(listen_watch **wp, nng_socket sock, uint64_t interval_ms,
                      _Atomic uint64_t *restarts);

/* Watches nl, a listener of the socket on url (copied): an ipc:// one
 * (tls NULL) or a tls+tcp:// one with server configuration tls (held until
 * listen_watch_free); other URLs are not watched. Before
 * listen_watch_start only. Returns 0 or an nng error. */
int listen_watch_add(listen_watch *w, const char *url, nng_listener nl,
                     nng_tls_config *tls);

/* nng's thread, for every pipe a listener of the socket negotiated
 * (NNG_PIPE_EV_ADD_PRE, before conns.h may refuse it: a refused probe
 * still proves the listener accepts): counts it against its listener.
 * Only atomics: never blocks. The listener's pipe callback calls it. */
void listen_watch_pipe_added(listen_watch *w, nng_pipe p);

/* Told on the watch thread that listener old was replaced by nl. */
typedef void (*listen_watch_moved_fn)(void *arg, nng_listener old,
                                      nng_listener nl);

/* fn(arg, ...) for every listener started again from now on (it must not
 * block). Before listen_watch_start only. */
void listen_watch_on_move(listen_watch *w, listen_watch_moved_fn fn, void *arg);

/* Starts the thread (none when nothing was added). Returns 0 or an nng
 * error. */
int listen_watch_start(listen_watch *w);

/* Stops the thread (waits for a probe under way, at most
 * LISTEN_WATCH_PROBE_MS). Call before closing the socket. NULL is ok. */
void listen_watch_stop(listen_watch *w);

/* Frees w (stopping it first if need be). Call after the socket is closed:
 * nng's pipe callback may run until then. NULL is ok. */
void listen_watch_free(listen_watch *w);

#endif /* SERVER_LISTEN_WATCH_H */
