/*
 * tls_diag.c — the TLS verdict of a tls+tcp:// server (tls_diag.h).
 *
 * Owns: the probe handshakes and the messages of TLS_UNTRUSTED,
 * TLS_NAME_MISMATCH and TLS_HANDSHAKE.
 * Invariant: every probe is bounded by the caller's time; each frees its
 * configuration, stream, dialer and aio before the next starts.
 * Never: sends a byte on the probe stream (the server's SP header is read,
 * ours never written: onced sees a peer that went away and makes no pipe).
 */
#include "client/tls_diag.h"

#include <arpa/inet.h>
#include <stdbool.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "client/retry.h"
#include "client/status.h"
#include "base/clock.h"
#include "base/endpoint_stats.h"

/* Between two rounds of handshakes, the first cut short. */
#define DIAG_ROUND_GAP_MS 100u

/* mbedTLS's failures as nng 1.5.2 maps them (verification: NNG_ECRYPTO). */
static bool
diag_tls_failed(int rv)
{
    return rv == NNG_ECRYPTO || rv == NNG_EPEERAUTH;
}

/* A client TLS configuration: verified against ca_file (NULL: no CA, so
 * nothing verifies) and name (NULL: no name check) when verify is set. */
static int
diag_config(nng_tls_config **cfgp, bool verify, const char *ca_file,
            const char *name)
{
    nng_tls_config *cfg;
    int rv;

    if ((rv = nng_tls_config_alloc(&cfg, NNG_TLS_MODE_CLIENT)) != 0) {
        return rv;
    }
    if ((rv = nng_tls_config_auth_mode(cfg, verify ? NNG_TLS_AUTH_MODE_REQUIRED
                                                   : NNG_TLS_AUTH_MODE_NONE)) !=
            0 ||
        (verify && name != NULL &&
         (rv = nng_tls_config_server_name(cfg, name)) != 0) ||
        (verify && ca_file != NULL &&
         (rv = nng_tls_config_ca_file(cfg, ca_file)) != 0)) {
        nng_tls_config_free(cfg);
        return rv;
    }
    *cfgp = cfg;
    return 0;
}

/* One handshake with cfg on url, done when the server's first byte (of its
 * SP header) arrives, by `until` (a clock_now_ms time). Returns 0 when the
 * handshake completed, or the nng error that ended it. */
static int
diag_handshake(const char *url, nng_tls_config *cfg, uint64_t until)
{
    nng_stream_dialer *d = NULL;
    nng_stream *s = NULL;
    nng_aio *aio = NULL;
    uint8_t byte;
    nng_iov iov = {.iov_buf = &byte, .iov_len = 1};
    uint64_t left;
    int rv;

    if ((rv = nng_stream_dialer_alloc(&d, url)) != 0 ||
        (rv = nng_stream_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cfg)) != 0 ||
        (rv = nng_aio_alloc(&aio, NULL, NULL)) != 0) {
        goto out;
    }
    if ((left = retry_remaining_ms(until)) == 0) {
        rv = NNG_ETIMEDOUT;
        goto out;
    }
    nng_aio_set_timeout(aio, (nng_duration)left);
    nng_stream_dialer_dial(d, aio);
    nng_aio_wait(aio);
    if ((rv = nng_aio_result(aio)) != 0) {
        goto out;
    }
    s = nng_aio_get_output(aio, 0);
    /* nng's TLS stream shakes hands on the first read or write. */
    if ((left = retry_remaining_ms(until)) == 0) {
        rv = NNG_ETIMEDOUT;
        goto out;
    }
    nng_aio_set_iov(aio, 1, &iov);
    nng_aio_set_timeout(aio, (nng_duration)left);
    nng_stream_recv(s, aio);
    nng_aio_wait(aio);
    if ((rv = nng_aio_result(aio)) == 0 && nng_aio_count(aio) == 0) {
        rv = NNG_ETIMEDOUT; /* nothing read is no handshake */
    }
out:
    /* The stream last: nng frees its parts on its reaper thread, and
     * TSan reports that thread's mutex teardown against our dialer and
     * aio calls made after it (both inside libnng, not instrumented). */
    nng_aio_free(aio);
    nng_stream_dialer_free(d); /* NULL-safe in nng 1.5 */
    nng_stream_free(s);        /* closes it; NULL-safe */
    return rv;
}

/* diag_handshake with a configuration of its own. */
static int
diag_try(const char *url, bool verify, const char *ca_file, const char *name,
         uint64_t until)
{
    nng_tls_config *cfg;
    int rv;

    if ((rv = diag_config(&cfg, verify, ca_file, name)) != 0) {
        return rv;
    }
    rv = diag_handshake(url, cfg, until);
    nng_tls_config_free(cfg);
    return rv;
}

