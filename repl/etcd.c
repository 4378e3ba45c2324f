/*
 * etcd.c — the etcd v3 JSON-gateway client (etcd.h): one POST per request,
 * endpoints tried in turn, every transfer bounded by a timeout.
 *
 * Owns: the curl handle, the response buffer, the endpoint list and the
 * index of the endpoint to try first.
 * Invariant: a request that no endpoint answered returns EAGAIN; a Txn is
 * sent to a second endpoint only when the first one could not be
 * connected to (it then never saw it).
 * Never: blocks longer than endpoints x timeout_ms; shares a handle
 * between threads.
 */
#include "repl/etcd.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <sodium.h>

struct etcd {
    CURL *curl;
    struct curl_slist *headers;
    char *urls[ETCD_ENDPOINTS_MAX];
    size_t nurls;
    size_t cur; /* the endpoint tried first */
    uint32_t timeout_ms;
    char *buf; /* the response body */
    size_t len;
    size_t cap;
    etcd_tls tls;                   /* its strings owned (copies) */
    char curl_err[CURL_ERROR_SIZE]; /* libcurl's detail of a failure */
    char err[512];
};

struct etcd_txn {
    cJSON *root;
    cJSON *compare;
    cJSON *success;
    bool nomem;
};

static pthread_once_t etcd_once = PTHREAD_ONCE_INIT;
static int etcd_init_rv;

static void
etcd_global_init(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
        sodium_init() < 0) {
        etcd_init_rv = ENOMEM;
    }
}

static size_t
etcd_write_cb(char *p, size_t size, size_t n, void *arg)
{
    etcd *e = arg;
    size_t add = size * n;

    if (e->len + add + 1 > e->cap) {
        size_t cap = (e->len + add + 1) * 2;
        char *b = realloc(e->buf, cap);
        if (b == NULL) {
            return 0; /* curl reports a write error */
        }
        e->buf = b;
        e->cap = cap;
    }
    memcpy(e->buf + e->len, p, add);
    e->len += add;
    e->buf[e->len] = '\0';
    return add;
}

/* Whether p (n bytes) names an http:// or https:// endpoint; *tls set when
 * https://. */
static bool
etcd_endpoint_scheme(const char *p, size_t n, bool *tls)
{
    if (n > 7 && strncmp(p, "http://", 7) == 0) {
        return true;
    }
    if (n > 8 && strncmp(p, "https://", 8) == 0) {
        *tls = true;
        return true;
    }
    return false;
}

bool
etcd_endpoints_valid(const char *endpoints, bool *tls)
{
    bool any = false;
    size_t count = 0;

    if (endpoints == NULL || endpoints[0] == '\0') {
        return false;
    }
    for (const char *p = endpoints; *p != '\0';) {
        size_t n = strcspn(p, ",");
        if (n == 0 || ++count > ETCD_ENDPOINTS_MAX ||
            !etcd_endpoint_scheme(p, n, &any)) {
            return false;
        }
        p += n + (p[n] == ',');
    }
    if (tls != NULL) {
        *tls = any;
    }
    return true;
}

/* A malloc'd copy of s into *out (NULL stays NULL). 0 or ENOMEM. */
static int
etcd_strdup(const char *s, const char **out)
{
    *out = NULL;
    if (s != NULL && (*out = strdup(s)) == NULL) {
        return ENOMEM;
    }
    return 0;
}

int
etcd_tls_copy(etcd_tls *dst, const etcd_tls *src)
{
    memset(dst, 0, sizeof(*dst));
    if (src != NULL && (etcd_strdup(src->cacert, &dst->cacert) != 0 ||
                        etcd_strdup(src->cert, &dst->cert) != 0 ||
                        etcd_strdup(src->key, &dst->key) != 0)) {
        etcd_tls_clear(dst);
        return ENOMEM;
    }
    return 0;
}

void
etcd_tls_clear(etcd_tls *t)
{
    free((char *)t->cacert);
    free((char *)t->cert);
    free((char *)t->key);
    memset(t, 0, sizeof(*t));
}

