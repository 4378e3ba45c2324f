/*
 * test_oncectl_grants.c — `oncectl grants ...` against a real onced: the
 * real oncectl binary run with posix_spawn (no shell), its stdout read back
 * and checked as one JSON object per run.
 *
 * Owns: the JSON shape of a few subcommands (set-placement, request,
 * get-surface, enqueue, list-queue, claim, finish, inputs; chain list
 * and show on an input store), their errors
 * ({"code","reason","message"} and exit 1; usage errors exit 2), and a
 * mutating subcommand retried with --rpc-id giving the stored reply.
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

#include "tests/harness.h"

/* Runs oncectl --server URL --json ARGS... (NULL-terminated), the reply
 * into out; returns the exit status. */
static int
run(const harness *h, char *out, size_t cap, const char *const *args)
{
    size_t len = 0;
    int rv = harness_oncectl(h, NULL, out, cap, &len, args);

    /* One object, one line. */
    assert_true(len >= 3 && out[0] == '{' && out[len - 2] == '}' &&
                out[len - 1] == '\n');
    assert_null(memchr(out, '\n', len - 1));
    return rv;
}

#define HAS(out, s) assert_non_null(strstr((out), (s)))

static int
setup(void **state)
{
    harness *h;

    unsetenv("ONCE_KEY_FILE");
    if (harness_start(&h) != 0) {
        return -1;
    }
    *state = h;
    return 0;
}

static int
teardown(void **state)
{
    harness *h = *state;
    int rv = harness_stop(h);

    harness_free(h);
    return rv;
}

static void
t_json_subcommands(void **state)
{
    harness *h = *state;
    char out[16384];

    {
        const char *a[] = {"grants", "set-placement", "s", "m1", "/w", NULL};
        assert_int_equal(run(h, out, sizeof(out), a), 0);
        HAS(out, "\"generation\":1");
        HAS(out, "\"rpc_id\":\"");
        HAS(out, "\"replayed\":false");
    }
    {
        const char *a[] = {
            "grants", "request", "r1",        "s",     "m1",
            "/w",     "1",       "--payload", "hello", "--credential-ttl",
            "30s",    NULL};
        assert_int_equal(run(h, out, sizeof(out), a), 0);
        HAS(out, "\"grant\":{\"grant_id\":1,\"request_id\":\"r1\"");
        HAS(out, "\"state\":\"GRANT_OPEN\"");
        HAS(out, "\"credential\":{\"body\":\"");
        HAS(out, "\"existing\":false");
    }
    {
        /* The surface is owned: the error object, exit 1. */
        const char *a[] = {"grants", "request", "r2", "s",
                           "m1",     "/w",      "1",  NULL};
        assert_int_equal(run(h, out, sizeof(out), a), 1);
        HAS(out, "\"code\":\"FAILED_PRECONDITION\"");
        HAS(out, "\"reason\":\"ALREADY_OWNED\"");
        HAS(out, "\"message\":\"");
    }
    {
        const char *a[] = {"grants", "get-surface", "s", NULL};
        assert_int_equal(run(h, out, sizeof(out), a), 0);
        HAS(out, "\"open_grant\":{\"grant_id\":1");
        HAS(out, "\"history\":[]");
        HAS(out, "\"rejections\":[{");
        HAS(out, "\"reason\":\"ALREADY_OWNED\"");
        assert_null(strstr(out, "rpc_id")); /* a read carries no id */
    }
    {
        const char *p[] = {"grants", "set-placement", "t", "m2", "/t", NULL};
        const char *e[] = {"grants",    "enqueue", "w1", "t",
                           "--payload", "job",     NULL};
        const char *l[] = {"grants", "list-queue", "m2", NULL};
        assert_int_equal(run(h, out, sizeof(out), p), 0);
        assert_int_equal(run(h, out, sizeof(out), e), 0);
        HAS(out, "\"state\":\"PENDING\"");
        HAS(out, "\"machine\":\"m2\"");
        assert_int_equal(run(h, out, sizeof(out), l), 0);
        HAS(out, "\"pending\":[{\"work_id\":1,");
        HAS(out, "\"expired\":[]");
    }
    {
        /* Another machine's claim never sees m2's row. */
        const char *a1[] = {"grants", "claim", "m1", NULL};
        const char *a2[] = {"grants", "claim", "m2", "--max", "4", NULL};
        assert_int_equal(run(h, out, sizeof(out), a1), 0);
        HAS(out, "\"claimed\":[]");
        assert_int_equal(run(h, out, sizeof(out), a2), 0);
        HAS(out, "\"claimed\":[{\"row\":{\"work_id\":1,");
        HAS(out, "\"via\":\"queue\"");
    }
    {
        const char *a[] = {"grants", "finish", "1", "succeeded", NULL};
        assert_int_equal(run(h, out, sizeof(out), a), 0);
        HAS(out, "\"state\":\"GRANT_FINISHED\"");
        HAS(out, "\"outcome\":\"SUCCEEDED\"");
    }
    {
        const char *a[] = {"grants", "finish", "1", "maybe", NULL};
        assert_int_equal(run(h, out, sizeof(out), a), 2);
        HAS(out, "\"reason\":\"USAGE\"");
    }
    {
        const char *a[] = {"grants", "request", "r3", "s", NULL};
        assert_int_equal(run(h, out, sizeof(out), a), 2);
        HAS(out, "\"code\":\"INVALID_ARGUMENT\"");
    }
}

