/*
 * client.c — the once_client handle: open, close, options, accessors.
 *
 * Owns: putting a handle together from its layers — the connection
 * (conn.h), the lease (lease.h over lease_gate.h) and the call settings —
 * and taking it apart; the principal's key.
 * Invariant: a handle is shared only after once_client_open returned it;
 * its call settings do not change afterwards.
 * Never: sends anything itself (the lease layer sends the one OpenLease
 * and CloseLease, the call engine everything else); never frees the
 * handle while calls are in flight (the caller's contract, see
 * once/client.h).
 * Layer: the top; it may use every layer below, none uses it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <sodium.h>

#include "client/async.h"
#include "client/client_impl.h"
#include "client/conn.h"
#include "client/lease.h"
#include "client/lease_gate.h"
#include "base/keyfile.h"
#include "client/status.h"

#define CLIENT_DEADLINE_MS        10000u
#define CLIENT_ATTEMPT_TIMEOUT_MS 2000u
#define CLIENT_MAX_ATTEMPTS       10u
#define CLIENT_BACKOFF_INITIAL_MS 5u
#define CLIENT_BACKOFF_MAX_MS     500u
#define CLIENT_PRINCIPAL_DEFAULT  "anonymous"

void
once_options_init(once_options *o)
{
    if (o != NULL) {
        memset(o, 0, sizeof(*o));
    }
}

void
once_security_init(once_security *s)
{
    if (s != NULL) {
        memset(s, 0, sizeof(*s));
    }
}

static uint32_t
client_or(uint32_t v, uint32_t dflt)
{
    return v != 0 ? v : dflt;
}

/* Frees the handle's memory and socket. Accepts a half-built handle
 * (renewal stopped or never started). */
static void
client_free(once_client *c)
{
    if (c == NULL) {
        return;
    }
    async_fini(&c->async);
    conn_fini(&c->conn);
    batch_fini(&c->batch);
    lease_fini(c);
    gate_fini(&c->gate);
    sodium_memzero(c->key, sizeof(c->key));
    free(c->principal);
    free(c);
}

/* The key (and principal) and the TLS configuration of sec, into c before
 * anything is sent. */
static int
client_secure(once_client *c, const once_options *o, const once_security *sec,
              once_status *st)
{
    char name[KEYFILE_NAME_MAX + 1], err[256];

    if (sec == NULL) {
        return ONCE_OK;
    }
    if (sodium_init() < 0) {
        return status_set(st, ONCE_INTERNAL, ONCE_REASON_NO_SODIUM,
                          "libsodium cannot be initialised");
    }
    if (sec->key_file != NULL) {
        if (keyfile_read(sec->key_file, name, c->key, err, sizeof(err)) != 0) {
            return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_KEY,
                              "%s", err);
        }
        if (o->principal != NULL && strcmp(o->principal, name) != 0) {
            return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_KEY,
                              "key file %s is the key of principal %s, not "
                              "%s",
                              sec->key_file, name, o->principal);
        }
        free(c->principal);
        if ((c->principal = strdup(name)) == NULL) {
            return status_set(st, ONCE_RESOURCE_EXHAUSTED,
                              ONCE_REASON_NO_MEMORY, "out of memory");
        }
        c->signs = true;
    } else if (sec->key != NULL) {
        if (o->principal == NULL) {
            return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_KEY,
                              "a key needs once_options.principal");
        }
        memcpy(c->key, sec->key, sizeof(c->key));
        c->signs = true;
    }
    return conn_tls(&c->conn, sec, st);
}

int
once_client_open(once_client **cp, const once_options *o, once_status *st)
{
    return once_client_open_secure(cp, o, NULL, st);
}

/* nng 1.5.2 initialises itself on first use behind a flag it reads without
 * synchronisation: two threads opening their first handles at once race
 * there (TSan saw it in test_soak: one thread's pthread_mutex_init of an
 * nng global against another's lock of it). Every handle's first nng call
 * comes after this one initialisation, made once under pthread_once. */
