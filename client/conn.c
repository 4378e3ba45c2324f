/*
 * conn.c — the connection layer (conn.h): socket, dialer, TLS.
 *
 * Owns: opening the REQ socket with libonce's options (no nng resend, the
 * receive limit, reconnect times), its one dialer — of the target URL
 * steer.h picks — and its replacement (conn_redial; conn_hint and
 * conn_suspect when the target moves), the TLS client configuration and
 * the rate of its probes (conn_tls_verdict).
 * Invariant: nng's own REQ resend is off on the socket and on every
 * context (slot.c): the call engine counts attempts itself. The dialer is
 * always of steer_target(&route): both change together under dial_lock.
 * A request in flight on a connection that a move closes ends
 * NNG_ECONNRESET (no resend, req0_pipe_close) and is retried by the call
 * engine under its rpc id.
 * Never: blocks on the network, but for the TLS probe of conn_tls_verdict
 * (bounded by the time its caller gives, at most once a second); never
 * replaces the dialer more than once a second.
 */
#include "client/conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/protocol/reqrep0/req.h>

#include "base/clock.h"
#include "client/status.h"
#include "client/tls_diag.h"
#include "base/endpoint_stats.h"
#include "base/close_bounded.h"

#define CONN_RECVMAXSZ        (4u * 1024u * 1024u)
#define CONN_RECONNECT_MIN_MS 10
#define CONN_RECONNECT_MAX_MS 1000
/* With several URLs and no TLS: a hint names a winner that re-executes to
 * lead and listens a moment later, and nng's redials double from the
 * least up to this; a refused loopback or LAN dial costs next to nothing.
 * (With TLS each redial costs the server a handshake: the longer gap.) */
#define CONN_RECONNECT_CLUSTER_MAX_MS 100
/* A target found down less than CONN_RECHECK_WINDOW_MS ago gets
 * CONN_RECHECK_MS to connect before a send moves on (conn_poll_move). */
#define CONN_RECHECK_WINDOW_MS 2500u
#define CONN_RECHECK_MS        250u
/* At most one new dialer per this many ms (conn_redial); with one URL
 * the wait doubles, up to CONN_REDIAL_MAX_MS, until a reply comes: a new
 * dialer ends the handshake of the one before, and a TLS handshake with a
 * loaded server (valgrind in CI: over a second) would never finish. */
#define CONN_REDIAL_MIN_MS 1000u
#define CONN_REDIAL_MAX_MS 4000u
/* At most one TLS probe per this many ms (conn_tls_verdict). */
#define CONN_DIAG_MIN_MS 1000u
/* How long conn_shut waits for nng_close (close_bounded). */
#define CONN_CLOSE_MS 3000

int
conn_init(conn *cn, const char *url, once_status *st)
{
    memset(cn, 0, sizeof(*cn));
    slot_init(&cn->slots);
    pthread_mutex_init(&cn->dial_lock, NULL);
    pthread_mutex_init(&cn->diag_lock, NULL);
    if ((cn->url = strdup(url)) == NULL ||
        steer_init(&cn->route, url) == ENOMEM) {
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "out of memory");
    }
    return ONCE_OK;
}

/* The host of "tls+tcp://HOST:PORT" ("[v6]" without brackets) into out. */
static void
conn_url_host(const char *url, char *out, size_t outlen)
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

int
conn_tls(conn *cn, const once_security *sec, once_status *st)
{
    char host[256];
    const char *sn;
    int rv;

    if (sec == NULL ||
        (strncmp(cn->url, "tls+", 4) != 0 && sec->tls_ca_file == NULL)) {
        return ONCE_OK;
    }
    sn = sec->tls_server_name;
    if (sn == NULL) {
        /* Of the first URL when there are several (a cluster's replicas
         * share one certificate name, or set tls_server_name). */
        char first[512];
        snprintf(first, sizeof(first), "%.*s", (int)strcspn(cn->url, ","),
                 cn->url);
        conn_url_host(first, host, sizeof(host));
        sn = host;
    }
    if ((rv = nng_tls_config_alloc(&cn->tls, NNG_TLS_MODE_CLIENT)) != 0 ||
        (rv = nng_tls_config_auth_mode(cn->tls, NNG_TLS_AUTH_MODE_REQUIRED)) !=
            0 ||
        (rv = nng_tls_config_server_name(cn->tls, sn)) != 0 ||
        (sec->tls_ca_file != NULL &&
         (rv = nng_tls_config_ca_file(cn->tls, sec->tls_ca_file)) != 0)) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_TLS,
                          "TLS configuration (CA file %s): %s",
                          sec->tls_ca_file != NULL ? sec->tls_ca_file : "none",
                          nng_strerror(rv));
    }
    if ((cn->tls_name = strdup(sn)) == NULL ||
        (sec->tls_ca_file != NULL &&
         (cn->tls_ca = strdup(sec->tls_ca_file)) == NULL)) {
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "out of memory");
    }
    return ONCE_OK;
}

