/*
 * repl_impl.h — what follow.c, lead.c, notleader.c and logkey.c share. Not
 * for use outside repl/.
 */
#ifndef REPL_REPL_IMPL_H
#define REPL_REPL_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "base/keyfile.h"
#include "proto/auth_tag.h"
#include "repl/etcd.h"
#include "repl/replica.h"

/* "/once/<cluster>/log/" + 20 digits */
#define REPL_KEY_MAX 256

/* An entry larger than this is written as several log keys (parts), still
 * applied as one batch (logkey.c); below etcd's default 1.5 MiB request
 * limit once base64 and JSON are added. */
#define REPL_PART_MAX (768u * 1024u)

/* Log values: kind byte, be64 first index of the entry's run, data. */
#define REPL_KIND_WHOLE 'E' /* a whole entry */
#define REPL_KIND_PART  'P' /* a part; more follow */
#define REPL_KIND_LAST  'L' /* the last part */
#define REPL_HDR_LEN    9

struct repl {
    repl_config cfg;
    char leader_key[REPL_KEY_MAX];
    char log_prefix[REPL_KEY_MAX];
    char first_key[REPL_KEY_MAX];      /* the first log index kept */
    char applied_prefix[REPL_KEY_MAX]; /* each replica's applied index */
    char applied_key[REPL_KEY_MAX];    /* ours */
    char self[4096];                   /* the executable, for the step-down */
    etcd *kv;           /* the executor's (appends); follow.c's before */
    etcd *ka;           /* the keepalive thread's */
    int64_t lease;      /* the leader key's etcd lease */
    int64_t leader_rev; /* create_revision of our leader key */
    uint64_t next;      /* the next log index to write */
    _Atomic uint64_t valid_until_ms; /* local lease deadline (monotonic) */
    _Atomic bool stopping;
    pthread_t ka_thread;
    bool ka_running;
    _Atomic uint64_t last; /* the last index written (leader; trim.c) */
    etcd *tr;              /* the trim thread's */
    struct periodic *tr_thread;
    uint64_t tr_first; /* the first index kept (trim thread; 0: unknown) */
    /* cfg.key_file, read once at the start (seed.c signs with it; wiped
     * when following ends) */
    bool signs;
    char key_name[KEYFILE_NAME_MAX + 1];
    uint8_t key[AUTH_KEY_BYTES];
};

/* logkey.c: the log's keys and values. */
void repl_keys_init(repl *r);
void repl_log_key(const repl *r, uint64_t index, char *out, size_t outlen);
/* The index in a log key, or 0 when key is not one. */
uint64_t repl_log_index(const repl *r, const char *key, size_t klen);

/* Decimal u64 values (first_key, applied keys): 0 and *v, or EPROTO. */
int repl_parse_u64(const char *p, size_t n, uint64_t *v);

/* trim.c: the leader deletes log entries every replica applied (bounded
 * by cfg.retain) and compacts etcd's history; started once leading,
 * stopped by repl_close. */
int repl_trim_start(repl *r);
void repl_trim_stop(repl *r);
/* The first log index kept (/once/<cluster>/first; 1 when never trimmed),
 * read through e. 0, EAGAIN, EPROTO. */
int repl_first_read(repl *r, etcd *e, uint64_t *first);

/* seed.c: replaces the follower's store (*stp, closed and reopened) by a
 * snapshot read from the leader at url (Admin.Snapshot); *index is the log
 * index it holds. 0, EAGAIN (the leader did not answer: try again), or an
 * error; on any failure *stp is NULL and the folder holds no store. */
struct store;
int repl_seed(repl *r, const char *url, struct store **stp, uint64_t *index);

/* lead.c */
/* Starts the keepalive thread on r->lease (granted at sent_ms). */
int repl_keepalive_start(repl *r, uint64_t sent_ms);
/* Re-executes onced (never returns). */
void repl_step_down(repl *r, const char *why);
/* Re-executes onced with the same arguments and environment (without any
 * ONCE_REPL_* variable; plus extra, "NAME=VALUE", unless NULL), every
 * descriptor but stdio closed (never returns; exits 3 when exec fails). */
void repl_reexec(repl *r, const char *extra);

/* handover.c: a follower that won re-executes to lead (never returns);
 * the new process calls repl_handover_take before it follows: *ours says
 * it holds the lease again (its keepalive running) and must lead. */
void repl_handover_exec(repl *r);
int repl_handover_take(repl *r, bool *ours);

/* share.c: makes the local grants key the cluster's one (after winning,
 * before serving). 0, EEXIST (a different local key), EAGAIN, ... */
int repl_share_key(repl *r);

/* watch.c: wakes a follower when a key under prefix changes (an etcd
 * watch on a thread of its own, re-established after errors with
 * backoff). */
typedef struct repl_watch repl_watch;
int repl_watch_open(repl_watch **wp, const char *endpoints, const etcd_tls *tls,
                    const char *prefix);
/* Waits until something changed or the timeout passed: poll_ms while no
 * watch is established, idle_ms while one is. Whether it was woken. */
bool repl_watch_wait(repl_watch *w, uint64_t poll_ms, uint64_t idle_ms);
/* Stops the watch without waiting for its thread (which frees w within
 * about a second); w must not be used after. NULL is ok. */
void repl_watch_close(repl_watch *w);

/* notleader.c: answers every request UNAVAILABLE while following. Broken
 * on purpose (the test build's FAULT_BROKEN_FOLLOWER_READS): Counter.Get
 * answered from *reads, the follower's store however stale (NULL: never;
 * a seeding that replaces the store races it). */
typedef struct notleader notleader;
struct store;
int notleader_open(notleader **np, const char *const *urls, size_t n,
                   const char *tls_cert, const char *tls_key,
                   struct store **reads);
/* The hint in replies: the leader's URL, or NULL with why (reason code). */
void notleader_set(notleader *nl, const char *leader_url, const char *reason);
/* Stops answering and closes the socket, waiting for nng at most a few
 * seconds (then the close is left to finish, or not, before the exit). */
void notleader_close(notleader *nl);

#endif /* REPL_REPL_IMPL_H */
