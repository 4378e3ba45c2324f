/*
 * peer_once_http.c — once over its HTTP/JSON API, as bench_compare measures
 * it ("once-http"): the same onced as "once" (an onced of its own, OPEN),
 * serving --http-listen on a loopback port, and per caller one libcurl
 * handle (one keep-alive connection) and one lease, as an agent written in
 * a language without a once library would call it (docs/http.md).
 *
 * A call is POST /v1/once.v1.Counter/Increment with the JSON request,
 * Once-Rpc-Id C:n (C the caller's lease) and Once-First-Incomplete n (every
 * earlier reply was delivered); the value is read from the JSON reply.
 *
 * Owns: the onced child (peer_once.c's start, with the HTTP listener) and
 * the callers' curl handles.
 * Invariant: a reply leaves onced only after the synced write of the
 * effect and its record, as on the nng path (the same executor).
 * Never: resends under a new rpc id; parses more of the JSON than the
 * three fields it needs (value, code, replayed).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "bench/bench_env.h"
#include "bench/compare_peer.h"
#include "tests/sys_helpers.h"

#define HTTP_BODY_MAX  4096
#define HTTP_TIMEOUT_S 10L

typedef struct http_env {
    bench_onced srv;
    char base[80]; /* http://127.0.0.1:PORT/v1 */
} http_env;

typedef struct http_conn {
    http_env *e;
    CURL *h;
    uint64_t client_id; /* the caller's lease */
    char counter[96];
    uint64_t last_n; /* the last call that returned OK */
    int64_t last_value;
    char body[HTTP_BODY_MAX]; /* the last reply's body */
    size_t blen;
} http_conn;

static int
http_start(const compare_config *cfg, void **envp)
{
    http_env *e = calloc(1, sizeof(*e));
    char url[64];
    /* every caller's connection comes from 127.0.0.1: one HTTP peer */
    const char *args[] = {BENCH_ONCED_MANY_PEERS,
                          "--http-conn-max-per-peer",
                          "1024",
                          "--http-listen",
                          url,
                          NULL};
    int port = sys_free_port();

    if (e == NULL || port < 0 || curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
        fprintf(stderr, "once-http: no port, memory or libcurl\n");
        free(e);
        return -1;
    }
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
    snprintf(e->base, sizeof(e->base), "%s/v1", url);
    if (bench_onced_start(&e->srv, cfg->onced, args) != 0) {
        free(e);
        return -1;
    }
    *envp = e;
    return 0;
}

static void
http_stop(void *env)
{
    http_env *e = env;

    if (e != NULL) {
        bench_onced_stop(&e->srv);
        free(e);
    }
}

static size_t
http_take(char *p, size_t size, size_t n, void *arg)
{
    http_conn *k = arg;
    size_t len = size * n;
    size_t room = sizeof(k->body) - 1 - k->blen;

    memcpy(k->body + k->blen, p, len < room ? len : room);
    k->blen += len < room ? len : room;
    k->body[k->blen] = '\0';
    return len;
}

/* POSTs body to method (".../Service/Method") with the rpc id C:n and
 * first-incomplete n when n > 0. The reply's body is in k->body. 0 when
 * it says "code":"OK"; -1 with err filled otherwise. */
