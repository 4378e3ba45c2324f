/*
 * queue.c — the queue entry point of start grants: Enqueue writes the
 * destination into the row, Claim(machine) turns that machine's rows into
 * grants through the same grants_start as a local start, rows older than
 * 12 hours expire when their machine claims, deletions keep open grants.
 *
 * Invariant: a row's machine, location and generation are written once, at
 * Enqueue, and never changed; a row appears only in its own machine's
 * MachineQueue (g/m/<machine>), so a claim can never see another machine's
 * rows — there is no "find an idle machine" anywhere.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grants/rules_impl.h"
#include "proto/reasons.h"

/* Clears g/q/<surface> when it names work_id. */
static int
pending_clear(const grants_env *e, const char *surface, uint64_t work_id)
{
    uint64_t cur;
    gkey k;
    int rv;

    gkey_pending(&k, surface);
    rv = rows_get_u64(e->txn, &k, &cur);
    if (rv == ENOENT) {
        return 0;
    }
    if (rv != 0) {
        return rv;
    }
    return cur == work_id ? store_txn_del(e->txn, k.b, k.n) : 0;
}

/* Closes a pending row with a state and reason and takes it out of its
 * machine's queue (q, staged by the caller) and of the surface pointer. */
static int
work_close(const grants_env *e, Once__V1__WorkRow *w,
           Once__Grants__V1__MachineQueue *q, Once__V1__WorkRow__State state,
           const char *reason)
{
    Once__V1__WorkRow nw = *w; /* shallow: packed only */
    int rv;

    nw.state = state;
    nw.reason = (char *)reason;
    if (q != NULL) {
        rows_ids_drop(q->pending, &q->n_pending, w->work_id);
    }
    if ((rv = grants_work_store(e, &nw)) != 0) {
        return rv;
    }
    w->state = state;
    return pending_clear(e, w->surface, w->work_id);
}

/* The start a row asks for: its request and destination (gr's other
 * fields untouched). */
static void
work_start_request(const Once__V1__WorkRow *w,
                   Once__V1__RequestGrantRequest *gr)
{
    gr->request_id = w->request_id;
    gr->attempt = w->attempt;
    gr->surface = w->surface;
    gr->machine = w->machine;
    gr->location = w->location;
    gr->generation = w->generation;
    gr->payload = w->payload;
}

/* ---- Enqueue ------------------------------------------------------------ */

/* The (request_id, attempt) lock, first, as RequestGrant takes it: 1 when
 * the pair is unused; 0 when decided — a resend of an accepted request
 * answered with its grant as a CLAIMED row (no new row), or o refused
 * (GRANT_CONFLICT); else a store error. */
static int
enqueue_locked(const grants_env *e, const Once__V1__EnqueueRequest *r,
               const Once__Grants__V1__Placement *p, grants_outcome *o)
{
    Once__V1__RequestGrantRequest gr = ONCE__V1__REQUEST_GRANT_REQUEST__INIT;
    Once__V1__EnqueueResponse resp = ONCE__V1__ENQUEUE_RESPONSE__INIT;
    Once__V1__WorkRow row = ONCE__V1__WORK_ROW__INIT;
    uint64_t grant_id = 0;
    int rv;

    row.request_id = r->request_id;
    row.attempt = r->attempt;
    row.surface = r->surface;
    row.machine = p->machine;
    row.location = p->location;
    row.generation = p->generation;
    row.payload = r->payload;
    work_start_request(&row, &gr);
    rv = grants_start_lock(e, &gr, "queue", &grant_id, o);
    if (rv != 0 || o->reason[0] != '\0') {
        return rv;
    }
    row.state = ONCE__V1__WORK_ROW__STATE__CLAIMED;
    row.grant_id = grant_id;
    row.reason = REASON_ALREADY_GRANTED;
    resp.row = &row;
    grants_ok(o, &resp.base);
    return 0;
}

