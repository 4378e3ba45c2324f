/*
 * test_compact.c — Admin.Compact against a real onced: the full-range
 * compaction on the store's own thread (store/compact.c), the Stats fields
 * it adds (compacting, compactions, disk_bytes), who may ask for it, and a
 * clean shutdown while one runs; `oncectl admin compact` and `oncectl
 * stats` with the real oncectl.
 *
 * Owns: records written under explicit rpc ids (no acknowledgement, so
 * each one stays until its lease ends) with long counter names (so the
 * log holds many bytes), reclaimed by closing the lease; Compact through
 * libonce's once_admin_compact, Stats through once_call, unpacked here
 * (once_stats keeps its ABI and has none of the new fields).
 * Invariant: every wait polls a condition, bounded in count and time.
 * "Compact answers at once" and "shutdown waits for the compaction" are
 * made certain with onced's test-only ONCED_COMPACT_HOLD_MS (the
 * compaction thread waits that long before it compacts), never by hoping
 * a compaction is slow.
 * Never: reads LevelDB's folder behind onced's back; disk sizes come from
 * Stats.disk_bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/harness.h"
#include "proto/wire.h"

#define POLL_MAX_MS  30000
#define POLL_STEP_MS 20
#define HOLD_MS      7000 /* ONCED_COMPACT_HOLD_MS of the held onced */
#define STR_(x)      #x
#define STR(x)       STR_(x)
#define NRECORDS     400

/* ---- Admin calls ----------------------------------------------------------
 */

static Once__V1__StatsResponse *
stats(once_client *c)
{
    Once__V1__StatsResponse *s;

    assert_int_equal(harness_stats_all(c, &s), ONCE_OK);
    return s;
}

/* Polls Stats until no compaction runs; returns the last Stats. */
static Once__V1__StatsResponse *
wait_compacted(once_client *c)
{
    int64_t end = harness_now_ms() + POLL_MAX_MS;
    Once__V1__StatsResponse *s = NULL;

    for (int i = 0; i < POLL_MAX_MS / POLL_STEP_MS && harness_now_ms() < end;
         i++) {
        s = stats(c);
        if (!s->compacting) {
            return s;
        }
        once__v1__stats_response__free_unpacked(s, NULL);
        s = NULL;
        harness_sleep_ms(POLL_STEP_MS);
    }
    fail_msg("a compaction still runs after %d ms", POLL_MAX_MS);
    return NULL;
}

/* Polls Stats until records_stored is want. */
static void
wait_records(once_client *c, uint64_t want)
{
    int64_t end = harness_now_ms() + POLL_MAX_MS;
    uint64_t got = UINT64_MAX;

    for (int i = 0; i < POLL_MAX_MS / POLL_STEP_MS && harness_now_ms() < end;
         i++) {
        Once__V1__StatsResponse *s = stats(c);
        got = s->records_stored;
        once__v1__stats_response__free_unpacked(s, NULL);
        if (got == want) {
            return;
        }
        harness_sleep_ms(POLL_STEP_MS);
    }
    fail_msg("records_stored %" PRIu64 ", want %" PRIu64, got, want);
}

/* A counter name of 200 characters: every increment puts that many bytes
 * of key into LevelDB's log. */
static void
long_name(char *out, size_t len, char tag)
{
    assert_true(len > 200);
    memset(out, tag, 200);
    out[200] = '\0';
}

/* Opens a lease of ttl_ms on c and sends Increment(name) under its seqs
 * first..last, each without an acknowledgement: every record stays until
 * the lease ends. Returns the client id. */
static uint64_t
fill(once_client *c, const char *name, uint64_t ttl_ms, uint64_t last)
{
    uint64_t cid = 0, granted = 0;
    once_status st;
    int64_t v;

    assert_int_equal(once_lease_open(c, NULL, ttl_ms, &cid, &granted, &st),
                     ONCE_OK);
    for (uint64_t seq = 1; seq <= last; seq++) {
        int rv = harness_incr_id(c, name, 1, cid, seq, &v, &st);
        if (rv != ONCE_OK) {
            fail_msg("incr %" PRIu64 ":%" PRIu64 ": %s %s %s", cid, seq,
                     once_strerror(rv), st.reason, st.message);
        }
    }
    return cid;
}

