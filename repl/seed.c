/*
 * seed.c — a follower whose next log entry is gone from etcd (trimmed:
 * trim.c) replaces its store by a snapshot of the leader's, read over
 * Admin.Snapshot (store/snapshot.c), and follows the log from the index
 * the snapshot holds.
 *
 * Owns: the REQ socket to the leader while seeding, the snapshot's id and
 * the last key received.
 * Invariant: the data folder holds either the old store, a folder refused
 * by store_open (CURRENT removed first; or the loading marker of
 * store/load.c), or the whole snapshot — never part of a snapshot that
 * opens; the snapshot's log index comes with it (STORE_APPLIED_KEY is in
 * the same LevelDB snapshot as every effect).
 * Never: campaigns or serves (follow.c does not campaign while a seed is
 * needed); keeps configuration files from being kept (principals, policy
 * and key files stay in the folder).
 */
#include "repl/repl_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "proto/auth_tag.h"
#include "base/log.h"
#include "proto/once.pb-c.h"
#include "store/datadir.h"
#include "store/fault.h"
#include "store/store.h"

#define SEED_TIMEOUT_MS  10000
#define SEED_RECV_MAX    (8u << 20)
#define SEED_CHUNK_BYTES (1u << 20)
/* Far more chunks than a store holds at 1 MiB each: a bounded loop. */
#define SEED_CHUNKS_MAX (64u * 1024u * 1024u)

typedef struct seed {
    repl *r;
    nng_socket sock;
    store_loader *ld;
    uint64_t id;
    uint64_t index;
    uint64_t keys;
    uint8_t *last;
    size_t last_len;
} seed;

/* One Admin.Snapshot request; *out (free_unpacked) on 0. */
static int
seed_call(seed *s, Once__V1__SnapshotResponse **out)
{
    Once__V1__SnapshotRequest req = ONCE__V1__SNAPSHOT_REQUEST__INIT;
    Once__V1__Request env = ONCE__V1__REQUEST__INIT;
    Once__V1__Response *resp;
    uint8_t *payload = NULL, *buf = NULL;
    char *rbuf = NULL;
    size_t len, rlen = 0;
    int rv;

    *out = NULL;
    req.snapshot_id = s->id;
    req.after_key.data = s->last;
    req.after_key.len = s->last_len;
    req.max_bytes = SEED_CHUNK_BYTES;
    if ((payload = malloc(protobuf_c_message_get_packed_size(&req.base) + 1)) ==
        NULL) {
        return ENOMEM;
    }
    env.method = "/once.v1.Admin/Snapshot";
    env.payload.len = protobuf_c_message_pack(&req.base, payload);
    env.payload.data = payload;
    env.timeout_ms = SEED_TIMEOUT_MS;
    /* Signed (--replicate-key) as libonce signs: packed without auth_tag,
     * the tag over exactly those bytes appended (auth_tag.h). */
    env.principal = s->r->signs ? s->r->key_name : NULL;
    if ((buf = malloc(protobuf_c_message_get_packed_size(&env.base) +
                      AUTH_TAG_TRAILER)) == NULL) {
        free(payload);
        return ENOMEM;
    }
    len = protobuf_c_message_pack(&env.base, buf);
    free(payload);
    if (s->r->signs) {
        auth_tag_append(buf, len, s->r->key);
        len += AUTH_TAG_TRAILER;
    }
    rv = nng_send(s->sock, buf, len, 0);
    free(buf);
    if (rv != 0 ||
        (rv = nng_recv(s->sock, &rbuf, &rlen, NNG_FLAG_ALLOC)) != 0) {
        log_warn("repl: seeding: no answer from the leader: %s",
                 nng_strerror(rv));
        return EAGAIN;
    }
    resp = once__v1__response__unpack(NULL, rlen, (const uint8_t *)rbuf);
    nng_free(rbuf, rlen);
    if (resp == NULL) {
        return EPROTO;
    }
    if (resp->status != NULL && resp->status->code != ONCE__V1__CODE__OK) {
        bool auth = resp->status->code == ONCE__V1__CODE__UNAUTHENTICATED ||
                    resp->status->code == ONCE__V1__CODE__PERMISSION_DENIED;

        log_warn("repl: seeding: the leader refused Admin.Snapshot: %s (%s)%s",
                 resp->status->reason, resp->status->message,
                 !auth         ? ""
                 : s->r->signs ? "; the policy must allow this replica's "
                                 "principal /once.v1.Admin/Snapshot"
                               : "; on a cluster with principals give "
                                 "this replica --replicate-key FILE");
        once__v1__response__free_unpacked(resp, NULL);
        return EAGAIN;
    }
    *out = once__v1__snapshot_response__unpack(NULL, resp->payload.len,
                                               resp->payload.data);
    once__v1__response__free_unpacked(resp, NULL);
    return *out != NULL ? 0 : EPROTO;
}

