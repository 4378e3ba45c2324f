/*
 * rules.c — placements, the start decision, credentials, finish, cancel,
 * the legacy path, permissions and the surface view (see rules.h).
 */
#include "rules.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"
#include "rows.h"
#include "rows.pb-c.h"

#define CODE(x) ONCE__V1__CODE__##x

#define ROW_GET(t, k, type, lower, out)                                        \
    rows_get((t), (k), &once__##type##__descriptor, (ProtobufCMessage **)(out))
#define ROW_GET0(t, k, lower, out)                                             \
    rows_get_or_empty((t), (k), &lower##__descriptor,                          \
                      (ProtobufCMessage **)(out))
#define ROW_FREE(m)                                                            \
    do {                                                                       \
        if ((m) != NULL) {                                                     \
            protobuf_c_message_free_unpacked(&(m)->base, NULL);                \
        }                                                                      \
    } while (0)

void
grants_fail(grants_outcome *o, int code, const char *reason, const char *fmt,
            ...)
{
    va_list ap;

    o->code = code;
    snprintf(o->reason, sizeof(o->reason), "%s", reason);
    va_start(ap, fmt);
    vsnprintf(o->message, sizeof(o->message), fmt, ap);
    va_end(ap);
}

void
grants_ok(grants_outcome *o, const ProtobufCMessage *m)
{
    size_t len = protobuf_c_message_get_packed_size(m);

    if ((o->resp = malloc(len > 0 ? len : 1)) == NULL) {
        o->err = ENOMEM;
        return;
    }
    protobuf_c_message_pack(m, o->resp);
    o->resp_len = len;
    o->code = CODE(OK);
}

void
grants_credential_free(Once__V1__Credential *c)
{
    grants_credential_fini(c);
    free(c);
}

/* ---- request checks ----------------------------------------------------- */

bool
grants_check_name(const char *what, const char *s, grants_outcome *o)
{
    size_t len = strlen(s);

    if (len == 0 || len > GRANTS_NAME_MAX) {
        grants_fail(o, CODE(INVALID_ARGUMENT), "BAD_NAME",
                    "%s must be 1 to %d bytes, got %zu", what, GRANTS_NAME_MAX,
                    len);
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch == 0x7f) {
            grants_fail(o, CODE(INVALID_ARGUMENT), "BAD_NAME",
                        "%s has a control character at byte %zu", what, i);
            return false;
        }
    }
    return true;
}

/* An open grant always has a location: an empty one is refused here. */
static bool
check_location(const char *s, grants_outcome *o)
{
    size_t len = strlen(s);

    if (len == 0 || len > GRANTS_LOCATION_MAX) {
        grants_fail(o, CODE(INVALID_ARGUMENT), "BAD_LOCATION",
                    "location must be 1 to %d bytes, got %zu (an open grant "
                    "always has a machine and a location)",
                    GRANTS_LOCATION_MAX, len);
        return false;
    }
    return true;
}

bool
grants_check_placement(const Once__V1__SetPlacementRequest *r,
                       grants_outcome *o)
{
    return grants_check_name("surface", r->surface, o) &&
           grants_check_name("machine", r->machine, o) &&
           check_location(r->location, o);
}

static bool
check_ttl(uint64_t ttl, grants_outcome *o)
{
    if (ttl > GRANTS_CRED_TTL_MAX_MS) {
        grants_fail(o, CODE(INVALID_ARGUMENT), "BAD_TTL",
                    "credential_ttl_ms is at most %llu",
                    (unsigned long long)GRANTS_CRED_TTL_MAX_MS);
        return false;
    }
    return true;
}

bool
grants_check_request(const Once__V1__RequestGrantRequest *r, grants_outcome *o)
{
    if (!grants_check_name("request_id", r->request_id, o) ||
        !grants_check_name("surface", r->surface, o) ||
        !grants_check_name("machine", r->machine, o) ||
        !check_location(r->location, o) ||
        !check_ttl(r->credential_ttl_ms, o)) {
        return false;
    }
    if (r->attempt == 0 || r->generation == 0) {
        grants_fail(o, CODE(INVALID_ARGUMENT), "BAD_FIELD",
                    "attempt and generation start at 1");
        return false;
    }
    return true;
}

bool
grants_check_enqueue(const Once__V1__EnqueueRequest *r, grants_outcome *o)
{
    if (!grants_check_name("request_id", r->request_id, o) ||
        !grants_check_name("surface", r->surface, o)) {
        return false;
    }
    if (r->attempt == 0) {
        grants_fail(o, CODE(INVALID_ARGUMENT), "BAD_FIELD",
                    "attempt starts at 1");
        return false;
    }
    return true;
}

bool
grants_check_finish(const Once__V1__FinishGrantRequest *r, grants_outcome *o)
{
    if (r->grant_id == 0 || r->outcome < ONCE__V1__GRANT_OUTCOME__SUCCEEDED ||
        r->outcome > ONCE__V1__GRANT_OUTCOME__RELEASED) {
        grants_fail(o, CODE(INVALID_ARGUMENT), "BAD_FIELD",
                    "FinishGrant needs a grant_id and an outcome "
                    "(succeeded, failed_before_start, aborted, released)");
        return false;
    }
    return true;
}

/* ---- small row helpers -------------------------------------------------- */

/* The digest of a start: what the request asks for, not who or when. */
static void
start_digest(const Once__V1__RequestGrantRequest *r, uint8_t out[32])
{
    crypto_generichash_state st;
    uint8_t b[8];
    const char *f[3] = {r->surface, r->machine, r->location};

    crypto_generichash_init(&st, NULL, 0, 32);
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(f[i]);
        wire_put_be64(b, n);
        crypto_generichash_update(&st, b, 8);
        crypto_generichash_update(&st, (const uint8_t *)f[i], n);
    }
    wire_put_be64(b, r->generation);
    crypto_generichash_update(&st, b, 8);
    wire_put_be64(b, r->payload.len);
    crypto_generichash_update(&st, b, 8);
    crypto_generichash_update(&st, r->payload.data, r->payload.len);
    crypto_generichash_final(&st, out, 32);
}