/* ---- oncectl ------------------------------------------------------------- */

/* Runs oncectl --server URL [--key-file KEY] --json ARGS... and reads its
 * stdout into out; returns the exit status. */
static int
oncectl(const harness *h, const char *key, char *out, size_t cap,
        const char *const *args)
{
    return harness_oncectl(h, key, out, cap, NULL, args);
}

#define HAS(out, s) assert_non_null(strstr((out), (s)))

/* A client signing with DIR/name.key (no lease). */
static void
client_as(const harness *h, const char *name, once_client **cp)
{
    once_status st;

    assert_int_equal(harness_client_as(h, name, true, cp, &st), ONCE_OK);
}

/* Byte offset of the last line of h's log holding needle, or -1 (the log
 * holds every start of onced in this harness, so the last one is the last
 * start's). */
static long
log_find(const harness *h, const char *needle)
{
    FILE *f = fopen(h->log, "r");
    char line[2048];
    long at = -1, off = 0;

    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strstr(line, needle) != NULL) {
            at = off;
        }
        off += (long)strlen(line);
    }
    fclose(f);
    return at;
}

static int
setup(void **state)
{
    static const char *const args[] = {"--gc-interval", "50ms", NULL};

    unsetenv("ONCE_KEY_FILE");
    unsetenv("ONCED_COMPACT_HOLD_MS");
    return harness_setup_args(state, args);
}

/* ---- (a) compaction after reclamation ----------------------------------- */

/* NRECORDS records are written, then reclaimed (their lease closed); the
 * bytes stay on disk until Compact, after which Stats shows one more
 * compaction and a folder of less than a twentieth; the counter reads the
 * same and onced goes on serving. */
static void
t_compact_after_reclaim(void **state)
{
    harness *h = *state;
    once_client *c = NULL;
    Once__V1__StatsResponse *s;
    uint64_t cid, retained, before, after, count0, n0;
    bool already = true;
    once_status st;
    char name[256];
    int64_t v;

    long_name(name, sizeof(name), 'a');
    assert_int_equal(harness_client(h, true, &c), ONCE_OK);
    cid = fill(c, name, 120000, NRECORDS);

    s = stats(c);
    retained = s->records_stored;
    assert_int_equal(retained, NRECORDS);
    assert_false(s->compacting);
    assert_int_equal(s->compactions, 0);
    once__v1__stats_response__free_unpacked(s, NULL);

    assert_int_equal(once_lease_close(c, cid, &n0, &st), ONCE_OK);
    assert_int_equal(n0, NRECORDS);
    wait_records(c, 0);

    s = stats(c);
    before = s->disk_bytes;
    count0 = s->compactions;
    once__v1__stats_response__free_unpacked(s, NULL);
    /* The log holds every counter put with its 200-byte key. */
    assert_true(before > (uint64_t)NRECORDS * 200);

    assert_int_equal(once_admin_compact(c, &already, &n0, &st), ONCE_OK);
    assert_false(already);
    assert_int_equal(n0, count0);
    s = wait_compacted(c);
    after = s->disk_bytes;
    print_message("  disk_bytes %" PRIu64 " after reclaiming %" PRIu64
                  " records, %" PRIu64 " after Compact\n",
                  before, retained, after);
    assert_int_equal(s->compactions, count0 + 1);
    assert_int_equal(s->records_stored, 0);
    assert_true(after > 0);
    /* What is left is one counter, a collected lease's id, LevelDB's
     * manifest and info log: a few KB of ~140 KB. A compaction that only
     * flushed the memtable into a table (every version and tombstone kept,
     * snappy-compressed) would leave about an eighth. */
    assert_true(after * 20 < before);
    once__v1__stats_response__free_unpacked(s, NULL);

    /* The data kept is the data there was; onced goes on. */
    assert_int_equal(harness_get(c, name), NRECORDS);
    once_client_close(c);
    assert_int_equal(harness_client(h, false, &c), ONCE_OK);
    assert_int_equal(once_counter_incr(c, name, 1, NULL, &v, &st), ONCE_OK);
    assert_int_equal(v, NRECORDS + 1);
    /* A second compaction works too (the first thread was reaped). */
    assert_int_equal(once_admin_compact(c, &already, &n0, &st), ONCE_OK);
    assert_false(already);
    assert_int_equal(n0, count0 + 1);
    s = wait_compacted(c);
    assert_int_equal(s->compactions, count0 + 2);
    once__v1__stats_response__free_unpacked(s, NULL);
    assert_int_equal(harness_get(c, name), NRECORDS + 1);
    once_client_close(c);
}

