/*
 * conns.h — which connections onced keeps: how many in all and per peer,
 * how long one may idle, and what a peer that misbehaved may hold.
 *
 * Owns: the table of the socket's open connections (one entry per nng
 * pipe, from NNG_PIPE_EV_ADD_PRE to NNG_PIPE_EV_REM_POST: its peer, its
 * last request, the requests of it holding a context and their limit, its
 * failed authentications in a row), the table of penalised peers, and a
 * periodic thread that closes idle connections and writes the log lines
 * the callbacks only note.
 * A peer is what the transport tells: the IP address (tcp://,
 * tls+tcp://), the uid of the process at the other end (ipc://, from
 * nng's ipc:peer-uid); a connection whose peer is unknown counts only in
 * all.
 * Invariant: an entry lives from ADD_PRE until REM_POST or until onced
 * closes the pipe itself, whichever comes first (nng 1.5.2's one reaper
 * thread can be held by a pipe that never finishes closing, and then no
 * REM_POST comes); a connection beyond --conn-max-per-peer or --conn-max is
 * kept only by closing a longer-idle one of the same scope (nothing in
 * flight, idle CONNS_EVICT_IDLE_MS at least); otherwise it is refused in
 * its ADD_PRE callback (nng 1.5.2: a pipe closed there is never added).
 * A peer whose connection was closed for not reading its replies, or for
 * failing authentication CONNS_AUTH_FAILS_MAX times in a row, is
 * penalised: its connections opened during the back-off window (which
 * doubles at each new offence, CONNS_PENALTY_MAX_MS at most) may each
 * hold one request in flight instead of --conn-inflight.
 * Never: blocks, logs or closes a pipe while holding its lock; logs from
 * a pipe or aio callback (the periodic thread writes those lines).
 */
#ifndef SERVER_CONNS_H
#define SERVER_CONNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "server/stats.h"

/* A connection may be closed to make room only after this long without a
 * request, and with none in flight. */
#define CONNS_EVICT_IDLE_MS 1000
/* Requests in a row failing authentication that close a connection. */
#define CONNS_AUTH_FAILS_MAX 32
/* The longest back-off window of a penalised peer. */
#define CONNS_PENALTY_MAX_MS (3600ull * 1000)

typedef struct conns_config {
    size_t max;          /* --conn-max: open connections in all */
    size_t max_per_peer; /* --conn-max-per-peer */
    uint64_t idle_ms;    /* --conn-idle-timeout; 0: never closed for it */
    size_t inflight;     /* --conn-inflight: requests one connection may
                            have in flight */
    uint64_t penalty_ms; /* the first back-off window of a peer */
} conns_config;

typedef struct conns conns;

/* Allocates the tables. 0 or ENOMEM. */
int conns_open(conns **cp, const conns_config *cfg, server_stats *stats);

/* The socket's pipe callback for NNG_PIPE_EV_ADD_PRE (admits or refuses
 * the connection) and NNG_PIPE_EV_REM_POST (forgets it); the listener
 * registers one callback per event and calls this from it. */
void conns_pipe_event(conns *cs, nng_pipe p, nng_pipe_ev ev);

/* Starts the thread that closes idle connections and logs. 0 or an
 * errno. */
int conns_start(conns *cs);

/* Stops that thread (NULL is ok). */
void conns_stop(conns *cs);

/* Frees cs after conns_stop and after the socket closed. NULL is ok. */
void conns_free(conns *cs);

typedef enum {
    CONNS_HOLD_OK,   /* the request holds a context of its connection */
    CONNS_HOLD_FULL, /* its connection holds its limit already */
    CONNS_HOLD_GONE, /* its connection is closed or refused */
} conns_hold_result;

/* A request of pipe id takes a context unless its connection holds its
 * limit (--conn-inflight, or 1 when penalised); counts as activity. Any
 * thread; never blocks. */
conns_hold_result conns_hold(conns *cs, uint32_t id);

/* The context a request of pipe id held is free again. */
void conns_release(conns *cs, uint32_t id);

/* Pipe id is being closed because a reply waited --send-timeout: its
 * peer is penalised. */
void conns_not_reading(conns *cs, uint32_t id);

/* A request of pipe id failed authentication (true: close the pipe, it
 * failed CONNS_AUTH_FAILS_MAX in a row; its peer is then penalised), or
 * passed it (ok: the count starts over). */
bool conns_auth_result(conns *cs, uint32_t id, bool ok);

/* Open connections now. */
size_t conns_count(conns *cs);

#endif /* SERVER_CONNS_H */