/* A new dialer on the target URL (route; with the TLS configuration
 * when there is one), started without waiting for the connection. Under
 * dial_lock or before the handle is shared. */
static int
conn_dialer_start(conn *cn)
{
    nng_dialer d;
    int rv;

    cn->ndialers = 0;
    if (cn->route.n == 0) {
        return NNG_EADDRINVAL;
    }
    if ((rv = nng_dialer_create(&d, cn->sock, steer_target(&cn->route))) != 0) {
        return rv;
    }
    if ((cn->tls != NULL &&
         (rv = nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cn->tls)) != 0) ||
        (rv = nng_dialer_start(d, NNG_FLAG_NONBLOCK)) != 0) {
        nng_dialer_close(d);
        return rv;
    }
    cn->dialers[cn->ndialers++] = d;
    return 0;
}

/* The longest wait between nng's redials of one dialer. */
static nng_duration
conn_reconnect_max(const conn *cn)
{
    return cn->route.n > 1 && cn->tls == NULL ? CONN_RECONNECT_CLUSTER_MAX_MS
                                              : CONN_RECONNECT_MAX_MS;
}

int
conn_open(conn *cn, once_status *st)
{
    int rv;

    if ((rv = nng_req0_open(&cn->sock)) != 0) {
        return status_set(st, ONCE_INTERNAL, ONCE_REASON_NNG,
                          "nng_req0_open: %s", nng_strerror(rv));
    }
    /* The library retries by itself (same rpc id, counted attempts, one
     * deadline); nng's silent REQ resend would hide attempts from it. */
    if ((rv = nng_socket_set_ms(cn->sock, NNG_OPT_REQ_RESENDTIME,
                                NNG_DURATION_INFINITE)) != 0 ||
        (rv = nng_socket_set_size(cn->sock, NNG_OPT_RECVMAXSZ,
                                  CONN_RECVMAXSZ)) != 0 ||
        (rv = nng_socket_set_ms(cn->sock, NNG_OPT_RECONNMINT,
                                CONN_RECONNECT_MIN_MS)) != 0 ||
        (rv = nng_socket_set_ms(cn->sock, NNG_OPT_RECONNMAXT,
                                conn_reconnect_max(cn))) != 0 ||
        (rv = slot_watch(&cn->slots, cn->sock)) != 0) {
        return status_set(st, ONCE_INTERNAL, ONCE_REASON_NNG,
                          "socket option: %s", nng_strerror(rv));
    }
    rv = conn_dialer_start(cn);
    cn->nurls = cn->route.n;
    if (rv != 0) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_URL,
                          "cannot dial %s%s: %s", cn->url,
                          cn->tls != NULL ? " with TLS" : "", nng_strerror(rv));
    }
    return ONCE_OK;
}

/* Whether a dialer of cn counted a handshake that failed as TLS. Under
 * dial_lock. */
static bool
conn_dialers_tls_failed(conn *cn)
{
    for (size_t i = 0; i < cn->ndialers; i++) {
        if (tls_diag_dialer_failed(cn->dialers[i])) {
            return true;
        }
    }
    return false;
}

/* The value of statistic name of dialer d in snapshot snap (0: none). */
static uint64_t
conn_dialer_stat(nng_stat *snap, nng_dialer d, const char *name)
{
    nng_stat *ds =
        endpoint_stats_find(snap, "dialer", (uint64_t)nng_dialer_id(d));
    nng_stat *st = ds != NULL ? endpoint_stats_child(ds, name) : NULL;

    return st != NULL ? nng_stat_value(st) : 0;
}

/* Whether a dialer of cn had a connection refused since it started (its
 * "refused" statistic), or stopped for good: nng 1.5.2 counts the
 * NNG_ECLOSED that ends a dialer (conn_redial) among its "other" errors.
 * Under dial_lock. */
