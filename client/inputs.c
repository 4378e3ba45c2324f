/*
 * inputs.c — libonce's input store (once/inputs.h): a start request's (or
 * a queued work item's) input kept on the client, one file per input, until
 * the server has durably accepted the grant (or the queue row)
 * (docs/grants.md).
 *
 * Owns: the store directory's files — "<hash>-<attempt>.input", a packed
 * once.client.KeptInput (inputs.proto) each, where hash is the hex
 * BLAKE2b-128 of the request id — and the rule that decides, from a
 * RequestGrant or Enqueue answer, whether the file is removed (accepted), stays
 * PENDING, or is marked REJECTED or LEASE_ENDED.
 * Invariant: a file is written (temp file, fsync, rename, fsync of the
 * directory) before the request it holds is sent, and it always names the
 * rpc id that request was sent with; it is removed only after an OK answer
 * has been received. So a crash at any point leaves either no send or a
 * file to re-send with the same id.
 * Never: re-sends an input under an rpc id other than the recorded one
 * unless the caller asks for it (once_grant_input_resend, new_id); holds
 * the store's mutex across a network call.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "client/answer.h"
#include "client/client_impl.h"
#include "client/lease_gate.h"
#include "base/clock.h"
#include "proto/grants.pb-c.h"
#include "client/inputs.pb-c.h"
#include "client/status.h"
#include "base/trust.h"
#include <once/inputs.h>

#define REQUEST_GRANT "/once.v1.Grants/RequestGrant"
#define ENQUEUE       "/once.v1.Grants/Enqueue"
#define INPUT_SUFFIX  ".input"
#define NAME_MAX_LEN  80

struct once_inputs {
    char *dir;            /* owned; read-only after open */
    int dirfd;            /* O_DIRECTORY descriptor, for fsync; read-only */
    pthread_mutex_t lock; /* serializes reads and writes of the files */
};

typedef Once__Client__KeptInput kept;

const char *
once_input_state_name(int state)
{
    switch (state) {
    case ONCE_INPUT_PENDING:
        return "PENDING";
    case ONCE_INPUT_REJECTED:
        return "REJECTED";
    case ONCE_INPUT_LEASE_ENDED:
        return "LEASE_ENDED";
    default:
        return "?";
    }
}

/* The file name of (request_id, attempt) into name[NAME_MAX_LEN]. */
static void
input_name(const char *request_id, uint32_t attempt, char *name)
{
    uint8_t h[16];
    char hex[33];

    crypto_generichash(h, sizeof(h), (const uint8_t *)request_id,
                       strlen(request_id), NULL, 0);
    sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
    snprintf(name, NAME_MAX_LEN, "%s-%" PRIu32 INPUT_SUFFIX, hex, attempt);
}

/* ---- files -------------------------------------------------------------- */

/* Reads and unpacks name. 0, ENOENT, or another errno (EBADMSG: not a
 * KeptInput). *out is freed with once__client__kept_input__free_unpacked. */
static int
file_read(once_inputs *s, const char *name, kept **out)
{
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    int fd, rv = 0;

    *out = NULL;
    if ((fd = openat(s->dirfd, name, O_RDONLY | O_CLOEXEC)) < 0) {
        return errno;
    }
    for (;;) {
        ssize_t n;
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap = cap != 0 ? cap * 2 : 4096);
            if (nb == NULL) {
                rv = ENOMEM;
                break;
            }
            buf = nb;
        }
        if ((n = read(fd, buf + len, cap - len)) < 0) {
            if (errno == EINTR) {
                continue;
            }
            rv = errno;
            break;
        }
        if (n == 0) {
            break;
        }
        len += (size_t)n;
    }
    close(fd);
    if (rv == 0 &&
        (*out = once__client__kept_input__unpack(NULL, len, buf)) == NULL) {
        rv = EBADMSG;
    }
    free(buf);
    return rv;
}

