/*
 * fuzz_dispatch.c — libFuzzer over envelope decoding, admission and the
 * dispatch of every method (docs/spec.md: hostile input).
 *
 * Owns: one in-process onced (server_open: real store in a temp dir, real
 * executor (which also syncs) and collector, an ipc listener) built with ASan
 * and UBSan, one live lease, and a REQ socket that sends each input as one
 * message. Input byte 0 picks the shape: even — the rest is a raw envelope;
 * odd — byte 1 picks a method of every once.v1 service, byte 2 the client
 * id (none, the live lease, a never-issued one, UINT64_MAX), bytes 3..10
 * the seq, and the rest is that method's payload, inside a well-formed
 * envelope. Every input must get a decodable Response within 10 s; a
 * crash, a sanitizer report or silence is a finding.
 * Invariant: the seed corpus (fuzz_corpus) holds a valid request of every
 * method in both shapes.
 * Never: built into the normal tree; only with -DONCE_FUZZ=ON and clang.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "proto/once.pb-c.h"
#include "server/server.h"
#include "proto/wire.h"

static server *fz_srv;
static nng_socket fz_sock;
static uint64_t fz_cid;
static char fz_dir[64];

static Once__V1__Response *
fz_rpc(const void *buf, size_t len)
{
    nng_msg *m = NULL;
    Once__V1__Response *r;
    int rv;

    if ((rv = nng_msg_alloc(&m, 0)) != 0 ||
        (rv = nng_msg_append(m, buf, len)) != 0 ||
        (rv = nng_sendmsg(fz_sock, m, 0)) != 0 ||
        (rv = nng_recvmsg(fz_sock, &m, 0)) != 0) {
        fprintf(stderr, "fuzz_dispatch: no reply from onced: %s\n",
                nng_strerror(rv));
        abort();
    }
    r = once__v1__response__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
    nng_msg_free(m);
    if (r == NULL) {
        fprintf(stderr, "fuzz_dispatch: the reply is not a Response\n");
        abort();
    }
    return r;
}

static void
fz_cleanup(void)
{
    char cmd[128];

    server_close(fz_srv);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fz_dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "fuzz_dispatch: could not remove %s\n", fz_dir);
    }
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static char url[96];
    server_config cfg;
    Once__V1__OpenLeaseRequest ol = ONCE__V1__OPEN_LEASE_REQUEST__INIT;
    Once__V1__Request req = ONCE__V1__REQUEST__INIT;
    Once__V1__OpenLeaseResponse *olr;
    Once__V1__Response *r;
    uint8_t pl[64], env[256];

    snprintf(fz_dir, sizeof(fz_dir), "/tmp/once-fuzz-XXXXXX");
    if (mkdtemp(fz_dir) == NULL) {
        perror("mkdtemp");
        abort();
    }
    snprintf(url, sizeof(url), "ipc:///tmp/once-fuzz-%ld.ipc", (long)getpid());
    memset(&cfg, 0, sizeof(cfg));
    cfg.data_dir = fz_dir;
    cfg.listen[0] = url;
    cfg.nlisten = 1;
    cfg.contexts = 4;
    /* onced's defaults (main.c): with 0 the listener allows one request in
     * flight per connection, and the next request can arrive before the
     * context that sent the last reply is free again: dropped unanswered. */
    cfg.conn_inflight = 64;
    cfg.send_timeout_ms = 10000;
    cfg.recv_max = 1 << 20;
    cfg.lease_ttl_ms = 3600 * 1000;
    cfg.lease_ttl_max_ms = 3600 * 1000;
    cfg.window = 512;
    cfg.gc_interval_ms = 200;
    cfg.gc_budget = 20000;
    cfg.kv.key_max = KV_KEY_MAX_DEFAULT;
    cfg.kv.value_max = KV_VALUE_MAX_DEFAULT;
    cfg.kv.ops_max = KV_OPS_MAX_DEFAULT;
    cfg.kv.quota = KV_QUOTA_DEFAULT;
    cfg.outbox.max_bytes = OUTBOX_MAX_BYTES_DEFAULT;
    cfg.outbox.payload_max = OUTBOX_PAYLOAD_MAX_DEFAULT;
    if (server_open(&fz_srv, &cfg) != 0) {
        abort();
    }
    atexit(fz_cleanup);
    if (nng_req0_open(&fz_sock) != 0 || nng_dial(fz_sock, url, NULL, 0) != 0) {
        abort();
    }
    nng_socket_set_ms(fz_sock, NNG_OPT_RECVTIMEO, 10000);
    nng_socket_set_ms(fz_sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    nng_socket_set_size(fz_sock, NNG_OPT_RECVMAXSZ, 0);

    req.method = "/once.v1.Lease/OpenLease";
    req.payload.data = pl;
    req.payload.len = once__v1__open_lease_request__pack(&ol, pl);
    r = fz_rpc(env, once__v1__request__pack(&req, env));
    olr = once__v1__open_lease_response__unpack(NULL, r->payload.len,
                                                r->payload.data);
    if (olr == NULL || olr->client_id == 0) {
        abort();
    }
    fz_cid = olr->client_id;
    once__v1__open_lease_response__free_unpacked(olr, NULL);
    once__v1__response__free_unpacked(r, NULL);
    return 0;
}

static uint64_t
fz_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = v << 8 | p[i];
    }
    return v;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Once__V1__Request req = ONCE__V1__REQUEST__INIT;
    Once__V1__Response *r;
    const wire_method *m;
    size_t n, len;
    uint8_t *env;

    if (size == 0) {
        return 0;
    }
    if ((data[0] & 1) == 0) {
        r = fz_rpc(data + 1, size - 1);
        once__v1__response__free_unpacked(r, NULL);
        return 0;
    }
    if (size < 11) {
        return 0;
    }
    m = wire_methods(&n);
    m = &m[data[1] % n];
    req.method = (char *)m->full_name;
    switch (data[2] & 3) {
    case 0:
        req.client_id = 0;
        break;
    case 1:
        req.client_id = fz_cid;
        break;
    case 2:
        req.client_id = fz_cid + 1000000;
        break;
    default:
        req.client_id = UINT64_MAX;
        break;
    }
    req.seq = (data[2] & 4) != 0 ? fz_le64(data + 3) : data[3] % 600;
    req.first_incomplete = (data[2] & 8) != 0 ? data[4] % 600 : 0;
    req.attempt = 1;
    req.payload.data = (uint8_t *)data + 11;
    req.payload.len = size - 11;
    len = once__v1__request__get_packed_size(&req);
    if ((env = malloc(len)) == NULL) {
        return 0;
    }
    r = fz_rpc(env, once__v1__request__pack(&req, env));
    free(env);
    once__v1__response__free_unpacked(r, NULL);
    return 0;
}
