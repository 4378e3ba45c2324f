/*
 * http_srv.c — the HTTP/1.1 listener of http_srv.h: accepting under the
 * cap, each connection's read of a request, its handler call, its
 * response, and the reaper that frees closed connections.
 */
#include "server/http_srv.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>
#include <nng/supplemental/util/platform.h>

#include "proto/once.pb-c.h"
#include "proto/reasons.h"
#include "proto/wire.h"
#include "server/http_chunked.h"

#define HTTP_HEAD_MAX        (16 * 1024) /* request line and headers */
#define HTTP_BODY_MS         30000       /* the body, after the headers */
#define HTTP_IDLE_MS         60000       /* keep-alive, between requests */
#define HTTP_SEND_MS         10000       /* a response the peer must take */
#define HTTP_REFUSE_SEND_MS  1000        /* a 503 at the cap */
#define HTTP_ACCEPT_PAUSE_MS 100         /* after a failed accept */
/* After a refusal, what the peer still sends is read and dropped for at
 * most this long and this much before the close: a close with unread
 * bytes sends a reset, which may destroy the refusal before the peer
 * reads it. */
#define HTTP_DRAIN_MS   1000
#define HTTP_DRAIN_MAX  (256 * 1024)
#define HTTP_ROUTES_MAX 64
#define HTTP_CONTINUE   "HTTP/1.1 100 Continue\r\n\r\n"
/* At the cap, a connection that has waited this long for a request head
 * (stalled in one, or idle between requests) is closed to make room. */
#define HTTP_EVICT_AGE_MS 1000

typedef struct http_route {
    const char *method; /* "POST" or "GET" */
    char *path;
    bool tree;
    void (*cb)(nng_aio *); /* NULL: static */
    void *data;
    const char *type; /* static: Content-Type, bytes */
    const void *bytes;
    size_t len;
} http_route;

typedef enum {
    SC_HEAD,
    SC_BODY,    /* a Content-Length body, read into body */
    SC_CHUNKED, /* a chunked body, read into buf and decoded into body */
    SC_CALL,
    SC_SEND,
    SC_DRAIN
} sc_state;

/* One connection. Its fields are its aios' callbacks' alone (one of io
 * and call is pending at a time), but for the links (srv->mtx). */
typedef struct http_sconn {
    http_srv *srv;
    nng_stream *st;
    nng_aio *io;   /* recv and send */
    nng_aio *call; /* the handler's */
    sc_state state;
    bool refused; /* (srv->mtx) counted in nrefusing, not nconns:
                     answered 503 at the cap, or evicted */
    /* nng_clock() since it waits for a request head (accepted, or its
     * last response sent; never 0); 0 while it reads one past its head,
     * runs it or answers it. Written by its callbacks, read by the
     * accept callback's eviction. */
    _Atomic uint64_t head_since;
    bool at_cap;       /* accepted at a cap, to be answered 503 (or 429, its
                          peer's): set once */
    bool closed;       /* (srv->mtx) its stream closed by the eviction or the
                          stop: no read or send is started on it again (nng
                          1.5.2's tcp would leave one pending till its timeout) */
    bool close_after;  /* after the response being sent */
    bool head_only;    /* HEAD: the response without its body */
    bool drain;        /* a refusal: SC_DRAIN after it is sent */
    bool interim;      /* sending 100 Continue: the body after it */
    bool chunked;      /* the request's body is chunked (ck decodes it) */
    nng_sockaddr peer; /* its remote address (family 0: unknown) */
    size_t drained;
    nng_time deadline; /* of the head (from its first byte) or the body */
    size_t len;        /* bytes in buf not yet used */
    size_t scanned;    /* of them, searched for the head's end already */
    nng_http_req *req;
    const http_route *route;
    uint8_t *body;
    size_t body_len, body_got;
    size_t body_cap; /* chunked: body's allocation */
    http_chunked ck;
    char *out;
    size_t out_len, out_sent;
    struct http_sconn *prev, *next; /* srv->live, or next in srv->dead */
    char buf[HTTP_HEAD_MAX];
} http_sconn;

struct http_srv {
    nng_stream_listener *l;
    nng_aio *acc;
    bool acc_pausing; /* acc sleeps after a failed accept */
    bool acc_waiting; /* (mtx) no accept pending: refusing slots full */
    http_srv_limits lim;
    http_route routes[HTTP_ROUTES_MAX];
    size_t nroutes;
    pthread_t reaper;
    bool reaper_started;

    pthread_mutex_t mtx; /* protects what follows */
    pthread_cond_t cv;   /* signals dead, live and reaper_stop changes */
    http_sconn *live;    /* every open connection */
    size_t nconns;       /* live and not refused */
    size_t nrefusing;    /* live and refused */
    http_sconn *dead;    /* closed, for the reaper */
    bool closing;
    bool reaper_stop;
};