/* A pending row replaced by a newer request is a recorded fact: the
 * replaced request goes on the surface's rejection log as REPLACED, naming
 * the newer one (a resend of the same request replaces nothing). Returns a
 * store error or 0. */
static int
enqueue_log_replaced(const grants_env *e, const Once__V1__WorkRow *old,
                     const Once__V1__EnqueueRequest *r)
{
    grants_outcome ro;

    if (old->attempt == r->attempt &&
        strcmp(old->request_id, r->request_id) == 0) {
        return 0;
    }
    memset(&ro, 0, sizeof(ro));
    grants_reject(e, &ro, old->surface, old->request_id, old->attempt,
                  old->machine, "queue", CODE(FAILED_PRECONDITION),
                  REASON_REPLACED,
                  "work row %llu replaced by request %s attempt %u before "
                  "any claim",
                  (unsigned long long)old->work_id, r->request_id, r->attempt);
    return ro.err;
}

void
grants_enqueue(const grants_env *e, const Once__V1__EnqueueRequest *r,
               grants_outcome *o)
{
    Once__V1__EnqueueResponse resp = ONCE__V1__ENQUEUE_RESPONSE__INIT;
    Once__Grants__V1__Placement *p = NULL;
    Once__Grants__V1__MachineQueue *q = NULL, *oq = NULL;
    Once__V1__WorkRow *old = NULL, *row = NULL;
    Once__V1__WorkRow nw = ONCE__V1__WORK_ROW__INIT;
    uint64_t old_id = 0, next_id;
    gkey k;
    int rv;

    /* The destination is the placement of this moment. */
    gkey_placement(&k, r->surface);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__placement, &p)) != 0) {
        goto err;
    }
    if ((rv = enqueue_locked(e, r, p, o)) != 1) {
        if (rv != 0) {
            goto err;
        }
        goto out;
    }
    gkey_pending(&k, r->surface);
    rv = rows_get_u64(e->txn, &k, &old_id);
    if (rv == 0) {
        if ((rv = grants_work_load(e, old_id, &old)) != 0) {
            goto err;
        }
    } else if (rv != ENOENT) {
        goto err;
    }
    if (old != NULL && old->state == ONCE__V1__WORK_ROW__STATE__PENDING &&
        p->generation == old->generation &&
        strcmp(p->machine, old->machine) == 0 &&
        strcmp(p->location, old->location) == 0) {
        /* A newer pending row of the surface replaces the older one in
         * place: the content changes, the destination does not. */
        nw = *old;
        nw.request_id = r->request_id;
        nw.attempt = r->attempt;
        nw.payload = r->payload;
        nw.enqueued_unix_ms = e->now_ms;
        nw.replaced = old->replaced + 1;
        if ((rv = grants_work_store(e, &nw)) != 0 ||
            (rv = enqueue_log_replaced(e, old, r)) != 0) {
            goto err;
        }
        resp.replaced = true;
        if ((rv = grants_work_load(e, nw.work_id, &row)) != 0) {
            goto err;
        }
        resp.row = row;
        grants_ok(o, &resp.base);
        goto out;
    }
    if (old != NULL && old->state == ONCE__V1__WORK_ROW__STATE__PENDING) {
        /* The placement changed since the old row was enqueued: it could
         * never start (its generation is gone). Close it where it is, as a
         * fact, rather than move it. */
        if ((rv = grants_machine_queue_load(e, old->machine, &oq)) != 0 ||
            (rv = work_close(e, old, oq, ONCE__V1__WORK_ROW__STATE__REJECTED,
                             REASON_PLACEMENT_CHANGED)) != 0 ||
            (rv = grants_machine_queue_store(e, old->machine, oq)) != 0) {
            goto err;
        }
    }
    gkey_next_work(&k);
    if ((rv = rows_get_u64(e->txn, &k, &next_id)) != 0 && rv != ENOENT) {
        goto err;
    }
    if (next_id == 0) {
        next_id = 1;
    }
    if ((rv = rows_put_u64(e->txn, &k, next_id + 1)) != 0) {
        goto err;
    }
    nw.work_id = next_id;
    nw.request_id = r->request_id;
    nw.attempt = r->attempt;
    nw.surface = r->surface;
    nw.payload = r->payload;
    nw.enqueued_unix_ms = e->now_ms;
    if (p->generation == 0) {
        /* No destination: kept, but outside every queue. */
        nw.state = ONCE__V1__WORK_ROW__STATE__UNROUTED;
        nw.reason = REASON_NO_PLACEMENT;
    } else {
        nw.machine = p->machine;
        nw.location = p->location;
        nw.generation = p->generation;
        nw.state = ONCE__V1__WORK_ROW__STATE__PENDING;
        if ((rv = grants_machine_queue_load(e, p->machine, &q)) != 0 ||
            (rv = rows_ids_push(&q->pending, &q->n_pending, nw.work_id)) != 0 ||
            (rv = grants_machine_queue_store(e, p->machine, q)) != 0) {
            goto err;
        }
        gkey_pending(&k, r->surface);
        if ((rv = rows_put_u64(e->txn, &k, nw.work_id)) != 0) {
            goto err;
        }
    }
    if ((rv = grants_work_store(e, &nw)) != 0 ||
        (rv = grants_work_load(e, nw.work_id, &row)) != 0) {
        goto err;
    }
    resp.row = row;
