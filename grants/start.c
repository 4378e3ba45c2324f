/*
 * start.c — the start decision (RequestGrant, and each row a Claim turns
 * into a grant through grants_start): the (request_id, attempt) lock, the
 * digest check, the placement, attempt n+1 after a retryable close, the
 * surface index, permission, the mint, and the one batch that stages the
 * grant.
 *
 * Invariant: one open grant per surface: the grant, its lock row, the
 * surface mark and the counters are staged together, after the mint, or
 * not at all. The steps run in the order grants_start lists them.
 * Never: grants a second grant for an accepted (request_id, attempt), nor
 * moves a request to another placement.
 */
#include <errno.h>
#include <string.h>

#include "grants/rules_impl.h"
#include "store/fault.h"
#include "proto/reasons.h"

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

/*
 * One start as its steps see it: the request, through which path it came
 * ("local" or a claim), its digest, the outcome, and where the answer goes
 * on OK (rules.h: grants_start).
 */
typedef struct start_call {
    const grants_env *e;
    const Once__V1__RequestGrantRequest *r;
    const char *via;
    uint8_t digest[32];
    grants_outcome *o;
    Once__V1__Grant **grantp;
    Once__V1__Credential **credp;
    bool *existing;
    char *withheld;
    size_t withheld_len;
} start_call;

/* Refuses the start and logs it on the surface under the request's own
 * fields. */
#define START_REJECT(c, code, reason, ...)                                     \
    grants_reject((c)->e, (c)->o, (c)->r->surface, (c)->r->request_id,         \
                  (c)->r->attempt, (c)->r->machine, (c)->via, CODE(code),      \
                  reason, __VA_ARGS__)

/* Each step below returns true when the start goes on to the next one,
 * false when it is decided: refused (o->code), answered (a retry of an
 * accepted start) or failed on a store error (o->err). */

/* A retry of an accepted (request_id, attempt) with the same digest: the
 * same grant, never a second; permission is evaluated again and a fresh
 * credential minted only if it still holds. */
static void
start_existing(const start_call *c, uint64_t grant_id)
{
    const grants_env *e = c->e;
    const Once__V1__RequestGrantRequest *r = c->r;
    grants_outcome *o = c->o;
    Once__V1__Grant *g = NULL;
    bool denied;
    int rv;

    if ((rv = grants_grant_load(e, grant_id, &g)) != 0 ||
        (rv = grants_principal_denied(e, &denied)) != 0) {
        goto err;
    }
    if (strcmp(g->principal, e->principal) != 0) {
        START_REJECT(c, PERMISSION_DENIED, REASON_NOT_YOUR_GRANT,
                     "request %s attempt %u belongs to another principal",
                     r->request_id, r->attempt);
        goto out;
    }
    if (denied) {
        START_REJECT(c, PERMISSION_DENIED, REASON_PRINCIPAL_DENIED,
                     "principal %s may no longer obtain grants (grant %llu is "
                     "kept)",
                     e->principal, (unsigned long long)g->grant_id);
        goto out;
    }
    if (g->cancelled) {
        START_REJECT(c, FAILED_PRECONDITION, REASON_GRANT_CANCELLED,
                     "grant %llu of request %s attempt %u was cancelled; a "
                     "retry is not accepted",
                     (unsigned long long)g->grant_id, r->request_id,
                     r->attempt);
        goto out;
    }
    if ((rv = grants_credential_now(e, g, r->credential_ttl_ms, c->credp,
                                    c->withheld, c->withheld_len, o)) != 0) {
        goto err;
    }
    if (o->code != CODE(OK)) {
        goto out; /* MINT_FAILED */
    }
    *c->grantp = g;
    g = NULL;
    o->code = CODE(OK);
    goto out;
err:
    o->err = rv;
out:
    ROW_FREE(g);
}

/* The lock row of (request_id, attempt) against digest: 1 when there is
 * none (a new start), 0 with *grant_id when the same content was accepted,
 * 0 with o->code set when other content was (refused and logged), or a
 * store error. */
