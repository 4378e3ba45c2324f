/*
 * executor.c — decode, check, deduplicate, execute, stage, hand over.
 *
 * The order of checks for one request (docs/spec.md): envelope shape (a
 * scan of the bytes, envelope.h) → authentication (the tag over the bytes
 * as received) → envelope decode → method → authorization (policy) →
 * deadline → rpc id present → payload → method's own validation → lease
 * (owned by the caller) → completion record (replay or conflict) →
 * execute. Authentication, authorization and
 * lease ownership run on every attempt, before the record lookup: a stored
 * result is never returned to anyone the checks would refuse now. Everything
 * that fails before "execute" writes nothing and is not recorded. An executed
 * call's outcome is recorded with its effect in one transaction; a non-OK
 * outcome keeps no effect, only its record. A batch envelope
 * (once.v1.Batch) is only transport: each entry goes through all of the
 * above as a request of its own, in order (exec_batch).
 */
#include "server/executor.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/supplemental/util/platform.h>

#include "server/auth.h"
#include "server/dispatch.h"
#include "server/fair_queue.h"
#include "server/verify.h"
#include "base/clock.h"
#include "base/queue.h"
#include "proto/envelope.h"
#include "proto/field_scan.h"
#include "store/fault.h"
#include "lease/admit.h"
#include "lease/lease.h"
#include "base/log.h"
#include "proto/names.h"
#include "proto/once.pb-c.h"
#include "store/records.h"
#include "proto/wire_text.h"
#include "proto/reasons.h"

typedef struct exec_task {
    void (*fn)(void *);
    void *arg;
    queue_link link; /* in executor.tasks */
} exec_task;

/* Calls executed before a group is synced even if more are queued: bounds
 * the wait of the first call of a group under a steady stream. */
#define EXEC_GROUP_MAX 1024
/* ... and the time a group may take: a reply waits for its group's sync,
 * so under a flood of large requests (milliseconds each) a call executed
 * early in a group would otherwise wait for up to EXEC_GROUP_MAX of them.
 * An fsync here costs 1-10 ms, so groups of 20 ms still spread it over
 * many calls under load; a quiet onced syncs as soon as it runs dry. */
#define EXEC_GROUP_MS 20

struct executor {
    exec_env *env; /* the server's parts a call may use (exec_env.h) */
    dispatch *dp;  /* the open services */
    pthread_t thread;
    pthread_mutex_t mtx; /* protects the two queues and stopping */
    pthread_cond_t cv;
    fair_queue q; /* a lane per principal (fair_queue.h) */
    queue tasks;  /* exec_task, posted (executor_post) */
    bool stopping;
    /* Parked reads (exec_park), executor thread only: they hold their
     * request and no transaction, and go back to the queue after a sync
     * that made an outbox event durable, or at their deadline. */
    listener_req *parked;
    size_t nparked;
    uint64_t parked_seen; /* stats->outbox_events when last looked at */
};

/* A reply waiting for its transaction to become durable. */
typedef struct exec_reply {
    server_stats *stats;
    listener_req *req;
    uint8_t *buf;
    size_t len;
} exec_reply;

static void
exec_reply_send(void *arg)
{
    exec_reply *r = arg;
    /* Read before the reply: its context may take the next request. */
    uint64_t recv_us = r->req->recv_us;

    listener_reply(r->req, r->buf, r->len);
    stats_calls_latency(&r->stats->calls, stats_now_us() - recv_us);
    free(r->buf);
    free(r);
}

/* Starts over with an empty transaction: drops whatever was staged. */
static void
exec_reset_txn(server_call *c)
{
    store *st = c->env->st;
    store_txn_abort(c->txn);
    if ((c->txn = store_txn_begin(st)) == NULL) {
        log_error("out of memory starting a transaction");
        abort();
    }
}

/* Looks up the completion record of the call's rpc id. Returns true when
 * the call is answered from it (replay or conflict). A seq above the
 * highest one this client has a record for cannot have one (the lease
 * table counts every record staged, and start-up counts every record
 * stored), so a first send costs no LevelDB read. */
