/*
 * lease.c — what happens to a handle's lease, from open to close.
 *
 * The story, in order:
 * 1. Open. once_client_open (unless no_lease) calls lease_begin: one
 *    OpenLease, not mutating (no rpc id exists before the lease does). The
 *    granted client id and TTL go to the gate (lease_gate.h), which from
 *    then on hands out seqs 1, 2, ... and acknowledges them: every mutating
 *    call carries the lowest seq whose reply was not delivered yet.
 * 2. Renew. A thread renews every TTL/3 (RenewLease, deadline at most the
 *    time left). A success moves the gate's expiry estimate forward (the
 *    reply's time plus the remaining TTL it reports) and makes the state
 *    LIVE; a failure makes it FAILING, and renewal is tried again after
 *    the handle's backoff (retry.h, at most TTL/6) until one succeeds or
 *    the estimate is reached: a cluster without a leader for a while (an
 *    election answers NO_LEADER at once) costs the lease nothing as long
 *    as a leader serves again before the estimate — and a new leader, like
 *    a restarted onced, gives every live lease a full TTL. From the second
 *    failure in a row it prints a line on stderr, then at most one per
 *    TTL/3.
 * 3. Loss. The lease is lost — for good — when a renewal or any call under
 *    the own id is answered FAILED_PRECONDITION/LEASE_EXPIRED (or, with
 *    authentication on, PERMISSION_DENIED/NOT_YOUR_LEASE: a collected own
 *    lease answers so, like any id that is not the caller's), when no
 *    renewal succeeded before the expiry estimate, or when it is closed
 *    with once_lease_close. The gate then cancels every tracked call in
 *    flight (they end OUTCOME_UNKNOWN if sent, LEASE_EXPIRED if not), later
 *    mutating calls fail LEASE_EXPIRED without sending, and the lease-lost
 *    callback runs once. Nothing re-opens a lease or re-sends under a new
 *    id: a new handle is the caller's choice.
 * 4. Close. once_client_close ends renewal and, when every seq completed
 *    (nothing can be retried) and the lease is not lost, sends CloseLease
 *    so the collector reclaims the records at once. With a seq still
 *    incomplete the lease is left to expire after its TTL, so the caller
 *    can still retry that id from elsewhere. once_client_close_keep_lease
 *    always leaves it so (one-shot tools that print an rpc id).
 *
 * Owns: the renewal thread (struct lease_renewer), the Lease service calls
 * (once_lease_open/renew/close/info), once_client_lease_state and
 * once_client_on_lease_lost.
 * Invariant: this file is the only one that opens, renews or closes the
 * handle's own lease, and the only one that turns a Lease answer into gate
 * state (gate_grant, gate_renewed, gate_failing, gate_declare — the call
 * engine declares a loss itself only for LEASE_EXPIRED answers to tracked
 * calls). The renewal thread only reads read-only handle fields and the
 * gate; it stops (and is joined) before the handle is freed; it ends once
 * the lease is lost.
 * Never: holds renew.lock across a network call or while declaring the
 * loss (the user callback may run); never logs for a single transient
 * renewal failure; never opens a new lease by itself.
 * Layer: above the call engine (call.h) and the gate; below the handle
 * (client.c).
 */
#include "client/lease.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/call.h"
#include "client/classify.h"
#include "client/client_impl.h"
#include "base/clock.h"
#include "client/lease_gate.h"
#include "client/retry.h"
#include "client/status.h"
#include "proto/wire.h"

#define RENEW_INTERVAL_MIN_MS   10u
#define RENEW_DEADLINE_MAX_MS   5000u
#define LEASE_CLOSE_DEADLINE_MS 2000u

void
lease_init(once_client *c)
{
    pthread_mutex_init(&c->renew.lock, NULL);
    clock_cond_init(&c->renew.cv);
}

void
lease_fini(once_client *c)
{
    pthread_mutex_destroy(&c->renew.lock);
    pthread_cond_destroy(&c->renew.cv);
}

/* ---- the Lease service -------------------------------------------------- */