err:
    grants_end(o, rv, &resp.base);
out:
    ROW_FREE(p);
    ROW_FREE(q);
    ROW_FREE(oq);
    ROW_FREE(old);
    ROW_FREE(row);
}

/* Replaces *w by its row as now staged. */
static int
work_reload(const grants_env *e, Once__V1__WorkRow **w)
{
    Once__V1__WorkRow *old = *w;
    int rv = grants_work_load(e, old->work_id, w);

    if (rv != 0) {
        *w = old;
        return rv;
    }
    ROW_FREE(old);
    return 0;
}

/* ---- Claim -------------------------------------------------------------- */

typedef struct claim_out {
    Once__V1__Claimed **claimed;
    size_t n_claimed;
    Once__V1__WorkRow **expired;
    size_t n_expired;
    Once__V1__WorkRow **skipped;
    size_t n_skipped;
} claim_out;

static int
push_ptr(void ***a, size_t *n, void *p)
{
    void **b = realloc(*a, (*n + 1) * sizeof(*b));

    if (b == NULL) {
        return ENOMEM;
    }
    b[(*n)++] = p;
    *a = b;
    return 0;
}

static void
claim_out_free(claim_out *co)
{
    for (size_t i = 0; i < co->n_claimed; i++) {
        Once__V1__Claimed *c = co->claimed[i];
        ROW_FREE(c->row);
        ROW_FREE(c->grant);
        if (c->credential != NULL) {
            grants_credential_free(c->credential);
        }
        free(c);
    }
    for (size_t i = 0; i < co->n_expired; i++) {
        ROW_FREE(co->expired[i]);
    }
    for (size_t i = 0; i < co->n_skipped; i++) {
        ROW_FREE(co->skipped[i]);
    }
    free(co->claimed);
    free(co->expired);
    free(co->skipped);
}

/* One pending row of the claiming machine: expire it, or ask for its grant
 * through grants_start exactly as a local start would. */
