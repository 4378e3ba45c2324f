/*
 * replay.c — replays of a recorded OK whose reply carries credentials
 * (RequestGrant, Claim): the stored reply with every credential made
 * afresh, or withheld, after permission is evaluated again.
 *
 * Invariant: a stored credential never stands in for a permission since
 * withdrawn.
 * Never: stages a row (replays read only).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "grants/rules_impl.h"
#include "proto/reasons.h"

/* Fails o when the caller may no longer obtain credentials. Returns a
 * store error or 0. */
static int
replay_permitted(const grants_env *e, const char *what, grants_outcome *o)
{
    bool denied;
    int rv;

    if ((rv = grants_principal_denied(e, &denied)) == 0 && denied) {
        grants_fail(o, CODE(PERMISSION_DENIED), REASON_PRINCIPAL_DENIED,
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
    if ((rv = grants_grant_load(e, grant_id, &g)) != 0) {
        return rv;
    }
    rv = grants_credential_now(e, g, ttl, &sl->fresh, sl->reason,
                               sizeof(sl->reason), o);
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
