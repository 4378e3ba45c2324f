/*
 * tls_probe.h — the listener watch's probe of a tls+tcp:// listener
 * (listen_watch.h): a connection that speaks TLS and then the SP header
 * of a REQ peer, so that a listener still accepting hands the socket a
 * new pipe.
 *
 * nng 1.5.2 ends a tls+tcp:// listener the way it ends an ipc:// one:
 * when one incoming connection's SP handshake fails with NNG_ECLOSED, the
 * socket core's accept callback takes "no further action". Over TLS that
 * error comes out of nng's TLS layer when a peer goes away during the
 * handshake at an unlucky moment (its TCP connection closed by one
 * callback while another still sends): seen with clients that reject
 * onced's certificate, on a loaded machine. The TCP side keeps accepting
 * and negotiating, so clients connect, send their call, and are never
 * answered.
 *
 * Owns: the client TLS configuration of its probes (no verification: a
 * probe only asks whether the listener accepts) and the probes it parks.
 * Invariant: a probe is never closed while its TLS or SP handshake may
 * still be under way on onced's side (that close is what ends a
 * listener): it is parked until its header is sent, the server hangs up,
 * or TLS_PROBE_PARK_MS pass.
 * Never: runs in an nng callback (the aio callback only stores a result);
 * never verifies the certificate.
 */
#ifndef SERVER_TLS_PROBE_H
#define SERVER_TLS_PROBE_H

#include <stdbool.h>
#include <stdint.h>

#include <nng/nng.h>

/* How long a parked probe is kept at most. */
#define TLS_PROBE_PARK_MS 30000u

typedef struct tls_probe tls_probe;           /* per listener */
typedef struct tls_probe_conn tls_probe_conn; /* one probe */

/* A prober of listener nl: it dials the address nl is bound to (a
 * wildcard address as loopback). 0, or an nng error. */
int tls_probe_open(tls_probe **pp, nng_listener nl);

/* Points p at nl, a new listener on the same URL. 0 or an nng error. */
int tls_probe_retarget(tls_probe *p, nng_listener nl);

/* Dials, waiting at most wait_ms, and starts sending the SP header (the
 * TLS handshake goes first). NULL when nothing accepted the connection
 * (refused, or no answer within wait_ms). */
tls_probe_conn *tls_probe_connect(tls_probe *p, int wait_ms);

/* Waits up to ms; true when onced hung up on the probe (its header could
 * not be sent). */
bool tls_probe_hung_up(tls_probe_conn *c, int ms);

/* Closes c now (a pipe of it was added: its handshake is over). */
void tls_probe_close(tls_probe_conn *c);

/* Keeps c until it may be closed (tls_probe_sweep); closes it at once
 * when p parks as many as it can. */
void tls_probe_park(tls_probe *p, tls_probe_conn *c);

/* Closes the parked probes whose header went out or failed, or that were
 * kept TLS_PROBE_PARK_MS; all of them when all is true. */
void tls_probe_sweep(tls_probe *p, bool all);

/* Closes every parked probe and frees p. NULL is ok. */
void tls_probe_free(tls_probe *p);

#endif /* SERVER_TLS_PROBE_H */
