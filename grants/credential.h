/*
 * credential.h — the server's Ed25519 key and the short-lived credentials
 * it signs for start grants.
 *
 * Owns the key file <data>/grants_ed25519.key (the 64-byte libsodium secret
 * key, mode 0600), created on the first start and read on every later one.
 * A credential is a packed once.v1.CredentialBody plus a detached Ed25519
 * signature over exactly those bytes; anyone with the public key can check
 * it offline (libonce: once_grant_credential_verify).
 * Never: releases or changes a grant — a credential's expiry is not an
 * event; ownership of a surface ends only with a recorded finish.
 */
#ifndef GRANTS_CREDENTIAL_H
#define GRANTS_CREDENTIAL_H

#include <stddef.h>
#include <stdint.h>

#include <sodium.h>

#include "proto/grants.pb-c.h"

#define GRANTS_KEY_FILE "grants_ed25519.key"

typedef struct grants_signer {
    unsigned char sk[crypto_sign_SECRETKEYBYTES];
    unsigned char pk[crypto_sign_PUBLICKEYBYTES];
} grants_signer;

/*
 * Reads dir/GRANTS_KEY_FILE, or creates it (write, fsync, rename, fsync of
 * dir) when missing. 0, or an errno code with a message in err.
 */
int grants_signer_load(grants_signer *s, const char *dir, char *err,
                       size_t errlen);

/* Wipes the secret key. */
void grants_signer_fini(grants_signer *s);

/*
 * Signs body into *out: out->body and out->signature are malloc'd (free
 * with grants_credential_fini). 0 or ENOMEM.
 */
int grants_mint(const grants_signer *s, const Once__V1__CredentialBody *body,
                Once__V1__Credential *out);

void grants_credential_fini(Once__V1__Credential *c);

#endif /* GRANTS_CREDENTIAL_H */