static bool
diag_is_ip(const char *name)
{
    unsigned char buf[16];

    return inet_pton(AF_INET, name, buf) == 1 ||
           inet_pton(AF_INET6, name, buf) == 1;
}

bool
tls_diag_dialer_failed(nng_dialer d)
{
    nng_stat *snap, *ds, *auth;
    bool failed;

    if (nng_stats_get(&snap) != 0) {
        return true; /* no statistics: only a probe can tell */
    }
    ds = endpoint_stats_find(snap, "dialer", (uint64_t)nng_dialer_id(d));
    auth = ds != NULL ? endpoint_stats_child(ds, "auth") : NULL;
    failed = ds == NULL || (auth != NULL && nng_stat_value(auth) > 0);
    nng_stats_free(snap);
    return failed;
}

/* A handshake cut short by the network (the server reset or closed it, or
 * its listener was listening again meanwhile): no verdict either way, and
 * the same handshake may complete if tried again. nng 1.5.2 ends onced's
 * tls+tcp:// listener when a client hangs up mid-handshake, as its own
 * dialer may after refusing the certificate; onced's watch listens again
 * within seconds, resetting what waited on the old listener. */
static bool
diag_cut_short(int rv)
{
    return rv == NNG_ECONNRESET || rv == NNG_ECLOSED || rv == NNG_ECONNSHUT ||
           rv == NNG_ECONNABORTED;
}

/* The verdict's wording once the handshake without verification worked
 * and the one with the CA but no name gave rv. */
static int
diag_verdict(const char *url, const char *ca_file, const char *server_name,
             int rv, once_status *st)
{
    if (rv == 0) {
        if (diag_is_ip(server_name)) {
            return status_set(
                st, ONCE_UNAVAILABLE, ONCE_REASON_TLS_NAME_MISMATCH,
                "certificate of %s is trusted but not issued to DNS name "
                "%s: libnng's mbedTLS matches DNS names only, not IP SANs; "
                "add DNS:%s to its subjectAltName or use --tls-server-name",
                url, server_name, server_name);
        }
        return status_set(st, ONCE_UNAVAILABLE, ONCE_REASON_TLS_NAME_MISMATCH,
                          "certificate of %s is trusted but not issued to "
                          "%s (subjectAltName DNS names); use "
                          "--tls-server-name for another name",
                          url, server_name);
    }
    return status_set(st, ONCE_UNAVAILABLE, ONCE_REASON_TLS_UNTRUSTED,
                      "certificate of %s failed verification: not signed "
                      "by a CA in %s, or expired or not yet valid",
                      url, ca_file);
}

/* One round of the probe's handshakes. Returns ONCE_OK (no verdict),
 * ONCE_UNAVAILABLE with st set, or -1 when a handshake was cut short
 * (diag_cut_short: worth another round). */
static int
diag_round(const char *url, const char *ca_file, const char *server_name,
           uint64_t until, once_status *st)
{
    int rv = diag_try(url, true, ca_file, server_name, until);

    if (diag_cut_short(rv)) {
        return -1;
    }
    if (!diag_tls_failed(rv)) {
        return ONCE_OK; /* it works, or no TLS was spoken: no verdict */
    }
    if ((rv = diag_try(url, false, NULL, NULL, until)) != 0) {
        if (diag_cut_short(rv)) {
            return -1;
        }
        if (!diag_tls_failed(rv)) {
            return ONCE_OK; /* gone meanwhile */
        }
        return status_set(st, ONCE_UNAVAILABLE, ONCE_REASON_TLS_HANDSHAKE,
                          "TLS handshake with %s failed (%s) even without "
                          "checking its certificate: is it a tls+tcp:// "
                          "listener of onced?",
                          url, nng_strerror(rv));
    }
    if (ca_file == NULL) {
        return status_set(st, ONCE_UNAVAILABLE, ONCE_REASON_TLS_UNTRUSTED,
                          "certificate of %s not verified: no CA file given "
                          "(oncectl --tls-ca, once_security.tls_ca_file)",
                          url);
    }
    rv = diag_try(url, true, ca_file, NULL, until);
    if (diag_cut_short(rv)) {
        return -1;
    }
    if (rv != 0 && !diag_tls_failed(rv)) {
        return ONCE_OK;
    }
    return diag_verdict(url, ca_file, server_name, rv, st);
}

int
tls_diag_probe(const char *url, const char *ca_file, const char *server_name,
               uint64_t timeout_ms, once_status *st)
{
    uint64_t until = clock_now_ms() + timeout_ms;
    int rc;

    /* Rounds cut short go again, a little apart, while time is left. */
    while ((rc = diag_round(url, ca_file, server_name, until, st)) < 0) {
        if (retry_remaining_ms(until) <= DIAG_ROUND_GAP_MS) {
            return ONCE_OK;
        }
        clock_sleep_ms(DIAG_ROUND_GAP_MS);
    }
    return rc;
}