int
etcd_open(etcd **ep, const char *endpoints, uint32_t timeout_ms)
{
    return etcd_open_tls(ep, endpoints, NULL, timeout_ms);
}

int
etcd_open_tls(etcd **ep, const char *endpoints, const etcd_tls *tls,
              uint32_t timeout_ms)
{
    etcd *e;
    const char *p = endpoints;

    pthread_once(&etcd_once, etcd_global_init);
    if (etcd_init_rv != 0) {
        return etcd_init_rv;
    }
    if (!etcd_endpoints_valid(endpoints, NULL) || timeout_ms == 0) {
        return EINVAL;
    }
    if ((e = calloc(1, sizeof(*e))) == NULL) {
        return ENOMEM;
    }
    e->timeout_ms = timeout_ms;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        if ((e->urls[e->nurls] = strndup(p, n)) == NULL) {
            etcd_close(e);
            return ENOMEM;
        }
        e->nurls++;
        p += n + (p[n] == ',');
    }
    if (etcd_tls_copy(&e->tls, tls) != 0 ||
        (e->curl = curl_easy_init()) == NULL ||
        (e->headers = curl_slist_append(
             NULL, "Content-Type: application/json")) == NULL) {
        etcd_close(e);
        return ENOMEM;
    }
    *ep = e;
    return 0;
}

void
etcd_tls_apply(void *curl, const etcd_tls *tls)
{
    /* HTTP/1.1 on https:// too (libcurl would offer HTTP/2 there): the
     * gateway's one protocol, with the same failures and the same
     * streaming watch as on http://. */
    curl_easy_setopt(curl, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    if (tls == NULL) {
        return;
    }
    if (tls->cacert != NULL) {
        curl_easy_setopt(curl, CURLOPT_CAINFO, tls->cacert);
    }
    if (tls->cert != NULL) {
        curl_easy_setopt(curl, CURLOPT_SSLCERT, tls->cert);
        curl_easy_setopt(curl, CURLOPT_SSLCERTTYPE, "PEM");
    }
    if (tls->key != NULL) {
        curl_easy_setopt(curl, CURLOPT_SSLKEY, tls->key);
        curl_easy_setopt(curl, CURLOPT_SSLKEYTYPE, "PEM");
    }
}

void
etcd_close(etcd *e)
{
    if (e == NULL) {
        return;
    }
    if (e->curl != NULL) {
        curl_easy_cleanup(e->curl);
    }
    curl_slist_free_all(e->headers);
    for (size_t i = 0; i < e->nurls; i++) {
        free(e->urls[i]);
    }
    etcd_tls_clear(&e->tls);
    free(e->buf);
    free(e);
}

const char *
etcd_last_error(const etcd *e)
{
    return e->err;
}

/* A base64 copy of len bytes (malloc'd, NUL-terminated), or NULL. */
static char *
etcd_b64(const void *p, size_t len)
{
    size_t n = sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_ORIGINAL);
    char *s = malloc(n);

    if (s != NULL) {
        sodium_bin2base64(s, n, p, len, sodium_base64_VARIANT_ORIGINAL);
    }
    return s;
}

/* Decodes base64 string s into a malloc'd NUL-terminated buffer. */
static int
etcd_unb64(const char *s, char **out, size_t *outlen)
{
    size_t sl = s != NULL ? strlen(s) : 0;
    char *b = malloc(sl + 1);

    if (b == NULL) {
        return ENOMEM;
    }
    *outlen = 0;
    if (sl > 0 &&
        sodium_base642bin((unsigned char *)b, sl, s, sl, NULL, outlen, NULL,
                          sodium_base64_VARIANT_ORIGINAL) != 0) {
        free(b);
        return EPROTO;
    }
    b[*outlen] = '\0';
    *out = b;
    return 0;
}

/* An int64 field (the gateway writes them as strings); dflt when absent. */
static int64_t
etcd_i64(const cJSON *o, const char *name, int64_t dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

    if (cJSON_IsString(v) && v->valuestring != NULL) {
        return strtoll(v->valuestring, NULL, 10);
    }
    if (cJSON_IsNumber(v)) {
        return (int64_t)v->valuedouble;
    }
    return dflt;
}

