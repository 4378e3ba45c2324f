/*
 * test_names.c — exact names (issue 12 item 6): a string field that holds a
 * NUL byte or is not valid UTF-8 is refused INVALID_ARGUMENT/
 * INVALID_STRING before anything runs, against a real onced.
 *
 * Owns: envelopes and payloads encoded byte by byte here (protobuf-c packs
 * a char * only up to its first NUL, so it cannot make these requests):
 * a counter name "a\0b" and one of invalid UTF-8, a method name
 * "/once.v1.Counter/Increment\0junk", a surface, a machine and a request id
 * with a NUL byte; and a multi-byte UTF-8 name that must still work.
 * Also (item 9) the watermark lag at seq UINT64_MAX, which must not wrap.
 * Invariant: each refusal writes nothing (Stats commits unchanged, the
 * counter a name would have been cut to unchanged, the rpc id still free
 * for a real call).
 * Never: goes through libonce for the hostile bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"

#define REPLY_MS 5000
#define INCR     "/once.v1.Counter/Increment"

/* A protobuf message being encoded by hand. */
typedef struct pb {
    uint8_t b[1024];
    size_t n;
} pb;

static void
pb_varint(pb *m, uint64_t v)
{
    do {
        assert_true(m->n < sizeof(m->b));
        m->b[m->n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v != 0);
}

static void
pb_u64(pb *m, unsigned field, uint64_t v)
{
    pb_varint(m, (uint64_t)field << 3);
    pb_varint(m, v);
}

static void
pb_bytes(pb *m, unsigned field, const void *p, size_t len)
{
    pb_varint(m, (uint64_t)field << 3 | 2);
    pb_varint(m, len);
    assert_true(m->n + len <= sizeof(m->b));
    memcpy(m->b + m->n, p, len);
    m->n += len;
}

typedef struct fixture {
    harness *h;
    once_client *c; /* lease-less: reads and stats */
    uint64_t cid;
} fixture;

static int
setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    once_status st;
    uint64_t ttl;

    if (f == NULL || harness_start_args(&f->h, harness_no_gc) != 0) {
        free(f);
        return -1;
    }
    *state = f;
    if (harness_client(f->h, true, &f->c) != ONCE_OK ||
        once_lease_open(f->c, NULL, 120000, &f->cid, &ttl, &st) != ONCE_OK) {
        return -1;
    }
    return 0;
}

static int
teardown(void **state)
{
    fixture *f = *state;
    int rv = 0;

    once_client_close(f->c);
    if (f->h != NULL && f->h->pid != 0) {
        rv = harness_stop(f->h);
    }
    harness_free(f->h);
    free(f);
    return rv;
}

/* Sends an envelope with method (mlen bytes) and payload under cid:seq and
 * returns the code; the reason into reason. */
static int
send_raw(const fixture *f, const char *method, size_t mlen, uint64_t seq,
         const pb *payload, char *reason, size_t rlen)
{
    pb env = {.n = 0};
    Once__V1__Response *r = NULL;
    int code;

    pb_bytes(&env, 1, method, mlen);
    if (seq != 0) {
        pb_u64(&env, 2, f->cid);
        pb_u64(&env, 3, seq);
    }
    pb_u64(&env, 5, 1);
    pb_bytes(&env, 10, payload->b, payload->n);
    assert_int_equal(harness_raw_rpc(f->h->url, env.b, env.n, &r, REPLY_MS), 0);
    code = r->status != NULL ? (int)r->status->code : 0;
    snprintf(reason, rlen, "%s", r->status != NULL ? r->status->reason : "");
    if (code != 0) {
        fprintf(stderr, "  %s: %s\n", reason,
                r->status != NULL ? r->status->message : "");
    }
    once__v1__response__free_unpacked(r, NULL);
    return code;
}

static uint64_t
commits(const fixture *f)
{
    once_stats s;

    harness_stats(f->c, &s);
    return s.commits;
}

