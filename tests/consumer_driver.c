/*
 * consumer_driver.c — the receiver of test_consumer.c: libonce's receiver
 * loop (once_consumer_run_opts) applying a topic's events into a LevelDB
 * of its own, pattern 1 of docs/outbox.md, until a given offset.
 *
 *   consumer_driver URL TOPIC CONSUMER STORE_DIR ACK_EVERY MAX STOP_AT
 *
 * Each event adds 1 to the key "n/<offset>" of the store; the batch's
 * writes and the key "offset" (the batch's last offset) go in one synced
 * LevelDB write (batch_done), with "b <offset>\n" written to stdout just
 * before it and "<offset>\n" after it. At
 * start the stored offset is read back and given as the loop's `after`.
 * CONSUMER_DRIVER_NO_AFTER=1 starts with after 0 instead (a receiver that
 * forgets its offset: what comes again is applied twice).
 *
 * Owns: nothing beyond one run. Exit: 0 it applied STOP_AT, 2 any failure
 * (printed).
 * Never: writes an effect apart from its offset.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <leveldb/c.h>
#include <once/client.h>
#include <once/outbox.h>

typedef struct recv {
    leveldb_t *db;
    leveldb_writebatch_t *wb;
    uint64_t stop_at;
} recv;

/* The value of key in db (0 when absent). */
static uint64_t
stored(leveldb_t *db, const char *key)
{
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    char *err = NULL, *v;
    size_t len = 0;
    uint64_t n = 0;

    v = leveldb_get(db, ro, key, strlen(key), &len, &err);
    if (v != NULL) {
        char text[32] = "";
        memcpy(text, v, len < sizeof(text) - 1 ? len : sizeof(text) - 1);
        n = strtoull(text, NULL, 10);
    }
    leveldb_free(v);
    leveldb_free(err);
    leveldb_readoptions_destroy(ro);
    return n;
}

static void
put_u64(leveldb_writebatch_t *wb, const char *key, uint64_t v)
{
    char text[24];

    snprintf(text, sizeof(text), "%" PRIu64, v);
    leveldb_writebatch_put(wb, key, strlen(key), text, strlen(text));
}

static int
on_event(void *arg, const once_outbox_event *ev)
{
    recv *r = arg;
    char key[32];

    snprintf(key, sizeof(key), "n/%" PRIu64, ev->offset);
    put_u64(r->wb, key, stored(r->db, key) + 1);
    return ev->offset >= r->stop_at ? ONCE_CONSUMER_STOP : ONCE_CONSUMER_NEXT;
}

static int
on_batch(void *arg, uint64_t last)
{
    recv *r = arg;
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    char *err = NULL;

    printf("b %" PRIu64 "\n", last);
    fflush(stdout);
    put_u64(r->wb, "offset", last);
    leveldb_writeoptions_set_sync(wo, 1);
    leveldb_write(r->db, wo, r->wb, &err);
    leveldb_writeoptions_destroy(wo);
    leveldb_writebatch_clear(r->wb);
    if (err != NULL) {
        fprintf(stderr, "consumer_driver: write: %s\n", err);
        leveldb_free(err);
        return -1;
    }
    printf("%" PRIu64 "\n", last);
    fflush(stdout);
    return ONCE_CONSUMER_NEXT;
}

int
main(int argc, char **argv)
{
    leveldb_options_t *lo = leveldb_options_create();
    once_consumer_options o;
    once_options co;
    once_client *c = NULL;
    once_status st;
    char *err = NULL;
    recv r = {0};
    int rv;

    if (argc != 8) {
        fprintf(stderr, "usage: consumer_driver URL TOPIC CONSUMER STORE_DIR "
                        "ACK_EVERY MAX STOP_AT\n");
        return 2;
    }
    leveldb_options_set_create_if_missing(lo, 1);
    if ((r.db = leveldb_open(lo, argv[4], &err)) == NULL) {
        fprintf(stderr, "consumer_driver: open %s: %s\n", argv[4], err);
        return 2;
    }
    r.wb = leveldb_writebatch_create();
    r.stop_at = strtoull(argv[7], NULL, 10);
    once_consumer_options_init(&o);
    o.ack_every = (uint32_t)atoi(argv[5]);
    o.max = (uint32_t)atoi(argv[6]);
    o.wait_ms = 200;
    o.batch_done = on_batch;
    if (getenv("CONSUMER_DRIVER_NO_AFTER") == NULL) {
        o.after = stored(r.db, "offset");
    }
    once_options_init(&co);
    co.url = argv[1];
    co.deadline_ms = 20000;
    if ((rv = once_client_open(&c, &co, &st)) == ONCE_OK) {
        rv = once_consumer_run_opts(c, argv[2], argv[3], &o, on_event, &r, &st);
    }
    if (rv != ONCE_OK) {
        fprintf(stderr, "consumer_driver: %s %s %s\n", once_strerror(rv),
                st.reason, st.message);
    }
    once_client_close(c);
    leveldb_writebatch_destroy(r.wb);
    leveldb_close(r.db);
    leveldb_options_destroy(lo);
    return rv == ONCE_OK ? 0 : 2;
}