static int
principal_denied(const grants_env *e, bool *denied)
{
    gkey k;

    gkey_denied(&k, e->principal[0] != '\0' ? e->principal : "anonymous");
    return rows_exists(e->txn, &k, denied);
}

static int
machine_deleted(const grants_env *e, const char *machine, bool *deleted)
{
    gkey k;

    gkey_machine_deleted(&k, machine);
    return rows_exists(e->txn, &k, deleted);
}

static int
grant_load(const grants_env *e, uint64_t id, Once__V1__Grant **g)
{
    gkey k;

    gkey_grant(&k, id);
    return rows_get(e->txn, &k, &once__v1__grant__descriptor,
                    (ProtobufCMessage **)g);
}

static int
grant_store(const grants_env *e, const Once__V1__Grant *g)
{
    gkey k;

    gkey_grant(&k, g->grant_id);
    return rows_put(e->txn, &k, &g->base);
}

/* Loads the grant a request names. Returns true with *g (freed by the
 * caller with ROW_FREE) when it exists; otherwise false with o failed
 * NOT_FOUND/NO_GRANT, or o->err set on a store error. */
static bool
grant_named(const grants_env *e, uint64_t id, Once__V1__Grant **g,
            grants_outcome *o)
{
    int rv = grant_load(e, id, g);

    if (rv == ENOENT) {
        grants_fail(o, CODE(NOT_FOUND), "NO_GRANT", "no grant %llu",
                    (unsigned long long)id);
        return false;
    }
    if (rv != 0) {
        o->err = rv;
        return false;
    }
    return true;
}

/* Appends a rejection to the surface's log and marks the outcome kept, so
 * the reason is on the server while the machine is silent. */
static void reject(const grants_env *e, grants_outcome *o, const char *surface,
                   const char *request_id, uint32_t attempt,
                   const char *machine, const char *via, int code,
                   const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 10, 11)));

/* Whether r is the rejection these fields describe. */
static bool
rejection_same(const Once__V1__Rejection *r, const char *request_id,
               uint32_t attempt, const char *machine, const char *via,
               const char *reason)
{
    return r->attempt == attempt && strcmp(r->request_id, request_id) == 0 &&
           strcmp(r->machine, machine) == 0 && strcmp(r->via, via) == 0 &&
           strcmp(r->reason, reason) == 0;
}

static void
reject(const grants_env *e, grants_outcome *o, const char *surface,
       const char *request_id, uint32_t attempt, const char *machine,
       const char *via, int code, const char *reason, const char *fmt, ...)
{
    Once__Grants__V1__RejectionLog *log = NULL;
    Once__V1__Rejection rej = ONCE__V1__REJECTION__INIT;
    Once__V1__Rejection **list;
    size_t n, skip;
    va_list ap;
    gkey k;
    int rv;

    o->code = code;
    snprintf(o->reason, sizeof(o->reason), "%s", reason);
    va_start(ap, fmt);
    vsnprintf(o->message, sizeof(o->message), fmt, ap);
    va_end(ap);

    if (e->read_only) {
        return;
    }
    gkey_rejections(&k, surface);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__rejection_log, &log)) !=
        0) {
        o->err = rv;
        return;
    }
    n = log->n_rejections;
    if (n > 0 && rejection_same(log->rejections[n - 1], request_id, attempt,
                                machine, via, o->reason)) {
        Once__V1__Rejection *last = log->rejections[n - 1];
        char *was = last->message;

        last->at_unix_ms = e->now_ms;
        last->message = o->message;
        last->repeats++;
        rv = rows_put(e->txn, &k, &log->base);
        last->message = was; /* the unpacked row's own, for ROW_FREE */
        ROW_FREE(log);
        if (rv != 0) {
            o->err = rv;
            return;
        }
        o->keep = true;
        return;
    }
    skip = n + 1 > GRANTS_REJECTIONS_MAX ? n + 1 - GRANTS_REJECTIONS_MAX : 0;
    if ((list = calloc(n + 1, sizeof(*list))) == NULL) {
        ROW_FREE(log);
        o->err = ENOMEM;
        return;
    }
    for (size_t i = skip; i < n; i++) {
        list[i - skip] = log->rejections[i];
    }
    rej.at_unix_ms = e->now_ms;
    rej.request_id = (char *)request_id;
    rej.attempt = attempt;
    rej.machine = (char *)machine;
    rej.reason = o->reason;
    rej.message = o->message;
    rej.via = (char *)via;
    list[n - skip] = &rej;
    {
        Once__Grants__V1__RejectionLog out =
            ONCE__GRANTS__V1__REJECTION_LOG__INIT;
        out.n_rejections = n - skip + 1;
        out.rejections = list;
        rv = rows_put(e->txn, &k, &out.base);
    }
    free(list);
    ROW_FREE(log);
    if (rv != 0) {
        o->err = rv;
        return;
    }
    o->keep = true;
}

static int
mint(const grants_env *e, const Once__V1__Grant *g, uint64_t ttl,
     Once__V1__Credential **credp)
{
    Once__V1__CredentialBody b = ONCE__V1__CREDENTIAL_BODY__INIT;
    Once__V1__Credential *c = malloc(sizeof(*c));
    int rv;

    *credp = NULL;
    if (c == NULL) {
        return ENOMEM;
    }
    b.grant_id = g->grant_id;
    b.surface = g->surface;
    b.machine = g->machine;
    b.location = g->location;
    b.generation = g->generation;
    b.epoch = g->epoch;
    b.issued_unix_ms = e->now_ms;
    b.expires_unix_ms =
        e->now_ms + (ttl != 0 ? ttl : GRANTS_CRED_TTL_DEFAULT_MS);
    if ((rv = grants_mint(e->signer, &b, c)) != 0) {
        free(c);
        return rv;
    }
    *credp = c;
    return 0;
}