static void
etcd_add_i64(cJSON *o, const char *name, int64_t v)
{
    char s[32];
    snprintf(s, sizeof(s), "%" PRId64, v);
    cJSON_AddStringToObject(o, name, s);
}

void
etcd_transfer_error(char *buf, size_t size, const char *url, int cc,
                    const char *detail, const etcd_tls *tls)
{
    bool https = strncmp(url, "https://", 8) == 0;
    bool cert = tls != NULL && tls->cert != NULL;
    const char *hint = "";

    switch ((CURLcode)cc) {
    case CURLE_PEER_FAILED_VERIFICATION:
        hint = " (is --etcd-cacert the CA that signed etcd's certificate, "
               "and does that certificate name this host?)";
        break;
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
        hint = " (check the --etcd-* files: PEM, readable by onced)";
        break;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
        if (https && !cert) {
            hint = " (etcd closed the TLS connection: with "
                   "--client-cert-auth it wants --etcd-cert and --etcd-key)";
        } else if (https) {
            hint = " (etcd refused the handshake: with --client-cert-auth "
                   "it wants --etcd-cert signed by its --trusted-ca-file)";
        }
        break;
    case CURLE_GOT_NOTHING:
        if (!https) {
            hint = " (does etcd serve TLS there? then write https://)";
        }
        break;
    default:
        break;
    }
    snprintf(buf, size, "%s: %s%s%s%s", url, curl_easy_strerror((CURLcode)cc),
             detail[0] != '\0' ? ": " : "", detail, hint);
}

/* Whether a transfer that failed with cc surely never reached etcd's
 * request handling: no connection, or no TLS session. */
static bool
etcd_never_sent(CURLcode cc)
{
    return cc == CURLE_COULDNT_CONNECT || cc == CURLE_SSL_CONNECT_ERROR ||
           cc == CURLE_PEER_FAILED_VERIFICATION ||
           cc == CURLE_SSL_CERTPROBLEM || cc == CURLE_SSL_CACERT_BADFILE;
}

/*
 * POSTs body to path on the endpoints in turn. On 0, *resp is the parsed
 * reply (cJSON_Delete) of an endpoint that answered HTTP 200. An answer
 * with an error status is returned as EPROTO with its gRPC code in *gcode
 * (may be NULL), except "unavailable" ones (14) which try the next
 * endpoint. once: the request must not reach a second endpoint after one
 * may have taken it (a Txn).
 */