static bool
exec_dedup(server_call *c, const service_method *de,
           const Once__V1__Request *req,
           const uint8_t digest[RECORD_DIGEST_LEN], const lease_entry *le,
           bool *replayed)
{
    record *rec = NULL;
    int rv;

    if (c->seq > le->max_seq || FAULT_BROKEN(FAULT_BROKEN_REPLAY)) {
        return false; /* (broken on purpose: a retry runs again) */
    }
    rv = records_get(c->txn, c->client_id, c->seq, &rec);

    if (rv == ENOENT) {
        return false;
    }
    if (rv != 0) {
        call_store_error(c, rv);
        return true;
    }
    if (strcmp(rec->method, req->method) != 0 ||
        rec->digest.len != RECORD_DIGEST_LEN ||
        memcmp(rec->digest.data, digest, RECORD_DIGEST_LEN) != 0) {
        STATS_INC(c->env->stats, conflicts);
        call_fail(c, ONCE__V1__CODE__ALREADY_EXISTS, REASON_RPC_ID_CONFLICT,
                  "rpc id %llu:%llu was already used for a different request "
                  "(%s); a new request needs a new seq",
                  (unsigned long long)c->client_id, (unsigned long long)c->seq,
                  rec->method);
        records_free(rec);
        return true;
    }
    STATS_INC(c->env->stats, replays);
    c->code = rec->code;
    snprintf(c->reason, sizeof(c->reason), "%s", rec->reason);
    snprintf(c->message, sizeof(c->message), "%s", rec->message);
    if (rec->payload.len > 0 && (c->resp = malloc(rec->payload.len)) != NULL) {
        memcpy(c->resp, rec->payload.data, rec->payload.len);
        c->resp_len = rec->payload.len;
    }
    *replayed = true;
    records_free(rec);
    if (de->replay != NULL && c->code == ONCE__V1__CODE__OK) {
        c->replaying = true;
        de->replay(c);
        /* A refusal made now is no stored result. */
        *replayed = c->code == ONCE__V1__CODE__OK;
    }
    return true;
}

/* Executes a mutating call whose rpc id has no record yet, and stages its
 * record in the same transaction. */
static void
exec_mutating(server_call *c, const service_method *de,
              const Once__V1__Request *req,
              const uint8_t digest[RECORD_DIGEST_LEN], lease_entry *le)
{
    record rec = ONCE__STORE__V1__COMPLETION_RECORD__INIT;
    uint64_t bytes = 0;
    int rv;

    de->execute(c);
    if (c->transient) {
        exec_reset_txn(c);
        return;
    }
    if (c->code != ONCE__V1__CODE__OK && !c->keep_writes) {
        /* a non-OK outcome keeps no effect; keep_writes: a recorded
         * business rejection (svc_grants: the surface rejection log) */
        exec_reset_txn(c);
    }
    rec.method = req->method;
    rec.digest.data = (uint8_t *)digest;
    rec.digest.len = RECORD_DIGEST_LEN;
    rec.code = c->code;
    rec.reason = c->reason;
    rec.message = c->message;
    rec.payload.data = c->resp;
    rec.payload.len = c->resp_len;
    rec.completed_unix_ms = c->now_ms;
    if ((rv = records_put(c->txn, c->client_id, c->seq, &rec, &bytes)) != 0) {
        exec_reset_txn(c);
        call_store_error(c, rv);
        return;
    }
    lease_entry_record_added(le, c->seq, bytes, c->now_ms);
}

/* The reply to a call lease_admit refused (a stats count, code, reason and
 * a message saying what to do). */
static void
exec_refuse(server_call *c, const lease_admission *a,
            const Once__V1__Request *req)
{
    server_stats *stats = c->env->stats;
    unsigned long long id = c->client_id, seq = c->seq;

    switch (a->verdict) {
    case LEASE_STORE_ERROR:
        call_store_error(c, ENOMEM);
        break;
    case LEASE_NOT_LIVE:
        STATS_INC(stats, lease_expired);
        call_fail(c, ONCE__V1__CODE__FAILED_PRECONDITION, REASON_LEASE_EXPIRED,
                  "client id %llu has no live lease (%s); its calls are "
                  "never executed — open a new lease for new calls",
                  id, a->never_issued ? "never issued" : "ended");
        break;
    case LEASE_STALE:
        STATS_INC(stats, stale);
        call_fail(c, ONCE__V1__CODE__FAILED_PRECONDITION, REASON_STALE_RPC,
                  "seq %llu is below client %llu's acknowledged watermark "
                  "%llu: its reply was already delivered",
                  seq, id, (unsigned long long)a->watermark);
        break;
    case LEASE_BAD_ACK:
        call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_BAD_ACK,
                  "first_incomplete %llu is above the call's own seq %llu",
                  (unsigned long long)req->first_incomplete, seq);
        break;
    case LEASE_WINDOW_FULL:
        STATS_INC(stats, window_full);
        call_fail(c, ONCE__V1__CODE__RESOURCE_EXHAUSTED, REASON_WINDOW_FULL,
                  "seq %llu is %llu past the first unacknowledged seq %llu; at "
                  "most %llu calls may be unacknowledged — wait for replies",
                  seq, (unsigned long long)(c->seq - a->first_unacked),
                  (unsigned long long)a->first_unacked,
                  (unsigned long long)c->env->cfg.window);
        break;
    case LEASE_ADMITTED:
        break;
    }
}