static void sconn_recv(http_sconn *c);
static void sconn_parse(http_sconn *c);

/* ---- responses ---------------------------------------------------------
 */

static const char *
http_phrase(uint16_t status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 411:
        return "Length Required";
    case 413:
        return "Content Too Large";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 503:
        return "Service Unavailable";
    default:
        return "Error";
    }
}

/* c->out: a response of status with type and body (NULL: none). */
static int
sconn_compose(http_sconn *c, uint16_t status, const char *phrase,
              const char *type, const void *body, size_t len)
{
    size_t cap = 256 + (type != NULL ? strlen(type) : 0) + len;
    int n;

    if ((c->out = malloc(cap)) == NULL) {
        return NNG_ENOMEM;
    }
    n = snprintf(c->out, cap,
                 "HTTP/1.1 %u %s\r\n%s%s%sContent-Length: %zu\r\n%s\r\n",
                 (unsigned)status, phrase != NULL ? phrase : "",
                 type != NULL ? "Content-Type: " : "", type != NULL ? type : "",
                 type != NULL ? "\r\n" : "", len,
                 c->close_after ? "Connection: close\r\n" : "");
    c->out_len = (size_t)n;
    if (!c->head_only && len > 0) {
        memcpy(c->out + c->out_len, body, len);
        c->out_len += len;
    }
    c->out_sent = 0;
    return 0;
}

/* ---- a connection's life -------------------------------------------------
 */

/* c is done: closed, off the live list, handed to the reaper. */
static void
sconn_dead(http_sconn *c)
{
    http_srv *s = c->srv;
    bool rearm;

    nng_stream_close(c->st);
    pthread_mutex_lock(&s->mtx);
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        s->live = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    if (c->refused) {
        s->nrefusing--;
    } else {
        s->nconns--;
    }
    if (s->lim.stats != NULL) {
        atomic_fetch_sub(&s->lim.stats->open, 1);
    }
    c->prev = NULL;
    c->next = s->dead;
    s->dead = c;
    rearm = c->refused && s->acc_waiting && !s->closing;
    s->acc_waiting = s->acc_waiting && !rearm;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mtx);
    if (rearm) { /* a refusing slot is free again */
        nng_stream_listener_accept(s->l, s->acc);
    }
}

/* Starts op (nng_stream_recv or _send) on c's io, unless the stream was
 * closed under it (then c is done). Under srv->mtx, as the close is:
 * nng finishes an aio through its task queue, never inline. */
static void
sconn_io_start(http_sconn *c, void (*op)(nng_stream *, nng_aio *))
{
    bool closed;

    pthread_mutex_lock(&c->srv->mtx);
    if (!(closed = c->closed)) {
        op(c->st, c->io);
    }
    pthread_mutex_unlock(&c->srv->mtx);
    if (closed) {
        sconn_dead(c);
    }
}

static void
sconn_send(http_sconn *c)
{
    nng_iov iov;

    c->state = SC_SEND;
    iov.iov_buf = c->out + c->out_sent;
    iov.iov_len = c->out_len - c->out_sent;
    nng_aio_set_iov(c->io, 1, &iov);
    nng_aio_set_timeout(c->io, c->at_cap ? HTTP_REFUSE_SEND_MS : HTTP_SEND_MS);
    sconn_io_start(c, nng_stream_send);
}

/* Refuses the request being read with status and the JSON body of
 * docs/http.md, then closes the connection. */
static void
sconn_refuse(http_sconn *c, uint16_t status, int code, const char *reason,
             const char *message)
{
    char json[512];
    int n;

    n = snprintf(json, sizeof(json),
                 "{\"code\":\"%s\",\"reason\":\"%s\",\"message\":\"%s\","
                 "\"replayed\":false}",
                 wire_code_name(code), reason, message);
    http_stats_refused(c->srv->lim.stats, reason, status);
    c->close_after = true;
    c->head_only = false;
    c->drain = !c->at_cap; /* a 503 (429) at a cap is closed at once */
    atomic_store(&c->head_since, 0);
    free(c->out);
    c->out = NULL;
    if (sconn_compose(c, status, http_phrase(status), "application/json", json,
                      (size_t)n) != 0) {
        sconn_dead(c);
        return;
    }
    sconn_send(c);
}

/* The response sent: the next request, or the close. */
static void
sconn_sent(http_sconn *c)
{
    free(c->out);
    c->out = NULL;
    if (c->interim) { /* 100 Continue: now the body */
        c->interim = false;
        c->state = c->chunked ? SC_CHUNKED : SC_BODY;
        sconn_recv(c);
        return;
    }
    if (c->drain) {
        c->state = SC_DRAIN;
        c->deadline = nng_clock() + HTTP_DRAIN_MS;
        c->len = 0;
        sconn_recv(c);
        return;
    }
    if (c->close_after) {
        sconn_dead(c);
        return;
    }
    c->state = SC_HEAD;
    c->head_only = false;
    atomic_store(&c->head_since, nng_clock() | 1);
    if (c->len > 0) { /* a pipelined request: its clock starts now */
        c->deadline = nng_clock() + c->srv->lim.head_ms;
        sconn_parse(c);
        return;
    }
    sconn_recv(c);
}