static int
write_all(int fd, const uint8_t *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Writes k as name durably: temp file, fsync, rename over name, fsync of
 * the directory. 0 or an errno. */
static int
file_write(once_inputs *s, const char *name, const kept *k)
{
    char tmp[NAME_MAX_LEN + 8];
    size_t len = once__client__kept_input__get_packed_size(k);
    uint8_t *buf = malloc(len + 1);
    int fd, rv = 0;

    if (buf == NULL) {
        return ENOMEM;
    }
    once__client__kept_input__pack(k, buf);
    snprintf(tmp, sizeof(tmp), ".tmp-%s", name);
    fd = trust_create(s->dirfd, tmp); /* O_EXCL|O_NOFOLLOW */
    if (fd < 0) {
        rv = errno;
    } else {
        if ((rv = write_all(fd, buf, len)) == 0 && fsync(fd) != 0) {
            rv = errno;
        }
        if (close(fd) != 0 && rv == 0) {
            rv = errno;
        }
        if (rv == 0 && renameat(s->dirfd, tmp, s->dirfd, name) != 0) {
            rv = errno;
        }
        if (rv != 0) {
            (void)unlinkat(s->dirfd, tmp, 0);
        } else if (fsync(s->dirfd) != 0) {
            rv = errno;
        }
    }
    free(buf);
    return rv;
}

/* Removes name durably (unlink, fsync of the directory). 0 or an errno;
 * a file already gone is 0. */
static int
file_remove(once_inputs *s, const char *name)
{
    if (unlinkat(s->dirfd, name, 0) != 0 && errno != ENOENT) {
        return errno;
    }
    return fsync(s->dirfd) != 0 ? errno : 0;
}

/* ---- open / close ------------------------------------------------------- */

int
once_inputs_open(once_inputs **sp, const char *dir, once_status *st)
{
    once_inputs *s;

    status_clear(st);
    if (sp == NULL || dir == NULL || dir[0] == '\0') {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "once_inputs_open needs a directory");
    }
    *sp = NULL;
    if (sodium_init() < 0) {
        return status_set(st, ONCE_INTERNAL, ONCE_REASON_SODIUM,
                          "libsodium init");
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        return status_set(st, ONCE_FAILED_PRECONDITION, ONCE_REASON_INPUT_STORE,
                          "cannot create %s: %s", dir, strerror(errno));
    }
    if ((s = calloc(1, sizeof(*s))) == NULL || (s->dir = strdup(dir)) == NULL) {
        free(s);
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "input store");
    }
    s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->dirfd < 0) {
        int e = errno;
        free(s->dir);
        free(s);
        return status_set(st, ONCE_FAILED_PRECONDITION, ONCE_REASON_INPUT_STORE,
                          "cannot open %s: %s", dir, strerror(e));
    }
    pthread_mutex_init(&s->lock, NULL);
    *sp = s;
    return ONCE_OK;
}

void
once_inputs_close(once_inputs *s)
{
    if (s == NULL) {
        return;
    }
    close(s->dirfd);
    pthread_mutex_destroy(&s->lock);
    free(s->dir);
    free(s);
}

/* ---- answers ------------------------------------------------------------ */

/* What an answer (not OK) makes of a kept input (answer.h's rule). */
static int
classify(int rv, const once_status *st)
{
    switch (answer_classify(rv, st)) {
    case ANSWER_LEASE_ENDED:
        return ONCE_INPUT_LEASE_ENDED;
    case ANSWER_UNDECIDED:
        return ONCE_INPUT_PENDING;
    default:
        return ONCE_INPUT_REJECTED;
    }
}

/* Files the answer rv/st for the input k kept as name: removes the file on
 * OK, records state and answer otherwise. A failure to do so is reported
 * in st's message but never changes rv (the server's answer stands). */
