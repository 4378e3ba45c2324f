/*
 * test_quotas.c — the caps on live leases (--lease-max,
 * --lease-max-per-principal) and the free-space floor of the data folder
 * (--disk-free-min), against a real onced.
 *
 * Owns: onced started with small caps, in OPEN mode and with principals;
 * and onced restarted with a floor set above the free space the test
 * measures (statvfs of the data folder) instead of a filled disk.
 * Invariant: every wait polls a condition, bounded in count and time.
 * Never: fills a disk or sleeps to decide an outcome.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "tests/harness.h"

#define INCR         "/once.v1.Counter/Increment"
#define CALL_MS      5000
#define TTL_MS       600000
#define POLL_MAX_MS  20000
#define POLL_STEP_MS 20

/* Opens a lease as principal (OPEN mode names it); returns the code, the
 * reason in st. */
static int
open_as(once_client *c, const char *principal, uint64_t *cid, once_status *st)
{
    uint64_t granted = 0;

    *cid = 0;
    memset(st, 0, sizeof(*st));
    return once_lease_open(c, principal, TTL_MS, cid, &granted, st);
}

static void
expect_refused(once_client *c, const char *principal, const char *reason)
{
    once_status st;
    uint64_t cid;

    assert_int_equal(open_as(c, principal, &cid, &st), ONCE_RESOURCE_EXHAUSTED);
    assert_string_equal(st.reason, reason);
    assert_int_equal(cid, 0);
}

static uint64_t
expect_opened(once_client *c, const char *principal)
{
    once_status st;
    uint64_t cid;

    assert_int_equal(open_as(c, principal, &cid, &st), ONCE_OK);
    assert_int_not_equal(cid, 0);
    return cid;
}

static Once__V1__StatsResponse *
stats(once_client *c)
{
    Once__V1__StatsResponse *s = NULL;

    assert_int_equal(harness_stats_all(c, &s), ONCE_OK);
    return s;
}

static bool
log_has(const harness *h, const char *text)
{
    FILE *f = fopen(h->log, "r");
    char line[4096];
    bool found = false;

    assert_non_null(f);
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        found = strstr(line, text) != NULL;
    }
    fclose(f);
    return found;
}

/* ---- lease caps ------------------------------------------------------------
 */

/* OPEN mode: the per-principal cap counts by the principal OpenLease
 * names, the global cap counts every live lease; a closed lease frees
 * its place; the counts are rebuilt on restart. */
