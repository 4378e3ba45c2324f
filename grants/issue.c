/*
 * issue.c — the credential an accepted grant carries: minted from the
 * grant's own fields, or withheld with its reason when the grant can no
 * longer start.
 *
 * Owns the contents of a CredentialBody (credential.c signs it).
 * Invariant: a credential is minted only for an open, uncancelled grant of
 * a live machine whose placement generation still holds.
 * Never: stages a row; a credential's expiry is not an event.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "grants/rules_impl.h"
#include "proto/reasons.h"

int
grants_issue(const grants_env *e, const Once__V1__Grant *g, uint64_t ttl,
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

/*
 * The credential accepted grant g may carry now: minted afresh into *credp
 * (ttl 0: the default), or withheld, with the reason in withheld, when the
 * grant is closed or cancelled, its machine deleted or its surface placed
 * again. A mint failure fails o (MINT_FAILED). The caller has checked the
 * principal's permission. Reads only. Returns a store error or 0.
 */
int
grants_credential_now(const grants_env *e, const Once__V1__Grant *g,
                      uint64_t ttl, Once__V1__Credential **credp,
                      char *withheld, size_t withheld_len, grants_outcome *o)
{
    Once__Grants__V1__Placement *p = NULL;
    bool deleted;
    gkey k;
    int rv;

    *credp = NULL;
    withheld[0] = '\0';
    gkey_placement(&k, g->surface);
    if ((rv = grants_machine_deleted(e, g->machine, &deleted)) != 0 ||
        (rv = ROW_GET0(e->txn, &k, once__grants__v1__placement, &p)) != 0) {
        return rv;
    }
    if (g->state != ONCE__V1__GRANT_STATE__GRANT_OPEN) {
        snprintf(withheld, withheld_len, REASON_GRANT_CLOSED);
    } else if (g->cancelled) {
        snprintf(withheld, withheld_len, REASON_GRANT_CANCELLED);
    } else if (deleted) {
        snprintf(withheld, withheld_len, REASON_MACHINE_DELETED);
    } else if (g->stop_requested || p->generation != g->generation) {
        snprintf(withheld, withheld_len, REASON_PLACEMENT_CHANGED);
    } else if (grants_issue(e, g, ttl, credp) != 0) {
        grants_fail(o, CODE(INTERNAL), REASON_MINT_FAILED,
                    "could not mint a credential");
    }
    ROW_FREE(p);
    return 0;
}