/* Drops id from the machine's list of open grants. */
static int
machine_open_drop(const grants_env *e, const char *machine, uint64_t id)
{
    Once__Grants__V1__MachineQueue *q = NULL;
    gkey k;
    int rv;

    gkey_machine(&k, machine);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__machine_queue, &q)) != 0) {
        return rv;
    }
    rows_ids_drop(q->open_grants, &q->n_open_grants, id);
    rv = rows_put(e->txn, &k, &q->base);
    ROW_FREE(q);
    return rv;
}

static int
machine_open_add(const grants_env *e, const char *machine, uint64_t id)
{
    Once__Grants__V1__MachineQueue *q = NULL;
    gkey k;
    int rv;

    gkey_machine(&k, machine);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__machine_queue, &q)) != 0) {
        return rv;
    }
    if ((rv = rows_ids_push(&q->open_grants, &q->n_open_grants, id)) == 0) {
        rv = rows_put(e->txn, &k, &q->base);
    }
    ROW_FREE(q);
    return rv;
}

/* ---- SetPlacement ------------------------------------------------------- */

void
grants_set_placement(const grants_env *e,
                     const Once__V1__SetPlacementRequest *r, grants_outcome *o)
{
    Once__V1__SetPlacementResponse resp =
        ONCE__V1__SET_PLACEMENT_RESPONSE__INIT;
    Once__Grants__V1__Placement *p = NULL;
    Once__Grants__V1__SurfaceRow *s = NULL;
    Once__V1__Grant *g = NULL;
    gkey k;
    int rv;

    gkey_placement(&k, r->surface);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__placement, &p)) != 0) {
        goto err;
    }
    if (p->generation != 0 && strcmp(p->machine, r->machine) == 0 &&
        strcmp(p->location, r->location) == 0) {
        resp.generation = p->generation; /* unchanged: no new generation */
        grants_ok(o, &resp.base);
        goto out;
    }
    {
        Once__Grants__V1__Placement np = ONCE__GRANTS__V1__PLACEMENT__INIT;
        np.machine = r->machine;
        np.location = r->location;
        np.generation = p->generation + 1;
        resp.generation = np.generation;
        if ((rv = rows_put(e->txn, &k, &np.base)) != 0) {
            goto err;
        }
    }
    /* A placement on a machine brings a deleted machine back. */
    gkey_machine_deleted(&k, r->machine);
    if ((rv = rows_set_flag(e->txn, &k, false)) != 0) {
        goto err;
    }
    /* The open grant is never moved: it is asked to stop and can no longer
     * start or renew; the next start is a new grant for the new
     * generation. */
    gkey_surface(&k, r->surface);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__surface_row, &s)) != 0) {
        goto err;
    }
    if (s->open_grant != 0) {
        if ((rv = grant_load(e, s->open_grant, &g)) != 0) {
            goto err;
        }
        g->stop_requested = true;
        if ((rv = grant_store(e, g)) != 0) {
            goto err;
        }
        resp.stop_requested_grant = g->grant_id;
    }
    grants_ok(o, &resp.base);
    goto out;
err:
    o->err = rv;
out:
    ROW_FREE(p);
    ROW_FREE(s);
    ROW_FREE(g);
}

/* ---- the start decision ------------------------------------------------- */

/*
 * The credential accepted grant g may carry now: minted afresh into *credp
 * (ttl 0: the default), or withheld, with the reason in withheld, when the
 * grant is closed or cancelled, its machine deleted or its surface placed
 * again. A mint failure fails o (MINT_FAILED). The caller has checked the
 * principal's permission. Reads only. Returns a store error or 0.
 */
static int
credential_now(const grants_env *e, const Once__V1__Grant *g, uint64_t ttl,
               Once__V1__Credential **credp, char *withheld,
               size_t withheld_len, grants_outcome *o)
{
    Once__Grants__V1__Placement *p = NULL;
    bool deleted;
    gkey k;
    int rv;

    *credp = NULL;
    withheld[0] = '\0';
    gkey_placement(&k, g->surface);
    if ((rv = machine_deleted(e, g->machine, &deleted)) != 0 ||
        (rv = ROW_GET0(e->txn, &k, once__grants__v1__placement, &p)) != 0) {
        return rv;
    }
    if (g->state != ONCE__V1__GRANT_STATE__GRANT_OPEN) {
        snprintf(withheld, withheld_len, "GRANT_CLOSED");
    } else if (g->cancelled) {
        snprintf(withheld, withheld_len, "GRANT_CANCELLED");
    } else if (deleted) {
        snprintf(withheld, withheld_len, "MACHINE_DELETED");
    } else if (g->stop_requested || p->generation != g->generation) {
        snprintf(withheld, withheld_len, "PLACEMENT_CHANGED");
    } else if (mint(e, g, ttl, credp) != 0) {
        grants_fail(o, CODE(INTERNAL), "MINT_FAILED",
                    "could not mint a credential");
    }
    ROW_FREE(p);
    return 0;
}

/* A retry of an accepted (request_id, attempt) with the same digest: the
 * same grant, never a second; permission is evaluated again and a fresh
 * credential minted only if it still holds. */
