/*
 * test_grants.c — start grants (docs/grants.md) against a real onced.
 *
 * Owns one named test per rule of docs/grants.md and per rejected
 * alternative ("採らなかった方式"), plus the examples of issue 4. Map
 * (test → the rule it checks, as first written and in English):
 *
 *  制約 (constraints)
 *   c01_one_open_grant_per_surface  未終了の開始許可は、作業面につき一つだけ
 *                                   — at most one open grant per surface
 *   c02_closed_grant_is_history     終わった許可は履歴として残り、次の開始を
 *                                   妨げません — closed grants stay as history
 *                                   and do not block the next start
 *   c03_open_grant_has_location     開いている許可は、機械と場所を必ず持ち…
 *                                   場所の無い開いた許可は作れません
 *   c04_same_id_attempt_digest_is_resend  同じ依頼の識別子、同じ試行、同じ
 *                                   ダイジェストは、同じ許可の再送
 *   c05_other_payload_conflicts     中身が違えば衝突であり、新しい許可では
 *                                   ありません
 *   c06_lost_reply_no_second_owner  応答を落とした再送は、所有者を増やしません
 *                                   (+ issue: same grant, fresh credential)
 *   c07_retry_reevaluates_permission 再送のときも、してよいことの評価は
 *                                   やり直します…行が残っていることは権限の
 *                                   代わりになりません
 *   c07_same_id_replay_reevaluates_permission (same constraint) a replay of
 *                                   the same rpc id (RequestGrant, Claim,
 *                                   RenewCredential): refused once denied,
 *                                   a fresh credential or none with reason
 *   c08_destination_fixed_at_submission 宛先は、投入したときの配置…機械、
 *                                   場所、世代を許可に書きます
 *   c09_placement_changed_at_start  開始の時点で配置が変わっていたら拒否
 *   c10_open_grant_never_rewritten  開いている許可の宛先は、別の機械へ書き
 *                                   換えません (issue: placement changed →
 *                                   old grant cannot start, nothing moved)
 *   c11_silence_never_moves         沈黙は移動の条件にしません
 *   c12_credential_expiry_keeps_owner 付随の資格は短く切れてよい…切れても
 *                                   所有者は解放しません (issue: renewal
 *                                   under the same grant works)
 *   c13_only_recorded_finish_releases 解放するのは、開始が終わったと記録
 *                                   したときだけ
 *   c14_pending_13h_expires_on_own_claim 長く届かない未実行は…期限切れと
 *                                   して残します。半日より古いものは、その
 *                                   機械が次に取りに来たときに期限切れ
 *   c15_queue_row_names_destination 待ち行列の行は、積んだときに宛先を名乗り
 *   c16_claim_checks_only_destination 取得は…今取りに来ている機械のもので
 *                                   あることだけを確認…空いている機械を
 *                                   探しません
 *   c17_legacy_cannot_own_open_surface 古い取得の経路…未終了の許可がある面
 *                                   では古い経路が所有者になれない
 *   c18_legacy_and_grant_exclude    どちらの経路も、相手の確定を待たずに
 *                                   所有者を名乗れません (both orders + race)
 *   c19_input_kept_until_accepted   人の入力は、許可が受理されるまで手元に
 *                                   残します — once/inputs.h: a child
 *                                   process keeps and sends a start, onced
 *                                   commits it and drops the reply
 *                                   (batch_written:drop), the child is
 *                                   SIGKILLed; a new client on the same store
 *                                   re-sends with the SAME rpc id → replayed,
 *                                   one grant, the input no longer kept
 *   c19_input_lease_ended_not_resent  (same constraint) the kept id's lease
 *                                   ended first → LEASE_ENDED, not re-sent
 *                                   by itself; an explicit new-id resend
 *                                   gets the same single grant
 *   c19_enqueue_input_kept_until_accepted (same, queue path) Enqueue kept
 *                                   by once_work_submit: unanswered →
 *                                   PENDING, resumed with its id → one row
 *                                   (docs/grants.md, input keeping)
 *   c19_old_input_files_imported    (same, across the move to the journal)
 *                                   a store's files of before (*.input,
 *                                   made by the test) are imported at open
 *                                   and removed: PENDING resumed under its
 *                                   recorded id (replayed, one grant),
 *                                   REJECTED kept, a chain already kept
 *                                   wins over its file (docs/chains.md)
 *   c19_import_crash_between_write_and_unlink  (same) the opener
 *                                   (inputs_driver, libonce_seams) is
 *                                   SIGKILLed between a chain's write and
 *                                   its file's unlink: after the restart
 *                                   the input is kept once, under its
 *                                   recorded id, and resumed under that id
 *                                   only (replayed, one grant)
 *   c19_dead_writers_temp_files_swept  (same, the store's own debris) a
 *                                   temp file a crashed writer left
 *                                   (".tmp-<pid>-...", pid dead, a minute
 *                                   old) is removed when the store opens;
 *                                   a live process's, a fresh one and a
 *                                   name not of that form stay
 *   c20_rejected_input_kept_unsent  拒否された入力は、送られなかったものと
 *                                   して残ります — rejected inputs
 *                                   (PLACEMENT_CHANGED, ALREADY_OWNED) stay
 *                                   listed as REJECTED, never re-sent
 *   c21_delete_keeps_uncertain_grant 機械の行や作業の行を消しても、不確実な
 *                                   許可は消しません (issue: deleted machine
 *                                   → open grant kept, late duplicate gets
 *                                   the same grant)
 *  採らなかった方式 (rejected alternatives)
 *   r1_not_per_entry_point          入口ごとに始める — local start and queue
 *                                   claim racing for one surface → one owner
 *   r2_not_destination_at_claim     取得のときに宛先を決める — an idle machine
 *                                   never gets another machine's row; a row
 *                                   without destination is claimable by none
 *   r3_not_free_on_silence          沈黙を期限切れにして空ける — expired
 *                                   credential + silent machine: still owned
 *   r4_not_one_per_person_or_machine 許可を人につき一つにする (or per
 *                                   machine) — the unit is the surface key
 *   r5_not_new_grant_on_lost_reply  応答が落ちたら新しい許可を出す — SIGKILL
 *                                   between accept and reply, restart, retry
 *                                   → one grant
 *   r6_not_delete_grant_with_machine 機械を消すと許可も消す
 *  採用した形 (adopted form), further rules
 *   a1_cancelled_not_reaccepted     取り消されたあとの再送は、受理しません
 *   a2_next_attempt_only_after_retryable_close  試行を重ねるとき…成功した
 *                                   実行の再送が新しい実行になってはいけない
 *   a3_newer_pending_replaces_in_place 新しい未実行が同じ面の古い未実行を
 *                                   置き換える…同じ宛先の上で
 *   a4_rejections_recorded_per_surface 拒否の理由は、許可を出した側が持ちます
 *   a4_renewal_rejections_recorded  (same) credential renewals refused
 *                                   are logged too (via "renew"), repeats
 *                                   counted, replays log nothing
 *   a4_placement_changed_recorded   (same) PLACEMENT_CHANGED logged for a
 *                                   local start (old generation) and a
 *                                   queued row claimed after the move
 *   a4_cancelled_retry_recorded     (same) GRANT_CANCELLED logged
 *   a4_principal_denied_recorded    (same) PRINCIPAL_DENIED logged, for a
 *                                   new request and a granted one's retry
 *   a4_no_placement_recorded        (same) NO_PLACEMENT logged; an Enqueue
 *                                   is kept UNROUTED/NO_PLACEMENT instead
 *   a5_permission_failure_rolls_back 確認が失敗したら、新しい許可も作業面の
 *                                   印も一緒に戻します
 *   a6_mint_failure_rolls_back      (same rule) credential minting fails
 *                                   (ONCED_FAULT=mint:fail) → no grant, no
 *                                   lock row, no surface mark; recorded
 *   a6_mint_failure_keeps_grant     (same rule) minting fails on a resend of
 *                                   a granted request → INTERNAL/MINT_FAILED,
 *                                   the open grant, its epoch and history
 *                                   stay as they were
 *   a6_mint_failure_keeps_grant_on_renewal  the same on a renewal
 *
 * Invariant: every assertion about ownership reads the server's view back
 * (GetSurface), never only the reply.
 * Never: edits onced's data dir; the 12-hour rule moves time only through
 * ONCED_CLOCK_OFFSET_FILE (server.c), a file this test owns.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <once/grants.h>
#include <once/inputs.h>

#include <sodium.h>

#include "client/inputs.pb-c.h"
#include "proto/grants.pb-c.h"
#include "tests/harness.h"

#define HOUR_MS (3600ull * 1000)

static char clock_file[128];

static void
clock_set(long long offset_ms)
{
    FILE *f = fopen(clock_file, "w");
    assert_non_null(f);
    fprintf(f, "%lld\n", offset_ms);
    fclose(f);
}

/* ---- calls -------------------------------------------------------------- */

static bool
is_read(const char *m)
{
    return strcmp(m, "GetSurface") == 0 || strcmp(m, "ListQueue") == 0 ||
           strcmp(m, "GetPublicKey") == 0;
}

/* Calls /once.v1.Grants/<m>. On OK *out (if out) is the unpacked reply. */
static int
gcall_id(once_client *c, const char *m, const void *reqv, void *outv,
         once_rpc_id *id, once_status *st)
{
    const ProtobufCMessage *req = reqv;
    ProtobufCMessage **out = outv;
    const ProtobufCMethodDescriptor *md =
        protobuf_c_service_descriptor_get_method_by_name(
            &once__v1__grants__descriptor, m);
    char full[128];
    uint8_t *buf;
    void *resp = NULL;
    size_t len, rlen = 0;
    once_status st0;
    int rv;

    assert_non_null(md);
    if (st == NULL) {
        st = &st0;
    }
    snprintf(full, sizeof(full), "/once.v1.Grants/%s", m);
    len = protobuf_c_message_get_packed_size(req);
    buf = malloc(len + 1);
    protobuf_c_message_pack(req, buf);
    rv = once_call(c, full, !is_read(m), id, buf, len, &resp, &rlen, st);
    free(buf);
    if (out != NULL) {
        *out = NULL;
        if (rv == ONCE_OK) {
            *out = protobuf_c_message_unpack(md->output, NULL, rlen, resp);
            assert_non_null(*out);
        }
    }
    once_free(resp);
    return rv;
}

static int
gcall(once_client *c, const char *m, const void *req, void *out,
      once_status *st)
{
    return gcall_id(c, m, req, out, NULL, st);
}

#define FREE(m) protobuf_c_message_free_unpacked(&(m)->base, NULL)

static uint64_t
place(once_client *c, const char *surface, const char *machine, const char *loc)
{
    Once__V1__SetPlacementRequest r = ONCE__V1__SET_PLACEMENT_REQUEST__INIT;
    Once__V1__SetPlacementResponse *p;
    uint64_t g;

    r.surface = (char *)surface;
    r.machine = (char *)machine;
    r.location = (char *)loc;
    assert_int_equal(gcall(c, "SetPlacement", &r, &p, NULL), ONCE_OK);
    g = p->generation;
    FREE(p);
    return g;
}

typedef struct start {
    const char *rid;
    uint32_t attempt;
    const char *surface, *machine, *loc;
    uint64_t gen;
    const char *payload;
    uint64_t ttl;
} start;

/* RequestGrant of s under rpc id *id (NULL or {0, 0}: a new one, written
 * back). */
static int
request_id(once_client *c, const start *s, Once__V1__RequestGrantResponse **out,
           once_rpc_id *id, once_status *st)
{
    Once__V1__RequestGrantRequest r = ONCE__V1__REQUEST_GRANT_REQUEST__INIT;

    r.request_id = (char *)s->rid;
    r.attempt = s->attempt != 0 ? s->attempt : 1;
    r.surface = (char *)s->surface;
    r.machine = (char *)s->machine;
    r.location = (char *)s->loc;
    r.generation = s->gen;
    r.payload.data = (uint8_t *)(s->payload != NULL ? s->payload : "");
    r.payload.len = s->payload != NULL ? strlen(s->payload) : 0;
    r.credential_ttl_ms = s->ttl;
    return gcall_id(c, "RequestGrant", &r, out, id, st);
}

static int
request(once_client *c, const start *s, Once__V1__RequestGrantResponse **out,
        once_status *st)
{
    return request_id(c, s, out, NULL, st);
}

static bool
same_credential(const Once__V1__Credential *a, const Once__V1__Credential *b)
{
    return a->body.len == b->body.len &&
           memcmp(a->body.data, b->body.data, a->body.len) == 0;
}

/* RequestGrant that must be granted; returns the grant id. */
static uint64_t
granted(once_client *c, const start *s)
{
    Once__V1__RequestGrantResponse *g;
    once_status st;
    uint64_t id;
    int rv = request(c, s, &g, &st);

    if (rv != ONCE_OK) {
        print_error("RequestGrant %s: %s %s %s\n", s->rid, once_strerror(rv),
                    st.reason, st.message);
    }
    assert_int_equal(rv, ONCE_OK);
    assert_non_null(g->grant);
    id = g->grant->grant_id;
    FREE(g);
    return id;
}

/* RequestGrant that must be refused with reason. */
static void
refused(once_client *c, const start *s, int code, const char *reason)
{
    once_status st;
    int rv = request(c, s, NULL, &st);

    print_message("  %s → %s %s (%s)\n", s->rid, once_strerror(rv), st.reason,
                  st.message);
    assert_int_equal(rv, code);
    assert_string_equal(st.reason, reason);
}

static Once__V1__GetSurfaceResponse *
surface(once_client *c, const char *s)
{
    Once__V1__GetSurfaceRequest r = ONCE__V1__GET_SURFACE_REQUEST__INIT;
    Once__V1__GetSurfaceResponse *out;

    r.surface = (char *)s;
    assert_int_equal(gcall(c, "GetSurface", &r, &out, NULL), ONCE_OK);
    return out;
}

/* The open grant of s (0: none). */
static uint64_t
owner(once_client *c, const char *s)
{
    Once__V1__GetSurfaceResponse *v = surface(c, s);
    uint64_t id = v->open_grant != NULL ? v->open_grant->grant_id : 0;
    FREE(v);
    return id;
}

static int
finish(once_client *c, uint64_t id, Once__V1__GrantOutcome oc, once_status *st)
{
    Once__V1__FinishGrantRequest r = ONCE__V1__FINISH_GRANT_REQUEST__INIT;
    r.grant_id = id;
    r.outcome = oc;
    return gcall(c, "FinishGrant", &r, NULL, st);
}

