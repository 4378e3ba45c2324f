/*
 * grant_rows.c — the rows every grant rule reads or stages (rules_impl.h):
 * a grant, a work row, a machine's queue and its open grants, the denied
 * and deleted flags.
 *
 * Owns nothing but the way to these rows: one key, one message type each.
 * Invariant: a machine's open grants and its pending work live in one row
 * (g/m/<machine>), read and staged whole through the same two functions.
 * Never: decides a rule or commits.
 */
#include <errno.h>

#include "grants/rules_impl.h"
#include "proto/reasons.h"

int
grants_principal_denied(const grants_env *e, bool *denied)
{
    gkey k;

    gkey_denied(&k, e->principal[0] != '\0' ? e->principal : "anonymous");
    return rows_exists(e->txn, &k, denied);
}

int
grants_machine_deleted(const grants_env *e, const char *machine, bool *deleted)
{
    gkey k;

    gkey_machine_deleted(&k, machine);
    return rows_exists(e->txn, &k, deleted);
}

int
grants_grant_load(const grants_env *e, uint64_t id, Once__V1__Grant **g)
{
    gkey k;

    gkey_grant(&k, id);
    return ROW_GET(e->txn, &k, once__v1__grant, g);
}

int
grants_grant_store(const grants_env *e, const Once__V1__Grant *g)
{
    gkey k;

    gkey_grant(&k, g->grant_id);
    return rows_put(e->txn, &k, &g->base);
}

bool
grants_grant_named(const grants_env *e, uint64_t id, Once__V1__Grant **g,
                   grants_outcome *o)
{
    int rv = grants_grant_load(e, id, g);

    if (rv == ENOENT) {
        grants_fail(o, CODE(NOT_FOUND), REASON_NO_GRANT, "no grant %llu",
                    (unsigned long long)id);
        return false;
    }
    if (rv != 0) {
        o->err = rv;
        return false;
    }
    return true;
}

int
grants_work_load(const grants_env *e, uint64_t id, Once__V1__WorkRow **w)
{
    gkey k;

    gkey_work(&k, id);
    return ROW_GET(e->txn, &k, once__v1__work_row, w);
}

int
grants_work_store(const grants_env *e, const Once__V1__WorkRow *w)
{
    gkey k;

    gkey_work(&k, w->work_id);
    return rows_put(e->txn, &k, &w->base);
}

int
grants_machine_queue_load(const grants_env *e, const char *machine,
                          Once__Grants__V1__MachineQueue **q)
{
    gkey k;

    gkey_machine(&k, machine);
    return ROW_GET0(e->txn, &k, once__grants__v1__machine_queue, q);
}

int
grants_machine_queue_store(const grants_env *e, const char *machine,
                           const Once__Grants__V1__MachineQueue *q)
{
    gkey k;

    gkey_machine(&k, machine);
    return rows_put(e->txn, &k, &q->base);
}

int
grants_machine_open_drop(const grants_env *e, const char *machine, uint64_t id)
{
    Once__Grants__V1__MachineQueue *q = NULL;
    int rv;

    if ((rv = grants_machine_queue_load(e, machine, &q)) != 0) {
        return rv;
    }
    rows_ids_drop(q->open_grants, &q->n_open_grants, id);
    rv = grants_machine_queue_store(e, machine, q);
    ROW_FREE(q);
    return rv;
}

int
grants_machine_open_add(const grants_env *e, const char *machine, uint64_t id)
{
    Once__Grants__V1__MachineQueue *q = NULL;
    int rv;

    if ((rv = grants_machine_queue_load(e, machine, &q)) != 0) {
        return rv;
    }
    if ((rv = rows_ids_push(&q->open_grants, &q->n_open_grants, id)) == 0) {
        rv = grants_machine_queue_store(e, machine, q);
    }
    ROW_FREE(q);
    return rv;
}
