/*
 * svc_lease.c — once.v1.Lease: OpenLease, RenewLease, CloseLease,
 * LeaseInfo.
 *
 * None of these carries an rpc id: OpenLease cannot (the caller has no
 * client id yet) — a lost reply leaks an unused id, never a reused one —
 * and renewing or closing twice is harmless. Every reply still leaves
 * after the transactions before it are durable, so a LEASE_EXPIRED or
 * "closed" answer is never taken back by a crash. The lease table and its
 * durable transitions live in lease/.
 * Scoping (auth.h): a lease belongs to the authenticated principal that
 * opened it; RenewLease, RenewLeases and CloseLease act only on the
 * caller's own leases, LeaseInfo shows only those (an operator sees all).
 * With authentication on, an id that is not the caller's — another
 * principal's, never issued, or collected — gets one answer,
 * PERMISSION_DENIED/NOT_YOUR_LEASE, so no principal can probe which ids
 * exist (OPEN mode keeps NOT_FOUND/UNKNOWN_CLIENT for a never-issued id).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "server/auth.h"
#include "lease/lease.h"
#include "server/lease_wire.h"
#include "proto/once.pb-c.h"
#include "proto/reasons.h"
#include "server/service.h"

#define LEASE_TTL_MIN_MS    100ULL
#define LEASE_PRINCIPAL_MAX 128

static void
lease_open_validate(server_call *c)
{
    const Once__V1__OpenLeaseRequest *r =
        (const Once__V1__OpenLeaseRequest *)c->req;
    uint64_t max = c->env->cfg.lease_ttl_max_ms;

    if (r->ttl_ms != 0 && (r->ttl_ms < LEASE_TTL_MIN_MS || r->ttl_ms > max)) {
        call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_BAD_TTL,
                  "ttl must be between %llums and %llums, got %llums",
                  LEASE_TTL_MIN_MS, (unsigned long long)max,
                  (unsigned long long)r->ttl_ms);
        return;
    }
    if (strlen(r->principal) > LEASE_PRINCIPAL_MAX) {
        call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_BAD_PRINCIPAL,
                  "principal is longer than %d bytes", LEASE_PRINCIPAL_MAX);
        return;
    }
    /* Authenticated, a lease is always the caller's own. */
    if (r->principal[0] != '\0' &&
        strcmp(auth_lease_principal(c, r->principal), r->principal) != 0) {
        call_fail(c, ONCE__V1__CODE__PERMISSION_DENIED,
                  REASON_NOT_YOUR_PRINCIPAL,
                  "a lease belongs to the principal that opens it; leave "
                  "OpenLeaseRequest.principal empty or name yourself");
    }
}

/*
 * The caps on live leases and the disk floor, checked before a lease is
 * opened. Leases past their TTL that no one has ended yet still count: the
 * collector ends them within a pass. Returns false with the outcome set.
 */
static bool
lease_open_admit(server_call *c, const char *principal)
{
    const exec_env *env = c->env;
    uint64_t all = lease_table_live(env->leases);
    uint64_t mine = lease_table_live_of(env->leases, principal);

    if (env->cfg.lease_max_principal > 0 &&
        mine >= env->cfg.lease_max_principal) {
        STATS_INC(env->stats, lease_quota);
        call_fail(c, ONCE__V1__CODE__RESOURCE_EXHAUSTED, REASON_LEASE_QUOTA,
                  "principal \"%.64s\" holds %llu live leases, the most "
                  "one principal may hold (onced --lease-max-per-principal); "
                  "close leases it no longer uses",
                  principal, (unsigned long long)mine);
        return false;
    }
    if (env->cfg.lease_max > 0 && all >= env->cfg.lease_max) {
        STATS_INC(env->stats, lease_capacity);
        call_fail(c, ONCE__V1__CODE__RESOURCE_EXHAUSTED, REASON_LEASE_CAPACITY,
                  "onced holds %llu live leases, the most it allows "
                  "(onced --lease-max); try again once leases are closed or "
                  "have expired",
                  (unsigned long long)all);
        return false;
    }
    if (disk_floor_low(env->disk)) {
        atomic_fetch_add(&env->disk->refused, 1);
        call_fail(c, ONCE__V1__CODE__RESOURCE_EXHAUSTED, REASON_DISK_LOW,
                  "the data folder's disk is below its free-space floor "
                  "(onced --disk-free-min); no new lease until space comes "
                  "back");
        return false;
    }
    return true;
}

