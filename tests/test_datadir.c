/*
 * test_datadir.c — a data folder that is not a complete onced store is
 * never reopened as an empty one, and damaged data is never served
 * (store/datadir.c, store/store.c), against a real onced and real files.
 *
 * Owns: data folders changed between runs of onced the way an unlucky
 * operator or a failing disk would: CURRENT removed, the identity file
 * removed or rewritten, unknown files, and bytes really flipped in a
 * LevelDB table after Admin.Compact wrote one.
 * Invariant: onced is stopped (SIGTERM, waited for) before a file is
 * touched, except for the flipped bytes, which are written while onced
 * runs, as a failing disk would; every wait is bounded.
 * Never: accepts a wrong answer: every retry of an acknowledged rpc id is
 * its stored result or DATA_LOSS.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/harness.h"

#define INCR    "/once.v1.Counter/Increment"
#define CALL_MS 5000
#define NCALLS  60
#define POLL_MS 30000

/* ---- small helpers -------------------------------------------------------
 */

typedef struct reply {
    int rv; /* 0, or the nng error when no reply came */
    int code;
    char reason[64];
    bool replayed;
    int64_t value; /* IncrementResponse.value when OK */
} reply;

/* Increment(name, 1) as (cid, seq), raw, sent once. */
static reply
incr_once(const harness *h, uint64_t cid, uint64_t seq, const char *name)
{
    Once__V1__Response *resp = NULL;
    uint8_t *pl = NULL, *env = NULL;
    size_t plen, elen;
    reply out;

    memset(&out, 0, sizeof(out));
    out.value = -1;
    if (harness_incr_payload(name, 1, &pl, &plen) != 0 ||
        harness_envelope(INCR, cid, seq, pl, plen, &env, &elen) != 0) {
        out.rv = -1;
    } else {
        out.rv = harness_raw_rpc(h->url, env, elen, &resp, CALL_MS);
    }
    free(pl);
    free(env);
    if (out.rv != 0) {
        return out;
    }
    out.code = resp->status != NULL ? (int)resp->status->code : 0;
    if (resp->status != NULL && resp->status->reason != NULL) {
        snprintf(out.reason, sizeof(out.reason), "%s", resp->status->reason);
    }
    out.replayed = resp->replayed;
    if (out.code == ONCE__V1__CODE__OK) {
        Once__V1__IncrementResponse *v = once__v1__increment_response__unpack(
            NULL, resp->payload.len, resp->payload.data);
        if (v != NULL) {
            out.value = v->value;
            once__v1__increment_response__free_unpacked(v, NULL);
        }
    }
    once__v1__response__free_unpacked(resp, NULL);
    return out;
}

/* incr_once, sent again under the same id, 200 ms apart, while no reply came
 * back: a loaded machine can outlast CALL_MS, and onced's ipc listener may
 * be listening again (its watch, after a hang-up mid-handshake), refusing
 * connections for a moment. A retry of the id is what a client does, and
 * its answer is the first one. Every call of the tests goes through
 * here: an unanswered one fails the test, never passes for an OK (a
 * zeroed reply's code is OK). */
static reply
incr(const harness *h, uint64_t cid, uint64_t seq, const char *name)
{
    reply r = incr_once(h, cid, seq, name);

    for (int i = 0; i < 10 && r.rv != 0; i++) {
        harness_sleep_ms(200);
        r = incr_once(h, cid, seq, name);
    }
    assert_int_equal(r.rv, 0);
    return r;
}

/* A lease of its own (long TTL, nothing renews it) for raw calls. */
static uint64_t
lease(const harness *h)
{
    once_client *a = NULL;
    once_status st;
    uint64_t cid = 0, granted = 0;

    assert_int_equal(harness_client(h, true, &a), ONCE_OK);
    assert_int_equal(once_lease_open(a, NULL, 600000, &cid, &granted, &st),
                     ONCE_OK);
    once_client_close(a);
    assert_int_not_equal(cid, 0);
    return cid;
}

/* Where the current phase's lines start in onced's log: the log is
 * appended to across restarts, so a check reads only what the onced of its
 * own phase wrote (restart() moves the mark). */
static long log_from;

/* Whether onced's log holds text since the last restart(). */
static bool
log_has(const harness *h, const char *text)
{
    FILE *f = fopen(h->log, "r");
    char line[4096];
    bool found = false;

    assert_non_null(f);
    assert_int_equal(fseek(f, log_from, SEEK_SET), 0);
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        found = strstr(line, text) != NULL;
    }
    fclose(f);
    return found;
}

