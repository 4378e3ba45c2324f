/*
 * client_impl.h — the body of the opaque once_client handle, shared by the
 * files of client/ only (never installed).
 *
 * Owns: the handle's fields and which lock protects which of them.
 * Invariant: everything except win, renew_stop and the lease-health block
 * is written once in once_client_open and read-only afterwards, so calls
 * read it without a lock; win is only touched under lock, renew_stop under
 * renew_lock, the lease-health block under lease_lock. Lock order:
 * renew_lock, then lease_lock, then lock; slot_lock is a leaf (nothing is
 * taken under it); none is held across network I/O or a user callback.
 * Never: exposes nng or protobuf-c types through the public header.
 */
#ifndef CLIENT_CLIENT_IMPL_H
#define CLIENT_CLIENT_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "lost.h"
#include "once/client.h"
#include "retry.h"
#include "window.h"

struct once_client {
    nng_socket sock;             /* REQ socket; nng makes it thread-safe */
    char *url;                   /* owned (strdup); read-only after open */
    char *principal;             /* owned (strdup); read-only after open */
    uint32_t deadline_ms;        /* read-only after open */
    uint32_t attempt_timeout_ms; /* read-only after open */
    retry_policy retry;          /* read-only after open */
    uint64_t client_id;          /* from OpenLease, 0 without; read-only */
    uint64_t lease_ttl_ms;       /* granted TTL; read-only after open */
    bool signs;                  /* every request carries a tag; with key: */
    uint8_t key[32];             /* the principal's key; read-only after
                                    open, wiped at close */
    nng_tls_config *tls;         /* tls+tcp:// client config, or NULL */

    pthread_mutex_t slot_lock; /* protects slots and nslots */
    struct call_slot *slots;   /* free call slots (slot.h) */
    size_t nslots;
    _Atomic uint64_t pipes_lost;  /* connections closed so far (slot.h) */
    _Atomic uint64_t max_request; /* onced's --recv-max from its last
                                     OpenLease reply; 0: not known */

    pthread_mutex_t dial_lock; /* protects dialer and redial_ms */
    nng_dialer dialer;         /* the one dialer of sock */
    uint64_t redial_ms;        /* retry_now_ms() of the last redial */

    pthread_mutex_t lock; /* protects win */
    window win;           /* incomplete seqs of client_id; under lock */

    /* Background lease renewal (renew.c). renew_running is written only by
     * open/close (no lock); renew_stop is under renew_lock. */
    bool renew_running;
    pthread_t renew_thread;
    pthread_mutex_t renew_lock; /* protects renew_stop */
    pthread_cond_t renew_cv;    /* signalled when renew_stop is set */
    bool renew_stop;

    /* Lease health (lost.c). */
    pthread_mutex_t lease_lock; /* protects everything below */
    int lease_state;            /* enum once_client_lease */
    uint64_t lease_until_ms;    /* retry_now_ms() by which the server has
                                   expired the lease unless renewed since:
                                   the last renewal's reply time plus the
                                   remaining TTL it reported */
    bool closing;               /* once_client_close runs: no callback */
    lost_call *calls;           /* tracked calls in flight (lost.h) */
    once_lease_lost_fn lost_fn; /* the callback, NULL when none */
    void *lost_arg;
    bool lost_notified;   /* the callback has run */
    once_status lost_why; /* how the loss was learned (valid once LOST) */
};

/* Whether a mutating call under client_id is under this handle's own
 * lease (and so ends when it is lost). */
bool client_tracks(const once_client *c, uint64_t client_id);

/* True when seq s of the handle's own id were assigned and all completed
 * (or released): nothing under the lease can still be retried. */
bool client_all_complete(once_client *c);

/* A renewal of the handle's own lease answered at local time reply_ms
 * with remaining_ms left: moves lease_until_ms forward. */
void client_lease_renewed(once_client *c, uint64_t reply_ms,
                          uint64_t remaining_ms);

/* once_lease_renew with an explicit deadline (ms, > 0); client_id 0 is the
 * handle's own. */
int client_lease_renew(once_client *c, uint64_t client_id, uint64_t *ttl_ms,
                       uint64_t *remaining_ms, once_status *st,
                       uint32_t deadline_ms);

/* once_lease_close with an explicit deadline (ms, > 0); client_id 0 is the
 * handle's own. */
int client_lease_close(once_client *c, uint64_t client_id,
                       uint64_t *records_retained, once_status *st,
                       uint32_t deadline_ms);

/* A send found no connection for a second (or for a whole attempt, when
 * attempts are shorter): replaces the dialer with a new one (at most once a
 * second per handle). nng 1.5.2's dialer stops for good when a connection
 * fails during its handshake with NNG_ECLOSED (dialer_connect_cb: "no
 * further action"), and a handshake write that meets EPIPE is reported as
 * NNG_ECLOSED: a client that redials while onced dies (SIGKILL) connects
 * into the dying listener's backlog and writes its SP header after the
 * listener is gone. A new dialer starts over. Closing the old dialer while
 * its handshake is under way can in turn stop onced's nng 1.5.2 ipc
 * listener (the same ECLOSED rule on the server side, tests/README.md "Not
 * covered"), hence at most once a second. */
void client_redial(once_client *c);

/* once_call with an explicit deadline over all attempts (ms, > 0). */
int client_call(once_client *c, const char *method, bool mutating,
                once_rpc_id *id, const void *req, size_t req_len, void **resp,
                size_t *resp_len, once_status *st, uint32_t deadline_ms);

/* Assigns the next seq of c->client_id (marked incomplete). Returns 0 or
 * ENOMEM. */
int client_seq_assign(once_client *c, uint64_t *seq);

/* The reply for (client_id, seq) was delivered to the caller: marks seq
 * complete when client_id is this handle's own id; otherwise a no-op. */
void client_seq_complete(once_client *c, uint64_t client_id, uint64_t seq);

/* The first_incomplete to carry on a request under client_id: this
 * handle's watermark for its own id, 0 ("no acknowledgement") for any other
 * id, since this handle knows nothing about that id's other seqs. */
uint64_t client_ack(once_client *c, uint64_t client_id);

#endif /* CLIENT_CLIENT_IMPL_H */