static pthread_once_t client_nng_once = PTHREAD_ONCE_INIT;

static void
client_nng_init(void)
{
    nng_socket s;

    if (nng_req0_open(&s) == 0) {
        nng_close(s); /* no dialer, no pipe: nothing to wait for */
    }
}

int
once_client_open_secure(once_client **cp, const once_options *o,
                        const once_security *sec, once_status *st)
{
    once_client *c = NULL;
    int rv;

    pthread_once(&client_nng_once, client_nng_init);
    status_clear(st);
    if (cp == NULL || o == NULL || o->url == NULL || o->url[0] == '\0') {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "once_client_open needs cp, options and a url");
    }
    *cp = NULL;
    if ((c = calloc(1, sizeof(*c))) == NULL) {
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "out of memory");
    }
    if (async_init(&c->async) != 0) {
        free(c);
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "out of memory");
    }
    batch_init(&c->batch);
    gate_init(&c->gate, c);
    lease_init(c);
    if ((rv = conn_init(&c->conn, o->url, st)) != ONCE_OK) {
        goto out;
    }
    c->principal =
        strdup(o->principal != NULL ? o->principal : CLIENT_PRINCIPAL_DEFAULT);
    if (c->principal == NULL) {
        rv = status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                        "out of memory");
        goto out;
    }
    c->deadline_ms = client_or(o->deadline_ms, CLIENT_DEADLINE_MS);
    c->attempt_timeout_ms =
        client_or(o->attempt_timeout_ms, CLIENT_ATTEMPT_TIMEOUT_MS);
    c->retry.max_attempts = client_or(o->max_attempts, CLIENT_MAX_ATTEMPTS);
    c->retry.initial_ms =
        client_or(o->backoff_initial_ms, CLIENT_BACKOFF_INITIAL_MS);
    c->retry.max_ms = client_or(o->backoff_max_ms, CLIENT_BACKOFF_MAX_MS);
    if (c->retry.max_ms < c->retry.initial_ms) {
        c->retry.max_ms = c->retry.initial_ms;
    }

    if ((rv = client_secure(c, o, sec, st)) != ONCE_OK ||
        (rv = conn_open(&c->conn, st)) != ONCE_OK) {
        goto out;
    }
    if (!o->no_lease && (rv = lease_begin(c, o->lease_ttl_ms, st)) != ONCE_OK) {
        goto out;
    }
    *cp = c;
    return ONCE_OK;

out:
    lease_end(c, true, NULL); /* stops a renewal already started */
    client_free(c);
    return rv;
}

void
once_client_close(once_client *c)
{
    if (c != NULL) {
        async_stop(&c->async); /* async calls end before the lease */
        lease_end(c, false, NULL);
        client_free(c);
    }
}

void
once_client_close_keep_lease(once_client *c, uint64_t *lease_left_ms)
{
    if (lease_left_ms != NULL) {
        *lease_left_ms = 0;
    }
    if (c != NULL) {
        async_stop(&c->async);
        lease_end(c, true, lease_left_ms);
        client_free(c);
    }
}

uint64_t
once_client_id(const once_client *c)
{
    return c != NULL ? c->gate.client_id : 0;
}

uint64_t
once_client_first_incomplete(const once_client *c)
{
    /* The gate's lock is not part of the handle's logical state. */
    return c != NULL ? gate_first_incomplete(&((once_client *)c)->gate) : 0;
}

void
once_client_release(once_client *c, uint64_t seq)
{
    if (c != NULL) {
        gate_seq_complete(&c->gate, c->gate.client_id, seq);
    }
}

int
once_client_route(once_client *c, once_route *out)
{
    if (c == NULL || out == NULL) {
        return ONCE_INVALID_ARGUMENT;
    }
    conn_route(&c->conn, out);
    return ONCE_OK;
}