/* A new onced in a new folder (harness_no_gc), its log read from the
 * start. */
static int
start(harness **hp)
{
    log_from = 0;
    return harness_start_args(hp, harness_no_gc);
}

/* harness_restart, after marking the end of the log so far: log_has then
 * reads only the new onced's lines. */
static int
restart(harness *h)
{
    struct stat sb;

    log_from = stat(h->log, &sb) == 0 ? (long)sb.st_size : 0;
    return harness_restart(h);
}

static void
path_in(const harness *h, const char *name, char *out, size_t cap)
{
    assert_true((size_t)snprintf(out, cap, "%s/%s", h->data, name) < cap);
}

/* Reads a whole small file into buf; returns its length. */
static size_t
slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    size_t n;

    assert_non_null(f);
    n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
    return n;
}

static void
spit(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

static void
stop(harness *h)
{
    assert_int_equal(harness_stop(h), 0);
}

/* ---- CURRENT removed -----------------------------------------------------
 */

/* The case: remove CURRENT and restart. onced used to make an
 * empty store there (deleting the old tables) and run an acknowledged rpc
 * id again; now it refuses, says what is missing and what to do, and
 * leaves the files alone, so putting CURRENT back recovers everything. */
static void
test_missing_current_refused(void **state)
{
    harness *h = NULL;
    char cur[512], saved[256];
    uint64_t cid;
    reply r;
    struct stat sb;

    (void)state;
    assert_int_equal(start(&h), 0);
    cid = lease(h);
    r = incr(h, cid, 1, "acked");
    assert_int_equal(r.code, ONCE__V1__CODE__OK);
    r = incr(h, cid, 2, "acked");
    assert_int_equal(r.code, ONCE__V1__CODE__OK);
    assert_int_equal(r.value, 2);
    stop(h);

    path_in(h, "CURRENT", cur, sizeof(cur));
    slurp(cur, saved, sizeof(saved));
    assert_int_equal(unlink(cur), 0);
    assert_int_equal(restart(h), -1); /* refused, exited */
    assert_true(log_has(h, "the file CURRENT is missing"));
    assert_true(log_has(h, "Restore the folder from a backup"));
    /* Nothing was created or deleted: no CURRENT, the manifest it named
     * is still there. */
    assert_int_not_equal(stat(cur, &sb), 0);
    {
        char man[512], name[128];
        snprintf(name, sizeof(name), "%.*s", (int)strcspn(saved, "\n"), saved);
        path_in(h, name, man, sizeof(man));
        assert_int_equal(stat(man, &sb), 0);
    }

    /* Restored: the stored result comes back, nothing runs twice. */
    spit(cur, saved);
    assert_int_equal(restart(h), 0);
    r = incr(h, cid, 2, "acked");
    assert_int_equal(r.code, ONCE__V1__CODE__OK);
    assert_true(r.replayed);
    assert_int_equal(r.value, 2);
    r = incr(h, cid, 3, "acked");
    assert_int_equal(r.code, ONCE__V1__CODE__OK);
    assert_int_equal(r.value, 3);
    stop(h);
    harness_free(h);
}

/* Has onced compact (Admin.Compact) and waits until it has finished: the
 * log's records are then in a table file. */
static void
compact_now(const harness *h)
{
    once_client *c = NULL;
    Once__V1__StatsResponse *s = NULL;
    once_status st;

    assert_int_equal(harness_client(h, true, &c), ONCE_OK);
    assert_int_equal(once_admin_compact(c, NULL, NULL, &st), ONCE_OK);
    for (int i = 0; i < POLL_MS / 20; i++) {
        assert_int_equal(harness_stats_all(c, &s), ONCE_OK);
        if (!s->compacting && s->compactions >= 1) {
            break;
        }
        once__v1__stats_response__free_unpacked(s, NULL);
        s = NULL;
        harness_sleep_ms(20);
    }
    assert_non_null(s);
    once__v1__stats_response__free_unpacked(s, NULL);
    once_client_close(c);
}

/* The first file of the data folder whose name ends in suffix, into
 * path; false when none. */
static bool
find_file(const harness *h, const char *suffix, char *path, size_t cap)
{
    DIR *d = opendir(h->data);
    struct dirent *e;
    bool found = false;

    assert_non_null(d);
    while (!found && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name), k = strlen(suffix);
        if (n >= k && strcmp(e->d_name + n - k, suffix) == 0) {
            path_in(h, e->d_name, path, cap);
            found = true;
        }
    }
    closedir(d);
    return found;
}

