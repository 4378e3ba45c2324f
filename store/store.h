/*
 * store.h — onced's durable state: one LevelDB, transactions that stage
 * their writes in a batch, and group commit that makes them durable.
 *
 * The model: ONE thread (the server's executor, "the owner") runs
 * transactions one after another. A transaction reads through (its own
 * writes → the overlay of executed-but-not-yet-synced writes → LevelDB),
 * stages writes in a LevelDB write batch, and is handed over with
 * store_txn_commit(). From that moment later transactions see its writes.
 * When the owner runs out of work it calls store_sync(): every batch handed
 * over is merged into one synced write (group commit: one fsync for all of
 * them), then the done callbacks run, in order, on the owner's thread.
 *
 * Invariant: a done callback with err == 0 runs only after the transaction's
 * batch — and every batch handed over before it — is durable. Nothing is
 * ever acknowledged before it is on disk.
 * Failure: a failed synced write is fatal (the process aborts): the
 * executed-but-unsynced writes other transactions already read cannot be
 * taken back, and a restart from the log is the safe recovery. Nothing was
 * acknowledged, so nothing acknowledged is lost.
 * Never: called from an nng aio callback (reads hit the disk).
 */
#ifndef STORE_STORE_H
#define STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct store store;
typedef struct store_txn store_txn;

/* Runs in store_sync (the owner's thread) when the transaction is
 * durable. */
typedef void (*store_done_fn)(void *arg);

typedef struct store_counters {
    uint64_t commits;   /* transactions with writes made durable */
    uint64_t fsyncs;    /* synced LevelDB writes */
    uint64_t groups;    /* synced writes that held >= 1 transaction */
    uint64_t max_group; /* most transactions in one synced write */
} store_counters;

/*
 * Opens the store in dir, creating it only when dir is missing or holds no
 * onced data (store/datadir.h: only configuration files such as
 * principals); a folder with onced data but no complete LevelDB is refused
 * (EBADMSG), as is one holding unknown files (ENOTEMPTY). On failure
 * returns an errno-style code and, when errmsg is not NULL, a malloc'd
 * message saying what is wrong and what to do (free with free()).
 * Damaged data found later is reported as EBADMSG by the reads below.
 */
int store_open(store **sp, const char *dir, char **errmsg);

/* Makes every handed-over transaction durable (store_sync: their done
 * callbacks run) and closes LevelDB. NULL is ok. */
void store_close(store *s);

void store_counters_get(store *s, store_counters *out);

/* Starts a transaction. Returns NULL only when out of memory. */
store_txn *store_txn_begin(store *s);

/*
 * Reads key as this transaction sees it. Returns 0 and a malloc'd *val (free
 * with free()) of *vlen bytes, ENOENT when absent, EBADMSG when LevelDB
 * found the data damaged (a checksum mismatch), or EIO/ENOMEM.
 */
int store_txn_get(store_txn *t, const void *key, size_t klen, char **val,
                  size_t *vlen);

/* Stages a write / a delete. Return 0 or ENOMEM. */
int store_txn_put(store_txn *t, const void *key, size_t klen, const void *val,
                  size_t vlen);
int store_txn_del(store_txn *t, const void *key, size_t klen);

/* Stages a write of the protobuf message m, packed (0 or ENOMEM). */
struct ProtobufCMessage;
int store_txn_put_msg(store_txn *t, const void *key, size_t klen,
                      const struct ProtobufCMessage *m);

/* Whether the transaction staged any write. */
bool store_txn_dirty(const store_txn *t);

/*
 * Hands the transaction over and gives up ownership of it. done (may be
 * NULL) runs in the next store_sync, after the transaction — and all handed
 * over before it — is durable. A transaction without writes costs no fsync
 * but still waits for the ones before it: that is how a read or a replay
 * answers only with durable state.
 */
void store_txn_commit(store_txn *t, store_done_fn done, void *arg);

/*
 * Writes everything handed over, merged into synced LevelDB writes (at most
 * 4096 transactions each), then runs their done callbacks in hand-over
 * order; repeats while callbacks hand over more. Returns how many
 * transactions it made durable. The owner calls it whenever it has no more
 * queued work — that is what makes a group.
 */
size_t store_sync(store *s);

/* Transactions handed over and not yet synced. Thread-safe. */
size_t store_pending(store *s);

/* Drops a transaction without writing anything. NULL is ok. */
void store_txn_abort(store_txn *t);

/*
 * Calls fn for every durable key starting with prefix, in key order, until
 * fn returns non-zero (that value is returned). Reads LevelDB only — not the
 * overlay — so it is meant for start-up and background passes.
 */
typedef int (*store_scan_fn)(void *arg, const char *key, size_t klen,
                             const char *val, size_t vlen);
int store_scan(store *s, const void *prefix, size_t plen, store_scan_fn fn,
               void *arg);

/* Like store_scan, but starts at the first key >= start (which must begin
 * with prefix). */
int store_scan_from(store *s, const void *start, size_t slen,
                    const void *prefix, size_t plen, store_scan_fn fn,
                    void *arg);

/* ---- scan.c: a key range as a transaction sees it ---------------------- */

/*
 * Calls fn for every key that starts with prefix and is >= start (which
 * must begin with prefix), in key order, as this transaction sees it: its
 * own staged writes, then the overlay, then LevelDB — so a key written by
 * an executed but unsynced transaction is found and one it deleted is
 * not. Stops when fn returns non-zero (that value is returned). fn may
 * stage writes in t; the scan does not see them. Owner's thread only.
 * 0, ENOMEM, or a read error.
 */
int store_txn_scan(store_txn *t, const void *start, size_t slen,
                   const void *prefix, size_t plen, store_scan_fn fn,
                   void *arg);

