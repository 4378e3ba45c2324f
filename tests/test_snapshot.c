/*
 * test_snapshot.c — `oncectl admin backup DIR` (Admin.Snapshot,
 * store/snapshot.c, store/load.c) against a live embedded onced under
 * concurrent writes, and the folders it makes.
 *
 * Owns: the consistency check of a backup: four clients increment their
 * own counter while backups are taken in many small chunks; in each
 * backup, for every client, the greatest result among its retained
 * Increment completion records equals its counter. (The record of a
 * client's latest increment is never reclaimed while the client runs: only
 * a later call acknowledges it, and that call's own record would be the
 * greatest. So a copy holding an effect without its record, or a record
 * without its effect — chunks read from different moments — breaks the
 * equality.) The backup opens (store_open) and a real onced serves it.
 * Invariant: every wait is bounded; workers never call cmocka assertions.
 * Never: reads the backup before oncectl has exited.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/once.pb-c.h"
#include "proto/wire.h"
#include "store/records.h"
#include "store/store.h"
#include "tests/harness.h"

#define WORKERS 4
#define BACKUPS 3

extern char **environ;

typedef struct worker {
    const char *url;
    int index;
    _Atomic uint64_t client_id;
    atomic_long calls;
    atomic_bool *stop;
    char error[600];
    pthread_t thread;
} worker;

static void *
worker_main(void *arg)
{
    worker *w = arg;
    once_client *c = NULL;
    once_options o;
    once_status st;
    char name[16];

    snprintf(name, sizeof(name), "w%d", w->index);
    once_options_init(&o);
    o.url = w->url;
    o.deadline_ms = 10000;
    if (once_client_open(&c, &o, &st) != ONCE_OK) {
        snprintf(w->error, sizeof(w->error), "open: %s", st.message);
        return NULL;
    }
    for (int i = 0; i < 100000 && !atomic_load(w->stop); i++) {
        once_rpc_id id = {0, 0};
        int64_t v;
        if (once_counter_incr_new(c, name, 1, &id, &v, &st) != ONCE_OK) {
            snprintf(w->error, sizeof(w->error), "incr: %s %s", st.reason,
                     st.message);
            break;
        }
        atomic_store(&w->client_id, id.client_id);
        atomic_fetch_add(&w->calls, 1);
    }
    once_client_close(c);
    return NULL;
}

typedef struct check {
    const worker *ws;
    int64_t max_result[WORKERS];
    size_t records;
} check;

static int
check_record(void *arg, const char *key, size_t klen, const char *val,
             size_t vlen)
{
    check *k = arg;
    uint64_t client;
    record *r;
    Once__V1__IncrementResponse *resp;

    if (klen != RECORD_KEY_LEN) {
        return 0;
    }
    client = wire_get_be64((const uint8_t *)key + 2);
    assert_non_null(r = once__store__v1__completion_record__unpack(
                        NULL, vlen, (const uint8_t *)val));
    k->records++;
    if (strcmp(r->method, "/once.v1.Counter/Increment") == 0 && r->code == 0) {
        assert_non_null(resp = once__v1__increment_response__unpack(
                            NULL, r->payload.len, r->payload.data));
        for (int i = 0; i < WORKERS; i++) {
            if (atomic_load(&k->ws[i].client_id) == client &&
                resp->value > k->max_result[i]) {
                k->max_result[i] = resp->value;
            }
        }
        once__v1__increment_response__free_unpacked(resp, NULL);
    }
    records_free(r);
    return 0;
}

static int64_t
counter_in(store *st, int i)
{
    store_txn *t = store_txn_begin(st);
    char key[16], *v = NULL;
    size_t vlen = 0;
    int64_t value = 0;

    snprintf(key, sizeof(key), "c/w%d", i);
    if (store_txn_get(t, key, strlen(key), &v, &vlen) == 0 && vlen == 8) {
        value = (int64_t)wire_get_be64((const uint8_t *)v);
    }
    free(v);
    store_txn_abort(t);
    return value;
}

/* Opens the backup in dir and checks every worker's counter against its
 * records; returns the sum of the counters. */
static int64_t
check_backup(const char *dir, const worker *ws)
{
    check k = {.ws = ws};
    store *st = NULL;
    char *err = NULL;
    int64_t sum = 0;

    if (store_open(&st, dir, &err) != 0) {
        fail_msg("the backup %s does not open: %s", dir, err);
    }
    assert_int_equal(store_scan(st, "r/", 2, check_record, &k), 0);
    for (int i = 0; i < WORKERS; i++) {
        int64_t c = counter_in(st, i);
        if (c != k.max_result[i]) {
            fail_msg("backup %s: counter w%d is %lld but its latest record "
                     "says %lld: effects and records are from different "
                     "moments",
                     dir, i, (long long)c, (long long)k.max_result[i]);
        }
        sum += c;
    }
    store_close(st);
    fprintf(stderr, "%s: counters sum %lld, %zu records\n", dir, (long long)sum,
            k.records);
    return sum;
}

