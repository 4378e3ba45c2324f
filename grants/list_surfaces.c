/*
 * list_surfaces.c — ListSurfaces: the surfaces that need an operator's
 * eye (an open grant or a legacy holder, a pending queued row, recorded
 * rejections), in name order, a page at a time.
 *
 * Owns the surface summary of a page: its candidate names come from
 * three prefix scans (g/s/, g/j/, g/q/ of keys.h) through list_pages.c,
 * so a page never looks at more than GRANTS_LIST_SCAN_PER_PAGE times
 * page_size names per prefix; its page token is "ls1." and the hex of the
 * last name looked at.
 * Invariant: stages nothing (a read: no rpc id, no record, no write).
 * Never: lists a surface twice across the pages of one walk; returns a
 * token that does not name a valid surface.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "grants/rules_impl.h"

#define TOKEN_PREFIX "ls1."

bool
grants_check_list_surfaces(const Once__V1__ListSurfacesRequest *r,
                           char after[GRANTS_NAME_MAX + 1], grants_outcome *o)
{
    return grants_page_check(r->page_size, r->page_token, TOKEN_PREFIX, after,
                             o);
}

/* ---- one surface -------------------------------------------------------- */

typedef struct summary {
    Once__V1__SurfaceSummary m; /* points into the rows below */
    Once__Grants__V1__Placement *p;
    Once__Grants__V1__SurfaceRow *s;
    Once__Grants__V1__RejectionLog *log;
    Once__V1__Grant *open;
    Once__V1__WorkRow *pend;
    Once__V1__Rejection *last[GRANTS_LIST_LAST_REJECTIONS];
} summary;

static void
summary_fini(summary *x)
{
    ROW_FREE(x->p);
    ROW_FREE(x->s);
    ROW_FREE(x->log);
    ROW_FREE(x->open);
    ROW_FREE(x->pend);
    memset(x, 0, sizeof(*x));
}

/* Reads surface's rows into x; *listed: it has an open grant or holder, a
 * pending row or rejections. 0 or a store error. */
static int
summary_read(const grants_env *e, const char *surface, summary *x, bool *listed)
{
    uint64_t wid = 0;
    size_t nl;
    gkey k;
    int rv;

    once__v1__surface_summary__init(&x->m);
    gkey_placement(&k, surface);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__placement, &x->p)) != 0) {
        return rv;
    }
    gkey_surface(&k, surface);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__surface_row, &x->s)) !=
        0) {
        return rv;
    }
    gkey_rejections(&k, surface);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__rejection_log, &x->log)) !=
        0) {
        return rv;
    }
    if (x->s->open_grant != 0 &&
        (rv = grants_grant_load(e, x->s->open_grant, &x->open)) != 0) {
        return rv;
    }
    gkey_pending(&k, surface);
    if ((rv = rows_get_u64(e->txn, &k, &wid)) == 0) {
        if ((rv = grants_work_load(e, wid, &x->pend)) != 0) {
            return rv;
        }
    } else if (rv != ENOENT) {
        return rv;
    }
    if (x->pend != NULL &&
        x->pend->state != ONCE__V1__WORK_ROW__STATE__PENDING) {
        ROW_FREE(x->pend);
        x->pend = NULL;
    }
    x->m.surface = (char *)surface;
    x->m.open_grant = x->open;
    x->m.legacy_holder = x->s->legacy_holder;
    x->m.epoch = x->s->epoch;
    x->m.machine = x->p->machine;
    x->m.generation = x->p->generation;
    x->m.pending_work_id = x->pend != NULL ? x->pend->work_id : 0;
    x->m.pending_machine = x->pend != NULL ? x->pend->machine : "";
    x->m.rejections_kept = (uint32_t)x->log->n_rejections;
    nl = x->log->n_rejections < GRANTS_LIST_LAST_REJECTIONS
             ? x->log->n_rejections
             : GRANTS_LIST_LAST_REJECTIONS;
    for (size_t i = 0; i < nl; i++) { /* newest first */
        x->last[i] = x->log->rejections[x->log->n_rejections - 1 - i];
    }
    x->m.n_last_rejections = nl;
    x->m.last_rejections = x->last;
    *listed = x->open != NULL || x->s->legacy_holder[0] != '\0' ||
              x->pend != NULL || x->log->n_rejections > 0;
    return 0;
}

/* ---- the page ------------------------------------------------------------ */

static int
item_read(const grants_env *e, const char *name, void *item, bool *listed)
{
    return summary_read(e, name, item, listed);
}

static void
item_fini(void *item)
{
    summary_fini(item);
}

static const char *const prefixes[] = {"g/s/", "g/j/", "g/q/"};
static const grants_page_spec spec = {
    prefixes, 3, TOKEN_PREFIX, sizeof(summary), item_read, item_fini,
};

void
grants_list_surfaces(const grants_env *e,
                     const Once__V1__ListSurfacesRequest *r, grants_outcome *o)
{
    Once__V1__ListSurfacesResponse resp =
        ONCE__V1__LIST_SURFACES_RESPONSE__INIT;
    char after[GRANTS_NAME_MAX + 1];
    grants_page p;
    int rv;

    if (!grants_check_list_surfaces(r, after, o)) {
        return; /* validate refused it already; stays a refusal here */
    }
    if ((rv = grants_page_read(e, &spec, after, r->page_size, &p)) != 0) {
        goto err;
    }
    resp.next_page_token = p.next != NULL ? p.next : "";
    resp.n_surfaces = p.n;
    resp.surfaces = (Once__V1__SurfaceSummary **)p.ptrs;
    resp.read_unix_ms = e->now_ms;
err:
    grants_end(o, rv, &resp.base);
    grants_page_free(&spec, &p);
}