static int
http_post(http_conn *k, const char *method, uint64_t n, const char *body,
          char *err)
{
    char url[160], id[80], fi[64];
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: "
                                                     "application/json");
    CURLcode rc;

    snprintf(url, sizeof(url), "%s%s", k->e->base, method);
    if (n > 0) {
        snprintf(id, sizeof(id), "Once-Rpc-Id: %" PRIu64 ":%" PRIu64,
                 k->client_id, n);
        snprintf(fi, sizeof(fi), "Once-First-Incomplete: %" PRIu64, n);
        hdr = curl_slist_append(hdr, id);
        hdr = curl_slist_append(hdr, fi);
    }
    k->blen = 0;
    k->body[0] = '\0';
    curl_easy_setopt(k->h, CURLOPT_URL, url);
    curl_easy_setopt(k->h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(k->h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(k->h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    rc = curl_easy_perform(k->h);
    curl_slist_free_all(hdr);
    if (rc != CURLE_OK) {
        snprintf(err, COMPARE_ERR_LEN, "%s: %s", method,
                 curl_easy_strerror(rc));
        return -1;
    }
    if (strstr(k->body, "\"code\":\"OK\"") == NULL) {
        snprintf(err, COMPARE_ERR_LEN, "%s: %.400s", method, k->body);
        return -1;
    }
    return 0;
}

/* The 64-bit field key of the last reply (a JSON string, as proto3's
 * mapping writes 64-bit integers); 0 when left out (its default). */
static int64_t
http_field(const http_conn *k, const char *key)
{
    char pat[48];
    const char *p;

    snprintf(pat, sizeof(pat), "\"%s\":\"", key);
    p = strstr(k->body, pat);
    return p != NULL ? strtoll(p + strlen(pat), NULL, 10) : 0;
}

static void http_close(void *conn);

/* k's curl handle (one keep-alive connection) for env's onced. 0, or -1
 * with err filled. */
static int
http_handle(http_conn *k, void *env, char *err)
{
    k->e = env;
    if ((k->h = curl_easy_init()) == NULL) {
        snprintf(err, COMPARE_ERR_LEN, "out of memory");
        return -1;
    }
    curl_easy_setopt(k->h, CURLOPT_WRITEFUNCTION, http_take);
    curl_easy_setopt(k->h, CURLOPT_WRITEDATA, k);
    curl_easy_setopt(k->h, CURLOPT_TIMEOUT, HTTP_TIMEOUT_S);
    curl_easy_setopt(k->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(k->h, CURLOPT_TCP_NODELAY, 1L);
    return 0;
}

static int
http_open(void *env, const compare_caller *who, void **connp, char *err)
{
    http_conn *k = calloc(1, sizeof(*k));

    if (k == NULL) {
        snprintf(err, COMPARE_ERR_LEN, "out of memory");
        return -1;
    }
    if (http_handle(k, env, err) != 0) {
        free(k);
        return -1;
    }
    snprintf(k->counter, sizeof(k->counter), "%s", who->counter);
    if (http_post(k, "/once.v1.Lease/OpenLease", 0, "{\"ttlMs\":\"600000\"}",
                  err) != 0 ||
        (k->client_id = (uint64_t)http_field(k, "clientId")) == 0) {
        http_close(k);
        return -1;
    }
    *connp = k;
    return 0;
}

static int
http_increment(http_conn *k, uint64_t n, int64_t *value, char *err)
{
    char body[160];

    snprintf(body, sizeof(body), "{\"name\":\"%s\",\"by\":\"1\"}", k->counter);
    if (http_post(k, "/once.v1.Counter/Increment", n, body, err) != 0) {
        return -1;
    }
    *value = http_field(k, "value");
    return 0;
}

static int
http_call(void *conn, uint64_t n, int64_t *value, char *err)
{
    http_conn *k = conn;

    if (http_increment(k, n, value, err) != 0) {
        return -1;
    }
    k->last_n = n;
    k->last_value = *value;
    return 0;
}

static int
http_replay_last(void *conn, bool *replayed, int64_t *value, char *err)
{
    http_conn *k = conn;

    if (http_increment(k, k->last_n, value, err) != 0) {
        return -1;
    }
    *replayed = strstr(k->body, "\"replayed\":true") != NULL;
    return 0;
}

static void
http_close(void *conn)
{
    http_conn *k = conn;

    if (k != NULL) {
        curl_easy_cleanup(k->h);
        free(k);
    }
}

static int
http_read(void *env, const char *counter, int64_t *value, char *err)
{
    http_conn k = {0};
    char body[160];
    int rv;

    if (http_handle(&k, env, err) != 0) {
        return -1;
    }
    snprintf(body, sizeof(body), "{\"name\":\"%s\"}", counter);
    rv = http_post(&k, "/once.v1.Counter/Get", 0, body, err);
    *value = http_field(&k, "value");
    curl_easy_cleanup(k.h);
    return rv;
}

static pid_t
http_server_pid(void *env)
{
    return ((http_env *)env)->srv.pid;
}

static uint64_t
http_server_fsyncs(void *env)
{
    return bench_server_fsyncs(((http_env *)env)->srv.url);
}

const compare_peer compare_peer_once_http = {
    .name = "once-http",
    .what = "onced's HTTP/JSON API, one keep-alive libcurl connection and "
            "one lease per caller",
    .exactly_once = true,
    .start = http_start,
    .stop = http_stop,
    .open = http_open,
    .call = http_call,
    .replay_last = http_replay_last,
    .close = http_close,
    .read = http_read,
    .server_pid = http_server_pid,
    .server_fsyncs = http_server_fsyncs,
};