/* The call aio's callback: the handler's response, sent. */
static void
sconn_called(void *arg)
{
    http_sconn *c = arg;
    nng_http_res *res = nng_aio_get_output(c->call, 0);
    const char *conn;
    void *body;
    size_t len;
    bool closing;
    int rv = nng_aio_result(c->call);

    nng_http_req_free(c->req);
    c->req = NULL;
    free(c->body);
    c->body = NULL;
    pthread_mutex_lock(&c->srv->mtx);
    closing = c->srv->closing;
    pthread_mutex_unlock(&c->srv->mtx);
    if (rv != 0 || res == NULL || closing) { /* as nng: closed */
        if (res != NULL) {
            nng_http_res_free(res);
        }
        sconn_dead(c);
        return;
    }
    conn = nng_http_res_get_header(res, "Connection");
    if (conn != NULL && strcasecmp(conn, "close") == 0) {
        c->close_after = true;
    }
    nng_http_res_get_data(res, &body, &len);
    rv = sconn_compose(c, nng_http_res_get_status(res),
                       nng_http_res_get_reason(res),
                       nng_http_res_get_header(res, "Content-Type"), body, len);
    nng_http_res_free(res);
    if (rv != 0) {
        sconn_dead(c);
        return;
    }
    sconn_send(c);
}

/* The request is read: its route answers. */
static void
sconn_dispatch(http_sconn *c)
{
    const http_route *r = c->route;

    if (r->cb == NULL) {
        nng_http_req_free(c->req);
        c->req = NULL;
        free(c->body); /* a body sent with a GET: not used */
        c->body = NULL;
        if (sconn_compose(c, 200, "OK", r->type, r->bytes, r->len) != 0) {
            sconn_dead(c);
            return;
        }
        sconn_send(c);
        return;
    }
    if (c->body_len > 0 &&
        nng_http_req_set_data(c->req, c->body, c->body_len) != 0) {
        sconn_dead(c);
        return;
    }
    /* as nng's server calls a handler (http_server.c) */
    c->state = SC_CALL;
    nng_aio_set_input(c->call, 0, c->req);
    nng_aio_set_input(c->call, 1, r->data);
    nng_aio_set_output(c->call, 0, NULL);
    if (!nng_aio_begin(c->call)) {
        sconn_dead(c);
        return;
    }
    r->cb(c->call);
}

/* The route of method and target; NULL with *status 404 or 405. */
static const http_route *
http_route_find(const http_srv *s, const char *method, const char *target,
                bool *head, uint16_t *status)
{
    size_t plen = strcspn(target, "?#");

    *status = 404;
    *head = strcmp(method, "HEAD") == 0;
    for (size_t i = 0; i < s->nroutes; i++) {
        const http_route *r = &s->routes[i];
        size_t n = strlen(r->path);
        bool match = (plen == n || (r->tree && plen > n && target[n] == '/')) &&
                     strncmp(target, r->path, n) == 0;

        if (!match) {
            continue;
        }
        if (strcmp(method, r->method) == 0 ||
            (*head && strcmp(r->method, "GET") == 0)) {
            return r;
        }
        *status = 405;
    }
    return NULL;
}

/* Reads the request line of the head (NUL-terminated in place) into
 * c->req; the rest of the head after it in *rest. */
static bool
sconn_request_line(http_sconn *c, char *head, char **rest)
{
    char *eol = strstr(head, "\r\n");
    char *method = head, *target, *version;
    uint16_t status;

    *eol = '\0';
    *rest = eol + 2;
    if ((target = strchr(method, ' ')) == NULL) {
        return false;
    }
    *target++ = '\0';
    if ((version = strchr(target, ' ')) == NULL) {
        return false;
    }
    *version++ = '\0';
    if (strcmp(version, "HTTP/1.1") != 0 && strcmp(version, "HTTP/1.0") != 0) {
        return false;
    }
    c->close_after = strcmp(version, "HTTP/1.0") == 0;
    if (target[0] != '/' || nng_http_req_alloc(&c->req, NULL) != 0) {
        return false;
    }
    if (nng_http_req_set_method(c->req, method) != 0 ||
        nng_http_req_set_uri(c->req, target) != 0 ||
        nng_http_req_set_version(c->req, version) != 0) {
        return false;
    }
    c->route = http_route_find(c->srv, method, target, &c->head_only, &status);
    return true;
}

/* Reads the header lines (NUL-terminated, each ending \r\n) into c->req;
 * false when one is malformed. */