static bool
conn_dialers_refused(conn *cn)
{
    nng_stat *snap;
    bool any = false;

    if (nng_stats_get(&snap) != 0) {
        return false; /* no statistics: conn_redial still moves on */
    }
    for (size_t i = 0; i < cn->ndialers && !any; i++) {
        any = conn_dialer_stat(snap, cn->dialers[i], "refused") > 0 ||
              conn_dialer_stat(snap, cn->dialers[i], "other") > 0;
    }
    nng_stats_free(snap);
    return any;
}

/* Replaces the dialer with one of the target. Under dial_lock. */
static void
conn_dialer_restart(conn *cn)
{
    /* The dialers' statistics go with them: keep what they said. */
    if (cn->tls != NULL && !cn->tls_failed) {
        cn->tls_failed = conn_dialers_tls_failed(cn);
    }
    for (size_t i = 0; i < cn->ndialers; i++) {
        nng_dialer_close(cn->dialers[i]);
    }
    (void)conn_dialer_start(cn); /* on failure the next stall retries */
}

/* The wait before the next redial of the same URL. */
static uint64_t
conn_redial_gap(conn *cn)
{
    uint64_t gap = atomic_load(&cn->redial_gap_ms);

    return cn->route.n > 1 || gap < CONN_REDIAL_MIN_MS ? CONN_REDIAL_MIN_MS
                                                       : gap;
}

void
conn_redial(conn *cn)
{
    uint64_t now, gap;

    pthread_mutex_lock(&cn->dial_lock);
    /* Read under the lock: a time taken before it may be older than the
     * redial_ms another caller just set, and now - redial_ms would wrap. */
    now = clock_now_ms();
    gap = conn_redial_gap(cn);
    if (now - cn->redial_ms >= gap) {
        cn->redial_ms = now;
        atomic_store(&cn->redial_gap_ms, gap * 2 < CONN_REDIAL_MAX_MS
                                             ? gap * 2
                                             : CONN_REDIAL_MAX_MS);
        /* Several URLs: the next one, unless the target answered a call
         * within the last second (then it is up, only this dial stalled). */
        (void)steer_rotate(&cn->route, steer_gen(&cn->route),
                           now - CONN_REDIAL_MIN_MS, now);
        conn_dialer_restart(cn);
    }
    pthread_mutex_unlock(&cn->dial_lock);
}

bool
conn_several(const conn *cn)
{
    return cn->nurls > 1;
}

/* Whether a send without a connection should leave the target now (under
 * dial_lock; conn_poll_move). */
static bool
conn_leave_early(conn *cn, uint64_t now)
{
    /* A target that gave the last answer (steer.h) whose dial is refused:
     * it died. Never another: a winner re-executing to lead refuses dials
     * for a moment too. */
    if (steer_led(&cn->route) && conn_dialers_refused(cn)) {
        return true;
    }
    /* A target found down a moment ago that a follower's hint led back to
     * (a leader stopped or cut off, that followers name until its etcd
     * lease lapses): a short look, not a whole slice. Plain URLs only: a
     * TLS handshake may take longer, and a new dialer would end it. */
    return cn->tls == NULL &&
           steer_down_within(&cn->route, now, CONN_RECHECK_WINDOW_MS) &&
           now - cn->redial_ms >= CONN_RECHECK_MS;
}

bool
conn_poll_move(conn *cn)
{
    bool moved = false;
    uint64_t now;

    if (!conn_several(cn)) {
        return false;
    }
    pthread_mutex_lock(&cn->dial_lock);
    now = clock_now_ms();
    if (conn_leave_early(cn, now) &&
        steer_rotate(&cn->route, steer_gen(&cn->route), now, now)) {
        cn->redial_ms = now; /* a move counts as a redial */
        conn_dialer_restart(cn);
        moved = true;
    }
    pthread_mutex_unlock(&cn->dial_lock);
    return moved;
}

uint64_t
conn_target(conn *cn)
{
    return steer_gen(&cn->route);
}

bool
conn_hint(conn *cn, uint64_t gen, const char *leader)
{
    steer_move m;

    pthread_mutex_lock(&cn->dial_lock);
    m = steer_hint(&cn->route, gen, leader, clock_now_ms());
    if (m == STEER_MOVED) {
        /* A move counts as a redial: a send that stalled on the old
         * target does not move the new one within the second. */
        cn->redial_ms = clock_now_ms();
        conn_dialer_restart(cn);
    }
    pthread_mutex_unlock(&cn->dial_lock);
    return m != STEER_STAY;
}