/*
 * Admits a call under its rpc id: who may use the lease (auth, here), then
 * the lease's own rules (lease/admit.h: live, not stale, acknowledgement,
 * window). Returns the lease entry, or NULL with the outcome set.
 */
static lease_entry *
exec_admit(server_call *c, const Once__V1__Request *req)
{
    const exec_env *env = c->env;
    lease_entry *e = lease_table_find(env->leases, c->client_id);
    lease_ask ask = {.client_id = c->client_id,
                     .seq = c->seq,
                     .first_incomplete = req->first_incomplete,
                     .window = env->cfg.window,
                     .now_ms = c->now_ms};
    lease_admission a;

    /* Another principal's lease, a collected one or one never issued:
     * one answer (no lease oracle), before anything of a lease is touched
     * (its watermark included) or any record of it is read. */
    if (!auth_lease_scope(c, c->client_id, e != NULL,
                          e != NULL ? e->principal : NULL, false)) {
        return NULL;
    }
    if (lease_admit(env->leases, e, c->txn, &ask, &a) != LEASE_ADMITTED) {
        exec_refuse(c, &a, req);
        return NULL;
    }
    return e;
}

/* Whether every string field of the message desc in the len bytes at data
 * is exact text (wire_text.h); otherwise sets INVALID_ARGUMENT/
 * INVALID_STRING naming the field. what names the message in the reply. */
static bool
exec_text_ok(server_call *c, const ProtobufCMessageDescriptor *desc,
             const uint8_t *data, size_t len, const char *what)
{
    char field[96];
    const char *why;

    if (wire_text_check(desc, data, len, field, sizeof(field), &why)) {
        return true;
    }
    call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_INVALID_STRING,
              "%s field %s %s: names and other strings are compared byte "
              "for byte, so they must be UTF-8 without NUL bytes",
              what, field, why);
    return false;
}

/* Whether the len bytes at buf, a message of type d, are within the
 * field caps (field_scan.h), checked before protobuf-c decodes them (it
 * keeps each unknown field as an allocation); else fails c
 * INVALID_ARGUMENT/TOO_MANY_FIELDS (or MALFORMED_PAYLOAD). */
static bool
exec_fields_ok(server_call *c, const ProtobufCMessageDescriptor *d,
               const void *buf, size_t len, const char *what)
{
    field_scan_counts fc;
    field_scan_result r = field_scan(d, buf, len, 0, 0, &fc);

    if (r == FIELD_SCAN_OK) {
        return true;
    }
    call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, field_scan_reason(r),
              "%s carries %s; nothing was decoded", what, field_scan_why(r));
    return false;
}

/* The envelope body[0, len) scanned, authenticated (verified: the
 * generation the verifier passed its tag under, 0 for none), checked
 * against the field caps and decoded, in that order; its text fields checked in
 * the bytes as received. Returns it (the caller frees it with
 * once__v1__request__free_unpacked), or NULL with c failed. */
static Once__V1__Request *
exec_decode(server_call *c, const void *body, size_t len, uint64_t verified)
{
    Once__V1__Request *req;
    envelope_shape shape;

    /* Shape, then tag, then decode: what an unauthenticated request
     * costs is one bounded scan of its bytes (envelope.h), never a
     * protobuf-c allocation per field; the verifier thread did both
     * before (verify.h), so the tag is hashed here only when the tables
     * changed since, or for a batch's entries. */
    if (!verify_shape(c, body, len, &shape) ||
        !auth_check(c->env->auth, c, body, len, shape.principal,
                    shape.principal_len, verified)) {
        return NULL;
    }
    if (!exec_fields_ok(c, &once__v1__request__descriptor, body, len,
                        "the envelope")) {
        return NULL;
    }
    if ((req = once__v1__request__unpack(NULL, len, body)) == NULL ||
        strlen(req->principal) != shape.principal_len ||
        (shape.principal_len > 0 &&
         memcmp(req->principal, shape.principal, shape.principal_len) != 0)) {
        /* (the second test: protobuf-c did not read the principal the
         * scan authenticated; never expected, refused all the same) */
        call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT,
                  REASON_MALFORMED_ENVELOPE,
                  "the %zu bytes received are not a once.v1.Request", len);
        if (req != NULL) {
            once__v1__request__free_unpacked(req, NULL);
        }
        return NULL;
    }
    /* The method and principal as decoded end at a NUL byte; the bytes
     * as received say whether there was more. */
    if (!exec_text_ok(c, &once__v1__request__descriptor, body, len,
                      "the envelope's")) {
        once__v1__request__free_unpacked(req, NULL);
        return NULL;
    }
    return req;
}

