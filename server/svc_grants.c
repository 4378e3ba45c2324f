/*
 * svc_grants.c — once.v1.Grants: the thin layer between the executor and
 * the rules in grants/ (docs/grants.md).
 *
 * Each handler validates the request alone (validate), then runs one rule
 * function over the call's transaction with the caller's lease principal,
 * the call's clock (c->now_ms, injectable: see server.c) and the signing
 * key. A business rejection of RequestGrant/Claim/LegacyClaim is recorded
 * in the surface's rejection log: the handler sets keep_writes so that log
 * entry — and nothing else, the rules stage nothing else on a rejection —
 * commits with the call's completion record.
 * Never: decides anything itself; holds a lock (the executor runs one call
 * at a time, which is the "lock (request_id, attempt) first" order).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "server/auth.h"
#include "grants/credential.h"
#include "proto/grants.pb-c.h"
#include "lease/lease.h"
#include "base/log.h"
#include "proto/once.pb-c.h"
#include "proto/reasons.h"
#include "grants/rules.h"
#include "server/service.h"

/* The service's state: the signing key, loaded or created (mode 0600)
 * in the data folder before the first call. */
static int
svc_grants_open(const exec_env *env, void **state)
{
    grants_signer *s = malloc(sizeof(*s));
    char err[512] = "";
    int rv;

    if (s == NULL) {
        return ENOMEM;
    }
    if ((rv = grants_signer_load(s, env->cfg.data_dir, err, sizeof(err))) !=
        0) {
        log_error("grants key: %s", err);
        free(s);
        return rv;
    }
    *state = s;
    return 0;
}

static void
svc_grants_close(void *state)
{
    grants_signer *s = state;

    if (s == NULL) {
        return;
    }
    grants_signer_fini(s);
    free(s);
}

#define REQ(type) ((const type *)(const void *)c->req)

/* The rules' view of the call: its transaction, clock, the caller's lease
 * principal and the signing key. */
static void
svc_env(server_call *c, grants_env *env, grants_outcome *o)
{
    lease_entry *le = c->client_id != 0
                          ? lease_table_find(c->env->leases, c->client_id)
                          : NULL;

    memset(o, 0, sizeof(*o));
    env->txn = c->txn;
    env->now_ms = c->now_ms;
    env->principal = le != NULL && le->principal != NULL ? le->principal : "";
    env->signer = c->svc;
    env->machine = c->who != NULL ? c->who->machine : NULL;
    env->read_only = c->replaying; /* a replay logs no refusal either */
}

/* Turns the rules' outcome into the call's. */
static void
svc_done(server_call *c, grants_outcome *o)
{
    if (o->err != 0) {
        free(o->resp);
        call_store_error(c, o->err);
        return;
    }
    if (o->code != ONCE__V1__CODE__OK) {
        free(o->resp);
        call_fail(c, o->code, o->reason, "%s", o->message);
        c->keep_writes = o->keep;
        return;
    }
    free(c->resp);
    c->resp = o->resp;
    c->resp_len = o->resp_len;
    c->code = ONCE__V1__CODE__OK;
    c->reason[0] = '\0';
    c->message[0] = '\0';
}

static void
svc_check(server_call *c, bool ok, const grants_outcome *o)
{
    if (!ok) {
        call_fail(c, o->code, o->reason, "%s", o->message);
    }
}

#define NAME_CHECK(what, field)                                                \
    do {                                                                       \
        grants_outcome o_;                                                     \
        memset(&o_, 0, sizeof(o_));                                            \
        if (!grants_check_name(what, field, &o_)) {                            \
            call_fail(c, o_.code, o_.reason, "%s", o_.message);                \
            return;                                                            \
        }                                                                      \
    } while (0)

/* ---- validate ----------------------------------------------------------- */

static void
v_placement(server_call *c)
{
    grants_outcome o;
    memset(&o, 0, sizeof(o));
    svc_check(c, grants_check_placement(REQ(Once__V1__SetPlacementRequest), &o),
              &o);
}

static void
v_request(server_call *c)
{
    grants_outcome o;
    memset(&o, 0, sizeof(o));
    svc_check(c, grants_check_request(REQ(Once__V1__RequestGrantRequest), &o),
              &o);
}

static void
v_enqueue(server_call *c)
{
    grants_outcome o;
    memset(&o, 0, sizeof(o));
    svc_check(c, grants_check_enqueue(REQ(Once__V1__EnqueueRequest), &o), &o);
}

static void
v_finish(server_call *c)
{
    grants_outcome o;
    memset(&o, 0, sizeof(o));
    svc_check(c, grants_check_finish(REQ(Once__V1__FinishGrantRequest), &o),
              &o);
}