static void
start_existing(const grants_env *e, const Once__V1__RequestGrantRequest *r,
               const char *via, uint64_t grant_id, Once__V1__Grant **grantp,
               Once__V1__Credential **credp, char *withheld,
               size_t withheld_len, grants_outcome *o)
{
    Once__V1__Grant *g = NULL;
    bool denied;
    int rv;

    if ((rv = grant_load(e, grant_id, &g)) != 0 ||
        (rv = principal_denied(e, &denied)) != 0) {
        goto err;
    }
    if (strcmp(g->principal, e->principal) != 0) {
        reject(e, o, r->surface, r->request_id, r->attempt, r->machine, via,
               CODE(PERMISSION_DENIED), "NOT_YOUR_GRANT",
               "request %s attempt %u belongs to another principal",
               r->request_id, r->attempt);
        goto out;
    }
    if (denied) {
        reject(e, o, r->surface, r->request_id, r->attempt, r->machine, via,
               CODE(PERMISSION_DENIED), "PRINCIPAL_DENIED",
               "principal %s may no longer obtain grants (grant %llu is "
               "kept)",
               e->principal, (unsigned long long)g->grant_id);
        goto out;
    }
    if (g->cancelled) {
        reject(e, o, r->surface, r->request_id, r->attempt, r->machine, via,
               CODE(FAILED_PRECONDITION), "GRANT_CANCELLED",
               "grant %llu of request %s attempt %u was cancelled; a "
               "retry is not accepted",
               (unsigned long long)g->grant_id, r->request_id, r->attempt);
        goto out;
    }
    if ((rv = credential_now(e, g, r->credential_ttl_ms, credp, withheld,
                             withheld_len, o)) != 0) {
        goto err;
    }
    if (o->code != CODE(OK)) {
        goto out; /* MINT_FAILED */
    }
    *grantp = g;
    g = NULL;
    o->code = CODE(OK);
    goto out;
err:
    o->err = rv;
out:
    ROW_FREE(g);
}