/* The call's payload checked (text fields, field caps) and decoded as
 * its method's input. Returns it (the caller frees it with
 * protobuf_c_message_free_unpacked), or NULL with c failed. */
static ProtobufCMessage *
exec_payload(server_call *c, const Once__V1__Request *req)
{
    const ProtobufCMessageDescriptor *in = c->wm->method->input;
    ProtobufCMessage *payload;

    if (!exec_text_ok(c, in, req->payload.data, req->payload.len, in->name) ||
        !exec_fields_ok(c, in, req->payload.data, req->payload.len, in->name)) {
        return NULL;
    }
    payload = protobuf_c_message_unpack(in, NULL, req->payload.len,
                                        req->payload.data);
    if (payload == NULL) {
        call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_MALFORMED_PAYLOAD,
                  "the payload is not a valid %s", in->name);
    }
    return payload;
}

/* Runs every check and the handler on the envelope body[0, len) received
 * at recv_ms; leaves the outcome in c. A batch envelope (WIRE_BATCH_METHOD)
 * is not a call: once authenticated and decoded, with batch not NULL it is
 * handed over in *batch (the caller frees it), else refused as
 * NESTED_BATCH. */
static void
exec_call(const executor *ex, server_call *c, const void *body, size_t len,
          uint64_t recv_ms, uint64_t verified, bool *replayed,
          Once__V1__Request **batch)
{
    Once__V1__Request *req;
    ProtobufCMessage *payload = NULL;
    const service_method *de;
    uint8_t digest[RECORD_DIGEST_LEN];
    char name[96];
    lease_entry *le;
    bool mutating;

    if ((req = exec_decode(c, body, len, verified)) == NULL) {
        return;
    }
    /* The batch envelope carries no authority of its own: each entry is
     * checked on its own, from the scan and authentication on
     * (exec_batch). */
    if (strcmp(req->method, WIRE_BATCH_METHOD) == 0) {
        if (batch != NULL) {
            *batch = req;
            return;
        }
        call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_NESTED_BATCH,
                  "a batch entry is itself a batch; nothing of it ran");
        goto out;
    }
    if ((de = dispatch_find(ex->dp, req->method, strlen(req->method), &c->wm,
                            &c->svc)) == NULL) {
        name_printable(req->method, name, sizeof(name));
        call_fail(c, ONCE__V1__CODE__UNIMPLEMENTED, REASON_UNKNOWN_METHOD,
                  "no method \"%s\" (names look like "
                  "/once.v1.Counter/Increment)",
                  name);
        goto out;
    }
    if (!auth_permit(c->env->auth, c, c->wm->full_name)) {
        goto out;
    }
    /* Test build only (ONCED_EXEC_HOLD_MS): a call that carries a deadline
     * waits after it was received, as behind a long queue. */
    if (req->timeout_ms != 0) {
        FAULT_HOLD(FAULT_HOLD_EXEC);
    }
    /* Elapsed vs allowed: recv_ms + timeout_ms would wrap for a huge
     * timeout and turn "no hurry" into "already late". */
    if (req->timeout_ms != 0 && clock_now_ms() - recv_ms > req->timeout_ms) {
        call_fail(c, ONCE__V1__CODE__DEADLINE_EXCEEDED,
                  REASON_DEADLINE_EXCEEDED,
                  "the deadline passed before the call could run");
        goto out;
    }
    mutating = (de->flags & SERVICE_MUTATING) != 0;
    if (mutating && (req->client_id == 0 || req->seq == 0)) {
        call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_MISSING_RPC_ID,
                  "%s changes state and needs an rpc id: non-zero client_id "
                  "(from OpenLease) and seq",
                  c->wm->full_name);
        goto out;
    }
    if ((payload = exec_payload(c, req)) == NULL) {
        goto out;
    }
    c->req = payload;
    if (de->validate != NULL) {
        de->validate(c);
        if (c->code != ONCE__V1__CODE__OK) {
            goto out;
        }
    }
    if (!mutating) {
        de->execute(c);
        if (c->code != ONCE__V1__CODE__OK && !c->keep_writes) {
            exec_reset_txn(c); /* a failed read or lease op keeps nothing */
        }
        goto out;
    }
    c->client_id = req->client_id;
    c->seq = req->seq;
    if ((le = exec_admit(c, req)) == NULL) {
        goto out;
    }
    FAULT_POINT(FAULT_REQUEST_ACCEPTED);
    records_digest(req->method, strlen(req->method), req->payload.data,
                   req->payload.len, digest);
    if (exec_dedup(c, de, req, digest, le, replayed)) {
        goto out;
    }
    /* A new call would add data: not below the disk floor (a replay
     * above, or the acknowledgement exec_admit applied, adds none). Not
     * recorded: the same rpc id runs once space is back. */
    if (disk_floor_low(c->env->disk)) {
        atomic_fetch_add(&c->env->disk->refused, 1);
        call_fail(c, ONCE__V1__CODE__RESOURCE_EXHAUSTED, REASON_DISK_LOW,
                  "the data folder's disk is below its free-space floor "
                  "(onced --disk-free-min); %s was not executed and may be "
                  "retried under the same rpc id once space is back",
                  c->wm->full_name);
        c->transient = true;
        goto out;
    }
    exec_mutating(c, de, req, digest, le);
