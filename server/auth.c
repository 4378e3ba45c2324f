/*
 * auth.c — principals, policy and the checks of auth.h.
 *
 * The policy file, <data>/policy: one rule per line, "WHO GLOB [GLOB...]",
 * '#' starts a comment. WHO is a role ("operator", "scheduler", "agent")
 * or "@NAME" for one principal; a GLOB matches full method names with
 * fnmatch(3) ("/once.v1.Lease/" followed by "*"). A call is allowed when some
 * rule for the caller's role or name matches its method. Without the file the
 * built-in default below applies; with it, only its rules do. A line
 * "WHO kv-read|kv-write PREFIX..." gives keys of once.v1.KV instead
 * (auth_kv.c).
 */
#include "server/auth.h"

#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "server/auth_impl.h"
#include "server/call.h"
#include "base/log.h"
#include "proto/names.h"
#include "base/keyfile.h"
#include "proto/principals.h"
#include "base/trust.h"
#include "proto/wire.h"
#include "proto/reasons.h"

/* The caller of every request while onced runs OPEN. */
static const auth_who auth_anon = {
    .name = AUTH_ANONYMOUS,
    .role = "operator",
    .operator_ = true,
    .open = true,
};

/* The default policy: the operator may do anything; a scheduler counts,
 * holds leases and asks for grants; an agent holds leases and claims,
 * renews and finishes grants (for its own machine: auth_machine). */
static const char *const auth_default_policy[][2] = {
    {"operator", "*"},
    {"scheduler", "/once.v1.Counter/*"},
    {"scheduler", "/once.v1.Lease/*"},
    {"scheduler", "/once.v1.Grants/SetPlacement"},
    {"scheduler", "/once.v1.Grants/RequestGrant"},
    {"scheduler", "/once.v1.Grants/Enqueue"},
    {"scheduler", "/once.v1.Grants/CancelGrant"},
    {"scheduler", "/once.v1.Grants/LegacyClaim"},
    {"scheduler", "/once.v1.Grants/LegacyRelease"},
    {"scheduler", "/once.v1.Grants/GetSurface"},
    {"scheduler", "/once.v1.Grants/ListQueue"},
    {"scheduler", "/once.v1.Grants/GetPublicKey"},
    {"agent", "/once.v1.Lease/*"},
    {"agent", "/once.v1.Grants/Claim"},
    {"agent", "/once.v1.Grants/RenewCredential"},
    {"agent", "/once.v1.Grants/FinishGrant"},
    {"agent", "/once.v1.Grants/GetPublicKey"},
    {"scheduler", "/once.v1.KV/*"},
    {"agent", "/once.v1.KV/*"},
};

void
auth_tables_fini(auth_tables *t)
{
    principals_fini(&t->plist);
    free(t->whos);
    free(t->rules);
    free(t->kv);
    memset(t, 0, sizeof(*t));
}

file_sig
auth_file_stat(const char *path)
{
    file_sig s;
    struct stat st;

    memset(&s, 0, sizeof(s));
    if (stat(path, &st) == 0) {
        s.exists = true;
        s.dev = st.st_dev;
        s.ino = st.st_ino;
        s.size = st.st_size;
        s.mtim = st.st_mtim;
        s.ctim = st.st_ctim;
    }
    return s;
}

static int
entry_cmp(const void *a, const void *b)
{
    return strcmp(((const principal_entry *)a)->name,
                  ((const principal_entry *)b)->name);
}

/* Sorts the entries and derives each one's auth_who (splitting "agent:m1"
 * in place into role "agent" and machine "m1"). */
static int
tables_index(auth_tables *t)
{
    if (t->plist.n > 0) {
        qsort(t->plist.v, t->plist.n, sizeof(*t->plist.v), entry_cmp);
    }
    if ((t->whos = calloc(t->plist.n + 1, sizeof(*t->whos))) == NULL) {
        return ENOMEM;
    }
    for (size_t i = 0; i < t->plist.n; i++) {
        principal_entry *e = &t->plist.v[i];
        char *colon = strchr(e->role, ':');
        auth_who *w = &t->whos[i];

        if (colon != NULL) {
            *colon = '\0';
            w->machine = colon + 1;
        }
        w->name = e->name;
        w->role = e->role;
        w->revoked = e->revoked;
        w->operator_ = strcmp(e->role, "operator") == 0;
    }
    return 0;
}