static int
renew(once_client *c, uint64_t id, const char *machine,
      Once__V1__RenewCredentialResponse **out, once_status *st)
{
    Once__V1__RenewCredentialRequest r =
        ONCE__V1__RENEW_CREDENTIAL_REQUEST__INIT;
    r.grant_id = id;
    r.machine = (char *)machine;
    return gcall(c, "RenewCredential", &r, out, st);
}

static uint64_t
enqueue(once_client *c, const char *rid, const char *s, const char *payload,
        Once__V1__EnqueueResponse **out)
{
    Once__V1__EnqueueRequest r = ONCE__V1__ENQUEUE_REQUEST__INIT;
    Once__V1__EnqueueResponse *e;
    uint64_t id;

    r.request_id = (char *)rid;
    r.attempt = 1;
    r.surface = (char *)s;
    r.payload.data = (uint8_t *)payload;
    r.payload.len = strlen(payload);
    assert_int_equal(gcall(c, "Enqueue", &r, &e, NULL), ONCE_OK);
    id = e->row->work_id;
    if (out != NULL) {
        *out = e;
    } else {
        FREE(e);
    }
    return id;
}

static Once__V1__ClaimResponse *
claim(once_client *c, const char *machine)
{
    Once__V1__ClaimRequest r = ONCE__V1__CLAIM_REQUEST__INIT;
    Once__V1__ClaimResponse *out;
    once_status st;
    int rv;

    r.machine = (char *)machine;
    rv = gcall(c, "Claim", &r, &out, &st);
    if (rv != ONCE_OK) {
        print_error("Claim %s: %s %s\n", machine, st.reason, st.message);
    }
    assert_int_equal(rv, ONCE_OK);
    return out;
}

static Once__V1__ListQueueResponse *
list_queue(once_client *c, const char *machine)
{
    Once__V1__ListQueueRequest r = ONCE__V1__LIST_QUEUE_REQUEST__INIT;
    Once__V1__ListQueueResponse *out;
    r.machine = (char *)machine;
    assert_int_equal(gcall(c, "ListQueue", &r, &out, NULL), ONCE_OK);
    return out;
}

static void
permit(once_client *c, const char *principal, bool allowed)
{
    Once__V1__SetPermissionRequest r = ONCE__V1__SET_PERMISSION_REQUEST__INIT;
    r.principal = (char *)principal;
    r.allowed = allowed;
    assert_int_equal(gcall(c, "SetPermission", &r, NULL, NULL), ONCE_OK);
}

static int
legacy(once_client *c, const char *s, const char *holder, bool release,
       once_status *st)
{
    Once__V1__LegacyClaimRequest r = ONCE__V1__LEGACY_CLAIM_REQUEST__INIT;
    r.surface = (char *)s;
    r.holder = (char *)holder;
    /* LegacyRelease has the same two fields. */
    return gcall(c, release ? "LegacyRelease" : "LegacyClaim", &r, NULL, st);
}

static once_client *
client_as(const harness *h, const char *principal)
{
    once_options o;
    once_status st;
    once_client *c;

    once_options_init(&o);
    o.url = h->url;
    o.principal = principal;
    o.lease_ttl_ms = 120000;
    o.deadline_ms = 20000;
    assert_int_equal(once_client_open(&c, &o, &st), ONCE_OK);
    return c;
}

/* ---- fixtures ----------------------------------------------------------- */

typedef struct fx {
    harness *h;
    once_client *c;
} fx;

static int
setup(void **state)
{
    fx *f = calloc(1, sizeof(*f));

    clock_set(0);
    if (harness_start(&f->h) != 0) {
        free(f);
        return -1;
    }
    f->c = client_as(f->h, "scheduler");
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    fx *f = *state;
    int rv;

    once_client_close(f->c);
    rv = harness_stop(f->h);
    harness_free(f->h);
    free(f);
    clock_set(0);
    return rv;
}

#define FX                                                                     \
    fx *f = *state;                                                            \
    once_client *c = f->c

/* ---- 制約 ---------------------------------------------------------------- */

static void
c01_one_open_grant_per_surface(void **state)
{
    FX;
    uint64_t g = place(c, "repo/a", "m1", "/w/a");
    start a = {"r1", 1, "repo/a", "m1", "/w/a", g, "x", 0};
    start b = {"r2", 1, "repo/a", "m1", "/w/a", g, "y", 0};
    uint64_t id = granted(c, &a);

    refused(c, &b, ONCE_FAILED_PRECONDITION, "ALREADY_OWNED");
    assert_int_equal(owner(c, "repo/a"), id);
}

static void
c02_closed_grant_is_history(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    start a = {"r1", 1, "s", "m1", "/w", g, "x", 0};
    start b = {"r2", 1, "s", "m1", "/w", g, "y", 0};
    uint64_t id1 = granted(c, &a), id2;
    Once__V1__GetSurfaceResponse *v;

    assert_int_equal(finish(c, id1, ONCE__V1__GRANT_OUTCOME__SUCCEEDED, NULL),
                     ONCE_OK);
    id2 = granted(c, &b);
    assert_int_not_equal(id1, id2);
    v = surface(c, "s");
    assert_int_equal(v->open_grant->grant_id, id2);
    assert_int_equal(v->n_history, 1);
    assert_int_equal(v->history[0]->grant_id, id1);
    assert_int_equal(v->history[0]->outcome,
                     ONCE__V1__GRANT_OUTCOME__SUCCEEDED);
    assert_true(v->open_grant->epoch > v->history[0]->epoch);
    FREE(v);
}

static void
c03_open_grant_has_location(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    start nol = {"r1", 1, "s", "m1", "", g, "x", 0};
    start nom = {"r2", 1, "s", "", "/w", g, "x", 0};
    Once__V1__SetPlacementRequest pr = ONCE__V1__SET_PLACEMENT_REQUEST__INIT;
    once_status st;

    refused(c, &nol, ONCE_INVALID_ARGUMENT, "BAD_LOCATION");
    refused(c, &nom, ONCE_INVALID_ARGUMENT, "BAD_NAME");
    pr.surface = "s";
    pr.machine = "m1";
    pr.location = "";
    assert_int_equal(gcall(c, "SetPlacement", &pr, NULL, &st),
                     ONCE_INVALID_ARGUMENT);
    assert_int_equal(owner(c, "s"), 0);
}

static void
c04_same_id_attempt_digest_is_resend(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    start a = {"r1", 1, "s", "m1", "/w", g, "x", 0};
    Once__V1__RequestGrantResponse *r1, *r2;

    assert_int_equal(request(c, &a, &r1, NULL), ONCE_OK);
    assert_int_equal(request(c, &a, &r2, NULL), ONCE_OK); /* new rpc id */
    assert_false(r1->existing);
    assert_true(r2->existing);
    assert_int_equal(r1->grant->grant_id, r2->grant->grant_id);
    assert_int_equal(r1->grant->epoch, r2->grant->epoch);
    assert_int_equal(owner(c, "s"), r1->grant->grant_id);
    FREE(r1);
    FREE(r2);
}

static void
c05_other_payload_conflicts(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    start a = {"r1", 1, "s", "m1", "/w", g, "x", 0};
    start b = {"r1", 1, "s", "m1", "/w", g, "OTHER", 0};
    uint64_t id = granted(c, &a);
    Once__V1__GetSurfaceResponse *v;

    refused(c, &b, ONCE_ALREADY_EXISTS, "GRANT_CONFLICT");
    v = surface(c, "s");
    assert_int_equal(v->open_grant->grant_id, id);
    assert_int_equal(v->n_history, 0);
    FREE(v);
}

static void
c06_lost_reply_no_second_owner(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    start a = {"r1", 1, "s", "m1", "/w", g, "x", 0};
    Once__V1__RequestGrantResponse *r1, *r2, *r3;
    once_rpc_id id = {0, 0};
    once_client *c2;
    once_status st;

    assert_int_equal(request_id(c, &a, &r1, &id, NULL), ONCE_OK);
    /* The reply "was lost": the same rpc id again (from a lease-less
     * handle: the first one has acknowledged it) is a replay... */
    usleep(5000);
    assert_int_equal(harness_client(f->h, true, &c2), ONCE_OK);
    assert_int_equal(request_id(c2, &a, &r2, &id, &st), ONCE_OK);
    once_client_close(c2);
    assert_true(st.replayed);
    assert_int_equal(r2->grant->grant_id, r1->grant->grant_id);
    /* ...whose credential is minted afresh, not the stored one. */
    assert_non_null(r2->credential);
    assert_false(same_credential(r2->credential, r1->credential));
    /* ...and the scheduler restarted (new client, new rpc id, same request
     * id): the same grant with a freshly minted credential. */
    usleep(5000);
    c2 = client_as(f->h, "scheduler");
    assert_int_equal(request(c2, &a, &r3, NULL), ONCE_OK);
    assert_true(r3->existing);
    assert_int_equal(r3->grant->grant_id, r1->grant->grant_id);
    assert_non_null(r3->credential);
    assert_false(same_credential(r3->credential, r1->credential));
    assert_int_equal(owner(c, "s"), r1->grant->grant_id);
    once_client_close(c2);
    FREE(r1);
    FREE(r2);
    FREE(r3);
}

static void
c07_retry_reevaluates_permission(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    start a = {"r1", 1, "s", "m1", "/w", g, "x", 0};
    uint64_t id = granted(c, &a);
    Once__V1__RequestGrantResponse *r;

    permit(c, "scheduler", false);
    refused(c, &a, ONCE_PERMISSION_DENIED, "PRINCIPAL_DENIED");
    assert_int_equal(owner(c, "s"), id); /* kept, not a second */
    permit(c, "scheduler", true);
    assert_int_equal(request(c, &a, &r, NULL), ONCE_OK);
    assert_int_equal(r->grant->grant_id, id);
    assert_non_null(r->credential);
    FREE(r);
}

/*
 * The same constraint for a replay of the same rpc id, which is answered
 * from the completion record: the stored reply (and its credential) never
 * stands in for a permission withdrawn since (docs/spec.md), and a replayed
 * accept carries a credential minted now (docs/grants.md) or none, with the
 * reason, when the grant can no longer start. For RequestGrant, Claim and
 * RenewCredential.
 */
