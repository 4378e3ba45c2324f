/*
 * http_api.c — the JSON API of http_api.h: reading one POST into an
 * envelope, handing it to the verifier, and writing the reply.
 */
#include "server/http_api.h"

#include <ctype.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>
#include <sodium.h>

#include "http/json_pb.h"
#include "proto/auth_tag.h"
#include "base/clock.h"
#include "base/log.h"
#include "proto/principals.h"
#include "proto/reasons.h"
#include "server/auth.h"
#include "server/http_console.h"
#include "server/http_head.h"
#include "server/http_srv.h"
#include "server/http_stats.h"
#include "server/listener.h"
#include "server/verify.h"

#define HTTP_API_PREFIX "/v1"

struct http_api {
    server *srv;
    size_t inflight_max;     /* --contexts */
    _Atomic size_t inflight; /* http_calls alive */
};

/* One request from its handler callback to its reply. */
typedef struct http_call {
    listener_req req; /* first: http_api_reply recovers the call from it */
    http_api *api;
    nng_aio *aio; /* nng's, finished by the reply */
    const wire_method *wm;
} http_call;

/* gRPC's code → HTTP status, as grpc-gateway maps it. */
static uint16_t
http_status_of(int code)
{
    static const uint16_t map[] = {
        [ONCE__V1__CODE__OK] = 200,
        [ONCE__V1__CODE__CANCELLED] = 499,
        [ONCE__V1__CODE__UNKNOWN] = 500,
        [ONCE__V1__CODE__INVALID_ARGUMENT] = 400,
        [ONCE__V1__CODE__DEADLINE_EXCEEDED] = 504,
        [ONCE__V1__CODE__NOT_FOUND] = 404,
        [ONCE__V1__CODE__ALREADY_EXISTS] = 409,
        [ONCE__V1__CODE__PERMISSION_DENIED] = 403,
        [ONCE__V1__CODE__RESOURCE_EXHAUSTED] = 429,
        [ONCE__V1__CODE__FAILED_PRECONDITION] = 400,
        [ONCE__V1__CODE__ABORTED] = 409,
        [ONCE__V1__CODE__OUT_OF_RANGE] = 400,
        [ONCE__V1__CODE__UNIMPLEMENTED] = 501,
        [ONCE__V1__CODE__INTERNAL] = 500,
        [ONCE__V1__CODE__UNAVAILABLE] = 503,
        [ONCE__V1__CODE__DATA_LOSS] = 500,
        [ONCE__V1__CODE__UNAUTHENTICATED] = 401,
    };

    if (code < 0 || (size_t)code >= sizeof(map) / sizeof(map[0])) {
        return 500;
    }
    return map[code];
}

/* Appends ,"key":"text" (JSON-escaped) to the text being built. */
static int
http_put_string(char **s, size_t *len, size_t *cap, const char *key,
                const char *text)
{
    /* the escaped text at most 6 bytes a byte, the punctuation, and room
     * for the closing ,"replayed":false} http_body writes after it */
    size_t need = *len + strlen(key) + 6 * strlen(text) + 32;

    if (need > *cap) {
        char *n = realloc(*s, need);
        if (n == NULL) {
            return NNG_ENOMEM;
        }
        *s = n;
        *cap = need;
    }
    *len += (size_t)sprintf(*s + *len, ",\"%s\":\"", key);
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p == '"' || *p == '\\') {
            (*s)[(*len)++] = '\\';
            (*s)[(*len)++] = (char)*p;
        } else if (*p < 0x20) {
            *len += (size_t)sprintf(*s + *len, "\\u%04x", *p);
        } else {
            (*s)[(*len)++] = (char)*p;
        }
    }
    (*s)[(*len)++] = '"';
    (*s)[*len] = '\0';
    return 0;
}

/*
 * The reply body: the response message's fields (json, "{...}" or NULL
 * for none) and code, reason, message, replayed. *out is malloc'd.
 */
