/*
 * test_oncectl_kv.c — `oncectl kv ...` against a real onced: the real
 * oncectl binary run with posix_spawn (no shell), its stdout read back as
 * one JSON object per run, and what it wrote read back through libonce.
 *
 * Owns: the JSON shape of put, get, del, range and txn; a failed compare
 * as a successful call (exit 0, succeeded false, nothing written); a Txn
 * retried with --rpc-id answered from its record after the key changed,
 * and RPC_ID_CONFLICT for other arguments; range paging past one page;
 * --lease keys gone with their lease; the builder's size refusal with
 * nothing sent; the Txn file's mistakes named by place (exit 2).
 * Never: parses JSON loosely beyond substring checks on exact members.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <once/kv.h>

#include "tests/harness.h"

/* Big enough for a range of 1001 keys. */
#define OUT_MAX (512 * 1024)

static char out[OUT_MAX];

/* Runs oncectl --server URL --json ARGS... (NULL-terminated), its one
 * JSON line into out; returns the exit status. */
static int
run(const harness *h, const char *const *args)
{
    size_t len = 0;
    int rv = harness_oncectl(h, NULL, out, sizeof(out), &len, args);

    assert_true(len >= 3 && out[0] == '{' && out[len - 2] == '}' &&
                out[len - 1] == '\n');
    assert_null(memchr(out, '\n', len - 1));
    return rv;
}

#define HAS(s)     assert_non_null(strstr(out, (s)))
#define HAS_NOT(s) assert_null(strstr(out, (s)))

/* The number after "member": in out. */
static uint64_t
member_u64(const char *member)
{
    char pat[64];
    const char *at;

    snprintf(pat, sizeof(pat), "\"%s\":", member);
    assert_non_null(at = strstr(out, pat));
    return strtoull(at + strlen(pat), NULL, 10);
}

/* A lease of its own, alive past the oncectl runs: "CLIENT:1". */
static once_client *
own_lease(const harness *h, char *id, size_t len, uint64_t *cid)
{
    once_client *c;
    once_status st;
    uint64_t ttl;

    assert_int_equal(harness_client(h, true, &c), ONCE_OK);
    assert_int_equal(once_lease_open(c, NULL, 60000, cid, &ttl, &st), ONCE_OK);
    snprintf(id, len, "%" PRIu64 ":1", *cid);
    return c;
}

static void
t_put_get_del(void **state)
{
    harness *h = *state;
    uint64_t v1;

    const char *put[] = {"kv", "put", "jobs/42", "queued", NULL};
    assert_int_equal(run(h, put), 0);
    HAS("\"succeeded\":true");
    HAS("\"replayed\":false");
    HAS("\"rpc_id\":\"");
    HAS("\"retry_until\":\"");
    HAS("\"results\":[{\"op\":\"put\",\"version\":");
    v1 = member_u64("revision");
    assert_true(v1 > 0);
    assert_int_equal(member_u64("version"), v1); /* the put's version */

    const char *get[] = {"kv", "get", "jobs/42", NULL};
    assert_int_equal(run(h, get), 0);
    HAS("\"found\":true");
    HAS("\"key\":\"jobs/42\",\"value\":\"queued\"");
    assert_int_equal(member_u64("version"), v1);
    HAS_NOT("rpc_id"); /* a read carries no id */

    const char *miss[] = {"kv", "get", "jobs/none", NULL};
    assert_int_equal(run(h, miss), 0);
    HAS("\"found\":false");

    const char *put2[] = {"kv", "put", "jobs/43", "x", NULL};
    const char *del[] = {"kv", "del", "jobs/", "--prefix", NULL};
    assert_int_equal(run(h, put2), 0);
    assert_int_equal(run(h, del), 0);
    HAS("\"results\":[{\"op\":\"delete_prefix\",\"deleted\":2}]");
    assert_int_equal(run(h, get), 0);
    HAS("\"found\":false");
}

/* A compare that fails is a call that succeeded: exit 0, succeeded
 * false, the else branch's read, and nothing written. */