/* A table file or the manifest gone (CURRENT still there): LevelDB's own
 * checks refuse it, and onced says the store is damaged and to restore
 * it, instead of hinting at a lock or permissions. */
static void
test_missing_table_or_manifest_refused(void **state)
{
    harness *h = NULL;
    char p[512], saved[600];
    uint64_t cid;
    reply r;

    (void)state;
    assert_int_equal(start(&h), 0);
    cid = lease(h);
    r = incr(h, cid, 1, "t");
    assert_int_equal(r.code, ONCE__V1__CODE__OK);
    compact_now(h);
    stop(h);

    assert_true(find_file(h, ".ldb", p, sizeof(p)));
    snprintf(saved, sizeof(saved), "%s.aside", p);
    assert_int_equal(rename(p, saved), 0);
    assert_int_equal(restart(h), -1);
    assert_true(log_has(h, "is damaged"));
    assert_true(log_has(h, "restore the whole folder from a backup"));
    assert_int_equal(rename(saved, p), 0);

    path_in(h, "CURRENT", p, sizeof(p));
    slurp(p, saved, sizeof(saved));
    saved[strcspn(saved, "\n")] = '\0';
    path_in(h, saved, p, sizeof(p));
    assert_int_equal(unlink(p), 0); /* the manifest CURRENT names */
    assert_int_equal(restart(h), -1);
    assert_false(log_has(h, "is another onced using it"));
    harness_free(h);
}

/* ---- the identity file -----------------------------------------------------
 */

/* Created with the store; a store without it (made before identity
 * files, or a creation cut short) is completed with the same id; one that
 * names another store is refused. */
static void
test_identity_file(void **state)
{
    harness *h = NULL;
    char idp[512], first[512], again[512], *id;
    uint64_t cid;
    reply r;

    (void)state;
    assert_int_equal(start(&h), 0);
    path_in(h, "once-store", idp, sizeof(idp));
    slurp(idp, first, sizeof(first));
    assert_non_null(strstr(first, "once-store 1\n"));
    assert_non_null(id = strstr(first, "\nid "));
    cid = lease(h);
    r = incr(h, cid, 1, "x");
    assert_int_equal(r.code, ONCE__V1__CODE__OK);
    stop(h);

    /* Removed: written again with the id LevelDB holds. */
    assert_int_equal(unlink(idp), 0);
    assert_int_equal(restart(h), 0);
    slurp(idp, again, sizeof(again));
    assert_int_equal(strncmp(strstr(again, "\nid "), id, 4 + 32), 0);
    stop(h);

    /* Another store's id: refused, and the file is left as it is. */
    spit(idp, "once-store 1\nid 0123456789abcdef0123456789abcdef\n");
    assert_int_equal(restart(h), -1);
    assert_true(log_has(h, "is not the store its identity file"));
    slurp(idp, again, sizeof(again));
    assert_non_null(strstr(again, "0123456789abcdef0123456789abcdef"));

    /* A damaged file: refused. */
    spit(idp, "once-store 1\nid nonsense\n");
    assert_int_equal(restart(h), -1);
    assert_true(log_has(h, "once-store is damaged"));

    /* The right one back: the stored result replays. */
    spit(idp, first);
    assert_int_equal(restart(h), 0);
    r = incr(h, cid, 1, "x");
    assert_true(r.replayed);
    assert_int_equal(r.value, 1);
    stop(h);
    harness_free(h);
}

/* A folder with unknown files is not made into a store; one with only
 * configuration (principals written by oncectl before the first start)
 * is. */
static void
test_creates_only_in_empty_folder(void **state)
{
    harness *h = NULL;
    char p[512];
    DIR *d;
    struct dirent *e;

    (void)state;
    assert_int_equal(start(&h), 0);
    stop(h);
    /* Empty the folder, then leave one unknown file in it. */
    assert_non_null(d = opendir(h->data));
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.') {
            path_in(h, e->d_name, p, sizeof(p));
            assert_int_equal(unlink(p), 0);
        }
    }
    closedir(d);
    path_in(h, "notes.txt", p, sizeof(p));
    spit(p, "mine\n");
    assert_int_equal(restart(h), -1);
    assert_true(log_has(h, "is not empty (it holds notes.txt)"));
    assert_int_equal(unlink(p), 0);

    /* Only a principals file (oncectl principal add): created. */
    harness_add_principal(h, "op", "operator");
    assert_int_equal(restart(h), 0);
    assert_true(log_has(h, "created store"));
    stop(h);
    harness_free(h);
}

