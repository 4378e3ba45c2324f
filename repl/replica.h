/*
 * replica.h — onced as one replica of a cluster whose log lives in etcd
 * (onced --replicate; docs/replication.md).
 *
 * Life of a replica process: repl_follow runs *before* the server opens
 * its store: it applies the etcd log to the local LevelDB, answers every
 * call UNAVAILABLE/NOT_LEADER (with the leader's advertised URL) and
 * campaigns for the leader key; it returns once this replica holds the
 * leader key and its LevelDB holds the whole log. The server then opens as
 * after a restart (in-memory state rebuilt from LevelDB) with repl_append
 * as its store's appender (store.h, "replicate.c"). A leader that loses its
 * etcd lease, cannot renew it in time, or has an append refused or left
 * unanswered re-executes its own binary with its own arguments: it comes
 * back as a follower, without any in-memory state of calls that were not
 * committed, and none of their replies is ever sent.
 *
 * Owns: the etcd lease of the leader key and its keepalive thread, the
 * log's next index, the step-down; the leader's trimming of the log
 * (trim.c) and a follower's seeding from a snapshot (seed.c).
 * Invariant: the local LevelDB holds a prefix of the etcd log (its applied
 * index, STORE_APPLIED_KEY); a leader writes a group locally only after
 * etcd took it as the next log entry under a compare of its own leader
 * key; a leader answers nothing (reads included) once its local lease
 * deadline (2/3 of the TTL after the last keepalive was *sent*) passed.
 * Never: guesses when etcd does not answer (that is a step-down); starts
 * the server before the log is applied to its end.
 */
#ifndef REPL_REPLICA_H
#define REPL_REPLICA_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "repl/etcd.h"

typedef struct repl repl;

#define REPL_LISTEN_MAX 8

typedef struct repl_config {
    const char *endpoints; /* etcd: "http://127.0.0.1:2379,..." */
    const char *cluster;   /* names the keys: /once/<cluster>/... */
    const char *advertise; /* the URL clients reach this replica on */
    const char *data_dir;  /* the local LevelDB */
    const char *listen[REPL_LISTEN_MAX]; /* answered NOT_LEADER meanwhile */
    size_t nlisten;
    const char *tls_cert; /* --tls-cert/--tls-key: tls+tcp:// listen URLs */
    const char *tls_key;
    uint32_t ttl_s;      /* the etcd lease of the leader key, >= 1 */
    uint32_t timeout_ms; /* per etcd request and endpoint */
    uint64_t retain;     /* log entries the leader keeps for replicas that
                            lag or are gone (trim.c); >= 1 */
    char *const *argv;   /* onced's own arguments, for the step-down */
    /* --replicate-key: the key file ("NAME KEYHEX") whose principal signs
     * this replica's Admin.Snapshot requests (seed.c); NULL: unsigned. */
    const char *key_file;
    /* --etcd-cacert/--etcd-cert/--etcd-key: TLS to https:// endpoints
     * (etcd.h); fields NULL when not given. */
    etcd_tls etcd_tls;
    /* Told how the follower is doing (may be NULL), on repl_follow's
     * thread: status when it changes ("following cluster ...: NOT_LEADER,
     * the leader is URL"), NULL on every other turn of its loop (at least
     * every few seconds: it is alive). For a service manager (onced:
     * READY=1 and the watchdog while following). */
    void (*on_follow)(void *arg, const char *status);
    void *on_follow_arg;
} repl_config;

/*
 * Follows until this replica leads (0, *rp to hand to repl_append, then
 * repl_close), or a signal of stop arrives (ECANCELED, *sig set; nothing
 * to close), or the setup fails (an errno, logged).
 */
int repl_follow(repl **rp, const repl_config *cfg, const sigset_t *stop,
                int *sig);

/* The store appender (store_append_fn) of a leading replica: arg is the
 * repl. Never returns when the entry cannot be known to be the next log
 * entry under this leader: the process steps down (re-executes). */
int repl_append(void *arg, const void *entry, size_t len, uint64_t *index);

/* Stops the keepalive and revokes the lease, so another replica takes
 * over at once (after a clean server_close). NULL is ok. */
void repl_close(repl *r);

#endif /* REPL_REPLICA_H */
