/*
 * client.c — the once_client handle: open, close, options, the rpc-id
 * window accessors.
 *
 * Owns: the REQ socket and its dial (non-blocking, nng reconnects by
 * itself), the client id taken from OpenLease (kept alive by renew.c), and
 * the window of incomplete seqs behind once_client.lock.
 * Invariant: seqs of one handle are assigned in increasing order from 1 and
 * never reused; first_incomplete only moves forward.
 * Never: retries or sends anything itself (call.c does) — except the one
 * CloseLease of once_client_close; never re-sends an operation under a new
 * id; never frees the handle while calls are in flight (the caller's
 * contract, see once/client.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <sodium.h>

#include "client_impl.h"
#include "lost.h"
#include "principals.h"
#include "renew.h"
#include "slot.h"
#include "status.h"

#define CLIENT_RECVMAXSZ          (4u * 1024u * 1024u)
#define CLIENT_DEADLINE_MS        10000u
#define CLIENT_ATTEMPT_TIMEOUT_MS 2000u
#define CLIENT_MAX_ATTEMPTS       10u
#define CLIENT_BACKOFF_INITIAL_MS 5u
#define CLIENT_BACKOFF_MAX_MS     500u
#define CLIENT_RECONNECT_MIN_MS   10
#define CLIENT_RECONNECT_MAX_MS   1000
/* At most one new dialer per this many ms (client_redial). */
#define CLIENT_REDIAL_MIN_MS     1000u
#define CLIENT_PRINCIPAL_DEFAULT "anonymous"
#define CLIENT_CLOSE_DEADLINE_MS 2000u

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

/* Frees the handle's memory and socket. Accepts a half-built handle. */
static void
client_free(once_client *c)
{
    if (c == NULL) {
        return;
    }
    /* Stops renewal first; it closes the socket so a renewal in flight
     * ends at once. */
    renew_stop(c);
    slot_fini(c);
    if (nng_socket_id(c->sock) > 0) {
        nng_close(c->sock);
    }
    pthread_mutex_destroy(&c->slot_lock);
    pthread_mutex_destroy(&c->dial_lock);
    pthread_mutex_destroy(&c->lock);
    renew_fini(c);
    lost_fini(c);
    window_fini(&c->win);
    if (c->tls != NULL) {
        nng_tls_config_free(c->tls);
    }
    sodium_memzero(c->key, sizeof(c->key));
    free(c->url);
    free(c->principal);
    free(c);
}

static int client_dialer_start(once_client *c);

/* Opens the REQ socket with our options and starts the non-blocking dial. */
static int
client_dial(once_client *c, once_status *st)
{
    int rv;

    if ((rv = nng_req0_open(&c->sock)) != 0) {
        return status_set(st, ONCE_INTERNAL, "NNG", "nng_req0_open: %s",
                          nng_strerror(rv));
    }
    /* The library retries by itself (same rpc id, counted attempts, one
     * deadline); nng's silent REQ resend would hide attempts from it. */
    if ((rv = nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME,
                                NNG_DURATION_INFINITE)) != 0 ||
        (rv = nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ,
                                  CLIENT_RECVMAXSZ)) != 0 ||
        (rv = nng_socket_set_ms(c->sock, NNG_OPT_RECONNMINT,
                                CLIENT_RECONNECT_MIN_MS)) != 0 ||
        (rv = nng_socket_set_ms(c->sock, NNG_OPT_RECONNMAXT,
                                CLIENT_RECONNECT_MAX_MS)) != 0 ||
        (rv = slot_watch(c)) != 0) {
        return status_set(st, ONCE_INTERNAL, "NNG", "socket option: %s",
                          nng_strerror(rv));
    }
    if ((rv = client_dialer_start(c)) != 0) {
        return status_set(st, ONCE_INVALID_ARGUMENT, "BAD_URL",
                          "cannot dial %s%s: %s", c->url,
                          c->tls != NULL ? " with TLS" : "", nng_strerror(rv));
    }
    return ONCE_OK;
}

/* A new dialer on c->url (with the TLS configuration when there is one),
 * started without waiting for the connection. Under dial_lock or before
 * the handle is shared. */
static int
client_dialer_start(once_client *c)
{
    nng_dialer d;
    int rv;

    if ((rv = nng_dialer_create(&d, c->sock, c->url)) != 0) {
        return rv;
    }
    if ((c->tls != NULL &&
         (rv = nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, c->tls)) != 0) ||
        (rv = nng_dialer_start(d, NNG_FLAG_NONBLOCK)) != 0) {
        nng_dialer_close(d);
        return rv;
    }
    c->dialer = d;
    return 0;
}