static void
v_claim(server_call *c)
{
    const Once__V1__ClaimRequest *r = REQ(Once__V1__ClaimRequest);
    NAME_CHECK("machine", r->machine);
    if (!auth_machine(c, r->machine)) {
        return;
    }
    if (r->credential_ttl_ms > GRANTS_CRED_TTL_MAX_MS || r->max > 1024) {
        call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_BAD_FIELD,
                  "max is at most 1024, credential_ttl_ms at most %llu",
                  (unsigned long long)GRANTS_CRED_TTL_MAX_MS);
    }
}

static void
v_renew(server_call *c)
{
    const Once__V1__RenewCredentialRequest *r =
        REQ(Once__V1__RenewCredentialRequest);
    NAME_CHECK("machine", r->machine);
    if (!auth_machine(c, r->machine)) {
        return;
    }
    if (r->grant_id == 0 || r->credential_ttl_ms > GRANTS_CRED_TTL_MAX_MS) {
        call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_BAD_FIELD,
                  "grant_id is required; credential_ttl_ms at most %llu",
                  (unsigned long long)GRANTS_CRED_TTL_MAX_MS);
    }
}

static void
v_grant_id(server_call *c)
{
    const Once__V1__CancelGrantRequest *r = REQ(Once__V1__CancelGrantRequest);
    if (r->grant_id == 0) {
        call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_BAD_FIELD,
                  "grant_id is required");
    }
}

static void
v_work_id(server_call *c)
{
    const Once__V1__DeleteWorkRequest *r = REQ(Once__V1__DeleteWorkRequest);
    if (r->work_id == 0) {
        call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_BAD_FIELD,
                  "work_id is required");
    }
}

static void
v_machine(server_call *c)
{
    const Once__V1__DeleteMachineRequest *r =
        REQ(Once__V1__DeleteMachineRequest);
    NAME_CHECK("machine", r->machine);
}

static void
v_list_queue(server_call *c)
{
    const Once__V1__ListQueueRequest *r = REQ(Once__V1__ListQueueRequest);
    NAME_CHECK("machine", r->machine);
}

static void
v_surface(server_call *c)
{
    const Once__V1__GetSurfaceRequest *r = REQ(Once__V1__GetSurfaceRequest);
    NAME_CHECK("surface", r->surface);
}

static void
v_list_surfaces(server_call *c)
{
    char after[GRANTS_NAME_MAX + 1];
    grants_outcome o;
    memset(&o, 0, sizeof(o));
    svc_check(c,
              grants_check_list_surfaces(REQ(Once__V1__ListSurfacesRequest),
                                         after, &o),
              &o);
}

static void
v_list_machines(server_call *c)
{
    char after[GRANTS_NAME_MAX + 1];
    grants_outcome o;
    memset(&o, 0, sizeof(o));
    svc_check(c,
              grants_check_list_machines(REQ(Once__V1__ListMachinesRequest),
                                         after, &o),
              &o);
}

static void
v_legacy(server_call *c)
{
    const Once__V1__LegacyClaimRequest *r = REQ(Once__V1__LegacyClaimRequest);
    NAME_CHECK("surface", r->surface);
    NAME_CHECK("holder", r->holder);
}

static void
v_permission(server_call *c)
{
    const Once__V1__SetPermissionRequest *r =
        REQ(Once__V1__SetPermissionRequest);
    NAME_CHECK("principal", r->principal);
}

/* ---- execute ------------------------------------------------------------ */

/* After a rule succeeded: its lifecycle events, on the outbox's system
 * topic, in the call's transaction (grants/events.c). A full topic
 * refuses the call, nothing kept and nothing recorded (transient). */
static void
svc_emit(server_call *c)
{
    outbox_producer p = {
        .client_id = c->client_id,
        .seq = c->seq,
        .method = c->wm->full_name,
        .now_ms = c->now_ms,
    };
    outbox_outcome o;
    int rv;

    if (c->code != ONCE__V1__CODE__OK || c->replaying || c->client_id == 0) {
        return;
    }
    rv = grants_emit(c->txn, &c->env->cfg.outbox, &p, c->wm->method->name,
                     c->resp, c->resp_len, &o);
    if (rv != 0) {
        call_store_error(c, rv);
    } else if (o.code != ONCE__V1__CODE__OK) {
        call_fail(c, o.code, o.reason, "%s", o.message);
        c->transient = true;
    } else if (p.next_index > 0) {
        atomic_fetch_add(&c->env->stats->outbox_events, p.next_index);
    }
}

