/*
 * cmd_principal.c — `oncectl principal ...`: the principals file of a data
 * folder (format in proto/principals.h), edited in place while onced runs;
 * onced notices the change within ~100 ms (or at once on SIGHUP).
 *
 * Owns: generating keys (libsodium crypto_auth_keygen), writing them once —
 * to the key file named by --key-out (mode 0600, never overwritten) or,
 * without it, on stdout — and the add/revoke/restore edits, each under an
 * flock of the data folder so two edits never lose one another.
 * Never: prints a key except on the add that created it; talks to onced.
 */
#include "cli/cmds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <sodium.h>

#include "cli/json_out.h"
#include "base/keyfile.h"
#include "proto/principals.h"
#include "proto/reasons.h"

#define PCMD_DATA_DEFAULT "./data"
#define PCMD_PATH_MAX     4096

static const char usage_principal[] =
    "usage: oncectl principal add NAME --role ROLE [--key-out FILE] "
    "[--data DIR]\n"
    "       oncectl principal list [--data DIR]\n"
    "       oncectl principal revoke NAME [--data DIR]\n"
    "       oncectl principal restore NAME [--data DIR]\n"
    "\n"
    "Edits DIR/principals (default DIR ./data) of a local onced; a running\n"
    "onced picks the change up within ~100 ms. With a principals file onced\n"
    "authenticates every request; without one it runs OPEN.\n"
    "\n"
    "add      a new principal with a fresh key. ROLE: operator, scheduler,\n"
    "         agent:MACHINE (an agent acts for its machine only), or a word\n"
    "         the policy file (DIR/policy) names. The key is written to\n"
    "         --key-out FILE (mode 0600, never overwritten) — the file\n"
    "         clients pass as --key-file — or, without --key-out, printed\n"
    "         once on stdout. It is never shown again.\n"
    "list     names, roles, revoked or not (never keys).\n"
    "revoke   the principal still authenticates but is denied every call,\n"
    "         retries of its earlier calls included (PERMISSION_DENIED).\n"
    "restore  undoes revoke: retries then get their stored results.\n";

static int
pcmd_usage(bool json, const char *fmt, const char *arg)
{
    char msg[256];

    snprintf(msg, sizeof(msg), fmt, arg != NULL ? arg : "");
    if (json) {
        json_error(stdout, "INVALID_ARGUMENT", REASON_USAGE, msg);
    }
    fprintf(stderr, "oncectl principal: %s\n(see oncectl principal --help)\n",
            msg);
    return 2;
}

static int
pcmd_fail(bool json, const char *reason, const char *msg)
{
    if (json) {
        json_error(stdout, "FAILED_PRECONDITION", reason, msg);
    }
    fprintf(stderr, "oncectl principal: %s\n", msg);
    return 1;
}

/* "--name VALUE" or "--name=VALUE" at argv[*i]: 1 (value set), 0 (not
 * this option), -1 (value missing). */
static int
pcmd_opt(int argc, char **argv, int *i, const char *name, const char **v)
{
    size_t n = strlen(name);

    if (strncmp(argv[*i], name, n) != 0) {
        return 0;
    }
    if (argv[*i][n] == '=') {
        *v = argv[*i] + n + 1;
        return 1;
    }
    if (argv[*i][n] != '\0') {
        return 0;
    }
    if (*i + 1 >= argc) {
        return -1;
    }
    *v = argv[++*i];
    return 1;
}