static void
c07_same_id_replay_reevaluates_permission(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    uint64_t gq = place(c, "q", "m1", "/wq");
    start a = {"r1", 1, "s", "m1", "/w", g, "x", 0};
    Once__V1__RequestGrantResponse *r1, *r2;
    Once__V1__ClaimRequest cq = ONCE__V1__CLAIM_REQUEST__INIT;
    Once__V1__ClaimResponse *k1, *k2;
    Once__V1__RenewCredentialRequest rn =
        ONCE__V1__RENEW_CREDENTIAL_REQUEST__INIT;
    once_rpc_id id = {0, 0}, kid = {0, 0}, nid = {0, 0};
    /* One handle per replayed call, each making no other call: a later
     * call would acknowledge the id, and its replay would be STALE_RPC. */
    once_client *sched = client_as(f->h, "scheduler");
    once_client *renewer = client_as(f->h, "scheduler");
    once_client *agent = client_as(f->h, "agent"), *k;
    once_status st;

    (void)gq;
    assert_int_equal(request_id(sched, &a, &r1, &id, NULL), ONCE_OK);
    enqueue(c, "w1", "q", "y", NULL);
    cq.machine = "m1";
    assert_int_equal(gcall_id(agent, "Claim", &cq, &k1, &kid, NULL), ONCE_OK);
    assert_int_equal(k1->n_claimed, 1);
    rn.grant_id = r1->grant->grant_id;
    rn.machine = "m1";
    assert_int_equal(
        gcall_id(renewer, "RenewCredential", &rn, NULL, &nid, NULL), ONCE_OK);
    /* The resends come from a lease-less handle, as in c06. */
    assert_int_equal(harness_client(f->h, true, &k), ONCE_OK);

    permit(c, "scheduler", false);
    permit(c, "agent", false);
    assert_int_equal(request_id(k, &a, NULL, &id, &st), ONCE_PERMISSION_DENIED);
    assert_string_equal(st.reason, "PRINCIPAL_DENIED");
    assert_false(st.replayed);
    assert_int_equal(gcall_id(k, "Claim", &cq, NULL, &kid, &st),
                     ONCE_PERMISSION_DENIED);
    assert_string_equal(st.reason, "PRINCIPAL_DENIED");
    assert_int_equal(gcall_id(k, "RenewCredential", &rn, NULL, &nid, &st),
                     ONCE_PERMISSION_DENIED);
    assert_string_equal(st.reason, "PRINCIPAL_DENIED");
    assert_int_equal(owner(c, "s"), r1->grant->grant_id); /* kept */
    assert_int_equal(owner(c, "q"), k1->claimed[0]->grant->grant_id);

    permit(c, "scheduler", true);
    permit(c, "agent", true);
    usleep(5000);
    assert_int_equal(request_id(k, &a, &r2, &id, &st), ONCE_OK);
    assert_true(st.replayed);
    assert_int_equal(r2->grant->grant_id, r1->grant->grant_id);
    assert_non_null(r2->credential);
    assert_false(same_credential(r2->credential, r1->credential));
    FREE(r2);
    assert_int_equal(gcall_id(k, "Claim", &cq, &k2, &kid, &st), ONCE_OK);
    assert_true(st.replayed);
    assert_int_equal(k2->n_claimed, 1);
    assert_int_equal(k2->claimed[0]->grant->grant_id,
                     k1->claimed[0]->grant->grant_id);
    assert_non_null(k2->claimed[0]->credential);
    assert_false(same_credential(k2->claimed[0]->credential,
                                 k1->claimed[0]->credential));
    FREE(k2);

    /* Placed elsewhere since: the same grants, replayed, but no credential
     * (the grants can no longer start), and the renewal is refused. */
    place(c, "s", "m2", "/w2");
    place(c, "q", "m2", "/wq2");
    assert_int_equal(request_id(k, &a, &r2, &id, &st), ONCE_OK);
    assert_true(st.replayed);
    assert_int_equal(r2->grant->grant_id, r1->grant->grant_id);
    assert_null(r2->credential);
    assert_string_equal(r2->credential_withheld, "PLACEMENT_CHANGED");
    FREE(r2);
    assert_int_equal(gcall_id(k, "Claim", &cq, &k2, &kid, &st), ONCE_OK);
    assert_true(st.replayed);
    assert_null(k2->claimed[0]->credential);
    assert_string_equal(k2->claimed[0]->credential_withheld,
                        "PLACEMENT_CHANGED");
    FREE(k2);
    assert_int_equal(gcall_id(k, "RenewCredential", &rn, NULL, &nid, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "PLACEMENT_CHANGED");
    once_client_close(k);
    once_client_close(agent);
    once_client_close(renewer);
    once_client_close(sched);
    FREE(k1);
    FREE(r1);
}

static void
c08_destination_fixed_at_submission(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m7", "/data/s");
    start a = {"r1", 1, "s", "m7", "/data/s", g, "x", 0};
    Once__V1__RequestGrantResponse *r;
    Once__V1__CredentialBody *b;

    assert_int_equal(request(c, &a, &r, NULL), ONCE_OK);
    assert_string_equal(r->grant->machine, "m7");
    assert_string_equal(r->grant->location, "/data/s");
    assert_int_equal(r->grant->generation, g);
    b = once__v1__credential_body__unpack(NULL, r->credential->body.len,
                                          r->credential->body.data);
    assert_string_equal(b->machine, "m7");
    assert_string_equal(b->location, "/data/s");
    assert_int_equal(b->generation, g);
    assert_int_equal(b->epoch, r->grant->epoch);
    FREE(b);
    FREE(r);
}

static void
c09_placement_changed_at_start(void **state)
{
    FX;
    uint64_t g1 = place(c, "s", "m1", "/w");
    uint64_t g2 = place(c, "s", "m2", "/w");
    start old = {"r1", 1, "s", "m1", "/w", g1, "x", 0};

    assert_true(g2 > g1);
    refused(c, &old, ONCE_FAILED_PRECONDITION, "PLACEMENT_CHANGED");
    assert_int_equal(owner(c, "s"), 0);
}

static void
c10_open_grant_never_rewritten(void **state)
{
    FX;
    uint64_t g1 = place(c, "s", "m1", "/w"), g2;
    start a = {"r1", 1, "s", "m1", "/w", g1, "x", 0};
    uint64_t id = granted(c, &a), id2;
    Once__V1__GetSurfaceResponse *v;
    once_status st;

    g2 = place(c, "s", "m2", "/w2");
    v = surface(c, "s");
    assert_int_equal(v->open_grant->grant_id, id);
    assert_string_equal(v->open_grant->machine, "m1"); /* not moved */
    assert_string_equal(v->open_grant->location, "/w");
    assert_true(v->open_grant->stop_requested);
    FREE(v);
    /* The old grant can no longer start (no credential)... */
    assert_int_equal(renew(c, id, "m1", NULL, &st), ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "PLACEMENT_CHANGED");
    /* ...the next start is a new grant for the new generation, once the
     * old one's finish is recorded. */
    start b = {"r2", 1, "s", "m2", "/w2", g2, "x", 0};
    refused(c, &b, ONCE_FAILED_PRECONDITION, "ALREADY_OWNED");
    assert_int_equal(finish(c, id, ONCE__V1__GRANT_OUTCOME__ABORTED, NULL),
                     ONCE_OK);
    id2 = granted(c, &b);
    assert_int_not_equal(id, id2);
}

static void
c11_silence_never_moves(void **state)
{
    FX;
    uint64_t g = place(c, "s", "sleepy", "/w");
    Once__V1__ClaimResponse *cl;
    Once__V1__ListQueueResponse *q;
    once_client *c2;

    (void)g;
    enqueue(c, "q1", "s", "job", NULL);
    for (int i = 0; i < 3; i++) {
        cl = claim(c, "awake");
        assert_int_equal(cl->n_claimed + cl->n_expired + cl->n_skipped, 0);
        FREE(cl);
    }
    clock_set((long long)(13 * HOUR_MS)); /* silent for 13 hours */
    c2 = client_as(f->h, "scheduler");    /* the old lease expired too */
    cl = claim(c2, "awake");
    assert_int_equal(cl->n_claimed + cl->n_expired + cl->n_skipped, 0);
    FREE(cl);
    q = list_queue(c2, "sleepy");
    assert_int_equal(q->n_pending, 1); /* still on its machine */
    assert_string_equal(q->pending[0]->machine, "sleepy");
    FREE(q);
    once_client_close(c2);
    clock_set(0);
    f->c = client_as(f->h, "scheduler");
    once_client_close(c);
}

static uint64_t wall_ms(void);

static void
c12_credential_expiry_keeps_owner(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    start a = {"r1", 1, "s", "m1", "/w", g, "x", 100};
    start b = {"r2", 1, "s", "m1", "/w", g, "y", 0};
    Once__V1__RequestGrantResponse *rg;
    Once__V1__RenewCredentialResponse *rn;
    Once__V1__CredentialBody *body;
    uint8_t pk[ONCE_GRANT_PUBLIC_KEY_BYTES];
    once_grant_credential cred;
    once_status st;
    uint64_t id;

    assert_int_equal(once_grants_public_key(c, pk, &st), ONCE_OK);
    assert_int_equal(request(c, &a, &rg, &st), ONCE_OK);
    id = rg->grant->grant_id;
    /* Wait (bounded) until the 100 ms credential has expired by the
     * clock onced and the verifier share, then prove it: the same
     * credential verifies at its issue time and fails now. */
    body = once__v1__credential_body__unpack(NULL, rg->credential->body.len,
                                             rg->credential->body.data);
    assert_non_null(body);
    assert_true(body->expires_unix_ms <= body->issued_unix_ms + 100);
    for (int i = 0; i < 500 && wall_ms() <= body->expires_unix_ms; i++) {
        usleep(10 * 1000);
    }
    assert_int_equal(
        once_grant_credential_verify(
            pk, rg->credential->body.data, rg->credential->body.len,
            rg->credential->signature.data, rg->credential->signature.len,
            body->issued_unix_ms, 0, &cred, &st),
        ONCE_OK);
    assert_int_equal(
        once_grant_credential_verify(
            pk, rg->credential->body.data, rg->credential->body.len,
            rg->credential->signature.data, rg->credential->signature.len,
            wall_ms(), 0, &cred, &st),
        ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "CREDENTIAL_EXPIRED");
    FREE(body);
    FREE(rg);
    /* Expired, the credential still leaves the grant its owner. */
    refused(c, &b, ONCE_FAILED_PRECONDITION, "ALREADY_OWNED");
    assert_int_equal(owner(c, "s"), id);
    assert_int_equal(renew(c, id, "m1", &rn, NULL), ONCE_OK);
    body = once__v1__credential_body__unpack(NULL, rn->credential->body.len,
                                             rn->credential->body.data);
    assert_int_equal(body->grant_id, id);
    assert_int_equal(body->epoch, 1);
    FREE(body);
    FREE(rn);
}

static void
c13_only_recorded_finish_releases(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    start a = {"r1", 1, "s", "m1", "/w", g, "x", 100};
    uint64_t id = granted(c, &a);
    Once__V1__CancelGrantRequest cr = ONCE__V1__CANCEL_GRANT_REQUEST__INIT;
    Once__V1__DeleteMachineRequest dm = ONCE__V1__DELETE_MACHINE_REQUEST__INIT;

    usleep(200 * 1000); /* credential expiry: still owned */
    assert_int_equal(owner(c, "s"), id);
    cr.grant_id = id; /* cancel: still owned until the finish */
    assert_int_equal(gcall(c, "CancelGrant", &cr, NULL, NULL), ONCE_OK);
    assert_int_equal(owner(c, "s"), id);
    dm.machine = "m1"; /* machine deleted: still owned */
    assert_int_equal(gcall(c, "DeleteMachine", &dm, NULL, NULL), ONCE_OK);
    assert_int_equal(owner(c, "s"), id);
    assert_int_equal(finish(c, id, ONCE__V1__GRANT_OUTCOME__ABORTED, NULL),
                     ONCE_OK);
    assert_int_equal(owner(c, "s"), 0);
}

static void
c14_pending_13h_expires_on_own_claim(void **state)
{
    FX;
    Once__V1__ClaimResponse *cl;
    Once__V1__ListQueueResponse *q;
    Once__V1__GetSurfaceResponse *v;
    once_client *c2;
    uint64_t wid;

    place(c, "s", "m1", "/w");
    wid = enqueue(c, "q1", "s", "job", NULL);
    clock_set((long long)(13 * HOUR_MS));
    c2 = client_as(f->h, "scheduler");
    cl = claim(c2, "m2"); /* another machine: nothing, not even expiry */
    assert_int_equal(cl->n_claimed + cl->n_expired + cl->n_skipped, 0);
    FREE(cl);
    cl = claim(c2, "m1");
    assert_int_equal(cl->n_claimed, 0);
    assert_int_equal(cl->n_expired, 1);
    assert_int_equal(cl->expired[0]->work_id, wid);
    assert_int_equal(cl->expired[0]->state, ONCE__V1__WORK_ROW__STATE__EXPIRED);
    assert_string_equal(cl->expired[0]->machine, "m1");
    FREE(cl);
    q = list_queue(c2, "m1"); /* kept as a fact on that machine */
    assert_int_equal(q->n_pending, 0);
    assert_int_equal(q->n_expired, 1);
    assert_string_equal(q->expired[0]->machine, "m1");
    FREE(q);
    v = surface(c2, "s");
    assert_null(v->open_grant);
    FREE(v);
    once_client_close(c2);
    clock_set(0);
    f->c = client_as(f->h, "scheduler");
    once_client_close(c);
}

static void
c15_queue_row_names_destination(void **state)
{
    FX;
    Once__V1__EnqueueResponse *e;
    Once__V1__ClaimResponse *cl;
    uint64_t g1;

    /* No placement: kept, never claimable. */
    enqueue(c, "q0", "unplaced", "job", &e);
    assert_int_equal(e->row->state, ONCE__V1__WORK_ROW__STATE__UNROUTED);
    assert_string_equal(e->row->machine, "");
    FREE(e);
    g1 = place(c, "s", "m1", "/w");
    enqueue(c, "q1", "s", "job", &e);
    assert_string_equal(e->row->machine, "m1");
    assert_string_equal(e->row->location, "/w");
    assert_int_equal(e->row->generation, g1);
    FREE(e);
    place(c, "s", "m2", "/w2");
    cl = claim(c, "m2"); /* the new placement does not pull the row */
    assert_int_equal(cl->n_claimed + cl->n_skipped, 0);
    FREE(cl);
    cl = claim(c, "m1"); /* written for generation g1: refused, not moved */
    assert_int_equal(cl->n_claimed, 0);
    assert_int_equal(cl->n_skipped, 1);
    assert_int_equal(cl->skipped[0]->state,
                     ONCE__V1__WORK_ROW__STATE__REJECTED);
    assert_string_equal(cl->skipped[0]->machine, "m1");
    assert_string_equal(cl->skipped[0]->reason, "PLACEMENT_CHANGED");
    FREE(cl);
}

static void
c16_claim_checks_only_destination(void **state)
{
    FX;
    Once__V1__ClaimResponse *cl;

    place(c, "a", "m1", "/a");
    place(c, "b", "m2", "/b");
    enqueue(c, "qa", "a", "ja", NULL);
    enqueue(c, "qb", "b", "jb", NULL);
    cl = claim(c, "m2");
    assert_int_equal(cl->n_claimed, 1);
    assert_string_equal(cl->claimed[0]->row->surface, "b");
    assert_string_equal(cl->claimed[0]->grant->machine, "m2");
    FREE(cl);
    cl = claim(c, "m1");
    assert_int_equal(cl->n_claimed, 1);
    assert_string_equal(cl->claimed[0]->row->surface, "a");
    assert_string_equal(cl->claimed[0]->grant->via, "queue");
    FREE(cl);
}

static void
c17_legacy_cannot_own_open_surface(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    start a = {"r1", 1, "s", "m1", "/w", g, "x", 0};
    uint64_t id = granted(c, &a);
    Once__V1__GetSurfaceResponse *v;
    once_status st;

    assert_int_equal(legacy(c, "s", "old-agent", false, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "ALREADY_OWNED");
    v = surface(c, "s");
    assert_int_equal(v->open_grant->grant_id, id);
    assert_string_equal(v->legacy_holder, "");
    FREE(v);
}

typedef struct race {
    const harness *h;
    int which;
    int rv;
    pthread_barrier_t *bar;
    uint64_t gen;
    const char *rid;
} race;

static void *
race_main(void *arg)
{
    race *r = arg;
    once_client *c;
    once_options o;
    once_status st;
    start a = {r->rid, 1, "s", "m1", "/w", r->gen, "x", 0};

    once_options_init(&o);
    o.url = r->h->url;
    o.principal = "scheduler";
    if (once_client_open(&c, &o, &st) != ONCE_OK) {
        r->rv = -1;
        return NULL;
    }
    pthread_barrier_wait(r->bar);
    if (r->which == 0) {
        r->rv = request(c, &a, NULL, &st);
    } else if (r->which == 1) {
        r->rv = legacy(c, "s", "old-agent", false, &st);
    } else {
        Once__V1__ClaimRequest cr = ONCE__V1__CLAIM_REQUEST__INIT;
        Once__V1__ClaimResponse *out = NULL;
        cr.machine = "m1";
        r->rv = gcall(c, "Claim", &cr, &out, &st);
        if (r->rv == ONCE_OK && out->n_claimed != 1) {
            r->rv = ONCE_FAILED_PRECONDITION;
        }
        if (out != NULL) {
            FREE(out);
        }
    }
    once_client_close(c);
    return NULL;
}

/* Runs the local start against entry point `other` (1 legacy, 2 claim) at
 * the same instant; returns how many won. */
static int
race_two(const harness *h, uint64_t gen, int other, const char *rid)
{
    pthread_barrier_t bar;
    pthread_t t[2];
    race r[2] = {{h, 0, -1, &bar, gen, rid}, {h, other, -1, &bar, gen, rid}};
    int won = 0;

    pthread_barrier_init(&bar, NULL, 2);
    for (int i = 0; i < 2; i++) {
        pthread_create(&t[i], NULL, race_main, &r[i]);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        won += r[i].rv == ONCE_OK;
    }
    pthread_barrier_destroy(&bar);
    return won;
}

static void
c18_legacy_and_grant_exclude(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    start a = {"r1", 1, "s", "m1", "/w", g, "x", 0};
    Once__V1__GetSurfaceResponse *v;
    once_status st;

    assert_int_equal(legacy(c, "s", "old-agent", false, &st), ONCE_OK);
    refused(c, &a, ONCE_FAILED_PRECONDITION, "ALREADY_OWNED");
    assert_int_equal(legacy(c, "s", "old-agent", true, &st), ONCE_OK);
    granted(c, &a);
    /* Racing, many times: exactly one of the two paths owns it. */
    for (int i = 0; i < 10; i++) {
        char rid[32];
        uint64_t open;

        v = surface(c, "s");
        open = v->open_grant != NULL ? v->open_grant->grant_id : 0;
        FREE(v);
        if (open != 0) {
            assert_int_equal(
                finish(c, open, ONCE__V1__GRANT_OUTCOME__RELEASED, NULL),
                ONCE_OK);
        }
        legacy(c, "s", "old-agent", true, &st);
        snprintf(rid, sizeof(rid), "race-%d", i);
        assert_int_equal(race_two(f->h, g, 1, rid), 1);
        v = surface(c, "s");
        assert_true((v->open_grant != NULL) != (v->legacy_holder[0] != '\0'));
        FREE(v);
    }
}

static void
c21_delete_keeps_uncertain_grant(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    start a = {"r1", 1, "s", "m1", "/w", g, "x", 0};
    uint64_t id = granted(c, &a);
    Once__V1__DeleteMachineRequest dm = ONCE__V1__DELETE_MACHINE_REQUEST__INIT;
    Once__V1__DeleteMachineResponse *dr;
    Once__V1__RequestGrantResponse *late;

    dm.machine = "m1";
    assert_int_equal(gcall(c, "DeleteMachine", &dm, &dr, NULL), ONCE_OK);
    assert_int_equal(dr->n_open_grants_kept, 1);
    assert_int_equal(dr->open_grants_kept[0], id);
    FREE(dr);
    assert_int_equal(owner(c, "s"), id);
    /* The late duplicate gets the same grant — not a second one — and no
     * credential for a deleted machine. */
    assert_int_equal(request(c, &a, &late, NULL), ONCE_OK);
    assert_true(late->existing);
    assert_int_equal(late->grant->grant_id, id);
    assert_null(late->credential);
    assert_string_equal(late->credential_withheld, "MACHINE_DELETED");
    FREE(late);
    assert_int_equal(owner(c, "s"), id);
}

/* ---- 採らなかった方式 ------------------------------------------------------
 */

static void
r1_not_per_entry_point(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    Once__V1__ClaimResponse *cl;

    (void)g;
    for (int i = 0; i < 10; i++) {
        char rid[32], qid[32];
        uint64_t open;

        snprintf(rid, sizeof(rid), "local-%d", i);
        snprintf(qid, sizeof(qid), "queued-%d", i);
        enqueue(c, qid, "s", "job", NULL);
        assert_int_equal(race_two(f->h, g, 2, rid), 1);
        open = owner(c, "s");
        assert_int_not_equal(open, 0);
        assert_int_equal(
            finish(c, open, ONCE__V1__GRANT_OUTCOME__RELEASED, NULL), ONCE_OK);
        /* If the claim lost, its row waits on m1; clear it for the next
         * round by claiming it now. */
        cl = claim(c, "m1");
        for (size_t k = 0; k < cl->n_claimed; k++) {
            finish(c, cl->claimed[k]->grant->grant_id,
                   ONCE__V1__GRANT_OUTCOME__RELEASED, NULL);
        }
        FREE(cl);
    }
    /* The same request through both entry points is one grant. */
    {
        start a = {"same", 1, "s", "m1", "/w", g, "job", 0};
        uint64_t id = granted(c, &a);
        Once__V1__EnqueueRequest er = ONCE__V1__ENQUEUE_REQUEST__INIT;
        er.request_id = "same";
        er.attempt = 1;
        er.surface = "s";
        er.payload.data = (uint8_t *)"job";
        er.payload.len = 3;
        Once__V1__EnqueueResponse *e;
        assert_int_equal(gcall(c, "Enqueue", &er, &e, NULL), ONCE_OK);
        /* The lock comes first: the resend is answered with the grant, and
         * no claimable row is made (the agent already holds the grant). */
        assert_int_equal(e->row->grant_id, id);
        assert_int_equal(e->row->state, ONCE__V1__WORK_ROW__STATE__CLAIMED);
        FREE(e);
        cl = claim(c, "m1");
        assert_int_equal(cl->n_claimed, 0);
        FREE(cl);
        assert_int_equal(owner(c, "s"), id);
        /* Other content under the same pair is refused at once. */
        er.payload.data = (uint8_t *)"other";
        er.payload.len = 5;
        {
            once_status st;
            assert_int_not_equal(gcall(c, "Enqueue", &er, NULL, &st), ONCE_OK);
            assert_string_equal(st.reason, "GRANT_CONFLICT");
        }
    }
}

static void
r2_not_destination_at_claim(void **state)
{
    FX;
    Once__V1__ClaimResponse *cl;
    const char *idle[] = {"idle1", "idle2", "idle3"};

    enqueue(c, "q0", "s", "job", NULL); /* no placement: no destination */
    place(c, "t", "busy", "/t");
    enqueue(c, "q1", "t", "job", NULL);
    for (size_t i = 0; i < 3; i++) {
        cl = claim(c, idle[i]);
        assert_int_equal(cl->n_claimed + cl->n_skipped + cl->n_expired, 0);
        FREE(cl);
    }
    place(c, "s", "idle1", "/s"); /* a placement later does not route q0 */
    cl = claim(c, "idle1");
    assert_int_equal(cl->n_claimed, 0);
    FREE(cl);
    cl = claim(c, "busy");
    assert_int_equal(cl->n_claimed, 1);
    assert_string_equal(cl->claimed[0]->row->surface, "t");
    FREE(cl);
}

static void
r3_not_free_on_silence(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    start a = {"r1", 1, "s", "m1", "/w", g, "x", 100};
    uint64_t id = granted(c, &a);
    once_client *c2;

    clock_set((long long)(13 * HOUR_MS)); /* m1 silent, credential long gone */
    c2 = client_as(f->h, "scheduler");
    start b = {"r2", 1, "s", "m1", "/w", g, "y", 0};
    refused(c2, &b, ONCE_FAILED_PRECONDITION, "ALREADY_OWNED");
    place(c2, "s", "m2", "/w"); /* even re-placing does not free it */
    start b2 = {"r3", 1, "s", "m2", "/w", g + 1, "y", 0};
    refused(c2, &b2, ONCE_FAILED_PRECONDITION, "ALREADY_OWNED");
    assert_int_equal(owner(c2, "s"), id);
    once_client_close(c2);
    clock_set(0);
    f->c = client_as(f->h, "scheduler");
    once_client_close(c);
}

static void
r4_not_one_per_person_or_machine(void **state)
{
    FX;
    uint64_t g1 = place(c, "m1:/w/a", "m1", "/w/a");
    uint64_t g2 = place(c, "m1:/w/b", "m1", "/w/b");
    uint64_t g3 = place(c, "m2:/w/a", "m2", "/w/a");
    start a = {"r1", 1, "m1:/w/a", "m1", "/w/a", g1, "x", 0};
    start b = {"r2", 1, "m1:/w/b", "m1", "/w/b", g2, "x", 0};
    start d = {"r3", 1, "m2:/w/a", "m2", "/w/a", g3, "x", 0};
    start same = {"r4", 1, "m1:/w/a", "m1", "/w/a", g1, "y", 0};

    /* One person, one machine, several surfaces: all start. */
    granted(c, &a);
    granted(c, &b);
    granted(c, &d);
    /* One surface: one owner, whoever asks. */
    once_client *other = client_as(f->h, "someone-else");
    refused(other, &same, ONCE_FAILED_PRECONDITION, "ALREADY_OWNED");
    once_client_close(other);
}

static void
r5_not_new_grant_on_lost_reply(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    Once__V1__RequestGrantRequest rq = ONCE__V1__REQUEST_GRANT_REQUEST__INIT;
    Once__V1__RequestGrantResponse *r2, *r3;
    Once__V1__GetSurfaceResponse *v;
    once_rpc_id id = {0, 0};
    once_options o;
    once_status st;
    once_client *k;
    int rv;

    once_options_init(&o);
    o.url = f->h->url;
    o.principal = "scheduler";
    o.deadline_ms = 3000;
    o.attempt_timeout_ms = 500;
    assert_int_equal(once_client_open(&k, &o, &st), ONCE_OK);
    rq.request_id = "r1";
    rq.attempt = 1;
    rq.surface = "s";
    rq.machine = "m1";
    rq.location = "/w";
    rq.generation = g;
    rq.payload.data = (uint8_t *)"x";
    rq.payload.len = 1;
    /* onced dies right after the grant's batch is synced, before the reply
     * (the first writing call after the restart). */
    assert_true(harness_kill(f->h, SIGKILL) >= 0);
    assert_int_equal(harness_set_fault(f->h, "batch_written"), 0);
    assert_int_equal(harness_restart(f->h), 0);
    rv = gcall_id(k, "RequestGrant", &rq, NULL, &id, &st);
    print_message("first send: %s %s\n", once_strerror(rv), st.reason);
    assert_int_not_equal(rv, ONCE_OK);
    /* It crashed at the armed point (SIGKILL), not by our hand. */
    rv = harness_wait_exit(f->h, 5000);
    assert_true(rv != -1 && WIFSIGNALED(rv) && WTERMSIG(rv) == SIGKILL);
    assert_int_equal(harness_set_fault(f->h, NULL), 0);
    assert_int_equal(harness_restart(f->h), 0);
    once_client_close(k);
    /* Retry the same rpc id (a fresh lease-less handle, as a restarted
     * caller holding the id would): the stored result... */
    assert_int_equal(harness_client(f->h, true, &k), ONCE_OK);
    assert_int_equal(gcall_id(k, "RequestGrant", &rq, &r2, &id, &st), ONCE_OK);
    assert_true(st.replayed);
    /* ...and the same request from a restarted scheduler: same grant. */
    once_client_close(c);
    f->c = c = client_as(f->h, "scheduler");
    start a = {"r1", 1, "s", "m1", "/w", g, "x", 0};
    assert_int_equal(request(c, &a, &r3, NULL), ONCE_OK);
    assert_int_equal(r2->grant->grant_id, r3->grant->grant_id);
    assert_true(r3->existing);
    v = surface(c, "s");
    assert_int_equal(v->open_grant->grant_id, r2->grant->grant_id);
    assert_int_equal(v->n_history, 0);
    assert_int_equal(v->epoch, 1); /* one grant ever */
    FREE(v);
    FREE(r2);
    FREE(r3);
    once_client_close(k);
}

static void
r6_not_delete_grant_with_machine(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    uint64_t wid = enqueue(c, "q1", "s", "job", NULL);
    Once__V1__ClaimResponse *cl = claim(c, "m1");
    Once__V1__DeleteWorkRequest dw = ONCE__V1__DELETE_WORK_REQUEST__INIT;
    Once__V1__DeleteMachineRequest dm = ONCE__V1__DELETE_MACHINE_REQUEST__INIT;
    uint64_t id;

    (void)g;
    assert_int_equal(cl->n_claimed, 1);
    id = cl->claimed[0]->grant->grant_id;
    FREE(cl);
    dw.work_id = wid; /* the work row goes; its grant stays */
    assert_int_equal(gcall(c, "DeleteWork", &dw, NULL, NULL), ONCE_OK);
    assert_int_equal(owner(c, "s"), id);
    dm.machine = "m1";
    assert_int_equal(gcall(c, "DeleteMachine", &dm, NULL, NULL), ONCE_OK);
    assert_int_equal(owner(c, "s"), id);
    /* The late duplicate of the queued start: not a second grant. */
    start a = {"q1", 1, "s", "m1", "/w", g, "job", 0};
    assert_int_equal(granted(c, &a), id);
}

/* ---- 採用した形 -----------------------------------------------------------
 */

static void
a1_cancelled_not_reaccepted(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    start a = {"r1", 1, "s", "m1", "/w", g, "x", 0};
    start a2 = {"r1", 2, "s", "m1", "/w", g, "x", 0};
    Once__V1__CancelGrantRequest cr = ONCE__V1__CANCEL_GRANT_REQUEST__INIT;
    uint64_t id = granted(c, &a);

    cr.grant_id = id;
    assert_int_equal(gcall(c, "CancelGrant", &cr, NULL, NULL), ONCE_OK);
    refused(c, &a, ONCE_FAILED_PRECONDITION, "GRANT_CANCELLED");
    assert_int_equal(finish(c, id, ONCE__V1__GRANT_OUTCOME__ABORTED, NULL),
                     ONCE_OK);
    refused(c, &a2, ONCE_FAILED_PRECONDITION, "PREVIOUS_ATTEMPT_CANCELLED");
}

static void
a2_next_attempt_only_after_retryable_close(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    start a1 = {"r1", 1, "s", "m1", "/w", g, "x", 0};
    start a2 = {"r1", 2, "s", "m1", "/w", g, "x", 0};
    start a3 = {"r1", 3, "s", "m1", "/w", g, "x", 0};
    start skip = {"r9", 2, "s", "m1", "/w", g, "x", 0};
    uint64_t id1, id2;

    refused(c, &skip, ONCE_FAILED_PRECONDITION, "PREVIOUS_ATTEMPT_MISSING");
    id1 = granted(c, &a1);
    refused(c, &a2, ONCE_FAILED_PRECONDITION, "PREVIOUS_ATTEMPT_OPEN");
    assert_int_equal(
        finish(c, id1, ONCE__V1__GRANT_OUTCOME__FAILED_BEFORE_START, NULL),
        ONCE_OK);
    id2 = granted(c, &a2);
    assert_int_not_equal(id1, id2);
    assert_int_equal(finish(c, id2, ONCE__V1__GRANT_OUTCOME__SUCCEEDED, NULL),
                     ONCE_OK);
    /* A retry of a success is never a new start. */
    refused(c, &a3, ONCE_FAILED_PRECONDITION, "PREVIOUS_ATTEMPT_SUCCEEDED");
    assert_int_equal(owner(c, "s"), 0);
    /* A late copy of attempt 1 is still grant id1, closed: no credential. */
    {
        Once__V1__RequestGrantResponse *r;
        assert_int_equal(request(c, &a1, &r, NULL), ONCE_OK);
        assert_int_equal(r->grant->grant_id, id1);
        assert_null(r->credential);
        assert_string_equal(r->credential_withheld, "GRANT_CLOSED");
        FREE(r);
    }
}

static void
a3_newer_pending_replaces_in_place(void **state)
{
    FX;
    Once__V1__EnqueueResponse *e1, *e2;
    Once__V1__ListQueueResponse *q;
    Once__V1__GetSurfaceResponse *v;

    place(c, "s", "m1", "/w");
    enqueue(c, "q1", "s", "old", &e1);
    enqueue(c, "q2", "s", "new", &e2);
    assert_true(e2->replaced);
    assert_int_equal(e2->row->work_id, e1->row->work_id);
    assert_string_equal(e2->row->machine, "m1");
    assert_string_equal(e2->row->request_id, "q2");
    q = list_queue(c, "m1");
    assert_int_equal(q->n_pending, 1);
    assert_memory_equal(q->pending[0]->payload.data, "new", 3);
    FREE(q);
    /* The replacement is a recorded fact on the surface, naming both. */
    v = surface(c, "s");
    assert_int_equal(v->n_rejections, 1);
    assert_string_equal(v->rejections[0]->request_id, "q1");
    assert_string_equal(v->rejections[0]->reason, "REPLACED");
    assert_non_null(strstr(v->rejections[0]->message, "q2"));
    FREE(v);
    FREE(e1);
    FREE(e2);
}

/* Finding 9: a resent Enqueue of an accepted (request_id, attempt) while its
 * grant is open, then Claims from the agent: the grant is handed out once
 * (the resend is answered with the grant; no second claimable row). */
static void
a3_resent_enqueue_grant_handed_out_once(void **state)
{
    FX;
    Once__V1__EnqueueResponse *e;
    Once__V1__ClaimResponse *cl;
    uint64_t id;

    place(c, "s", "m1", "/w");
    enqueue(c, "q1", "s", "job", NULL);
    cl = claim(c, "m1");
    assert_int_equal(cl->n_claimed, 1);
    id = cl->claimed[0]->grant->grant_id;
    FREE(cl);
    assert_int_equal(owner(c, "s"), id);
    enqueue(c, "q1", "s", "job", &e); /* the resend: safe by the rules */
    assert_int_equal(e->row->grant_id, id);
    assert_int_equal(e->row->state, ONCE__V1__WORK_ROW__STATE__CLAIMED);
    FREE(e);
    for (int i = 0; i < 2; i++) {
        cl = claim(c, "m1");
        assert_int_equal(cl->n_claimed, 0);
        FREE(cl);
    }
    assert_int_equal(owner(c, "s"), id);
}

static void
a4_rejections_recorded_per_surface(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    start a = {"r1", 1, "s", "m1", "/w", g, "x", 0};
    start b = {"r2", 1, "s", "m1", "/w", g, "y", 0};
    Once__V1__GetSurfaceResponse *v;

    granted(c, &a);
    refused(c, &b, ONCE_FAILED_PRECONDITION, "ALREADY_OWNED");
    v = surface(c, "s");
    assert_int_equal(v->n_rejections, 1);
    assert_string_equal(v->rejections[0]->request_id, "r2");
    assert_string_equal(v->rejections[0]->reason, "ALREADY_OWNED");
    assert_string_equal(v->rejections[0]->machine, "m1");
    FREE(v);
}

/* Renewal refusals are rejections too: logged on the grant's surface as
 * via "renew" (docs/grants.md: visible while the machine is silent), the same
 * one again only counted (repeats), and a replay of a renewal logs nothing. */
static void
a4_renewal_rejections_recorded(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    start a = {"r1", 1, "s", "m1", "/w", g, "x", 0};
    uint64_t id = granted(c, &a);
    Once__V1__RenewCredentialRequest rn =
        ONCE__V1__RENEW_CREDENTIAL_REQUEST__INIT;
    Once__V1__GetSurfaceResponse *v;
    once_client *renewer = client_as(f->h, "scheduler"), *k;
    once_rpc_id nid = {0, 0};
    once_status st;

    rn.grant_id = id;
    rn.machine = "m1";
    assert_int_equal(
        gcall_id(renewer, "RenewCredential", &rn, NULL, &nid, NULL), ONCE_OK);
    place(c, "s", "m2", "/w2");
    /* The replay is refused now, and writes nothing. */
    assert_int_equal(harness_client(f->h, true, &k), ONCE_OK);
    assert_int_equal(gcall_id(k, "RenewCredential", &rn, NULL, &nid, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "PLACEMENT_CHANGED");
    once_client_close(k);
    v = surface(c, "s");
    assert_int_equal(v->n_rejections, 0);
    FREE(v);
    /* Two renewals: one entry, repeated once. */
    for (int i = 0; i < 2; i++) {
        assert_int_equal(renew(c, id, "m1", NULL, &st),
                         ONCE_FAILED_PRECONDITION);
        assert_string_equal(st.reason, "PLACEMENT_CHANGED");
    }
    assert_int_equal(renew(c, id, "m9", NULL, &st), ONCE_PERMISSION_DENIED);
    assert_string_equal(st.reason, "WRONG_MACHINE");
    v = surface(c, "s");
    assert_int_equal(v->n_rejections, 2);
    assert_string_equal(v->rejections[0]->via, "renew");
    assert_string_equal(v->rejections[0]->reason, "PLACEMENT_CHANGED");
    assert_string_equal(v->rejections[0]->request_id, "r1");
    assert_string_equal(v->rejections[0]->machine, "m1");
    assert_int_equal(v->rejections[0]->repeats, 1);
    assert_string_equal(v->rejections[1]->reason, "WRONG_MACHINE");
    assert_string_equal(v->rejections[1]->machine, "m9");
    assert_int_equal(v->rejections[1]->repeats, 0);
    FREE(v);
    once_client_close(renewer);
}

/* Asserts the fields of one logged rejection. */
static void
rejection_is(const Once__V1__Rejection *r, const char *request_id,
             uint32_t attempt, const char *machine, const char *via,
             const char *reason)
{
    print_message("  logged: %s attempt %u machine %s via %s: %s (%s)\n",
                  r->request_id, r->attempt, r->machine, r->via, r->reason,
                  r->message);
    assert_string_equal(r->reason, reason);
    assert_string_equal(r->request_id, request_id);
    assert_int_equal(r->attempt, attempt);
    assert_string_equal(r->machine, machine);
    assert_string_equal(r->via, via);
    assert_int_equal(r->repeats, 0);
    assert_true(r->at_unix_ms > 0);
}

/* PLACEMENT_CHANGED is logged on the surface both for a local start written
 * for an old generation (via "local") and for a queued row whose placement
 * moved before its machine claimed it (via "queue"); each entry names the
 * request and the machine it was written for, not the new placement. */
static void
a4_placement_changed_recorded(void **state)
{
    FX;
    uint64_t g1 = place(c, "s", "m1", "/w"), g2;
    start old = {"r1", 1, "s", "m1", "/w", g1, "x", 0};
    Once__V1__ClaimResponse *cl;
    Once__V1__GetSurfaceResponse *v;

    enqueue(c, "q1", "s", "job", NULL);
    g2 = place(c, "s", "m2", "/w2");
    assert_true(g2 > g1);
    refused(c, &old, ONCE_FAILED_PRECONDITION, "PLACEMENT_CHANGED");
    cl = claim(c, "m1");
    assert_int_equal(cl->n_claimed, 0);
    assert_int_equal(cl->n_skipped, 1);
    assert_string_equal(cl->skipped[0]->reason, "PLACEMENT_CHANGED");
    FREE(cl);
    v = surface(c, "s");
    assert_null(v->open_grant);
    assert_int_equal(v->n_rejections, 2);
    rejection_is(v->rejections[0], "r1", 1, "m1", "local", "PLACEMENT_CHANGED");
    rejection_is(v->rejections[1], "q1", 1, "m1", "queue", "PLACEMENT_CHANGED");
    FREE(v);
}

/* The refused retry of a cancelled request (GRANT_CANCELLED) is logged with
 * its request id and machine; the cancelled grant stays the open one. */
static void
a4_cancelled_retry_recorded(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    start a = {"r1", 1, "s", "m1", "/w", g, "x", 0};
    Once__V1__CancelGrantRequest cr = ONCE__V1__CANCEL_GRANT_REQUEST__INIT;
    Once__V1__GetSurfaceResponse *v;
    uint64_t id = granted(c, &a);

    cr.grant_id = id;
    assert_int_equal(gcall(c, "CancelGrant", &cr, NULL, NULL), ONCE_OK);
    v = surface(c, "s");
    assert_int_equal(v->n_rejections, 0);
    FREE(v);
    refused(c, &a, ONCE_FAILED_PRECONDITION, "GRANT_CANCELLED");
    v = surface(c, "s");
    assert_int_equal(v->open_grant->grant_id, id);
    assert_int_equal(v->n_rejections, 1);
    rejection_is(v->rejections[0], "r1", 1, "m1", "local", "GRANT_CANCELLED");
    FREE(v);
}

/* A principal denied by SetPermission(allowed=false) is refused
 * PRINCIPAL_DENIED, and the refusal is logged on the surface, both for a
 * new request (nothing granted) and for the retry of a granted one (the
 * grant kept). */
static void
a4_principal_denied_recorded(void **state)
{
    FX;
    uint64_t gs = place(c, "s", "m1", "/w");
    uint64_t gt = place(c, "t", "m2", "/t");
    start a = {"r1", 1, "s", "m1", "/w", gs, "x", 0};
    start b = {"r2", 1, "t", "m2", "/t", gt, "y", 0};
    Once__V1__GetSurfaceResponse *v;
    uint64_t id = granted(c, &a);

    permit(c, "scheduler", false);
    refused(c, &a, ONCE_PERMISSION_DENIED, "PRINCIPAL_DENIED");
    refused(c, &b, ONCE_PERMISSION_DENIED, "PRINCIPAL_DENIED");
    v = surface(c, "s");
    assert_int_equal(v->open_grant->grant_id, id);
    assert_int_equal(v->n_rejections, 1);
    rejection_is(v->rejections[0], "r1", 1, "m1", "local", "PRINCIPAL_DENIED");
    FREE(v);
    v = surface(c, "t");
    assert_null(v->open_grant);
    assert_int_equal(v->n_rejections, 1);
    rejection_is(v->rejections[0], "r2", 1, "m2", "local", "PRINCIPAL_DENIED");
    FREE(v);
}

/* A start for a surface that has no placement is refused NO_PLACEMENT and
 * logged with the machine the request named. An Enqueue for it is not
 * refused: the row is kept UNROUTED with reason NO_PLACEMENT and no
 * destination, and nothing more is logged. */
static void
a4_no_placement_recorded(void **state)
{
    FX;
    start a = {"r1", 1, "u", "m1", "/w", 1, "x", 0};
    Once__V1__EnqueueResponse *e;
    Once__V1__GetSurfaceResponse *v;

    refused(c, &a, ONCE_FAILED_PRECONDITION, "NO_PLACEMENT");
    v = surface(c, "u");
    assert_null(v->open_grant);
    assert_int_equal(v->epoch, 0);
    assert_int_equal(v->n_rejections, 1);
    rejection_is(v->rejections[0], "r1", 1, "m1", "local", "NO_PLACEMENT");
    FREE(v);
    enqueue(c, "q1", "u", "job", &e);
    assert_int_equal(e->row->state, ONCE__V1__WORK_ROW__STATE__UNROUTED);
    assert_string_equal(e->row->reason, "NO_PLACEMENT");
    assert_string_equal(e->row->machine, "");
    assert_int_equal(e->row->generation, 0);
    FREE(e);
    v = surface(c, "u");
    assert_int_equal(v->n_rejections, 1);
    rejection_is(v->rejections[0], "r1", 1, "m1", "local", "NO_PLACEMENT");
    FREE(v);
}

static void
a5_permission_failure_rolls_back(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    start a = {"r1", 1, "s", "m1", "/w", g, "x", 0};
    Once__V1__GetSurfaceResponse *v;
    Once__V1__RequestGrantResponse *r;

    permit(c, "scheduler", false);
    refused(c, &a, ONCE_PERMISSION_DENIED, "PRINCIPAL_DENIED");
    v = surface(c, "s");
    assert_null(v->open_grant); /* neither grant nor surface mark */
    assert_int_equal(v->epoch, 0);
    FREE(v);
    permit(c, "scheduler", true);
    /* The same (request_id, attempt) was never locked: it is new now. */
    assert_int_equal(request(c, &a, &r, NULL), ONCE_OK);
    assert_false(r->existing);
    FREE(r);
}

/* ---- credentials ----------------------------------------------------------
 */

static uint64_t
wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Minting fails (ONCED_FAULT=mint:fail, store/fault.h): the request is
 * refused INTERNAL/MINT_FAILED, and neither the grant, its
 * (request_id, attempt) lock nor the surface mark (open grant, epoch) is
 * kept; the refusal is recorded. The same request then gets a first grant
 * with epoch 1. */
static void
a6_mint_failure_rolls_back(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    Once__V1__RequestGrantRequest rq = ONCE__V1__REQUEST_GRANT_REQUEST__INIT;
    Once__V1__RequestGrantResponse *r;
    Once__V1__GetSurfaceResponse *v;
    once_rpc_id id = {0, 0};
    once_client *k;
    once_status st;
    int rv;

    assert_true(harness_kill(f->h, SIGKILL) >= 0);
    assert_int_equal(harness_set_fault(f->h, "mint:fail"), 0);
    assert_int_equal(harness_restart(f->h), 0);
    rq.request_id = "r1";
    rq.attempt = 1;
    rq.surface = "s";
    rq.machine = "m1";
    rq.location = "/w";
    rq.generation = g;
    rq.payload.data = (uint8_t *)"x";
    rq.payload.len = 1;
    rv = gcall_id(c, "RequestGrant", &rq, NULL, &id, &st);
    print_message("  mint fails: %s %s (%s)\n", once_strerror(rv), st.reason,
                  st.message);
    assert_int_equal(rv, ONCE_INTERNAL);
    assert_string_equal(st.reason, "MINT_FAILED");
    v = surface(c, "s");
    assert_null(v->open_grant);
    assert_int_equal(v->epoch, 0);
    assert_int_equal(v->n_history, 0);
    assert_true(v->n_rejections >= 1);
    assert_string_equal(v->rejections[v->n_rejections - 1]->reason,
                        "MINT_FAILED");
    FREE(v);
    /* The same rpc id again, from a lease-less handle (this one has
     * acknowledged it): the recorded outcome, not a grant. */
    assert_int_equal(harness_client(f->h, true, &k), ONCE_OK);
    rv = gcall_id(k, "RequestGrant", &rq, NULL, &id, &st);
    once_client_close(k);
    assert_int_equal(rv, ONCE_INTERNAL);
    assert_true(st.replayed);
    assert_int_equal(owner(c, "s"), 0);
    /* The same request under a new id (the fault acts once): no lock row
     * was kept, so this is a first grant, epoch 1. */
    id.seq = 0;
    assert_int_equal(gcall_id(c, "RequestGrant", &rq, &r, &id, &st), ONCE_OK);
    assert_false(r->existing);
    assert_int_equal(r->grant->epoch, 1);
    assert_non_null(r->credential);
    assert_int_equal(owner(c, "s"), r->grant->grant_id);
    FREE(r);
    assert_int_equal(harness_set_fault(f->h, NULL), 0);
}

/* Grants "r1" on a fresh surface and returns its id; *history is the
 * surface's history length then. onced is then restarted with minting set
 * to fail once (ONCED_FAULT=mint:fail). */
static uint64_t
granted_then_mint_fails(fx *f, const start *a, size_t *history)
{
    once_client *c = f->c;
    Once__V1__GetSurfaceResponse *v;
    uint64_t id = granted(c, a);

    v = surface(c, "s");
    *history = v->n_history;
    FREE(v);
    assert_true(harness_kill(f->h, SIGKILL) >= 0);
    assert_int_equal(harness_set_fault(f->h, "mint:fail"), 0);
    assert_int_equal(harness_restart(f->h), 0);
    return id;
}

/* The surface still has grant id open, at epoch 1, with its history as it
 * was. */
static void
grant_unchanged(once_client *c, uint64_t id, size_t history)
{
    Once__V1__GetSurfaceResponse *v = surface(c, "s");

    assert_non_null(v->open_grant);
    assert_int_equal(v->open_grant->grant_id, id);
    assert_int_equal(v->epoch, 1);
    assert_int_equal(v->n_history, history);
    FREE(v);
}

/* Minting fails on a resend of a granted request (start_existing): refused
 * INTERNAL/MINT_FAILED and nothing about the grant changes; the next
 * resend (the fault acts once) gets the same grant with a credential. */
static void
a6_mint_failure_keeps_grant(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    start a = {"r1", 1, "s", "m1", "/w", g, "x", 0};
    Once__V1__RequestGrantResponse *r;
    once_status st;
    size_t history;
    uint64_t id = granted_then_mint_fails(f, &a, &history);
    int rv;

    rv = request(c, &a, &r, &st);
    print_message("  resend, mint fails: %s %s (%s)\n", once_strerror(rv),
                  st.reason, st.message);
    assert_int_equal(rv, ONCE_INTERNAL);
    assert_string_equal(st.reason, "MINT_FAILED");
    grant_unchanged(c, id, history);
    assert_int_equal(request(c, &a, &r, &st), ONCE_OK);
    assert_true(r->existing);
    assert_int_equal(r->grant->grant_id, id);
    assert_non_null(r->credential);
    FREE(r);
    grant_unchanged(c, id, history);
    assert_int_equal(harness_set_fault(f->h, NULL), 0);
}

/* The same on a credential renewal (grants_renew). */
static void
a6_mint_failure_keeps_grant_on_renewal(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    start a = {"r1", 1, "s", "m1", "/w", g, "x", 0};
    Once__V1__RenewCredentialResponse *rn;
    once_status st;
    size_t history;
    uint64_t id = granted_then_mint_fails(f, &a, &history);
    int rv;

    rv = renew(c, id, "m1", &rn, &st);
    print_message("  renewal, mint fails: %s %s (%s)\n", once_strerror(rv),
                  st.reason, st.message);
    assert_int_equal(rv, ONCE_INTERNAL);
    assert_string_equal(st.reason, "MINT_FAILED");
    grant_unchanged(c, id, history);
    assert_int_equal(renew(c, id, "m1", &rn, &st), ONCE_OK);
    assert_non_null(rn->credential);
    FREE(rn);
    grant_unchanged(c, id, history);
    assert_int_equal(harness_set_fault(f->h, NULL), 0);
}

static void
k1_credential_verify_offline(void **state)
{
    FX;
    uint8_t pk[ONCE_GRANT_PUBLIC_KEY_BYTES];
    uint64_t g = place(c, "s", "m1", "/w");
    start a = {"r1", 1, "s", "m1", "/w", g, "x", 200};
    start b = {"r2", 1, "s", "m1", "/w", g, "y", 0};
    Once__V1__RequestGrantResponse *r, *r2;
    Once__V1__RenewCredentialResponse *rn;
    once_grant_credential cred;
    once_status st;
    struct stat sb;
    char path[400];
    uint8_t bad[64];

    /* The key lives in the data folder, readable by onced alone. */
    snprintf(path, sizeof(path), "%s/grants_ed25519.key", f->h->data);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    assert_int_equal(once_grants_public_key(c, pk, &st), ONCE_OK);
    assert_int_equal(request(c, &a, &r, NULL), ONCE_OK);
    assert_int_equal(once_grant_credential_verify(pk, r->credential->body.data,
                                                  r->credential->body.len,
                                                  r->credential->signature.data,
                                                  r->credential->signature.len,
                                                  wall_ms(), 0, &cred, &st),
                     ONCE_OK);
    assert_int_equal(cred.grant_id, r->grant->grant_id);
    assert_string_equal(cred.surface, "s");
    assert_string_equal(cred.machine, "m1");
    assert_int_equal(cred.epoch, 1);
    /* A flipped byte is not a credential. */
    memcpy(bad, r->credential->signature.data, 64);
    bad[3] ^= 1;
    assert_int_equal(once_grant_credential_verify(pk, r->credential->body.data,
                                                  r->credential->body.len, bad,
                                                  64, wall_ms(), 0, NULL, &st),
                     ONCE_UNAUTHENTICATED);
    /* Expired: refused offline, but the surface is still owned and a
     * renewal under the same grant verifies. */
    usleep(300 * 1000);
    assert_int_equal(once_grant_credential_verify(pk, r->credential->body.data,
                                                  r->credential->body.len,
                                                  r->credential->signature.data,
                                                  r->credential->signature.len,
                                                  wall_ms(), 0, &cred, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "CREDENTIAL_EXPIRED");
    assert_int_equal(owner(c, "s"), r->grant->grant_id);
    assert_int_equal(renew(c, r->grant->grant_id, "m1", &rn, NULL), ONCE_OK);
    assert_int_equal(
        once_grant_credential_verify(
            pk, rn->credential->body.data, rn->credential->body.len,
            rn->credential->signature.data, rn->credential->signature.len,
            wall_ms(), 1, &cred, &st),
        ONCE_OK);
    /* Fencing: once the next grant (epoch 2) was seen, epoch 1 is stale. */
    assert_int_equal(
        finish(c, r->grant->grant_id, ONCE__V1__GRANT_OUTCOME__RELEASED, NULL),
        ONCE_OK);
    assert_int_equal(request(c, &b, &r2, NULL), ONCE_OK);
    assert_int_equal(r2->grant->epoch, 2);
    assert_int_equal(
        once_grant_credential_verify(
            pk, rn->credential->body.data, rn->credential->body.len,
            rn->credential->signature.data, rn->credential->signature.len,
            wall_ms(), r2->grant->epoch, &cred, &st),
        ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "STALE_EPOCH");
    FREE(r);
    FREE(r2);
    FREE(rn);
}

/* ---- client-side input keeping (once/inputs.h) -------------------------- */

static once_inputs *
store_at(const harness *h, char *dir, size_t len)
{
    once_inputs *s;
    once_status st;

    snprintf(dir, len, "%s/inputs", h->dir);
    assert_int_equal(once_inputs_open(&s, dir, &st), ONCE_OK);
    return s;
}

/* The kept inputs of s (at most 8) into rows; returns how many. */
static size_t
kept_inputs(once_inputs *s, once_input_info *rows)
{
    once_input_info *l;
    once_status st;
    size_t n;

    assert_int_equal(once_grant_inputs_list(s, &l, &n, &st), ONCE_OK);
    assert_true(n <= 8);
    for (size_t i = 0; i < n; i++) {
        rows[i] = l[i];
        print_message("  kept %s/%u %s id %llu:%llu sends %u %s %s\n",
                      l[i].request_id, l[i].attempt,
                      once_input_state_name(l[i].state),
                      (unsigned long long)l[i].id.client_id,
                      (unsigned long long)l[i].id.seq, l[i].sends, l[i].reason,
                      l[i].message);
    }
    once_free(l);
    return n;
}

typedef struct resumed {
    int calls;
    int rv;
    once_status st;
    uint64_t grant;
    once_rpc_id id;
} resumed;

static void
on_resumed(const once_input_info *in, int rv, const once_status *st,
           const void *resp, size_t len, void *arg)
{
    resumed *r = arg;
    Once__V1__RequestGrantResponse *g;

    r->calls++;
    r->rv = rv;
    r->st = *st;
    r->id = in->id;
    print_message("  resumed %s id %llu:%llu → %s %s replayed=%d\n",
                  in->request_id, (unsigned long long)in->id.client_id,
                  (unsigned long long)in->id.seq, once_strerror(rv), st->reason,
                  st->replayed);
    if (rv == ONCE_OK) {
        g = once__v1__request_grant_response__unpack(NULL, len, resp);
        assert_non_null(g);
        assert_non_null(g->credential); /* a fresh one, on the replay too */
        r->grant = g->grant->grant_id;
        FREE(g);
    }
}

/* The child process of c19 (this program run again as
 * `test_grants --c19-child URL DIR GEN READY_FD GO_FD`, a fresh process: nng
 * must not be used across a bare fork): keeps and sends one start, then
 * blocks on the reply (which onced drops) until the parent kills it. */
static int
c19_child(const char *url, const char *dir, uint64_t gen, int ready, int go)
{
    once_grant_input in = {.request_id = "job-7",
                           .attempt = 1,
                           .surface = "s",
                           .machine = "m1",
                           .location = "/w",
                           .generation = gen,
                           .payload = "user input",
                           .payload_len = 10};
    once_options o;
    once_status st;
    once_client *k;
    once_inputs *s;
    char b = 'r';

    once_options_init(&o);
    o.url = url;
    o.principal = "scheduler";
    o.lease_ttl_ms = 120000;
    o.deadline_ms = 120000;
    o.attempt_timeout_ms = 60000; /* no retry before the parent's SIGKILL */
    if (once_client_open(&k, &o, &st) != ONCE_OK ||
        once_inputs_open(&s, dir, &st) != ONCE_OK || write(ready, &b, 1) != 1 ||
        read(go, &b, 1) != 1) {
        return 2;
    }
    (void)once_grant_submit(k, s, &in, NULL, NULL, NULL, &st);
    return 3; /* not reached: killed while waiting for the reply */
}

static void
c19_input_kept_until_accepted(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    once_input_info rows[8];
    Once__V1__GetSurfaceResponse *v;
    int ready[2], go[2], ws;
    size_t acc, pend, ended, rej;
    resumed r = {0};
    once_status st;
    once_inputs *s;
    once_client *k;
    char dir[512], b;
    pid_t pid;

    snprintf(dir, sizeof(dir), "%s/inputs", f->h->dir);
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(go), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char gen[24], rfd[16], gfd[16];
        snprintf(gen, sizeof(gen), "%llu", (unsigned long long)g);
        snprintf(rfd, sizeof(rfd), "%d", ready[1]);
        snprintf(gfd, sizeof(gfd), "%d", go[0]);
        execl("/proc/self/exe", "test_grants", "--c19-child", f->h->url, dir,
              gen, rfd, gfd, (char *)NULL);
        _exit(127);
    }
    close(ready[1]);
    close(go[0]);
    assert_int_equal(read(ready[0], &b, 1), 1);
    /* The child holds its lease; onced now loses the reply of the first
     * writing call — the child's RequestGrant — after committing it. */
    assert_true(harness_kill(f->h, SIGKILL) >= 0);
    assert_int_equal(harness_set_fault(f->h, "batch_written:drop"), 0);
    assert_int_equal(harness_restart(f->h), 0);
    assert_int_equal(write(go[1], "g", 1), 1);
    for (int i = 0; i < 200 && owner(c, "s") == 0; i++) {
        usleep(50 * 1000);
    }
    assert_int_not_equal(owner(c, "s"), 0);

    /* Accepted on the server, but the client never heard it: the input is
     * still kept, PENDING, under the child's rpc id. */
    s = store_at(f->h, dir, sizeof(dir));
    assert_int_equal(kept_inputs(s, rows), 1);
    assert_int_equal(rows[0].state, ONCE_INPUT_PENDING);
    assert_string_equal(rows[0].request_id, "job-7");
    assert_int_equal(rows[0].sends, 1);
    assert_int_not_equal(rows[0].id.client_id, once_client_id(c));
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFSIGNALED(ws));

    /* A new process's client (its own lease) on the same store resumes the
     * input with the SAME rpc id: the stored result comes back. */
    assert_int_equal(harness_set_fault(f->h, NULL), 0);
    k = client_as(f->h, "scheduler");
    assert_int_not_equal(once_client_id(k), rows[0].id.client_id);
    assert_int_equal(once_grant_inputs_resume(k, s, on_resumed, &r, &acc, &pend,
                                              &ended, &rej, &st),
                     ONCE_OK);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.rv, ONCE_OK);
    assert_true(r.st.replayed);
    assert_int_equal(r.id.client_id, rows[0].id.client_id);
    assert_int_equal(r.id.seq, rows[0].id.seq);
    assert_int_equal(acc, 1);
    assert_int_equal(pend + ended + rej, 0);
    /* Accepted: no longer kept. One grant ever. */
    assert_int_equal(kept_inputs(s, rows), 0);
    v = surface(c, "s");
    assert_non_null(v->open_grant);
    assert_int_equal(v->open_grant->grant_id, r.grant);
    assert_string_equal(v->open_grant->request_id, "job-7");
    assert_int_equal(v->n_history, 0);
    assert_int_equal(v->epoch, 1);
    FREE(v);
    once_client_close(k);
    once_inputs_close(s);
    close(ready[0]);
    close(go[1]);
}

/* The lease of a kept input's rpc id ended before the input was known to be
 * accepted: it is marked LEASE_ENDED and never re-sent under another id by
 * itself; an explicit resend under a new id gets the same single grant. */
static void
c19_input_lease_ended_not_resent(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    once_grant_input in = {.request_id = "job-8",
                           .attempt = 1,
                           .surface = "s",
                           .machine = "m1",
                           .location = "/w",
                           .generation = g,
                           .payload = "x",
                           .payload_len = 1};
    Once__V1__RequestGrantResponse *gr;
    Once__V1__GetSurfaceResponse *v;
    once_input_info rows[8];
    size_t acc, pend, ended, rej, rlen;
    once_options o;
    once_status st;
    once_rpc_id id;
    once_inputs *s;
    once_client *k;
    uint64_t kid;
    void *resp;
    char dir[512];
    int rv;

    s = store_at(f->h, dir, sizeof(dir));
    once_options_init(&o);
    o.url = f->h->url;
    o.principal = "scheduler";
    o.lease_ttl_ms = 120000;
    o.deadline_ms = 600;
    o.attempt_timeout_ms = 200;
    assert_int_equal(once_client_open(&k, &o, &st), ONCE_OK);
    kid = once_client_id(k);
    /* onced is stopped: the send gets no answer. */
    harness_pause(f->h);
    rv = once_grant_submit(k, s, &in, &id, NULL, NULL, &st);
    print_message("  submit → %s %s\n", once_strerror(rv), st.reason);
    assert_int_equal(rv, ONCE_UNKNOWN);
    assert_int_equal(id.client_id, kid);
    once_client_close(k); /* an incomplete seq: the lease is left alone */
    assert_int_equal(kill(f->h->pid, SIGCONT), 0);
    assert_int_equal(kept_inputs(s, rows), 1);
    assert_int_equal(rows[0].state, ONCE_INPUT_PENDING);
    /* The lease of that id ends before anyone resumed. */
    assert_int_equal(once_lease_close(c, kid, NULL, &st), ONCE_OK);

    k = client_as(f->h, "scheduler");
    assert_int_equal(once_grant_inputs_resume(k, s, NULL, NULL, &acc, &pend,
                                              &ended, &rej, &st),
                     ONCE_OK);
    assert_int_equal(acc, 0);
    assert_int_equal(ended, 1);
    assert_int_equal(kept_inputs(s, rows), 1);
    assert_int_equal(rows[0].state, ONCE_INPUT_LEASE_ENDED);
    assert_string_equal(rows[0].reason, "LEASE_EXPIRED");
    assert_int_equal(rows[0].id.client_id, kid); /* still the old id */
    assert_int_equal(rows[0].id.seq, id.seq);
    /* Not re-sent by itself. */
    assert_int_equal(
        once_grant_input_resend(k, s, "job-8", 1, false, NULL, NULL, NULL, &st),
        ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "INPUT_LEASE_ENDED");
    /* The caller's explicit choice: a new id. (request_id, attempt) is
     * locked on the server, so this is the one grant either way. */
    assert_int_equal(
        once_grant_input_resend(k, s, "job-8", 1, true, &id, &resp, &rlen, &st),
        ONCE_OK);
    assert_int_equal(id.client_id, once_client_id(k));
    gr = once__v1__request_grant_response__unpack(NULL, rlen, resp);
    assert_non_null(gr);
    print_message("  new-id resend: grant %llu existing=%d\n",
                  (unsigned long long)gr->grant->grant_id, gr->existing);
    once_free(resp);
    assert_int_equal(kept_inputs(s, rows), 0);
    v = surface(c, "s");
    assert_non_null(v->open_grant);
    assert_int_equal(v->open_grant->grant_id, gr->grant->grant_id);
    assert_int_equal(v->n_history, 0);
    assert_int_equal(v->epoch, 1);
    FREE(v);
    FREE(gr);
    once_client_close(k);
    once_inputs_close(s);
}

/*
 * The same constraint on the queue path (docs/grants.md: once the request is
 * enqueued, the chain runs exactly once): once_work_submit keeps the
 * Enqueue before it sends it. Sent to a stopped onced and unanswered, it
 * stays PENDING; a new handle resumes it with the same rpc id, and the
 * queue holds exactly one row for it (executed once, whether the first
 * send or the resend ran it); the file is gone. A refused Enqueue stays
 * kept as REJECTED, and ListQueue shows nothing of it.
 */
static void
c19_enqueue_input_kept_until_accepted(void **state)
{
    FX;
    once_work_input in = {.request_id = "w1",
                          .surface = "q",
                          .payload = "hello",
                          .payload_len = 5};
    once_work_input bad = {.request_id = "w2", .surface = "", .payload_len = 0};
    Once__V1__ListQueueResponse *lq;
    once_input_info rows[8];
    size_t acc = 0, pend = 0, ended = 0, rej = 0;
    once_client *k, *c2;
    once_options o;
    once_status st;
    once_inputs *s;
    char dir[512];
    int rv;

    place(c, "q", "m1", "/wq");
    s = store_at(f->h, dir, sizeof(dir));
    once_options_init(&o);
    o.url = f->h->url;
    o.principal = "scheduler";
    o.lease_ttl_ms = 120000;
    o.deadline_ms = 500;
    assert_int_equal(once_client_open(&k, &o, &st), ONCE_OK);

    harness_pause(f->h);
    rv = once_work_submit(k, s, &in, NULL, NULL, NULL, &st);
    kill(f->h->pid, SIGCONT);
    print_message("  enqueue to a stopped onced: %s %s\n", once_strerror(rv),
                  st.reason);
    assert_int_not_equal(rv, ONCE_OK);
    assert_int_equal(kept_inputs(s, rows), 1);
    assert_int_equal(rows[0].kind, ONCE_INPUT_ENQUEUE);
    assert_int_equal(rows[0].state, ONCE_INPUT_PENDING);
    assert_string_equal(rows[0].surface, "q");
    assert_int_equal(rows[0].payload_len, 5);

    /* "After a restart": another handle of the same principal. */
    c2 = client_as(f->h, "scheduler");
    assert_int_equal(once_grant_inputs_resume(c2, s, NULL, NULL, &acc, &pend,
                                              &ended, &rej, &st),
                     ONCE_OK);
    assert_int_equal(acc, 1);
    assert_int_equal(kept_inputs(s, rows), 0);
    lq = list_queue(c, "m1");
    assert_int_equal(lq->n_pending, 1); /* one row, not two */
    assert_string_equal(lq->pending[0]->request_id, "w1");
    FREE(lq);

    assert_int_equal(once_work_submit(c2, s, &bad, NULL, NULL, NULL, &st),
                     ONCE_INVALID_ARGUMENT);
    assert_int_equal(kept_inputs(s, rows), 1);
    assert_int_equal(rows[0].kind, ONCE_INPUT_ENQUEUE);
    assert_int_equal(rows[0].state, ONCE_INPUT_REJECTED);
    lq = list_queue(c, "m1");
    assert_int_equal(lq->n_pending, 1);
    FREE(lq);
    once_client_close(c2);
    once_client_close(k);
    once_inputs_close(s);
}

/* ---- the input store's files of before ---------------------------------- */

typedef Once__Client__KeptInput kept_file;

/* Writes k as the file of before of (rid, attempt 1) in dir, as libonce
 * wrote it before the journal: "<hex BLAKE2b-128 of rid>-1.input", the
 * packed KeptInput. Its path into path[len]. */
static void
old_input_file(const char *dir, const char *rid, const kept_file *k, char *path,
               size_t len)
{
    size_t n = once__client__kept_input__get_packed_size(k);
    uint8_t h[16], *buf = malloc(n + 1);
    char hex[33];
    FILE *f;

    crypto_generichash(h, sizeof(h), (const uint8_t *)rid, strlen(rid), NULL,
                       0);
    sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
    snprintf(path, len, "%s/%s-1.input", dir, hex);
    once__client__kept_input__pack(k, buf);
    assert_non_null(f = fopen(path, "wb"));
    assert_int_equal(fwrite(buf, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    free(buf);
}

/* The packed RequestGrant of s into *buf (freed by the caller). */
static size_t
packed_request(const start *s, uint8_t **buf)
{
    Once__V1__RequestGrantRequest r = ONCE__V1__REQUEST_GRANT_REQUEST__INIT;
    size_t n;

    r.request_id = (char *)s->rid;
    r.attempt = 1;
    r.surface = (char *)s->surface;
    r.machine = (char *)s->machine;
    r.location = (char *)s->loc;
    r.generation = s->gen;
    r.payload.data = (uint8_t *)s->payload;
    r.payload.len = strlen(s->payload);
    n = once__v1__request_grant_request__get_packed_size(&r);
    *buf = malloc(n + 1);
    once__v1__request_grant_request__pack(&r, *buf);
    return n;
}

/* The row of rid among n rows; fails the test when it is not there. */
static const once_input_info *
row_of(const once_input_info *rows, size_t n, const char *rid)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(rows[i].request_id, rid) == 0) {
            return &rows[i];
        }
    }
    fail_msg("input %s is not listed", rid);
    return NULL;
}