void
grants_start(const grants_env *e, const Once__V1__RequestGrantRequest *r,
             const char *via, Once__V1__Grant **grantp,
             Once__V1__Credential **credp, bool *existing, char *withheld,
             size_t withheld_len, grants_outcome *o)
{
    Once__Grants__V1__RequestLock *lock = NULL;
    Once__Grants__V1__RequestLock *prev = NULL;
    Once__Grants__V1__Placement *p = NULL;
    Once__Grants__V1__SurfaceRow *s = NULL;
    Once__V1__Grant *pg = NULL;
    Once__V1__Credential *cred = NULL;
    uint8_t digest[32];
    uint64_t latest, next_id;
    bool denied, deleted;
    gkey k;
    int rv;

    *grantp = NULL;
    *credp = NULL;
    *existing = false;
    withheld[0] = '\0';
    start_digest(r, digest);

    /* 1. The (request_id, attempt) lock row, looked at before anything
     *    else (the executor runs this call alone from here to commit). */
    gkey_lock(&k, r->request_id, r->attempt);
    rv = ROW_GET(e->txn, &k, grants__v1__request_lock, _, &lock);
    if (rv == 0) {
        if (lock->digest.len != sizeof(digest) ||
            memcmp(lock->digest.data, digest, sizeof(digest)) != 0) {
            reject(e, o, r->surface, r->request_id, r->attempt, r->machine, via,
                   CODE(ALREADY_EXISTS), "GRANT_CONFLICT",
                   "request %s attempt %u was already granted (grant %llu) "
                   "for other content; a new intent needs a new request id",
                   r->request_id, r->attempt,
                   (unsigned long long)lock->grant_id);
            goto out;
        }
        *existing = true;
        start_existing(e, r, via, lock->grant_id, grantp, credp, withheld,
                       withheld_len, o);
        goto out;
    }
    if (rv != ENOENT) {
        goto err;
    }
    /* 2. A late attempt after a later one was accepted. */
    gkey_latest(&k, r->request_id);
    if ((rv = rows_get_u64(e->txn, &k, &latest)) != 0 && rv != ENOENT) {
        goto err;
    }
    if (latest > r->attempt) {
        reject(e, o, r->surface, r->request_id, r->attempt, r->machine, via,
               CODE(FAILED_PRECONDITION), "ATTEMPT_SUPERSEDED",
               "request %s already has attempt %llu", r->request_id,
               (unsigned long long)latest);
        goto out;
    }
    /* 3. The machine and the placement the request was written for. */
    if ((rv = machine_deleted(e, r->machine, &deleted)) != 0) {
        goto err;
    }
    if (deleted) {
        reject(e, o, r->surface, r->request_id, r->attempt, r->machine, via,
               CODE(FAILED_PRECONDITION), "MACHINE_DELETED",
               "machine %s was deleted", r->machine);
        goto out;
    }
    gkey_placement(&k, r->surface);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__placement, &p)) != 0) {
        goto err;
    }
    if (p->generation == 0) {
        reject(e, o, r->surface, r->request_id, r->attempt, r->machine, via,
               CODE(FAILED_PRECONDITION), "NO_PLACEMENT",
               "surface %s has no placement (SetPlacement first)", r->surface);
        goto out;
    }
    if (p->generation != r->generation || strcmp(p->machine, r->machine) != 0 ||
        strcmp(p->location, r->location) != 0) {
        reject(e, o, r->surface, r->request_id, r->attempt, r->machine, via,
               CODE(FAILED_PRECONDITION), "PLACEMENT_CHANGED",
               "surface %s is placed at %s:%s generation %llu, the request "
               "was written for %s:%s generation %llu; it is not moved",
               r->surface, p->machine, p->location,
               (unsigned long long)p->generation, r->machine, r->location,
               (unsigned long long)r->generation);
        goto out;
    }
    /* 4. Attempt n+1 only after attempt n closed in a retryable way. */
    if (r->attempt > 1) {
        gkey_lock(&k, r->request_id, r->attempt - 1);
        rv = ROW_GET(e->txn, &k, grants__v1__request_lock, _, &prev);
        if (rv == ENOENT) {
            reject(e, o, r->surface, r->request_id, r->attempt, r->machine, via,
                   CODE(FAILED_PRECONDITION), "PREVIOUS_ATTEMPT_MISSING",
                   "attempt %u of request %s was never granted", r->attempt - 1,
                   r->request_id);
            goto out;
        }
        if (rv != 0 || (rv = grant_load(e, prev->grant_id, &pg)) != 0) {
            goto err;
        }
        if (pg->cancelled) {
            reject(e, o, r->surface, r->request_id, r->attempt, r->machine, via,
                   CODE(FAILED_PRECONDITION), "PREVIOUS_ATTEMPT_CANCELLED",
                   "request %s was cancelled (grant %llu)", r->request_id,
                   (unsigned long long)pg->grant_id);
            goto out;
        }
        if (pg->state == ONCE__V1__GRANT_STATE__GRANT_OPEN) {
            reject(e, o, r->surface, r->request_id, r->attempt, r->machine, via,
                   CODE(FAILED_PRECONDITION), "PREVIOUS_ATTEMPT_OPEN",
                   "attempt %u (grant %llu) is still open", r->attempt - 1,
                   (unsigned long long)pg->grant_id);
            goto out;
        }
        if (pg->outcome == ONCE__V1__GRANT_OUTCOME__SUCCEEDED) {
            reject(e, o, r->surface, r->request_id, r->attempt, r->machine, via,
                   CODE(FAILED_PRECONDITION), "PREVIOUS_ATTEMPT_SUCCEEDED",
                   "attempt %u (grant %llu) succeeded; a retry of a success "
                   "is never a new start",
                   r->attempt - 1, (unsigned long long)pg->grant_id);
            goto out;
        }
    }
    /* 5. The surface index: one open grant, and not held by the legacy
     *    path. */
    gkey_surface(&k, r->surface);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__surface_row, &s)) != 0) {
        goto err;
    }
    if (s->open_grant != 0) {
        reject(e, o, r->surface, r->request_id, r->attempt, r->machine, via,
               CODE(FAILED_PRECONDITION), "ALREADY_OWNED",
               "surface %s has open grant %llu", r->surface,
               (unsigned long long)s->open_grant);
        goto out;
    }
    if (s->legacy_holder[0] != '\0') {
        reject(e, o, r->surface, r->request_id, r->attempt, r->machine, via,
               CODE(FAILED_PRECONDITION), "ALREADY_OWNED",
               "surface %s is held by %s through the legacy path", r->surface,
               s->legacy_holder);
        goto out;
    }
    /* 6. Permission, evaluated now. */
    if ((rv = principal_denied(e, &denied)) != 0) {
        goto err;
    }
    if (denied) {
        reject(e, o, r->surface, r->request_id, r->attempt, r->machine, via,
               CODE(PERMISSION_DENIED), "PRINCIPAL_DENIED",
               "principal %s may not obtain grants", e->principal);
        goto out;
    }
    /* 7. Mint before staging anything: if it fails, neither the grant nor
     *    the surface mark exists. */
    gkey_next_grant(&k);
    if ((rv = rows_get_u64(e->txn, &k, &next_id)) != 0 && rv != ENOENT) {
        goto err;
    }
    if (next_id == 0) {
        next_id = 1;
    }
    {
        Once__V1__Grant g = ONCE__V1__GRANT__INIT;
        Once__Grants__V1__RequestLock nl = ONCE__GRANTS__V1__REQUEST_LOCK__INIT;

        g.grant_id = next_id;
        g.request_id = r->request_id;
        g.attempt = r->attempt;
        g.surface = r->surface;
        g.machine = r->machine;
        g.location = r->location;
        g.generation = r->generation;
        g.epoch = s->epoch + 1;
        g.state = ONCE__V1__GRANT_STATE__GRANT_OPEN;
        g.principal = (char *)e->principal;
        g.granted_unix_ms = e->now_ms;
        g.via = (char *)via;
        g.digest.data = digest;
        g.digest.len = sizeof(digest);
        if ((rv = mint(e, &g, r->credential_ttl_ms, &cred)) != 0) {
            reject(e, o, r->surface, r->request_id, r->attempt, r->machine, via,
                   CODE(INTERNAL), "MINT_FAILED",
                   "could not mint a credential; nothing was granted");
            goto out;
        }
        /* 8. Stage the grant, its lock row, the surface index and the
         *    counters: one batch. */
        nl.grant_id = g.grant_id;
        nl.digest.data = digest;
        nl.digest.len = sizeof(digest);
        s->open_grant = g.grant_id;
        s->epoch = g.epoch;
        if ((rv = grant_store(e, &g)) != 0) {
            goto err;
        }
        gkey_lock(&k, r->request_id, r->attempt);
        if ((rv = rows_put(e->txn, &k, &nl.base)) != 0) {
            goto err;
        }
        gkey_latest(&k, r->request_id);
        if ((rv = rows_put_u64(e->txn, &k, r->attempt)) != 0) {
            goto err;
        }
        gkey_surface(&k, r->surface);
        if ((rv = rows_put(e->txn, &k, &s->base)) != 0) {
            goto err;
        }
        gkey_next_grant(&k);
        if ((rv = rows_put_u64(e->txn, &k, next_id + 1)) != 0 ||
            (rv = machine_open_add(e, r->machine, g.grant_id)) != 0 ||
            (rv = grant_load(e, g.grant_id, grantp)) != 0) {
            goto err;
        }
    }
    *credp = cred;
    cred = NULL;
    o->code = CODE(OK);
    goto out;
err:
    o->err = rv;
out:
    if (cred != NULL) {
        grants_credential_free(cred);
    }
    ROW_FREE(lock);
    ROW_FREE(prev);
    ROW_FREE(p);
    ROW_FREE(s);
    ROW_FREE(pg);
}

void
grants_request(const grants_env *e, const Once__V1__RequestGrantRequest *r,
               grants_outcome *o)
{
    Once__V1__RequestGrantResponse resp =
        ONCE__V1__REQUEST_GRANT_RESPONSE__INIT;
    Once__V1__Grant *g = NULL;
    Once__V1__Credential *cred = NULL;
    char withheld[64];
    bool existing;

    grants_start(e, r, "local", &g, &cred, &existing, withheld,
                 sizeof(withheld), o);
    if (o->err == 0 && o->code == CODE(OK)) {
        resp.grant = g;
        resp.credential = cred;
        resp.existing = existing;
        resp.credential_withheld = withheld;
        grants_ok(o, &resp.base);
    }
    ROW_FREE(g);
    if (cred != NULL) {
        grants_credential_free(cred);
    }
}