/* ---- (b) who may compact ------------------------------------------------ */

/* With authentication on, Compact is for operators like every Admin method:
 * a scheduler and an agent get PERMISSION_DENIED (and start nothing), an
 * unsigned caller UNAUTHENTICATED, the operator OK. */
static void
t_compact_permission(void **state)
{
    harness *h = *state;
    once_client *op = NULL, *sched = NULL, *agent = NULL, *anon = NULL;
    Once__V1__StatsResponse *s;
    bool already;
    uint64_t n0;
    once_status st;
    char out[4096], kp[512];

    harness_add_principal(h, "op", "operator");
    harness_add_principal(h, "alice", "scheduler");
    harness_add_principal(h, "m1", "agent:m1");
    client_as(h, "op", &op);
    client_as(h, "alice", &sched);
    client_as(h, "m1", &agent);
    {
        /* onced has read the principals file once unsigned Stats fails. */
        once_options o;
        int64_t end = harness_now_ms() + POLL_MAX_MS;
        int rv = ONCE_OK;

        once_options_init(&o);
        o.url = h->url;
        o.no_lease = true;
        o.deadline_ms = 5000;
        assert_int_equal(once_client_open(&anon, &o, &st), ONCE_OK);
        for (int i = 0; i < 1000 && harness_now_ms() < end; i++) {
            if ((rv = harness_stats_all(anon, &s)) != ONCE_OK) {
                break;
            }
            once__v1__stats_response__free_unpacked(s, NULL);
            harness_sleep_ms(POLL_STEP_MS);
        }
        assert_int_equal(rv, ONCE_UNAUTHENTICATED);
    }

    assert_int_equal(once_admin_compact(sched, &already, &n0, &st),
                     ONCE_PERMISSION_DENIED);
    assert_string_equal(st.reason, "METHOD_DENIED");
    assert_int_equal(once_admin_compact(agent, &already, &n0, &st),
                     ONCE_PERMISSION_DENIED);
    assert_int_equal(once_admin_compact(anon, &already, &n0, &st),
                     ONCE_UNAUTHENTICATED);
    /* As restricted as Stats, the most restricted Admin method. */
    assert_int_equal(harness_stats_all(sched, &s), ONCE_PERMISSION_DENIED);
    snprintf(kp, sizeof(kp), "%s/alice.key", h->dir);
    {
        const char *a[] = {"admin", "compact", "--wait", NULL};
        assert_int_equal(oncectl(h, kp, out, sizeof(out), a), 1);
        HAS(out, "\"code\":\"PERMISSION_DENIED\"");
    }
    /* Nothing was started by the refused calls. */
    s = stats(op);
    assert_false(s->compacting);
    assert_int_equal(s->compactions, 0);
    once__v1__stats_response__free_unpacked(s, NULL);

    assert_int_equal(once_admin_compact(op, &already, &n0, &st), ONCE_OK);
    assert_false(already);
    s = wait_compacted(op);
    assert_int_equal(s->compactions, 1);
    once__v1__stats_response__free_unpacked(s, NULL);

    once_client_close(anon);
    once_client_close(agent);
    once_client_close(sched);
    once_client_close(op);
}

/* ---- (c) shutdown during a compaction ----------------------------------- */

/* With the compaction held for HOLD_MS: Compact answers at once and calls
 * go on meanwhile; a second Compact says already_running; oncectl --wait
 * gives up at its deadline; SIGTERM then waits for the compaction to end
 * before LevelDB closes, exits 0, and after a restart every counter, record
 * and replay is there. */