/* Resumes s's inputs through a new "scheduler" handle: exactly one is
 * sent, job-9's, under id only, and replayed (onced ran it before), so
 * surface "s" has that one grant and no other; left inputs stay kept. */
static void
resumed_replays(harness *h, once_client *c, once_inputs *s, once_rpc_id id,
                size_t left)
{
    once_client *b = client_as(h, "scheduler");
    size_t acc, pend, ended, rej;
    once_input_info rows[8];
    Once__V1__GetSurfaceResponse *v;
    resumed r = {0};
    once_status st;

    assert_int_equal(once_grant_inputs_resume(b, s, on_resumed, &r, &acc, &pend,
                                              &ended, &rej, &st),
                     ONCE_OK);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.rv, ONCE_OK);
    assert_true(r.st.replayed);
    assert_int_equal(r.id.client_id, id.client_id);
    assert_int_equal(r.id.seq, id.seq);
    assert_int_equal(acc, 1);
    assert_int_equal(pend + ended + rej, 0);
    assert_int_equal(kept_inputs(s, rows), left);
    v = surface(c, "s");
    assert_non_null(v->open_grant);
    assert_int_equal(v->open_grant->grant_id, r.grant);
    assert_string_equal(v->open_grant->request_id, "job-9");
    assert_int_equal(v->n_history, 0);
    assert_int_equal(v->epoch, 1);
    FREE(v);
    once_client_close(b);
}