/* ---- compact.c: full-range compaction, bytes on disk -------------------
 * Deleted records leave the disk only when LevelDB compacts the tables
 * (and the log) that hold them; store_compact_start has that done for the
 * whole key range on a thread of the store's own, one at a time, and
 * store_close waits for it before closing LevelDB. */

/*
 * Starts a full-range compaction on the store's compaction thread and
 * returns at once. When one is already running none is started and
 * *already_running is set (it is cleared otherwise). Returns 0, or the
 * pthread_create error. Call from one thread at a time (the owner).
 */
int store_compact_start(store *s, bool *already_running);

/* Whether a compaction runs now, and how many finished since store_open.
 * Thread-safe. */
void store_compact_state(store *s, bool *running, uint64_t *finished);

/* Sum of the sizes of the regular files in the store's folder, found by
 * listing it (a handful of files). Returns 0, or an errno from opendir. */
int store_disk_bytes(store *s, uint64_t *bytes);

/* ---- replicate.c: the replication seam (repl/, onced --replicate) -------
 * A replicated store hands every group's merged batch to an appender
 * before writing it: the appender makes it a log entry elsewhere (etcd) and
 * returns its index, which is written beside the batch under
 * STORE_APPLIED_KEY. A group without writes (reads, replays) still asks the
 * appender, with an empty entry, whether it may answer. Followers write
 * the log's entries with store_apply_entry. Unset (the default), nothing
 * here runs. */

#define STORE_APPLIED_KEY "z/repl/applied"

/*
 * Makes entry (len bytes; len 0: a group without writes) durable in the
 * replicated log and sets *index to its log index. Returns only when the
 * caller may go on: on a lost leadership the appender does not return
 * (repl/ re-executes the process). Runs on the owner's thread.
 */
typedef int (*store_append_fn)(void *arg, const void *entry, size_t len,
                               uint64_t *index);

/* Sets the appender; before any transaction is handed over. */
void store_set_appender(store *s, store_append_fn fn, void *arg);

/* Whether s has an appender (onced --replicate); the owner's thread. */
bool store_replicated(const store *s);

/* Replicated stores (leader and followers): etcd's log, not this store,
 * is what makes a write durable, so the group commit and store_apply_entry
 * stop syncing (an entry and its applied index still go in one write).
 * What a crash of the machine takes from the store's end is applied from
 * the log again, or, when the log was trimmed past it, the replica seeds
 * itself from a snapshot; a process crash loses nothing (LevelDB has
 * written every entry to the OS before the write returns). Before any
 * transaction is handed over. */
void store_set_log_durable(store *s);

/* For a store whose every commit is synced (not a replica): refuses
 * (EBADMSG, *errmsg saying how many) a store whose commit counter is
 * below the synced lower bound in DATADIR_COMMITTED_FILE — acknowledged
 * commits were lost (a deleted or cut .log) — else writes that bound
 * (which store_close raises). A replica calls store_set_log_durable
 * instead, which only logs how far it trails. */
int store_commits_verify(store *s, char **errmsg);

/* The log index of the last entry written to this store (0: none). */
int store_applied_index(store *s, uint64_t *index);

/* Writes one log entry (as made by the leader's store) and index as the
 * applied index, in one write (synced unless store_set_log_durable). Only on a
 * store no transaction is handed to (a follower). 0, EPROTO (not an entry) or
 * EIO. */
int store_apply_entry(store *s, const void *entry, size_t len, uint64_t index);

/* ---- snapshot.c, load.c: consistent copies (Admin.Snapshot) ------------
 * A snapshot is the whole store at one moment, between two group commits:
 * every effect with its completion record, and the applied log index. It
 * is read in chunks from one pinned LevelDB snapshot, and loaded into a
 * new folder that is usable only once the last chunk is in. */

#define STORE_SNAP_SLOTS   4
#define STORE_SNAP_IDLE_MS 60000
/* Present while a snapshot is being loaded into a folder. */
#define STORE_LOADING_KEY "z/load/incomplete"

/*
 * Reads the next chunk of snapshot *id (0: takes a new snapshot and sets
 * *id): calls fn for each key after `after` (alen 0: from the first key)
 * until the pairs passed reach max_bytes (at least one is passed). Sets
 * *log_index (the snapshot's applied index) and *done (the last chunk: the
 * snapshot is released). 0, ENOENT (no such snapshot, or it was released
 * after STORE_SNAP_IDLE_MS idle), EBUSY (STORE_SNAP_SLOTS are pinned), or
 * a read error. Owner's thread only.
 */
int store_snap_read(store *s, uint64_t *id, uint64_t now_ms, const void *after,
                    size_t alen, size_t max_bytes, store_scan_fn fn, void *arg,
                    uint64_t *log_index, bool *done);

typedef struct store_loader store_loader;

/* Starts loading a snapshot into dir, which must be missing or hold no
 * onced data (configuration files only). 0, EEXIST, or an errno, with
 * *errmsg (free()). Finish with store_load_finish or store_load_abort. */
int store_load_open(store_loader **lp, const char *dir, char **errmsg);

/* Adds one pair of the snapshot, in key order. 0, EPROTO (the marker key,
 * a damaged store id) or EIO. */
int store_load_put(store_loader *l, const void *k, size_t klen, const void *v,
                   size_t vlen);

/* Makes the folder a store onced opens (the last synced write, then the
 * identity file) and frees l. 0, or an errno with *errmsg. */
int store_load_finish(store_loader *l, char **errmsg);

/* Frees l, leaving the folder refused by store_open (EINPROGRESS). NULL is
 * ok. */
void store_load_abort(store_loader *l);

#endif /* STORE_STORE_H */