static void
test_lease_caps_open_mode(void **state)
{
    static const char *const args[] = {
        "--lease-max", "5", "--lease-max-per-principal", "3", "--gc-interval",
        "1h",          NULL};
    harness *h = NULL;
    once_client *c = NULL;
    Once__V1__StatsResponse *s;
    once_status st;
    uint64_t a[3];

    (void)state;
    assert_int_equal(harness_start_args(&h, args), 0);
    assert_int_equal(harness_client(h, true, &c), ONCE_OK);
    for (int i = 0; i < 3; i++) {
        a[i] = expect_opened(c, "a");
    }
    expect_refused(c, "a", "LEASE_QUOTA");
    expect_opened(c, "b");
    expect_opened(c, "b");
    expect_refused(c, "b", "LEASE_CAPACITY"); /* 5 live in all */
    expect_refused(c, "c", "LEASE_CAPACITY");
    s = stats(c);
    assert_int_equal(s->lease_quota_refused, 1);
    assert_int_equal(s->lease_capacity_refused, 2);
    assert_int_equal(s->leases_live, 5);
    once__v1__stats_response__free_unpacked(s, NULL);

    /* A closed lease frees its place under both caps. */
    memset(&st, 0, sizeof(st));
    assert_int_equal(once_lease_close(c, a[0], NULL, &st), ONCE_OK);
    a[0] = expect_opened(c, "a");
    expect_refused(c, "a", "LEASE_QUOTA");
    once_client_close(c);

    /* Restarted, the live leases are counted again. */
    assert_int_equal(harness_stop(h), 0);
    assert_int_equal(harness_restart(h), 0);
    assert_int_equal(harness_client(h, true, &c), ONCE_OK);
    expect_refused(c, "a", "LEASE_QUOTA");
    expect_refused(c, "d", "LEASE_CAPACITY");
    once_client_close(c);
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

/* Waits (bounded) until an unsigned Stats is refused UNAUTHENTICATED:
 * onced has read the principals file. */
static void
wait_auth_on(const harness *h)
{
    Once__V1__Response *r = NULL;
    uint8_t *req;
    size_t len;
    int code = ONCE_OK;

    assert_int_equal(
        harness_envelope("/once.v1.Admin/Stats", 0, 0, NULL, 0, &req, &len), 0);
    for (int i = 0; i < POLL_MAX_MS / POLL_STEP_MS; i++) {
        assert_int_equal(harness_raw_rpc(h->url, req, len, &r, CALL_MS), 0);
        code = r->status != NULL ? (int)r->status->code : ONCE_OK;
        once__v1__response__free_unpacked(r, NULL);
        if (code == ONCE_UNAUTHENTICATED) {
            break;
        }
        harness_sleep_ms(POLL_STEP_MS);
    }
    free(req);
    assert_int_equal(code, ONCE_UNAUTHENTICATED);
}

/* With principals, the per-principal cap is the authenticated
 * principal's: alice cannot open more by naming no one, and her leases do
 * not use up bob's share. */
static void
test_lease_caps_per_principal(void **state)
{
    static const char *const args[] = {"--lease-max-per-principal", "2",
                                       "--gc-interval", "1h", NULL};
    harness *h = NULL;
    once_client *alice = NULL, *bob = NULL;
    once_status st;

    (void)state;
    assert_int_equal(harness_start_args(&h, args), 0);
    harness_add_principal(h, "alice", "scheduler");
    harness_add_principal(h, "bob", "scheduler");
    wait_auth_on(h);
    assert_int_equal(harness_client_as(h, "alice", true, &alice, &st), ONCE_OK);
    assert_int_equal(harness_client_as(h, "bob", true, &bob, &st), ONCE_OK);
    expect_opened(alice, NULL);
    expect_opened(alice, "alice");
    expect_refused(alice, NULL, "LEASE_QUOTA");
    expect_opened(bob, NULL);
    expect_opened(bob, NULL);
    expect_refused(bob, NULL, "LEASE_QUOTA");
    once_client_close(alice);
    once_client_close(bob);
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

/* ---- the disk floor --------------------------------------------------------
 */

/* Replaces the value of onced argument name (kept for restarts). */
static void
set_arg(harness *h, const char *name, const char *value)
{
    for (int i = 0; h->args[i] != NULL && h->args[i + 1] != NULL; i++) {
        if (strcmp(h->args[i], name) == 0) {
            free(h->args[i + 1]);
            assert_non_null(h->args[i + 1] = strdup(value));
            return;
        }
    }
    fail_msg("no argument %s", name);
}

typedef struct reply {
    int code;
    char reason[64];
    bool replayed;
    int64_t value;
} reply;

/* Increment(name, 1) as (cid, seq) acknowledging below fi, raw. */
static reply
incr(const harness *h, uint64_t cid, uint64_t seq, uint64_t fi)
{
    Once__V1__Response *resp = NULL;
    uint8_t *pl = NULL, *env = NULL;
    size_t plen, elen;
    reply out;

    memset(&out, 0, sizeof(out));
    out.value = -1;
    assert_int_equal(harness_incr_payload("disk", 1, &pl, &plen), 0);
    assert_int_equal(
        harness_envelope_fi(INCR, cid, seq, fi, pl, plen, &env, &elen), 0);
    assert_int_equal(harness_raw_rpc(h->url, env, elen, &resp, CALL_MS), 0);
    free(pl);
    free(env);
    out.code = resp->status != NULL ? (int)resp->status->code : 0;
    if (resp->status != NULL && resp->status->reason != NULL) {
        snprintf(out.reason, sizeof(out.reason), "%s", resp->status->reason);
    }
    out.replayed = resp->replayed;
    if (out.code == ONCE__V1__CODE__OK) {
        Once__V1__IncrementResponse *v = once__v1__increment_response__unpack(
            NULL, resp->payload.len, resp->payload.data);
        assert_non_null(v);
        out.value = v->value;
        once__v1__increment_response__free_unpacked(v, NULL);
    }
    once__v1__response__free_unpacked(resp, NULL);
    return out;
}

/*
 * Below the floor, new mutating calls and OpenLease are refused
 * RESOURCE_EXHAUSTED/DISK_LOW and nothing is recorded, while replays,
 * reads, renewals, acknowledgements and CloseLease go on; Stats and the
 * log say so. Back above it, the refused rpc id runs, once.
 */
static void
test_disk_floor(void **state)
{
    static const char *const args[] = {"--disk-free-min", "0", "--gc-interval",
                                       "1h", NULL};
    harness *h = NULL;
    once_client *c = NULL;
    Once__V1__StatsResponse *s;
    struct statvfs sv;
    struct once_lease_info li;
    once_status st;
    char floor[32];
    uint64_t cid, other, ttl = 0;
    int64_t v = -1;
    reply r;

    (void)state;
    assert_int_equal(harness_start_args(&h, args), 0);
    assert_int_equal(harness_client(h, true, &c), ONCE_OK);
    cid = expect_opened(c, NULL);
    other = expect_opened(c, NULL);
    r = incr(h, cid, 1, 0);
    assert_int_equal(r.code, ONCE_OK);
    assert_int_equal(r.value, 1);
    s = stats(c);
    assert_false(s->disk_low);
    assert_true(s->disk_free_bytes > 0);
    once__v1__stats_response__free_unpacked(s, NULL);
    once_client_close(c);
    assert_int_equal(harness_stop(h), 0);

    /* A floor far above what is free: the disk is "low". */
    assert_int_equal(statvfs(h->data, &sv), 0);
    snprintf(floor, sizeof(floor), "%llu",
             (unsigned long long)sv.f_bavail * sv.f_frsize + (1ULL << 40));
    set_arg(h, "--disk-free-min", floor);
    assert_int_equal(harness_restart(h), 0);
    assert_int_equal(harness_client(h, true, &c), ONCE_OK);

    r = incr(h, cid, 1, 0); /* a replay adds nothing */
    assert_int_equal(r.code, ONCE_OK);
    assert_true(r.replayed);
    assert_int_equal(r.value, 1);
    r = incr(h, cid, 2, 2); /* new: refused; its ack still applies */
    assert_int_equal(r.code, ONCE_RESOURCE_EXHAUSTED);
    assert_string_equal(r.reason, "DISK_LOW");
    expect_refused(c, NULL, "DISK_LOW");
    assert_int_equal(once_counter_get(c, "disk", &v, &st), ONCE_OK);
    assert_int_equal(v, 1);
    assert_int_equal(once_lease_renew(c, cid, &ttl, NULL, &st), ONCE_OK);
    harness_lease_info(c, cid, &li);
    assert_int_equal(li.watermark, 2);
    assert_int_equal(once_lease_close(c, other, NULL, &st), ONCE_OK);
    s = stats(c);
    assert_true(s->disk_low);
    assert_int_equal(s->disk_low_refused, 2);
    once__v1__stats_response__free_unpacked(s, NULL);
    assert_true(log_has(h, "disk low:"));
    once_client_close(c);
    assert_int_equal(harness_stop(h), 0);

    /* Space back: the refused rpc id was not recorded, so it runs now. */
    set_arg(h, "--disk-free-min", "0");
    assert_int_equal(harness_restart(h), 0);
    r = incr(h, cid, 2, 2);
    assert_int_equal(r.code, ONCE_OK);
    assert_false(r.replayed);
    assert_int_equal(r.value, 2);
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lease_caps_open_mode),
        cmocka_unit_test(test_lease_caps_per_principal),
        cmocka_unit_test(test_disk_floor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
