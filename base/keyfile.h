/*
 * keyfile.h — a key file: one line "NAME KEYHEX", what a client needs to
 * sign as the principal NAME (libonce's key_file, oncectl's --key-out,
 * onced's --replicate-key and the key onced writes for a new replica).
 *
 * Owns: the file's format, reading it (plainly, or as a file that grants
 * authority: trust.h) and writing it (mode 0600, exclusively or replaced
 * atomically); the name rule and the key's hex form, which the principals
 * file (proto/principals.c) shares, and the splitting of a line into words
 * both formats use ('#' starts a comment).
 * Invariant: KEYFILE_KEY_BYTES is the wire's AUTH_KEY_BYTES and
 * KEYFILE_NAME_MAX its PRINCIPAL_NAME_MAX (proto/principals.c asserts
 * both; base cannot include proto).
 * Never: logs or prints a key; leaves a key in memory it frees or returns
 * from (wiped with sodium_memzero).
 */
#ifndef BASE_KEYFILE_H
#define BASE_KEYFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KEYFILE_KEY_BYTES 32 /* crypto_auth_KEYBYTES */
#define KEYFILE_NAME_MAX  128

/* A principal's name: 1..KEYFILE_NAME_MAX of [A-Za-z0-9._@-]. */
bool keyfile_name_ok(const char *s);

/* The key written as 2 * KEYFILE_KEY_BYTES hex digits into key. 0 or
 * EINVAL (key then undefined: the caller wipes it). */
int keyfile_key_from_hex(const char *hex, uint8_t key[KEYFILE_KEY_BYTES]);

/* Splits line into at most max whitespace-separated words, in place; a
 * '#' starts a comment. Returns the number of words, or max + 1 when there
 * are more. */
size_t keyfile_split_words(char *line, char **w, size_t max);

/*
 * Reads a key file: name (at least KEYFILE_NAME_MAX + 1 bytes) and key.
 * Returns 0, ENOENT, EINVAL (err says why) or another errno.
 */
int keyfile_read(const char *path, char *name, uint8_t key[KEYFILE_KEY_BYTES],
                 char *err, size_t errlen);

/*
 * keyfile_read of a file that grants authority (onced --replicate-key):
 * opened as trust_open does (no link, owned by us or root, not group- or
 * world-writable). EPERM with err saying what is wrong and how to fix it;
 * otherwise as keyfile_read.
 */
int keyfile_read_trusted(const char *path, char *name,
                         uint8_t key[KEYFILE_KEY_BYTES], char *err,
                         size_t errlen);

/* Writes a new key file (O_EXCL, mode 0600): EEXIST when it exists. With
 * replace, an existing file is replaced atomically instead. */
int keyfile_write(const char *path, const char *name,
                  const uint8_t key[KEYFILE_KEY_BYTES], bool replace);

#endif /* BASE_KEYFILE_H */