/* The send of job (its packed request into k->request, freed by the
 * caller) is executed, its reply lost: as c19 (the lease first: onced
 * then loses the reply of the first writing call). k is then the
 * PENDING file of before of that send, *id its rpc id; returns the
 * sender's handle (principal "scheduler"). */
static once_client *
reply_lost(harness *h, once_client *c, const start *job, kept_file *k,
           once_rpc_id *id)
{
    once_options o;
    once_status st;
    once_client *a;
    uint8_t *buf;
    int rv;

    once_options_init(&o);
    o.url = h->url;
    o.principal = "scheduler";
    o.lease_ttl_ms = 120000;
    o.deadline_ms = 800;
    o.attempt_timeout_ms = 60000; /* one attempt: no retry replays it */
    assert_int_equal(once_client_open(&a, &o, &st), ONCE_OK);
    assert_true(harness_kill(h, SIGKILL) >= 0);
    assert_int_equal(harness_set_fault(h, "batch_written:drop"), 0);
    assert_int_equal(harness_restart(h), 0);
    once__client__kept_input__init(k);
    k->request.len = packed_request(job, &buf);
    k->request.data = buf;
    rv = once_call(a, "/once.v1.Grants/RequestGrant", true, id, buf,
                   k->request.len, NULL, NULL, &st);
    print_message("  %s sent as %llu:%llu → %s %s\n", job->rid,
                  (unsigned long long)id->client_id,
                  (unsigned long long)id->seq, once_strerror(rv), st.reason);
    assert_int_not_equal(rv, ONCE_OK);
    for (int i = 0; i < 200 && owner(c, job->surface) == 0; i++) {
        usleep(50 * 1000);
    }
    assert_int_not_equal(owner(c, job->surface), 0);
    assert_int_equal(harness_set_fault(h, NULL), 0);
    k->version = 1;
    k->client_id = id->client_id;
    k->seq = id->seq;
    k->principal = "scheduler";
    k->state = ONCE_INPUT_PENDING;
    k->kept_unix_ms = k->updated_unix_ms = wall_ms() - 2000;
    k->sends = 1; /* method "": files from before Enqueue */
    return a;
}

