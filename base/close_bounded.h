/*
 * close_bounded.h — nng_close that cannot hold its caller for ever.
 *
 * nng 1.5.2's nng_close waits until every pipe of the socket is gone, and
 * a pipe can stay for good (seen after a peer that did not read its
 * replies, and on a follower's socket at a role change). onced's listener
 * (server/listener.c) and a follower's answering socket (repl/notleader.c)
 * close through this so that SIGTERM ends onced whatever its peers did.
 *
 * Owns: one thread per close, and its small state (freed by whichever of
 * the caller and the thread finishes last).
 * Never: frees what the socket's callbacks use: when the close is left
 * running, the caller must keep that memory (the process is about to
 * exit).
 */
#ifndef BASE_CLOSE_BOUNDED_H
#define BASE_CLOSE_BOUNDED_H

#include <stdbool.h>

#include <nng/nng.h>

/* Closes s, waiting at most ms for nng_close to return. true: closed.
 * false: the close still runs on its thread (or no thread could be
 * started and it ran here: then true). Stop every aio of the socket first
 * (nng_aio_stop): no callback may run during the close. */
bool close_bounded(nng_socket s, unsigned ms);

#endif /* BASE_CLOSE_BOUNDED_H */