out:
    if (payload != NULL) {
        protobuf_c_message_free_unpacked(payload, NULL);
    }
    once__v1__request__free_unpacked(req, NULL);
}

/*
 * One envelope as one call with a transaction of its own: checks, handler,
 * stats, its Response packed into *buf (malloc'd, *len). Returns the
 * transaction, not yet committed (the caller commits it). With batch not
 * NULL, a batch envelope returns NULL and *batch instead (nothing ran).
 */
static store_txn *
exec_envelope(executor *ex, const void *body, size_t len, uint64_t recv_ms,
              uint64_t verified, Once__V1__Request **batch, uint8_t **buf,
              size_t *blen, uint64_t *park_ms)
{
    exec_env *env = ex->env;
    server_call c;
    bool replayed = false;

    memset(&c, 0, sizeof(c));
    c.env = env;
    c.now_ms = env->now_ms();
    if ((c.txn = store_txn_begin(env->st)) == NULL) {
        log_error("out of memory executing a call");
        abort();
    }
    exec_call(ex, &c, body, len, recv_ms, verified, &replayed, batch);
    if (batch != NULL && *batch != NULL) {
        store_txn_commit(c.txn, NULL, NULL); /* empty: nothing ran */
        return NULL;
    }
    if (park_ms != NULL) {
        *park_ms = c.code == ONCE__V1__CODE__OK ? c.park_ms : 0;
    }
    STATS_INC(env->stats, requests);
    stats_calls_count(&env->stats->calls, c.wm, c.code);
    if (c.code != ONCE__V1__CODE__OK && !replayed && !store_txn_dirty(c.txn)) {
        STATS_INC(env->stats, rejected);
    }
    if (c.code == ONCE__V1__CODE__UNAUTHENTICATED && !replayed) {
        STATS_INC(env->stats, unauthenticated);
    } else if (c.code == ONCE__V1__CODE__PERMISSION_DENIED && !replayed) {
        STATS_INC(env->stats, permission_denied);
    }
    if (wire_response_pack(c.code, c.reason, c.message,
                           c.code == ONCE__V1__CODE__OK ? c.resp : NULL,
                           c.resp_len, replayed, buf, blen) != 0) {
        log_error("out of memory packing a reply");
        abort();
    }
    free(c.resp);
    return c.txn;
}

/*
 * A batch envelope (once.proto, once.v1.Batch): its entries run in order,
 * each exactly as a request of its own (exec_envelope), in this group
 * commit; the one reply carries their Responses in order and leaves after
 * the last entry's transaction (and so every one before it) is durable.
 * A batch that cannot be read, is empty or too large runs nothing.
 */
