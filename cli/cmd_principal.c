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

/* What `principal SUB ...` asked for. */
typedef struct pcmd {
    const char *sub, *data, *role, *key_out, *name;
    bool json;
    char path[PCMD_PATH_MAX]; /* data/principals */
} pcmd;

/* Parses argv[1..] into *c. -1 to go on; else the exit status (usage
 * errors, --help). */
static int
pcmd_args(int argc, char **argv, pcmd *c)
{
    const char *v;

    for (int i = 1; i < argc; i++) {
        int m;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(usage_principal, stdout);
            return 0;
        }
        if ((m = pcmd_opt(argc, argv, &i, "--data", &v)) != 0) {
            if (m < 0 || v[0] == '\0') {
                return pcmd_usage(c->json, "--data needs a DIR%s", NULL);
            }
            c->data = v;
        } else if ((m = pcmd_opt(argc, argv, &i, "--role", &v)) != 0) {
            if (m < 0 || !principal_role_ok(v)) {
                return pcmd_usage(c->json,
                                  "--role wants operator, scheduler, "
                                  "agent:MACHINE or another word, got '%s'",
                                  m < 0 ? "" : v);
            }
            c->role = v;
        } else if ((m = pcmd_opt(argc, argv, &i, "--key-out", &v)) != 0) {
            if (m < 0 || v[0] == '\0') {
                return pcmd_usage(c->json, "--key-out needs a FILE%s", NULL);
            }
            c->key_out = v;
        } else if (argv[i][0] == '-') {
            return pcmd_usage(c->json, "unknown option '%s'", argv[i]);
        } else if (c->name == NULL) {
            c->name = argv[i];
        } else {
            return pcmd_usage(c->json, "unexpected argument '%s'", argv[i]);
        }
    }
    return -1;
}

/* The checks between the arguments. -1 to go on; else the exit status. */
static int
pcmd_check(pcmd *c)
{
    if (strcmp(c->sub, "list") == 0 ? c->name != NULL : c->name == NULL) {
        return pcmd_usage(c->json, "principal %s: wrong arguments", c->sub);
    }
    if (c->name != NULL && !principal_name_ok(c->name)) {
        return pcmd_usage(c->json,
                          "a principal name is 1 to 128 of A-Z a-z 0-9 . _ "
                          "@ -, got '%s'",
                          c->name);
    }
    if (strcmp(c->sub, "add") == 0 && c->role == NULL) {
        return pcmd_usage(c->json, "principal add needs --role ROLE%s", NULL);
    }
    if (strcmp(c->sub, "add") != 0 && (c->role != NULL || c->key_out != NULL)) {
        return pcmd_usage(c->json, "--role and --key-out go with add only%s",
                          NULL);
    }
    if (sodium_init() < 0) {
        return pcmd_fail(c->json, ONCE_REASON_NO_SODIUM,
                         "libsodium cannot be initialised");
    }
    if (snprintf(c->path, sizeof(c->path), "%s/principals", c->data) >=
        (int)sizeof(c->path)) {
        return pcmd_usage(c->json, "--data path too long%s", NULL);
    }
    return -1;
}

/* `principal list`; present: the file exists (else onced runs OPEN). */
static int
pcmd_list(const pcmd *c, const principal_list *l, bool present)
{
    json_obj j, el;

    if (c->json) {
        json_begin(&j, stdout);
        json_bool(&j, "authentication", present);
        json_arr_begin(&j, "principals");
    } else if (!present) {
        printf("no principals file %s: onced runs OPEN\n", c->path);
    }
    for (size_t i = 0; i < l->n; i++) {
        if (c->json) {
            json_elem_begin(&j, &el);
            json_str(&el, "name", l->v[i].name);
            json_str(&el, "role", l->v[i].role);
            json_bool(&el, "revoked", l->v[i].revoked);
            json_elem_end(&el);
        } else {
            printf("%s %s%s\n", l->v[i].name, l->v[i].role,
                   l->v[i].revoked ? " revoked" : "");
        }
    }
    if (c->json) {
        json_arr_end(&j);
        json_end(&j);
    }
    return 0;
}

/* Says what `principal add` made; hex is the new key. */
static void
pcmd_added(const pcmd *c, const char *hex)
{
    if (c->json) {
        json_obj j;
        json_begin(&j, stdout);
        json_str(&j, "principal", c->name);
        json_str(&j, "role", c->role);
        if (c->key_out != NULL) {
            json_str(&j, "key_file", c->key_out);
        } else {
            json_str(&j, "key", hex);
        }
        json_end(&j);
    } else if (c->key_out != NULL) {
        printf("principal %s (role %s) added; its key is in %s — pass it "
               "as oncectl --key-file %s\n",
               c->name, c->role, c->key_out, c->key_out);
    } else {
        printf("principal %s (role %s) added; its key, shown this once:\n"
               "%s %s\n(save that line to a file, mode 0600, and pass it "
               "as --key-file)\n",
               c->name, c->role, c->name, hex);
    }
}

