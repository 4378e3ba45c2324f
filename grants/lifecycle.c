/*
 * lifecycle.c — an accepted grant after its start: RenewCredential,
 * FinishGrant and CancelGrant.
 *
 * Invariant: the recorded finish is the only thing that frees the surface;
 * cancelling withdraws the intent but keeps the surface owned until the
 * finish is recorded.
 * Never: frees a surface on a credential's expiry or on silence.
 */
#include <string.h>

#include "grants/rules_impl.h"
#include "proto/reasons.h"

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

    if (!grants_grant_named(e, r->grant_id, &g, o)) {
        return;
    }
    if ((rv = grants_principal_denied(e, &denied)) != 0 ||
        (rv = grants_machine_deleted(e, g->machine, &deleted)) != 0) {
        goto err;
    }
    gkey_placement(&k, g->surface);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__placement, &p)) != 0) {
        goto err;
    }
    /* Refusals go to the surface's rejection log too (docs/grants.md: visible
     * while the machine is silent), as the renewing machine's. */
#define RENEW_REJECT(code, reason, ...)                                        \
    grants_reject(e, o, g->surface, g->request_id, g->attempt, r->machine,     \
                  "renew", CODE(code), reason, __VA_ARGS__)
    if (g->state != ONCE__V1__GRANT_STATE__GRANT_OPEN) {
        RENEW_REJECT(FAILED_PRECONDITION, REASON_GRANT_CLOSED,
                     "grant %llu is finished", (unsigned long long)g->grant_id);
    } else if (g->cancelled) {
        RENEW_REJECT(FAILED_PRECONDITION, REASON_GRANT_CANCELLED,
                     "grant %llu was cancelled",
                     (unsigned long long)g->grant_id);
    } else if (strcmp(r->machine, g->machine) != 0) {
        RENEW_REJECT(PERMISSION_DENIED, REASON_WRONG_MACHINE,
                     "grant %llu is for machine %s, not %s",
                     (unsigned long long)g->grant_id, g->machine, r->machine);
    } else if (deleted) {
        RENEW_REJECT(FAILED_PRECONDITION, REASON_MACHINE_DELETED,
                     "machine %s was deleted; grant %llu stays open until "
                     "its finish is recorded",
                     g->machine, (unsigned long long)g->grant_id);
    } else if (g->stop_requested || p->generation != g->generation) {
        RENEW_REJECT(FAILED_PRECONDITION, REASON_PLACEMENT_CHANGED,
                     "surface %s was placed again (generation %llu, grant "
                     "has %llu): grant %llu can no longer start",
                     g->surface, (unsigned long long)p->generation,
                     (unsigned long long)g->generation,
                     (unsigned long long)g->grant_id);
    } else if (denied) {
        RENEW_REJECT(PERMISSION_DENIED, REASON_PRINCIPAL_DENIED,
                     "principal %s may not obtain credentials", e->principal);
    } else if ((rv = grants_issue(e, g, r->credential_ttl_ms, &cred)) != 0) {
        grants_fail(o, CODE(INTERNAL), REASON_MINT_FAILED,
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
    return rv != 0 ? rv : grants_machine_open_drop(e, g->machine, g->grant_id);
}

void
grants_finish(const grants_env *e, const Once__V1__FinishGrantRequest *r,
              grants_outcome *o)
{
    Once__V1__FinishGrantResponse resp = ONCE__V1__FINISH_GRANT_RESPONSE__INIT;
    Once__V1__Grant *g = NULL;
    int rv;

    if (!grants_grant_named(e, r->grant_id, &g, o)) {
        return;
    }
    if (e->machine != NULL && strcmp(e->machine, g->machine) != 0) {
        grants_fail(o, CODE(PERMISSION_DENIED), REASON_WRONG_MACHINE,
                    "grant %llu is for machine %s; this principal acts for "
                    "%s only",
                    (unsigned long long)g->grant_id, g->machine, e->machine);
        goto out;
    }
    if (g->state != ONCE__V1__GRANT_STATE__GRANT_OPEN) {
        grants_fail(o, CODE(FAILED_PRECONDITION), REASON_GRANT_CLOSED,
                    "grant %llu is already finished",
                    (unsigned long long)g->grant_id);
        goto out;
    }
    /* The recorded finish is the only thing that frees the surface. */
    g->state = ONCE__V1__GRANT_STATE__GRANT_FINISHED;
    g->outcome = r->outcome;
    g->finished_unix_ms = e->now_ms;
    if ((rv = grants_grant_store(e, g)) == 0) {
        rv = surface_close(e, g);
    }
    resp.grant = g;
    grants_end(o, rv, &resp.base);
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

    if (!grants_grant_named(e, r->grant_id, &g, o)) {
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
    rv = grants_grant_store(e, g);
    resp.grant = g;
    grants_end(o, rv, &resp.base);
    ROW_FREE(g);
}