static void
exec_batch(executor *ex, listener_req *lr, Once__V1__Request *req,
           exec_reply *r)
{
    Once__V1__BatchRequest *b;
    Once__V1__BatchResponse out = ONCE__V1__BATCH_RESPONSE__INIT;
    ProtobufCBinaryData *resps = NULL;
    uint8_t *packed = NULL;
    size_t plen = 0;
    const char *reason = NULL;
    char msg[160] = "";
    bool wrote = false;
    store_txn *t;
    field_scan_counts fc;
    field_scan_result fs;

    /* The entries are counted in the bytes before anything of them is
     * decoded: half a million empty entries cost one bounded scan. */
    fs = field_scan(&once__v1__batch_request__descriptor, req->payload.data,
                    req->payload.len, 1, WIRE_BATCH_MAX_ENTRIES, &fc);
    b = fs != FIELD_SCAN_OK ? NULL
                            : once__v1__batch_request__unpack(
                                  NULL, req->payload.len, req->payload.data);
    if (fs == FIELD_SCAN_COUNT_EXCEEDED) {
        reason = REASON_BATCH_TOO_LARGE;
        snprintf(msg, sizeof(msg),
                 "a batch carries at most %u entries, this one more; nothing "
                 "of it ran",
                 WIRE_BATCH_MAX_ENTRIES);
    } else if (fs != FIELD_SCAN_OK) {
        reason = field_scan_reason(fs);
        snprintf(msg, sizeof(msg),
                 "the batch payload carries %s; nothing of "
                 "it ran",
                 field_scan_why(fs));
    } else if (b == NULL) {
        reason = REASON_MALFORMED_PAYLOAD;
        snprintf(msg, sizeof(msg), "the payload is not a once.v1.BatchRequest");
    } else if (b->n_entries == 0) {
        reason = REASON_BATCH_EMPTY;
        snprintf(msg, sizeof(msg), "a batch needs at least one entry");
    } else if (b->n_entries > WIRE_BATCH_MAX_ENTRIES) {
        reason = REASON_BATCH_TOO_LARGE;
        snprintf(msg, sizeof(msg),
                 "a batch carries at most %u entries, this one %zu; nothing "
                 "of it ran",
                 WIRE_BATCH_MAX_ENTRIES, b->n_entries);
    } else if ((resps = calloc(b->n_entries, sizeof(*resps))) == NULL) {
        log_error("out of memory executing a batch");
        abort();
    }
    if (reason != NULL) {
        STATS_INC(ex->env->stats, requests);
        STATS_INC(ex->env->stats, rejected);
        if (wire_response_pack(ONCE__V1__CODE__INVALID_ARGUMENT, reason, msg,
                               NULL, 0, false, &r->buf, &r->len) != 0) {
            log_error("out of memory packing a reply");
            abort();
        }
        goto commit;
    }
    STATS_INC(ex->env->stats, batches);
    atomic_fetch_add(&ex->env->stats->batch_entries, b->n_entries);
    for (size_t i = 0; i < b->n_entries; i++) {
        /* (A batch entry never waits: park_ms NULL.) */
        t = exec_envelope(ex, b->entries[i].data, b->entries[i].len,
                          lr->recv_ms, 0, NULL, &resps[i].data, &resps[i].len,
                          NULL);
        bool dirty = store_txn_dirty(t);

        wrote = wrote || dirty;
        store_txn_commit(t, NULL, NULL);
        if (dirty) {
            /* This entry and those before it ran, in memory only; the
             * rest of the batch has not (a test seam, off in onced). */
            FAULT_POINT(FAULT_BATCH_ENTRY);
        }
    }
    out.n_responses = b->n_entries;
    out.responses = resps;
    plen = once__v1__batch_response__get_packed_size(&out);
    if ((packed = malloc(plen > 0 ? plen : 1)) == NULL) {
        log_error("out of memory packing a batch reply");
        abort();
    }
    once__v1__batch_response__pack(&out, packed);
    if (wire_response_pack(ONCE__V1__CODE__OK, NULL, NULL, packed, plen, false,
                           &r->buf, &r->len) != 0) {
        log_error("out of memory packing a reply");
        abort();
    }
commit:
    for (size_t i = 0; resps != NULL && i < b->n_entries; i++) {
        free(resps[i].data);
    }
    free(resps);
    free(packed);
    if (b != NULL) {
        once__v1__batch_request__free_unpacked(b, NULL);
    }
    once__v1__request__free_unpacked(req, NULL);
    nng_msg_free(lr->msg);
    lr->msg = NULL;
    lr->wrote = wrote;
    /* Empty, handed over last: its done runs after every entry's. */
    if ((t = store_txn_begin(ex->env->st)) == NULL) {
        log_error("out of memory executing a batch");
        abort();
    }
    store_txn_commit(t, exec_reply_send, r);
}

