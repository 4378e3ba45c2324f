/*
 * principals.h — the principals file (<data>/principals), shared by onced
 * (reads it) and oncectl (writes it). Key files ("NAME KEYHEX", what a
 * client needs to sign as NAME) are base/keyfile.h.
 *
 * principals: one principal per line, "NAME ROLE KEYHEX [revoked]"; '#'
 * starts a comment. ROLE is "operator", "scheduler", "agent:MACHINE" or any
 * other word the policy file names. A revoked principal keeps its key (its
 * requests still authenticate) but is denied every method, so a retry of a
 * call it made earlier is PERMISSION_DENIED, not a stored result.
 * Written with mode 0600, atomically (temp file, fsync, rename:
 * trust_write_atomic).
 * Never: logs or prints a key; leaves a key in freed memory (wiped with
 * sodium_memzero).
 */
#ifndef PROTO_PRINCIPALS_H
#define PROTO_PRINCIPALS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/auth_tag.h"

#define PRINCIPAL_NAME_MAX 128
#define PRINCIPAL_ROLE_MAX 160 /* "agent:" + a machine name */

typedef struct principal_entry {
    char name[PRINCIPAL_NAME_MAX + 1];
    char role[PRINCIPAL_ROLE_MAX + 1]; /* as written: "agent:m1" */
    uint8_t key[AUTH_KEY_BYTES];
    bool revoked;
} principal_entry;

/* A growable array of entries; init with {0}. */
typedef struct principal_list {
    principal_entry *v;
    size_t n;
    size_t cap;
} principal_list;

/* 1..128 of [A-Za-z0-9._@-]: keyfile_name_ok, the name a key file signs
 * as. */
bool principal_name_ok(const char *s);

/* A word of [a-z0-9_-] (1..31), optionally ":" and a machine name of
 * [A-Za-z0-9._@-] (1..128). */
bool principal_role_ok(const char *s);

/*
 * Reads a principals file into *out (which must be empty), only if it is
 * a file that may grant authority (trust.h: no link, owned by us or root,
 * not group- or world-writable). Returns 0; ENOENT when there is no file;
 * EINVAL with err saying which line is bad; EPERM with err saying what is
 * wrong with the file and how to fix it; another errno when it cannot be
 * read (err set).
 */
int principals_read(const char *path, principal_list *out, char *err,
                    size_t errlen);

/* Writes l to path atomically with mode 0600. 0 or an errno. */
int principals_write(const char *path, const principal_list *l);

/* The entry named name, or NULL. */
principal_entry *principals_find(principal_list *l, const char *name);

/* Appends a copy of e. 0 or ENOMEM. */
int principals_append(principal_list *l, const principal_entry *e);

/* Wipes and frees the entries; l is empty afterwards. */
void principals_fini(principal_list *l);

#endif /* PROTO_PRINCIPALS_H */