static void
file_answer(once_inputs *s, const char *name, const kept *k, int rv,
            once_status *st)
{
    kept w = *k; /* shallow: its strings stay k's or st's, never freed */
    int e;

    pthread_mutex_lock(&s->lock);
    if (rv == ONCE_OK) {
        e = file_remove(s, name);
    } else {
        w.state = (uint32_t)classify(rv, st);
        w.code = rv;
        w.reason = st->reason;
        w.message = st->message;
        w.updated_unix_ms = clock_wall_ms();
        e = file_write(s, name, &w);
    }
    pthread_mutex_unlock(&s->lock);
    if (e != 0 && rv != ONCE_OK) {
        size_t n = strlen(st->message);
        snprintf(st->message + n, sizeof(st->message) - n,
                 " (input store %s: %s)", name, strerror(e));
    }
}

/* The method k is sent to ("" in files from before: RequestGrant). */
static const char *
kept_method(const kept *k)
{
    return k->method != NULL && strcmp(k->method, ENQUEUE) == 0 ? ENQUEUE
                                                                : REQUEST_GRANT;
}

/* Sends k's request under k's rpc id and files the answer. */
static int
send_kept(once_client *c, once_inputs *s, const char *name, const kept *k,
          once_rpc_id *id, void **resp, size_t *resp_len, once_status *st)
{
    once_rpc_id rid = {k->client_id, k->seq};
    int rv;

    if (id != NULL) {
        *id = rid;
    }
    rv = once_call(c, kept_method(k), true, &rid, k->request.data,
                   k->request.len, resp, resp_len, st);
    file_answer(s, name, k, rv, st);
    return rv;
}

static int
store_error(once_status *st, const char *what, const char *name, int e)
{
    return status_set(st, ONCE_INTERNAL, ONCE_REASON_INPUT_STORE, "%s %s: %s",
                      what, name, strerror(e));
}

/* ---- submit / resend ---------------------------------------------------- */

static void
clear_out(void **resp, size_t *resp_len)
{
    if (resp != NULL) {
        *resp = NULL;
    }
    if (resp_len != NULL) {
        *resp_len = 0;
    }
}

/*
 * Keeps request m (for method, naming request_id and attempt), packed,
 * under a fresh rpc id of c, then sends it; what once_grant_submit and
 * once_work_submit share.
 */
static int
input_submit(once_client *c, once_inputs *s, const char *method,
             const char *request_id, uint32_t attempt,
             const ProtobufCMessage *m, once_rpc_id *id, void **resp,
             size_t *resp_len, once_status *st)
{
    kept k = ONCE__CLIENT__KEPT_INPUT__INIT, *old = NULL;
    size_t len = protobuf_c_message_get_packed_size(m);
    char name[NAME_MAX_LEN];
    uint8_t *buf;
    uint64_t seq;
    int e, rv;

    if ((buf = malloc(len + 1)) == NULL) {
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "input");
    }
    protobuf_c_message_pack(m, buf);
    input_name(request_id, attempt, name);
    pthread_mutex_lock(&s->lock);
    e = file_read(s, name, &old);
    if (e == 0) {
        bool same = old->state == ONCE_INPUT_PENDING &&
                    strcmp(kept_method(old), method) == 0 &&
                    old->request.len == len &&
                    memcmp(old->request.data, buf, len) == 0;
        once__client__kept_input__free_unpacked(old, NULL);
        pthread_mutex_unlock(&s->lock);
        free(buf);
        if (same) {
            return once_grant_input_resend(c, s, request_id, attempt, false, id,
                                           resp, resp_len, st);
        }
        return status_set(st, ONCE_ALREADY_EXISTS, ONCE_REASON_INPUT_KEPT,
                          "request %s attempt %" PRIu32
                          " is already kept (%s) with other content; "
                          "resend or forget it first",
                          request_id, attempt, name);
    }
    if (e != ENOENT) {
        pthread_mutex_unlock(&s->lock);
        free(buf);
        return store_error(st, "cannot read", name, e);
    }
    if (gate_seq_assign(&c->gate, &seq) != 0) {
        pthread_mutex_unlock(&s->lock);
        free(buf);
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_MEMORY,
                          "cannot assign a seq");
    }
    k.version = 1;
    k.request.data = buf;
    k.request.len = len;
    k.client_id = c->gate.client_id;
    k.seq = seq;
    k.principal = c->principal;
    k.state = ONCE_INPUT_PENDING;
    k.kept_unix_ms = k.updated_unix_ms = clock_wall_ms();
    k.sends = 1;
    k.method = (char *)method;
    e = file_write(s, name, &k);
    pthread_mutex_unlock(&s->lock);
    if (e != 0) {
        /* Not kept, so not sent: the seq will never be used. */
        gate_seq_complete(&c->gate, c->gate.client_id, seq);
        free(buf);
        return store_error(st, "cannot keep", name, e);
    }
    rv = send_kept(c, s, name, &k, id, resp, resp_len, st);
    free(buf);
    return rv;
}