static int
rule_add(auth_tables *t, const char *who, const char *glob)
{
    auth_rule *r;

    if (t->nrules == AUTH_RULES_MAX) {
        return E2BIG;
    }
    if (t->rules == NULL &&
        (t->rules = calloc(AUTH_RULES_MAX, sizeof(*t->rules))) == NULL) {
        return ENOMEM;
    }
    r = &t->rules[t->nrules++];
    snprintf(r->who, sizeof(r->who), "%s", who);
    snprintf(r->glob, sizeof(r->glob), "%s", glob);
    return 0;
}

/* Whether glob matches some method: a pattern that matches none is a typo
 * that would silently grant nothing. */
static bool
policy_glob_matches(const char *glob)
{
    size_t n;
    const wire_method *m = wire_methods(&n);

    for (size_t i = 0; i < n; i++) {
        if (fnmatch(glob, m[i].full_name, 0) == 0) {
            return true;
        }
    }
    return false;
}

/* Reads the policy file into t; ENOENT: the default policy is used. A line
 * that does not parse refuses the whole file (err says which line). */
static int
policy_read(const char *path, auth_tables *t, char *err, size_t errlen)
{
    char line[POLICY_LINE_MAX];
    FILE *f;
    int fd, lineno = 0, rv;

    if ((rv = trust_open(path, &fd, err, errlen)) != 0) {
        if (rv != ENOENT) {
            return rv;
        }
        for (size_t i = 0;
             i < sizeof(auth_default_policy) / sizeof(auth_default_policy[0]);
             i++) {
            if ((rv = rule_add(t, auth_default_policy[i][0],
                               auth_default_policy[i][1])) != 0) {
                return rv;
            }
        }
        t->default_policy = true;
        return auth_kv_defaults(t);
    }
    if ((f = fdopen(fd, "r")) == NULL) {
        rv = errno;
        close(fd);
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(rv));
        return rv;
    }
    while (rv == 0 && fgets(line, sizeof(line), f) != NULL) {
        char *save = NULL, *who, *glob;
        char *hash;
        size_t n = strlen(line);

        lineno++;
        /* A line fgets split would read on as a line of its own (the tail
         * of a long comment as a rule); a NUL byte would end it early. */
        if (n + 1 == sizeof(line) && line[n - 1] != '\n') {
            snprintf(err, errlen, "%s line %d: longer than %d bytes", path,
                     lineno, POLICY_LINE_MAX - 2);
            rv = EINVAL;
            break;
        }
        if ((n == 0 || line[n - 1] != '\n') && !feof(f)) {
            snprintf(err, errlen, "%s line %d: holds a NUL byte", path, lineno);
            rv = EINVAL;
            break;
        }
        hash = strchr(line, '#');
        if (hash != NULL) {
            *hash = '\0';
        }
        if ((who = strtok_r(line, " \t\r\n", &save)) == NULL) {
            continue;
        }
        if (!(who[0] == '@' ? principal_name_ok(who + 1)
                            : principal_role_ok(who)) ||
            strchr(who, ':') != NULL) {
            snprintf(err, errlen,
                     "%s line %d: \"%s\" is neither a role nor @NAME", path,
                     lineno, who);
            rv = EINVAL;
            break;
        }
        if ((glob = strtok_r(NULL, " \t\r\n", &save)) == NULL) {
            snprintf(err, errlen, "%s line %d: %s has no method pattern", path,
                     lineno, who);
            rv = EINVAL;
            break;
        }
        if (auth_kv_verb(glob)) {
            rv = auth_kv_line(t, who, glob, &save, path, lineno, err, errlen);
            continue;
        }
        for (; glob != NULL; glob = strtok_r(NULL, " \t\r\n", &save)) {
            if (strlen(glob) >= WIRE_METHOD_MAX) {
                snprintf(err, errlen, "%s line %d: pattern too long", path,
                         lineno);
                rv = EINVAL;
                break;
            }
            if (!policy_glob_matches(glob)) {
                snprintf(err, errlen,
                         "%s line %d: \"%.200s\" matches no method (full "
                         "names look like /once.v1.Counter/Increment)",
                         path, lineno, glob);
                rv = EINVAL;
                break;
            }
            if ((rv = rule_add(t, who, glob)) != 0) {
                snprintf(err, errlen, "%s line %d: too many rules", path,
                         lineno);
                break;
            }
        }
    }
    fclose(f);
    return rv;
}