int
once_lease_open(once_client *c, const char *principal, uint64_t ttl_ms,
                uint64_t *client_id, uint64_t *granted_ttl_ms, once_status *st)
{
    once_status local;
    Once__V1__OpenLeaseRequest req = ONCE__V1__OPEN_LEASE_REQUEST__INIT;
    Once__V1__OpenLeaseResponse *resp;
    ProtobufCMessage *out;
    int rv;

    if ((rv = status_begin(&st, &local, c, "handle")) != ONCE_OK) {
        return rv;
    }
    req.principal = (char *)(principal != NULL ? principal : c->principal);
    req.ttl_ms = ttl_ms;
    /* Not mutating: no rpc id exists before the lease does. */
    if ((rv = invoke(c, &once__v1__lease__descriptor, "OpenLease", CALL_READ,
                     NULL, &req.base, &out, st, 0)) != ONCE_OK) {
        return rv;
    }
    resp = (Once__V1__OpenLeaseResponse *)out;
    if (resp->max_request_bytes != 0) {
        atomic_store(&c->conn.max_request, resp->max_request_bytes);
    }
    if (client_id != NULL) {
        *client_id = resp->client_id;
    }
    if (granted_ttl_ms != NULL) {
        *granted_ttl_ms = resp->ttl_ms;
    }
    once__v1__open_lease_response__free_unpacked(resp, NULL);
    return ONCE_OK;
}

/* The client id a lease call names: 0 means the handle's own. Returns
 * ONCE_OK or fills st. */
static int
lease_id(once_client *c, uint64_t client_id, uint64_t *id, once_status *st)
{
    if (c == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "handle is NULL");
    }
    *id = client_id != 0 ? client_id : c->gate.client_id;
    if (*id == 0) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_NO_LEASE,
                          "client id 0 names the handle's own lease, and "
                          "this handle has none");
    }
    return ONCE_OK;
}

/* A lease call on the handle's own id was answered LEASE_EXPIRED (or
 * NOT_YOUR_LEASE: with authentication on, a collected lease of one's own
 * answers so). */
static void
lease_gone(once_client *c, uint64_t id, const once_status *st, const char *what)
{
    if (gate_tracks(&c->gate, id) && status_lease_gone(st)) {
        gate_declare(&c->gate, "%s was answered %s: %s", what, st->reason,
                     st->message);
    }
}

/* Calls Lease.method for the lease client_id names (0: the handle's own),
 * whose id it writes into the request's client_id field *req_id first.
 * Returns ONCE_OK with *out the response (the caller frees it with its
 * __free_unpacked), or fills st. */
static int
lease_invoke(once_client *c, const char *method, uint64_t client_id,
             uint64_t *req_id, ProtobufCMessage *req, ProtobufCMessage **out,
             once_status *st, uint32_t deadline_ms)
{
    int rv;

    if ((rv = lease_id(c, client_id, req_id, st)) != ONCE_OK) {
        return rv;
    }
    return invoke(c, &once__v1__lease__descriptor, method, CALL_READ, NULL, req,
                  out, st, deadline_ms);
}

static int
lease_renew_call(once_client *c, uint64_t client_id, uint64_t *ttl_ms,
                 uint64_t *remaining_ms, once_status *st, uint32_t deadline_ms)
{
    once_status local;
    Once__V1__RenewLeaseRequest req = ONCE__V1__RENEW_LEASE_REQUEST__INIT;
    Once__V1__RenewLeaseResponse *resp;
    ProtobufCMessage *out;
    int rv;

    status_begin(&st, &local, NULL, NULL);
    if ((rv = lease_invoke(c, "RenewLease", client_id, &req.client_id,
                           &req.base, &out, st, deadline_ms)) != ONCE_OK) {
        if (req.client_id != 0) { /* else no call was made */
            lease_gone(c, req.client_id, st, "RenewLease");
        }
        return rv;
    }
    resp = (Once__V1__RenewLeaseResponse *)out;
    if (gate_tracks(&c->gate, req.client_id)) {
        gate_renewed(&c->gate, clock_now_ms(), resp->remaining_ms);
    }
    if (ttl_ms != NULL) {
        *ttl_ms = resp->ttl_ms;
    }
    if (remaining_ms != NULL) {
        *remaining_ms = resp->remaining_ms;
    }
    once__v1__renew_lease_response__free_unpacked(resp, NULL);
    return ONCE_OK;
}

