/*
 * svc_admin.c — once.v1.Admin: Stats.
 */
#include "dispatch.h"
#include "once.pb-c.h"
#include "server.h"

static void
admin_stats(server_call *c)
{
    Once__V1__StatsResponse resp = ONCE__V1__STATS_RESPONSE__INIT;
    server_stats *ss = &c->srv->stats;
    store_counters sc;

    store_counters_get(c->srv->st, &sc);
    resp.requests = atomic_load(&ss->requests);
    resp.replays = atomic_load(&ss->replays);
    resp.conflicts = atomic_load(&ss->conflicts);
    resp.rejected = atomic_load(&ss->rejected);
    resp.records_stored = atomic_load(&ss->records_stored);
    resp.leases_opened = atomic_load(&ss->leases_opened);
    resp.commits = sc.commits;
    resp.fsyncs = sc.fsyncs;
    call_reply(c, &resp.base);
}

const dispatch_entry svc_admin_methods[] = {
    {"/once.v1.Admin/Stats", 0, NULL, admin_stats},
};
const size_t svc_admin_count =
    sizeof(svc_admin_methods) / sizeof(svc_admin_methods[0]);