static int
etcd_post(etcd *e, const char *path, const char *body, bool once, cJSON **resp,
          int *gcode)
{
    int rv = EAGAIN;

    snprintf(e->err, sizeof(e->err), "no etcd endpoint answered");
    for (size_t i = 0; i < e->nurls; i++) {
        size_t k = (e->cur + i) % e->nurls;
        char url[512];
        long status = 0;
        CURLcode cc;
        cJSON *j;

        snprintf(url, sizeof(url), "%s%s", e->urls[k], path);
        e->len = 0;
        curl_easy_reset(e->curl);
        curl_easy_setopt(e->curl, CURLOPT_URL, url);
        curl_easy_setopt(e->curl, CURLOPT_HTTPHEADER, e->headers);
        curl_easy_setopt(e->curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(e->curl, CURLOPT_WRITEFUNCTION, etcd_write_cb);
        curl_easy_setopt(e->curl, CURLOPT_WRITEDATA, e);
        curl_easy_setopt(e->curl, CURLOPT_TIMEOUT_MS, (long)e->timeout_ms);
        curl_easy_setopt(e->curl, CURLOPT_CONNECTTIMEOUT_MS,
                         (long)e->timeout_ms);
        curl_easy_setopt(e->curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e->curl, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(e->curl, CURLOPT_ERRORBUFFER, e->curl_err);
        etcd_tls_apply(e->curl, &e->tls);
        e->curl_err[0] = '\0';
        cc = curl_easy_perform(e->curl);
        if (cc != CURLE_OK) {
            etcd_transfer_error(e->err, sizeof(e->err), e->urls[k], cc,
                                e->curl_err, &e->tls);
            if (once && !etcd_never_sent(cc)) {
                return EAGAIN; /* it may have been applied */
            }
            continue;
        }
        curl_easy_getinfo(e->curl, CURLINFO_RESPONSE_CODE, &status);
        j = cJSON_ParseWithLength(e->buf != NULL ? e->buf : "", e->len);
        if (status != 200) {
            const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "error");
            int code = (int)etcd_i64(j, "code", -1);
            snprintf(e->err, sizeof(e->err), "%s: HTTP %ld: %s", e->urls[k],
                     status, cJSON_IsString(m) ? m->valuestring : "no message");
            cJSON_Delete(j);
            if (code == 14 || code == 4 || code == -1) {
                /* unavailable / deadline / not etcd's answer */
                if (once) {
                    return EAGAIN;
                }
                continue;
            }
            if (gcode != NULL) {
                *gcode = code;
            }
            e->cur = k;
            return EPROTO;
        }
        if (j == NULL) {
            snprintf(e->err, sizeof(e->err), "%s: reply is not JSON",
                     e->urls[k]);
            rv = EPROTO;
            continue;
        }
        e->cur = k;
        *resp = j;
        return 0;
    }
    return rv;
}

/* etcd_post of a cJSON body. */
static int
etcd_post_json(etcd *e, const char *path, cJSON *body, bool once, cJSON **resp,
               int *gcode)
{
    char *s = cJSON_PrintUnformatted(body);
    int rv;

    if (s == NULL) {
        return ENOMEM;
    }
    rv = etcd_post(e, path, s, once, resp, gcode);
    cJSON_free(s);
    return rv;
}

/* Adds "key" (and "range_end") fields, base64. */
static int
etcd_add_range(cJSON *o, const void *key, size_t klen, const void *end,
               size_t elen)
{
    char *k = etcd_b64(key, klen);
    char *r = end != NULL ? etcd_b64(end, elen) : NULL;
    int rv = 0;

    if (k == NULL || (end != NULL && r == NULL) ||
        cJSON_AddStringToObject(o, "key", k) == NULL ||
        (r != NULL && cJSON_AddStringToObject(o, "range_end", r) == NULL)) {
        rv = ENOMEM;
    }
    free(k);
    free(r);
    return rv;
}

void
etcd_kvs_free(etcd_kv *kvs, size_t n)
{
    if (kvs == NULL) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        free(kvs[i].key);
        free(kvs[i].val);
    }
    free(kvs);
}

static int
etcd_range_as(etcd *e, const void *key, size_t klen, const void *end,
              size_t elen, int64_t limit, bool serializable, etcd_kv **kvs,
              size_t *n, bool *more, int64_t *rev)
{
    cJSON *req = cJSON_CreateObject(), *resp = NULL;
    const cJSON *arr, *kv;
    etcd_kv *out = NULL;
    size_t cnt = 0;
    int rv;

    *kvs = NULL;
    *n = 0;
    if (req == NULL || (rv = etcd_add_range(req, key, klen, end, elen)) != 0) {
        cJSON_Delete(req);
        return ENOMEM;
    }
    if (limit > 0) {
        etcd_add_i64(req, "limit", limit);
    }
    if (serializable) {
        cJSON_AddBoolToObject(req, "serializable", true);
    }
    rv = etcd_post_json(e, "/v3/kv/range", req, false, &resp, NULL);
    cJSON_Delete(req);
    if (rv != 0) {
        return rv;
    }
    arr = cJSON_GetObjectItemCaseSensitive(resp, "kvs");
    if (cJSON_IsArray(arr) && cJSON_GetArraySize(arr) > 0 &&
        (out = calloc((size_t)cJSON_GetArraySize(arr), sizeof(*out))) == NULL) {
        cJSON_Delete(resp);
        return ENOMEM;
    }
    cJSON_ArrayForEach(kv, arr)
    {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(kv, "key");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(kv, "value");
        etcd_kv *o = &out[cnt];

        if (!cJSON_IsString(k) ||
            (rv = etcd_unb64(k->valuestring, &o->key, &o->klen)) != 0 ||
            (rv = etcd_unb64(cJSON_IsString(v) ? v->valuestring : "", &o->val,
                             &o->vlen)) != 0) {
            free(o->key);
            etcd_kvs_free(out, cnt);
            cJSON_Delete(resp);
            return rv != 0 ? rv : EPROTO;
        }
        o->create_rev = etcd_i64(kv, "create_revision", 0);
        o->mod_rev = etcd_i64(kv, "mod_revision", 0);
        o->lease = etcd_i64(kv, "lease", 0);
        cnt++;
    }
    if (more != NULL) {
        *more = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "more"));
    }
    if (rev != NULL) {
        *rev = etcd_i64(cJSON_GetObjectItemCaseSensitive(resp, "header"),
                        "revision", 0);
    }
    cJSON_Delete(resp);
    *kvs = out;
    *n = cnt;
    return 0;
}