int
auth_tables_load(auth *a, auth_tables *t, bool *present, char *err,
                 size_t errlen)
{
    int rv;

    memset(t, 0, sizeof(*t));
    *present = true;
    /* The folder too: whoever may write it may swap the files. */
    if ((rv = trust_dir(a->data_dir, err, errlen)) != 0) {
        return rv;
    }
    rv = principals_read(a->principals_path, &t->plist, err, errlen);
    if (rv == ENOENT) {
        *present = false;
    } else if (rv != 0) {
        if (rv != EINVAL && rv != EPERM && err[0] == '\0') {
            snprintf(err, errlen, "cannot read %.400s: %s", a->principals_path,
                     strerror(rv));
        }
        return rv;
    }
    if ((rv = tables_index(t)) != 0 ||
        (rv = policy_read(a->policy_path, t, err, errlen)) != 0) {
        auth_tables_fini(t);
    }
    return rv;
}

void
auth_log_mode(const auth *a, const auth_tables *t, bool enabled,
              const char *when)
{
    size_t live = 0;
    unsigned mode;

    if (!enabled) {
        log_warn("%sno principals file %s: onced runs OPEN — requests are "
                 "NOT authenticated, every caller may call every method and "
                 "read any result it can name. Add principals with `oncectl "
                 "principal add --data DIR NAME --role ROLE --key-out FILE`, "
                 "or start with --dev",
                 when, a->principals_path);
        return;
    }
    for (size_t i = 0; i < t->plist.n; i++) {
        live += !t->whos[i].revoked;
    }
    log_info("%sauthentication on: %zu principals (%zu revoked) from %s; "
             "policy %s",
             when, t->plist.n, t->plist.n - live, a->principals_path,
             t->default_policy ? "built-in default (no policy file)"
                               : a->policy_path);
    if (trust_readable_by_others(a->principals_path, &mode)) {
        log_warn("%s is readable by others (mode %03o): it holds every "
                 "principal's key, so whoever can read it can sign "
                 "requests as any principal, operators included. Fix: "
                 "chmod 600 %s, then replace the keys (oncectl principal "
                 "add with new names, and revoke the old ones)",
                 a->principals_path, mode, a->principals_path);
    }
}

/* Dev mode: a principals file with the operator "dev" and its key in
 * <data>/dev.key, created on first start. */
static int
auth_dev_create(const char *data_dir, const char *principals_path)
{
    char keypath[AUTH_PATH_MAX];
    principal_list l = {0};
    principal_entry e;
    int rv;

    if (snprintf(keypath, sizeof(keypath), "%s/dev.key", data_dir) >=
        (int)sizeof(keypath)) {
        return ENAMETOOLONG;
    }
    memset(&e, 0, sizeof(e));
    snprintf(e.name, sizeof(e.name), "%s", AUTH_DEV_NAME);
    snprintf(e.role, sizeof(e.role), "%s", AUTH_DEV_ROLE);
    crypto_auth_keygen(e.key);
    if ((rv = keyfile_write(keypath, e.name, e.key, true)) != 0) {
        log_error("dev mode: cannot write %s: %s", keypath, strerror(rv));
    } else if ((rv = principals_append(&l, &e)) != 0 ||
               (rv = principals_write(principals_path, &l)) != 0) {
        log_error("dev mode: cannot write %s: %s", principals_path,
                  strerror(rv));
    }
    sodium_memzero(&e, sizeof(e));
    principals_fini(&l);
    if (rv == 0) {
        log_warn("DEV MODE: created %s with the operator \"dev\" and wrote "
                 "its key to %s (mode 0600). oncectl picks up ./data/dev.key "
                 "by itself; otherwise pass --key-file %s or set "
                 "ONCE_KEY_FILE. Not for production",
                 principals_path, keypath, keypath);
    }
    return rv;
}