static int
claim_row(const grants_env *e, const Once__V1__ClaimRequest *r,
          Once__Grants__V1__MachineQueue *q, Once__V1__WorkRow *w,
          size_t *granted, claim_out *co)
{
    Once__V1__RequestGrantRequest gr = ONCE__V1__REQUEST_GRANT_REQUEST__INIT;
    grants_outcome ro;
    Once__V1__Grant *g = NULL;
    Once__V1__Credential *cred = NULL;
    Once__V1__Claimed *cl;
    char withheld[64];
    bool existing;
    int rv;

    if (e->now_ms > w->enqueued_unix_ms &&
        e->now_ms - w->enqueued_unix_ms > GRANTS_PENDING_MAX_MS) {
        /* Not moved: expired on its own machine, and kept. */
        if ((rv = work_close(e, w, q, ONCE__V1__WORK_ROW__STATE__EXPIRED,
                             REASON_PENDING_OVER_12H)) != 0 ||
            (rv = rows_ids_push_newest(&q->expired, &q->n_expired, w->work_id,
                                       GRANTS_EXPIRED_MAX)) != 0 ||
            (rv = work_reload(e, &w)) != 0) {
            ROW_FREE(w);
            return rv;
        }
        return push_ptr((void ***)&co->expired, &co->n_expired, w);
    }
    if (*granted >= (r->max != 0 ? r->max : 16)) {
        return push_ptr((void ***)&co->skipped, &co->n_skipped, w);
    }
    work_start_request(w, &gr);
    gr.credential_ttl_ms = r->credential_ttl_ms;
    memset(&ro, 0, sizeof(ro));
    grants_start(e, &gr, "queue", &g, &cred, &existing, withheld,
                 sizeof(withheld), &ro);
    if (ro.err != 0) {
        return ro.err;
    }
    if (ro.code == CODE(OK) && existing) {
        /* The grant was already handed out (by an earlier claim or a local
         * start): never a second time from another row. */
        ROW_FREE(g);
        if (cred != NULL) {
            grants_credential_free(cred);
        }
        if ((rv = work_close(e, w, q, ONCE__V1__WORK_ROW__STATE__REJECTED,
                             REASON_ALREADY_GRANTED)) != 0 ||
            (rv = work_reload(e, &w)) != 0) {
            ROW_FREE(w);
            return rv;
        }
        return push_ptr((void ***)&co->skipped, &co->n_skipped, w);
    }
    if (ro.code == CODE(OK)) {
        w->grant_id = g->grant_id;
        if ((rv = work_close(e, w, q, ONCE__V1__WORK_ROW__STATE__CLAIMED,
                             "")) != 0 ||
            (rv = work_reload(e, &w)) != 0 ||
            (cl = malloc(sizeof(*cl) + sizeof(withheld))) == NULL) {
            ROW_FREE(w);
            ROW_FREE(g);
            if (cred != NULL) {
                grants_credential_free(cred);
            }
            return rv != 0 ? rv : ENOMEM;
        }
        once__v1__claimed__init(cl);
        cl->row = w;
        cl->grant = g;
        cl->credential = cred;
        if (cred == NULL) {
            /* Without a credential the reply always says why. */
            cl->credential_withheld = (char *)(cl + 1);
            snprintf(cl->credential_withheld, sizeof(withheld), "%s",
                     withheld[0] != '\0' ? withheld : REASON_GRANT_CLOSED);
        }
        (*granted)++;
        return push_ptr((void ***)&co->claimed, &co->n_claimed, cl);
    }
    if (strcmp(ro.reason, REASON_ALREADY_OWNED) != 0 &&
        strcmp(ro.reason, REASON_PREVIOUS_ATTEMPT_OPEN) != 0) {
        /* It can never start as written: closed with the reason (which is
         * also in the surface's rejection log), never moved. */
        if ((rv = work_close(e, w, q, ONCE__V1__WORK_ROW__STATE__REJECTED,
                             ro.reason)) != 0 ||
            (rv = work_reload(e, &w)) != 0) {
            ROW_FREE(w);
            return rv;
        }
    } else {
        /* The surface is busy: the row stays pending on this machine. */
        Once__V1__WorkRow nw = *w;
        nw.reason = ro.reason;
        if ((rv = grants_work_store(e, &nw)) != 0 ||
            (rv = work_reload(e, &w)) != 0) {
            ROW_FREE(w);
            return rv;
        }
    }
    return push_ptr((void ***)&co->skipped, &co->n_skipped, w);
}

