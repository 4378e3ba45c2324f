/*
 * placement.c — SetPlacement: where a surface's work starts (machine,
 * location) and its generation.
 *
 * Invariant: the generation moves only when the machine or the location
 * changes; an open grant is never moved — it is asked to stop and can no
 * longer start or renew.
 * Never: deletes or moves a grant.
 */
#include <string.h>

#include "grants/rules_impl.h"

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
        if ((rv = grants_grant_load(e, s->open_grant, &g)) != 0) {
            goto err;
        }
        g->stop_requested = true;
        if ((rv = grants_grant_store(e, g)) != 0) {
            goto err;
        }
        resp.stop_requested_grant = g->grant_id;
    }
err:
    grants_end(o, rv, &resp.base);
out:
    ROW_FREE(p);
    ROW_FREE(s);
    ROW_FREE(g);
}