int
auth_open(auth **ap, const char *data_dir, bool dev)
{
    auth *a;
    char err[512] = "";
    bool present;
    int rv;

    if (sodium_init() < 0) {
        log_error("libsodium cannot be initialised");
        return EIO;
    }
    if ((a = calloc(1, sizeof(*a))) == NULL) {
        return ENOMEM;
    }
    if (snprintf(a->data_dir, sizeof(a->data_dir), "%s", data_dir) >=
            AUTH_PATH_MAX ||
        snprintf(a->principals_path, sizeof(a->principals_path),
                 "%s/principals", data_dir) >= AUTH_PATH_MAX ||
        snprintf(a->policy_path, sizeof(a->policy_path), "%s/policy",
                 data_dir) >= AUTH_PATH_MAX) {
        free(a);
        return ENAMETOOLONG;
    }
    if (dev && !auth_file_stat(a->principals_path).exists) {
        if ((rv = auth_dev_create(data_dir, a->principals_path)) != 0) {
            free(a);
            return rv;
        }
    } else if (dev && auth_file_stat(a->principals_path).exists) {
        log_warn("DEV MODE: principals from %s; the operator \"dev\" key is "
                 "%s/dev.key (oncectl --key-file, or ONCE_KEY_FILE)",
                 a->principals_path, data_dir);
    }
    a->psig = auth_file_stat(a->principals_path);
    a->polsig = auth_file_stat(a->policy_path);
    if ((rv = auth_tables_load(a, &a->t, &present, err, sizeof(err))) != 0) {
        log_error("%s", err[0] != '\0' ? err : strerror(rv));
        free(a);
        return rv;
    }
    a->enabled = present;
    a->w_enabled = present;
    pthread_mutex_init(&a->kr_mtx, NULL);
    if ((rv = auth_keyring_publish(a)) != 0) {
        auth_tables_fini(&a->t);
        pthread_mutex_destroy(&a->kr_mtx);
        free(a);
        return rv;
    }
    auth_log_mode(a, &a->t, a->enabled, "");
    *ap = a;
    return 0;
}

void
auth_close(auth *a)
{
    if (a == NULL) {
        return;
    }
    auth_watch_stop(a);
    auth_tables_fini(&a->t);
    auth_keyring_fini(a);
    pthread_mutex_destroy(&a->kr_mtx);
    free(a);
}

static const auth_who *
auth_find(const auth *a, const char *name, const principal_entry **ep)
{
    principal_entry key;
    const principal_entry *e;

    if (strlen(name) > PRINCIPAL_NAME_MAX) {
        return NULL;
    }
    snprintf(key.name, sizeof(key.name), "%s", name);
    e = a->t.plist.n == 0 ? NULL
                          : bsearch(&key, a->t.plist.v, a->t.plist.n,
                                    sizeof(*a->t.plist.v), entry_cmp);
    if (e == NULL) {
        return NULL;
    }
    *ep = e;
    return &a->t.whos[e - a->t.plist.v];
}