int
once_lease_renew(once_client *c, uint64_t client_id, uint64_t *ttl_ms,
                 uint64_t *remaining_ms, once_status *st)
{
    return lease_renew_call(c, client_id, ttl_ms, remaining_ms, st, 0);
}

static int
lease_close_call(once_client *c, uint64_t client_id, uint64_t *records_retained,
                 once_status *st, uint32_t deadline_ms)
{
    once_status local;
    Once__V1__CloseLeaseRequest req = ONCE__V1__CLOSE_LEASE_REQUEST__INIT;
    Once__V1__CloseLeaseResponse *resp;
    ProtobufCMessage *out;
    int rv;

    status_begin(&st, &local, NULL, NULL);
    if ((rv = lease_invoke(c, "CloseLease", client_id, &req.client_id,
                           &req.base, &out, st, deadline_ms)) != ONCE_OK) {
        return rv;
    }
    resp = (Once__V1__CloseLeaseResponse *)out;
    if (gate_tracks(&c->gate, req.client_id)) {
        gate_declare(&c->gate, "it was closed with CloseLease");
    }
    if (records_retained != NULL) {
        *records_retained = resp->records_retained;
    }
    once__v1__close_lease_response__free_unpacked(resp, NULL);
    return ONCE_OK;
}

int
once_lease_close(once_client *c, uint64_t client_id, uint64_t *records_retained,
                 once_status *st)
{
    return lease_close_call(c, client_id, records_retained, st, 0);
}

/* Copies a protobuf string into a fixed buffer, truncating. */
static void
lease_copy(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src != NULL ? src : "");
}

int
once_lease_info(once_client *c, uint64_t client_id,
                struct once_lease_info *info, once_status *st)
{
    once_status local;
    Once__V1__LeaseInfoRequest req = ONCE__V1__LEASE_INFO_REQUEST__INIT;
    Once__V1__LeaseInfoResponse *r;
    ProtobufCMessage *out;
    int rv;

    if ((rv = status_begin(&st, &local, info, "lease info output")) !=
            ONCE_OK ||
        (rv = lease_invoke(c, "LeaseInfo", client_id, &req.client_id, &req.base,
                           &out, st, 0)) != ONCE_OK) {
        return rv;
    }
    r = (Once__V1__LeaseInfoResponse *)out;
    memset(info, 0, sizeof(*info));
    info->client_id = r->client_id;
    lease_copy(info->principal, sizeof(info->principal), r->principal);
    info->state = (int)r->state;
    info->ttl_ms = r->ttl_ms;
    info->remaining_ms = r->remaining_ms;
    info->watermark = r->watermark;
    info->watermark_durable = r->watermark_durable;
    info->records_retained = r->records_retained;
    info->bytes_retained = r->bytes_retained;
    info->max_seq = r->max_seq;
    info->oldest_record_age_ms = r->oldest_record_age_ms;
    once__v1__lease_info_response__free_unpacked(r, NULL);
    return ONCE_OK;
}

/* ---- renewal ------------------------------------------------------------ */

/* Waits until ms have passed or renew.stop is set; renew.lock is held.
 * Returns true when stopping. */
static bool
renew_wait(once_client *c, uint64_t ms)
{
    struct timespec ts = clock_deadline(ms);

    while (!c->renew.stop &&
           pthread_cond_timedwait(&c->renew.cv, &c->renew.lock, &ts) !=
               ETIMEDOUT) {
    }
    return c->renew.stop;
}