/* A copy of q's pending ids, for a loop that changes q: *ids is malloc'd
 * (free; NULL when there are none). Returns 0 or ENOMEM. */
static int
queue_pending_copy(const Once__Grants__V1__MachineQueue *q, uint64_t **ids,
                   size_t *n)
{
    *n = q->n_pending;
    *ids = NULL;
    if (*n == 0) {
        return 0;
    }
    if ((*ids = malloc(*n * sizeof(**ids))) == NULL) {
        return ENOMEM;
    }
    memcpy(*ids, q->pending, *n * sizeof(**ids));
    return 0;
}

void
grants_claim(const grants_env *e, const Once__V1__ClaimRequest *r,
             grants_outcome *o)
{
    Once__V1__ClaimResponse resp = ONCE__V1__CLAIM_RESPONSE__INIT;
    Once__Grants__V1__MachineQueue *q = NULL;
    claim_out co;
    uint64_t *ids = NULL;
    size_t n, granted = 0;
    int rv;

    memset(&co, 0, sizeof(co));
    /* Only this machine's queue: rows are there only if their destination
     * is this machine. Nothing else is looked at. */
    if ((rv = grants_machine_queue_load(e, r->machine, &q)) != 0) {
        goto err;
    }
    if ((rv = queue_pending_copy(q, &ids, &n)) != 0) {
        goto err;
    }
    for (size_t i = 0; i < n; i++) {
        Once__V1__WorkRow *w = NULL;
        if ((rv = grants_work_load(e, ids[i], &w)) != 0) {
            goto err;
        }
        if (w->state != ONCE__V1__WORK_ROW__STATE__PENDING ||
            strcmp(w->machine, r->machine) != 0) {
            rows_ids_drop(q->pending, &q->n_pending, w->work_id);
            ROW_FREE(w);
            continue;
        }
        if ((rv = claim_row(e, r, q, w, &granted, &co)) != 0) {
            goto err;
        }
    }
    if ((rv = grants_machine_queue_store(e, r->machine, q)) != 0) {
        goto err;
    }
    resp.n_claimed = co.n_claimed;
    resp.claimed = co.claimed;
    resp.n_expired = co.n_expired;
    resp.expired = co.expired;
    resp.n_skipped = co.n_skipped;
    resp.skipped = co.skipped;
err:
    grants_end(o, rv, &resp.base);
    claim_out_free(&co);
    free(ids);
    ROW_FREE(q);
}

/* ---- deletions ---------------------------------------------------------- */

void
grants_delete_machine(const grants_env *e,
                      const Once__V1__DeleteMachineRequest *r,
                      grants_outcome *o)
{
    Once__V1__DeleteMachineResponse resp =
        ONCE__V1__DELETE_MACHINE_RESPONSE__INIT;
    Once__Grants__V1__MachineQueue *q = NULL;
    uint64_t *ids = NULL;
    size_t n;
    gkey k;
    int rv;

    gkey_machine_deleted(&k, r->machine);
    if ((rv = rows_set_flag(e->txn, &k, true)) != 0 ||
        (rv = grants_machine_queue_load(e, r->machine, &q)) != 0) {
        goto err;
    }
    if ((rv = queue_pending_copy(q, &ids, &n)) != 0) {
        goto err;
    }
    for (size_t i = 0; i < n; i++) {
        Once__V1__WorkRow *w = NULL;
        if ((rv = grants_work_load(e, ids[i], &w)) != 0) {
            goto err;
        }
        if (w->state == ONCE__V1__WORK_ROW__STATE__PENDING) {
            rv = work_close(e, w, q, ONCE__V1__WORK_ROW__STATE__DELETED,
                            REASON_MACHINE_DELETED);
            resp.rows_deleted++;
        }
        ROW_FREE(w);
        if (rv != 0) {
            goto err;
        }
    }
    q->n_pending = 0;
    if ((rv = grants_machine_queue_store(e, r->machine, q)) != 0) {
        goto err;
    }
    /* Open grants are uncertain executions: kept, only reported. */
    resp.n_open_grants_kept = q->n_open_grants;
    resp.open_grants_kept = q->open_grants;
err:
    grants_end(o, rv, &resp.base);
    free(ids);
    ROW_FREE(q);
}