static void
lease_open_exec(server_call *c)
{
    const Once__V1__OpenLeaseRequest *r =
        (const Once__V1__OpenLeaseRequest *)c->req;
    Once__V1__OpenLeaseResponse resp = ONCE__V1__OPEN_LEASE_RESPONSE__INIT;
    uint64_t ttl = r->ttl_ms != 0 ? r->ttl_ms : c->env->cfg.lease_ttl_ms;
    const char *principal = auth_lease_principal(c, r->principal);
    lease_entry *e;
    int rv;

    if (!lease_open_admit(c, principal)) {
        return;
    }
    if ((rv = lease_open(c->env->leases, c->txn, principal, ttl, c->now_ms,
                         &e)) != 0) {
        call_store_error(c, rv);
        return;
    }
    STATS_INC(c->env->stats, leases_opened);
    resp.client_id = e->client_id;
    resp.ttl_ms = ttl;
    resp.max_request_bytes = c->env->cfg.recv_max;
    call_reply(c, &resp.base);
}

/*
 * The live lease of client_id, or NULL with the outcome set. A lease past
 * its TTL is ended here (EXPIRED staged in the call's transaction).
 */
static lease_entry *
lease_find_live(server_call *c, uint64_t client_id)
{
    lease_entry *e = lease_table_find(c->env->leases, client_id);

    if (!auth_lease_scope(c, client_id, e != NULL,
                          e != NULL ? e->principal : NULL, false)) {
        return NULL;
    }
    if (e != NULL && e->state == LEASE_STATE_LIVE &&
        !lease_entry_live(e, c->now_ms)) {
        if (lease_expire_due(c->txn, e, c->now_ms) != 0) {
            call_store_error(c, ENOMEM);
            return NULL;
        }
        /* Keep the staged end even though the outcome is not OK. */
        c->keep_writes = true;
    }
    if (e == NULL || e->state != LEASE_STATE_LIVE) {
        STATS_INC(c->env->stats, lease_expired);
        call_fail(c, ONCE__V1__CODE__FAILED_PRECONDITION, REASON_LEASE_EXPIRED,
                  "client id %llu has no live lease (%s); open a new one",
                  (unsigned long long)client_id,
                  e != NULL
                      ? wire_lease_state_name(lease_wire_state(e, c->now_ms))
                  : client_id >= lease_table_next_id(c->env->leases)
                      ? "never issued"
                      : "ended and collected");
        return NULL;
    }
    return e;
}

static void
lease_renew_exec(server_call *c)
{
    const Once__V1__RenewLeaseRequest *r =
        (const Once__V1__RenewLeaseRequest *)c->req;
    Once__V1__RenewLeaseResponse resp = ONCE__V1__RENEW_LEASE_RESPONSE__INIT;
    lease_entry *e;

    if ((e = lease_find_live(c, r->client_id)) == NULL) {
        return;
    }
    /* Memory only: a restart gives live leases a full TTL anyway. */
    lease_entry_renew(e, c->now_ms);
    resp.ttl_ms = e->ttl_ms;
    resp.remaining_ms = lease_entry_remaining(e, c->now_ms);
    call_reply(c, &resp.base);
}

#define RENEW_BATCH_MAX 10000

static void
lease_renew_many_validate(server_call *c)
{
    const Once__V1__RenewLeasesRequest *r =
        (const Once__V1__RenewLeasesRequest *)c->req;

    if (r->n_client_ids == 0 || r->n_client_ids > RENEW_BATCH_MAX) {
        call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_BAD_BATCH,
                  "renew 1 to %d client ids per call, got %zu", RENEW_BATCH_MAX,
                  r->n_client_ids);
    }
}

static void
lease_renew_many_exec(server_call *c)
{
    const Once__V1__RenewLeasesRequest *r =
        (const Once__V1__RenewLeasesRequest *)c->req;
    Once__V1__RenewLeasesResponse resp = ONCE__V1__RENEW_LEASES_RESPONSE__INIT;
    Once__V1__RenewLeaseResult *res = calloc(r->n_client_ids, sizeof(*res));
    Once__V1__RenewLeaseResult **ptrs = calloc(r->n_client_ids, sizeof(*ptrs));

    if (res == NULL || ptrs == NULL) {
        free(res);
        free(ptrs);
        call_store_error(c, ENOMEM);
        return;
    }
    for (size_t i = 0; i < r->n_client_ids; i++) {
        lease_entry *e = lease_table_find(c->env->leases, r->client_ids[i]);
        once__v1__renew_lease_result__init(&res[i]);
        res[i].client_id = r->client_ids[i];
        res[i].code = ONCE__V1__CODE__FAILED_PRECONDITION;
        if (!auth_lease_mine(c, e != NULL, e != NULL ? e->principal : NULL,
                             false)) {
            /* not yours, never issued or collected: one answer */
            res[i].code = ONCE__V1__CODE__PERMISSION_DENIED;
            ptrs[i] = &res[i];
            continue;
        }
        /* Past its TTL: end it durably before anyone is told. */
        if (e != NULL && lease_expire_due(c->txn, e, c->now_ms) != 0) {
            free(res);
            free(ptrs);
            call_store_error(c, ENOMEM);
            return;
        }
        if (e != NULL && e->state == LEASE_STATE_LIVE) {
            lease_entry_renew(e, c->now_ms);
            res[i].code = ONCE__V1__CODE__OK;
            res[i].remaining_ms = lease_entry_remaining(e, c->now_ms);
        }
        ptrs[i] = &res[i];
    }
    resp.n_results = r->n_client_ids;
    resp.results = ptrs;
    call_reply(c, &resp.base);
    free(res);
    free(ptrs);
}

