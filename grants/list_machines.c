/*
 * list_machines.c — ListMachines: the machines whose queue needs an
 * operator's eye (pending rows, kept expired rows, deleted), in name
 * order, a page at a time.
 *
 * Owns the machine summary of a page: its candidate names come from two
 * prefix scans (g/m/, g/d/ of keys.h) through list_pages.c, so a page
 * never looks at more than GRANTS_LIST_SCAN_PER_PAGE times page_size
 * names per prefix, and reads per name the queue, the deleted flag and at
 * most one work row (the newest expired); its page token is "lm1." and
 * the hex of the last name looked at.
 * Invariant: stages nothing (a read: no rpc id, no record, no write).
 * Never: lists a machine twice across the pages of one walk; returns a
 * token that does not name a valid machine.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "grants/rules_impl.h"

#define TOKEN_PREFIX "lm1."

bool
grants_check_list_machines(const Once__V1__ListMachinesRequest *r,
                           char after[GRANTS_NAME_MAX + 1], grants_outcome *o)
{
    return grants_page_check(r->page_size, r->page_token, TOKEN_PREFIX, after,
                             o);
}

/* Fills m for machine (m->machine points at it); *listed: pending or
 * expired rows, or deleted. 0 or a store error. */
static int
machine_read(const grants_env *e, const char *machine, void *item, bool *listed)
{
    Once__V1__MachineSummary *m = item;
    Once__Grants__V1__MachineQueue *q = NULL;
    Once__V1__WorkRow *w = NULL;
    bool deleted = false;
    int rv;

    once__v1__machine_summary__init(m);
    if ((rv = grants_machine_deleted(e, machine, &deleted)) != 0 ||
        (rv = grants_machine_queue_load(e, machine, &q)) != 0) {
        return rv;
    }
    m->machine = (char *)machine;
    m->deleted = deleted;
    m->pending = (uint32_t)q->n_pending;
    m->expired = (uint32_t)q->n_expired;
    if (q->n_expired > 0) { /* newest last */
        rv = grants_work_load(e, q->expired[q->n_expired - 1], &w);
        if (rv == 0) {
            m->newest_expired_unix_ms =
                w->enqueued_unix_ms + GRANTS_PENDING_MAX_MS;
        }
        ROW_FREE(w);
    }
    ROW_FREE(q);
    *listed = m->pending > 0 || m->expired > 0 || deleted;
    return rv;
}

static const char *const prefixes[] = {"g/m/", "g/d/"};
static const grants_page_spec spec = {
    prefixes,     2,    TOKEN_PREFIX, sizeof(Once__V1__MachineSummary),
    machine_read, NULL,
};

void
grants_list_machines(const grants_env *e,
                     const Once__V1__ListMachinesRequest *r, grants_outcome *o)
{
    Once__V1__ListMachinesResponse resp =
        ONCE__V1__LIST_MACHINES_RESPONSE__INIT;
    char after[GRANTS_NAME_MAX + 1];
    grants_page p;
    int rv;

    if (!grants_check_list_machines(r, after, o)) {
        return; /* validate refused it already; stays a refusal here */
    }
    if ((rv = grants_page_read(e, &spec, after, r->page_size, &p)) != 0) {
        goto err;
    }
    resp.next_page_token = p.next != NULL ? p.next : "";
    resp.n_machines = p.n;
    resp.machines = (Once__V1__MachineSummary **)p.ptrs;
    resp.read_unix_ms = e->now_ms;
err:
    grants_end(o, rv, &resp.base);
    grants_page_free(&spec, &p);
}