static int
http_body(const char *json, int code, const char *reason, const char *message,
          bool replayed, char **out, size_t *outlen)
{
    size_t len, cap;
    char *s;
    int rv;

    json = json != NULL ? json : "{}";
    len = strlen(json) - 1; /* drop the closing brace */
    cap = len + 64;
    if ((s = malloc(cap)) == NULL) {
        return NNG_ENOMEM;
    }
    memcpy(s, json, len);
    s[len] = '\0';
    if ((rv = http_put_string(&s, &len, &cap, "code", wire_code_name(code))) !=
            0 ||
        (rv = http_put_string(&s, &len, &cap, "reason", reason)) != 0 ||
        (rv = http_put_string(&s, &len, &cap, "message", message)) != 0) {
        free(s);
        return rv;
    }
    if (json[1] == '}') { /* "{}": no field before ours, no comma */
        memmove(s + 1, s + 2, len - 1);
        len--;
    }
    snprintf(s + len, cap - len, ",\"replayed\":%s}",
             replayed ? "true" : "false");
    *outlen = strlen(s);
    *out = s;
    return 0;
}

/* Finishes aio with status and body (taken: freed here). */
static void
http_finish(nng_aio *aio, uint16_t status, char *body, size_t len)
{
    nng_http_res *res = NULL;

    if (body == NULL || nng_http_res_alloc(&res) != 0 ||
        nng_http_res_set_status(res, status) != 0 ||
        nng_http_res_set_header(res, "Content-Type", "application/json") != 0 ||
        /* A failed authentication costs the peer its connection, as
         * repeated ones do on nng (conns.h). */
        (status == 401 &&
         nng_http_res_set_header(res, "Connection", "close") != 0) ||
        nng_http_res_copy_data(res, body, len) != 0) {
        free(body);
        nng_http_res_free(res);
        nng_aio_finish(aio, NNG_ENOMEM); /* nng closes the connection */
        return;
    }
    free(body);
    nng_aio_set_output(aio, 0, res);
    nng_aio_finish(aio, 0);
}

/* Answers a request refused before it reached the verifier, counted
 * in hs (http_stats.h). */
static void
http_refuse(nng_aio *aio, const http_outcome *o, http_stats *hs)
{
    uint16_t status =
        o->status != 0 ? (uint16_t)o->status : http_status_of(o->code);
    char *body = NULL;
    size_t len = 0;

    http_stats_refused(hs, o->reason, status);
    (void)http_body(NULL, o->code, o->reason, o->message, false, &body, &len);
    http_finish(aio, status, body, len);
}

/* The response payload as JSON, or NULL when there is none to show. */
static char *
http_payload_json(const wire_method *wm, const Once__V1__Response *resp)
{
    ProtobufCMessage *m;
    char err[JSON_PB_ERR_MAX];
    char *json = NULL;
    size_t len;

    if (resp->status == NULL || resp->status->code != ONCE__V1__CODE__OK) {
        return NULL;
    }
    m = protobuf_c_message_unpack(wm->method->output, NULL, resp->payload.len,
                                  resp->payload.data);
    if (m == NULL || json_pb_encode(m, &json, &len, err, sizeof(err)) != 0) {
        log_warn("%s: the response does not convert to JSON (%s)",
                 wm->full_name, m == NULL ? "does not unpack" : err);
        json = NULL;
    }
    if (m != NULL) {
        protobuf_c_message_free_unpacked(m, NULL);
    }
    return json;
}