/*
 * A store written before the journal (docs/chains.md, "The input store"):
 * its files are imported at open — each becomes its chain, then the file
 * is removed — and the inputs are kept as they were: job-9, whose send
 * onced executed but whose reply was lost, is listed PENDING under its
 * recorded rpc id and resumed under that SAME id (replayed: one grant);
 * job-10 stays REJECTED and is not re-sent; for w-bad the store already
 * keeps a chain, and the chain wins over the file.
 */
static void
c19_old_input_files_imported(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    start job9 = {"job-9", 1, "s", "m1", "/w", g, "kept before", 0};
    start job10 = {"job-10", 1, "s", "m1", "/w", g - 1, "stale", 0};
    once_work_input bad = {.request_id = "w-bad", .surface = ""};
    kept_file k9, k10, kw;
    char dir[512], p9[600], p10[600], pw[600];
    once_input_info rows[8];
    const once_input_info *in;
    size_t n;
    once_rpc_id id = {0, 0};
    Once__V1__EnqueueRequest q = ONCE__V1__ENQUEUE_REQUEST__INIT;
    uint8_t *b9, *b10, *bw;
    once_status st;
    once_client *a;
    once_inputs *s;

    a = reply_lost(f->h, c, &job9, &k9, &id);
    b9 = k9.request.data;

    /* A chain the store keeps already (a refused Enqueue). */
    s = store_at(f->h, dir, sizeof(dir));
    assert_int_equal(once_work_submit(a, s, &bad, NULL, NULL, NULL, &st),
                     ONCE_INVALID_ARGUMENT);
    once_inputs_close(s);

    /* The files of before, as libonce wrote them. */
    old_input_file(dir, "job-9", &k9, p9, sizeof(p9));
    k10 = k9;
    k10.request.len = packed_request(&job10, &b10);
    k10.request.data = b10;
    k10.seq = id.seq + 100;
    k10.state = ONCE_INPUT_REJECTED;
    k10.code = ONCE_FAILED_PRECONDITION;
    k10.reason = "PLACEMENT_CHANGED";
    k10.kept_unix_ms = k10.updated_unix_ms = wall_ms() - 1000;
    old_input_file(dir, "job-10", &k10, p10, sizeof(p10));
    kw = k9; /* PENDING under another id: the chain must win */
    q.request_id = "w-bad";
    q.attempt = 1;
    q.surface = "q";
    kw.request.len = once__v1__enqueue_request__get_packed_size(&q);
    kw.request.data = bw = malloc(kw.request.len + 1);
    once__v1__enqueue_request__pack(&q, bw);
    kw.seq = id.seq + 200;
    kw.method = "/once.v1.Grants/Enqueue";
    old_input_file(dir, "w-bad", &kw, pw, sizeof(pw));

    /* Opened: imported, the files gone. */
    s = store_at(f->h, dir, sizeof(dir));
    assert_int_equal(access(p9, F_OK), -1);
    assert_int_equal(access(p10, F_OK), -1);
    assert_int_equal(access(pw, F_OK), -1);
    n = kept_inputs(s, rows);
    assert_int_equal(n, 3);
    in = row_of(rows, n, "job-9");
    assert_int_equal(in->state, ONCE_INPUT_PENDING);
    assert_int_equal(in->kind, ONCE_INPUT_START);
    assert_int_equal(in->id.client_id, id.client_id);
    assert_int_equal(in->id.seq, id.seq);
    assert_int_equal(in->sends, 1);
    assert_int_equal(in->generation, g);
    in = row_of(rows, n, "job-10");
    assert_int_equal(in->state, ONCE_INPUT_REJECTED);
    assert_string_equal(in->reason, "PLACEMENT_CHANGED");
    in = row_of(rows, n, "w-bad");
    assert_int_equal(in->state, ONCE_INPUT_REJECTED);
    assert_int_not_equal(in->id.seq, kw.seq);

    /* Resumed by another process's handle: the SAME id, replayed. */
    resumed_replays(f->h, c, s, id, 2);
    once_inputs_close(s);
    once_client_close(a);
    free(b9);
    free(b10);
    free(bw);
}

