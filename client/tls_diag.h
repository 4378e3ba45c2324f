/*
 * tls_diag.h — why a tls+tcp:// connection does not come up, told as a
 * status: the certificate is not trusted, does not carry the server name,
 * or the handshake fails whatever the certificate.
 *
 * nng 1.5.2 gives a socket's dialer no way to report a failed handshake:
 * the dialer counts it (its "auth" statistic), waits and dials again, and
 * a send just finds no pipe until its timeout. The verdict comes from
 * handshakes of our own (nng's TLS stream dialer, the same engine and
 * CA): with the handle's configuration; without verification (does the
 * server speak TLS at all?); verified without a server name (trusted, but
 * another name?). mbedTLS reports every verification failure as one error
 * (NNG_ECRYPTO), so the three handshakes are what tells the cases apart.
 *
 * Owns: the probe handshakes (each its own TCP connection, closed after
 * the server's first byte or the failure) and the wording of the verdict.
 * Invariant: a verdict is given only when a handshake failed as TLS
 * (NNG_ECRYPTO or NNG_EPEERAUTH); a server that cannot be reached, or that
 * completes the handshake, gets none (the caller keeps waiting); a
 * handshake cut short (reset or closed by the network: onced's listener
 * was listening again) is tried again while time is left.
 * Never: runs in an nng callback; never waits past the time it is given;
 * never sends onced a byte of the SP protocol.
 */
#ifndef CLIENT_TLS_DIAG_H
#define CLIENT_TLS_DIAG_H

#include <stdbool.h>
#include <stdint.h>

#include <nng/nng.h>

#include "once/client.h"

/* Whether dialer d has had a handshake fail as TLS since it started (its
 * "auth" statistic), or nng keeps no statistics (then nobody can tell
 * without a probe). A slow handshake or a server not reachable is no
 * reason to probe: a probe is one more handshake for the server. */
bool tls_diag_dialer_failed(nng_dialer d);

/* The probe of a tls+tcp:// url: ca_file (NULL: none given) and the
 * server name the handle checks (never NULL: the URL's host by default).
 * Waits at most timeout_ms in all. Returns ONCE_OK when there is no TLS
 * verdict (handshake completed, or the server could not be reached), or
 * ONCE_UNAVAILABLE with st set: reason TLS_UNTRUSTED, TLS_NAME_MISMATCH or
 * TLS_HANDSHAKE and a message that says what to change. */
int tls_diag_probe(const char *url, const char *ca_file,
                   const char *server_name, uint64_t timeout_ms,
                   once_status *st);

#endif /* CLIENT_TLS_DIAG_H */