static bool
sconn_headers(http_sconn *c, char *p)
{
    while (*p != '\0') {
        char *eol = strstr(p, "\r\n"), *colon, *v, *end;

        *eol = '\0';
        if ((colon = strchr(p, ':')) == NULL || colon == p ||
            strcspn(p, " \t") < (size_t)(colon - p)) {
            return false; /* no name, or folded, or a space before ':' */
        }
        *colon = '\0';
        for (v = colon + 1; *v == ' ' || *v == '\t'; v++) {
        }
        for (end = eol; end > v && (end[-1] == ' ' || end[-1] == '\t'); end--) {
        }
        *end = '\0';
        if ((strcasecmp(p, "Content-Length") == 0 &&
             nng_http_req_get_header(c->req, p) != NULL) ||
            nng_http_req_add_header(c->req, p, v) != 0) {
            return false; /* two lengths: which one? */
        }
        p = eol + 2;
    }
    return true;
}

/* Whether the comma-separated list v holds tok (any case). */
static bool
http_has_token(const char *v, const char *tok)
{
    size_t n = strlen(tok);

    while (*v != '\0') {
        size_t len;

        v += strspn(v, " \t,");
        len = strcspn(v, ",");
        while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t')) {
            len--;
        }
        if (len == n && strncasecmp(v, tok, n) == 0) {
            return true;
        }
        v += strcspn(v, ",");
    }
    return false;
}

/* How c->req's body is framed: chunked (c->chunked), or *n bytes by its
 * Content-Length (0: none); false when it is refused. */
static bool
sconn_framing(http_sconn *c, unsigned long long *n)
{
    const char *te = nng_http_req_get_header(c->req, "Transfer-Encoding");
    const char *cl = nng_http_req_get_header(c->req, "Content-Length");
    char *end;

    *n = 0;
    if (te != NULL && cl != NULL) { /* RFC 9112 6.1: may be refused */
        sconn_refuse(c, 400, ONCE__V1__CODE__INVALID_ARGUMENT,
                     REASON_HTTP_MALFORMED,
                     "a Content-Length and a Transfer-Encoding: send one");
        return false;
    }
    if (te != NULL && strcasecmp(te, "chunked") != 0) {
        sconn_refuse(c, 411, ONCE__V1__CODE__INVALID_ARGUMENT,
                     REASON_HTTP_MALFORMED,
                     "onced reads bodies with a Content-Length or "
                     "Transfer-Encoding: chunked only");
        return false;
    }
    c->chunked = te != NULL;
    if (cl != NULL) {
        errno = 0;
        *n = strtoull(cl, &end, 10);
        if (cl[0] < '0' || cl[0] > '9' || *end != '\0' || errno != 0) {
            sconn_refuse(c, 400, ONCE__V1__CODE__INVALID_ARGUMENT,
                         REASON_HTTP_MALFORMED,
                         "the Content-Length is not a number");
            return false;
        }
    }
    return true;
}

/* The head (head_len bytes of buf, ending \r\n\r\n) read into c->req,
 * c->body_len (or c->chunked) and c->route, or the request refused. */
static bool
sconn_head(http_sconn *c, size_t head_len)
{
    char *rest;
    const char *conn;
    unsigned long long n = 0;
    uint16_t status = 404;

    c->buf[head_len - 2] = '\0'; /* after the last line's \r\n */
    if (!sconn_request_line(c, c->buf, &rest) || !sconn_headers(c, rest)) {
        sconn_refuse(c, 400, ONCE__V1__CODE__INVALID_ARGUMENT,
                     REASON_HTTP_MALFORMED,
                     "onced cannot read this HTTP request (docs/http.md)");
        return false;
    }
    conn = nng_http_req_get_header(c->req, "Connection");
    if (conn != NULL) {
        c->close_after =
            http_has_token(conn, "close") ||
            (c->close_after && !http_has_token(conn, "keep-alive"));
    }
    if (!sconn_framing(c, &n)) {
        return false;
    }
    if (n > c->srv->lim.body_max) {
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "the body is %llu bytes; onced reads at most %zu "
                 "(--recv-max)",
                 n, c->srv->lim.body_max);
        sconn_refuse(c, 413, ONCE__V1__CODE__INVALID_ARGUMENT,
                     REASON_REQUEST_TOO_LARGE, msg);
        return false;
    }
    if (c->route == NULL) {
        (void)http_route_find(c->srv, nng_http_req_get_method(c->req),
                              nng_http_req_get_uri(c->req), &c->head_only,
                              &status);
        sconn_refuse(c, status,
                     status == 404 ? ONCE__V1__CODE__NOT_FOUND
                                   : ONCE__V1__CODE__UNIMPLEMENTED,
                     REASON_HTTP_NO_ROUTE,
                     status == 404
                         ? "nothing is served at this path (POST /v1/..., "
                           "GET /metrics, GET /console)"
                         : "not with this method (POST /v1/..., GET "
                           "/metrics, GET /console)");
        return false;
    }
    c->body_len = (size_t)n;
    return true;
}