/* Holds lr, a read with nothing to return that asked to wait park_ms:
 * true when parked (its reply is not sent now), false when it must be
 * answered now — its deadline has passed, too many are parked, or the
 * executor stops. */
static bool
exec_park(executor *ex, listener_req *lr, uint64_t park_ms)
{
    uint64_t now = clock_now_ms();
    bool stopping;

    pthread_mutex_lock(&ex->mtx);
    stopping = ex->stopping;
    pthread_mutex_unlock(&ex->mtx);
    if (lr->park_until_ms == 0) {
        lr->park_until_ms = now + park_ms;
    }
    /* Past cfg.park_max (half the nng contexts: parked reads must leave
     * contexts for every other call) a read is answered at once. */
    if (stopping || now >= lr->park_until_ms ||
        ex->nparked >= ex->env->cfg.park_max) {
        return false;
    }
    if (ex->parked == NULL) {
        ex->parked_seen = atomic_load(&ex->env->stats->outbox_events);
    }
    lr->next = ex->parked;
    ex->parked = lr;
    ex->nparked++;
    return true;
}

/* After a sync: parked reads go back to the front of the queue, every one
 * when an outbox event was made durable since they parked (they run again
 * and see it), else those whose deadline passed (they answer with
 * nothing); all of them when the executor stops. */
static void
exec_unpark(executor *ex)
{
    uint64_t now = clock_now_ms();
    uint64_t events = atomic_load(&ex->env->stats->outbox_events);
    bool all = events != ex->parked_seen;
    listener_req **pp = &ex->parked;

    pthread_mutex_lock(&ex->mtx);
    all = all || ex->stopping;
    while (*pp != NULL) {
        listener_req *lr = *pp;

        if (!all && now < lr->park_until_ms) {
            pp = &lr->next;
            continue;
        }
        *pp = lr->next;
        ex->nparked--;
        if (ex->stopping) {
            lr->park_until_ms = 1; /* answered, never parked again */
        }
        /* Back in its principal's lane, so a parked read keeps the
         * fairness every call has. */
        if (fair_queue_push(&ex->q, lr->principal, strlen(lr->principal), lr) !=
            0) {
            log_error("out of memory queueing a parked read");
            abort();
        }
    }
    pthread_mutex_unlock(&ex->mtx);
    ex->parked_seen = events;
}

/* How long the executor may sleep with nothing queued: until the first
 * parked read's deadline (UINT64_MAX: none parked). */
static uint64_t
exec_park_wait_ms(const executor *ex)
{
    uint64_t now = clock_now_ms(), first = UINT64_MAX;

    for (const listener_req *lr = ex->parked; lr != NULL; lr = lr->next) {
        if (lr->park_until_ms < first) {
            first = lr->park_until_ms;
        }
    }
    return first == UINT64_MAX ? first : first > now ? first - now : 0;
}

static void
exec_one(executor *ex, listener_req *lr)
{
    exec_reply *r;
    Once__V1__Request *batch = NULL;
    store_txn *t;
    uint64_t park_ms = 0;

    if ((r = calloc(1, sizeof(*r))) == NULL) {
        log_error("out of memory executing a call");
        abort();
    }
    r->stats = ex->env->stats;
    r->req = lr;
    t = exec_envelope(ex, nng_msg_body(lr->msg), nng_msg_len(lr->msg),
                      lr->recv_ms, lr->auth_gen, &batch, &r->buf, &r->len,
                      &park_ms);
    if (t == NULL) {
        exec_batch(ex, lr, batch, r);
        return;
    }
    if (park_ms > 0 && !store_txn_dirty(t) && exec_park(ex, lr, park_ms)) {
        store_txn_abort(t); /* a read: it staged nothing */
        free(r->buf);
        free(r);
        return;
    }
    nng_msg_free(lr->msg);
    lr->msg = NULL;
    lr->wrote = store_txn_dirty(t);
    store_txn_commit(t, exec_reply_send, r);
}

/* store_sync, counting the size of a group that cost an fsync (the
 * collector's empty barriers and read-only rounds are no group commit). */
static void
exec_sync(executor *ex)
{
    store_counters before, after;
    size_t n;

    store_counters_get(ex->env->st, &before);
    n = store_sync(ex->env->st);
    store_counters_get(ex->env->st, &after);
    if (after.fsyncs != before.fsyncs) {
        stats_calls_group(&ex->env->stats->calls, n);
    }
}