/* The checks once_grant_submit and once_work_submit share; ONCE_OK when
 * the input may be kept. */
static int
submit_check(once_client *c, once_inputs *s, const char *fn,
             const char *request_id, const void *payload, size_t payload_len,
             once_status *st)
{
    if (c == NULL || s == NULL || request_id == NULL || request_id[0] == '\0' ||
        (payload == NULL && payload_len > 0)) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "%s needs a handle, a store and an input with a "
                          "request id",
                          fn);
    }
    if (c->gate.client_id == 0) {
        return status_set(st, ONCE_FAILED_PRECONDITION, ONCE_REASON_NO_LEASE,
                          "keeping an input needs a handle with a lease");
    }
    if (gate_is_lost(&c->gate)) {
        return status_set(st, ONCE_FAILED_PRECONDITION,
                          ONCE_REASON_LEASE_EXPIRED,
                          "the handle's lease is lost; nothing was kept");
    }
    return ONCE_OK;
}

int
once_grant_submit(once_client *c, once_inputs *s, const once_grant_input *in,
                  once_rpc_id *id, void **resp, size_t *resp_len,
                  once_status *st)
{
    Once__V1__RequestGrantRequest r = ONCE__V1__REQUEST_GRANT_REQUEST__INIT;
    int rv;

    status_clear(st);
    clear_out(resp, resp_len);
    if ((rv = submit_check(c, s, "once_grant_submit",
                           in != NULL ? in->request_id : NULL,
                           in != NULL ? in->payload : NULL,
                           in != NULL ? in->payload_len : 0, st)) != ONCE_OK) {
        return rv;
    }
    r.request_id = (char *)in->request_id;
    r.attempt = in->attempt != 0 ? in->attempt : 1;
    r.surface = (char *)(in->surface != NULL ? in->surface : "");
    r.machine = (char *)(in->machine != NULL ? in->machine : "");
    r.location = (char *)(in->location != NULL ? in->location : "");
    r.generation = in->generation;
    r.payload.data = (uint8_t *)in->payload;
    r.payload.len = in->payload_len;
    r.credential_ttl_ms = in->credential_ttl_ms;
    return input_submit(c, s, REQUEST_GRANT, r.request_id, r.attempt, &r.base,
                        id, resp, resp_len, st);
}

int
once_work_submit(once_client *c, once_inputs *s, const once_work_input *in,
                 once_rpc_id *id, void **resp, size_t *resp_len,
                 once_status *st)
{
    Once__V1__EnqueueRequest r = ONCE__V1__ENQUEUE_REQUEST__INIT;
    int rv;

    status_clear(st);
    clear_out(resp, resp_len);
    if ((rv = submit_check(c, s, "once_work_submit",
                           in != NULL ? in->request_id : NULL,
                           in != NULL ? in->payload : NULL,
                           in != NULL ? in->payload_len : 0, st)) != ONCE_OK) {
        return rv;
    }
    r.request_id = (char *)in->request_id;
    r.attempt = in->attempt != 0 ? in->attempt : 1;
    r.surface = (char *)(in->surface != NULL ? in->surface : "");
    r.payload.data = (uint8_t *)in->payload;
    r.payload.len = in->payload_len;
    return input_submit(c, s, ENQUEUE, r.request_id, r.attempt, &r.base, id,
                        resp, resp_len, st);
}

