/*
 * test_consumer.c — libonce's receiver loop (client/consumer.c,
 * once_consumer_run_opts) against a real onced, with Acks deferred
 * (ack_every 4), while the receiver is SIGKILLed again and again.
 *
 * Owns the check that deferred Acks lose and duplicate nothing: the
 * receiver (consumer_driver.c) stores each batch's effects and offset in
 * one synced write of its own LevelDB (pattern 1 of docs/outbox.md) and
 * starts again with that offset as `after`; after KILLS kills at
 * different points (just before a batch's commit, or after it) and a
 * last run to the end, its store must hold every
 * offset 1..EVENTS exactly once, and onced's cursor must be at EVENTS.
 * At least one kill must have found the cursor behind the stored offset
 * (committed events not yet acknowledged) and at least one run must have
 * acknowledged before its kill, or the test did not exercise what it is
 * for.
 * Invariant: every wait is bounded and waits for a condition (a progress
 * line, an exit).
 * Never: mocks onced or the store; decides an outcome by a fixed sleep.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <leveldb/c.h>
#include <once/kv.h>
#include <once/outbox.h>

#include "tests/harness.h"

#define TOPIC     "tc"
#define CONSUMER  "recv"
#define EVENTS    1000
#define KILLS     20
#define ACK_EVERY "4"
#define MAX       "7"
#define WAIT_MS   20000 /* for a progress line or an exit */

/* EVENTS KV Txns, each emitting one event on TOPIC. */
static void
produce_all(const harness *h)
{
    once_client *c = NULL;
    once_status st;

    assert_int_equal(harness_client(h, false, &c), ONCE_OK);
    assert_int_equal(once_outbox_subscribe(c, TOPIC, CONSUMER, NULL, NULL, &st),
                     ONCE_OK);
    for (int i = 1; i <= EVENTS; i++) {
        once_kv_txn *t = NULL;
        char v[16];

        snprintf(v, sizeof(v), "%d", i);
        assert_int_equal(once_kv_txn_new(&t), ONCE_OK);
        assert_int_equal(once_kv_txn_emit(t, ONCE_KV_THEN, TOPIC, v, strlen(v)),
                         ONCE_OK);
        assert_int_equal(once_kv_txn_exec(c, t, NULL, &st), ONCE_OK);
        once_kv_txn_free(t);
    }
    once_client_close(c);
}

/* The driver on store; its pid, *fd the read end of its stdout. */
static pid_t
drive_start(const harness *h, const char *store, int *fd)
{
    int p[2];
    pid_t pid;
    char stop[16];

    snprintf(stop, sizeof(stop), "%d", EVENTS);
    assert_int_equal(pipe(p), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execl(CONSUMER_DRIVER, "consumer_driver", h->url, TOPIC, CONSUMER,
              store, ACK_EVERY, MAX, stop, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    *fd = p[0];
    return pid;
}

/* Reads progress lines from fd until `lines` more came ("b N" just
 * before a batch's commit, "N" after it); *last the offset of the last
 * commit seen. False at EOF or after WAIT_MS. */
static bool
progress(int fd, int lines, uint64_t *last)
{
    int64_t end = harness_now_ms() + WAIT_MS;
    char buf[64];
    size_t n = 0;

    while (lines > 0 && harness_now_ms() < end) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};

        if (poll(&pf, 1, 100) <= 0) {
            continue;
        }
        if (read(fd, buf + n, 1) <= 0) {
            return false;
        }
        if (buf[n] != '\n' && n < sizeof(buf) - 2) {
            n++;
            continue;
        }
        buf[n + 1] = '\0';
        if (buf[0] != 'b') {
            *last = strtoull(buf, NULL, 10);
        }
        n = 0;
        lines--;
    }
    return lines == 0;
}

/* The driver's exit status, waiting at most WAIT_MS (then -1). */
static int
drive_wait(pid_t pid)
{
    int64_t end = harness_now_ms() + WAIT_MS;
    int ws;

    while (harness_now_ms() < end) {
        if (waitpid(pid, &ws, WNOHANG) == pid) {
            return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
        }
        harness_sleep_ms(20);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &ws, 0);
    return -1;
}

