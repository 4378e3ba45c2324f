/*
 * auth_kv.c — the prefix rules of the policy (their lines, their
 * defaults, their matching), and which keys of once.v1.KV a caller may
 * read and write by them. Topics use the same rules: auth_outbox.c.
 *
 * A policy line "WHO kv-read PREFIX..." or "WHO kv-write PREFIX..." gives
 * the role (or "@NAME") the keys that start with each PREFIX; "{name}" in
 * a prefix stands for the caller's principal name (agents/{name}/ is
 * agents/m3/ for principal m3), and a lone "*" is every key. kv-write
 * reads too. "WHO outbox-read PREFIX..." and "WHO outbox-emit PREFIX..."
 * are the same for outbox topics. An operator reads every key whatever
 * the rules say; in OPEN mode everything is allowed. The built-in default
 * policy (no policy file): operators and schedulers write every key and
 * emit to every topic, an agent its own agents/<name>/ for both.
 * Invariant: checked on every attempt, before the completion record is
 * looked up (svc_kv.c's validate), from the tables in force only.
 * Never: allows a prefix op (Range of a prefix, delete_prefix) wider than
 * a rule: the rule's prefix must start the asked prefix.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/reasons.h"
#include "proto/names.h"
#include "server/auth.h"
#include "server/auth_impl.h"
#include "server/call.h"

#define KV_NAME_TOKEN "{name}"

static const char *const auth_kv_default[][3] = {
    {"operator", "kv-write", "*"},
    {"scheduler", "kv-write", "*"},
    {"agent", "kv-write", "agents/{name}/"},
    {"operator", "outbox-emit", "*"},
    {"scheduler", "outbox-emit", "*"},
    {"agent", "outbox-emit", "agents/{name}/"},
};

static bool
topic_verb(const char *tok)
{
    return strcmp(tok, "outbox-read") == 0 || strcmp(tok, "outbox-emit") == 0;
}

bool
auth_kv_verb(const char *tok)
{
    return strcmp(tok, "kv-read") == 0 || strcmp(tok, "kv-write") == 0 ||
           topic_verb(tok);
}

static int
kv_rule_add(auth_tables *t, const char *who, const char *verb,
            const char *prefix)
{
    auth_kv_rule *r;

    if (t->nkv == AUTH_KV_RULES_MAX) {
        return E2BIG;
    }
    if (t->kv == NULL &&
        (t->kv = calloc(AUTH_KV_RULES_MAX, sizeof(*t->kv))) == NULL) {
        return ENOMEM;
    }
    r = &t->kv[t->nkv++];
    snprintf(r->who, sizeof(r->who), "%s", who);
    snprintf(r->prefix, sizeof(r->prefix), "%s", prefix);
    r->all = strcmp(prefix, "*") == 0;
    r->topic = topic_verb(verb);
    r->write =
        strcmp(verb, "kv-write") == 0 || strcmp(verb, "outbox-emit") == 0;
    return 0;
}

int
auth_kv_line(auth_tables *t, const char *who, const char *verb, char **save,
             const char *path, int lineno, char *err, size_t errlen)
{
    char *tok = strtok_r(NULL, " \t\r\n", save);
    int rv = 0;

    if (tok == NULL) {
        snprintf(err, errlen, "%s line %d: %s %s has no prefix", path, lineno,
                 who, verb);
        return EINVAL;
    }
    for (; tok != NULL && rv == 0; tok = strtok_r(NULL, " \t\r\n", save)) {
        if (strlen(tok) >= AUTH_KV_PREFIX_MAX) {
            snprintf(err, errlen, "%s line %d: prefix longer than %d bytes",
                     path, lineno, AUTH_KV_PREFIX_MAX - 1);
            return EINVAL;
        }
        if ((rv = kv_rule_add(t, who, verb, tok)) != 0) {
            snprintf(err, errlen, "%s line %d: too many prefix rules", path,
                     lineno);
        }
    }
    return rv;
}

int
auth_kv_defaults(auth_tables *t)
{
    int rv = 0;

    for (size_t i = 0;
         rv == 0 && i < sizeof(auth_kv_default) / sizeof(auth_kv_default[0]);
         i++) {
        rv = kv_rule_add(t, auth_kv_default[i][0], auth_kv_default[i][1],
                         auth_kv_default[i][2]);
    }
    return rv;
}

bool
auth_prefix_covers(const auth_kv_rule *r, const char *name, const uint8_t *key,
                   size_t klen)
{
    const char *p = r->prefix;
    size_t at = 0;

    if (r->all) {
        return true;
    }
    while (*p != '\0') {
        const char *piece = p;
        size_t n = 1;

        if (strncmp(p, KV_NAME_TOKEN, sizeof(KV_NAME_TOKEN) - 1) == 0) {
            piece = name;
            n = strlen(name);
            p += sizeof(KV_NAME_TOKEN) - 1;
        } else {
            p++;
        }
        if (at + n > klen || memcmp(key + at, piece, n) != 0) {
            return false;
        }
        at += n;
    }
    return true;
}

bool
auth_kv_permit(const auth *a, server_call *c, const uint8_t *key, size_t klen,
               bool write, const char *what)
{
    const auth_who *w = c->who;
    char raw[65], shown[72];

    if (w == NULL || w->open || (!write && w->operator_)) {
        return true;
    }
    for (size_t i = 0; i < a->t.nkv; i++) {
        const auth_kv_rule *r = &a->t.kv[i];
        if (!r->topic && (r->write || !write) && auth_rule_mine(r->who, w) &&
            auth_prefix_covers(r, w->name, key, klen)) {
            return true;
        }
    }
    memcpy(raw, key, klen < 64 ? klen : 64);
    raw[klen < 64 ? klen : 64] = '\0';
    name_printable(raw, shown, sizeof(shown));
    call_fail(c, ONCE__V1__CODE__PERMISSION_DENIED, REASON_KV_PREFIX_DENIED,
              "principal \"%s\" (role %s) may not %s %s \"%s\": no policy "
              "line \"%s kv-%s PREFIX\" covers it",
              w->name, w->role, write ? "write" : "read", what, shown, w->role,
              write ? "write" : "read");
    return false;
}
