/*
 * test_auth.c — authentication, scoping and authorization (docs/spec.md
 * "Authorization is not deduplication", issue 7) against a real onced.
 *
 * Owns: one onced per test that is switched from OPEN to authenticating by
 * writing principals into its data folder with the real `oncectl principal
 * add` (onced notices the file by itself); signed requests through libonce
 * (once_client_open_secure with a key file) and hand-made signed, unsigned,
 * wrongly keyed and tampered envelopes; revocation and restoration with
 * `oncectl principal revoke|restore` and a policy file.
 * Invariant: every effect is a counter increment, so a second execution
 * shows; "nothing written" is checked with Stats (commits and stored
 * records unchanged) read by an operator; every wait polls a condition,
 * bounded in count and time.
 * Never: mocks onced; reads a key any other way than from the key files
 * oncectl wrote.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "proto/auth_tag.h"
#include "proto/grants.pb-c.h"
#include "tests/harness.h"
#include "base/keyfile.h"
#include "proto/principals.h"

#define POLL_MAX_MS  10000
#define POLL_STEP_MS 20
#define INCR         "/once.v1.Counter/Increment"
#define BY           7

/* Runs oncectl with args (NULL-terminated) and returns its exit status. */
static int
oncectl(const char *const *args)
{
    return harness_oncectl_run(args, NULL, 0, NULL);
}

/* The key file of principal name in the harness's temp dir. */
static void
key_path(const harness *h, const char *name, char *out, size_t len)
{
    snprintf(out, len, "%s/%s.key", h->dir, name);
}

static void
principal_edit(const harness *h, const char *verb, const char *name)
{
    const char *args[] = {"principal", verb, name, "--data", h->data, NULL};
    assert_int_equal(oncectl(args), 0);
}

/* A packed envelope, signed with name's key unless name is NULL (then
 * principal is only named, unsigned). *out is malloc'd (free()). */
static void
envelope(const harness *h, const char *principal, const char *signer,
         const char *method, uint64_t client_id, uint64_t seq,
         uint64_t first_incomplete, const void *payload, size_t payload_len,
         uint8_t **out, size_t *out_len)
{
    Once__V1__Request r = ONCE__V1__REQUEST__INIT;
    size_t len;

    r.method = (char *)method;
    r.client_id = client_id;
    r.seq = seq;
    r.first_incomplete = first_incomplete;
    r.attempt = 1;
    r.principal = (char *)principal;
    r.payload.data = (uint8_t *)payload;
    r.payload.len = payload_len;
    len = once__v1__request__get_packed_size(&r);
    assert_non_null(*out = malloc(len + AUTH_TAG_TRAILER));
    once__v1__request__pack(&r, *out);
    *out_len = len;
    if (signer != NULL) {
        char kp[512], name[PRINCIPAL_NAME_MAX + 1], err[256];
        uint8_t key[AUTH_KEY_BYTES];

        key_path(h, signer, kp, sizeof(kp));
        assert_int_equal(keyfile_read(kp, name, key, err, sizeof(err)), 0);
        auth_tag_append(*out, len, key);
        *out_len = len + AUTH_TAG_TRAILER;
    }
}

/* Sends a raw envelope; returns the reply's code, and its reason. */
static int
raw(const harness *h, const uint8_t *req, size_t len, char *reason,
    size_t reason_len, bool *replayed)
{
    Once__V1__Response *r = NULL;
    int code;

    assert_int_equal(harness_raw_rpc(h->url, req, len, &r, 5000), 0);
    code = r->status != NULL ? (int)r->status->code : 0;
    if (reason != NULL) {
        snprintf(reason, reason_len, "%s",
                 r->status != NULL ? r->status->reason : "");
    }
    if (replayed != NULL) {
        *replayed = r->replayed;
    }
    if (code != 0) {
        assert_int_equal(r->payload.len, 0); /* nothing leaks on a refusal */
    }
    once__v1__response__free_unpacked(r, NULL);
    return code;
}

/* Waits until an unsigned Stats is refused UNAUTHENTICATED: onced has
 * read the principals file. */