static int
lock_check(const grants_env *e, const Once__V1__RequestGrantRequest *r,
           const char *via, const uint8_t digest[32], uint64_t *grant_id,
           grants_outcome *o)
{
    Once__Grants__V1__RequestLock *lock = NULL;
    gkey k;
    int rv;

    gkey_lock(&k, r->request_id, r->attempt);
    rv = ROW_GET(e->txn, &k, once__grants__v1__request_lock, &lock);
    if (rv == ENOENT) {
        return 1;
    }
    if (rv != 0) {
        return rv;
    }
    *grant_id = lock->grant_id;
    if (lock->digest.len != 32 || memcmp(lock->digest.data, digest, 32) != 0) {
        grants_reject(e, o, r->surface, r->request_id, r->attempt, r->machine,
                      via, CODE(ALREADY_EXISTS), REASON_GRANT_CONFLICT,
                      "request %s attempt %u was already granted (grant %llu) "
                      "for other content; a new intent needs a new request id",
                      r->request_id, r->attempt,
                      (unsigned long long)lock->grant_id);
    }
    ROW_FREE(lock);
    return 0;
}

int
grants_start_lock(const grants_env *e, const Once__V1__RequestGrantRequest *r,
                  const char *via, uint64_t *grant_id, grants_outcome *o)
{
    uint8_t digest[32];

    start_digest(r, digest);
    return lock_check(e, r, via, digest, grant_id, o);
}

/* 1. The (request_id, attempt) lock row, looked at before anything else
 *    (the executor runs this call alone from here to commit): other
 *    content under it is a conflict, the same content a retry, answered by
 *    start_existing. Goes on only when there is no lock: a new start. */
static bool
start_lock(const start_call *c)
{
    uint64_t grant_id = 0;
    int rv = lock_check(c->e, c->r, c->via, c->digest, &grant_id, c->o);

    if (rv == 1) {
        return true;
    }
    if (rv != 0) {
        c->o->err = rv;
    } else if (c->o->reason[0] == '\0') {
        *c->existing = true;
        start_existing(c, grant_id);
    }
    return false;
}

/* 2. A late attempt after a later one was accepted. */
static bool
start_not_superseded(const start_call *c)
{
    const Once__V1__RequestGrantRequest *r = c->r;
    uint64_t latest;
    gkey k;
    int rv;

    gkey_latest(&k, r->request_id);
    if ((rv = rows_get_u64(c->e->txn, &k, &latest)) != 0 && rv != ENOENT) {
        c->o->err = rv;
        return false;
    }
    if (latest > r->attempt) {
        START_REJECT(c, FAILED_PRECONDITION, REASON_ATTEMPT_SUPERSEDED,
                     "request %s already has attempt %llu", r->request_id,
                     (unsigned long long)latest);
        return false;
    }
    return true;
}

/* 3. The machine and the placement the request was written for. */
static bool
start_placement_holds(const start_call *c)
{
    const Once__V1__RequestGrantRequest *r = c->r;
    Once__Grants__V1__Placement *p = NULL;
    bool deleted, ok = false;
    gkey k;
    int rv;

    if ((rv = grants_machine_deleted(c->e, r->machine, &deleted)) != 0) {
        goto err;
    }
    if (deleted) {
        START_REJECT(c, FAILED_PRECONDITION, REASON_MACHINE_DELETED,
                     "machine %s was deleted", r->machine);
        goto out;
    }
    gkey_placement(&k, r->surface);
    if ((rv = ROW_GET0(c->e->txn, &k, once__grants__v1__placement, &p)) != 0) {
        goto err;
    }
    if (p->generation == 0) {
        START_REJECT(c, FAILED_PRECONDITION, REASON_NO_PLACEMENT,
                     "surface %s has no placement (SetPlacement first)",
                     r->surface);
        goto out;
    }
    if (p->generation != r->generation || strcmp(p->machine, r->machine) != 0 ||
        strcmp(p->location, r->location) != 0) {
        START_REJECT(c, FAILED_PRECONDITION, REASON_PLACEMENT_CHANGED,
                     "surface %s is placed at %s:%s generation %llu, the "
                     "request was written for %s:%s generation %llu; it is "
                     "not moved",
                     r->surface, p->machine, p->location,
                     (unsigned long long)p->generation, r->machine, r->location,
                     (unsigned long long)r->generation);
        goto out;
    }
    ok = true;
    goto out;
err:
    c->o->err = rv;
out:
    ROW_FREE(p);
    return ok;
}