int
once_grant_input_resend(once_client *c, once_inputs *s, const char *request_id,
                        uint32_t attempt, bool new_id, once_rpc_id *id,
                        void **resp, size_t *resp_len, once_status *st)
{
    char name[NAME_MAX_LEN];
    kept *k = NULL, w;
    uint64_t seq;
    int e, rv;

    status_clear(st);
    clear_out(resp, resp_len);
    if (c == NULL || s == NULL || request_id == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "once_grant_input_resend needs a handle, a store "
                          "and a request id");
    }
    if (attempt == 0) {
        attempt = 1;
    }
    input_name(request_id, attempt, name);
    pthread_mutex_lock(&s->lock);
    if ((e = file_read(s, name, &k)) != 0) {
        pthread_mutex_unlock(&s->lock);
        if (e == ENOENT) {
            return status_set(st, ONCE_NOT_FOUND, ONCE_REASON_NO_INPUT,
                              "request %s attempt %" PRIu32 " is not kept",
                              request_id, attempt);
        }
        return store_error(st, "cannot read", name, e);
    }
    w = *k; /* shallow: the copy borrows k's strings (or c's) */
    if (new_id) {
        if (c->gate.client_id == 0 || gate_is_lost(&c->gate) ||
            gate_seq_assign(&c->gate, &seq) != 0) {
            pthread_mutex_unlock(&s->lock);
            once__client__kept_input__free_unpacked(k, NULL);
            return status_set(st, ONCE_FAILED_PRECONDITION,
                              ONCE_REASON_NO_LEASE,
                              "a resend under a new id needs a handle with "
                              "a live lease");
        }
        w.principal = c->principal;
        w.client_id = c->gate.client_id;
        w.seq = seq;
        w.state = ONCE_INPUT_PENDING;
    } else if (strcmp(k->principal != NULL ? k->principal : "", c->principal) !=
               0) {
        rv = status_set(st, ONCE_PERMISSION_DENIED, ONCE_REASON_OTHER_PRINCIPAL,
                        "input %s was sent as principal %s, not %s", name,
                        k->principal, c->principal);
        goto out_locked;
    } else if (k->state != ONCE_INPUT_PENDING) {
        bool rej = k->state == ONCE_INPUT_REJECTED;
        rv = status_set(st, ONCE_FAILED_PRECONDITION,
                        rej ? ONCE_REASON_INPUT_REJECTED
                            : ONCE_REASON_INPUT_LEASE_ENDED,
                        "input %s is %s (%s); it is re-sent only under a "
                        "new id, on request",
                        name, once_input_state_name((int)k->state),
                        k->reason != NULL ? k->reason : "");
        goto out_locked;
    }
    pthread_mutex_unlock(&s->lock);

    if (!new_id && w.client_id != c->gate.client_id) {
        /* Keep the recorded id usable while it is re-sent; an ended lease
         * is filed, never replaced by a new id. */
        rv = once_lease_renew(c, w.client_id, NULL, NULL, st);
        if (rv != ONCE_OK) {
            if (rv == ONCE_FAILED_PRECONDITION || rv == ONCE_NOT_FOUND) {
                rv = ONCE_FAILED_PRECONDITION;
                snprintf(st->reason, sizeof(st->reason),
                         ONCE_REASON_LEASE_EXPIRED);
                st->code = rv;
                file_answer(s, name, &w, rv, st);
            }
            once__client__kept_input__free_unpacked(k, NULL);
            return rv;
        }
    }
    pthread_mutex_lock(&s->lock);
    w.sends++;
    w.updated_unix_ms = clock_wall_ms();
    e = file_write(s, name, &w);
    pthread_mutex_unlock(&s->lock);
    if (e != 0) {
        if (new_id) {
            gate_seq_complete(&c->gate, c->gate.client_id, w.seq);
        }
        once__client__kept_input__free_unpacked(k, NULL);
        return store_error(st, "cannot keep", name, e);
    }
    rv = send_kept(c, s, name, &w, id, resp, resp_len, st);
    once__client__kept_input__free_unpacked(k, NULL);
    return rv;