static void
t_rpc_id_retry(void **state)
{
    harness *h = *state;
    char out[4096], id[48], first[4096];
    once_client *c;
    once_status st;
    uint64_t cid, ttl;

    /* A lease that outlives the oncectl runs (same principal). */
    assert_int_equal(harness_client(h, true, &c), ONCE_OK);
    assert_int_equal(once_lease_open(c, NULL, 60000, &cid, &ttl, &st), ONCE_OK);
    snprintf(id, sizeof(id), "%" PRIu64 ":1", cid);
    const char *a[] = {"grants", "set-placement", "s", "m1",
                       "/w",     "--rpc-id",      id,  NULL};
    assert_int_equal(run(h, first, sizeof(first), a), 0);
    HAS(first, "\"replayed\":false");
    assert_int_equal(run(h, out, sizeof(out), a), 0);
    HAS(out, "\"replayed\":true");
    HAS(out, "\"generation\":1");
    /* Same id, other arguments: a conflict, never a second placement. */
    const char *b[] = {"grants", "set-placement", "s", "m9",
                       "/w",     "--rpc-id",      id,  NULL};
    assert_int_equal(run(h, out, sizeof(out), b), 1);
    HAS(out, "\"reason\":\"RPC_ID_CONFLICT\"");
    once_client_close(c);
}