void
client_redial(once_client *c)
{
    uint64_t now;

    pthread_mutex_lock(&c->dial_lock);
    /* Read under the lock: a time taken before it may be older than the
     * redial_ms another caller just set, and now - redial_ms would wrap. */
    now = retry_now_ms();
    if (now - c->redial_ms >= CLIENT_REDIAL_MIN_MS) {
        c->redial_ms = now;
        nng_dialer_close(c->dialer);
        (void)client_dialer_start(c); /* on failure the next stall retries */
    }
    pthread_mutex_unlock(&c->dial_lock);
}

/* The host of "tls+tcp://HOST:PORT" ("[v6]" without brackets) into out. */
static void
client_url_host(const char *url, char *out, size_t outlen)
{
    const char *h = strstr(url, "://");
    const char *end;

    h = h != NULL ? h + 3 : url;
    if (*h == '[' && (end = strchr(h, ']')) != NULL) {
        h++;
    } else if ((end = strrchr(h, ':')) == NULL) {
        end = h + strlen(h);
    }
    snprintf(out, outlen, "%.*s", (int)(end - h), h);
}

/* The key (and principal) and the TLS configuration of sec, into c before
 * anything is sent. */
static int
client_secure(once_client *c, const once_options *o, const once_security *sec,
              once_status *st)
{
    char name[PRINCIPAL_NAME_MAX + 1], err[256];
    int rv;

    if (sec == NULL) {
        return ONCE_OK;
    }
    if (sodium_init() < 0) {
        return status_set(st, ONCE_INTERNAL, "NO_SODIUM",
                          "libsodium cannot be initialised");
    }
    if (sec->key_file != NULL) {
        if (keyfile_read(sec->key_file, name, c->key, err, sizeof(err)) != 0) {
            return status_set(st, ONCE_INVALID_ARGUMENT, "BAD_KEY", "%s", err);
        }
        if (o->principal != NULL && strcmp(o->principal, name) != 0) {
            return status_set(st, ONCE_INVALID_ARGUMENT, "BAD_KEY",
                              "key file %s is the key of principal %s, not "
                              "%s",
                              sec->key_file, name, o->principal);
        }
        free(c->principal);
        if ((c->principal = strdup(name)) == NULL) {
            return status_set(st, ONCE_RESOURCE_EXHAUSTED, "NO_MEMORY",
                              "out of memory");
        }
        c->signs = true;
    } else if (sec->key != NULL) {
        if (o->principal == NULL) {
            return status_set(st, ONCE_INVALID_ARGUMENT, "BAD_KEY",
                              "a key needs once_options.principal");
        }
        memcpy(c->key, sec->key, sizeof(c->key));
        c->signs = true;
    }
    if (strncmp(c->url, "tls+", 4) == 0 || sec->tls_ca_file != NULL) {
        char host[256];
        const char *sn = sec->tls_server_name;

        if (sn == NULL) {
            client_url_host(c->url, host, sizeof(host));
            sn = host;
        }
        if ((rv = nng_tls_config_alloc(&c->tls, NNG_TLS_MODE_CLIENT)) != 0 ||
            (rv = nng_tls_config_auth_mode(c->tls,
                                           NNG_TLS_AUTH_MODE_REQUIRED)) != 0 ||
            (rv = nng_tls_config_server_name(c->tls, sn)) != 0 ||
            (sec->tls_ca_file != NULL &&
             (rv = nng_tls_config_ca_file(c->tls, sec->tls_ca_file)) != 0)) {
            return status_set(st, ONCE_INVALID_ARGUMENT, "BAD_TLS",
                              "TLS configuration (CA file %s): %s",
                              sec->tls_ca_file != NULL ? sec->tls_ca_file
                                                       : "none",
                              nng_strerror(rv));
        }
    }
    return ONCE_OK;
}

int
once_client_open(once_client **cp, const once_options *o, once_status *st)
{
    return once_client_open_secure(cp, o, NULL, st);
}