/* Runs inputs_driver on the store dir with ONCE_CHAIN_CRASH=crash;
 * returns its wait status. */
static int
inputs_driver(const char *dir, const char *crash)
{
    pid_t pid = fork();
    int ws;

    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("ONCE_CHAIN_CRASH", crash, 1);
        execl(INPUTS_DRIVER, "inputs_driver", dir, (char *)NULL);
        _exit(127);
    }
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    return ws;
}

/* c19_old_input_files_imported with a crash between the import's write
 * of the chain and the unlink of its file (client/inputs_import.c): the
 * restarted store holds the input once, under its recorded id, and its
 * resume sends only that id (replayed: one grant). */
static void
c19_import_crash_between_write_and_unlink(void **state)
{
    FX;
    uint64_t g = place(c, "s", "m1", "/w");
    start job9 = {"job-9", 1, "s", "m1", "/w", g, "kept before", 0};
    char dir[512], p9[600], chain[700];
    once_input_info rows[8];
    once_rpc_id id = {0, 0};
    once_client *a;
    once_inputs *s;
    size_t n;
    kept_file k9;
    int ws;

    a = reply_lost(f->h, c, &job9, &k9, &id);
    snprintf(dir, sizeof(dir), "%s/inputs", f->h->dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    old_input_file(dir, "job-9", &k9, p9, sizeof(p9));
    /* Its chain's file: "input+<hex>-1.chain" beside "<hex>-1.input". */
    snprintf(chain, sizeof(chain), "%s/input+%.*s.chain", dir,
             (int)(strlen(strrchr(p9, '/') + 1) - strlen(".input")),
             strrchr(p9, '/') + 1);

    /* The opener is SIGKILLed with the chain written, the file kept. */
    ws = inputs_driver(dir, "import_written");
    assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
    assert_int_equal(access(chain, F_OK), 0);
    assert_int_equal(access(p9, F_OK), 0);

    /* Opened again: one input (the chain wins), the file gone. */
    s = store_at(f->h, dir, sizeof(dir));
    assert_int_equal(access(p9, F_OK), -1);
    n = kept_inputs(s, rows);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].request_id, "job-9");
    assert_int_equal(rows[0].state, ONCE_INPUT_PENDING);
    assert_int_equal(rows[0].id.client_id, id.client_id);
    assert_int_equal(rows[0].id.seq, id.seq);
    assert_int_equal(rows[0].sends, 1);

    /* Resumed: that id only, replayed; one grant, never a second. */
    resumed_replays(f->h, c, s, id, 0);
    once_inputs_close(s);
    once_client_close(a);
    free(k9.request.data);
}