static long
calls_so_far(const worker *ws)
{
    long n = 0;
    for (int i = 0; i < WORKERS; i++) {
        n += atomic_load(&ws[i].calls);
    }
    return n;
}

/* Backups taken in 256-byte chunks (many requests, writes between them)
 * while four clients increment: each is consistent and opens. Fails on a
 * snapshot.c that reads each chunk from the live store instead of the
 * pinned snapshot (checked by hand: a counter ahead of its latest
 * record). */
static void
test_backup_consistent_under_writes(void **state)
{
    harness *h = NULL;
    worker ws[WORKERS];
    atomic_bool stop = false;
    char dir[BACKUPS][400], out[1024], chunk[] = "256";
    int64_t sums[BACKUPS];

    (void)state;
    assert_int_equal(harness_start(&h), 0);
    memset(ws, 0, sizeof(ws));
    for (int i = 0; i < WORKERS; i++) {
        ws[i].url = h->url;
        ws[i].index = i;
        ws[i].stop = &stop;
        assert_int_equal(
            pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]), 0);
    }
    for (int b = 0; b < BACKUPS; b++) {
        const char *args[] = {"admin",         "backup", dir[b],
                              "--chunk-bytes", chunk,    NULL};
        long before = calls_so_far(ws);

        for (int n = 0; n < 500 && calls_so_far(ws) < before + 50; n++) {
            harness_sleep_ms(10);
        }
        snprintf(dir[b], sizeof(dir[b]), "%s/backup%d", h->dir, b);
        if (harness_oncectl(h, NULL, out, sizeof(out), NULL, args) != 0) {
            fail_msg("oncectl admin backup failed: %s", out);
        }
        assert_non_null(strstr(out, "\"log_index\":0"));
        fprintf(stderr, "%s", out);
    }
    atomic_store(&stop, true);
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(ws[i].thread, NULL);
        assert_string_equal(ws[i].error, "");
    }
    for (int b = 0; b < BACKUPS; b++) {
        sums[b] = check_backup(dir[b], ws);
        assert_true(sums[b] > 0);
        assert_true(b == 0 || sums[b] >= sums[b - 1]);
    }
    /* A folder holding onced data is refused. */
    {
        const char *args[] = {"admin", "backup", dir[0], NULL};
        assert_int_not_equal(
            harness_oncectl(h, NULL, out, sizeof(out), NULL, args), 0);
        assert_non_null(strstr(out, "BAD_FOLDER"));
    }
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

/* The documented restore (docs/operations.md): `onced --data BACKUP`
 * serves the backup's values, and rpc ids go on from there. */
static void
test_restore_serves_backup(void **state)
{
    harness *h = NULL;
    once_client *c = NULL;
    once_options o;
    once_status st;
    char dir[400], url[450], out[1024];
    const char *args[] = {"admin", "backup", dir, NULL};
    int64_t v = -1;
    pid_t pid;
    int status;

    (void)state;
    assert_int_equal(harness_start(&h), 0);
    once_options_init(&o);
    o.url = h->url;
    assert_int_equal(once_client_open(&c, &o, &st), ONCE_OK);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(once_counter_incr_new(c, "c", 1, NULL, &v, &st),
                         ONCE_OK);
    }
    once_client_close(c);
    snprintf(dir, sizeof(dir), "%s/backup", h->dir);
    assert_int_equal(harness_oncectl(h, NULL, out, sizeof(out), NULL, args), 0);
    assert_int_equal(harness_stop(h), 0);
    {
        char *argv[] = {(char *)ONCED_PATH, "--data", dir,
                        "--listen",         url,      NULL};
        snprintf(url, sizeof(url), "ipc://%s/restored.ipc", h->dir);
        assert_int_equal(
            posix_spawn(&pid, ONCED_PATH, NULL, NULL, argv, environ), 0);
    }
    once_options_init(&o);
    o.url = url;
    o.deadline_ms = 20000;
    assert_int_equal(once_client_open(&c, &o, &st), ONCE_OK);
    assert_int_equal(once_counter_get(c, "c", &v, &st), ONCE_OK);
    assert_int_equal(v, 5);
    assert_int_equal(once_counter_incr_new(c, "c", 1, NULL, &v, &st), ONCE_OK);
    assert_int_equal(v, 6);
    once_client_close(c);
    kill(pid, SIGTERM);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    harness_free(h);
}