/* ---- replays: a stored credential never stands in for permission -------- */

/* Fails o when the caller may no longer obtain credentials. Returns a
 * store error or 0. */
static int
replay_permitted(const grants_env *e, const char *what, grants_outcome *o)
{
    bool denied;
    int rv;

    if ((rv = principal_denied(e, &denied)) == 0 && denied) {
        grants_fail(o, CODE(PERMISSION_DENIED), "PRINCIPAL_DENIED",
                    "principal %s may no longer obtain grants: the stored "
                    "reply of this %s is not returned (its grants are kept)",
                    e->principal, what);
    }
    return rv;
}

/* *cred and *withheld of one stored grant, made again now; *old_cred and
 * *old_withheld keep what the unpacked reply had, for replay_restore. */
typedef struct replay_slot {
    Once__V1__Credential **cred;
    char **withheld;
    Once__V1__Credential *old_cred;
    char *old_withheld;
    Once__V1__Credential *fresh;
    char reason[64];
} replay_slot;

static int
replay_refresh(const grants_env *e, uint64_t grant_id, uint64_t ttl,
               replay_slot *sl, grants_outcome *o)
{
    Once__V1__Grant *g = NULL;
    int rv;

    sl->old_cred = *sl->cred;
    sl->old_withheld = *sl->withheld;
    if ((rv = grant_load(e, grant_id, &g)) != 0) {
        return rv;
    }
    rv = credential_now(e, g, ttl, &sl->fresh, sl->reason, sizeof(sl->reason),
                        o);
    ROW_FREE(g);
    *sl->cred = sl->fresh;
    *sl->withheld = sl->reason;
    return rv;
}

/* Puts the unpacked reply's own pointers back (before free_unpacked) and
 * frees the fresh credential. */
static void
replay_restore(replay_slot *sl)
{
    if (sl->cred == NULL) {
        return;
    }
    *sl->cred = sl->old_cred;
    *sl->withheld = sl->old_withheld;
    if (sl->fresh != NULL) {
        grants_credential_free(sl->fresh);
    }
}

void
grants_replay_request(const grants_env *e,
                      const Once__V1__RequestGrantRequest *r,
                      const uint8_t *stored, size_t len, grants_outcome *o)
{
    Once__V1__RequestGrantResponse *resp =
        once__v1__request_grant_response__unpack(NULL, len, stored);
    replay_slot sl;
    int rv;

    memset(&sl, 0, sizeof(sl));
    if (resp == NULL) {
        o->err = EIO; /* a stored reply that does not decode */
        return;
    }
    if (resp->grant == NULL) {
        grants_ok(o, &resp->base);
        goto out;
    }
    if ((o->err = replay_permitted(e, "RequestGrant", o)) != 0 ||
        o->code != CODE(OK)) {
        goto out;
    }
    sl.cred = &resp->credential;
    sl.withheld = &resp->credential_withheld;
    if ((rv = replay_refresh(e, resp->grant->grant_id, r->credential_ttl_ms,
                             &sl, o)) != 0) {
        o->err = rv;
    } else if (o->code == CODE(OK)) {
        grants_ok(o, &resp->base);
    }
out:
    replay_restore(&sl);
    once__v1__request_grant_response__free_unpacked(resp, NULL);
}

void
grants_replay_claim(const grants_env *e, const Once__V1__ClaimRequest *r,
                    const uint8_t *stored, size_t len, grants_outcome *o)
{
    Once__V1__ClaimResponse *resp =
        once__v1__claim_response__unpack(NULL, len, stored);
    replay_slot *sl = NULL;
    int rv = 0;

    if (resp == NULL) {
        o->err = EIO;
        return;
    }
    if (resp->n_claimed > 0 &&
        ((o->err = replay_permitted(e, "Claim", o)) != 0 ||
         o->code != CODE(OK))) {
        goto out;
    }
    if (resp->n_claimed > 0 &&
        (sl = calloc(resp->n_claimed, sizeof(*sl))) == NULL) {
        o->err = ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < resp->n_claimed && rv == 0 && o->code == CODE(OK);
         i++) {
        Once__V1__Claimed *cl = resp->claimed[i];

        if (cl->grant == NULL) {
            continue;
        }
        sl[i].cred = &cl->credential;
        sl[i].withheld = &cl->credential_withheld;
        rv = replay_refresh(e, cl->grant->grant_id, r->credential_ttl_ms,
                            &sl[i], o);
    }
    if (rv != 0) {
        o->err = rv;
    } else if (o->code == CODE(OK)) {
        grants_ok(o, &resp->base);
    }
out:
    for (size_t i = 0; sl != NULL && i < resp->n_claimed; i++) {
        replay_restore(&sl[i]);
    }
    free(sl);
    once__v1__claim_response__free_unpacked(resp, NULL);
}

/* ---- RenewCredential, FinishGrant, CancelGrant -------------------------- */

void
grants_renew(const grants_env *e, const Once__V1__RenewCredentialRequest *r,
             grants_outcome *o)
{
    Once__V1__RenewCredentialResponse resp =
        ONCE__V1__RENEW_CREDENTIAL_RESPONSE__INIT;
    Once__Grants__V1__Placement *p = NULL;
    Once__V1__Grant *g = NULL;
    Once__V1__Credential *cred = NULL;
    bool denied, deleted;
    gkey k;
    int rv;

    if (!grant_named(e, r->grant_id, &g, o)) {
        return;
    }
    if ((rv = principal_denied(e, &denied)) != 0 ||
        (rv = machine_deleted(e, g->machine, &deleted)) != 0) {
        goto err;
    }
    gkey_placement(&k, g->surface);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__placement, &p)) != 0) {
        goto err;
    }
    /* Refusals go to the surface's rejection log too (docs/grants.md: visible
     * while the machine is silent), as the renewing machine's. */