static void
t_failed_compare(void **state)
{
    harness *h = *state;
    char ver[32];
    uint64_t v;

    const char *put[] = {"kv", "put", "k", "one", NULL};
    assert_int_equal(run(h, put), 0);
    v = member_u64("revision");
    snprintf(ver, sizeof(ver), "%" PRIu64, v + 7);

    const char *stale[] = {"kv", "put", "k", "two", "--if-version", ver, NULL};
    assert_int_equal(run(h, stale), 0);
    HAS("\"succeeded\":false");
    HAS("\"failed_compare\":1");
    HAS("\"results\":[{\"op\":\"get\",\"found\":true,\"key\":\"k\","
        "\"value\":\"one\"");
    const char *absent[] = {"kv", "put", "k", "three", "--if-absent", NULL};
    assert_int_equal(run(h, absent), 0);
    HAS("\"succeeded\":false");

    const char *get[] = {"kv", "get", "k", NULL};
    assert_int_equal(run(h, get), 0);
    HAS("\"value\":\"one\"");
    assert_int_equal(member_u64("version"), v);

    snprintf(ver, sizeof(ver), "%" PRIu64, v);
    const char *cas[] = {"kv", "put", "k", "two", "--if-version", ver, NULL};
    assert_int_equal(run(h, cas), 0);
    HAS("\"succeeded\":true");
    assert_int_equal(run(h, get), 0);
    HAS("\"value\":\"two\"");

    /* Usage: the two guards exclude each other. */
    const char *both[] = {"kv",           "put", "k",           "x",
                          "--if-version", "1",   "--if-absent", NULL};
    assert_int_equal(run(h, both), 2);
    HAS("\"reason\":\"USAGE\"");
}

/* A CAS retried with its rpc id gets its first answer even after the key
 * moved on; other arguments under the id are a conflict. */
static void
t_rpc_id_retry(void **state)
{
    harness *h = *state;
    char id[48];
    uint64_t cid, rev1;
    once_client *c = own_lease(h, id, sizeof(id), &cid);

    const char *put[] = {"kv",          "put",      "cas", "mine",
                         "--if-absent", "--rpc-id", id,    NULL};
    assert_int_equal(run(h, put), 0);
    HAS("\"succeeded\":true");
    HAS("\"replayed\":false");
    HAS_NOT("retry_until"); /* an explicit id: the lease is the caller's */
    rev1 = member_u64("revision");

    const char *other[] = {"kv", "put", "cas", "theirs", NULL};
    assert_int_equal(run(h, other), 0);

    assert_int_equal(run(h, put), 0);
    HAS("\"succeeded\":true"); /* not the else branch it would run now */
    HAS("\"replayed\":true");
    assert_int_equal(member_u64("revision"), rev1);

    const char *conflict[] = {"kv",          "put",      "cas", "mine2",
                              "--if-absent", "--rpc-id", id,    NULL};
    assert_int_equal(run(h, conflict), 1);
    HAS("\"reason\":\"RPC_ID_CONFLICT\"");
    HAS("\"rpc_id\":\"");
    const char *get[] = {"kv", "get", "cas", NULL};
    assert_int_equal(run(h, get), 0);
    HAS("\"value\":\"theirs\"");
    once_client_close(c);
}

static void
write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

static void
t_txn_file(void **state)
{
    harness *h = *state;
    char path[512], id[48];
    uint64_t cid;
    once_client *c = own_lease(h, id, sizeof(id), &cid);

    snprintf(path, sizeof(path), "%s/txn.json", h->dir);
    /* Submit job 7 if absent; the else branch reads it. */
    write_file(path, "{\"compares\": [{\"key\": \"jobs/7\", \"target\": "
                     "\"absent\"}],\n"
                     " \"then\": [{\"op\": \"put\", \"key\": \"jobs/7\", "
                     "\"value\": \"queued\"},\n"
                     "          {\"op\": \"put\", \"key\": \"agents/m3\", "
                     "\"value\": \"up\", \"lease\": true},\n"
                     "          {\"op\": \"get\", \"key\": \"jobs/7\"}],\n"
                     " \"else\": [{\"op\": \"get\", \"key\": \"jobs/7\"}]}\n");
    const char *txn[] = {"kv", "txn", "--file", path, "--rpc-id", id, NULL};
    assert_int_equal(run(h, txn), 0);
    HAS("\"succeeded\":true");
    HAS("{\"op\":\"put\",\"version\":");
    HAS("{\"op\":\"get\",\"found\":true,\"key\":\"jobs/7\","
        "\"value\":\"queued\"");
    assert_int_equal(run(h, txn), 0); /* the retry: the record */
    HAS("\"succeeded\":true");
    HAS("\"replayed\":true");

    /* --lease bound agents/m3 to the Txn's lease: gone when it ends. */
    const char *get[] = {"kv", "get", "agents/m3", NULL};
    assert_int_equal(run(h, get), 0);
    HAS("\"found\":true");
    assert_int_equal(member_u64("lease"), cid);
    {
        uint64_t kept = 0;
        once_status st;
        assert_int_equal(once_lease_close(c, cid, &kept, &st), ONCE_OK);
    }
    once_client_close(c);
    assert_int_equal(run(h, get), 0);
    HAS("\"found\":false");

    /* Mistakes in the file: exit 2, the place named, nothing sent. */
    write_file(path, "{\"then\": [{\"op\": \"put\", \"key\": \"x\", "
                     "\"vlaue\": \"1\"}]}");
    const char *bad[] = {"kv", "txn", "--file", path, NULL};
    assert_int_equal(run(h, bad), 2);
    HAS("then[1]: unknown member 'vlaue'");
    write_file(path, "{\"compares\": [{\"key\": \"x\", \"target\": "
                     "\"version\"}]}");
    assert_int_equal(run(h, bad), 2);
    HAS("compares[1]: target value takes");
    write_file(path, "{\"then\": [{\"op\": \"get\", \"key\": \"x\"}]} x");
    assert_int_equal(run(h, bad), 2);
    HAS("not a JSON object");
}