int
cmd_principal(int argc, char **argv, bool json)
{
    const char *sub = argc > 0 ? argv[0] : NULL;
    const char *data = PCMD_DATA_DEFAULT, *role = NULL, *key_out = NULL;
    const char *name = NULL, *v;
    char path[PCMD_PATH_MAX], err[512], msg[PCMD_PATH_MAX + 1024];
    principal_list l = {0};
    principal_entry *e;
    int dirfd = -1, rv, status = 0;

    if (sub == NULL || strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0) {
        fputs(usage_principal, sub == NULL ? stderr : stdout);
        return sub == NULL ? 2 : 0;
    }
    if (strcmp(sub, "add") != 0 && strcmp(sub, "list") != 0 &&
        strcmp(sub, "revoke") != 0 && strcmp(sub, "restore") != 0) {
        return pcmd_usage(json,
                          "unknown subcommand '%s' (add, list, revoke, "
                          "restore)",
                          sub);
    }
    for (int i = 1; i < argc; i++) {
        int m;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(usage_principal, stdout);
            return 0;
        }
        if ((m = pcmd_opt(argc, argv, &i, "--data", &v)) != 0) {
            if (m < 0 || v[0] == '\0') {
                return pcmd_usage(json, "--data needs a DIR%s", NULL);
            }
            data = v;
        } else if ((m = pcmd_opt(argc, argv, &i, "--role", &v)) != 0) {
            if (m < 0 || !principal_role_ok(v)) {
                return pcmd_usage(json,
                                  "--role wants operator, scheduler, "
                                  "agent:MACHINE or another word, got '%s'",
                                  m < 0 ? "" : v);
            }
            role = v;
        } else if ((m = pcmd_opt(argc, argv, &i, "--key-out", &v)) != 0) {
            if (m < 0 || v[0] == '\0') {
                return pcmd_usage(json, "--key-out needs a FILE%s", NULL);
            }
            key_out = v;
        } else if (argv[i][0] == '-') {
            return pcmd_usage(json, "unknown option '%s'", argv[i]);
        } else if (name == NULL) {
            name = argv[i];
        } else {
            return pcmd_usage(json, "unexpected argument '%s'", argv[i]);
        }
    }
    if (strcmp(sub, "list") == 0 ? name != NULL : name == NULL) {
        return pcmd_usage(json, "principal %s: wrong arguments", sub);
    }
    if (name != NULL && !principal_name_ok(name)) {
        return pcmd_usage(json,
                          "a principal name is 1 to 128 of A-Z a-z 0-9 . _ "
                          "@ -, got '%s'",
                          name);
    }
    if (strcmp(sub, "add") == 0 && role == NULL) {
        return pcmd_usage(json, "principal add needs --role ROLE%s", NULL);
    }
    if (strcmp(sub, "add") != 0 && (role != NULL || key_out != NULL)) {
        return pcmd_usage(json, "--role and --key-out go with add only%s",
                          NULL);
    }
    if (sodium_init() < 0) {
        return pcmd_fail(json, ONCE_REASON_NO_SODIUM,
                         "libsodium cannot be initialised");
    }
    if (snprintf(path, sizeof(path), "%s/principals", data) >=
        (int)sizeof(path)) {
        return pcmd_usage(json, "--data path too long%s", NULL);
    }
    /* One edit at a time on this data folder. */
    if ((dirfd = open(data, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
        flock(dirfd, LOCK_EX) != 0) {
        snprintf(msg, sizeof(msg), "cannot open the data folder %s: %s", data,
                 strerror(errno));
        if (dirfd >= 0) {
            close(dirfd);
        }
        return pcmd_fail(json, REASON_NO_DATA_DIR, msg);
    }
    err[0] = '\0';
    rv = principals_read(path, &l, err, sizeof(err));
    if (rv != 0 && !(rv == ENOENT && strcmp(sub, "add") == 0) &&
        !(rv == ENOENT && strcmp(sub, "list") == 0)) {
        snprintf(msg, sizeof(msg), "%s",
                 rv == EINVAL || rv == EPERM ? err
                 : rv == ENOENT ? "no principals file: onced there runs OPEN"
                                : strerror(rv));
        status = pcmd_fail(json, REASON_BAD_PRINCIPALS, msg);
        goto out;
    }

    if (strcmp(sub, "list") == 0) {
        json_obj j, el;
        if (json) {
            json_begin(&j, stdout);
            json_bool(&j, "authentication", rv == 0);
            json_arr_begin(&j, "principals");
        } else if (rv == ENOENT) {
            printf("no principals file %s: onced runs OPEN\n", path);
        }
        for (size_t i = 0; i < l.n; i++) {
            if (json) {
                json_elem_begin(&j, &el);
                json_str(&el, "name", l.v[i].name);
                json_str(&el, "role", l.v[i].role);
                json_bool(&el, "revoked", l.v[i].revoked);
                json_elem_end(&el);
            } else {
                printf("%s %s%s\n", l.v[i].name, l.v[i].role,
                       l.v[i].revoked ? " revoked" : "");
            }
        }
        if (json) {
            json_arr_end(&j);
            json_end(&j);
        }
        goto out;
    }

    e = principals_find(&l, name);
    if (strcmp(sub, "add") == 0) {
        principal_entry ne;
        char hex[2 * AUTH_KEY_BYTES + 1];

        if (e != NULL) {
            snprintf(msg, sizeof(msg),
                     "principal %s exists (role %s%s); keys are never "
                     "replaced — revoke it and add another name",
                     name, e->role, e->revoked ? ", revoked" : "");
            status = pcmd_fail(json, REASON_PRINCIPAL_EXISTS, msg);
            goto out;
        }
        memset(&ne, 0, sizeof(ne));
        snprintf(ne.name, sizeof(ne.name), "%s", name);
        snprintf(ne.role, sizeof(ne.role), "%s", role);
        crypto_auth_keygen(ne.key);
        if (key_out != NULL &&
            (rv = keyfile_write(key_out, name, ne.key, false)) != 0) {
            snprintf(msg, sizeof(msg), "cannot write the key file %s: %s%s",
                     key_out, strerror(rv),
                     rv == EEXIST ? " (key files are never overwritten)" : "");
            sodium_memzero(&ne, sizeof(ne));
            status = pcmd_fail(json, REASON_KEY_FILE, msg);
            goto out;
        }
        if ((rv = principals_append(&l, &ne)) != 0 ||
            (rv = principals_write(path, &l)) != 0) {
            snprintf(msg, sizeof(msg), "cannot write %s: %s", path,
                     strerror(rv));
            if (key_out != NULL) {
                unlink(key_out);
            }
            sodium_memzero(&ne, sizeof(ne));
            status = pcmd_fail(json, REASON_WRITE_FAILED, msg);
            goto out;
        }
        sodium_bin2hex(hex, sizeof(hex), ne.key, AUTH_KEY_BYTES);
        if (json) {
            json_obj j;
            json_begin(&j, stdout);
            json_str(&j, "principal", name);
            json_str(&j, "role", role);
            if (key_out != NULL) {
                json_str(&j, "key_file", key_out);
            } else {
                json_str(&j, "key", hex);
            }
            json_end(&j);
        } else if (key_out != NULL) {
            printf("principal %s (role %s) added; its key is in %s — pass it "
                   "as oncectl --key-file %s\n",
                   name, role, key_out, key_out);
        } else {
            printf("principal %s (role %s) added; its key, shown this once:\n"
                   "%s %s\n(save that line to a file, mode 0600, and pass it "
                   "as --key-file)\n",
                   name, role, name, hex);
        }
        sodium_memzero(hex, sizeof(hex));
        sodium_memzero(&ne, sizeof(ne));
        goto out;
    }
    /* revoke, restore */
    if (e == NULL) {
        snprintf(msg, sizeof(msg), "no principal %s in %s", name, path);
        status = pcmd_fail(json, REASON_NO_PRINCIPAL, msg);
        goto out;
    }
    e->revoked = strcmp(sub, "revoke") == 0;
    if ((rv = principals_write(path, &l)) != 0) {
        snprintf(msg, sizeof(msg), "cannot write %s: %s", path, strerror(rv));
        status = pcmd_fail(json, REASON_WRITE_FAILED, msg);
        goto out;
    }
    if (json) {
        json_obj j;
        json_begin(&j, stdout);
        json_str(&j, "principal", name);
        json_bool(&j, "revoked", e->revoked);
        json_end(&j);
    } else {
        printf("principal %s %s\n", name, e->revoked ? "revoked" : "restored");
    }
out:
    principals_fini(&l);
    close(dirfd);
    return status;
}
