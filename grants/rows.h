/*
 * rows.h — reading and staging the protobuf rows of keys.h through a
 * store_txn (so a transaction sees its own and every executed-but-unsynced
 * write).
 *
 * Also the id lists (repeated uint64 fields) inside those rows.
 *
 * Memory: a message handed out by rows_get is protobuf-c's unpacked form,
 * freed by the caller with protobuf_c_message_free_unpacked(m, NULL).
 * Never: commits; the caller's transaction decides.
 */
#ifndef GRANTS_ROWS_H
#define GRANTS_ROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "grants/keys.h"
#include "store/store.h"

/* 0 and *out, ENOENT (then *out is NULL), or EIO/ENOMEM/EBADMSG. */
int rows_get(store_txn *t, const gkey *k, const ProtobufCMessageDescriptor *d,
             ProtobufCMessage **out);

/* Like rows_get, but an absent row gives a default (empty) message of type
 * d, owned the same way. 0 or an error. */
int rows_get_or_empty(store_txn *t, const gkey *k,
                      const ProtobufCMessageDescriptor *d,
                      ProtobufCMessage **out);

/* Stages m under k. 0 or ENOMEM. */
int rows_put(store_txn *t, const gkey *k, const ProtobufCMessage *m);

/* A be64 value: 0 and *v, or ENOENT (*v = 0), or an error. */
int rows_get_u64(store_txn *t, const gkey *k, uint64_t *v);
int rows_put_u64(store_txn *t, const gkey *k, uint64_t v);

/* Whether k is present (a flag row). 0 or an error. */
int rows_exists(store_txn *t, const gkey *k, bool *yes);
int rows_set_flag(store_txn *t, const gkey *k, bool on);

/* ---- repeated uint64 fields (id lists inside rows) ----------------------
 * The arrays are malloc'd, as protobuf-c unpacks them, and grown with
 * realloc, so the row's free_unpacked still frees them. */

/* Appends v. 0 or ENOMEM (then a and n are unchanged). */
int rows_ids_push(uint64_t **a, size_t *n, uint64_t v);

/* Appends v and keeps only the newest max ids. 0 or ENOMEM. */
int rows_ids_push_newest(uint64_t **a, size_t *n, uint64_t v, size_t max);

/* Removes every v, keeping the order of the rest. */
void rows_ids_drop(uint64_t *a, size_t *n, uint64_t v);

#endif /* GRANTS_ROWS_H */
