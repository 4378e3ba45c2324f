/*
 * endpoint_stats.h — finding one nng dialer's or listener's statistics.
 *
 * nng 1.5.2 counts a failed TLS handshake only in the endpoint's "auth"
 * statistic; libonce (tls_diag.c, for a dialer) and onced (tls_watch.c,
 * for a listener) both read it from a snapshot (nng_stats_get).
 *
 * Owns: the walk over a snapshot's scopes.
 * Never: frees or takes the snapshot (the caller's, nng_stats_free).
 */
#ifndef BASE_ENDPOINT_STATS_H
#define BASE_ENDPOINT_STATS_H

#include <stdint.h>

#include <nng/nng.h>

/* The child of scope st named name, or NULL. */
nng_stat *endpoint_stats_child(nng_stat *st, const char *name);

/* The statistics scope of the endpoint of kind "dialer" or "listener"
 * whose "id" is id, searched below st, or NULL. Not
 * nng_stat_find_dialer/_listener: nng 1.5.2's search below the top level
 * ignores the id and returns the first endpoint of the process. */
nng_stat *endpoint_stats_find(nng_stat *st, const char *kind, uint64_t id);

#endif /* BASE_ENDPOINT_STATS_H */