static void
t_sigterm_while_compacting(void **state)
{
    harness *h = *state;
    once_client *c = NULL, *k = NULL;
    Once__V1__StatsResponse *s;
    uint64_t cid_gone, cid_kept, n0;
    int64_t t0, took, v;
    long at_done, at_stop;
    bool already;
    once_status st;
    char gone[256], kept[256], out[4096];

    /* This onced: the next start gets the hold. */
    assert_int_equal(harness_kill(h, SIGTERM), 0);
    setenv("ONCED_COMPACT_HOLD_MS", STR(HOLD_MS), 1);
    assert_int_equal(harness_restart(h), 0);
    unsetenv("ONCED_COMPACT_HOLD_MS");

    long_name(gone, sizeof(gone), 'g');
    long_name(kept, sizeof(kept), 'k');
    assert_int_equal(harness_client(h, true, &c), ONCE_OK);
    cid_gone = fill(c, gone, 120000, 200);
    assert_int_equal(once_lease_close(c, cid_gone, &n0, &st), ONCE_OK);
    cid_kept = fill(c, kept, 120000, 100);
    wait_records(c, 100);

    t0 = harness_now_ms();
    assert_int_equal(once_admin_compact(c, &already, &n0, &st), ONCE_OK);
    took = harness_now_ms() - t0;
    assert_false(already);
    assert_int_equal(n0, 0);
    assert_true(took < HOLD_MS / 2); /* answered, not waited for */

    /* The executor is free: a call and Stats go through meanwhile. */
    assert_int_equal(harness_client(h, false, &k), ONCE_OK);
    assert_int_equal(once_counter_incr(k, "during", 1, NULL, &v, &st), ONCE_OK);
    once_client_close(k);
    assert_int_equal(once_admin_compact(c, &already, &n0, &st), ONCE_OK);
    assert_true(already);
    assert_int_equal(n0, 0);
    {
        const char *a[] = {"--timeout", "300ms",  "admin",
                           "compact",   "--wait", NULL};
        assert_int_equal(oncectl(h, NULL, out, sizeof(out), a), 1);
        HAS(out, "\"code\":\"DEADLINE_EXCEEDED\"");
        HAS(out, "\"reason\":\"STILL_COMPACTING\"");
    }
    s = stats(c);
    assert_true(s->compacting);
    assert_int_equal(s->compactions, 0);
    once__v1__stats_response__free_unpacked(s, NULL);
    once_client_close(c);

    t0 = harness_now_ms();
    assert_int_equal(harness_stop(h), 0);
    took = harness_now_ms() - t0;
    at_done = log_find(h, "compaction of the whole key range finished");
    at_stop = log_find(h, "stopped cleanly");
    /* Logged only when the compaction still ran as the store closed. */
    assert_true(log_find(h, "waiting for the running compaction") >= 0);
    /* A stop that lasts says what it waits for (server/stop_watch.c),
     * every 2 s: here, the store's close. */
    if (took >= 2500) {
        assert_true(log_find(h, "so far: waiting for the store's close "
                                "(LevelDB)") >= 0);
    } else {
        printf("  the stop took %lld ms: too short for the slow-stop log\n",
               (long long)took);
    }
    assert_true(at_done >= 0);
    assert_true(at_stop > at_done); /* LevelDB closed after it ended */

    /* Restart (no hold): everything is there. */
    assert_int_equal(harness_restart(h), 0);
    assert_int_equal(harness_client(h, true, &c), ONCE_OK);
    assert_int_equal(harness_get(c, gone), 200);
    assert_int_equal(harness_get(c, kept), 100);
    assert_int_equal(harness_get(c, "during"), 1);
    wait_records(c, 100); /* "during"'s lease was closed: its one goes */
    s = stats(c);
    assert_false(s->compacting);
    assert_int_equal(s->compactions, 0);
    once__v1__stats_response__free_unpacked(s, NULL);
    assert_int_equal(harness_incr_id(c, kept, 1, cid_kept, 100, &v, &st),
                     ONCE_OK);
    assert_true(st.replayed);
    assert_int_equal(v, 100);
    assert_int_equal(harness_get(c, kept), 100);
    once_client_close(c);
}

/* SIGKILL at a few points during and just after a compaction (no hold:
 * LevelDB is rewriting its files): after each restart every kept record is
 * still there and replays its original value, the reclaimed lease's
 * records stay gone, the counters are exact, and a compaction then runs to
 * its end. */