void
conn_leaderless(conn *cn, uint64_t gen)
{
    if (cn->route.n < 2) {
        return;
    }
    pthread_mutex_lock(&cn->dial_lock);
    if (steer_leaderless(&cn->route, gen)) {
        cn->redial_ms = clock_now_ms();
        conn_dialer_restart(cn);
    }
    pthread_mutex_unlock(&cn->dial_lock);
}

void
conn_suspect(conn *cn, uint64_t gen, uint64_t sent_ms)
{
    if (cn->route.n < 2) {
        return;
    }
    pthread_mutex_lock(&cn->dial_lock);
    if (steer_rotate(&cn->route, gen, sent_ms, clock_now_ms())) {
        cn->redial_ms = clock_now_ms();
        conn_dialer_restart(cn);
    }
    pthread_mutex_unlock(&cn->dial_lock);
}

void
conn_heard(conn *cn, uint64_t gen, bool served)
{
    atomic_store(&cn->redial_gap_ms, 0); /* connected: the least again */
    if (cn->route.n > 1) {
        steer_heard(&cn->route, gen, served, clock_now_ms());
    }
}

void
conn_route(conn *cn, once_route *out)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&cn->dial_lock);
    if (cn->route.n > 0) {
        snprintf(out->url, sizeof(out->url), "%s", steer_target(&cn->route));
        out->index = (uint32_t)atomic_load(&cn->route.cur);
    }
    pthread_mutex_unlock(&cn->dial_lock);
    out->urls = (uint32_t)cn->route.n;
    out->not_leader = atomic_load(&cn->route.not_leader);
    out->hints_followed = atomic_load(&cn->route.followed);
    out->hints_ignored = atomic_load(&cn->route.ignored);
    out->rotations = atomic_load(&cn->route.rotated);
}

int
conn_tls_verdict(conn *cn, uint64_t timeout_ms, once_status *st)
{
    uint64_t now;

    /* One server only: the replicas of a cluster (several URLs) may differ
     * in their certificates, and a call only needs one of them. */
    if (cn->tls == NULL || cn->nurls != 1) {
        return ONCE_OK;
    }
    pthread_mutex_lock(&cn->diag_lock);
    now = clock_now_ms(); /* under the lock, as in conn_redial */
    if (timeout_ms > 0 &&
        (cn->diag_ms == 0 || now - cn->diag_ms >= CONN_DIAG_MIN_MS)) {
        bool failed;

        pthread_mutex_lock(&cn->dial_lock);
        cn->tls_failed = cn->tls_failed || conn_dialers_tls_failed(cn);
        failed = cn->tls_failed;
        pthread_mutex_unlock(&cn->dial_lock);
        status_clear(&cn->diag);
        if (failed) {
            (void)tls_diag_probe(cn->url, cn->tls_ca, cn->tls_name, timeout_ms,
                                 &cn->diag);
        }
        cn->diag_ms = clock_now_ms();
    }
    *st = cn->diag;
    pthread_mutex_unlock(&cn->diag_lock);
    return st->code;
}

void
conn_shut(conn *cn)
{
    if (nng_socket_id(cn->sock) <= 0 || atomic_exchange(&cn->shut, true)) {
        return;
    }
    /* nng 1.5.2's nng_close can wait for ever for a pipe it never
     * releases (seen once in CI: once_client_close stuck in it): wait for
     * it at most CONN_CLOSE_MS. The pipe callback goes first, so a close
     * left running never calls into this handle's memory. */
    (void)nng_pipe_notify(cn->sock, NNG_PIPE_EV_REM_POST, NULL, NULL);
    if (!close_bounded(cn->sock, CONN_CLOSE_MS)) {
        fprintf(stderr,
                "libonce: closing the connection to %s did not finish "
                "within %d ms (an nng pipe that does not close); left "
                "to finish on its own\n",
                cn->url, CONN_CLOSE_MS);
    }
}

void
conn_fini(conn *cn)
{
    slot_fini(&cn->slots);
    conn_shut(cn);
    pthread_mutex_destroy(&cn->dial_lock);
    pthread_mutex_destroy(&cn->diag_lock);
    if (cn->tls != NULL) {
        nng_tls_config_free(cn->tls);
    }
    free(cn->tls_ca);
    free(cn->tls_name);
    free(cn->url);
    steer_fini(&cn->route);
}