int
once_client_open_secure(once_client **cp, const once_options *o,
                        const once_security *sec, once_status *st)
{
    once_client *c = NULL;
    int rv;

    status_clear(st);
    if (cp == NULL || o == NULL || o->url == NULL || o->url[0] == '\0') {
        return status_set(st, ONCE_INVALID_ARGUMENT, "BAD_ARGUMENT",
                          "once_client_open needs cp, options and a url");
    }
    *cp = NULL;
    if ((c = calloc(1, sizeof(*c))) == NULL) {
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, "NO_MEMORY",
                          "out of memory");
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->slot_lock, NULL);
    pthread_mutex_init(&c->dial_lock, NULL);
    renew_init(c);
    lost_init(c);
    window_init(&c->win, 1);
    c->url = strdup(o->url);
    c->principal =
        strdup(o->principal != NULL ? o->principal : CLIENT_PRINCIPAL_DEFAULT);
    if (c->url == NULL || c->principal == NULL) {
        rv = status_set(st, ONCE_RESOURCE_EXHAUSTED, "NO_MEMORY",
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
        (rv = client_dial(c, st)) != ONCE_OK) {
        goto out;
    }
    if (!o->no_lease) {
        /* once_lease_open fills st (attempts included) on failure. */
        if ((rv = once_lease_open(c, NULL, o->lease_ttl_ms, &c->client_id,
                                  &c->lease_ttl_ms, st)) != ONCE_OK) {
            goto out;
        }
        c->lease_state = ONCE_CLIENT_LEASE_LIVE; /* no thread runs yet */
        c->lease_until_ms = retry_now_ms() + c->lease_ttl_ms;
        if (c->client_id == 0) {
            rv = status_set(st, ONCE_INTERNAL, "BAD_RESPONSE",
                            "OpenLease granted client id 0");
            goto out;
        }
        if (renew_start(c) != 0) {
            rv = status_set(st, ONCE_RESOURCE_EXHAUSTED, "NO_THREAD",
                            "cannot start the lease renewal thread");
            goto out;
        }
    }
    *cp = c;
    return ONCE_OK;

out:
    client_free(c);
    return rv;
}

void
once_client_close(once_client *c)
{
    if (c == NULL) {
        return;
    }
    lost_closing(c);
    if (c->client_id != 0 && !lost_is_lost(c) && client_all_complete(c)) {
        /* Nothing under the lease can be retried any more: end it now so
         * the collector reclaims its records at once. A failure is of no
         * consequence — the lease then ends after its TTL. */
        uint32_t d = c->deadline_ms < CLIENT_CLOSE_DEADLINE_MS
                         ? c->deadline_ms
                         : CLIENT_CLOSE_DEADLINE_MS;
        (void)client_lease_close(c, c->client_id, NULL, NULL, d);
    }
    client_free(c);
}

uint64_t
once_client_id(const once_client *c)
{
    return c != NULL ? c->client_id : 0;
}

uint64_t
once_client_first_incomplete(const once_client *c)
{
    /* The lock is not part of the handle's logical state. */
    once_client *m = (once_client *)c;
    uint64_t fi;

    if (c == NULL) {
        return 0;
    }
    pthread_mutex_lock(&m->lock);
    fi = window_first_incomplete(&m->win);
    pthread_mutex_unlock(&m->lock);
    return fi;
}

void
once_client_release(once_client *c, uint64_t seq)
{
    if (c == NULL) {
        return;
    }
    pthread_mutex_lock(&c->lock);
    (void)window_complete(&c->win, seq);
    pthread_mutex_unlock(&c->lock);
}

void
once_free(void *p)
{
    free(p);
}

int
client_seq_assign(once_client *c, uint64_t *seq)
{
    int rv;

    pthread_mutex_lock(&c->lock);
    rv = window_assign(&c->win, seq);
    pthread_mutex_unlock(&c->lock);
    return rv;
}

void
client_seq_complete(once_client *c, uint64_t client_id, uint64_t seq)
{
    if (client_id != c->client_id || client_id == 0) {
        return;
    }
    pthread_mutex_lock(&c->lock);
    (void)window_complete(&c->win, seq);
    pthread_mutex_unlock(&c->lock);
}

uint64_t
client_ack(once_client *c, uint64_t client_id)
{
    uint64_t fi;

    if (client_id != c->client_id || client_id == 0) {
        return 0;
    }
    pthread_mutex_lock(&c->lock);
    fi = window_first_incomplete(&c->win);
    pthread_mutex_unlock(&c->lock);
    return fi;
}

bool
client_tracks(const once_client *c, uint64_t client_id)
{
    return c->client_id != 0 && client_id == c->client_id;
}

bool
client_all_complete(once_client *c)
{
    bool all;

    pthread_mutex_lock(&c->lock);
    all = window_first_incomplete(&c->win) == c->win.next;
    pthread_mutex_unlock(&c->lock);
    return all;
}

void
client_lease_renewed(once_client *c, uint64_t reply_ms, uint64_t remaining_ms)
{
    pthread_mutex_lock(&c->lease_lock);
    if (c->lease_state != ONCE_CLIENT_LEASE_LOST) {
        if (reply_ms + remaining_ms > c->lease_until_ms) {
            c->lease_until_ms = reply_ms + remaining_ms;
        }
        c->lease_state = ONCE_CLIENT_LEASE_LIVE;
    }
    pthread_mutex_unlock(&c->lease_lock);
}