/* Increment(name of len bytes, by 1) under cid:seq. */
static int
incr_raw(const fixture *f, const char *method, size_t mlen, const char *name,
         size_t len, uint64_t seq, char *reason, size_t rlen)
{
    pb p = {.n = 0};

    pb_bytes(&p, 1, name, len);
    pb_u64(&p, 2, 1);
    return send_raw(f, method, mlen, seq, &p, reason, rlen);
}

/* "a\0b" is not counter a; "\xff\xfe" and an overlong "/" are not names;
 * each refusal writes nothing and leaves its rpc id free. */
static void
t_counter_name(void **state)
{
    static const struct {
        const char *name;
        size_t len;
    } bad[] = {
        {"a\0b", 3},
        {"a\0", 2},
        {"\xff\xfe", 2},
        {"\xc0\xaf", 2},         /* overlong "/" */
        {"\xed\xa0\x80", 3},     /* a surrogate */
        {"caf\xc3", 4},          /* truncated */
        {"\xf4\x90\x80\x80", 4}, /* above U+10FFFF */
    };
    fixture *f = *state;
    char reason[64];
    uint64_t before = commits(f);

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(incr_raw(f, INCR, strlen(INCR), bad[i].name,
                                  bad[i].len, 1, reason, sizeof(reason)),
                         ONCE_INVALID_ARGUMENT);
        assert_string_equal(reason, "INVALID_STRING");
    }
    assert_int_equal(harness_get(f->c, "a"), 0);
    assert_int_equal(commits(f), before);
    /* The rpc id is still free: a real call under it executes. */
    assert_int_equal(
        incr_raw(f, INCR, strlen(INCR), "a", 1, 1, reason, sizeof(reason)),
        ONCE_OK);
    assert_int_equal(harness_get(f->c, "a"), 1);
    /* Multi-byte UTF-8 is a name like any other. */
    assert_int_equal(incr_raw(f, INCR, strlen(INCR),
                              "z\xc3\xa4hler \xe2\x82\xac", 11, 2, reason,
                              sizeof(reason)),
                     ONCE_OK);
    assert_int_equal(harness_get(f->c, "z\xc3\xa4hler \xe2\x82\xac"), 1);
}

/* A method name with a NUL byte is not the method before it. */
static void
t_method_name(void **state)
{
    static const char m[] = INCR "\0junk";
    fixture *f = *state;
    char reason[64];
    uint64_t before = commits(f);

    assert_int_equal(
        incr_raw(f, m, sizeof(m) - 1, "m", 1, 1, reason, sizeof(reason)),
        ONCE_INVALID_ARGUMENT);
    assert_string_equal(reason, "INVALID_STRING");
    assert_int_equal(
        incr_raw(f, m, strlen(INCR) + 1, "m", 1, 1, reason, sizeof(reason)),
        ONCE_INVALID_ARGUMENT);
    assert_int_equal(harness_get(f->c, "m"), 0);
    assert_int_equal(commits(f), before);
}