#define EXEC(name, fn, type)                                                   \
    static void name(server_call *c)                                           \
    {                                                                          \
        grants_env env;                                                        \
        grants_outcome o;                                                      \
        svc_env(c, &env, &o);                                                  \
        fn(&env, REQ(type), &o);                                               \
        svc_done(c, &o);                                                       \
        svc_emit(c);                                                           \
    }

EXEC(x_placement, grants_set_placement, Once__V1__SetPlacementRequest)
EXEC(x_request, grants_request, Once__V1__RequestGrantRequest)
EXEC(x_enqueue, grants_enqueue, Once__V1__EnqueueRequest)
EXEC(x_claim, grants_claim, Once__V1__ClaimRequest)
EXEC(x_renew, grants_renew, Once__V1__RenewCredentialRequest)
EXEC(x_finish, grants_finish, Once__V1__FinishGrantRequest)
EXEC(x_cancel, grants_cancel, Once__V1__CancelGrantRequest)
EXEC(x_delete_machine, grants_delete_machine, Once__V1__DeleteMachineRequest)
EXEC(x_delete_work, grants_delete_work, Once__V1__DeleteWorkRequest)
EXEC(x_legacy_claim, grants_legacy_claim, Once__V1__LegacyClaimRequest)
EXEC(x_legacy_release, grants_legacy_release, Once__V1__LegacyReleaseRequest)
EXEC(x_permission, grants_set_permission, Once__V1__SetPermissionRequest)
EXEC(x_surface, grants_get_surface, Once__V1__GetSurfaceRequest)
EXEC(x_list_queue, grants_list_queue, Once__V1__ListQueueRequest)
EXEC(x_list_surfaces, grants_list_surfaces, Once__V1__ListSurfacesRequest)
EXEC(x_list_machines, grants_list_machines, Once__V1__ListMachinesRequest)

/* ---- replay (service_method.replay) ------------------------------------ */

#define REPLAY(name, fn, type)                                                 \
    static void name(server_call *c)                                           \
    {                                                                          \
        grants_env env;                                                        \
        grants_outcome o;                                                      \
        svc_env(c, &env, &o);                                                  \
        fn(&env, REQ(type), c->resp, c->resp_len, &o);                         \
        svc_done(c, &o);                                                       \
    }

REPLAY(r_request, grants_replay_request, Once__V1__RequestGrantRequest)
REPLAY(r_claim, grants_replay_claim, Once__V1__ClaimRequest)

static void
x_public_key(server_call *c)
{
    Once__V1__GetPublicKeyResponse resp =
        ONCE__V1__GET_PUBLIC_KEY_RESPONSE__INIT;
    grants_signer *s = c->svc;

    resp.public_key.data = s->pk;
    resp.public_key.len = sizeof(s->pk);
    call_reply(c, &resp.base);
}

#define G(m) "/once.v1.Grants/" m
#define MUT  SERVICE_MUTATING

static const service_method svc_grants_methods[] = {
    {G("SetPlacement"), MUT, v_placement, x_placement, NULL},
    {G("RequestGrant"), MUT, v_request, x_request, r_request},
    {G("Enqueue"), MUT, v_enqueue, x_enqueue, NULL},
    {G("Claim"), MUT, v_claim, x_claim, r_claim},
    /* grants_renew only reads, and logs nothing when replaying: its
     * replay is running it again */
    {G("RenewCredential"), MUT, v_renew, x_renew, x_renew},
    {G("FinishGrant"), MUT, v_finish, x_finish, NULL},
    {G("CancelGrant"), MUT, v_grant_id, x_cancel, NULL},
    {G("DeleteMachine"), MUT, v_machine, x_delete_machine, NULL},
    {G("DeleteWork"), MUT, v_work_id, x_delete_work, NULL},
    {G("LegacyClaim"), MUT, v_legacy, x_legacy_claim, NULL},
    {G("LegacyRelease"), MUT, v_legacy, x_legacy_release, NULL},
    {G("SetPermission"), MUT, v_permission, x_permission, NULL},
    {G("GetSurface"), 0, v_surface, x_surface, NULL},
    {G("ListQueue"), 0, v_list_queue, x_list_queue, NULL},
    {G("GetPublicKey"), 0, NULL, x_public_key, NULL},
    {G("ListSurfaces"), 0, v_list_surfaces, x_list_surfaces, NULL},
    {G("ListMachines"), 0, v_list_machines, x_list_machines, NULL},
};
const service_ops svc_grants_ops = {
    .name = "once.v1.Grants",
    .methods = svc_grants_methods,
    .nmethods = sizeof(svc_grants_methods) / sizeof(svc_grants_methods[0]),
    .open = svc_grants_open,
    .close = svc_grants_close,
};
