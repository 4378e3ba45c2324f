/*
 * rejections.c — the surface's rejection log (g/j/<surface>): every
 * refusal of a start, a claim, a renewal or a legacy claim is kept there,
 * so the reason is on the server while the machine is silent.
 *
 * Owns the log's shape: at most GRANTS_REJECTIONS_MAX entries, oldest
 * dropped first; a repeat of the last entry counts up instead of adding.
 * Invariant: a rejection stages only its log entry (o->keep), nothing else.
 * Never: logs during a replay (e->read_only).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grants/rules_impl.h"

/* Whether r is the rejection these fields describe. */
static bool
rejection_same(const Once__V1__Rejection *r, const char *request_id,
               uint32_t attempt, const char *machine, const char *via,
               const char *reason)
{
    return r->attempt == attempt && strcmp(r->request_id, request_id) == 0 &&
           strcmp(r->machine, machine) == 0 && strcmp(r->via, via) == 0 &&
           strcmp(r->reason, reason) == 0;
}

void
grants_reject(const grants_env *e, grants_outcome *o, const char *surface,
              const char *request_id, uint32_t attempt, const char *machine,
              const char *via, int code, const char *reason, const char *fmt,
              ...)
{
    Once__Grants__V1__RejectionLog *log = NULL;
    Once__V1__Rejection rej = ONCE__V1__REJECTION__INIT;
    Once__V1__Rejection **list;
    size_t n, skip;
    va_list ap;
    gkey k;
    int rv;

    va_start(ap, fmt);
    grants_vfail(o, code, reason, fmt, ap);
    va_end(ap);

    if (e->read_only) {
        return;
    }
    gkey_rejections(&k, surface);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__rejection_log, &log)) !=
        0) {
        o->err = rv;
        return;
    }
    n = log->n_rejections;
    if (n > 0 && rejection_same(log->rejections[n - 1], request_id, attempt,
                                machine, via, o->reason)) {
        Once__V1__Rejection *last = log->rejections[n - 1];
        char *was = last->message;

        last->at_unix_ms = e->now_ms;
        last->message = o->message;
        last->repeats++;
        rv = rows_put(e->txn, &k, &log->base);
        last->message = was; /* the unpacked row's own, for ROW_FREE */
        ROW_FREE(log);
        if (rv != 0) {
            o->err = rv;
            return;
        }
        o->keep = true;
        return;
    }
    skip = n + 1 > GRANTS_REJECTIONS_MAX ? n + 1 - GRANTS_REJECTIONS_MAX : 0;
    if ((list = calloc(n + 1, sizeof(*list))) == NULL) {
        ROW_FREE(log);
        o->err = ENOMEM;
        return;
    }
    for (size_t i = skip; i < n; i++) {
        list[i - skip] = log->rejections[i];
    }
    rej.at_unix_ms = e->now_ms;
    rej.request_id = (char *)request_id;
    rej.attempt = attempt;
    rej.machine = (char *)machine;
    rej.reason = o->reason;
    rej.message = o->message;
    rej.via = (char *)via;
    list[n - skip] = &rej;
    {
        Once__Grants__V1__RejectionLog out =
            ONCE__GRANTS__V1__REJECTION_LOG__INIT;
        out.n_rejections = n - skip + 1;
        out.rejections = list;
        rv = rows_put(e->txn, &k, &out.base);
    }
    free(list);
    ROW_FREE(log);
    if (rv != 0) {
        o->err = rv;
        return;
    }
    o->keep = true;
}