/*
 * The wait before renewing again after fails failures in a row: the
 * handle's backoff (jittered, growing to backoff_max_ms), at most half the
 * interval, and never past until, where the loop declares the loss. Short,
 * so that a renewal refused during an election is tried again while the
 * TTL lasts: spaced TTL/6 apart, with none in the TTL's last sixth, the
 * tries all fell into back-to-back failovers (bench_failover, S = 5 s) and
 * the lease was declared lost although the new leaders held it live.
 */
static uint64_t
renew_retry_wait(once_client *c, unsigned fails, uint64_t interval,
                 uint64_t until, uint64_t *rng)
{
    uint64_t wait = retry_backoff_ms(&c->retry, fails, rng);
    uint64_t now = clock_now_ms();

    if (wait > interval / 2) {
        wait = interval / 2;
    }
    if (now < until && until - now < wait) {
        wait = until - now;
    }
    return wait > 0 ? wait : 1;
}

/* The line for fails failed renewals in a row: from the second, then at
 * most one per interval (renewal is retried far more often than that). */
static void
renew_report(once_client *c, unsigned fails, int rv, const once_status *st,
             uint64_t interval, uint64_t *logged_ms)
{
    uint64_t now = clock_now_ms(), until = gate_until(&c->gate);

    if (fails < 2 || (fails > 2 && now - *logged_ms < interval)) {
        return;
    }
    *logged_ms = now;
    fprintf(stderr,
            "libonce: renewing the lease of client %" PRIu64
            " failed %u times in a row: %s (%s): %s; retrying until it "
            "ends in %" PRIu64 " ms\n",
            c->gate.client_id, fails, once_strerror(rv), st->reason,
            st->message, until > now ? until - now : 0);
}

/* No renewal succeeded before the expiry estimate: the loss, saying so
 * when the last refusal was a follower's (a failover outlasted the TTL —
 * the new leader may well hold the lease live, but the handle cannot know
 * it in time: docs/replication.md, "Client leases across a failover"). */
static void
renew_declare_lost(once_client *c, unsigned fails, const once_status *st)
{
    if (classify_reply(st->code, st->reason, false, false).follower) {
        gate_declare(&c->gate,
                     "no leader answered a renewal before its TTL ran out "
                     "(%u failed in a row, last: %s %s): a failover or "
                     "election outlasted the lease's TTL — choose a TTL "
                     "above the failover time (docs/replication.md)",
                     fails, once_strerror(st->code), st->reason);
        return;
    }
    gate_declare(&c->gate,
                 "no renewal succeeded before its TTL ran out "
                 "(%u failed in a row, last: %s %s %s)",
                 fails, once_strerror(st->code), st->reason, st->message);
}

static void *
renew_main(void *arg)
{
    once_client *c = arg;
    uint64_t interval = c->gate.ttl_ms / 3;
    uint64_t wait = 0, logged_ms = 0, rng = retry_seed();
    unsigned fails = 0;
    once_status st;

    if (interval < RENEW_INTERVAL_MIN_MS) {
        interval = RENEW_INTERVAL_MIN_MS;
    }
    wait = interval;
    status_clear(&st);
    pthread_mutex_lock(&c->renew.lock);
    for (;;) {
        uint64_t now, until, deadline;
        int rv;

        if (renew_wait(c, wait)) {
            break;
        }
        now = clock_now_ms();
        until = gate_until(&c->gate);
        if (now >= until) {
            pthread_mutex_unlock(&c->renew.lock);
            renew_declare_lost(c, fails, &st);
            return NULL;
        }
        /* Never wait on one renewal past the moment the lease ends. */
        deadline = until - now;
        if (deadline > interval) {
            deadline = interval;
        }
        if (deadline > RENEW_DEADLINE_MAX_MS) {
            deadline = RENEW_DEADLINE_MAX_MS;
        }
        pthread_mutex_unlock(&c->renew.lock);
        rv = lease_renew_call(c, 0, NULL, NULL, &st, (uint32_t)deadline);
        pthread_mutex_lock(&c->renew.lock);
        if (c->renew.stop || gate_is_lost(&c->gate)) {
            break; /* a LEASE_EXPIRED answer was declared a loss already */
        }
        if (rv == ONCE_OK) {
            if (fails >= 2) {
                fprintf(stderr,
                        "libonce: lease of client %" PRIu64
                        " renewed again after %u failures\n",
                        c->gate.client_id, fails);
            }
            fails = 0;
            wait = interval;
            continue;
        }
        fails++;
        gate_failing(&c->gate);
        if (rv == ONCE_UNIMPLEMENTED) {
            fprintf(stderr,
                    "libonce: the server does not renew leases (%s: %s); "
                    "the lease of client %" PRIu64 " ends after its TTL\n",
                    st.reason, st.message, c->gate.client_id);
            break;
        }
        renew_report(c, fails, rv, &st, interval, &logged_ms);
        wait = renew_retry_wait(c, fails, interval, until, &rng);
    }
    pthread_mutex_unlock(&c->renew.lock);
    return NULL;
}