#define RENEW_REJECT(code, reason, ...)                                        \
    reject(e, o, g->surface, g->request_id, g->attempt, r->machine, "renew",   \
           CODE(code), reason, __VA_ARGS__)
    if (g->state != ONCE__V1__GRANT_STATE__GRANT_OPEN) {
        RENEW_REJECT(FAILED_PRECONDITION, "GRANT_CLOSED",
                     "grant %llu is finished", (unsigned long long)g->grant_id);
    } else if (g->cancelled) {
        RENEW_REJECT(FAILED_PRECONDITION, "GRANT_CANCELLED",
                     "grant %llu was cancelled",
                     (unsigned long long)g->grant_id);
    } else if (strcmp(r->machine, g->machine) != 0) {
        RENEW_REJECT(PERMISSION_DENIED, "WRONG_MACHINE",
                     "grant %llu is for machine %s, not %s",
                     (unsigned long long)g->grant_id, g->machine, r->machine);
    } else if (deleted) {
        RENEW_REJECT(FAILED_PRECONDITION, "MACHINE_DELETED",
                     "machine %s was deleted; grant %llu stays open until "
                     "its finish is recorded",
                     g->machine, (unsigned long long)g->grant_id);
    } else if (g->stop_requested || p->generation != g->generation) {
        RENEW_REJECT(FAILED_PRECONDITION, "PLACEMENT_CHANGED",
                     "surface %s was placed again (generation %llu, grant "
                     "has %llu): grant %llu can no longer start",
                     g->surface, (unsigned long long)p->generation,
                     (unsigned long long)g->generation,
                     (unsigned long long)g->grant_id);
    } else if (denied) {
        RENEW_REJECT(PERMISSION_DENIED, "PRINCIPAL_DENIED",
                     "principal %s may not obtain credentials", e->principal);
    } else if ((rv = mint(e, g, r->credential_ttl_ms, &cred)) != 0) {
        grants_fail(o, CODE(INTERNAL), "MINT_FAILED",
                    "could not mint a credential");
    } else {
        resp.credential = cred;
        grants_ok(o, &resp.base);
        grants_credential_free(cred);
    }
#undef RENEW_REJECT
    goto out;
err:
    o->err = rv;
out:
    ROW_FREE(p);
    ROW_FREE(g);
}

static int
surface_close(const grants_env *e, const Once__V1__Grant *g)
{
    Once__Grants__V1__SurfaceRow *s = NULL;
    gkey k;
    int rv;

    gkey_surface(&k, g->surface);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__surface_row, &s)) != 0) {
        return rv;
    }
    if (s->open_grant == g->grant_id) {
        s->open_grant = 0;
    }
    if ((rv = rows_ids_push_newest(&s->history, &s->n_history, g->grant_id,
                                   GRANTS_HISTORY_MAX)) == 0) {
        rv = rows_put(e->txn, &k, &s->base);
    }
    ROW_FREE(s);
    return rv != 0 ? rv : machine_open_drop(e, g->machine, g->grant_id);
}

void
grants_finish(const grants_env *e, const Once__V1__FinishGrantRequest *r,
              grants_outcome *o)
{
    Once__V1__FinishGrantResponse resp = ONCE__V1__FINISH_GRANT_RESPONSE__INIT;
    Once__V1__Grant *g = NULL;
    int rv;

    if (!grant_named(e, r->grant_id, &g, o)) {
        return;
    }
    if (e->machine != NULL && strcmp(e->machine, g->machine) != 0) {
        grants_fail(o, CODE(PERMISSION_DENIED), "WRONG_MACHINE",
                    "grant %llu is for machine %s; this principal acts for "
                    "%s only",
                    (unsigned long long)g->grant_id, g->machine, e->machine);
        goto out;
    }
    if (g->state != ONCE__V1__GRANT_STATE__GRANT_OPEN) {
        grants_fail(o, CODE(FAILED_PRECONDITION), "GRANT_CLOSED",
                    "grant %llu is already finished",
                    (unsigned long long)g->grant_id);
        goto out;
    }
    /* The recorded finish is the only thing that frees the surface. */
    g->state = ONCE__V1__GRANT_STATE__GRANT_FINISHED;
    g->outcome = r->outcome;
    g->finished_unix_ms = e->now_ms;
    if ((rv = grant_store(e, g)) != 0 || (rv = surface_close(e, g)) != 0) {
        o->err = rv;
        goto out;
    }
    resp.grant = g;
    grants_ok(o, &resp.base);
out:
    ROW_FREE(g);
}

void
grants_cancel(const grants_env *e, const Once__V1__CancelGrantRequest *r,
              grants_outcome *o)
{
    Once__V1__CancelGrantResponse resp = ONCE__V1__CANCEL_GRANT_RESPONSE__INIT;
    Once__V1__Grant *g = NULL;
    int rv;

    if (!grant_named(e, r->grant_id, &g, o)) {
        return;
    }
    /* Cancelling withdraws the intent: no retry of the request is accepted
     * again, no credential is minted; the surface stays owned until the
     * finish (aborted, say) is recorded, because whether the work started
     * is not known here. */
    if (g->state == ONCE__V1__GRANT_STATE__GRANT_OPEN) {
        g->stop_requested = true;
    }
    g->cancelled = true;
    if ((rv = grant_store(e, g)) != 0) {
        o->err = rv;
        goto out;
    }
    resp.grant = g;
    grants_ok(o, &resp.base);
out:
    ROW_FREE(g);
}

/* ---- the legacy acquisition path ---------------------------------------- */

