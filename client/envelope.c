/*
 * envelope.c — the Request envelopes libonce sends (envelope.h).
 *
 * Owns: filling a Request from a call (fields borrowed, nothing copied
 * but into the packed message), packing it, signing it, the batch
 * envelope and the size check against onced's --recv-max.
 * Invariant: signed envelopes are packed without auth_tag and the tag
 * over exactly those bytes is appended as field 8 (auth_tag.h), the one
 * way every envelope here is sealed (envelope_seal).
 * Never: keeps a pointer to a caller's bytes after it returns.
 */
#include "client/envelope.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_impl.h"
#include "client/lease_gate.h"
#include "client/status.h"
#include "proto/auth_tag.h"
#include "proto/wire.h"

/* The envelope of one attempt, its fields borrowed from cs and c. */
static void
envelope_fill(once_client *c, const call_spec *cs, uint32_t attempt,
              uint64_t timeout_ms, Once__V1__Request *rp)
{
    Once__V1__Request r = ONCE__V1__REQUEST__INIT;

    r.method = (char *)cs->method;
    r.client_id = cs->client_id;
    r.seq = cs->seq;
    r.first_incomplete =
        cs->mutating ? gate_ack(&c->gate, cs->client_id, cs->seq) : 0;
    r.attempt = attempt;
    r.timeout_ms = timeout_ms;
    r.principal = c->principal;
    r.payload.data = (uint8_t *)cs->req;
    r.payload.len = cs->req != NULL ? cs->req_len : 0;
    *rp = r;
}

/* The bytes of *r in a fresh message *mp, with the tag trailer when the
 * handle signs. 0 or an nng error. */
static int
envelope_seal(once_client *c, const Once__V1__Request *r, nng_msg **mp)
{
    size_t len = once__v1__request__get_packed_size(r);
    nng_msg *m;
    int rv;

    if ((rv = nng_msg_alloc(&m, len + (c->signs ? AUTH_TAG_TRAILER : 0))) !=
        0) {
        return rv;
    }
    once__v1__request__pack(r, nng_msg_body(m));
    if (c->signs) {
        auth_tag_append(nng_msg_body(m), len, c->key);
    }
    *mp = m;
    return 0;
}

int
envelope_pack(once_client *c, const call_spec *cs, uint32_t attempt,
              uint64_t timeout_ms, nng_msg **mp)
{
    Once__V1__Request r;

    envelope_fill(c, cs, attempt, timeout_ms, &r);
    return envelope_seal(c, &r, mp);
}

size_t
envelope_batch_room(once_client *c)
{
    uint64_t max = atomic_load(&c->conn.max_request);

    if (max == 0) {
        return BATCH_BYTES_DEFAULT;
    }
    return max > 4096 ? (size_t)(max - 4096) : 1;
}

int
envelope_pack_batch(once_client *c, uint8_t *const *ents, const size_t *lens,
                    size_t n, uint64_t timeout_ms, nng_msg **mp)
{
    Once__V1__Request r = ONCE__V1__REQUEST__INIT;
    Once__V1__BatchRequest br = ONCE__V1__BATCH_REQUEST__INIT;
    ProtobufCBinaryData bins[BATCH_ENTRIES_MAX];
    size_t blen;
    uint8_t *payload;
    int rv;

    for (size_t i = 0; i < n; i++) {
        bins[i].data = ents[i];
        bins[i].len = lens[i];
    }
    br.n_entries = n;
    br.entries = bins;
    blen = once__v1__batch_request__get_packed_size(&br);
    if ((payload = malloc(blen > 0 ? blen : 1)) == NULL) {
        return NNG_ENOMEM;
    }
    once__v1__batch_request__pack(&br, payload);
    r.method = (char *)WIRE_BATCH_METHOD;
    r.attempt = 1;
    r.timeout_ms = timeout_ms;
    r.principal = c->principal;
    r.payload.data = payload;
    r.payload.len = blen;
    rv = envelope_seal(c, &r, mp);
    free(payload);
    return rv;
}

int
envelope_fits(once_client *c, const call_spec *cs, once_status *st)
{
    uint64_t max = atomic_load(&c->conn.max_request);
    Once__V1__Request r;
    size_t len;

    /* Fast path: every field but the method, principal and payload takes
     * at most 11 bytes, the tag trailer fewer than 64. */
    if (max == 0 ||
        cs->req_len + strlen(cs->method) + strlen(c->principal) + 192 <= max) {
        return ONCE_OK;
    }
    envelope_fill(c, cs, UINT32_MAX, UINT64_MAX, &r);
    len = once__v1__request__get_packed_size(&r) +
          (c->signs ? AUTH_TAG_TRAILER : 0);
    if (len <= max) {
        return ONCE_OK;
    }
    return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_REQUEST_TOO_LARGE,
                      "the request is %zu bytes and onced reads at most "
                      "%" PRIu64 " (its --recv-max); nothing was sent",
                      len, max);
}
