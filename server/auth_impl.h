/*
 * auth_impl.h — the inside of auth.h, shared by auth.c (the files, the
 * tables, the checks) and auth_watch.c (the thread that re-reads the
 * files and hands new tables to the executor).
 *
 * Owns the layout of struct auth and which thread may touch which field.
 * Never: included outside server/auth*.c.
 */
#ifndef SERVER_AUTH_IMPL_H
#define SERVER_AUTH_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "proto/periodic.h"
#include "proto/principals.h"
#include "proto/wire.h"

/* auth.h's types, named here without including it (auth.h is the outside
 * of this header, not below it). */
typedef struct auth auth;
typedef struct auth_who auth_who;
typedef struct server_call server_call;

#define AUTH_PATH_MAX   4096
#define AUTH_RULES_MAX  4096
#define AUTH_DEV_NAME   "dev"
#define AUTH_DEV_ROLE   "operator"
#define POLICY_LINE_MAX 4096

typedef struct auth_rule {
    char who[PRINCIPAL_NAME_MAX + 2]; /* a role, or "@" and a name */
    char glob[WIRE_METHOD_MAX];
} auth_rule;

/* What a stat said about a file, to notice a change. */
typedef struct file_sig {
    bool exists;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtim;
    struct timespec ctim;
} file_sig;

/* One principal's key as the verifier thread sees it (auth_verify.c). */
typedef struct auth_key {
    char name[PRINCIPAL_NAME_MAX + 1];
    uint8_t key[AUTH_KEY_BYTES];
} auth_key;

/* The tables of one load: entries sorted by name, whos[i] about v[i]. */
typedef struct auth_tables {
    principal_list plist;
    auth_who *whos;
    auth_rule *rules;
    size_t nrules;
    bool default_policy;
} auth_tables;

struct auth {
    char data_dir[AUTH_PATH_MAX];
    char principals_path[AUTH_PATH_MAX];
    char policy_path[AUTH_PATH_MAX];

    /* The tables in force. Executor thread only once the executor runs
     * (auth_watch.c's install task replaces them there, between calls). */
    bool enabled;
    auth_tables t;
    uint64_t gen; /* bumped each time tables are put in force */

    /* A copy of the keys in force for the verifier thread (auth_verify):
     * names sorted, the mode and the generation they belong to. Written
     * by whoever puts tables in force (auth_keyring_publish), read by
     * auth_verify; kr_mtx protects the four. */
    pthread_mutex_t kr_mtx;
    auth_key *kr;
    size_t nkr;
    bool kr_enabled;
    uint64_t kr_gen;

    /* The watcher (auth_watch.c); NULL unless it runs (set and read by
     * the owner's thread, which also calls auth_request_reload). */
    periodic *watch;
    void (*post)(void *, void (*)(void *), void *); /* auth_post_fn */
    void *post_arg;
    /* Watcher thread only (before it starts: auth_open): */
    file_sig psig; /* the files as last read */
    file_sig polsig;
    bool w_enabled; /* the enabled of the last tables handed over */
};

/* auth.c: what stat says about path now. */
file_sig auth_file_stat(const char *path);

/* auth.c: loads both files into *t. Sets *present to whether the
 * principals file exists. 0, or an errno with err set (t is then empty). */
int auth_tables_load(auth *a, auth_tables *t, bool *present, char *err,
                     size_t errlen);
void auth_tables_fini(auth_tables *t);

/* auth_verify.c: puts a copy of a->t's keys, a->enabled and a new
 * generation (a->gen + 1) where auth_verify reads them. Call after the
 * tables in force changed, on the thread that changed them. 0 or ENOMEM
 * (the previous copy stays; the executor then checks every tag itself,
 * as the generations differ). */
int auth_keyring_publish(auth *a);
void auth_keyring_fini(auth *a);

/* auth_verify.c: the principal named by principal[0, principal_len) cut
 * to a C string in pname (PRINCIPAL_NAME_MAX + 1 bytes; "" when it cannot
 * name one) and the tag trailer of body split off (*signed_len, *tag).
 * False with UNAUTHENTICATED (MISSING_TAG, MISSING_PRINCIPAL) set on c. */
bool auth_tag_parts(server_call *c, const uint8_t *body, size_t len,
                    const uint8_t *principal, size_t principal_len, char *pname,
                    size_t *signed_len, const uint8_t **tag);

/* auth_verify.c: sets UNAUTHENTICATED/BAD_TAG on c for the principal
 * named (as received) by principal[0, principal_len). */
void auth_fail_bad_tag(server_call *c, const uint8_t *principal,
                       size_t principal_len);

/* auth.c: logs the mode tables t (enabled or OPEN) put in force. */
void auth_log_mode(const auth *a, const auth_tables *t, bool enabled,
                   const char *when);

#endif /* SERVER_AUTH_IMPL_H */