static void
wait_auth_on(const harness *h)
{
    uint8_t *req;
    size_t len;
    int64_t end = harness_now_ms() + POLL_MAX_MS;
    int code = 0;

    assert_int_equal(
        harness_envelope("/once.v1.Admin/Stats", 0, 0, NULL, 0, &req, &len), 0);
    for (int i = 0; i < 1000 && harness_now_ms() < end; i++) {
        if ((code = raw(h, req, len, NULL, 0, NULL)) == ONCE_UNAUTHENTICATED) {
            break;
        }
        harness_sleep_ms(POLL_STEP_MS);
    }
    free(req);
    assert_int_equal(code, ONCE_UNAUTHENTICATED);
}

/* A harness with principals: op (operator), alice and bob (schedulers).
 * The collector is kept out of the way (a pass persisting a raised
 * watermark is a commit, and "nothing written" compares commits). */
static harness *
start_auth(void)
{
    harness *h;

    assert_int_equal(harness_start_args(&h, harness_no_gc), 0);
    harness_add_principal(h, "op", "operator");
    harness_add_principal(h, "alice", "scheduler");
    harness_add_principal(h, "bob", "scheduler");
    wait_auth_on(h);
    return h;
}

static void
stats(const harness *h, once_stats *out)
{
    once_client *c = NULL;
    once_status st;

    assert_int_equal(harness_client_as(h, "op", true, &c, &st), ONCE_OK);
    assert_int_equal(once_admin_stats(c, out, &st), ONCE_OK);
    once_client_close(c);
}

/* Stats' refusal counters (not in libonce's once_stats, whose size is part
 * of its ABI), read by the operator. */
static void
refusals(const harness *h, uint64_t *unauthenticated, uint64_t *denied)
{
    once_client *c = NULL;
    once_status st;
    Once__V1__StatsResponse *r;

    assert_int_equal(harness_client_as(h, "op", true, &c, &st), ONCE_OK);
    assert_int_equal(harness_stats_all(c, &r), ONCE_OK);
    once_client_close(c);
    *unauthenticated = r->unauthenticated;
    *denied = r->permission_denied;
    once__v1__stats_response__free_unpacked(r, NULL);
}

static int64_t
counter(const harness *h, const char *name)
{
    once_client *c = NULL;
    once_status st;
    int64_t v = -1;

    assert_int_equal(harness_client_as(h, "op", true, &c, &st), ONCE_OK);
    assert_int_equal(once_counter_get(c, name, &v, &st), ONCE_OK);
    once_client_close(c);
    return v;
}

static void
stop(harness *h)
{
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

/* ---- OPEN and dev mode -------------------------------------------------- */

static bool
log_has(const harness *h, const char *needle)
{
    FILE *f = fopen(h->log, "r");
    char line[2048];
    bool found = false;

    if (f == NULL) {
        return false;
    }
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        found = strstr(line, needle) != NULL;
    }
    fclose(f);
    return found;
}

/* No principals file: OPEN, said loudly; unsigned calls work as before. */
static void
t_open_mode(void **state)
{
    harness *h;
    once_client *c = NULL;
    int64_t v;

    assert_int_equal(harness_start(&h), 0);
    assert_true(log_has(h, "runs OPEN"));
    assert_int_equal(harness_client(h, false, &c), ONCE_OK);
    assert_int_equal(once_counter_incr(c, "n", 1, NULL, &v, NULL), ONCE_OK);
    once_client_close(c);
    stop(h);
}

/* --dev: a dev operator and its key file (0600) on first start; that key
 * works, no key does not. */