/* A file dir/name of a few bytes, its mtime age_s seconds ago. */
static void
tmp_file(const char *dir, const char *name, int age_s, char *path, size_t len)
{
    struct timespec t[2];
    FILE *fp;

    snprintf(path, len, "%s/%s", dir, name);
    assert_non_null(fp = fopen(path, "wb"));
    assert_int_equal(fputs("half a record", fp) >= 0, 1);
    assert_int_equal(fclose(fp), 0);
    clock_gettime(CLOCK_REALTIME, &t[0]);
    t[0].tv_sec -= age_s;
    t[1] = t[0];
    assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
}

/* Temp files of writes cut short: journal_files.c sweeps those whose
 * writer's pid is dead and that are a minute old, nothing else. */
static void
c19_dead_writers_temp_files_swept(void **state)
{
    FX;
    char dir[512], name[128], dead_old[640], dead_new[640], live[640],
        other[640];
    once_input_info rows[8];
    once_inputs *s;
    pid_t dead;
    int ws;

    (void)c;
    snprintf(dir, sizeof(dir), "%s/inputs", f->h->dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    if ((dead = fork()) == 0) {
        _exit(0);
    }
    assert_true(dead > 0);
    assert_int_equal(waitpid(dead, &ws, 0), dead); /* reaped: no such pid */
    snprintf(name, sizeof(name), ".tmp-%d-0-input+a.chain", (int)dead);
    tmp_file(dir, name, 120, dead_old, sizeof(dead_old));
    snprintf(name, sizeof(name), ".tmp-%d-1-input+b.chain", (int)dead);
    tmp_file(dir, name, 0, dead_new, sizeof(dead_new));
    snprintf(name, sizeof(name), ".tmp-%d-0-input+c.chain", (int)getppid());
    tmp_file(dir, name, 120, live, sizeof(live));
    tmp_file(dir, ".tmp-x-input+d.chain", 120, other, sizeof(other));

    s = store_at(f->h, dir, sizeof(dir));
    assert_int_equal(access(dead_old, F_OK), -1);
    assert_int_equal(access(dead_new, F_OK), 0);
    assert_int_equal(access(live, F_OK), 0);
    assert_int_equal(access(other, F_OK), 0);
    assert_int_equal(kept_inputs(s, rows), 0); /* never read as records */
    once_inputs_close(s);
}

static void
c20_rejected_input_kept_unsent(void **state)
{
    FX;
    uint64_t g1 = place(c, "s", "m1", "/w");
    uint64_t g2 = place(c, "s", "m2", "/w"); /* the placement moved */
    uint64_t h = place(c, "t", "m1", "/t");
    start other = {"owner", 1, "t", "m1", "/t", h, "o", 0};
    uint64_t tg = granted(c, &other);
    once_grant_input stale = {.request_id = "stale",
                              .surface = "s",
                              .machine = "m1",
                              .location = "/w",
                              .generation = g1,
                              .payload = "a",
                              .payload_len = 1};
    once_grant_input owned = {.request_id = "owned",
                              .surface = "t",
                              .machine = "m1",
                              .location = "/t",
                              .generation = h,
                              .payload = "b",
                              .payload_len = 1};
    once_grant_input good = {.request_id = "good",
                             .surface = "s",
                             .machine = "m2",
                             .location = "/w",
                             .generation = g2,
                             .payload = "c",
                             .payload_len = 1};
    Once__V1__GetSurfaceResponse *v;
    once_input_info rows[8];
    size_t acc, pend, ended, rej, nrej;
    once_status st;
    once_inputs *s;
    char dir[512];

    s = store_at(f->h, dir, sizeof(dir));
    assert_int_equal(once_grant_submit(c, s, &stale, NULL, NULL, NULL, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "PLACEMENT_CHANGED");
    assert_int_equal(once_grant_submit(c, s, &owned, NULL, NULL, NULL, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "ALREADY_OWNED");
    /* Both kept, marked rejected (not sent) with the server's reason. */
    assert_int_equal(kept_inputs(s, rows), 2);
    assert_string_equal(rows[0].request_id, "stale");
    assert_int_equal(rows[0].state, ONCE_INPUT_REJECTED);
    assert_int_equal(rows[0].code, ONCE_FAILED_PRECONDITION);
    assert_string_equal(rows[0].reason, "PLACEMENT_CHANGED");
    assert_int_equal(rows[0].generation, g1);
    assert_string_equal(rows[1].request_id, "owned");
    assert_int_equal(rows[1].state, ONCE_INPUT_REJECTED);
    assert_string_equal(rows[1].reason, "ALREADY_OWNED");
    /* Nothing started, and nothing moved. */
    assert_int_equal(owner(c, "s"), 0);
    assert_int_equal(owner(c, "t"), tg);

    /* A resume never re-sends rejected input: the server sees no new
     * request (its recorded rejections stay as they were). */
    v = surface(c, "s");
    nrej = v->n_rejections;
    FREE(v);
    assert_int_equal(once_grant_inputs_resume(c, s, NULL, NULL, &acc, &pend,
                                              &ended, &rej, &st),
                     ONCE_OK);
    assert_int_equal(acc + pend + ended + rej, 0);
    assert_int_equal(
        once_grant_input_resend(c, s, "stale", 1, false, NULL, NULL, NULL, &st),
        ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "INPUT_REJECTED");
    v = surface(c, "s");
    assert_int_equal(v->n_rejections, nrej);
    FREE(v);
    /* Same request again: still kept as it was, not sent. */
    assert_int_equal(once_grant_submit(c, s, &stale, NULL, NULL, NULL, &st),
                     ONCE_ALREADY_EXISTS);
    assert_string_equal(st.reason, "INPUT_KEPT");
    assert_int_equal(kept_inputs(s, rows), 2);

    /* Accepted input is not kept; forgetting removes a rejected one. */
    assert_int_equal(once_grant_submit(c, s, &good, NULL, NULL, NULL, &st),
                     ONCE_OK);
    assert_int_equal(kept_inputs(s, rows), 2);
    assert_int_equal(once_grant_input_forget(s, "stale", 1, &st), ONCE_OK);
    assert_int_equal(kept_inputs(s, rows), 1);
    assert_string_equal(rows[0].request_id, "owned");
    once_inputs_close(s);
    /* Reopened (a restarted client): the rejection is still there. */
    s = store_at(f->h, dir, sizeof(dir));
    assert_int_equal(kept_inputs(s, rows), 1);
    assert_int_equal(rows[0].state, ONCE_INPUT_REJECTED);
    once_inputs_close(s);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int
main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        T(c01_one_open_grant_per_surface),
        T(c02_closed_grant_is_history),
        T(c03_open_grant_has_location),
        T(c04_same_id_attempt_digest_is_resend),
        T(c05_other_payload_conflicts),
        T(c06_lost_reply_no_second_owner),
        T(c07_retry_reevaluates_permission),
        T(c07_same_id_replay_reevaluates_permission),
        T(c08_destination_fixed_at_submission),
        T(c09_placement_changed_at_start),
        T(c10_open_grant_never_rewritten),
        T(c11_silence_never_moves),
        T(c12_credential_expiry_keeps_owner),
        T(c13_only_recorded_finish_releases),
        T(c14_pending_13h_expires_on_own_claim),
        T(c15_queue_row_names_destination),
        T(c16_claim_checks_only_destination),
        T(c17_legacy_cannot_own_open_surface),
        T(c18_legacy_and_grant_exclude),
        T(c19_input_kept_until_accepted),
        T(c19_input_lease_ended_not_resent),
        T(c19_enqueue_input_kept_until_accepted),
        T(c19_old_input_files_imported),
        T(c19_import_crash_between_write_and_unlink),
        T(c19_dead_writers_temp_files_swept),
        T(c20_rejected_input_kept_unsent),
        T(c21_delete_keeps_uncertain_grant),
        T(r1_not_per_entry_point),
        T(r2_not_destination_at_claim),
        T(r3_not_free_on_silence),
        T(r4_not_one_per_person_or_machine),
        T(r5_not_new_grant_on_lost_reply),
        T(r6_not_delete_grant_with_machine),
        T(a1_cancelled_not_reaccepted),
        T(a2_next_attempt_only_after_retryable_close),
        T(a3_newer_pending_replaces_in_place),
        T(a3_resent_enqueue_grant_handed_out_once),
        T(a4_rejections_recorded_per_surface),
        T(a4_renewal_rejections_recorded),
        T(a4_placement_changed_recorded),
        T(a4_cancelled_retry_recorded),
        T(a4_principal_denied_recorded),
        T(a4_no_placement_recorded),
        T(a5_permission_failure_rolls_back),
        T(a6_mint_failure_rolls_back),
        T(a6_mint_failure_keeps_grant),
        T(a6_mint_failure_keeps_grant_on_renewal),
        T(k1_credential_verify_offline),
    };

    if (argc == 7 && strcmp(argv[1], "--c19-child") == 0) {
        return c19_child(argv[2], argv[3], strtoull(argv[4], NULL, 10),
                         atoi(argv[5]), atoi(argv[6]));
    }
    snprintf(clock_file, sizeof(clock_file), "/tmp/once-grants-clock-%d",
             (int)getpid());
    setenv("ONCED_CLOCK_OFFSET_FILE", clock_file, 1);
    clock_set(0);
    if (getenv("ONCE_TEST_FILTER") != NULL) { /* e.g. "c19*" */
        cmocka_set_test_filter(getenv("ONCE_TEST_FILTER"));
    }
    {
        int rv = cmocka_run_group_tests(tests, NULL, NULL);
        unlink(clock_file);
        return rv;
    }
}