int
etcd_range(etcd *e, const void *key, size_t klen, const void *end, size_t elen,
           int64_t limit, etcd_kv **kvs, size_t *n, bool *more, int64_t *rev)
{
    return etcd_range_as(e, key, klen, end, elen, limit, false, kvs, n, more,
                         rev);
}

int
etcd_range_serializable(etcd *e, const void *key, size_t klen, const void *end,
                        size_t elen, int64_t limit, etcd_kv **kvs, size_t *n,
                        bool *more, int64_t *rev)
{
    return etcd_range_as(e, key, klen, end, elen, limit, true, kvs, n, more,
                         rev);
}

int
etcd_delete(etcd *e, const void *key, size_t klen, const void *end, size_t elen)
{
    cJSON *req = cJSON_CreateObject(), *resp = NULL;
    int rv;

    if (req == NULL || etcd_add_range(req, key, klen, end, elen) != 0) {
        cJSON_Delete(req);
        return ENOMEM;
    }
    rv = etcd_post_json(e, "/v3/kv/deleterange", req, false, &resp, NULL);
    cJSON_Delete(req);
    cJSON_Delete(resp);
    return rv;
}

int
etcd_compact(etcd *e, int64_t rev)
{
    cJSON *req = cJSON_CreateObject(), *resp = NULL;
    int rv;

    if (req == NULL) {
        return ENOMEM;
    }
    etcd_add_i64(req, "revision", rev);
    rv = etcd_post_json(e, "/v3/kv/compaction", req, false, &resp, NULL);
    cJSON_Delete(req);
    cJSON_Delete(resp);
    return rv;
}

int
etcd_lease_grant(etcd *e, int64_t ttl_s, int64_t *id)
{
    cJSON *req = cJSON_CreateObject(), *resp = NULL;
    int rv;

    if (req == NULL) {
        return ENOMEM;
    }
    etcd_add_i64(req, "TTL", ttl_s);
    rv = etcd_post_json(e, "/v3/lease/grant", req, false, &resp, NULL);
    cJSON_Delete(req);
    if (rv != 0) {
        return rv;
    }
    *id = etcd_i64(resp, "ID", 0);
    cJSON_Delete(resp);
    return *id != 0 ? 0 : EPROTO;
}

int
etcd_lease_keepalive(etcd *e, int64_t id, int64_t *ttl_s)
{
    cJSON *req = cJSON_CreateObject(), *resp = NULL;
    const cJSON *r;
    int rv;

    if (req == NULL) {
        return ENOMEM;
    }
    etcd_add_i64(req, "ID", id);
    rv = etcd_post_json(e, "/v3/lease/keepalive", req, false, &resp, NULL);
    cJSON_Delete(req);
    if (rv != 0) {
        return rv;
    }
    /* A stream of one message: {"result": {..., "TTL": "n"}}; no TTL (0)
     * means the lease is gone. */
    r = cJSON_GetObjectItemCaseSensitive(resp, "result");
    *ttl_s = etcd_i64(r != NULL ? r : resp, "TTL", 0);
    cJSON_Delete(resp);
    if (*ttl_s <= 0) {
        snprintf(e->err, sizeof(e->err), "lease %" PRId64 " not found", id);
        return ENOENT;
    }
    return 0;
}