/* `principal add`: a new key, in --key-out when given, then the file. */
static int
pcmd_add(const pcmd *c, principal_list *l)
{
    const principal_entry *e = principals_find(l, c->name);
    char msg[PCMD_PATH_MAX + 1024], hex[2 * AUTH_KEY_BYTES + 1];
    principal_entry ne;
    int rv;

    if (e != NULL) {
        snprintf(msg, sizeof(msg),
                 "principal %s exists (role %s%s); keys are never "
                 "replaced — revoke it and add another name",
                 c->name, e->role, e->revoked ? ", revoked" : "");
        return pcmd_fail(c->json, REASON_PRINCIPAL_EXISTS, msg);
    }
    memset(&ne, 0, sizeof(ne));
    snprintf(ne.name, sizeof(ne.name), "%s", c->name);
    snprintf(ne.role, sizeof(ne.role), "%s", c->role);
    crypto_auth_keygen(ne.key);
    if (c->key_out != NULL &&
        (rv = keyfile_write(c->key_out, c->name, ne.key, false)) != 0) {
        snprintf(msg, sizeof(msg), "cannot write the key file %s: %s%s",
                 c->key_out, strerror(rv),
                 rv == EEXIST ? " (key files are never overwritten)" : "");
        sodium_memzero(&ne, sizeof(ne));
        return pcmd_fail(c->json, REASON_KEY_FILE, msg);
    }
    if ((rv = principals_append(l, &ne)) != 0 ||
        (rv = principals_write(c->path, l)) != 0) {
        snprintf(msg, sizeof(msg), "cannot write %s: %s", c->path,
                 strerror(rv));
        if (c->key_out != NULL) {
            unlink(c->key_out);
        }
        sodium_memzero(&ne, sizeof(ne));
        return pcmd_fail(c->json, REASON_WRITE_FAILED, msg);
    }
    sodium_bin2hex(hex, sizeof(hex), ne.key, AUTH_KEY_BYTES);
    pcmd_added(c, hex);
    sodium_memzero(hex, sizeof(hex));
    sodium_memzero(&ne, sizeof(ne));
    return 0;
}

/* `principal revoke` and `principal restore`. */
static int
pcmd_flag(const pcmd *c, principal_list *l)
{
    principal_entry *e = principals_find(l, c->name);
    char msg[PCMD_PATH_MAX + 1024];
    int rv;

    if (e == NULL) {
        snprintf(msg, sizeof(msg), "no principal %s in %s", c->name, c->path);
        return pcmd_fail(c->json, REASON_NO_PRINCIPAL, msg);
    }
    e->revoked = strcmp(c->sub, "revoke") == 0;
    if ((rv = principals_write(c->path, l)) != 0) {
        snprintf(msg, sizeof(msg), "cannot write %s: %s", c->path,
                 strerror(rv));
        return pcmd_fail(c->json, REASON_WRITE_FAILED, msg);
    }
    if (c->json) {
        json_obj j;
        json_begin(&j, stdout);
        json_str(&j, "principal", c->name);
        json_bool(&j, "revoked", e->revoked);
        json_end(&j);
    } else {
        printf("principal %s %s\n", c->name,
               e->revoked ? "revoked" : "restored");
    }
    return 0;
}

/* Reads the principals file (a missing one is fine for add and list) and
 * runs the subcommand, the data folder locked by dirfd. */
static int
pcmd_run(const pcmd *c)
{
    principal_list l = {0};
    char err[512], msg[PCMD_PATH_MAX + 1024];
    int rv, status;

    err[0] = '\0';
    rv = principals_read(c->path, &l, err, sizeof(err));
    if (rv != 0 && !(rv == ENOENT && strcmp(c->sub, "add") == 0) &&
        !(rv == ENOENT && strcmp(c->sub, "list") == 0)) {
        snprintf(msg, sizeof(msg), "%s",
                 rv == EINVAL || rv == EPERM ? err
                 : rv == ENOENT ? "no principals file: onced there runs OPEN"
                                : strerror(rv));
        status = pcmd_fail(c->json, REASON_BAD_PRINCIPALS, msg);
    } else if (strcmp(c->sub, "list") == 0) {
        status = pcmd_list(c, &l, rv == 0);
    } else if (strcmp(c->sub, "add") == 0) {
        status = pcmd_add(c, &l);
    } else {
        status = pcmd_flag(c, &l);
    }
    principals_fini(&l);
    return status;
}

int
cmd_principal(int argc, char **argv, bool json)
{
    pcmd c = {.sub = argc > 0 ? argv[0] : NULL,
              .data = PCMD_DATA_DEFAULT,
              .json = json};
    char msg[PCMD_PATH_MAX + 1024];
    int dirfd, status;

    if (c.sub == NULL || strcmp(c.sub, "-h") == 0 ||
        strcmp(c.sub, "--help") == 0) {
        fputs(usage_principal, c.sub == NULL ? stderr : stdout);
        return c.sub == NULL ? 2 : 0;
    }
    if (strcmp(c.sub, "add") != 0 && strcmp(c.sub, "list") != 0 &&
        strcmp(c.sub, "revoke") != 0 && strcmp(c.sub, "restore") != 0) {
        return pcmd_usage(json,
                          "unknown subcommand '%s' (add, list, revoke, "
                          "restore)",
                          c.sub);
    }
    if ((status = pcmd_args(argc, argv, &c)) >= 0 ||
        (status = pcmd_check(&c)) >= 0) {
        return status;
    }
    /* One edit at a time on this data folder. */
    if ((dirfd = open(c.data, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
        flock(dirfd, LOCK_EX) != 0) {
        snprintf(msg, sizeof(msg), "cannot open the data folder %s: %s", c.data,
                 strerror(errno));
        if (dirfd >= 0) {
            close(dirfd);
        }
        return pcmd_fail(json, REASON_NO_DATA_DIR, msg);
    }
    status = pcmd_run(&c);
    close(dirfd);
    return status;
}