/* Loads chunk r (NULL: asks for the next one); *done after the last. */
static int
seed_chunk(seed *s, Once__V1__SnapshotResponse *r, bool *done)
{
    int rv = 0;

    if (r == NULL && (rv = seed_call(s, &r)) != 0) {
        return rv;
    }
    if (r->snapshot_id == 0 ||
        (s->id != 0 && (r->snapshot_id != s->id || r->log_index != s->index))) {
        once__v1__snapshot_response__free_unpacked(r, NULL);
        return EPROTO;
    }
    s->id = r->snapshot_id;
    s->index = r->log_index;
    for (size_t i = 0; i < r->n_pairs && rv == 0; i++) {
        const Once__V1__SnapshotPair *p = r->pairs[i];
        uint8_t *k;

        if ((rv = store_load_put(s->ld, p->key.data, p->key.len, p->value.data,
                                 p->value.len)) != 0) {
            break;
        }
        if ((k = malloc(p->key.len + 1)) == NULL) {
            rv = ENOMEM;
            break;
        }
        memcpy(k, p->key.data, p->key.len);
        free(s->last);
        s->last = k;
        s->last_len = p->key.len;
        s->keys++;
    }
    *done = r->done;
    once__v1__snapshot_response__free_unpacked(r, NULL);
    return rv;
}

int
repl_seed(repl *r, const char *url, store **stp, uint64_t *index)
{
    const char *dir = r->cfg.data_dir;
    seed s = {.r = r, .sock = NNG_SOCKET_INITIALIZER};
    Once__V1__SnapshotResponse *first = NULL;
    bool done = false;
    char *err = NULL;
    int rv;

    *index = 0;
    if ((rv = nng_req0_open(&s.sock)) != 0 ||
        (rv = nng_socket_set_ms(s.sock, NNG_OPT_RECVTIMEO, SEED_TIMEOUT_MS)) !=
            0 ||
        (rv = nng_socket_set_ms(s.sock, NNG_OPT_SENDTIMEO, SEED_TIMEOUT_MS)) !=
            0 ||
        (rv = nng_socket_set_size(s.sock, NNG_OPT_RECVMAXSZ, SEED_RECV_MAX)) !=
            0 ||
        (rv = nng_dial(s.sock, url, NULL, 0)) != 0) {
        log_warn("repl: seeding: cannot dial the leader at %s: %s", url,
                 nng_strerror(rv));
        nng_close(s.sock);
        return EAGAIN;
    }
    /* The first chunk before anything local changes: a leader that
     * refuses or does not answer leaves this replica's store as it is. */
    if ((rv = seed_call(&s, &first)) != 0) {
        nng_close(s.sock);
        return rv == EAGAIN ? EAGAIN : rv;
    }
    log_info("repl: seeding this replica from a snapshot of the leader at "
             "%s (its store is replaced)",
             url);
    store_close(*stp);
    *stp = NULL;
    if ((rv = datadir_remove_store(dir, &err)) != 0 ||
        (rv = store_load_open(&s.ld, dir, &err)) != 0) {
        log_error("repl: seeding: %s", err != NULL ? err : strerror(rv));
        goto out;
    }
    for (uint64_t n = 0; n < SEED_CHUNKS_MAX && !done; n++) {
        rv = seed_chunk(&s, first, &done);
        first = NULL; /* seed_chunk freed it */
        if (rv != 0) {
            break;
        }
        FAULT_POINT(FAULT_SEED_CHUNK); /* test build only */
    }
    if (rv != 0) {
        log_warn("repl: seeding stopped after %" PRIu64 " keys: %s", s.keys,
                 strerror(rv));
        store_load_abort(s.ld);
        goto out;
    }
    if ((rv = store_load_finish(s.ld, &err)) != 0 ||
        (rv = store_open(stp, dir, &err)) != 0) {
        log_error("repl: seeding: %s", err != NULL ? err : strerror(rv));
        *stp = NULL;
        goto out;
    }
    store_set_log_durable(*stp);
    if ((rv = store_applied_index(*stp, index)) != 0 || *index != s.index) {
        log_error("repl: seeding: the loaded store holds index %" PRIu64
                  ", the snapshot said %" PRIu64,
                  *index, s.index);
        store_close(*stp);
        *stp = NULL;
        rv = rv != 0 ? rv : EPROTO;
        goto out;
    }
    log_info("repl: seeded from a snapshot at log index %" PRIu64 " (%" PRIu64
             " keys)",
             s.index, s.keys);
out:
    if (first != NULL) {
        once__v1__snapshot_response__free_unpacked(first, NULL);
    }
    free(err);
    free(s.last);
    nng_close(s.sock);
    return rv;
}