void
grants_delete_work(const grants_env *e, const Once__V1__DeleteWorkRequest *r,
                   grants_outcome *o)
{
    Once__V1__DeleteWorkResponse resp = ONCE__V1__DELETE_WORK_RESPONSE__INIT;
    Once__Grants__V1__MachineQueue *q = NULL;
    Once__V1__WorkRow *w = NULL, *row = NULL;
    int rv;

    rv = grants_work_load(e, r->work_id, &w);
    if (rv == ENOENT) {
        grants_fail(o, CODE(NOT_FOUND), REASON_NO_WORK, "no work row %llu",
                    (unsigned long long)r->work_id);
        return;
    }
    if (rv != 0) {
        goto err;
    }
    if (w->state == ONCE__V1__WORK_ROW__STATE__PENDING) {
        if ((rv = grants_machine_queue_load(e, w->machine, &q)) != 0 ||
            (rv = work_close(e, w, q, ONCE__V1__WORK_ROW__STATE__DELETED,
                             REASON_DELETED)) != 0 ||
            (rv = grants_machine_queue_store(e, w->machine, q)) != 0) {
            goto err;
        }
    } else if (w->state != ONCE__V1__WORK_ROW__STATE__DELETED) {
        /* A claimed row's grant (if any) is untouched: only the row is
         * marked. */
        if ((rv = work_close(e, w, NULL, ONCE__V1__WORK_ROW__STATE__DELETED,
                             REASON_DELETED)) != 0) {
            goto err;
        }
    }
    if ((rv = grants_work_load(e, r->work_id, &row)) != 0) {
        goto err;
    }
    resp.row = row;
err:
    grants_end(o, rv, &resp.base);
    ROW_FREE(q);
    ROW_FREE(w);
    ROW_FREE(row);
}

void
grants_list_queue(const grants_env *e, const Once__V1__ListQueueRequest *r,
                  grants_outcome *o)
{
    Once__V1__ListQueueResponse resp = ONCE__V1__LIST_QUEUE_RESPONSE__INIT;
    Once__Grants__V1__MachineQueue *q = NULL;
    Once__V1__WorkRow **pend = NULL, **exp = NULL;
    size_t np = 0, ne = 0;
    bool deleted;
    gkey k;
    int rv;

    gkey_machine_deleted(&k, r->machine);
    if ((rv = rows_exists(e->txn, &k, &deleted)) != 0 ||
        (rv = grants_machine_queue_load(e, r->machine, &q)) != 0) {
        goto err;
    }
    if ((pend = calloc(q->n_pending + 1, sizeof(*pend))) == NULL ||
        (exp = calloc(q->n_expired + 1, sizeof(*exp))) == NULL) {
        rv = ENOMEM;
        goto err;
    }
    for (size_t i = 0; i < q->n_pending; i++) {
        if ((rv = grants_work_load(e, q->pending[i], &pend[np])) != 0) {
            goto err;
        }
        np++;
    }
    for (size_t i = 0; i < q->n_expired; i++) {
        if ((rv = grants_work_load(e, q->expired[i], &exp[ne])) != 0) {
            goto err;
        }
        ne++;
    }
    resp.n_pending = np;
    resp.pending = pend;
    resp.n_expired = ne;
    resp.expired = exp;
    resp.machine_deleted = deleted;
err:
    grants_end(o, rv, &resp.base);
    for (size_t i = 0; i < np; i++) {
        ROW_FREE(pend[i]);
    }
    for (size_t i = 0; i < ne; i++) {
        ROW_FREE(exp[i]);
    }
    free(pend);
    free(exp);
    ROW_FREE(q);
}
