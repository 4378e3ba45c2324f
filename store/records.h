/*
 * records.h — completion records (docs/spec.md), the evidence that an rpc id
 * ran.
 *
 * Owns the LevelDB keys "r/<client_id:be64><seq:be64>" holding one
 * CompletionRecord each: method, request digest, status, response payload,
 * completion time. Keys sort by client then seq, so one client's records
 * are one contiguous range (what the collector walks).
 * Invariant: a record is only ever staged in the same transaction as the
 * effect it describes; callers never write one on its own.
 * Never: decides whether a call is a retry — the executor compares digests.
 */
#ifndef STORE_RECORDS_H
#define STORE_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include "proto/record.pb-c.h"
#include "store/store.h"

#define RECORD_DIGEST_LEN 32 /* BLAKE2b-256 */
#define RECORD_KEY_LEN    18

typedef Once__Store__V1__CompletionRecord record;

/* BLAKE2b-256 over the method name, a 0 byte and the payload as received. */
void records_digest(const char *method, size_t mlen, const void *payload,
                    size_t plen, uint8_t out[RECORD_DIGEST_LEN]);

void records_key(uint64_t client_id, uint64_t seq, uint8_t key[RECORD_KEY_LEN]);

/* Reads the record of (client_id, seq) as t sees it: 0 and *rec (free with
 * records_free), ENOENT, EIO or EBADMSG. */
int records_get(store_txn *t, uint64_t client_id, uint64_t seq, record **rec);

/* Stages the record in t. rec is packed, not kept. Returns 0 or ENOMEM;
 * *bytes (when not NULL) is the size of key and value stored. */
int records_put(store_txn *t, uint64_t client_id, uint64_t seq,
                const record *rec, uint64_t *bytes);

void records_free(record *rec);

#endif /* STORE_RECORDS_H */