static int
renew_start(once_client *c)
{
    int rv;

    if (c->gate.client_id == 0 || c->gate.ttl_ms == 0) {
        return 0;
    }
    c->renew.stop = false;
    if ((rv = pthread_create(&c->renew.thread, NULL, renew_main, c)) != 0) {
        return rv;
    }
    c->renew.running = true;
    return 0;
}

static void
renew_stop(once_client *c)
{
    if (!c->renew.running) {
        return;
    }
    pthread_mutex_lock(&c->renew.lock);
    c->renew.stop = true;
    pthread_cond_signal(&c->renew.cv);
    pthread_mutex_unlock(&c->renew.lock);
    conn_shut(&c->conn);
    pthread_join(c->renew.thread, NULL);
    c->renew.running = false;
}

/* ---- the handle's own lease ---------------------------------------------- */

int
lease_begin(once_client *c, uint64_t ttl_ms, once_status *st)
{
    uint64_t id = 0, granted = 0;
    int rv;

    /* once_lease_open fills st (attempts included) on failure. */
    if ((rv = once_lease_open(c, NULL, ttl_ms, &id, &granted, st)) != ONCE_OK) {
        return rv;
    }
    if (id == 0) {
        return status_set(st, ONCE_INTERNAL, ONCE_REASON_BAD_RESPONSE,
                          "OpenLease granted client id 0");
    }
    gate_grant(&c->gate, id, granted, clock_now_ms());
    if (renew_start(c) != 0) {
        return status_set(st, ONCE_RESOURCE_EXHAUSTED, ONCE_REASON_NO_THREAD,
                          "cannot start the lease renewal thread");
    }
    return ONCE_OK;
}

void
lease_end(once_client *c, bool keep, uint64_t *left_ms)
{
    uint64_t id = c->gate.client_id;
    bool lost;

    gate_closing(&c->gate);
    lost = gate_is_lost(&c->gate);
    if (left_ms != NULL) {
        uint64_t now = clock_now_ms(), until = gate_until(&c->gate);
        *left_ms = (id != 0 && !lost && until > now) ? until - now : 0;
    }
    if (!keep && id != 0 && !lost && gate_all_complete(&c->gate)) {
        /* Nothing under the lease can be retried any more: end it now so
         * the collector reclaims its records at once. A failure is of no
         * consequence — the lease then ends after its TTL. */
        uint32_t d = c->deadline_ms < LEASE_CLOSE_DEADLINE_MS
                         ? c->deadline_ms
                         : LEASE_CLOSE_DEADLINE_MS;
        (void)lease_close_call(c, id, NULL, NULL, d);
    }
    /* Stops renewal; it closes the socket so a renewal in flight ends at
     * once. */
    renew_stop(c);
}

int
once_client_lease_state(const once_client *c)
{
    /* The gate's lock is not part of the handle's logical state. */
    return c != NULL ? gate_state(&((once_client *)c)->gate)
                     : ONCE_CLIENT_LEASE_NONE;
}

void
once_client_on_lease_lost(once_client *c, once_lease_lost_fn fn, void *arg)
{
    if (c != NULL) {
        gate_on_lost(&c->gate, fn, arg);
    }
}