static void
t_inputs(void **state)
{
    harness *h = *state;
    char out[8192], dir[512];

    snprintf(dir, sizeof(dir), "%s/inputs", h->dir);
    const char *p[] = {"grants", "set-placement", "s", "m1", "/w", NULL};
    const char *p2[] = {"grants", "set-placement", "s", "m2", "/w", NULL};
    assert_int_equal(run(h, out, sizeof(out), p), 0);
    assert_int_equal(run(h, out, sizeof(out), p2), 0);
    /* Written for generation 1; the placement is at 2 now. */
    const char *r[] = {"grants", "request", "old",     "s", "m1",
                       "/w",     "1",       "--store", dir, NULL};
    assert_int_equal(run(h, out, sizeof(out), r), 1);
    HAS(out, "\"reason\":\"PLACEMENT_CHANGED\"");
    const char *ok[] = {"grants", "request", "new",     "s", "m2",
                        "/w",     "2",       "--store", dir, NULL};
    assert_int_equal(run(h, out, sizeof(out), ok), 0);
    HAS(out, "\"grant_id\":1");
    const char *l[] = {"grants", "inputs", "--store", dir, NULL};
    assert_int_equal(run(h, out, sizeof(out), l), 0);
    HAS(out, "\"inputs\":[{\"request_id\":\"old\",\"attempt\":1,"
             "\"state\":\"REJECTED\"");
    HAS(out, "\"reason\":\"PLACEMENT_CHANGED\"");
    assert_null(strstr(out, "\"new\"")); /* accepted: not kept */
    const char *rs[] = {"grants", "inputs", "--store", dir, "--resume", NULL};
    assert_int_equal(run(h, out, sizeof(out), rs), 0);
    HAS(out, "\"accepted\":0,\"pending\":0,\"lease_ended\":0,"
             "\"rejected\":0");
    HAS(out, "\"state\":\"REJECTED\"");
    /* The queue path: an accepted Enqueue is not kept, a refused one is,
     * as kind "enqueue". */
    const char *q[] = {"grants", "enqueue", "w1", "s", "--store", dir, NULL};
    assert_int_equal(run(h, out, sizeof(out), q), 0);
    HAS(out, "\"request_id\":\"w1\"");
    const char *qe[] = {"grants", "enqueue", "w2", "", "--store", dir, NULL};
    assert_int_equal(run(h, out, sizeof(out), qe), 1);
    HAS(out, "\"code\":\"INVALID_ARGUMENT\"");
    assert_int_equal(run(h, out, sizeof(out), l), 0);
    HAS(out, "\"request_id\":\"w2\",\"attempt\":1,\"state\":\"REJECTED\","
             "\"kind\":\"enqueue\"");
    assert_null(strstr(out, "\"w1\""));
}

/* `oncectl chain list|show --journal` on an input store (its journal of
 * files, no CURRENT): its inputs are the chains input/<hash>-<attempt>;
 * a directory that is not there is refused and not made. */
static void
t_chain_on_input_store(void **state)
{
    harness *h = *state;
    char out[8192], dir[512], none[512], id[128];
    const char *at;
    size_t n;

    snprintf(dir, sizeof(dir), "%s/inputs", h->dir);
    snprintf(none, sizeof(none), "%s/no-such-store", h->dir);
    const char *p[] = {"grants", "set-placement", "s", "m1", "/w", NULL};
    assert_int_equal(run(h, out, sizeof(out), p), 0);
    const char *r[] = {"grants", "request", "old",     "s", "m1",
                       "/w",     "7",       "--store", dir, NULL};
    assert_int_equal(run(h, out, sizeof(out), r), 1);
    HAS(out, "\"reason\":\"PLACEMENT_CHANGED\"");

    const char *l[] = {"chain", "list", "--journal", dir, NULL};
    assert_int_equal(run(h, out, sizeof(out), l), 0);
    HAS(out, "{\"chains\":[{\"chain_id\":\"input/");
    HAS(out, "\"state\":\"REPLIED\",\"steps\":0");
    HAS(out, "\"method\":\"/once.v1.Grants/RequestGrant\"");
    HAS(out, "\"reason\":\"PLACEMENT_CHANGED\"");
    at = strstr(out, "\"chain_id\":\"") + strlen("\"chain_id\":\"");
    n = strcspn(at, "\"");
    assert_true(n < sizeof(id));
    memcpy(id, at, n);
    id[n] = '\0';
    assert_null(strstr(at + n, "\"chain_id\"")); /* one input, one chain */

    const char *sh[] = {"chain", "show", "--journal", dir, id, NULL};
    assert_int_equal(run(h, out, sizeof(out), sh), 0);
    HAS(out, "\"state\":\"REPLIED\"");
    HAS(out, "\"code\":\"FAILED_PRECONDITION\"");
    HAS(out, "\"reason\":\"PLACEMENT_CHANGED\"");

    const char *nl[] = {"chain", "list", "--journal", none, NULL};
    assert_int_equal(run(h, out, sizeof(out), nl), 1);
    HAS(out, "\"reason\":\"JOURNAL\"");
    assert_int_equal(access(none, F_OK), -1);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        T(t_json_subcommands),
        T(t_rpc_id_retry),
        T(t_inputs),
        T(t_chain_on_input_store),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