out_locked:
    pthread_mutex_unlock(&s->lock);
    once__client__kept_input__free_unpacked(k, NULL);
    return rv;
}

/* ---- listing ------------------------------------------------------------ */

static void
info_fill(once_input_info *o, const kept *k, const char *name)
{
    Once__V1__RequestGrantRequest *r = NULL;

    memset(o, 0, sizeof(*o));
    o->kind = strcmp(kept_method(k), ENQUEUE) == 0 ? ONCE_INPUT_ENQUEUE
                                                   : ONCE_INPUT_START;
    if (o->kind == ONCE_INPUT_ENQUEUE) {
        Once__V1__EnqueueRequest *q = once__v1__enqueue_request__unpack(
            NULL, k->request.len, k->request.data);
        if (q != NULL) {
            snprintf(o->request_id, sizeof(o->request_id), "%s", q->request_id);
            o->attempt = q->attempt;
            snprintf(o->surface, sizeof(o->surface), "%s", q->surface);
            o->payload_len = q->payload.len;
            once__v1__enqueue_request__free_unpacked(q, NULL);
        }
    } else {
        r = once__v1__request_grant_request__unpack(NULL, k->request.len,
                                                    k->request.data);
    }
    if (r != NULL) {
        snprintf(o->request_id, sizeof(o->request_id), "%s", r->request_id);
        o->attempt = r->attempt;
        snprintf(o->surface, sizeof(o->surface), "%s", r->surface);
        snprintf(o->machine, sizeof(o->machine), "%s", r->machine);
        snprintf(o->location, sizeof(o->location), "%s", r->location);
        o->generation = r->generation;
        o->payload_len = r->payload.len;
        once__v1__request_grant_request__free_unpacked(r, NULL);
    }
    o->id.client_id = k->client_id;
    o->id.seq = k->seq;
    snprintf(o->principal, sizeof(o->principal), "%s",
             k->principal != NULL ? k->principal : "");
    o->state = (int)k->state;
    o->kept_unix_ms = k->kept_unix_ms;
    o->updated_unix_ms = k->updated_unix_ms;
    o->sends = k->sends;
    o->code = k->code;
    snprintf(o->reason, sizeof(o->reason), "%s",
             k->reason != NULL ? k->reason : "");
    snprintf(o->message, sizeof(o->message), "%s",
             k->message != NULL ? k->message : "");
    snprintf(o->file, sizeof(o->file), "%s", name);
}

static int
info_cmp(const void *a, const void *b)
{
    const once_input_info *x = a, *y = b;

    if (x->kept_unix_ms != y->kept_unix_ms) {
        return x->kept_unix_ms < y->kept_unix_ms ? -1 : 1;
    }
    return strcmp(x->file, y->file);
}