/* Whether the request asks for 100 Continue before its body, and it is
 * being sent (sconn_sent reads the body after it). */
static bool
sconn_continue(http_sconn *c)
{
    const char *expect = nng_http_req_get_header(c->req, "Expect");

    if (expect == NULL || strcasecmp(expect, "100-continue") != 0 ||
        (c->out = strdup(HTTP_CONTINUE)) == NULL) {
        return false;
    }
    c->out_len = strlen(HTTP_CONTINUE); /* curl waits for it */
    c->out_sent = 0;
    c->interim = true;
    sconn_send(c);
    return true;
}

/* In SC_CHUNKED: the c->len bytes of buf decoded into the body, then the
 * call, or more read, or the request refused. */
static void
sconn_chunks(http_sconn *c)
{
    const char *why = "";
    size_t used = 0;
    char msg[160];
    http_chunked_result r =
        http_chunked_feed(&c->ck, c->buf, c->len, &used, &c->body, &c->body_len,
                          &c->body_cap, c->srv->lim.body_max, &why);

    c->len -= used; /* after the last chunk: a pipelined request's */
    memmove(c->buf, c->buf + used, c->len);
    switch (r) {
    case HTTP_CHUNKED_MORE:
        sconn_recv(c);
        return;
    case HTTP_CHUNKED_DONE:
        sconn_dispatch(c);
        return;
    case HTTP_CHUNKED_BAD:
        sconn_refuse(c, 400, ONCE__V1__CODE__INVALID_ARGUMENT,
                     REASON_HTTP_BAD_CHUNK, why);
        return;
    case HTTP_CHUNKED_TOO_LARGE:
        snprintf(msg, sizeof(msg),
                 "the chunked body is over %zu bytes, as much as onced "
                 "reads (--recv-max)",
                 c->srv->lim.body_max);
        sconn_refuse(c, 413, ONCE__V1__CODE__INVALID_ARGUMENT,
                     REASON_REQUEST_TOO_LARGE, msg);
        return;
    default: /* out of memory */
        sconn_dead(c);
    }
}

/* In SC_HEAD with c->len bytes: a whole head read and its body begun, or
 * more read, or the request refused. */
static void
sconn_parse(http_sconn *c)
{
    char *end = NULL;
    size_t head_len, take;

    /* from where the last search stopped: a head trickled a byte at a
     * time costs its length once, not its square */
    for (size_t i = c->scanned > 3 ? c->scanned : 3; i < c->len && !end; i++) {
        if (memcmp(c->buf + i - 3, "\r\n\r\n", 4) == 0) {
            end = c->buf + i + 1;
        }
    }
    c->scanned = c->len;
    if (end == NULL) {
        if (c->len == sizeof(c->buf)) {
            sconn_refuse(c, 431, ONCE__V1__CODE__INVALID_ARGUMENT,
                         REASON_HTTP_HEADERS_TOO_LARGE,
                         "the request line and headers are over 16 KiB");
            return;
        }
        sconn_recv(c);
        return;
    }
    head_len = (size_t)(end - c->buf);
    c->body_len = c->body_got = 0;
    c->chunked = false;
    if (!sconn_head(c, head_len)) {
        return; /* refused */
    }
    atomic_store(&c->head_since, 0);
    c->len -= head_len;
    memmove(c->buf, c->buf + head_len, c->len);
    c->scanned = 0;
    c->deadline = nng_clock() + HTTP_BODY_MS;
    if (c->chunked) {
        http_chunked_init(&c->ck);
        c->body_cap = 0;
        c->state = SC_CHUNKED;
        if (c->len > 0 || !sconn_continue(c)) {
            sconn_chunks(c);
        }
        return;
    }
    if (c->body_len > 0 && (c->body = malloc(c->body_len)) == NULL) {
        sconn_dead(c);
        return;
    }
    take = c->len < c->body_len ? c->len : c->body_len;
    if (take > 0) { /* no body: c->body is NULL, and memcpy's never is */
        memcpy(c->body, c->buf, take);
    }
    c->body_got = take;
    c->len -= take;
    memmove(c->buf, c->buf + take, c->len);
    if (c->body_got == c->body_len) {
        sconn_dispatch(c);
        return;
    }
    c->state = SC_BODY;
    if (c->body_got > 0 || !sconn_continue(c)) {
        sconn_recv(c);
    }
}

/* Reads more of the head or the body, within its deadline (an idle
 * connection: HTTP_IDLE_MS). */