void
grants_legacy_claim(const grants_env *e, const Once__V1__LegacyClaimRequest *r,
                    grants_outcome *o)
{
    Once__V1__LegacyClaimResponse resp = ONCE__V1__LEGACY_CLAIM_RESPONSE__INIT;
    Once__Grants__V1__SurfaceRow *s = NULL;
    gkey k;
    int rv;

    /* The same row the grant path locks: g/s/<surface>. */
    gkey_surface(&k, r->surface);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__surface_row, &s)) != 0) {
        o->err = rv;
        return;
    }
    if (s->open_grant != 0) {
        reject(e, o, r->surface, "", 0, "", "legacy", CODE(FAILED_PRECONDITION),
               "ALREADY_OWNED",
               "surface %s has open grant %llu; the legacy path cannot own "
               "it",
               r->surface, (unsigned long long)s->open_grant);
    } else if (s->legacy_holder[0] != '\0' &&
               strcmp(s->legacy_holder, r->holder) != 0) {
        reject(e, o, r->surface, "", 0, "", "legacy", CODE(FAILED_PRECONDITION),
               "ALREADY_OWNED", "surface %s is held by %s", r->surface,
               s->legacy_holder);
    } else {
        if (s->legacy_holder[0] == '\0') {
            Once__Grants__V1__SurfaceRow ns = *s; /* shallow: packed only */
            ns.epoch++;
            ns.legacy_holder = (char *)r->holder;
            if ((rv = rows_put(e->txn, &k, &ns.base)) != 0) {
                o->err = rv;
                goto out;
            }
            resp.epoch = ns.epoch;
        } else {
            resp.epoch = s->epoch;
        }
        grants_ok(o, &resp.base);
    }
out:
    ROW_FREE(s);
}

void
grants_legacy_release(const grants_env *e,
                      const Once__V1__LegacyReleaseRequest *r,
                      grants_outcome *o)
{
    Once__V1__LegacyReleaseResponse resp =
        ONCE__V1__LEGACY_RELEASE_RESPONSE__INIT;
    Once__Grants__V1__SurfaceRow *s = NULL;
    gkey k;
    int rv;

    gkey_surface(&k, r->surface);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__surface_row, &s)) != 0) {
        o->err = rv;
        return;
    }
    if (strcmp(s->legacy_holder, r->holder) != 0) {
        grants_fail(o, CODE(FAILED_PRECONDITION), "NOT_HOLDER",
                    "surface %s is not held by %s through the legacy path",
                    r->surface, r->holder);
        ROW_FREE(s);
        return;
    }
    {
        Once__Grants__V1__SurfaceRow ns = *s; /* shallow: packed only */
        ns.legacy_holder = "";
        rv = rows_put(e->txn, &k, &ns.base);
    }
    ROW_FREE(s);
    if (rv != 0) {
        o->err = rv;
        return;
    }
    grants_ok(o, &resp.base);
}

/* ---- permissions and the surface view ----------------------------------- */

void
grants_set_permission(const grants_env *e,
                      const Once__V1__SetPermissionRequest *r,
                      grants_outcome *o)
{
    Once__V1__SetPermissionResponse resp =
        ONCE__V1__SET_PERMISSION_RESPONSE__INIT;
    gkey k;
    int rv;

    gkey_denied(&k, r->principal);
    if ((rv = rows_set_flag(e->txn, &k, !r->allowed)) != 0) {
        o->err = rv;
        return;
    }
    grants_ok(o, &resp.base);
}

void
grants_get_surface(const grants_env *e, const Once__V1__GetSurfaceRequest *r,
                   grants_outcome *o)
{
    Once__V1__GetSurfaceResponse resp = ONCE__V1__GET_SURFACE_RESPONSE__INIT;
    Once__Grants__V1__Placement *p = NULL;
    Once__Grants__V1__SurfaceRow *s = NULL;
    Once__Grants__V1__RejectionLog *log = NULL;
    Once__V1__Grant *open = NULL;
    Once__V1__Grant **hist = NULL;
    Once__V1__WorkRow *pend = NULL;
    uint64_t wid;
    size_t nh = 0;
    gkey k;
    int rv;

    gkey_placement(&k, r->surface);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__placement, &p)) != 0) {
        goto err;
    }
    gkey_surface(&k, r->surface);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__surface_row, &s)) != 0) {
        goto err;
    }
    gkey_rejections(&k, r->surface);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__rejection_log, &log)) !=
        0) {
        goto err;
    }
    if (s->open_grant != 0 && (rv = grant_load(e, s->open_grant, &open)) != 0) {
        goto err;
    }
    if ((hist = calloc(s->n_history + 1, sizeof(*hist))) == NULL) {
        rv = ENOMEM;
        goto err;
    }
    for (size_t i = 0; i < s->n_history; i++) {
        if ((rv = grant_load(e, s->history[i], &hist[nh])) != 0) {
            goto err;
        }
        nh++;
    }
    gkey_pending(&k, r->surface);
    rv = rows_get_u64(e->txn, &k, &wid);
    if (rv == 0) {
        gkey_work(&k, wid);
        if ((rv = rows_get(e->txn, &k, &once__v1__work_row__descriptor,
                           (ProtobufCMessage **)&pend)) != 0) {
            goto err;
        }
    } else if (rv != ENOENT) {
        goto err;
    }
    resp.surface = r->surface;
    resp.machine = p->machine;
    resp.location = p->location;
    resp.generation = p->generation;
    resp.open_grant = open;
    resp.legacy_holder = s->legacy_holder;
    resp.epoch = s->epoch;
    resp.n_history = nh;
    resp.history = hist;
    resp.n_rejections = log->n_rejections;
    resp.rejections = log->rejections;
    resp.pending = pend;
    grants_ok(o, &resp.base);
    goto out;
err:
    o->err = rv;
out:
    for (size_t i = 0; i < nh; i++) {
        ROW_FREE(hist[i]);
    }
    free(hist);
    ROW_FREE(p);
    ROW_FREE(s);
    ROW_FREE(log);
    ROW_FREE(open);
    ROW_FREE(pend);
}