/* The builder refuses a key past the limit before anything is sent. */
static void
t_refused_before_sending(void **state)
{
    harness *h = *state;
    char key[ONCE_KV_KEY_MAX + 2];

    memset(key, 'k', sizeof(key) - 1);
    key[sizeof(key) - 1] = '\0';
    const char *put[] = {"kv", "put", key, "v", NULL};
    assert_int_equal(run(h, put), 1);
    HAS("\"code\":\"INVALID_ARGUMENT\"");
    HAS("\"reason\":\"KV_KEY_TOO_LARGE\"");
    HAS_NOT("rpc_id"); /* nothing reached onced */
    const char *all[] = {"kv", "range", "", NULL};
    assert_int_equal(run(h, all), 0);
    HAS("\"kvs\":[]");
}

/* 1001 keys: oncectl follows the continuation past onced's page of 1000;
 * --limit stops early and says more. */
static void
t_range_pages(void **state)
{
    harness *h = *state;
    once_client *c;
    once_kv_txn *b = NULL;
    once_status st;
    char key[32];

    assert_int_equal(harness_client(h, false, &c), ONCE_OK);
    for (int i = 0; i < 1001; i++) {
        if (b == NULL) {
            assert_int_equal(once_kv_txn_new(&b), ONCE_OK);
        }
        snprintf(key, sizeof(key), "p/%04d", i);
        assert_int_equal(
            once_kv_txn_put(b, ONCE_KV_THEN, key, strlen(key), "v", 1, false),
            ONCE_OK);
        if (i % 100 == 99 || i == 1000) {
            assert_int_equal(once_kv_txn_exec(c, b, NULL, &st), ONCE_OK);
            once_kv_txn_free(b);
            b = NULL;
        }
    }
    once_client_close(c);

    const char *all[] = {"kv", "range", "p/", "--limit", "5000", NULL};
    assert_int_equal(run(h, all), 0);
    HAS("{\"key\":\"p/0000\"");
    HAS("{\"key\":\"p/1000\"");
    HAS("\"more\":false");
    const char *some[] = {"kv", "range", "p/", "--limit", "3", NULL};
    assert_int_equal(run(h, some), 0);
    HAS("{\"key\":\"p/0002\"");
    HAS_NOT("\"p/0003\"");
    HAS("\"more\":true");
}

static void
t_help(void **state)
{
    const char *subs[] = {"put", "get", "del", "range", "txn"};

    (void)state;
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
        const char *a[] = {"kv", subs[i], "--help", NULL};
        char text[4096];
        char want[64];
        assert_int_equal(harness_oncectl_run(a, text, sizeof(text), NULL), 0);
        snprintf(want, sizeof(want), "kv %s", subs[i]);
        assert_non_null(strstr(text, want));
    }
}

#define T(f) cmocka_unit_test_setup_teardown(f, harness_setup, harness_teardown)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        T(t_put_get_del),
        T(t_failed_compare),
        T(t_rpc_id_retry),
        T(t_txn_file),
        T(t_refused_before_sending),
        T(t_range_pages),
        cmocka_unit_test(t_help),
    };

    unsetenv("ONCE_KEY_FILE");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
