/*
 * conn.h — libonce's connection layer: the REQ socket of a handle, its
 * dialer (of one URL: the target steer.h chooses among the handle's URLs;
 * started over when it stalls, or on another URL when the target moves),
 * the TLS configuration, and the call slots (slot.h) kept for reuse on
 * that socket.
 *
 * Owns: struct conn and everything in it; which lock protects which field
 * is written beside it.
 * Invariant: the layer knows nothing of rpc ids, leases or retries; it
 * includes no other header of client/ but slot.h and steer.h (the
 * layer's other parts; conn.c also uses tls_diag.h), and its functions take
 * a conn, never the whole handle. The socket dials one URL at a time, so
 * every attempt goes to the target.
 * Never: blocks on the network (the dial is non-blocking and nng
 * reconnects by itself) but in conn_tls_verdict, bounded by its caller's
 * time; never sends a request (exchange.c does).
 */
#ifndef CLIENT_CONN_H
#define CLIENT_CONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "once/client.h"
#include "client/slot.h"
#include "client/steer.h"

/* Most server URLs one handle takes (once_options.url, comma-separated:
 * the replicas of a cluster, docs/replication.md). */
#define CONN_URLS_MAX STEER_URLS_MAX

typedef struct conn {
    nng_socket sock;     /* REQ socket; nng makes it thread-safe */
    char *url;           /* owned (strdup); read-only after conn_open */
    nng_tls_config *tls; /* tls+tcp:// client config, or NULL; read-only */
    char *tls_ca;        /* its CA file (strdup), or NULL; read-only */
    char *tls_name;      /* the server name it checks (strdup); read-only */

    slot_pool slots;              /* free call slots (slot.h) */
    _Atomic uint64_t max_request; /* onced's --recv-max from its last
                                     OpenLease reply; 0: not known */

    pthread_mutex_t dial_lock; /* protects dialers, ndialers, redial_ms,
                                  tls_failed, route's target */
    /* The dialer of the target URL (route): REQ sends every attempt to
     * it. A follower's UNAVAILABLE/NOT_LEADER is retried under the same
     * rpc id (call.c), after conn_hint moved the target to the leader. */
    nng_dialer dialers[1];
    size_t ndialers;
    steer route;  /* the URLs and which one is the target (steer.h) */
    size_t nurls; /* URLs in url; set by conn_open, read-only afterwards */
    uint64_t redial_ms;             /* clock_now_ms() of the last redial */
    _Atomic uint64_t redial_gap_ms; /* one URL: the wait before the next
                                       redial (doubles, conn_redial; back
                                       to the least on a reply); 0: least */
    bool tls_failed; /* a dialer of sock saw a handshake fail as TLS
                        (tls_diag_dialer_failed); sticky */

    pthread_mutex_t diag_lock; /* protects diag_ms and diag */
    uint64_t diag_ms;          /* clock_now_ms() of the last TLS probe */
    once_status diag;          /* its verdict (code ONCE_OK: none) */

    _Atomic bool shut; /* conn_shut ran (the socket is closed, or its close
                          was left running) */
} conn;

/* Initializes *cn (locks, no socket) with a copy of url. Returns ONCE_OK
 * or fills st (NO_MEMORY). */
int conn_init(conn *cn, const char *url, once_status *st);

/* The TLS configuration of sec for cn->url, before conn_open; a no-op for
 * plain URLs without a CA file. Returns ONCE_OK or fills st (BAD_TLS). */
int conn_tls(conn *cn, const once_security *sec, once_status *st);

/* Opens the REQ socket with libonce's options and starts the non-blocking
 * dial. Returns ONCE_OK or fills st (INTERNAL/NNG, INVALID_ARGUMENT/
 * BAD_URL). */
int conn_open(conn *cn, once_status *st);

/* Closes the socket now (calls in flight on it end NNG_ECLOSED). Safe to
 * call twice and on a socket never opened. */
void conn_shut(conn *cn);

/* Closes kept slots and the socket and frees what conn_init made. */
void conn_fini(conn *cn);

