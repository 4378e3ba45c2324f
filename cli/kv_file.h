/*
 * kv_file.h — the Txn as JSON, for `oncectl kv txn --file TXN.json`
 * (docs/kv.md, "oncectl"): one object with "compares", "then" and "else",
 * each an array, read into a libonce Txn builder.
 *
 *   {"compares": [{"key": "jobs/42", "target": "version",
 *                  "op": "equal", "version": 7}],
 *    "then": [{"op": "put", "key": "jobs/42", "value": "running"}],
 *    "else": [{"op": "get", "key": "jobs/42"}]}
 *
 * Owns: the format — its members, their types, and the message naming
 * the exact place of a mistake ("then[2]: unknown member 'vlaue'").
 * Invariant: the same file always builds the same Txn (members are read
 * in array order), so a retry with --rpc-id sends the same payload.
 * Never: sends anything; checks sizes (the builder does, with onced's
 * reasons).
 */
#ifndef CLI_KV_FILE_H
#define CLI_KV_FILE_H

#include <stddef.h>

#include "once/kv.h"

/* Most bytes of a Txn file. */
#define KV_FILE_MAX (16u << 20)

/* Reads path ("-": stdin) into b. 0, or -1 with a message for people in
 * err (errlen bytes): the file is unreadable or not the format. */
int kv_file_load(const char *path, once_kv_txn *b, char *err, size_t errlen);

#endif /* CLI_KV_FILE_H */