/* ---- flipped bytes in a table ------------------------------------------
 */

/* Flips one byte at off of path. */
static void
flip(const char *path, off_t off)
{
    int fd = open(path, O_RDWR);
    unsigned char b;

    assert_true(fd >= 0);
    assert_int_equal(pread(fd, &b, 1, off), 1);
    b ^= 0x5a;
    assert_int_equal(pwrite(fd, &b, 1, off), 1);
    assert_int_equal(fsync(fd), 0);
    close(fd);
}

/* Finds the first occurrence of what in the .ldb files of the data
 * folder: its file into path, its offset returned; -1 when none holds
 * it. */
static off_t
find_in_tables(const harness *h, const char *what, char *path, size_t cap)
{
    size_t wl = strlen(what);
    DIR *d = opendir(h->data);
    struct dirent *e;
    off_t found = -1;

    assert_non_null(d);
    while (found < 0 && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        static char buf[8 << 20];
        size_t len;
        FILE *f;

        if (n < 4 || strcmp(e->d_name + n - 4, ".ldb") != 0) {
            continue;
        }
        path_in(h, e->d_name, path, cap);
        assert_non_null(f = fopen(path, "rb"));
        len = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        for (size_t i = 0; i + wl <= len; i++) {
            if (memcmp(buf + i, what, wl) == 0) {
                found = (off_t)i;
                break;
            }
        }
    }
    closedir(d);
    return found;
}

/* Every retry of an rpc id that ran is its stored result or DATA_LOSS,
 * never a conflict or another value; returns how many were DATA_LOSS. */
static int
retry_all(const harness *h, uint64_t cid)
{
    int lost = 0;

    for (uint64_t seq = 1; seq <= NCALLS; seq++) {
        char name[32];
        reply r;

        snprintf(name, sizeof(name), "n%03llu", (unsigned long long)seq);
        r = incr(h, cid, seq, name);
        if (r.code == ONCE__V1__CODE__DATA_LOSS) {
            assert_string_equal(r.reason, "DATA_CORRUPT");
            lost++;
            continue;
        }
        if (r.code != ONCE__V1__CODE__OK || !r.replayed || r.value != 1) {
            print_error("seq %llu: code %d reason %s replayed %d value %lld\n",
                        (unsigned long long)seq, r.code, r.reason,
                        (int)r.replayed, (long long)r.value);
            fail();
        }
    }
    return lost;
}

/* The case: a flipped byte in a table used to be served (a
 * record's method name changed and a legitimate retry was refused
 * RPC_ID_CONFLICT). With checksums verified on every read, the calls
 * that need the damaged block end DATA_LOSS, with a log line. */
static void
test_flipped_byte_data_loss(void **state)
{
    harness *h = NULL;
    char table[512];
    uint64_t cid;
    off_t at;
    int lost;

    (void)state;
    assert_int_equal(start(&h), 0);
    cid = lease(h);
    for (uint64_t seq = 1; seq <= NCALLS; seq++) {
        char name[32];
        reply r;
        snprintf(name, sizeof(name), "n%03llu", (unsigned long long)seq);
        r = incr(h, cid, seq, name);
        assert_int_equal(r.code, ONCE__V1__CODE__OK);
        assert_int_equal(r.value, 1);
    }
    compact_now(h); /* the records leave the log for a table file */

    /* The first stored method name in a table: the first record's. */
    at = find_in_tables(h, INCR, table, sizeof(table));
    assert_true(at >= 0);
    flip(table, at + 10);

    lost = retry_all(h, cid);
    assert_true(lost >= 1);
    assert_true(log_has(h, "answered DATA_LOSS"));
    assert_true(log_has(h, "Corruption"));
    stop(h);

    /* Restarted, onced either refuses the damaged store at start-up,
     * saying so, or answers as above: never a wrong answer. */
    if (restart(h) != 0) {
        assert_true(log_has(h, "damaged"));
    } else {
        assert_true(retry_all(h, cid) >= 1);
        stop(h);
    }
    harness_free(h);
}

/* ---- the store went backwards --------------------------------------------
 */

#define BACK_CALLS 300