/* 4. Attempt n+1 only after attempt n closed in a retryable way. */
static bool
start_previous_closed(const start_call *c)
{
    const Once__V1__RequestGrantRequest *r = c->r;
    Once__Grants__V1__RequestLock *prev = NULL;
    Once__V1__Grant *pg = NULL;
    bool ok = false;
    gkey k;
    int rv;

    if (r->attempt <= 1) {
        return true;
    }
    gkey_lock(&k, r->request_id, r->attempt - 1);
    rv = ROW_GET(c->e->txn, &k, once__grants__v1__request_lock, &prev);
    if (rv == ENOENT) {
        START_REJECT(c, FAILED_PRECONDITION, REASON_PREVIOUS_ATTEMPT_MISSING,
                     "attempt %u of request %s was never granted",
                     r->attempt - 1, r->request_id);
        goto out;
    }
    if (rv != 0 || (rv = grants_grant_load(c->e, prev->grant_id, &pg)) != 0) {
        goto err;
    }
    if (pg->cancelled) {
        START_REJECT(c, FAILED_PRECONDITION, REASON_PREVIOUS_ATTEMPT_CANCELLED,
                     "request %s was cancelled (grant %llu)", r->request_id,
                     (unsigned long long)pg->grant_id);
        goto out;
    }
    if (pg->state == ONCE__V1__GRANT_STATE__GRANT_OPEN) {
        START_REJECT(c, FAILED_PRECONDITION, REASON_PREVIOUS_ATTEMPT_OPEN,
                     "attempt %u (grant %llu) is still open", r->attempt - 1,
                     (unsigned long long)pg->grant_id);
        goto out;
    }
    if (pg->outcome == ONCE__V1__GRANT_OUTCOME__SUCCEEDED) {
        START_REJECT(c, FAILED_PRECONDITION, REASON_PREVIOUS_ATTEMPT_SUCCEEDED,
                     "attempt %u (grant %llu) succeeded; a retry of a "
                     "success is never a new start",
                     r->attempt - 1, (unsigned long long)pg->grant_id);
        goto out;
    }
    ok = true;
    goto out;
err:
    c->o->err = rv;
out:
    ROW_FREE(prev);
    ROW_FREE(pg);
    return ok;
}

/* 5. The surface index: one open grant, and not held by the legacy path.
 *    *sp is the surface row (the caller frees it, whatever the answer). */
static bool
start_surface_free(const start_call *c, Once__Grants__V1__SurfaceRow **sp)
{
    const Once__V1__RequestGrantRequest *r = c->r;
    Once__Grants__V1__SurfaceRow *s;
    gkey k;
    int rv;

    gkey_surface(&k, r->surface);
    if ((rv = ROW_GET0(c->e->txn, &k, once__grants__v1__surface_row, sp)) !=
        0) {
        c->o->err = rv;
        return false;
    }
    s = *sp;
    if (s->open_grant != 0 && !FAULT_BROKEN(FAULT_BROKEN_TWO_GRANTS)) {
        START_REJECT(c, FAILED_PRECONDITION, REASON_ALREADY_OWNED,
                     "surface %s has open grant %llu", r->surface,
                     (unsigned long long)s->open_grant);
        return false;
    }
    if (s->legacy_holder[0] != '\0') {
        START_REJECT(c, FAILED_PRECONDITION, REASON_ALREADY_OWNED,
                     "surface %s is held by %s through the legacy path",
                     r->surface, s->legacy_holder);
        return false;
    }
    return true;
}

/* 6. Permission, evaluated now. */
static bool
start_permitted(const start_call *c)
{
    bool denied;
    int rv;

    if ((rv = grants_principal_denied(c->e, &denied)) != 0) {
        c->o->err = rv;
        return false;
    }
    if (denied) {
        START_REJECT(c, PERMISSION_DENIED, REASON_PRINCIPAL_DENIED,
                     "principal %s may not obtain grants", c->e->principal);
        return false;
    }
    return true;
}