static void
t_dev_mode(void **state)
{
    static const char *const dev[] = {"--dev", NULL};
    harness *h;
    once_client *c = NULL;
    once_options o;
    once_security sec;
    once_status st;
    char kp[512], pp[512];
    struct stat sb;
    int64_t v;

    assert_int_equal(harness_start_args(&h, dev), 0);
    assert_true(log_has(h, "DEV MODE"));
    snprintf(kp, sizeof(kp), "%s/dev.key", h->data);
    snprintf(pp, sizeof(pp), "%s/principals", h->data);
    assert_int_equal(stat(kp, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    assert_int_equal(stat(pp, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);

    once_options_init(&o);
    once_security_init(&sec);
    o.url = h->url;
    o.deadline_ms = 5000;
    sec.key_file = kp;
    assert_int_equal(once_client_open_secure(&c, &o, &sec, &st), ONCE_OK);
    assert_int_equal(once_counter_incr(c, "n", 1, NULL, &v, &st), ONCE_OK);
    assert_int_equal(v, 1);
    once_client_close(c);

    /* Unsigned: refused at the lease already. */
    assert_int_not_equal(harness_client(h, false, &c), ONCE_OK);

    /* A restart keeps the same principals and key. */
    assert_int_equal(harness_kill(h, SIGTERM), 0);
    assert_int_equal(harness_restart(h), 0);
    assert_int_equal(once_client_open_secure(&c, &o, &sec, &st), ONCE_OK);
    assert_int_equal(once_counter_incr(c, "n", 1, NULL, &v, &st), ONCE_OK);
    assert_int_equal(v, 2);
    once_client_close(c);
    stop(h);
}

/* ---- authentication ----------------------------------------------------- */

/* Unsigned, wrongly keyed, unknown-principal and tampered requests are
 * UNAUTHENTICATED and write nothing; the untampered request then runs
 * once, and its byte-identical retransmission is a replay. */
static void
t_rejected_write_nothing(void **state)
{
    harness *h = start_auth();
    once_client *a = NULL;
    once_status st;
    once_stats before, after;
    uint64_t unauth0, denied0, unauth1, denied1;
    struct once_lease_info li;
    uint8_t *pl, *req;
    size_t pl_len, len, signed_len = 0;
    uint64_t cid;
    char reason[64];
    bool replayed;

    /* alice's lease, so the calls below are admissible but for the tag */
    assert_int_equal(harness_client_as(h, "alice", false, &a, &st), ONCE_OK);
    cid = once_client_id(a);
    assert_true(cid != 0);
    assert_int_equal(harness_incr_payload("jobs", BY, &pl, &pl_len), 0);
    stats(h, &before);
    refusals(h, &unauth0, &denied0);

    /* no tag */
    envelope(h, "alice", NULL, INCR, cid, 1, 0, pl, pl_len, &req, &len);
    assert_int_equal(raw(h, req, len, reason, sizeof(reason), NULL),
                     ONCE_UNAUTHENTICATED);
    assert_string_equal(reason, "MISSING_TAG");
    free(req);
    /* signed by bob, claiming alice */
    envelope(h, "alice", "bob", INCR, cid, 1, 0, pl, pl_len, &req, &len);
    assert_int_equal(raw(h, req, len, reason, sizeof(reason), NULL),
                     ONCE_UNAUTHENTICATED);
    assert_string_equal(reason, "BAD_TAG");
    free(req);
    /* a principal onced does not know */
    envelope(h, "mallory", "bob", INCR, cid, 1, 0, pl, pl_len, &req, &len);
    assert_int_equal(raw(h, req, len, NULL, 0, NULL), ONCE_UNAUTHENTICATED);
    free(req);
    /* no principal at all */
    envelope(h, "", "alice", INCR, cid, 1, 0, pl, pl_len, &req, &len);
    assert_int_equal(raw(h, req, len, NULL, 0, NULL), ONCE_UNAUTHENTICATED);
    free(req);

    /* correctly signed by alice, then one byte flipped */
    envelope(h, "alice", "alice", INCR, cid, 1, 0, pl, pl_len, &req, &len);
    signed_len = len - AUTH_TAG_TRAILER;
    /* the last payload byte: the varint of "by" (7 -> 6) */
    req[signed_len - 1] ^= 0x01;
    assert_int_equal(raw(h, req, len, reason, sizeof(reason), NULL),
                     ONCE_UNAUTHENTICATED);
    assert_string_equal(reason, "BAD_TAG");
    req[signed_len - 1] ^= 0x01;
    /* the seq: field 3 = 1 -> 3 */
    {
        size_t at = 0;
        for (size_t i = 0; i + 1 < signed_len; i++) {
            if (req[i] == 0x18 && req[i + 1] == 0x01) {
                at = i + 1;
                break;
            }
        }
        assert_true(at != 0);
        req[at] ^= 0x02;
        assert_int_equal(raw(h, req, len, NULL, 0, NULL), ONCE_UNAUTHENTICATED);
        req[at] ^= 0x02;
    }
    /* the tag itself */
    req[len - 1] ^= 0x80;
    assert_int_equal(raw(h, req, len, NULL, 0, NULL), ONCE_UNAUTHENTICATED);
    req[len - 1] ^= 0x80;
    /* a byte appended after the tag: the tag is no longer where it must be */
    {
        uint8_t *longer = malloc(len + 2);
        assert_non_null(longer);
        memcpy(longer, req, len);
        longer[len] = 0x20; /* field 4 (first_incomplete) = 0 */
        longer[len + 1] = 0x00;
        assert_int_equal(raw(h, longer, len + 2, reason, sizeof(reason), NULL),
                         ONCE_UNAUTHENTICATED);
        assert_string_equal(reason, "MISSING_TAG");
        free(longer);
    }

    stats(h, &after);
    assert_int_equal(after.commits, before.commits);
    assert_int_equal(after.records_stored, before.records_stored);
    assert_int_equal(after.replays, before.replays);
    assert_int_equal(counter(h, "jobs"), 0);
    /* each of the eight refusals above counted once, as UNAUTHENTICATED */
    refusals(h, &unauth1, &denied1);
    assert_int_equal(unauth1 - unauth0, 8);
    assert_int_equal(denied1, denied0);
    assert_int_equal(once_lease_info(a, 0, &li, &st), ONCE_OK);
    assert_int_equal(li.max_seq, 0);

    /* The untampered request runs once... */
    assert_int_equal(raw(h, req, len, NULL, 0, &replayed), ONCE_OK);
    assert_false(replayed);
    /* ...and its retransmission (the same bytes, the same valid tag) is a
     * retry answered from the completion record. */
    assert_int_equal(raw(h, req, len, NULL, 0, &replayed), ONCE_OK);
    assert_true(replayed);
    assert_int_equal(counter(h, "jobs"), BY);
    free(req);
    free(pl);
    once_client_close(a);
    stop(h);
}

/* ---- scoping ------------------------------------------------------------ */

/* bob cannot read, replay or disturb alice's results or lease, whatever
 * ids he uses, even alice's exact rpc id and payload. */
static void
t_other_principal(void **state)
{
    harness *h = start_auth();
    once_client *a = NULL, *b = NULL, *op = NULL;
    once_status st;
    once_stats before, after;
    uint64_t unauth0, denied0, unauth1, denied1;
    once_rpc_id id = {0, 0};
    struct once_lease_info li;
    uint8_t *pl, *req, *resp = NULL;
    size_t pl_len, len, resp_len = 0;
    int64_t v = 0;
    uint64_t ttl, rem, kept;
    char reason[64];
    bool replayed = true;

    assert_int_equal(harness_client_as(h, "alice", false, &a, &st), ONCE_OK);
    assert_int_equal(harness_client_as(h, "bob", false, &b, &st), ONCE_OK);
    assert_int_equal(once_counter_incr(a, "secret", BY, &id, &v, &st), ONCE_OK);
    assert_int_equal(v, BY);
    assert_int_equal(once_lease_info(a, 0, &li, &st), ONCE_OK);
    assert_string_equal(li.principal, "alice");
    stats(h, &before);
    refusals(h, &unauth0, &denied0);

    /* bob retries alice's exact id with alice's exact payload */
    assert_int_equal(harness_incr_payload("secret", BY, &pl, &pl_len), 0);
    assert_int_equal(once_call(b, INCR, true, &id, pl, pl_len, (void **)&resp,
                               &resp_len, &st),
                     ONCE_PERMISSION_DENIED);
    assert_string_equal(st.reason, "NOT_YOUR_LEASE");
    assert_false(st.replayed);
    assert_null(resp);
    /* the same by hand, with an acknowledgement that would move alice's
     * watermark */
    envelope(h, "bob", "bob", INCR, id.client_id, id.seq, id.seq, pl, pl_len,
             &req, &len);
    assert_int_equal(raw(h, req, len, reason, sizeof(reason), &replayed),
                     ONCE_PERMISSION_DENIED);
    assert_string_equal(reason, "NOT_YOUR_LEASE");
    assert_false(replayed);
    free(req);
    /* guessed ids: other seqs of alice's client, and a different payload */
    for (uint64_t seq = 1; seq <= 4; seq++) {
        once_rpc_id g = {id.client_id, seq};
        assert_int_equal(once_counter_incr(b, "secret", 1, &g, &v, &st),
                         ONCE_PERMISSION_DENIED);
    }

    /* alice's lease: bob may not see, renew or close it */
    assert_int_equal(once_lease_info(b, id.client_id, &li, &st),
                     ONCE_PERMISSION_DENIED);
    assert_int_equal(once_lease_renew(b, id.client_id, &ttl, &rem, &st),
                     ONCE_PERMISSION_DENIED);
    assert_int_equal(once_lease_close(b, id.client_id, &kept, &st),
                     ONCE_PERMISSION_DENIED);
    /* nor open a lease in alice's name */
    assert_int_equal(once_lease_open(b, "alice", 0, &kept, &ttl, &st),
                     ONCE_PERMISSION_DENIED);
    assert_string_equal(st.reason, "NOT_YOUR_PRINCIPAL");
    /* a scheduler may not read the server's statistics */
    assert_int_equal(once_admin_stats(b, &after, &st), ONCE_PERMISSION_DENIED);
    assert_string_equal(st.reason, "METHOD_DENIED");
    /* eleven refusals above, each counted once as PERMISSION_DENIED */
    refusals(h, &unauth1, &denied1);
    assert_int_equal(denied1 - denied0, 11);
    assert_int_equal(unauth1, unauth0);

    /* the operator sees alice's lease; alice's lease is untouched */
    assert_int_equal(harness_client_as(h, "op", true, &op, &st), ONCE_OK);
    assert_int_equal(once_lease_info(op, id.client_id, &li, &st), ONCE_OK);
    assert_string_equal(li.principal, "alice");
    assert_int_equal(li.state, ONCE_LEASE_STATE_LIVE);
    assert_true(li.watermark <= 1); /* bob's acknowledgement was not taken */

    stats(h, &after);
    assert_int_equal(after.replays, before.replays);
    assert_int_equal(after.commits, before.commits);
    assert_int_equal(after.records_stored, before.records_stored);

    /* alice herself (another handle of hers, as after a restart) still
     * gets her stored result; one effect */
    once_client_close(op);
    assert_int_equal(harness_client_as(h, "alice", true, &op, &st), ONCE_OK);
    assert_int_equal(once_counter_incr(op, "secret", BY, &id, &v, &st),
                     ONCE_OK);
    assert_true(st.replayed);
    assert_int_equal(v, BY);
    assert_int_equal(counter(h, "secret"), BY);
    once_client_close(op);
    free(pl);
    once_client_close(b);
    once_client_close(a);
    stop(h);
}

/* ---- revocation and policy ---------------------------------------------- */

/* Retries id (as alice, through her handle) until its code is want, at
 * most POLL_MAX_MS. Returns the last code; *v and st as the call left. */
static int
retry_until(once_client *a, once_rpc_id id, int want, int64_t *v,
            once_status *st)
{
    int64_t end = harness_now_ms() + POLL_MAX_MS;
    int code = -1;

    for (int i = 0; i < 1000 && harness_now_ms() < end; i++) {
        once_rpc_id r = id;
        if ((code = once_counter_incr(a, "jobs", BY, &r, v, st)) == want) {
            break;
        }
        harness_sleep_ms(POLL_STEP_MS);
    }
    return code;
}

/* A revoked principal's retry is denied, not answered from its record;
 * once restored the retry gets the stored result; one effect throughout.
 * The same with the permission withdrawn by a policy file. */
static void
t_revocation(void **state)
{
    harness *h = start_auth();
    once_client *a = NULL, *r = NULL;
    once_status st;
    once_stats before, after;
    once_rpc_id id = {0, 0}, fresh = {0, 0};
    char pol[512];
    int64_t v = 0;
    FILE *f;

    assert_int_equal(harness_client_as(h, "alice", false, &a, &st), ONCE_OK);
    assert_int_equal(once_counter_incr(a, "jobs", BY, &id, &v, &st), ONCE_OK);
    assert_int_equal(v, BY);
    /* retries come from another handle of alice's (the first one has the
     * seq acknowledged already) */
    assert_int_equal(harness_client_as(h, "alice", true, &r, &st), ONCE_OK);

    principal_edit(h, "revoke", "alice");
    assert_int_equal(retry_until(r, id, ONCE_PERMISSION_DENIED, &v, &st),
                     ONCE_PERMISSION_DENIED);
    assert_string_equal(st.reason, "PRINCIPAL_REVOKED");
    assert_false(st.replayed);
    stats(h, &before);
    /* denied again, and a new call too: nothing written */
    assert_int_equal(retry_until(r, id, ONCE_PERMISSION_DENIED, &v, &st),
                     ONCE_PERMISSION_DENIED);
    assert_int_equal(once_counter_incr(a, "jobs", 1, &fresh, &v, &st),
                     ONCE_PERMISSION_DENIED);
    stats(h, &after);
    assert_int_equal(after.commits, before.commits);
    assert_int_equal(after.records_stored, before.records_stored);
    assert_int_equal(after.replays, before.replays);

    principal_edit(h, "restore", "alice");
    assert_int_equal(retry_until(r, id, ONCE_OK, &v, &st), ONCE_OK);
    assert_true(st.replayed);
    assert_int_equal(v, BY);
    assert_int_equal(counter(h, "jobs"), BY);

    /* A policy that no longer lets schedulers count (SIGHUP: re-read at
     * once; the stat would find it within ~100 ms anyway). */
    snprintf(pol, sizeof(pol), "%s/policy", h->data);
    assert_non_null(f = fopen(pol, "w"));
    fputs("# counting withdrawn from schedulers\n"
          "operator *\n"
          "scheduler /once.v1.Lease/*\n",
          f);
    fclose(f);
    kill(h->pid, SIGHUP);
    assert_int_equal(retry_until(r, id, ONCE_PERMISSION_DENIED, &v, &st),
                     ONCE_PERMISSION_DENIED);
    assert_string_equal(st.reason, "METHOD_DENIED");
    /* @NAME rules: alice alone gets it back */
    assert_non_null(f = fopen(pol, "a"));
    fputs("@alice /once.v1.Counter/Increment\n", f);
    fclose(f);
    assert_int_equal(retry_until(r, id, ONCE_OK, &v, &st), ONCE_OK);
    assert_true(st.replayed);
    assert_int_equal(v, BY);
    /* no policy file: the default again */
    assert_int_equal(unlink(pol), 0);
    assert_int_equal(retry_until(r, id, ONCE_OK, &v, &st), ONCE_OK);
    assert_int_equal(counter(h, "jobs"), BY);

    /* A policy file that does not parse leaves the one in force. */
    assert_non_null(f = fopen(pol, "w"));
    fputs("operator\n", f);
    fclose(f);
    kill(h->pid, SIGHUP);
    harness_sleep_ms(300); /* onced re-reads before its next request */
    assert_int_equal(retry_until(r, id, ONCE_OK, &v, &st), ONCE_OK);
    assert_true(log_has(h, "not reloaded"));
    unlink(pol);

    once_client_close(r);
    once_client_close(a);
    stop(h);
}

/* An agent acts for its own machine only. */
static void
t_agent_machine(void **state)
{
    harness *h = start_auth();
    once_client *ag = NULL;
    once_status st;
    once_stats s;
    Once__V1__ClaimRequest cr = ONCE__V1__CLAIM_REQUEST__INIT;
    uint8_t buf[256];
    size_t len;
    void *resp = NULL;
    size_t resp_len = 0;

    harness_add_principal(h, "agent-m1", "agent:m1");
    /* wait until onced knows the new principal */
    {
        int64_t end = harness_now_ms() + POLL_MAX_MS;
        int rv = -1;
        for (int i = 0; i < 1000 && harness_now_ms() < end && rv != ONCE_OK;
             i++) {
            if ((rv = harness_client_as(h, "agent-m1", false, &ag, &st)) !=
                ONCE_OK) {
                harness_sleep_ms(POLL_STEP_MS);
            }
        }
        assert_int_equal(rv, ONCE_OK);
    }
    cr.machine = "m2";
    len = once__v1__claim_request__pack(&cr, buf);
    assert_int_equal(once_call(ag, "/once.v1.Grants/Claim", true, NULL, buf,
                               len, &resp, &resp_len, &st),
                     ONCE_PERMISSION_DENIED);
    assert_string_equal(st.reason, "WRONG_MACHINE");
    cr.machine = "m1";
    len = once__v1__claim_request__pack(&cr, buf);
    assert_int_equal(once_call(ag, "/once.v1.Grants/Claim", true, NULL, buf,
                               len, &resp, &resp_len, &st),
                     ONCE_OK);
    once_free(resp);
    /* agents may not count, nor read statistics */
    assert_int_equal(once_admin_stats(ag, &s, &st), ONCE_PERMISSION_DENIED);
    assert_int_equal(once_counter_incr(ag, "x", 1, NULL, NULL, &st),
                     ONCE_PERMISSION_DENIED);
    once_client_close(ag);
    stop(h);
}

/* oncectl principal list never shows keys; a key file is never
 * overwritten; a name is never given a second key. */
static void
t_oncectl_principal(void **state)
{
    harness *h = start_auth();
    char kp[512], cmd[2048], out[4096];
    char name[PRINCIPAL_NAME_MAX + 1], err[256], hex[2 * AUTH_KEY_BYTES + 1];
    uint8_t key[AUTH_KEY_BYTES];
    struct stat sb;
    FILE *p;
    size_t n;

    key_path(h, "alice", kp, sizeof(kp));
    assert_int_equal(stat(kp, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    assert_int_equal(keyfile_read(kp, name, key, err, sizeof(err)), 0);
    assert_string_equal(name, "alice");
    sodium_bin2hex(hex, sizeof(hex), key, sizeof(key));

    snprintf(cmd, sizeof(cmd), "%s --json principal list --data %s",
             ONCECTL_PATH, h->data);
    assert_non_null(p = popen(cmd, "r"));
    n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    assert_int_equal(pclose(p), 0);
    assert_non_null(strstr(out, "\"alice\""));
    assert_null(strstr(out, hex));

    {
        const char *again[] = {"principal", "add",    "alice", "--role",
                               "operator",  "--data", h->data, NULL};
        assert_int_equal(oncectl(again), 1);
    }
    {
        const char *clobber[] = {"principal", "add",    "carol", "--role",
                                 "operator",  "--data", h->data, "--key-out",
                                 kp,          NULL};
        assert_int_equal(oncectl(clobber), 1);
    }
    assert_int_equal(keyfile_read(kp, name, key, err, sizeof(err)), 0);
    assert_string_equal(name, "alice");
    stop(h);
}

/* ---- batches: authentication and authorization per entry ------------- */

typedef struct entry_out {
    int code;
    char reason[64];
    bool replayed;
    int64_t value; /* OK increments */
} entry_out;

/* Sends a batch envelope (it carries no authority) and unpacks
 * its n entry Responses into out. */
static void
send_batch(const harness *h, const uint8_t *env, size_t len, entry_out *out,
           size_t n)
{
    Once__V1__Response *r = NULL;
    Once__V1__BatchResponse *br;

    assert_int_equal(harness_raw_rpc(h->url, env, len, &r, 5000), 0);
    assert_true(r->status == NULL || r->status->code == 0);
    br =
        once__v1__batch_response__unpack(NULL, r->payload.len, r->payload.data);
    assert_non_null(br);
    assert_int_equal(br->n_responses, n);
    for (size_t i = 0; i < n; i++) {
        Once__V1__Response *e = once__v1__response__unpack(
            NULL, br->responses[i].len, br->responses[i].data);

        assert_non_null(e);
        memset(&out[i], 0, sizeof(out[i]));
        out[i].code = e->status != NULL ? (int)e->status->code : 0;
        snprintf(out[i].reason, sizeof(out[i].reason), "%s",
                 e->status != NULL ? e->status->reason : "");
        out[i].replayed = e->replayed;
        out[i].value = -1;
        if (out[i].code == 0) {
            Once__V1__IncrementResponse *ir =
                once__v1__increment_response__unpack(NULL, e->payload.len,
                                                     e->payload.data);
            assert_non_null(ir);
            out[i].value = ir->value;
            once__v1__increment_response__free_unpacked(ir, NULL);
        } else {
            assert_int_equal(e->payload.len, 0); /* nothing leaks */
        }
        once__v1__response__free_unpacked(e, NULL);
    }
    once__v1__batch_response__free_unpacked(br, NULL);
    once__v1__response__free_unpacked(r, NULL);
}

/*
 * One batch (the envelope signed by bob) of alice's signed calls around three
 * entries that must be refused alone: one unsigned naming alice, one
 * naming alice signed with bob's key, and bob's signed retry of alice's
 * completed id with her exact payload. Alice's two run (1, 2); the three
 * are UNAUTHENTICATED / UNAUTHENTICATED / NOT_YOUR_LEASE, and stay so when
 * the batch is resent (authorization is not deduplication: bob's entry
 * never replays alice's stored result) while alice's replay.
 */
static void
t_batch_per_entry(void **state)
{
    harness *h = start_auth();
    once_client *a = NULL;
    once_status st;
    once_rpc_id id = {0, 0};
    uint8_t *pl, *pb, *e[5], *env;
    size_t pl_len, pb_len, l[5], len;
    uint64_t unauth0, denied0, unauth1, denied1;
    entry_out out[5], again[5];
    int64_t v = 0;

    assert_int_equal(harness_client_as(h, "alice", false, &a, &st), ONCE_OK);
    assert_int_equal(once_counter_incr(a, "secret", BY, &id, &v, &st), ONCE_OK);
    refusals(h, &unauth0, &denied0);
    assert_int_equal(harness_incr_payload("b", 1, &pb, &pb_len), 0);
    assert_int_equal(harness_incr_payload("secret", BY, &pl, &pl_len), 0);
    envelope(h, "alice", "alice", INCR, id.client_id, id.seq + 1, 0, pb, pb_len,
             &e[0], &l[0]);
    envelope(h, "alice", NULL, INCR, id.client_id, id.seq + 2, 0, pb, pb_len,
             &e[1], &l[1]);
    envelope(h, "alice", "bob", INCR, id.client_id, id.seq + 3, 0, pb, pb_len,
             &e[2], &l[2]);
    envelope(h, "bob", "bob", INCR, id.client_id, id.seq, 0, pl, pl_len, &e[3],
             &l[3]);
    envelope(h, "alice", "alice", INCR, id.client_id, id.seq + 4, 0, pb, pb_len,
             &e[4], &l[4]);
    /* The envelope signed by bob: checked as any message, it lends bob's
     * rights to no entry and takes none from alice's. */
    {
        Once__V1__BatchRequest br = ONCE__V1__BATCH_REQUEST__INIT;
        ProtobufCBinaryData ents[5];
        uint8_t *bp;
        size_t blen;

        for (int i = 0; i < 5; i++) {
            ents[i].data = e[i];
            ents[i].len = l[i];
        }
        br.n_entries = 5;
        br.entries = ents;
        blen = once__v1__batch_request__get_packed_size(&br);
        assert_non_null(bp = malloc(blen));
        once__v1__batch_request__pack(&br, bp);
        envelope(h, "bob", "bob", "/once.v1.Batch/Call", 0, 0, 0, bp, blen,
                 &env, &len);
        free(bp);
    }

    send_batch(h, env, len, out, 5);
    send_batch(h, env, len, again, 5);
    for (int i = 0; i < 5; i++) {
        print_message("entry %d: %d %s%s / resent: %d %s%s\n", i, out[i].code,
                      out[i].reason, out[i].replayed ? " (replayed)" : "",
                      again[i].code, again[i].reason,
                      again[i].replayed ? " (replayed)" : "");
    }
    assert_int_equal(out[0].code, ONCE_OK);
    assert_int_equal(out[0].value, 1);
    assert_false(out[0].replayed);
    assert_int_equal(out[4].code, ONCE_OK);
    assert_int_equal(out[4].value, 2);
    for (int i = 0; i < 5; i += 4) {
        assert_int_equal(again[i].code, ONCE_OK);
        assert_int_equal(again[i].value, out[i].value);
        assert_true(again[i].replayed);
    }
    for (int k = 0; k < 2; k++) {
        entry_out *o = k == 0 ? out : again;

        assert_int_equal(o[1].code, ONCE_UNAUTHENTICATED);
        assert_int_equal(o[2].code, ONCE_UNAUTHENTICATED);
        assert_int_equal(o[3].code, ONCE_PERMISSION_DENIED);
        assert_string_equal(o[3].reason, "NOT_YOUR_LEASE");
        for (int i = 1; i <= 3; i++) {
            assert_false(o[i].replayed);
        }
    }
    refusals(h, &unauth1, &denied1);
    assert_int_equal(unauth1 - unauth0, 4); /* 2 per send */
    assert_int_equal(denied1 - denied0, 2);
    assert_int_equal(counter(h, "b"), 2);
    assert_int_equal(counter(h, "secret"), BY);

    for (int i = 0; i < 5; i++) {
        free(e[i]);
    }
    free(env);
    free(pl);
    free(pb);
    once_client_close(a);
    stop(h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_open_mode),
        cmocka_unit_test(t_dev_mode),
        cmocka_unit_test(t_rejected_write_nothing),
        cmocka_unit_test(t_other_principal),
        cmocka_unit_test(t_revocation),
        cmocka_unit_test(t_agent_machine),
        cmocka_unit_test(t_oncectl_principal),
        cmocka_unit_test(t_batch_per_entry),
    };
    if (sodium_init() < 0) {
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