static void
t_sigkill_while_compacting(void **state)
{
    harness *h = *state;
    once_client *c = NULL;
    Once__V1__StatsResponse *s;
    uint64_t cid_kept, cid_gone, n0;
    bool already;
    once_status st;
    char gone[256], kept[256];
    int64_t v;
    static const int delays_ms[] = {0, 2, 5, 10};

    long_name(gone, sizeof(gone), 'x');
    long_name(kept, sizeof(kept), 'y');
    assert_int_equal(harness_client(h, true, &c), ONCE_OK);
    cid_gone = fill(c, gone, 120000, NRECORDS);
    assert_int_equal(once_lease_close(c, cid_gone, &n0, &st), ONCE_OK);
    cid_kept = fill(c, kept, 120000, NRECORDS);
    wait_records(c, NRECORDS);
    once_client_close(c);

    for (size_t i = 0; i < sizeof(delays_ms) / sizeof(delays_ms[0]); i++) {
        assert_int_equal(harness_client(h, true, &c), ONCE_OK);
        assert_int_equal(once_admin_compact(c, &already, &n0, &st), ONCE_OK);
        once_client_close(c);
        harness_sleep_ms(delays_ms[i]);
        assert_true(harness_kill(h, SIGKILL) >= 0);
        assert_int_equal(harness_restart(h), 0);

        assert_int_equal(harness_client(h, true, &c), ONCE_OK);
        assert_int_equal(harness_get(c, gone), NRECORDS);
        assert_int_equal(harness_get(c, kept), NRECORDS);
        wait_records(c, NRECORDS);
        for (uint64_t seq = 1; seq <= NRECORDS; seq += NRECORDS / 8) {
            assert_int_equal(
                harness_incr_id(c, kept, 1, cid_kept, seq, &v, &st), ONCE_OK);
            assert_true(st.replayed);
            assert_int_equal(v, (int64_t)seq);
        }
        once_client_close(c);
    }
    /* And a compaction now runs to its end, changing nothing. */
    assert_int_equal(harness_client(h, true, &c), ONCE_OK);
    assert_int_equal(once_admin_compact(c, &already, &n0, &st), ONCE_OK);
    s = wait_compacted(c);
    assert_int_equal(s->records_stored, NRECORDS);
    once__v1__stats_response__free_unpacked(s, NULL);
    assert_int_equal(harness_get(c, kept), NRECORDS);
    assert_int_equal(harness_get(c, gone), NRECORDS);
    once_client_close(c);
}

/* ---- oncectl ------------------------------------------------------------- */

static void
t_oncectl_compact(void **state)
{
    harness *h = *state;
    once_client *c = NULL;
    char out[4096], name[256];

    long_name(name, sizeof(name), 'o');
    assert_int_equal(harness_client(h, true, &c), ONCE_OK);
    (void)fill(c, name, 120000, 50);
    once_client_close(c);
    {
        const char *a[] = {"admin", "compact", "--wait", NULL};
        assert_int_equal(oncectl(h, NULL, out, sizeof(out), a), 0);
        HAS(out, "{\"already_running\":false,\"compactions_before\":0,"
                 "\"compactions\":1,\"disk_bytes\":");
        HAS(out, "\"waited_ms\":");
    }
    {
        const char *a[] = {"stats", NULL};
        assert_int_equal(oncectl(h, NULL, out, sizeof(out), a), 0);
        HAS(out, "\"records_stored\":50,");
        HAS(out, "\"compacting\":false,\"compactions\":1,\"disk_bytes\":");
    }
    {
        const char *a[] = {"admin", "compact", "--later", NULL};
        assert_int_equal(oncectl(h, NULL, out, sizeof(out), a), 2);
        HAS(out, "\"reason\":\"USAGE\"");
    }
    {
        const char *a[] = {"admin", NULL};
        assert_int_equal(oncectl(h, NULL, out, sizeof(out), a), 2);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(t_compact_after_reclaim, setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(t_compact_permission, setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(t_sigterm_while_compacting, setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(t_sigkill_while_compacting, setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(t_oncectl_compact, setup,
                                        harness_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
