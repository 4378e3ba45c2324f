/*
 * once/grants.h — libonce's start-grant helpers (docs/grants.md).
 *
 * A credential minted by onced for a grant is a packed
 * once.v1.CredentialBody plus a detached Ed25519 signature over exactly
 * those bytes, by the server key whose public half
 * once_grants_public_key() fetches (or `oncectl key show` prints). An agent
 * or a resource checks one offline with once_grant_credential_verify(): no
 * call to onced is needed, only the 32-byte public key.
 *
 * Expiry of a credential never releases the grant's surface: an expired
 * credential is renewed under the same grant (RenewCredential).
 */
#ifndef ONCE_GRANTS_H
#define ONCE_GRANTS_H

#include <stddef.h>
#include <stdint.h>

#include <once/client.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ONCE_GRANT_PUBLIC_KEY_BYTES 32

/* What a verified credential says. Plain data; strings truncated if
 * longer. */
typedef struct once_grant_credential {
    uint64_t grant_id;
    char surface[257];
    char machine[257];
    char location[1025];
    uint64_t generation;
    uint64_t epoch; /* fencing epoch: increases with each grant of a surface */
    uint64_t issued_unix_ms;
    uint64_t expires_unix_ms;
} once_grant_credential;

/*
 * Checks a credential offline: the signature by pk over body, then
 * now_unix_ms < expires (FAILED_PRECONDITION / CREDENTIAL_EXPIRED), then
 * epoch >= min_epoch (FAILED_PRECONDITION / STALE_EPOCH: a newer grant of
 * the surface has been seen). A bad signature or body is
 * UNAUTHENTICATED / BAD_CREDENTIAL. *out (may be NULL) is filled whenever
 * the signature is good, so an expired credential still says which grant
 * it was for. Returns ONCE_OK when all checks pass.
 */
ONCE_API int once_grant_credential_verify(
    const uint8_t pk[ONCE_GRANT_PUBLIC_KEY_BYTES], const void *body,
    size_t body_len, const void *sig, size_t sig_len, uint64_t now_unix_ms,
    uint64_t min_epoch, once_grant_credential *out, once_status *st);

/* /once.v1.Grants/GetPublicKey into pk. */
ONCE_API int once_grants_public_key(once_client *c,
                                    uint8_t pk[ONCE_GRANT_PUBLIC_KEY_BYTES],
                                    once_status *st);

#ifdef __cplusplus
}
#endif

#endif /* ONCE_GRANTS_H */