/* listener_req.reply: the executor's (or verifier's) packed Response. */
static void
http_api_reply(listener_req *r, const void *buf, size_t len)
{
    http_call *hc = (http_call *)r;
    Once__V1__Response *resp =
        once__v1__response__unpack(NULL, len, (const uint8_t *)buf);
    char *json = NULL, *body = NULL;
    size_t blen = 0;
    int code = ONCE__V1__CODE__INTERNAL;

    nng_msg_free(r->msg); /* the executor took it, or it is ours still */
    r->msg = NULL;
    if (resp != NULL && resp->status != NULL) {
        code = resp->status->code;
        json = http_payload_json(hc->wm, resp);
        (void)http_body(json, code, resp->status->reason, resp->status->message,
                        resp->replayed, &body, &blen);
    } else {
        (void)http_body(NULL, code, "", "onced's reply did not unpack", false,
                        &body, &blen);
    }
    free(json);
    once__v1__response__free_unpacked(resp, NULL);
    http_finish(hc->aio, http_status_of(code), body, blen);
    atomic_fetch_sub(&hc->api->inflight, 1);
    free(hc);
}

/* The method the path names, or NULL with o set (404). */
static const wire_method *
http_method(nng_http_req *req, http_outcome *o)
{
    const char *uri = nng_http_req_get_uri(req);
    const char *name = uri + strlen(HTTP_API_PREFIX);
    size_t len = strcspn(name, "?#");
    const wire_method *wm = wire_method_find(name, len);
    char shown[64];

    if (wm != NULL && strcmp(wm->full_name, WIRE_BATCH_METHOD) != 0) {
        return wm;
    }
    snprintf(shown, sizeof(shown), "%.*s", (int)(len < 60 ? len : 60), name);
    for (char *p = shown; *p; p++) {
        *p = isprint((unsigned char)*p) && *p != '"' ? *p : '?';
    }
    (void)http_refusal(o, 404, ONCE__V1__CODE__UNIMPLEMENTED,
                       REASON_UNKNOWN_METHOD,
                       "no method \"%s\" (POST /v1/<full method name>, e.g. "
                       "/v1/once.v1.Counter/Increment)",
                       shown);
    return NULL;
}