/* Grants names: a surface, a machine and a request id. */
static void
t_grants_names(void **state)
{
    fixture *f = *state;
    char reason[64];
    uint64_t before = commits(f);
    pb p;

    /* SetPlacement(surface "s\0x", machine "m1", location "/l") */
    p.n = 0;
    pb_bytes(&p, 1, "s\0x", 3);
    pb_bytes(&p, 2, "m1", 2);
    pb_bytes(&p, 3, "/l", 2);
    assert_int_equal(send_raw(f, "/once.v1.Grants/SetPlacement", 28, 1, &p,
                              reason, sizeof(reason)),
                     ONCE_INVALID_ARGUMENT);
    assert_string_equal(reason, "INVALID_STRING");
    /* SetPlacement(surface "s", machine "m\0") */
    p.n = 0;
    pb_bytes(&p, 1, "s", 1);
    pb_bytes(&p, 2, "m\0", 2);
    pb_bytes(&p, 3, "/l", 2);
    assert_int_equal(send_raw(f, "/once.v1.Grants/SetPlacement", 28, 1, &p,
                              reason, sizeof(reason)),
                     ONCE_INVALID_ARGUMENT);
    assert_string_equal(reason, "INVALID_STRING");
    /* RequestGrant(request_id "r\0x", surface "s", machine "m1") */
    p.n = 0;
    pb_bytes(&p, 1, "r\0x", 3);
    pb_bytes(&p, 3, "s", 1);
    pb_bytes(&p, 4, "m1", 2);
    pb_bytes(&p, 5, "/l", 2);
    assert_int_equal(send_raw(f, "/once.v1.Grants/RequestGrant", 28, 1, &p,
                              reason, sizeof(reason)),
                     ONCE_INVALID_ARGUMENT);
    assert_string_equal(reason, "INVALID_STRING");
    /* GetSurface("s\0x"): a read, refused the same way */
    p.n = 0;
    pb_bytes(&p, 1, "s\0x", 3);
    assert_int_equal(send_raw(f, "/once.v1.Grants/GetSurface", 26, 0, &p,
                              reason, sizeof(reason)),
                     ONCE_INVALID_ARGUMENT);
    assert_string_equal(reason, "INVALID_STRING");
    assert_int_equal(commits(f), before);
    /* The placement "s" -> "m1" was never set: the rpc id is free. */
    p.n = 0;
    pb_bytes(&p, 1, "s", 1);
    pb_bytes(&p, 2, "m1", 2);
    pb_bytes(&p, 3, "/l", 2);
    assert_int_equal(send_raw(f, "/once.v1.Grants/SetPlacement", 28, 1, &p,
                              reason, sizeof(reason)),
                     ONCE_OK);
}

/* seq = UINT64_MAX: the watermark lag Admin.ListRecords reports is the
 * count of seqs issued but not acknowledged, not a wrapped 0. */
static void
t_lag_at_max_seq(void **state)
{
    fixture *f = *state;
    Once__V1__ListRecordsRequest lr = ONCE__V1__LIST_RECORDS_REQUEST__INIT;
    Once__V1__ListRecordsResponse *resp;
    uint8_t *pl, *req, buf[32];
    size_t pl_len, len;
    Once__V1__Response *r = NULL;
    void *out = NULL;
    size_t out_len = 0;
    once_status st;

    /* Increment under seq UINT64_MAX, acknowledging all below
     * UINT64_MAX - 5: 6 seqs are issued and not acknowledged. */
    assert_int_equal(harness_incr_payload("edge", 1, &pl, &pl_len), 0);
    assert_int_equal(harness_envelope_fi(INCR, f->cid, UINT64_MAX,
                                         UINT64_MAX - 5, pl, pl_len, &req,
                                         &len),
                     0);
    assert_int_equal(harness_raw_rpc(f->h->url, req, len, &r, REPLY_MS), 0);
    assert_true(r->status == NULL || r->status->code == 0);
    once__v1__response__free_unpacked(r, NULL);
    free(req);
    free(pl);

    lr.client_id = f->cid;
    assert_int_equal(once_call(f->c, "/once.v1.Admin/ListRecords", false, NULL,
                               buf,
                               once__v1__list_records_request__pack(&lr, buf),
                               &out, &out_len, &st),
                     ONCE_OK);
    assert_non_null(
        resp = once__v1__list_records_response__unpack(NULL, out_len, out));
    assert_int_equal(resp->n_clients, 1);
    assert_true(resp->clients[0]->max_seq == UINT64_MAX);
    assert_true(resp->clients[0]->watermark == UINT64_MAX - 5);
    assert_int_equal(resp->clients[0]->watermark_lag, 6);
    once__v1__list_records_response__free_unpacked(resp, NULL);
    once_free(out);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(t_counter_name, setup, teardown),
        cmocka_unit_test_setup_teardown(t_method_name, setup, teardown),
        cmocka_unit_test_setup_teardown(t_grants_names, setup, teardown),
        cmocka_unit_test_setup_teardown(t_lag_at_max_seq, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