/* 300 acknowledged increments of one counter, Admin.Compact after the
 * first 200, SIGTERM: the last 100 are only in LevelDB's .log. */
static uint64_t
back_prepare(harness *h)
{
    uint64_t cid = lease(h);

    for (uint64_t seq = 1; seq <= BACK_CALLS; seq++) {
        reply r = incr(h, cid, seq, "back");
        assert_int_equal(r.code, ONCE__V1__CODE__OK);
        assert_int_equal(r.value, (int64_t)seq);
        if (seq == 200) {
            compact_now(h);
        }
    }
    stop(h);
    return cid;
}

/* The end of the second-to-last whole record of a LevelDB log (7-byte
 * headers: checksum, length, type; 32 KiB blocks). */
static off_t
log_record_boundary(const char *path)
{
    static unsigned char buf[8 << 20];
    FILE *f = fopen(path, "rb");
    size_t len, off = 0;
    off_t last = 0, prev = 0;

    assert_non_null(f);
    len = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    while (off + 7 <= len) {
        size_t left = 32768 - off % 32768, n;
        if (left < 7) {
            off += left;
            continue;
        }
        n = (size_t)buf[off + 4] | (size_t)buf[off + 5] << 8;
        if (n == 0 && buf[off + 6] == 0) {
            break;
        }
        off += 7 + n;
        if (buf[off - n - 1] == 1 || buf[off - n - 1] == 4) { /* FULL, LAST */
            prev = last;
            last = (off_t)off;
        }
    }
    return prev;
}

/* Damages the .log by how (0: deleted, 1: cut at a record boundary, 2: 50
 * bytes cut mid-record); onced must refuse, saying how many commits were
 * lost, and nothing executes twice. */
static void
back_case(int how)
{
    harness *h = NULL;
    char log[512];
    struct stat sb;

    assert_int_equal(start(&h), 0);
    (void)back_prepare(h);
    assert_true(find_file(h, ".log", log, sizeof(log)));
    assert_int_equal(stat(log, &sb), 0);
    if (how == 0) {
        assert_int_equal(unlink(log), 0);
    } else {
        off_t to = how == 1 ? log_record_boundary(log) : sb.st_size - 50;
        assert_true(to > 0 && to < sb.st_size);
        assert_int_equal(truncate(log, to), 0);
    }
    assert_int_equal(restart(h), -1); /* refused, exited */
    assert_true(log_has(h, "acknowledged commits"));
    assert_true(log_has(h, "restore the whole folder from a backup"));
    /* The refusal left the bound as it was: refused again. */
    assert_int_equal(restart(h), -1);
    harness_free(h);
}

static void
test_log_deleted_refused(void **state)
{
    (void)state;
    back_case(0);
}

static void
test_log_cut_at_record_refused(void **state)
{
    (void)state;
    back_case(1);
}

static void
test_log_cut_mid_record_refused(void **state)
{
    (void)state;
    back_case(2);
}

/* Deleting the sidecar is not a refusal (it cannot be told from a store
 * made before it existed): it is written again from the store's counter,
 * and a clean restart serves the stored results. */
static void
test_committed_sidecar_rewritten(void **state)
{
    harness *h = NULL;
    char p[512], text[256];
    uint64_t cid;
    reply r;

    (void)state;
    assert_int_equal(start(&h), 0);
    cid = lease(h);
    r = incr(h, cid, 1, "side");
    assert_int_equal(r.code, ONCE__V1__CODE__OK);
    stop(h);
    path_in(h, "once-committed", p, sizeof(p));
    slurp(p, text, sizeof(text));
    assert_non_null(strstr(text, "committed "));
    assert_int_equal(unlink(p), 0);
    assert_int_equal(restart(h), 0);
    slurp(p, text, sizeof(text));
    assert_non_null(strstr(text, "committed "));
    r = incr(h, cid, 1, "side");
    assert_true(r.replayed);
    assert_int_equal(r.value, 1);
    stop(h);
    harness_free(h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_current_refused),
        cmocka_unit_test(test_missing_table_or_manifest_refused),
        cmocka_unit_test(test_identity_file),
        cmocka_unit_test(test_creates_only_in_empty_folder),
        cmocka_unit_test(test_flipped_byte_data_loss),
        cmocka_unit_test(test_log_deleted_refused),
        cmocka_unit_test(test_log_cut_at_record_refused),
        cmocka_unit_test(test_log_cut_mid_record_refused),
        cmocka_unit_test(test_committed_sidecar_rewritten),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