/* A send found no connection (tls+tcp:// only; ONCE_OK at once for any
 * other URL): when the dialer has seen a handshake fail as TLS (its
 * statistics), probes the server's TLS (tls_diag.h), at most once a second
 * per handle — a caller within that second gets the last verdict — and
 * waiting at most timeout_ms. Returns ONCE_OK (no TLS verdict: keep
 * waiting) or ONCE_UNAVAILABLE with st set (TLS_UNTRUSTED,
 * TLS_NAME_MISMATCH, TLS_HANDSHAKE). */
int conn_tls_verdict(conn *cn, uint64_t timeout_ms, once_status *st);

/* A send found no connection for a second (or for a whole attempt, when
 * attempts are shorter): replaces the dialer with a new one (at most once a
 * second per handle; a move of the target counts as one) — on the next URL
 * when the handle has several and nothing was heard from the target for a
 * second (steer_rotate). nng 1.5.2's dialer stops for good when a connection
 * fails during its handshake with NNG_ECLOSED (dialer_connect_cb: "no
 * further action"), and a handshake write that meets EPIPE is reported as
 * NNG_ECLOSED: a client that redials while onced dies (SIGKILL) connects
 * into the dying listener's backlog and writes its SP header after the
 * listener is gone. A new dialer starts over. Closing the old dialer while
 * its handshake is under way can in turn stop onced's nng 1.5.2 ipc
 * listener (the same ECLOSED rule on the server side, listen_watch.h),
 * hence at most once a second; with one URL the wait doubles, up to 4 s,
 * until a reply comes (conn_heard), so that a slow handshake (TLS with a
 * loaded server) is not started over before it can finish. */
void conn_redial(conn *cn);

/* Whether the handle has several URLs (a replicated cluster): then a send
 * without a connection polls conn_poll_move while it waits. */
bool conn_several(const conn *cn);

/* A send finds no connection; with several URLs the target moves on to
 * the next at once (steer_rotate; the URL left is marked down), without
 * waiting out the second conn_redial keeps between redials, when
 *   - the target gave this handle its last answer (it led: steer_led) and
 *     its dialer had a connection refused (nothing listens at its URL: the
 *     leader was killed, or a follower still names a leader that was) or
 *     stopped for good (the NNG_ECLOSED of a dial into a dying listener) —
 *     a refused connection has no handshake under way to end; any other
 *     replica is waited for: a winner re-executing to lead refuses dials
 *     for a moment;
 *   - or, plain URLs only, the target was found down less than 2.5 s ago
 *     and has not connected within 250 ms of the move to it (a leader
 *     stopped or cut off, that followers still name until its etcd lease
 *     lapses; a leader that is back connects well within that).
 * Returns whether it moved. A dial that merely stalls (a slow or
 * unreachable host) is otherwise left to conn_redial. */
bool conn_poll_move(conn *cn);

/* The target's generation: read before an attempt, passed to conn_hint and
 * conn_suspect about that attempt. */
uint64_t conn_target(conn *cn);

/* The attempt sent at generation gen was refused NOT_LEADER, naming leader
 * (NULL or "": none). Moves the target when steer_hint says so (and
 * redials). Returns true when the next attempt goes to another URL than
 * this one did (retry at once), false when it stays (back off). */
bool conn_hint(conn *cn, uint64_t gen, const char *leader);

/* A follower that knows no leader refused an attempt sent on generation
 * gen: moves to the next URL (steer_leaderless) and redials. A no-op with
 * one URL. */
void conn_leaderless(conn *cn, uint64_t gen);

/* An attempt sent at sent_ms (clock_now_ms) on generation gen got no reply
 * in time: moves to the next URL unless the target answered anything
 * since (steer_rotate). A no-op with one URL. */
void conn_suspect(conn *cn, uint64_t gen, uint64_t sent_ms);

/* A reply came in from the target of generation gen (any reply: the
 * target is alive); served: not a follower's refusal (steer_heard). */
void conn_heard(conn *cn, uint64_t gen, bool served);

/* The handle's route for once_client_route. */
void conn_route(conn *cn, once_route *out);

#endif /* CLIENT_CONN_H */
