/*
 * surface.c — GetSurface: one surface as the server sees it (placement,
 * open grant, legacy holder, history, rejections, pending work).
 *
 * Never: stages a row.
 */
#include <errno.h>
#include <stdlib.h>

#include "grants/rules_impl.h"

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
    if (s->open_grant != 0 &&
        (rv = grants_grant_load(e, s->open_grant, &open)) != 0) {
        goto err;
    }
    if ((hist = calloc(s->n_history + 1, sizeof(*hist))) == NULL) {
        rv = ENOMEM;
        goto err;
    }
    for (size_t i = 0; i < s->n_history; i++) {
        if ((rv = grants_grant_load(e, s->history[i], &hist[nh])) != 0) {
            goto err;
        }
        nh++;
    }
    gkey_pending(&k, r->surface);
    rv = rows_get_u64(e->txn, &k, &wid);
    if (rv == 0) {
        if ((rv = grants_work_load(e, wid, &pend)) != 0) {
            goto err;
        }
    } else if (rv != ENOENT) {
        goto err;
    }
    rv = 0; /* ENOENT: nothing pending */
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
err:
    grants_end(o, rv, &resp.base);
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