/* Sends one Admin.Snapshot request; returns the status code, the reason
 * in reason, and the reply (if out) unpacked. */
static int
snap_rpc(const harness *h, uint64_t id, const char *after, uint32_t max_bytes,
         char *reason, size_t rlen, Once__V1__SnapshotResponse **out)
{
    Once__V1__SnapshotRequest req = ONCE__V1__SNAPSHOT_REQUEST__INIT;
    Once__V1__Response *r = NULL;
    uint8_t payload[256], *env = NULL;
    size_t plen, elen = 0;
    int code;

    req.snapshot_id = id;
    req.after_key.data = (uint8_t *)after;
    req.after_key.len = after != NULL ? strlen(after) : 0;
    req.max_bytes = max_bytes;
    plen = protobuf_c_message_pack(&req.base, payload);
    assert_int_equal(harness_envelope("/once.v1.Admin/Snapshot", 0, 0, payload,
                                      plen, &env, &elen),
                     0);
    assert_int_equal(harness_raw_rpc(h->url, env, elen, &r, 5000), 0);
    free(env);
    code = r->status != NULL ? (int)r->status->code : 0;
    snprintf(reason, rlen, "%s", r->status != NULL ? r->status->reason : "");
    if (out != NULL) {
        *out = code == 0 ? once__v1__snapshot_response__unpack(
                               NULL, r->payload.len, r->payload.data)
                         : NULL;
    }
    once__v1__response__free_unpacked(r, NULL);
    return code;
}

/* Hostile or stale Admin.Snapshot requests get a code and a reason, and
 * onced goes on serving: an id it does not hold, a chunk size over the
 * limit, after_key without an id, a fifth pinned snapshot; a finished
 * snapshot's id is gone. */
static void
test_snapshot_refusals(void **state)
{
    harness *h = NULL;
    Once__V1__SnapshotResponse *r = NULL;
    char reason[64];
    uint64_t ids[4];

    (void)state;
    assert_int_equal(harness_start(&h), 0);
    {
        once_client *c = NULL;
        once_options o;
        once_status st;
        once_options_init(&o);
        o.url = h->url;
        assert_int_equal(once_client_open(&c, &o, &st), ONCE_OK);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(once_counter_incr_new(c, "c", 1, NULL, NULL, &st),
                             ONCE_OK);
        }
        once_client_close(c);
    }
    assert_int_equal(snap_rpc(h, 12345, "c/x", 0, reason, sizeof(reason), NULL),
                     ONCE__V1__CODE__NOT_FOUND);
    assert_string_equal(reason, "NO_SNAPSHOT");
    assert_int_equal(
        snap_rpc(h, 0, NULL, 3u << 20, reason, sizeof(reason), NULL),
        ONCE__V1__CODE__INVALID_ARGUMENT);
    assert_string_equal(reason, "BAD_LIMIT");
    assert_int_equal(snap_rpc(h, 0, "c/x", 0, reason, sizeof(reason), NULL),
                     ONCE__V1__CODE__INVALID_ARGUMENT);
    assert_string_equal(reason, "BAD_SNAPSHOT");
    for (int i = 0; i < 4; i++) {
        /* One pair per chunk: not done, so each stays pinned. */
        assert_int_equal(snap_rpc(h, 0, NULL, 1, reason, sizeof(reason), &r),
                         0);
        assert_false(r->done);
        ids[i] = r->snapshot_id;
        once__v1__snapshot_response__free_unpacked(r, NULL);
    }
    assert_int_equal(snap_rpc(h, 0, NULL, 0, reason, sizeof(reason), NULL),
                     ONCE__V1__CODE__RESOURCE_EXHAUSTED);
    assert_string_equal(reason, "SNAPSHOTS_BUSY");
    /* Reading the first to its end releases it; its id is gone. */
    assert_int_equal(snap_rpc(h, ids[0], "", 0, reason, sizeof(reason), &r), 0);
    assert_true(r->done);
    once__v1__snapshot_response__free_unpacked(r, NULL);
    assert_int_equal(snap_rpc(h, ids[0], NULL, 0, reason, sizeof(reason), NULL),
                     ONCE__V1__CODE__NOT_FOUND);
    assert_int_equal(snap_rpc(h, 0, NULL, 0, reason, sizeof(reason), &r), 0);
    assert_true(r->done);
    once__v1__snapshot_response__free_unpacked(r, NULL);
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backup_consistent_under_writes),
        cmocka_unit_test(test_restore_serves_backup),
        cmocka_unit_test(test_snapshot_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