bool
auth_check(auth *a, server_call *c, const uint8_t *body, size_t len,
           const uint8_t *principal, size_t principal_len, uint64_t verified)
{
    const principal_entry *e = NULL;
    const auth_who *w = NULL;
    const uint8_t *tag;
    size_t signed_len;
    char pname[PRINCIPAL_NAME_MAX + 1];

    if (!a->enabled) {
        c->who = &auth_anon;
        return true;
    }
    if (!auth_tag_parts(c, body, len, principal, principal_len, pname,
                        &signed_len, &tag)) {
        return false;
    }
    /* The tag is checked over the bytes as received, before anything of
     * the envelope is decoded (envelope.h) — by the verifier thread when
     * it did so under the tables in force, else here. */
    if (pname[0] != '\0') {
        w = auth_find(a, pname, &e);
    }
    if (w == NULL || (verified != a->gen &&
                      !auth_tag_verify(tag, body, signed_len, e->key))) {
        auth_fail_bad_tag(c, principal, principal_len);
        return false;
    }
    c->who = w;
    return true;
}

bool
auth_rule_mine(const char *who, const auth_who *w)
{
    return who[0] == '@' ? strcmp(who + 1, w->name) == 0
                         : strcmp(who, w->role) == 0;
}

bool
auth_permit(const auth *a, server_call *c, const char *method)
{
    const auth_who *w = c->who;

    if (w == NULL || w->open) {
        return true;
    }
    if (w->revoked) {
        call_fail(c, ONCE__V1__CODE__PERMISSION_DENIED,
                  REASON_PRINCIPAL_REVOKED,
                  "principal \"%s\" is revoked: it may call nothing, retries "
                  "of earlier calls included",
                  w->name);
        return false;
    }
    for (size_t i = 0; i < a->t.nrules; i++) {
        const auth_rule *r = &a->t.rules[i];
        if (auth_rule_mine(r->who, w) && fnmatch(r->glob, method, 0) == 0) {
            return true;
        }
    }
    call_fail(c, ONCE__V1__CODE__PERMISSION_DENIED, REASON_METHOD_DENIED,
              "principal \"%s\" (role %s) may not call %s", w->name, w->role,
              method);
    return false;
}

bool
auth_owns(server_call *c, uint64_t client_id, const char *principal)
{
    const auth_who *w = c->who;

    if (w == NULL || w->open ||
        strcmp(w->name, principal != NULL ? principal : "") == 0) {
        return true;
    }
    call_fail(c, ONCE__V1__CODE__PERMISSION_DENIED, REASON_NOT_YOUR_LEASE,
              "client id %llu belongs to another principal; \"%s\" may not "
              "use it or see its results",
              (unsigned long long)client_id, w->name);
    return false;
}

bool
auth_lease_mine(const server_call *c, bool exists, const char *principal,
                bool operator_sees)
{
    const auth_who *w = c->who;

    if (w == NULL || w->open) {
        return true;
    }
    if (operator_sees && w->operator_) {
        return true;
    }
    return exists && strcmp(w->name, principal != NULL ? principal : "") == 0;
}

bool
auth_lease_scope(server_call *c, uint64_t client_id, bool exists,
                 const char *principal, bool operator_sees)
{
    if (auth_lease_mine(c, exists, principal, operator_sees)) {
        return true;
    }
    /* One answer for another principal's id, a never-issued one and a
     * collected one: no principal learns which ids exist. */
    call_fail(c, ONCE__V1__CODE__PERMISSION_DENIED, REASON_NOT_YOUR_LEASE,
              "client id %llu is not a lease of principal \"%s\" (onced "
              "does not say whether it is another principal's, never "
              "issued or collected)",
              (unsigned long long)client_id, c->who->name);
    return false;
}

bool
auth_machine(server_call *c, const char *machine)
{
    const auth_who *w = c->who;

    if (w == NULL || w->open || w->machine == NULL ||
        strcmp(w->machine, machine) == 0) {
        return true;
    }
    call_fail(c, ONCE__V1__CODE__PERMISSION_DENIED, REASON_WRONG_MACHINE,
              "principal \"%s\" acts for machine %s only", w->name, w->machine);
    return false;
}

const char *
auth_lease_principal(const server_call *c, const char *requested)
{
    if (c->who == NULL || c->who->open) {
        return requested;
    }
    return c->who->name;
}