static void
sconn_recv(http_sconn *c)
{
    nng_time now = nng_clock();
    nng_iov iov;

    if (c->state != SC_BODY) { /* SC_HEAD, SC_CHUNKED, SC_DRAIN */
        iov.iov_buf = c->buf + c->len;
        iov.iov_len = sizeof(c->buf) - c->len;
    } else {
        iov.iov_buf = c->body + c->body_got;
        iov.iov_len = c->body_len - c->body_got;
    }
    nng_aio_set_iov(c->io, 1, &iov);
    if (c->state == SC_HEAD && c->len == 0) {
        nng_aio_set_timeout(c->io, HTTP_IDLE_MS);
    } else {
        nng_aio_set_timeout(
            c->io, c->deadline > now ? (nng_duration)(c->deadline - now) : 1);
    }
    sconn_io_start(c, nng_stream_recv);
}

/* The io aio's callback: bytes received or sent. */
static void
sconn_io(void *arg)
{
    http_sconn *c = arg;
    int rv = nng_aio_result(c->io);
    size_t n = nng_aio_count(c->io);

    if (rv == NNG_ETIMEDOUT && c->state != SC_SEND && c->state != SC_DRAIN &&
        !(c->state == SC_HEAD && c->len == 0)) {
        sconn_refuse(c, 408, ONCE__V1__CODE__DEADLINE_EXCEEDED,
                     REASON_HTTP_SLOW_CLIENT,
                     c->state == SC_HEAD
                         ? "the request line and headers did not arrive in "
                           "time (--http-header-timeout)"
                         : "the body did not arrive within 30s");
        return;
    }
    if (rv != 0) { /* idle, closed, or a response not taken */
        sconn_dead(c);
        return;
    }
    switch (c->state) {
    case SC_SEND:
        c->out_sent += n;
        if (c->out_sent < c->out_len) {
            sconn_send(c);
        } else {
            sconn_sent(c);
        }
        return;
    case SC_HEAD:
        if (c->len == 0) { /* the first byte: the head's clock starts */
            c->deadline = nng_clock() + c->srv->lim.head_ms;
        }
        c->len += n;
        sconn_parse(c);
        return;
    case SC_CHUNKED:
        c->len += n;
        sconn_chunks(c);
        return;
    case SC_BODY:
        c->body_got += n;
        if (c->body_got == c->body_len) {
            sconn_dispatch(c);
        } else {
            sconn_recv(c);
        }
        return;
    case SC_DRAIN: /* dropped, until the peer closes or time is up */
        c->drained += n;
        if (c->drained < HTTP_DRAIN_MAX && nng_clock() < c->deadline) {
            sconn_recv(c);
        } else {
            sconn_dead(c);
        }
        return;
    case SC_CALL:
        return; /* not reached: io is idle during a call */
    }
}

/* ---- accepting ---------------------------------------------------------
 */

/* A connection for st from peer, on the live list (refused: to be
 * answered 503 or 429). */
static http_sconn *
sconn_new(http_srv *s, nng_stream *st, const nng_sockaddr *peer, bool refused)
{
    http_sconn *c = calloc(1, sizeof(*c));

    if (c == NULL || nng_aio_alloc(&c->io, sconn_io, c) != 0 ||
        nng_aio_alloc(&c->call, sconn_called, c) != 0) {
        if (c != NULL) {
            nng_aio_free(c->io);
        }
        free(c);
        return NULL;
    }
    c->srv = s;
    c->st = st;
    c->peer = *peer;
    c->refused = refused;
    c->at_cap = refused;
    atomic_store(&c->head_since, refused ? 0 : nng_clock() | 1);
    c->next = s->live;
    if (s->live != NULL) {
        s->live->prev = c;
    }
    s->live = c;
    if (refused) {
        s->nrefusing++;
    } else {
        s->nconns++;
    }
    if (s->lim.stats != NULL) {
        atomic_fetch_add(&s->lim.stats->open, 1);
    }
    return c;
}

/* Whether a and b are one IP address (the ports aside). */
static bool
http_same_peer(const nng_sockaddr *a, const nng_sockaddr *b)
{
    if (a->s_family != b->s_family) {
        return false;
    }
    switch (a->s_family) {
    case NNG_AF_INET:
        return a->s_in.sa_addr == b->s_in.sa_addr;
    case NNG_AF_INET6:
        return memcmp(a->s_in6.sa_addr, b->s_in6.sa_addr,
                      sizeof(a->s_in6.sa_addr)) == 0;
    default:
        return false; /* unknown: never capped */
    }
}

/* Whether peer holds lim.per_peer connections (not refused) already
 * (s->mtx held). A walk of the live list, as the eviction's: at most
 * conn_max + HTTP_SRV_REFUSING entries, on an accept only. */
static bool
http_srv_peer_full(const http_srv *s, const nng_sockaddr *peer)
{
    size_t n = 0;

    if (s->lim.per_peer == 0 || peer->s_family == 0) {
        return false;
    }
    for (const http_sconn *c = s->live; c != NULL; c = c->next) {
        if (!c->refused && http_same_peer(&c->peer, peer) &&
            ++n >= s->lim.per_peer) {
            return true;
        }
    }
    return false;
}

