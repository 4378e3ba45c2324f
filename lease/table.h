/*
 * table.h — the in-memory lease table: every lease that is live, or ended
 * with completion records still to reclaim.
 *
 * Owns one lease_entry per such client id. Pure bookkeeping: time is
 * passed in (an injectable clock for tests), nothing here touches LevelDB.
 * Durable transitions (open, end, reclaim) are staged by lease.c and the
 * collector in the same transaction that changes the entry.
 * Invariant: an entry's state only moves LIVE → CLOSED/EXPIRED, never back;
 * the watermark only grows. A client id below next_id with no entry has
 * ended and been collected; one at or above next_id was never issued.
 * Never: locks — it belongs to the executor thread alone.
 */
#ifndef LEASE_TABLE_H
#define LEASE_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum lease_state {
    LEASE_STATE_LIVE = 1,
    LEASE_STATE_CLOSED = 2,
    LEASE_STATE_EXPIRED = 3,
} lease_state;

struct lease_owner;
struct lease_table;
struct store_txn;

typedef struct lease_entry {
    uint64_t client_id;
    char *principal;
    struct lease_owner *owner; /* the principal's live count (table.c) */
    bool counted_live;         /* counted in the live counts */
    uint64_t ttl_ms;
    uint64_t expires_ms; /* LIVE: expired from this time on */
    lease_state state;
    uint64_t opened_ms;
    uint64_t ended_ms;

    uint64_t watermark;         /* highest first_incomplete received */
    uint64_t watermark_durable; /* persisted with the last reclamation:
                                   every record below it is deleted */
    uint64_t max_seq;           /* highest seq with a record */
    uint64_t retained;          /* records staged or durable */
    uint64_t retained_bytes;    /* their keys and values */
    uint64_t oldest_ms;         /* completion time of the oldest retained
                                   record; 0 when none */
    struct lease_entry *next;   /* hash chain */
    struct lease_table *table;  /* the table it is in (its end hook) */
} lease_entry;

typedef struct lease_table lease_table;

int lease_table_alloc(lease_table **tp);
void lease_table_free(lease_table *t);

/* Adds an entry for client_id (which must not be present). principal is
 * copied. Returns the entry, or NULL when out of memory. */
lease_entry *lease_table_add(lease_table *t, uint64_t client_id,
                             const char *principal, uint64_t ttl_ms,
                             lease_state state, uint64_t expires_ms);

lease_entry *lease_table_find(lease_table *t, uint64_t client_id);

/* Removes and frees the entry (it has ended and holds no record). */
void lease_table_remove(lease_table *t, lease_entry *e);

/* Calls fn for every entry (which may not be removed inside fn). */
void lease_table_each(lease_table *t, void (*fn)(void *arg, lease_entry *e),
                      void *arg);

/* lease_table_each in a rotated order: starting just past after_id's place
 * in the table (from the start when after_id is 0) and wrapping around, so
 * a caller with a budget can resume where the last walk ran out instead of
 * always serving the same entries first. Every entry is still visited
 * once. */
void lease_table_each_after(lease_table *t, uint64_t after_id,
                            void (*fn)(void *arg, lease_entry *e), void *arg);

size_t lease_table_count(lease_table *t);

/* What else ends with a lease: fn stages in txn, the transaction that
 * ends client_id's lease, what goes with it (kv/: the keys bound to it).
 * 0 or an errno (the end is then not staged). */
typedef int (*lease_end_hook)(void *arg, struct store_txn *txn,
                              uint64_t client_id);

/* Sets the hook lease_end calls (fn NULL: none). Executor thread, before
 * the first call or between two. */
void lease_table_on_end(lease_table *t, lease_end_hook fn, void *arg);

/* The hook set, or NULL; *arg its argument. */
lease_end_hook lease_table_end_hook(const lease_table *t, void **arg);

/* What the table retains, summed over every entry (Admin.Stats and the
 * metrics endpoint both read it). */
typedef struct lease_sum {
    uint64_t records;   /* completion records retained */
    uint64_t bytes;     /* their keys and values */
    uint64_t oldest_ms; /* completion time of the oldest one; 0: none */
    uint64_t live;      /* entries live at now */
    uint64_t ended;     /* entries ended, records still to reclaim */
} lease_sum;

/* Fills *out from every entry at time now (one walk of the table). */
void lease_table_sum(lease_table *t, uint64_t now, lease_sum *out);

/* now - out->oldest_ms, or 0 when nothing is retained (or the oldest
 * record is from the future of a clock that went back). */
uint64_t lease_sum_oldest_age_ms(const lease_sum *s, uint64_t now);

/* Entries in state LIVE (a LIVE one past its TTL included, until it is
 * ended): all of them, and those of principal. For the lease caps. */
size_t lease_table_live(lease_table *t);
size_t lease_table_live_of(lease_table *t, const char *principal);

/* Moves e to state, keeping the live counts (the only way an entry's
 * state changes after lease_table_add). */
void lease_entry_set_state(lease_entry *e, lease_state state);

/* The next client id to issue; ids below it were issued. */
uint64_t lease_table_next_id(lease_table *t);
void lease_table_set_next_id(lease_table *t, uint64_t next);

/* Whether e is live at now. A LIVE entry past its expiry is not live (the
 * caller ends it durably). */
bool lease_entry_live(const lease_entry *e, uint64_t now);

/* Time left at now; 0 when not live. */
uint64_t lease_entry_remaining(const lease_entry *e, uint64_t now);

/* Renews a live lease: expires at now + ttl. */
void lease_entry_renew(lease_entry *e, uint64_t now);

/* The first seq not acknowledged: the watermark, or 1 before any
 * acknowledgement (seqs start at 1). The window counts from here. */
uint64_t lease_entry_first_unacked(const lease_entry *e);

/* Applies an acknowledgement: the watermark becomes max(watermark, ack).
 * An ack of 1 acknowledges nothing (seqs start at 1) and leaves a fresh
 * watermark at 0, so the collector has nothing to persist for it. */
void lease_entry_ack(lease_entry *e, uint64_t first_incomplete);

/* A record of seq, bytes long, completed at now, was staged. */
void lease_entry_record_added(lease_entry *e, uint64_t seq, uint64_t bytes,
                              uint64_t now);

/* n records, bytes in all, were staged for deletion. */
void lease_entry_records_removed(lease_entry *e, uint64_t n, uint64_t bytes);

#endif /* LEASE_TABLE_H */
