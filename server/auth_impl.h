/*
 * auth_impl.h — the inside of auth.h, shared by auth.c (the files, the
 * tables, the checks), auth_kv.c (the prefix rules: their policy lines,
 * and the key check of once.v1.KV), auth_outbox.c (the topic check of
 * once.v1.Outbox and of a Txn's emit, on the same rules) and auth_watch.c
 * (the thread that re-reads the files and hands new tables to the
 * executor).
 *
 * Owns the layout of struct auth and which thread may touch which field.
 * Never: included outside server/auth*.c.
 *
 * The three files are one module and call each other both ways (auth.c
 * starts the watch; the watch builds tables with auth.c's readers;
 * auth.c's policy reader hands prefix lines to auth_kv.c, which matches
 * a rule's WHO with auth.c's auth_rule_mine); scripts/check_layers.py
 * reads this line:
 * Module: auth.c auth_kv.c auth_outbox.c auth_verify.c auth_watch.c
 */
#ifndef SERVER_AUTH_IMPL_H
#define SERVER_AUTH_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "base/periodic.h"
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

/* A prefix rule of the policy (auth_kv.c): "WHO kv-read|kv-write
 * PREFIX..." for keys, "WHO outbox-read|outbox-emit PREFIX..." for outbox
 * topics (auth_outbox.c). */
#define AUTH_KV_PREFIX_MAX 256
#define AUTH_KV_RULES_MAX  4096

typedef struct auth_kv_rule {
    char who[PRINCIPAL_NAME_MAX + 2]; /* a role, or "@" and a name */
    char prefix[AUTH_KV_PREFIX_MAX];  /* "{name}" stands for the caller's */
    bool all;   /* "*": every key (every topic but onced's own once.*) */
    bool topic; /* an outbox rule; else a key rule */
    bool write; /* kv-write (which reads too); outbox-emit (which does not) */
} auth_kv_rule;

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
    bool operator_; /* role "operator" (the console token, http_console.h) */
} auth_key;

/* The tables of one load: entries sorted by name, whos[i] about v[i]. */
typedef struct auth_tables {
    principal_list plist;
    auth_who *whos;
    auth_rule *rules;
    size_t nrules;
    auth_kv_rule *kv; /* key-prefix rules (auth_kv.c) */
    size_t nkv;
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

/* auth.c: whether a rule's WHO ("role" or "@name") names w. */
bool auth_rule_mine(const char *who, const auth_who *w);

/* auth_kv.c: whether tok is a prefix verb (kv-read, kv-write,
 * outbox-read, outbox-emit). */
bool auth_kv_verb(const char *tok);

/* auth_kv.c: whether the rule's prefix, "{name}" standing for name,
 * starts the len bytes at s ("*" covers everything). */
bool auth_prefix_covers(const auth_kv_rule *r, const char *name,
                        const uint8_t *s, size_t len);

/* auth_kv.c: adds one rule per PREFIX token that follows verb on a
 * policy line (strtok_r state *save). 0, or EINVAL/E2BIG with err saying
 * which line (path, lineno) and why. */
int auth_kv_line(auth_tables *t, const char *who, const char *verb, char **save,
                 const char *path, int lineno, char *err, size_t errlen);

/* auth_kv.c: the prefix rules (keys and topics) of the built-in default
 * policy. */
int auth_kv_defaults(auth_tables *t);
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
