/*
 * credential.c — the signing key file and minting.
 */
#include "grants/credential.h"
#include "store/fault.h"
#include "base/trust.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int
signer_read(grants_signer *s, const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC); /* trust.h */
    ssize_t n;

    if (fd < 0) {
        return errno;
    }
    n = read(fd, s->sk, sizeof(s->sk));
    close(fd);
    if (n != (ssize_t)sizeof(s->sk)) {
        snprintf(err, errlen, "%s is not a %zu-byte Ed25519 secret key", path,
                 sizeof(s->sk));
        return EBADMSG;
    }
    crypto_sign_ed25519_sk_to_pk(s->pk, s->sk);
    return 0;
}

static int
signer_create(grants_signer *s, const char *dir, const char *path, char *err,
              size_t errlen)
{
    char tmp[4200];
    int fd, dfd, rv = 0;

    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    crypto_sign_keypair(s->pk, s->sk);
    fd = trust_create(AT_FDCWD, tmp); /* O_EXCL|O_NOFOLLOW */
    if (fd < 0) {
        rv = errno;
        snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(rv));
        return rv;
    }
    if (write(fd, s->sk, sizeof(s->sk)) != (ssize_t)sizeof(s->sk) ||
        fsync(fd) != 0) {
        rv = errno != 0 ? errno : EIO;
    }
    close(fd);
    if (rv == 0 && rename(tmp, path) != 0) {
        rv = errno;
    }
    if (rv != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(rv));
        unlink(tmp);
        return rv;
    }
    if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

int
grants_signer_load(grants_signer *s, const char *dir, char *err, size_t errlen)
{
    char path[4096];
    int rv;

    if (sodium_init() < 0) {
        snprintf(err, errlen, "libsodium failed to initialize");
        return EIO;
    }
    snprintf(path, sizeof(path), "%s/%s", dir, GRANTS_KEY_FILE);
    rv = signer_read(s, path, err, errlen);
    if (rv == ENOENT) {
        rv = signer_create(s, dir, path, err, errlen);
    } else if (rv != 0 && rv != EBADMSG) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(rv));
    }
    return rv;
}

void
grants_signer_fini(grants_signer *s)
{
    sodium_memzero(s->sk, sizeof(s->sk));
}

int
grants_mint(const grants_signer *s, const Once__V1__CredentialBody *body,
            Once__V1__Credential *out)
{
    size_t len = protobuf_c_message_get_packed_size(&body->base);

    once__v1__credential__init(out);
    if (FAULT_FAIL(FAULT_MINT)) {
        return EIO; /* test-only: ONCED_FAULT=mint[@N]:fail */
    }
    out->body.data = malloc(len > 0 ? len : 1);
    out->signature.data = malloc(crypto_sign_BYTES);
    if (out->body.data == NULL || out->signature.data == NULL) {
        grants_credential_fini(out);
        return ENOMEM;
    }
    protobuf_c_message_pack(&body->base, out->body.data);
    out->body.len = len;
    crypto_sign_detached(out->signature.data, NULL, out->body.data, len, s->sk);
    out->signature.len = crypto_sign_BYTES;
    return 0;
}

void
grants_credential_fini(Once__V1__Credential *c)
{
    if (c == NULL) {
        return;
    }
    free(c->body.data);
    free(c->signature.data);
    c->body.data = NULL;
    c->signature.data = NULL;
    c->body.len = c->signature.len = 0;
}
