/*
 * http_front.c — the HTTP endpoints of http_front.h: their listeners and
 * what is routed on each.
 */
#include "server/http_front.h"

#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "base/log.h"
#include "base/tls_server.h"
#include "server/http_api.h"
#include "server/http_srv.h"
#include "server/metrics.h"

struct http_front {
    http_srv *api_srv;     /* --http-listen; NULL: none */
    http_srv *metrics_srv; /* --metrics-listen elsewhere; NULL: none */
    nng_tls_config *tls;   /* https:// only */
    http_api *api;
    metrics *mx;
};

/* https://: the server side of TLS, from the listeners' files. */
static int
http_front_tls(http_front *f, const char *url, const server_config *cfg)
{
    char err[512];
    int rv;

    if (strncmp(url, "https:", 6) != 0) {
        return 0;
    }
    if (cfg->tls_cert == NULL || cfg->tls_key == NULL) {
        log_error("--http-listen %s needs --tls-cert and --tls-key", url);
        return NNG_EINVAL;
    }
    if ((rv = tls_server_config(&f->tls, cfg->tls_cert, cfg->tls_key, err,
                                sizeof(err))) != 0) {
        log_error("%s", err);
    }
    return rv;
}

/* Logs where url is served (the port the system chose, for :0). */
static void
http_front_log(http_srv *hs, const char *url, const char *what)
{
    nng_sockaddr sa;

    if (http_srv_addr(hs, &sa) == 0 && sa.s_family == NNG_AF_INET) {
        char host[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &sa.s_in.sa_addr, host, sizeof(host));
        log_info("%s on %s://%s:%u", what,
                 strncmp(url, "https:", 6) == 0 ? "https" : "http", host,
                 (unsigned)ntohs(sa.s_in.sa_port));
    } else {
        log_info("%s on %s", what, url);
    }
}

/* The JSON API, the console and (metrics_here) /metrics at url. */
static int
http_front_api(http_front *f, const char *url, bool metrics_here,
               const http_srv_limits *lim, server *srv)
{
    int rv;

    if ((rv = http_front_tls(f, url, &srv->cfg)) != 0 ||
        (rv = http_srv_open(&f->api_srv, url, f->tls, lim)) != 0 ||
        (rv = http_api_open(&f->api, f->api_srv, srv)) != 0 ||
        (metrics_here && (rv = metrics_open(&f->mx, f->api_srv, srv)) != 0) ||
        (rv = http_srv_start(f->api_srv)) != 0) {
        log_error("cannot serve the JSON API on %s: %s (is the port in use? "
                  "pick another with --http-listen)",
                  url, nng_strerror(rv));
        return rv;
    }
    http_front_log(f->api_srv, url,
                   metrics_here ? "JSON API (POST /v1/<method>), console "
                                  "(/console) and metrics (/metrics)"
                                : "JSON API (POST /v1/<method>) and console "
                                  "(/console)");
    return 0;
}

/* /metrics alone at url. */
static int
http_front_metrics(http_front *f, const char *url, const http_srv_limits *lim,
                   server *srv)
{
    int rv;

    if ((rv = http_srv_open(&f->metrics_srv, url, NULL, lim)) != 0 ||
        (rv = metrics_open(&f->mx, f->metrics_srv, srv)) != 0 ||
        (rv = http_srv_start(f->metrics_srv)) != 0) {
        log_error("cannot serve metrics on %s: %s (is the port in use? pick "
                  "another with --metrics-listen)",
                  url, nng_strerror(rv));
        return rv;
    }
    http_front_log(f->metrics_srv, url, "metrics (GET /metrics)");
    return 0;
}

int
http_front_open(http_front **fp, const char *http_url, const char *metrics_url,
                server *srv)
{
    http_front *f;
    http_srv_limits lim;
    bool apart;
    int rv = 0;

    *fp = NULL;
    if (http_url == NULL && metrics_url == NULL) {
        return 0;
    }
    if ((f = calloc(1, sizeof(*f))) == NULL) {
        return NNG_ENOMEM;
    }
    apart = metrics_url != NULL &&
            (http_url == NULL || strcmp(metrics_url, http_url) != 0);
    lim.conn_max = srv->cfg.http_conn_max;
    if (apart && http_url != NULL) { /* two listeners: half each */
        lim.conn_max = lim.conn_max / 2 > 0 ? lim.conn_max / 2 : 1;
    }
    lim.per_peer = srv->cfg.http_conn_max_per_peer;
    lim.stats = &srv->stats.http;
    lim.body_max = srv->cfg.recv_max;
    lim.head_ms = srv->cfg.http_header_ms;
    if ((http_url != NULL &&
         (rv = http_front_api(f, http_url, !apart, &lim, srv)) != 0) ||
        (apart && (rv = http_front_metrics(f, metrics_url, &lim, srv)) != 0)) {
        http_front_stop(f);
        http_front_free(f);
        return rv;
    }
    *fp = f;
    return 0;
}

void
http_front_stop(http_front *f)
{
    if (f == NULL) {
        return;
    }
    http_srv_stop(f->api_srv); /* waits for its calls in flight */
    http_srv_stop(f->metrics_srv);
    metrics_stop(f->mx); /* it may have a task on the executor */
}

void
http_front_free(http_front *f)
{
    if (f == NULL) {
        return;
    }
    http_srv_free(f->api_srv);
    http_srv_free(f->metrics_srv);
    http_api_free(f->api);
    metrics_free(f->mx);
    if (f->tls != NULL) {
        nng_tls_config_free(f->tls);
    }
    free(f);
}