/* 7. The new grant *g (its strings point into the request, the env and
 *    c), and its credential *credp minted before anything is staged: if
 *    the mint fails, neither the grant nor the surface mark exists. */
static bool
start_mint(const start_call *c, const Once__Grants__V1__SurfaceRow *s,
           Once__V1__Grant *g, Once__V1__Credential **credp)
{
    const Once__V1__RequestGrantRequest *r = c->r;
    uint64_t next_id;
    gkey k;
    int rv;

    gkey_next_grant(&k);
    if ((rv = rows_get_u64(c->e->txn, &k, &next_id)) != 0 && rv != ENOENT) {
        c->o->err = rv;
        return false;
    }
    g->grant_id = next_id != 0 ? next_id : 1;
    g->request_id = r->request_id;
    g->attempt = r->attempt;
    g->surface = r->surface;
    g->machine = r->machine;
    g->location = r->location;
    g->generation = r->generation;
    g->epoch = s->epoch + 1;
    g->state = ONCE__V1__GRANT_STATE__GRANT_OPEN;
    g->principal = (char *)c->e->principal;
    g->granted_unix_ms = c->e->now_ms;
    g->via = (char *)c->via;
    g->digest.data = (uint8_t *)c->digest;
    g->digest.len = sizeof(c->digest);
    if (grants_issue(c->e, g, r->credential_ttl_ms, credp) != 0) {
        START_REJECT(c, INTERNAL, REASON_MINT_FAILED,
                     "could not mint a credential; nothing was granted");
        return false;
    }
    return true;
}

/* 8. Stage the grant, its lock row, the surface index and the counters:
 *    one batch. *c->grantp is then the grant as staged. */
static bool
start_stage(const start_call *c, const Once__V1__Grant *g,
            Once__Grants__V1__SurfaceRow *s)
{
    const grants_env *e = c->e;
    const Once__V1__RequestGrantRequest *r = c->r;
    Once__Grants__V1__RequestLock nl = ONCE__GRANTS__V1__REQUEST_LOCK__INIT;
    gkey k;
    int rv;

    nl.grant_id = g->grant_id;
    nl.digest.data = (uint8_t *)c->digest;
    nl.digest.len = sizeof(c->digest);
    s->open_grant = g->grant_id;
    s->epoch = g->epoch;
    if ((rv = grants_grant_store(e, g)) != 0) {
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
    if ((rv = rows_put_u64(e->txn, &k, g->grant_id + 1)) != 0 ||
        (rv = grants_machine_open_add(e, r->machine, g->grant_id)) != 0 ||
        (rv = grants_grant_load(e, g->grant_id, c->grantp)) != 0) {
        goto err;
    }
    return true;
err:
    c->o->err = rv;
    return false;
}

void
grants_start(const grants_env *e, const Once__V1__RequestGrantRequest *r,
             const char *via, Once__V1__Grant **grantp,
             Once__V1__Credential **credp, bool *existing, char *withheld,
             size_t withheld_len, grants_outcome *o)
{
    start_call c = {.e = e,
                    .r = r,
                    .via = via,
                    .o = o,
                    .grantp = grantp,
                    .credp = credp,
                    .existing = existing,
                    .withheld = withheld,
                    .withheld_len = withheld_len};
    Once__Grants__V1__SurfaceRow *s = NULL;
    Once__V1__Grant g = ONCE__V1__GRANT__INIT;
    Once__V1__Credential *cred = NULL;

    *grantp = NULL;
    *credp = NULL;
    *existing = false;
    withheld[0] = '\0';
    start_digest(r, c.digest);

    if (start_lock(&c) && start_not_superseded(&c) &&
        start_placement_holds(&c) && start_previous_closed(&c) &&
        start_surface_free(&c, &s) && start_permitted(&c) &&
        start_mint(&c, s, &g, &cred) && start_stage(&c, &g, s)) {
        *credp = cred;
        cred = NULL;
        o->code = CODE(OK);
    }
    if (cred != NULL) {
        grants_credential_free(cred);
    }
    ROW_FREE(s);
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