int
once_grant_inputs_list(once_inputs *s, once_input_info **out, size_t *n,
                       once_status *st)
{
    once_input_info *rows = NULL;
    size_t cnt = 0, cap = 0;
    struct dirent *de;
    DIR *d;
    int dfd;

    status_clear(st);
    if (s == NULL || out == NULL || n == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "once_grant_inputs_list needs a store and outputs");
    }
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&s->lock);
    if ((dfd = openat(s->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
        (d = fdopendir(dfd)) == NULL) {
        int e = errno;
        if (dfd >= 0) {
            close(dfd);
        }
        pthread_mutex_unlock(&s->lock);
        return store_error(st, "cannot list", s->dir, e);
    }
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name), sl = strlen(INPUT_SUFFIX);
        kept *k;

        if (de->d_name[0] == '.' || l <= sl || l >= NAME_MAX_LEN ||
            strcmp(de->d_name + l - sl, INPUT_SUFFIX) != 0 ||
            file_read(s, de->d_name, &k) != 0) {
            continue;
        }
        if (cnt == cap) {
            once_input_info *nr =
                realloc(rows, (cap = cap != 0 ? cap * 2 : 16) * sizeof(*nr));
            if (nr == NULL) {
                once__client__kept_input__free_unpacked(k, NULL);
                break;
            }
            rows = nr;
        }
        info_fill(&rows[cnt++], k, de->d_name);
        once__client__kept_input__free_unpacked(k, NULL);
    }
    closedir(d);
    pthread_mutex_unlock(&s->lock);
    if (cnt > 1) {
        qsort(rows, cnt, sizeof(*rows), info_cmp);
    }
    *out = rows;
    *n = cnt;
    return ONCE_OK;
}

int
once_grant_input_forget(once_inputs *s, const char *request_id,
                        uint32_t attempt, once_status *st)
{
    char name[NAME_MAX_LEN];
    int e;

    status_clear(st);
    if (s == NULL || request_id == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "once_grant_input_forget needs a store and a "
                          "request id");
    }
    input_name(request_id, attempt != 0 ? attempt : 1, name);
    pthread_mutex_lock(&s->lock);
    if (faccessat(s->dirfd, name, F_OK, 0) != 0) {
        pthread_mutex_unlock(&s->lock);
        return status_set(st, ONCE_NOT_FOUND, ONCE_REASON_NO_INPUT,
                          "request %s attempt %" PRIu32 " is not kept",
                          request_id, attempt != 0 ? attempt : 1);
    }
    e = file_remove(s, name);
    pthread_mutex_unlock(&s->lock);
    return e != 0 ? store_error(st, "cannot remove", name, e) : ONCE_OK;
}

int
once_grant_inputs_resume(once_client *c, once_inputs *s,
                         once_input_resumed_fn fn, void *arg, size_t *accepted,
                         size_t *pending, size_t *ended, size_t *rejected,
                         once_status *st)
{
    size_t n = 0, na = 0, np = 0, ne = 0, nr = 0;
    once_input_info *rows = NULL;
    int rv;

    if (accepted != NULL) {
        *accepted = 0;
    }
    if (pending != NULL) {
        *pending = 0;
    }
    if (ended != NULL) {
        *ended = 0;
    }
    if (rejected != NULL) {
        *rejected = 0;
    }
    if (c == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "once_grant_inputs_resume needs a handle");
    }
    if ((rv = once_grant_inputs_list(s, &rows, &n, st)) != ONCE_OK) {
        return rv;
    }
    for (size_t i = 0; i < n; i++) {
        const once_input_info *in = &rows[i];
        void *resp = NULL;
        size_t resp_len = 0;
        once_status one;

        if (in->state != ONCE_INPUT_PENDING ||
            strcmp(in->principal, c->principal) != 0) {
            continue;
        }
        rv = once_grant_input_resend(c, s, in->request_id, in->attempt, false,
                                     NULL, &resp, &resp_len, &one);
        if (rv == ONCE_OK) {
            na++;
        } else {
            switch (classify(rv, &one)) {
            case ONCE_INPUT_PENDING:
                np++;
                break;
            case ONCE_INPUT_LEASE_ENDED:
                ne++;
                break;
            default:
                nr++;
            }
        }
        if (fn != NULL) {
            fn(in, rv, &one, resp, resp_len, arg);
        }
        once_free(resp);
    }
    once_free(rows);
    if (accepted != NULL) {
        *accepted = na;
    }
    if (pending != NULL) {
        *pending = np;
    }
    if (ended != NULL) {
        *ended = ne;
    }
    if (rejected != NULL) {
        *rejected = nr;
    }
    return status_set(st, ONCE_OK, "", "%s", "");
}