/* At the cap (s->mtx held): closes the connection that has waited
 * longest for a request head, if HTTP_EVICT_AGE_MS or more, moving it to
 * the refusing slots until it is gone. Whether one was. */
static bool
http_srv_evict(http_srv *s)
{
    uint64_t now = nng_clock(), oldest = 0;
    http_sconn *victim = NULL;

    for (http_sconn *c = s->live; c != NULL; c = c->next) {
        uint64_t since = atomic_load(&c->head_since);

        if (!c->refused && since != 0 && now >= since + HTTP_EVICT_AGE_MS &&
            (victim == NULL || since < oldest)) {
            victim = c;
            oldest = since;
        }
    }
    if (victim == NULL) {
        return false;
    }
    victim->refused = true;
    if (s->lim.stats != NULL) {
        atomic_fetch_add(&s->lim.stats->evicted, 1);
    }
    s->nconns--;
    s->nrefusing++;
    victim->closed = true;
    nng_stream_close(victim->st); /* its pending read fails: sconn_dead */
    return true;
}

/* Answers c, whose address holds --http-conn-max-per-peer already, 429. */
static void
http_srv_refuse_peer(http_sconn *c)
{
    char msg[200];

    snprintf(msg, sizeof(msg),
             "this address holds %zu HTTP connections to onced, as many as "
             "one peer may (--http-conn-max-per-peer): reuse one, or close "
             "one first",
             c->srv->lim.per_peer);
    sconn_refuse(c, 429, ONCE__V1__CODE__RESOURCE_EXHAUSTED,
                 REASON_HTTP_PEER_CONNECTIONS, msg);
}

static void
http_srv_accepted(void *arg)
{
    http_srv *s = arg;
    int rv = nng_aio_result(s->acc);
    nng_stream *st;
    nng_sockaddr peer;
    http_sconn *c = NULL;
    bool full, peer_full, rearm;

    if (s->acc_pausing) { /* the pause after a failed accept is over */
        s->acc_pausing = false;
        if (rv == 0) {
            nng_stream_listener_accept(s->l, s->acc);
        }
        return;
    }
    if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
        return;
    }
    if (rv != 0) { /* out of files, say: try again in a moment */
        s->acc_pausing = true;
        nng_sleep_aio(HTTP_ACCEPT_PAUSE_MS, s->acc);
        return;
    }
    st = nng_aio_get_output(s->acc, 0);
    if (nng_stream_get_addr(st, NNG_OPT_REMADDR, &peer) != 0) {
        peer.s_family = 0; /* unknown: not capped by address */
    }
    pthread_mutex_lock(&s->mtx);
    /* A peer at its own cap is refused; it displaces nobody. */
    peer_full = http_srv_peer_full(s, &peer);
    full = peer_full || s->nconns >= s->lim.conn_max;
    if (full && !peer_full && s->nrefusing < HTTP_SRV_REFUSING &&
        http_srv_evict(s)) {
        full = false;
    }
    if (!s->closing && (!full || s->nrefusing < HTTP_SRV_REFUSING)) {
        c = sconn_new(s, st, &peer, full);
    }
    /* With every refusing slot taken, the next peers wait in the
     * kernel's backlog until one is free (sconn_dead accepts again). */
    rearm = !s->closing && s->nrefusing < HTTP_SRV_REFUSING;
    s->acc_waiting = !s->closing && !rearm;
    pthread_mutex_unlock(&s->mtx);
    if (rearm) {
        nng_stream_listener_accept(s->l, s->acc);
    }
    if (c == NULL) {
        nng_stream_free(st); /* closing, or out of memory */
    } else if (peer_full) {
        http_srv_refuse_peer(c);
    } else if (full) {
        sconn_refuse(c, 503, ONCE__V1__CODE__UNAVAILABLE,
                     REASON_HTTP_BUSY_CONNECTIONS,
                     "onced holds as many HTTP connections as it takes "
                     "(--http-conn-max) and none has waited 1s for a "
                     "request; retry in a moment");
    } else {
        c->state = SC_HEAD;
        sconn_recv(c);
    }
}

/* The reaper thread: frees the connections sconn_dead handed over. */
static void *
http_srv_reap(void *arg)
{
    http_srv *s = arg;

    pthread_mutex_lock(&s->mtx);
    for (;;) {
        http_sconn *c = s->dead;

        if (c == NULL) {
            if (s->reaper_stop) {
                break;
            }
            pthread_cond_wait(&s->cv, &s->mtx);
            continue;
        }
        s->dead = c->next;
        pthread_mutex_unlock(&s->mtx);
        nng_aio_free(c->io); /* waits for its callback to return */
        nng_aio_free(c->call);
        nng_stream_free(c->st);
        if (c->req != NULL) {
            nng_http_req_free(c->req);
        }
        free(c->body);
        free(c->out);
        free(c);
        pthread_mutex_lock(&s->mtx);
    }
    pthread_mutex_unlock(&s->mtx);
    return NULL;
}