static void *
exec_main(void *arg)
{
    executor *ex = arg;
    uint64_t group_ms = 0; /* clock_now_ms() of the group's first call */

    for (;;) {
        listener_req *lr;
        exec_task *t;
        bool late = group_ms != 0 && clock_now_ms() - group_ms >= EXEC_GROUP_MS;

        pthread_mutex_lock(&ex->mtx);
        if ((ex->q.queued == 0 && queue_empty(&ex->tasks)) || late ||
            store_pending(ex->env->st) >= EXEC_GROUP_MAX) {
            /* Out of queued calls (or a full or late group): make
             * everything executed durable, one fsync, and reply. Calls
             * that arrive meanwhile form the next group. */
            pthread_mutex_unlock(&ex->mtx);
            exec_sync(ex);
            group_ms = 0;
            if (ex->parked != NULL) {
                exec_unpark(ex);
            }
            pthread_mutex_lock(&ex->mtx);
        }
        while (ex->q.queued == 0 && queue_empty(&ex->tasks) && !ex->stopping) {
            uint64_t wait = exec_park_wait_ms(ex);
            struct timespec ts;

            if (wait == UINT64_MAX) {
                pthread_cond_wait(&ex->cv, &ex->mtx);
                continue;
            }
            ts = clock_deadline(wait);
            if (wait == 0 ||
                pthread_cond_timedwait(&ex->cv, &ex->mtx, &ts) == ETIMEDOUT) {
                break; /* a parked read's deadline: sync and unpark */
            }
        }
        if (!queue_empty(&ex->tasks)) {
            t = QUEUE_ITEM(queue_pop(&ex->tasks), exec_task, link);
            pthread_mutex_unlock(&ex->mtx);
            t->fn(t->arg);
            free(t);
            continue;
        }
        /* Round-robin over the principals with calls queued: one
         * principal's flood delays another's call by at most one call
         * of each principal ahead of it. */
        if ((lr = fair_queue_pop(&ex->q)) == NULL) {
            bool done = ex->stopping && ex->parked == NULL;

            pthread_mutex_unlock(&ex->mtx);
            if (done) {
                return NULL;
            }
            continue; /* a deadline, or stopping with reads parked: the
                         next round unparks them */
        }
        pthread_mutex_unlock(&ex->mtx);
        if (group_ms == 0) {
            group_ms = clock_now_ms();
        }
        exec_one(ex, lr);
    }
}

void
executor_submit(void *arg, listener_req *r)
{
    executor *ex = arg;

    pthread_mutex_lock(&ex->mtx);
    if (fair_queue_push(&ex->q, r->principal, strlen(r->principal), r) != 0) {
        log_error("out of memory queueing a call");
        abort();
    }
    pthread_cond_signal(&ex->cv);
    pthread_mutex_unlock(&ex->mtx);
}

void
executor_post(void *arg, void (*fn)(void *), void *fn_arg)
{
    executor *ex = arg;
    exec_task *t = malloc(sizeof(*t));

    if (t == NULL) {
        log_error("out of memory posting a task");
        abort();
    }
    t->fn = fn;
    t->arg = fn_arg;
    pthread_mutex_lock(&ex->mtx);
    queue_push(&ex->tasks, &t->link);
    pthread_cond_signal(&ex->cv);
    pthread_mutex_unlock(&ex->mtx);
}

int
executor_open(executor **ep, exec_env *env)
{
    executor *ex = calloc(1, sizeof(*ex));
    int rv;

    if (ex == NULL) {
        return ENOMEM;
    }
    ex->env = env;
    if ((rv = dispatch_open(&ex->dp, env)) != 0) {
        free(ex);
        return rv;
    }
    pthread_mutex_init(&ex->mtx, NULL);
    clock_cond_init(&ex->cv); /* parked reads' deadlines: monotonic */
    if ((rv = pthread_create(&ex->thread, NULL, exec_main, ex)) != 0) {
        pthread_mutex_destroy(&ex->mtx);
        pthread_cond_destroy(&ex->cv);
        dispatch_close(ex->dp);
        free(ex);
        return rv;
    }
    *ep = ex;
    return 0;
}

void
executor_close(executor *ex)
{
    if (ex == NULL) {
        return;
    }
    pthread_mutex_lock(&ex->mtx);
    ex->stopping = true;
    pthread_cond_signal(&ex->cv);
    pthread_mutex_unlock(&ex->mtx);
    pthread_join(ex->thread, NULL);
    pthread_mutex_destroy(&ex->mtx);
    pthread_cond_destroy(&ex->cv);
    dispatch_close(ex->dp); /* after the last call */
    free(ex);
}