/* onced's cursor of the consumer (a Read's acked). */
static uint64_t
cursor(const harness *h)
{
    once_client *c = NULL;
    once_outbox_batch *b = NULL;
    once_status st;
    uint64_t acked;

    assert_int_equal(harness_client(h, true, &c), ONCE_OK);
    assert_int_equal(once_outbox_read(c, TOPIC, CONSUMER, 1, 0, &b, &st),
                     ONCE_OK);
    acked = once_outbox_batch_acked(b);
    once_outbox_batch_free(b);
    once_client_close(c);
    return acked;
}

/* How many offsets of 1..EVENTS the store holds other than once; its
 * stored offset in *offset. */
static int
store_wrong(const char *store, uint64_t *offset)
{
    leveldb_options_t *lo = leveldb_options_create();
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    char *err = NULL, key[32];
    leveldb_t *db = leveldb_open(lo, store, &err);
    int wrong = 0;

    assert_non_null(db);
    *offset = 0;
    for (int i = 0; i <= EVENTS; i++) {
        size_t len = 0;
        char *v;

        snprintf(key, sizeof(key), i == 0 ? "offset" : "n/%d", i);
        v = leveldb_get(db, ro, key, strlen(key), &len, &err);
        if (i == 0) {
            char text[24] = "";
            memcpy(text, v != NULL ? v : "0",
                   v != NULL && len < sizeof(text) ? len : 1);
            *offset = strtoull(text, NULL, 10);
        } else if (v == NULL || len != 1 || v[0] != '1') {
            print_message("  offset %d applied %.*s times\n", i,
                          v != NULL ? (int)len : 1, v != NULL ? v : "0");
            wrong++;
        }
        leveldb_free(v);
    }
    leveldb_close(db);
    leveldb_readoptions_destroy(ro);
    leveldb_options_destroy(lo);
    return wrong;
}

static void
t_deferred_acks_across_kills(void **state)
{
    harness *h = *state;
    char store[320];
    uint64_t offset = 0, acked;
    /* Progress lines (two a batch) each run writes before its kill: odd,
     * just before a batch's commit; even, after it; before, at and past
     * the Ack every ACK_EVERY batches, most often about the batch that
     * is due one (where an Ack sent ahead of its commit loses it). */
    static const int lines[KILLS] = {3,  6, 7, 13, 5,  1, 7, 11, 6,  7,
                                     15, 5, 8, 7,  13, 9, 7, 6,  16, 5};
    uint64_t prev = 0;
    int lagged = 0, moved = 0, fd;
    pid_t pid;

    snprintf(store, sizeof(store), "%s/receiver", h->dir);
    produce_all(h);
    for (int k = 0; k < KILLS; k++) {
        uint64_t last = 0;

        pid = drive_start(h, store, &fd);
        assert_true(progress(fd, lines[k], &last));
        kill(pid, SIGKILL);
        assert_int_equal(drive_wait(pid), 128 + SIGKILL);
        close(fd);
        acked = cursor(h);
        lagged += acked < last;
        moved += acked > prev;
        prev = acked;
        print_message("  kill %d: stored at least %" PRIu64 ", cursor %" PRIu64
                      "\n",
                      k + 1, last, acked);
    }
    pid = drive_start(h, store, &fd);
    assert_int_equal(drive_wait(pid), 0);
    close(fd);
    assert_int_equal(store_wrong(store, &offset), 0);
    assert_int_equal(offset, EVENTS);
    assert_int_equal(cursor(h), EVENTS);
    /* Some kill found committed events not yet acknowledged, and some
     * run acknowledged before its kill (every ACK_EVERY batches). */
    print_message("  %d events each applied once; %d of %d kills left "
                  "committed events unacknowledged, %d runs acknowledged "
                  "before their kill\n",
                  EVENTS, lagged, KILLS, moved);
    assert_true(lagged > 0);
    assert_true(moved > 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(t_deferred_acks_across_kills,
                                        harness_setup, harness_teardown),
    };

    harness_trap_exit("test_consumer");
    return harness_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
