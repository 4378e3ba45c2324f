/*
 * tls_probe.c — probes of a tls+tcp:// listener (tls_probe.h).
 */
#include "server/tls_probe.h"

#include <arpa/inet.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/supplemental/tls/tls.h>
#include <nng/supplemental/util/platform.h>

#include "base/clock.h"

#define TLS_PROBE_PARKED 4 /* probes kept per listener */

struct tls_probe_conn {
    nng_stream *stream;
    nng_aio *aio;          /* sends the header; its callback only stores */
    _Atomic int result;    /* 0: the send runs; else nng's result + 1 */
    uint8_t hello[8];      /* the SP header of a REQ peer */
    uint64_t parked_until; /* clock_now_ms(); 0: not parked */
};

struct tls_probe {
    char url[96];        /* tls+tcp://ADDR:PORT of the bound address */
    nng_tls_config *cfg; /* client mode, no verification */
    tls_probe_conn *parked[TLS_PROBE_PARKED];
};

/* The URL that reaches listener nl: its bound address, loopback for a
 * wildcard one. */
static int
probe_url(char *out, size_t len, nng_listener nl)
{
    nng_sockaddr sa;
    char host[INET6_ADDRSTRLEN];
    int rv;

    if ((rv = nng_listener_get_addr(nl, NNG_OPT_LOCADDR, &sa)) != 0) {
        return rv;
    }
    if (sa.s_family == NNG_AF_INET) {
        uint32_t a = sa.s_in.sa_addr;

        if (a == 0) {
            a = htonl(INADDR_LOOPBACK);
        }
        inet_ntop(AF_INET, &a, host, sizeof(host));
        snprintf(out, len, "tls+tcp://%s:%u", host, ntohs(sa.s_in.sa_port));
        return 0;
    }
    if (sa.s_family == NNG_AF_INET6) {
        static const uint8_t any[16] = {0};
        uint8_t a[16];

        memcpy(a, sa.s_in6.sa_addr, sizeof(a));
        if (memcmp(a, any, sizeof(a)) == 0) {
            a[15] = 1; /* ::1 */
        }
        inet_ntop(AF_INET6, a, host, sizeof(host));
        snprintf(out, len, "tls+tcp://[%s]:%u", host, ntohs(sa.s_in6.sa_port));
        return 0;
    }
    return NNG_EADDRINVAL;
}

int
tls_probe_open(tls_probe **pp, nng_listener nl)
{
    tls_probe *p;
    int rv;

    if ((p = calloc(1, sizeof(*p))) == NULL) {
        return NNG_ENOMEM;
    }
    if ((rv = probe_url(p->url, sizeof(p->url), nl)) != 0 ||
        (rv = nng_tls_config_alloc(&p->cfg, NNG_TLS_MODE_CLIENT)) != 0 ||
        (rv = nng_tls_config_auth_mode(p->cfg, NNG_TLS_AUTH_MODE_NONE)) != 0) {
        tls_probe_free(p);
        return rv;
    }
    *pp = p;
    return 0;
}

int
tls_probe_retarget(tls_probe *p, nng_listener nl)
{
    return probe_url(p->url, sizeof(p->url), nl);
}

/* nng's thread: the header went out, or could not. Only stores. */
static void
probe_sent(void *arg)
{
    tls_probe_conn *c = arg;

    atomic_store(&c->result, nng_aio_result(c->aio) + 1);
}

/* The connection to p->url within wait_ms, or NULL. */
static nng_stream *
probe_dial(tls_probe *p, int wait_ms)
{
    nng_stream_dialer *d = NULL;
    nng_aio *aio = NULL;
    nng_stream *s = NULL;

    if (nng_stream_dialer_alloc(&d, p->url) == 0 &&
        nng_stream_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, p->cfg) == 0 &&
        nng_aio_alloc(&aio, NULL, NULL) == 0) {
        nng_aio_set_timeout(aio, wait_ms > 0 ? wait_ms : 1);
        nng_stream_dialer_dial(d, aio);
        nng_aio_wait(aio);
        if (nng_aio_result(aio) == 0) {
            s = nng_aio_get_output(aio, 0);
        }
    }
    nng_aio_free(aio);
    nng_stream_dialer_free(d); /* NULL-safe; the stream stays */
    return s;
}

tls_probe_conn *
tls_probe_connect(tls_probe *p, int wait_ms)
{
    static const uint8_t hello[8] = {0, 'S', 'P', 0, 0, 0x30 /* REQ0 */, 0, 0};
    tls_probe_conn *c;
    nng_iov iov;

    if ((c = calloc(1, sizeof(*c))) == NULL) {
        return NULL;
    }
    memcpy(c->hello, hello, sizeof(hello));
    if ((c->stream = probe_dial(p, wait_ms)) == NULL ||
        nng_aio_alloc(&c->aio, probe_sent, c) != 0) {
        tls_probe_close(c);
        return NULL;
    }
    iov.iov_buf = c->hello;
    iov.iov_len = sizeof(c->hello);
    nng_aio_set_iov(c->aio, 1, &iov);
    /* nng's TLS stream shakes hands on this first send. */
    nng_stream_send(c->stream, c->aio);
    return c;
}

bool
tls_probe_hung_up(tls_probe_conn *c, int ms)
{
    int r = atomic_load(&c->result);

    if (r == 0) {
        nng_msleep(ms);
        r = atomic_load(&c->result);
    }
    return r > 1; /* the send failed: onced ended the connection */
}

void
tls_probe_close(tls_probe_conn *c)
{
    if (c == NULL) {
        return;
    }
    if (c->stream != NULL) {
        nng_stream_close(c->stream);
    }
    nng_aio_free(c->aio); /* NULL-safe; waits for its callback */
    nng_stream_free(c->stream);
    free(c);
}

void
tls_probe_park(tls_probe *p, tls_probe_conn *c)
{
    for (size_t i = 0; i < TLS_PROBE_PARKED; i++) {
        if (p->parked[i] == NULL) {
            c->parked_until = clock_now_ms() + TLS_PROBE_PARK_MS;
            p->parked[i] = c;
            return;
        }
    }
    tls_probe_close(c);
}

void
tls_probe_sweep(tls_probe *p, bool all)
{
    uint64_t now = clock_now_ms();

    for (size_t i = 0; i < TLS_PROBE_PARKED; i++) {
        tls_probe_conn *c = p->parked[i];

        if (c != NULL &&
            (all || atomic_load(&c->result) != 0 || now >= c->parked_until)) {
            tls_probe_close(c);
            p->parked[i] = NULL;
        }
    }
}

void
tls_probe_free(tls_probe *p)
{
    if (p == NULL) {
        return;
    }
    tls_probe_sweep(p, true);
    if (p->cfg != NULL) {
        nng_tls_config_free(p->cfg);
    }
    free(p);
}