/* ---- open and close ------------------------------------------------------
 */

/* tcp://HOST:PORT (tls+tcp:// for https) for an http(s):// URL. */
static int
http_srv_stream_url(const char *url, char *out, size_t cap)
{
    nng_url *u;
    bool tls;
    int rv;

    if ((rv = nng_url_parse(&u, url)) != 0) {
        return rv;
    }
    tls = strcmp(u->u_scheme, "https") == 0;
    snprintf(out, cap, "%s://%s%s%s:%s", tls ? "tls+tcp" : "tcp",
             strchr(u->u_hostname, ':') != NULL ? "[" : "", u->u_hostname,
             strchr(u->u_hostname, ':') != NULL ? "]" : "",
             u->u_port != NULL && u->u_port[0] != '\0' ? u->u_port
                                                       : (tls ? "443" : "80"));
    nng_url_free(u);
    return 0;
}

int
http_srv_open(http_srv **sp, const char *url, nng_tls_config *tls,
              const http_srv_limits *lim)
{
    http_srv *s;
    char surl[512];
    int rv;

    if ((s = calloc(1, sizeof(*s))) == NULL) {
        return NNG_ENOMEM;
    }
    s->lim = *lim;
    s->lim.conn_max = lim->conn_max > 0 ? lim->conn_max : 1;
    pthread_mutex_init(&s->mtx, NULL);
    pthread_cond_init(&s->cv, NULL);
    if ((rv = http_srv_stream_url(url, surl, sizeof(surl))) != 0 ||
        (rv = nng_stream_listener_alloc(&s->l, surl)) != 0 ||
        (tls != NULL && (rv = nng_stream_listener_set_ptr(
                             s->l, NNG_OPT_TLS_CONFIG, tls)) != 0) ||
        (rv = nng_aio_alloc(&s->acc, http_srv_accepted, s)) != 0) {
        http_srv_free(s);
        return rv;
    }
    *sp = s;
    return 0;
}

static int
http_srv_route(http_srv *s, const http_route *r)
{
    http_route *n;

    if (s->nroutes == HTTP_ROUTES_MAX) {
        return NNG_ENOMEM;
    }
    n = &s->routes[s->nroutes];
    *n = *r;
    if ((n->path = strdup(r->path)) == NULL) {
        return NNG_ENOMEM;
    }
    s->nroutes++;
    return 0;
}

int
http_srv_handle(http_srv *s, const char *method, const char *path, bool tree,
                void (*cb)(nng_aio *), void *data)
{
    http_route r = {method, (char *)path, tree, cb, data, NULL, NULL, 0};

    return http_srv_route(s, &r);
}

int
http_srv_static(http_srv *s, const char *path, const char *type,
                const void *data, size_t len)
{
    http_route r = {"GET", (char *)path, false, NULL, NULL, type, data, len};

    return http_srv_route(s, &r);
}

int
http_srv_start(http_srv *s)
{
    int rv;

    if (pthread_create(&s->reaper, NULL, http_srv_reap, s) != 0) {
        return NNG_ENOMEM;
    }
    s->reaper_started = true;
    if ((rv = nng_stream_listener_listen(s->l)) != 0) {
        return rv;
    }
    nng_stream_listener_accept(s->l, s->acc);
    return 0;
}

int
http_srv_addr(http_srv *s, nng_sockaddr *sa)
{
    return nng_stream_listener_get_addr(s->l, NNG_OPT_LOCADDR, sa);
}

void
http_srv_stop(http_srv *s)
{
    if (s == NULL) {
        return;
    }
    pthread_mutex_lock(&s->mtx);
    s->closing = true; /* no accept is started again */
    pthread_mutex_unlock(&s->mtx);
    if (s->l != NULL) {
        nng_stream_listener_close(s->l);
    }
    if (s->acc != NULL) {
        nng_aio_stop(s->acc); /* no accept callback runs after this */
    }
    pthread_mutex_lock(&s->mtx);
    s->closing = true;
    for (http_sconn *c = s->live; c != NULL; c = c->next) {
        c->closed = true;
        nng_stream_close(c->st); /* its pending io fails: sconn_dead */
    }
    while (s->live != NULL) { /* calls in flight: their handlers answer */
        pthread_cond_wait(&s->cv, &s->mtx);
    }
    s->reaper_stop = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mtx);
    if (s->reaper_started) {
        pthread_join(s->reaper, NULL);
        s->reaper_started = false;
    }
}

void
http_srv_free(http_srv *s)
{
    if (s == NULL) {
        return;
    }
    http_srv_stop(s);
    nng_aio_free(s->acc);
    if (s->l != NULL) {
        nng_stream_listener_free(s->l);
    }
    for (size_t i = 0; i < s->nroutes; i++) {
        free(s->routes[i].path);
    }
    pthread_mutex_destroy(&s->mtx);
    pthread_cond_destroy(&s->cv);
    free(s);
}
