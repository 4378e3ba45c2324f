/*
 * auth_verify.c — the tag check any thread may run (the verifier,
 * verify.h), so that the HMAC over a request's bytes is not the
 * executor's work.
 *
 * Owns: the keyring, a copy of the names and keys of the tables in force,
 * with the mode and the generation of those tables; the parts of a
 * request's authentication that auth_check (executor) and auth_verify
 * (verifier) share: reading the principal's name as received, splitting
 * the tag trailer, the BAD_TAG refusal.
 * Invariant: the keyring always belongs to one generation of tables; a
 * request verified under generation g is trusted by auth_check only while
 * generation g is in force (else the executor checks the tag again), so a
 * reload between the two never lets a stale key through.
 * Never: holds kr_mtx while hashing (the key is copied out, then wiped);
 * logs a key; compares a tag with memcmp.
 */
#include "server/auth.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "server/auth_impl.h"
#include "proto/reasons.h"
#include "server/call.h"
#include "proto/auth_tag.h"
#include "proto/names.h"

static int
auth_key_cmp(const void *x, const void *y)
{
    return strcmp(((const auth_key *)x)->name, ((const auth_key *)y)->name);
}

int
auth_keyring_publish(auth *a)
{
    size_t n = a->t.plist.n;
    auth_key *kr = calloc(n > 0 ? n : 1, sizeof(*kr));
    auth_key *old;
    size_t nold;

    a->gen++;
    if (kr == NULL) {
        return ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        memcpy(kr[i].name, a->t.plist.v[i].name, sizeof(kr[i].name));
        memcpy(kr[i].key, a->t.plist.v[i].key, sizeof(kr[i].key));
        kr[i].operator_ = strcmp(a->t.plist.v[i].role, "operator") == 0;
    }
    qsort(kr, n, sizeof(*kr), auth_key_cmp);
    pthread_mutex_lock(&a->kr_mtx);
    old = a->kr;
    nold = a->nkr;
    a->kr = kr;
    a->nkr = n;
    a->kr_enabled = a->enabled;
    a->kr_gen = a->gen;
    pthread_mutex_unlock(&a->kr_mtx);
    if (old != NULL) {
        sodium_memzero(old, nold * sizeof(*old));
        free(old);
    }
    return 0;
}

void
auth_keyring_fini(auth *a)
{
    if (a->kr != NULL) {
        sodium_memzero(a->kr, a->nkr * sizeof(*a->kr));
        free(a->kr);
        a->kr = NULL;
    }
}

bool
auth_tag_parts(server_call *c, const uint8_t *body, size_t len,
               const uint8_t *principal, size_t principal_len, char *pname,
               size_t *signed_len, const uint8_t **tag)
{
    size_t cut =
        principal_len < PRINCIPAL_NAME_MAX ? principal_len : PRINCIPAL_NAME_MAX;

    /* The name as received, cut at the longest a principal may have: a
     * longer one, or one holding a NUL, names no principal. */
    memcpy(pname, principal != NULL ? (const char *)principal : "", cut);
    pname[cut] = '\0';
    if (principal_len > PRINCIPAL_NAME_MAX || strlen(pname) != principal_len) {
        pname[0] = '\0';
    }
    if (!auth_tag_split(body, len, signed_len, tag)) {
        call_fail(c, ONCE__V1__CODE__UNAUTHENTICATED, REASON_MISSING_TAG,
                  "onced authenticates every request: sign it with a "
                  "principal's key (oncectl --key-file FILE; libonce "
                  "once_client_open_secure)");
        return false;
    }
    if (principal_len == 0) {
        call_fail(c, ONCE__V1__CODE__UNAUTHENTICATED, REASON_MISSING_PRINCIPAL,
                  "the request names no principal");
        return false;
    }
    return true;
}

void
auth_fail_bad_tag(server_call *c, const uint8_t *principal,
                  size_t principal_len)
{
    char raw[PRINCIPAL_NAME_MAX + 1], name[64];
    size_t cut =
        principal_len < PRINCIPAL_NAME_MAX ? principal_len : PRINCIPAL_NAME_MAX;

    memcpy(raw, principal != NULL ? (const char *)principal : "", cut);
    raw[cut] = '\0';
    name_printable(raw, name, sizeof(name));
    /* An unknown principal and a wrong key read the same from outside. */
    call_fail(c, ONCE__V1__CODE__UNAUTHENTICATED, REASON_BAD_TAG,
              "the request's tag does not verify for principal \"%s\" "
              "(unknown principal, wrong key, or altered in transit)",
              name);
}

bool
auth_verify(auth *a, server_call *c, const uint8_t *body, size_t len,
            const uint8_t *principal, size_t principal_len, uint64_t *gen)
{
    char pname[PRINCIPAL_NAME_MAX + 1];
    const uint8_t *tag;
    size_t signed_len;
    uint8_t key[AUTH_KEY_BYTES];
    auth_key probe, *hit = NULL;
    bool enabled, ok;

    pthread_mutex_lock(&a->kr_mtx);
    enabled = a->kr_enabled;
    *gen = a->kr_gen;
    pthread_mutex_unlock(&a->kr_mtx);
    if (!enabled) {
        return true; /* OPEN: the executor's auth_check says so again */
    }
    if (!auth_tag_parts(c, body, len, principal, principal_len, pname,
                        &signed_len, &tag)) {
        return false;
    }
    memcpy(probe.name, pname, sizeof(probe.name));
    pthread_mutex_lock(&a->kr_mtx);
    if (pname[0] != '\0' && a->kr_gen == *gen) {
        hit = bsearch(&probe, a->kr, a->nkr, sizeof(*a->kr), auth_key_cmp);
    }
    if (hit != NULL) {
        memcpy(key, hit->key, sizeof(key));
    }
    pthread_mutex_unlock(&a->kr_mtx);
    ok = hit != NULL && auth_tag_verify(tag, body, signed_len, key);
    sodium_memzero(key, sizeof(key));
    if (!ok) {
        auth_fail_bad_tag(c, principal, principal_len);
    }
    return ok;
}

bool
auth_key_copy(auth *a, const char *name, uint8_t key[AUTH_KEY_BYTES],
              bool *enabled, bool *operator_)
{
    auth_key probe, *hit = NULL;

    if (strlen(name) > PRINCIPAL_NAME_MAX) {
        name = ""; /* names no principal */
    }
    memset(&probe, 0, sizeof(probe));
    memcpy(probe.name, name, strlen(name));
    pthread_mutex_lock(&a->kr_mtx);
    *enabled = a->kr_enabled;
    if (a->kr_enabled && name[0] != '\0') {
        hit = bsearch(&probe, a->kr, a->nkr, sizeof(*a->kr), auth_key_cmp);
    }
    if (hit != NULL) {
        memcpy(key, hit->key, AUTH_KEY_BYTES);
    }
    if (operator_ != NULL) {
        *operator_ = hit != NULL && hit->operator_;
    }
    pthread_mutex_unlock(&a->kr_mtx);
    return hit != NULL;
}