static void
lease_close_exec(server_call *c)
{
    const Once__V1__CloseLeaseRequest *r =
        (const Once__V1__CloseLeaseRequest *)c->req;
    Once__V1__CloseLeaseResponse resp = ONCE__V1__CLOSE_LEASE_RESPONSE__INIT;
    lease_entry *e = lease_table_find(c->env->leases, r->client_id);
    int rv;

    if (!auth_lease_scope(c, r->client_id, e != NULL,
                          e != NULL ? e->principal : NULL, false) ||
        !lease_wire_issued(c, r->client_id)) {
        return;
    }
    if (e != NULL && e->state == LEASE_STATE_LIVE) {
        if ((rv = lease_end(c->txn, e, LEASE_STATE_CLOSED, c->now_ms)) != 0) {
            call_store_error(c, rv);
            return;
        }
    }
    /* Closing an ended lease again is OK: the end is what was asked. */
    resp.records_retained = e != NULL ? e->retained : 0;
    call_reply(c, &resp.base);
}

static void
lease_info_exec(server_call *c)
{
    const Once__V1__LeaseInfoRequest *r =
        (const Once__V1__LeaseInfoRequest *)c->req;
    Once__V1__LeaseInfoResponse resp = ONCE__V1__LEASE_INFO_RESPONSE__INIT;
    lease_entry *e = lease_table_find(c->env->leases, r->client_id);

    if (!auth_lease_scope(c, r->client_id, e != NULL,
                          e != NULL ? e->principal : NULL, true) ||
        !lease_wire_issued(c, r->client_id)) {
        return;
    }
    /* A lease found past its TTL is ended here, durably, before the reply
     * says EXPIRED: a restart (which grants live leases a fresh TTL) must
     * not bring back a lease this call reported ended (docs/spec.md). */
    if (e != NULL && lease_expire_due(c->txn, e, c->now_ms) != 0) {
        call_store_error(c, ENOMEM);
        return;
    }
    resp.client_id = r->client_id;
    resp.state = lease_wire_state(e, c->now_ms);
    if (e != NULL) {
        resp.principal = e->principal;
        resp.ttl_ms = e->ttl_ms;
        resp.remaining_ms = lease_entry_remaining(e, c->now_ms);
        resp.watermark = e->watermark;
        resp.watermark_durable = e->watermark_durable;
        resp.records_retained = e->retained;
        resp.bytes_retained = e->retained_bytes;
        resp.max_seq = e->max_seq;
        resp.oldest_record_age_ms =
            e->oldest_ms != 0 && c->now_ms > e->oldest_ms
                ? c->now_ms - e->oldest_ms
                : 0;
    }
    call_reply(c, &resp.base);
}

/* RenewLease, CloseLease and LeaseInfo all name a lease by client_id. */
static void
lease_id_validate(server_call *c)
{
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(c->req->descriptor,
                                                        "client_id");
    uint64_t id = 0;

    if (f != NULL && f->type == PROTOBUF_C_TYPE_UINT64) {
        memcpy(&id, (const char *)c->req + f->offset, sizeof(id));
    }
    if (id == 0) {
        call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_MISSING_CLIENT_ID,
                  "client_id must be set");
    }
}

static const service_method svc_lease_methods[] = {
    {"/once.v1.Lease/OpenLease", 0, lease_open_validate, lease_open_exec, NULL},
    {"/once.v1.Lease/RenewLease", 0, lease_id_validate, lease_renew_exec, NULL},
    {"/once.v1.Lease/RenewLeases", 0, lease_renew_many_validate,
     lease_renew_many_exec, NULL},
    {"/once.v1.Lease/CloseLease", 0, lease_id_validate, lease_close_exec, NULL},
    {"/once.v1.Lease/LeaseInfo", 0, lease_id_validate, lease_info_exec, NULL},
};
const service_ops svc_lease_ops = {
    .name = "once.v1.Lease",
    .methods = svc_lease_methods,
    .nmethods = sizeof(svc_lease_methods) / sizeof(svc_lease_methods[0]),
};
