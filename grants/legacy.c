/*
 * legacy.c — the legacy acquisition path (LegacyClaim, LegacyRelease) on
 * the same surface row (g/s/<surface>) the grant path locks.
 *
 * Invariant: a surface is owned by an open grant or a legacy holder, never
 * both; a new legacy holder moves the surface's epoch.
 * Never: takes a surface that has an open grant.
 */
#include <string.h>

#include "grants/rules_impl.h"
#include "proto/reasons.h"

/* Loads the surface row into *s (the same row the grant path locks:
 * g/s/<surface>, its key in *k). False with o->err set on a store error. */
static bool
legacy_surface(const grants_env *e, const char *surface, gkey *k,
               Once__Grants__V1__SurfaceRow **s, grants_outcome *o)
{
    int rv;

    gkey_surface(k, surface);
    if ((rv = ROW_GET0(e->txn, k, once__grants__v1__surface_row, s)) != 0) {
        o->err = rv;
        return false;
    }
    return true;
}

void
grants_legacy_claim(const grants_env *e, const Once__V1__LegacyClaimRequest *r,
                    grants_outcome *o)
{
    Once__V1__LegacyClaimResponse resp = ONCE__V1__LEGACY_CLAIM_RESPONSE__INIT;
    Once__Grants__V1__SurfaceRow *s = NULL;
    gkey k;
    int rv;

    if (!legacy_surface(e, r->surface, &k, &s, o)) {
        return;
    }
    if (s->open_grant != 0) {
        grants_reject(
            e, o, r->surface, "", 0, "", "legacy", CODE(FAILED_PRECONDITION),
            REASON_ALREADY_OWNED,
            "surface %s has open grant %llu; the legacy path cannot own "
            "it",
            r->surface, (unsigned long long)s->open_grant);
    } else if (s->legacy_holder[0] != '\0' &&
               strcmp(s->legacy_holder, r->holder) != 0) {
        grants_reject(e, o, r->surface, "", 0, "", "legacy",
                      CODE(FAILED_PRECONDITION), REASON_ALREADY_OWNED,
                      "surface %s is held by %s", r->surface, s->legacy_holder);
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

    if (!legacy_surface(e, r->surface, &k, &s, o)) {
        return;
    }
    if (strcmp(s->legacy_holder, r->holder) != 0) {
        grants_fail(o, CODE(FAILED_PRECONDITION), REASON_NOT_HOLDER,
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