int
etcd_lease_revoke(etcd *e, int64_t id)
{
    cJSON *req = cJSON_CreateObject(), *resp = NULL;
    int rv, code = 0;

    if (req == NULL) {
        return ENOMEM;
    }
    etcd_add_i64(req, "ID", id);
    rv = etcd_post_json(e, "/v3/lease/revoke", req, false, &resp, &code);
    cJSON_Delete(req);
    cJSON_Delete(resp);
    if (rv == EPROTO && code == 5) {
        return ENOENT;
    }
    return rv;
}

etcd_txn *
etcd_txn_alloc(void)
{
    etcd_txn *t = calloc(1, sizeof(*t));

    if (t == NULL) {
        return NULL;
    }
    if ((t->root = cJSON_CreateObject()) == NULL ||
        (t->compare = cJSON_AddArrayToObject(t->root, "compare")) == NULL ||
        (t->success = cJSON_AddArrayToObject(t->root, "success")) == NULL) {
        etcd_txn_free(t);
        return NULL;
    }
    return t;
}

void
etcd_txn_free(etcd_txn *t)
{
    if (t != NULL) {
        cJSON_Delete(t->root);
        free(t);
    }
}

static void
etcd_txn_if(etcd_txn *t, const void *key, size_t klen, const char *target,
            const char *field, int64_t rev)
{
    cJSON *c = cJSON_CreateObject();

    if (c == NULL || etcd_add_range(c, key, klen, NULL, 0) != 0) {
        cJSON_Delete(c);
        t->nomem = true;
        return;
    }
    cJSON_AddStringToObject(c, "target", target);
    cJSON_AddStringToObject(c, "result", "EQUAL");
    etcd_add_i64(c, field, rev);
    cJSON_AddItemToArray(t->compare, c);
}

void
etcd_txn_if_created(etcd_txn *t, const void *key, size_t klen, int64_t rev)
{
    etcd_txn_if(t, key, klen, "CREATE", "create_revision", rev);
}

void
etcd_txn_if_modified(etcd_txn *t, const void *key, size_t klen, int64_t rev)
{
    etcd_txn_if(t, key, klen, "MOD", "mod_revision", rev);
}

void
etcd_txn_put(etcd_txn *t, const void *key, size_t klen, const void *val,
             size_t vlen, int64_t lease)
{
    cJSON *op = cJSON_CreateObject();
    cJSON *put = cJSON_AddObjectToObject(op, "request_put");
    char *v = etcd_b64(val, vlen);

    if (op == NULL || put == NULL || v == NULL ||
        etcd_add_range(put, key, klen, NULL, 0) != 0 ||
        cJSON_AddStringToObject(put, "value", v) == NULL) {
        cJSON_Delete(op);
        free(v);
        t->nomem = true;
        return;
    }
    free(v);
    if (lease != 0) {
        etcd_add_i64(put, "lease", lease);
    }
    cJSON_AddItemToArray(t->success, op);
}

void
etcd_txn_delete(etcd_txn *t, const void *key, size_t klen, const void *end,
                size_t elen)
{
    cJSON *op = cJSON_CreateObject();
    cJSON *del = cJSON_AddObjectToObject(op, "request_delete_range");

    if (op == NULL || del == NULL ||
        etcd_add_range(del, key, klen, end, elen) != 0) {
        cJSON_Delete(op);
        t->nomem = true;
        return;
    }
    cJSON_AddItemToArray(t->success, op);
}

int
etcd_txn_run(etcd *e, etcd_txn *t, bool *ok, int64_t *rev)
{
    cJSON *resp = NULL;
    int rv;

    *ok = false;
    if (t->nomem) {
        return ENOMEM;
    }
    if ((rv = etcd_post_json(e, "/v3/kv/txn", t->root, true, &resp, NULL)) !=
        0) {
        return rv;
    }
    *ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "succeeded"));
    if (rev != NULL) {
        *rev = etcd_i64(cJSON_GetObjectItemCaseSensitive(resp, "header"),
                        "revision", 0);
    }
    cJSON_Delete(resp);
    return 0;
}
