/*
 * grants.c — libonce's start-grant helpers: the offline credential check
 * and the server's public key (once/grants.h).
 *
 * Owns nothing: verify is a pure function of its arguments (libsodium
 * crypto_sign_verify_detached over the body bytes as received, never a
 * re-encoding).
 * Never: trusts a body before its signature checks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "client/client_impl.h"
#include "proto/grants.pb-c.h"
#include "client/status.h"
#include <once/grants.h>

int
once_grant_credential_verify(const uint8_t pk[ONCE_GRANT_PUBLIC_KEY_BYTES],
                             const void *body, size_t body_len, const void *sig,
                             size_t sig_len, uint64_t now_unix_ms,
                             uint64_t min_epoch, once_grant_credential *out,
                             once_status *st)
{
    Once__V1__CredentialBody *b;
    int rv = ONCE_OK;

    if (pk == NULL || body == NULL || sig == NULL) {
        return status_set(st, ONCE_INVALID_ARGUMENT, ONCE_REASON_BAD_ARGUMENT,
                          "pk, body and sig are required");
    }
    if (sodium_init() < 0) {
        return status_set(st, ONCE_INTERNAL, ONCE_REASON_SODIUM,
                          "libsodium init");
    }
    if (sig_len != crypto_sign_BYTES ||
        crypto_sign_verify_detached(sig, body, body_len, pk) != 0) {
        return status_set(st, ONCE_UNAUTHENTICATED, ONCE_REASON_BAD_CREDENTIAL,
                          "the signature does not match this public key");
    }
    b = once__v1__credential_body__unpack(NULL, body_len, body);
    if (b == NULL) {
        return status_set(st, ONCE_UNAUTHENTICATED, ONCE_REASON_BAD_CREDENTIAL,
                          "the signed body is not a CredentialBody");
    }
    if (out != NULL) {
        memset(out, 0, sizeof(*out));
        out->grant_id = b->grant_id;
        snprintf(out->surface, sizeof(out->surface), "%s", b->surface);
        snprintf(out->machine, sizeof(out->machine), "%s", b->machine);
        snprintf(out->location, sizeof(out->location), "%s", b->location);
        out->generation = b->generation;
        out->epoch = b->epoch;
        out->issued_unix_ms = b->issued_unix_ms;
        out->expires_unix_ms = b->expires_unix_ms;
    }
    if (now_unix_ms >= b->expires_unix_ms) {
        rv = status_set(st, ONCE_FAILED_PRECONDITION,
                        ONCE_REASON_CREDENTIAL_EXPIRED,
                        "the credential of grant %llu expired; renew it "
                        "under the same grant",
                        (unsigned long long)b->grant_id);
    } else if (b->epoch < min_epoch) {
        rv = status_set(st, ONCE_FAILED_PRECONDITION, ONCE_REASON_STALE_EPOCH,
                        "epoch %llu is below %llu: a newer grant of surface "
                        "%s exists",
                        (unsigned long long)b->epoch,
                        (unsigned long long)min_epoch, b->surface);
    } else {
        rv = status_set(st, ONCE_OK, "", "%s", "");
    }
    once__v1__credential_body__free_unpacked(b, NULL);
    return rv;
}

int
once_grants_public_key(once_client *c, uint8_t pk[ONCE_GRANT_PUBLIC_KEY_BYTES],
                       once_status *st)
{
    Once__V1__GetPublicKeyRequest req = ONCE__V1__GET_PUBLIC_KEY_REQUEST__INIT;
    Once__V1__GetPublicKeyResponse *resp;
    uint8_t buf[8];
    void *out = NULL;
    size_t len = protobuf_c_message_get_packed_size(&req.base), out_len = 0;
    int rv;

    protobuf_c_message_pack(&req.base, buf);
    rv = once_call(c, "/once.v1.Grants/GetPublicKey", false, NULL, buf, len,
                   &out, &out_len, st);
    if (rv != ONCE_OK) {
        return rv;
    }
    resp = once__v1__get_public_key_response__unpack(NULL, out_len, out);
    once_free(out);
    if (resp == NULL || resp->public_key.len != ONCE_GRANT_PUBLIC_KEY_BYTES) {
        if (resp != NULL) {
            once__v1__get_public_key_response__free_unpacked(resp, NULL);
        }
        return status_set(st, ONCE_INTERNAL, ONCE_REASON_BAD_RESPONSE,
                          "GetPublicKey did not return a 32-byte key");
    }
    memcpy(pk, resp->public_key.data, ONCE_GRANT_PUBLIC_KEY_BYTES);
    once__v1__get_public_key_response__free_unpacked(resp, NULL);
    return ONCE_OK;
}