/* Whether the request says its body is JSON; else o is set (415). */
static bool
http_is_json(nng_http_req *req, http_outcome *o)
{
    const char *ct = nng_http_req_get_header(req, "Content-Type");
    size_t n = strlen("application/json");

    if (ct != NULL && strncasecmp(ct, "application/json", n) == 0 &&
        (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ')) {
        return true;
    }
    return http_refusal(
        o, 415, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_HTTP_CONTENT_TYPE,
        "the body must be JSON: send Content-Type: application/json");
}

/* Decodes the body and packs it into *payload (malloc'd); else o set. */
static bool
http_payload(const http_call *hc, const void *body, size_t blen,
             uint8_t **payload, size_t *plen, http_outcome *o)
{
    ProtobufCMessage *m = NULL;
    char err[JSON_PB_ERR_MAX];
    int rv;

    if ((rv = json_pb_decode(hc->wm->method->input, body, blen, &m, err,
                             sizeof(err))) != 0) {
        return http_refusal(
            o, 0,
            rv == EINVAL ? ONCE__V1__CODE__INVALID_ARGUMENT
                         : ONCE__V1__CODE__RESOURCE_EXHAUSTED,
            rv == EINVAL ? REASON_HTTP_BAD_JSON : REASON_NO_MEMORY, "%s: %s",
            hc->wm->method->input->name, rv == EINVAL ? err : "out of memory");
    }
    *plen = protobuf_c_message_get_packed_size(m);
    if ((*payload = malloc(*plen > 0 ? *plen : 1)) == NULL) {
        protobuf_c_message_free_unpacked(m, NULL);
        return http_refusal(o, 0, ONCE__V1__CODE__RESOURCE_EXHAUSTED,
                            REASON_NO_MEMORY, "out of memory");
    }
    protobuf_c_message_pack(m, *payload);
    protobuf_c_message_free_unpacked(m, NULL);
    return true;
}

/* Packs the envelope of h and payload into *msg, signed with key when
 * sign; else o set (413 for one larger than --recv-max). */
static bool
http_envelope(const http_call *hc, const http_head *h, uint8_t *payload,
              size_t plen, const uint8_t *key, nng_msg **msg, http_outcome *o)
{
    Once__V1__Request env = ONCE__V1__REQUEST__INIT;
    size_t len, max = hc->api->srv->cfg.recv_max;
    uint8_t *buf;
    int rv;

    env.method = (char *)hc->wm->full_name;
    env.client_id = h->client_id;
    env.seq = h->seq;
    env.first_incomplete = h->first_incomplete;
    env.attempt = h->attempt;
    env.timeout_ms = h->deadline_ms;
    env.principal = (char *)h->principal;
    env.payload.data = payload;
    env.payload.len = plen;
    len = once__v1__request__get_packed_size(&env);
    if (len + AUTH_TAG_TRAILER > max) {
        return http_refusal(o, 413, ONCE__V1__CODE__INVALID_ARGUMENT,
                            REASON_REQUEST_TOO_LARGE,
                            "the request packs to %zu bytes; onced reads at "
                            "most %zu (--recv-max)",
                            len + AUTH_TAG_TRAILER, max);
    }
    if ((rv = nng_msg_alloc(msg, len + (key != NULL ? AUTH_TAG_TRAILER : 0))) !=
        0) {
        return http_refusal(o, 0, ONCE__V1__CODE__RESOURCE_EXHAUSTED,
                            REASON_NO_MEMORY, "out of memory");
    }
    buf = nng_msg_body(*msg);
    once__v1__request__pack(&env, buf);
    if (key != NULL) {
        auth_tag_append(buf, len, key);
    }
    return true;
}

/* Takes a call slot (at most --contexts); else o set (429). */
static http_call *
http_call_take(http_api *a, const wire_method *wm, nng_aio *aio,
               http_outcome *o)
{
    http_call *hc;

    if (atomic_fetch_add(&a->inflight, 1) >= a->inflight_max ||
        (hc = calloc(1, sizeof(*hc))) == NULL) {
        atomic_fetch_sub(&a->inflight, 1);
        (void)http_refusal(o, 0, ONCE__V1__CODE__RESOURCE_EXHAUSTED,
                           REASON_HTTP_BUSY,
                           "onced has %zu JSON API calls in flight, as many "
                           "as it takes (--contexts); retry the same rpc id",
                           a->inflight_max);
        return NULL;
    }
    hc->api = a;
    hc->aio = aio;
    hc->wm = wm;
    return hc;
}

/* Authenticates the request: by its console token when it carries one
 * (name holds the token's principal then), else by http_head_auth. */
static bool
http_auth(nng_http_req *req, const http_api *a, const wire_method *wm,
          http_head *h, const void *body, size_t blen, char *name,
          uint8_t key[AUTH_KEY_BYTES], bool *sign, http_outcome *o)
{
    const char *token = nng_http_req_get_header(req, "Once-Console-Token");

    if (token != NULL && token[0] != '\0') {
        return http_console_auth(token, a->srv->env.auth, wm->full_name, h,
                                 name, key, sign, o);
    }
    return http_head_auth(h, a->srv->env.auth, wm->full_name, body, blen, key,
                          sign, o);
}

/* An nng thread (http_srv.h): POST /v1/<method>. Never blocks: it decodes,
 * hashes and packs the request and hands it to the verifier; the reply finishes
 * aio. */
static void
http_api_post(nng_aio *aio)
{
    nng_http_req *req = nng_aio_get_input(aio, 0);
    http_api *a = nng_aio_get_input(aio, 1); /* the route's (http_srv.h) */
    http_outcome o = {0, "", "", 0};
    const wire_method *wm;
    http_call *hc = NULL;
    http_head h;
    void *body;
    size_t blen, plen = 0;
    uint8_t *payload = NULL, key[AUTH_KEY_BYTES];
    char name[PRINCIPAL_NAME_MAX + 1];
    bool sign = false;
    nng_msg *msg = NULL;

    nng_http_req_get_data(req, &body, &blen);
    if ((wm = http_method(req, &o)) == NULL || !http_is_json(req, &o) ||
        !http_head_read(req, &h, &o) ||
        !http_auth(req, a, wm, &h, body, blen, name, key, &sign, &o) ||
        (hc = http_call_take(a, wm, aio, &o)) == NULL ||
        !http_payload(hc, body, blen, &payload, &plen, &o) ||
        !http_envelope(hc, &h, payload, plen, sign ? key : NULL, &msg, &o)) {
        sodium_memzero(key, sizeof(key));
        free(payload);
        if (hc != NULL) {
            atomic_fetch_sub(&a->inflight, 1);
            free(hc);
        }
        http_refuse(aio, &o, &a->srv->stats.http);
        return;
    }
    sodium_memzero(key, sizeof(key));
    free(payload);
    hc->req.msg = msg;
    hc->req.recv_ms = clock_now_ms(); /* as the listener stamps it */
    hc->req.reply = http_api_reply;
    verifier_submit(a->srv->vf, &hc->req); /* replies through hc */
}

const char *
http_api_url_problem(const char *url)
{
    nng_url *u;
    const char *why = NULL;

    if (nng_url_parse(&u, url) != 0) {
        return "not a URL (write it like http://127.0.0.1:8080)";
    }
    if (strcmp(u->u_scheme, "http") != 0 && strcmp(u->u_scheme, "https") != 0) {
        why = "http:// or https:// (with --tls-cert and --tls-key)";
    } else if (u->u_hostname == NULL || u->u_hostname[0] == '\0') {
        why = "the URL needs a host (http://127.0.0.1:8080, or "
              "http://0.0.0.0:8080 for every address)";
    } else if (u->u_path != NULL && u->u_path[0] != '\0' &&
               strcmp(u->u_path, "/") != 0) {
        why = "the API is served at /v1/, /console and /metrics: give no "
              "path";
    } else if ((u->u_query != NULL && u->u_query[0] != '\0') ||
               (u->u_fragment != NULL && u->u_fragment[0] != '\0')) {
        why = "the URL takes no query or fragment";
    }
    nng_url_free(u);
    return why;
}

/* Whether a response message of some method has a top-level field whose
 * JSON name is one the reply adds (code, reason, message, replayed): its
 * body would then hold the name twice. Logged; never so today. */
static bool
http_api_names_clash(void)
{
    static const char *const ours[] = {"code", "reason", "message", "replayed"};
    size_t n;
    const wire_method *wms = wire_methods(&n);

    for (size_t i = 0; i < n; i++) {
        const ProtobufCMessageDescriptor *d = wms[i].method->output;
        for (unsigned f = 0; f < d->n_fields; f++) {
            for (size_t k = 0; k < sizeof(ours) / sizeof(ours[0]); k++) {
                /* one-word names: the JSON name is the field's name */
                if (strcmp(d->fields[f].name, ours[k]) == 0) {
                    log_error("%s: field %s of %s clashes with the JSON "
                              "reply's own \"%s\"",
                              wms[i].full_name, d->fields[f].name, d->name,
                              ours[k]);
                    return true;
                }
            }
        }
    }
    return false;
}

int
http_api_open(http_api **ap, http_srv *hs, server *srv)
{
    http_api *a;
    int rv;

    if ((a = calloc(1, sizeof(*a))) == NULL) {
        return NNG_ENOMEM;
    }
    a->srv = srv;
    a->inflight_max = srv->cfg.contexts > 0 ? srv->cfg.contexts : 1;
    if (http_api_names_clash()) {
        free(a);
        return NNG_EINVAL;
    }
    if ((rv = http_srv_handle(hs, "POST", HTTP_API_PREFIX, true, http_api_post,
                              a)) != 0 ||
        (rv = http_console_serve(hs)) != 0) {
        free(a);
        return rv;
    }
    *ap = a;
    return 0;
}

void
http_api_free(http_api *a)
{
    free(a);
}
