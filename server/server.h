/*
 * server.h — the pieces of one running onced and how they are wired.
 *
 * Owns: the configuration and the handles of the store, the executor and
 * the listener, created by server_open and torn down by server_close in
 * the one order that keeps every handed-over commit. Each part gets only
 * its own view: the executor and the services an exec_env (exec_env.h),
 * the listener a listener_config (listener.h), the collector its
 * gc_config. The services themselves are listed in services.c.
 */
#ifndef SERVER_SERVER_H
#define SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/disk_floor.h"
#include "kv/kv.h"
#include "outbox/outbox.h"
#include "server/exec_env.h"
#include "server/stats.h"
#include "store/store.h"

#define SERVER_LISTEN_MAX 8

typedef struct server_config {
    const char *data_dir;
    const char *listen[SERVER_LISTEN_MAX];
    size_t nlisten;
    size_t contexts;           /* nng contexts = requests in flight */
    size_t recv_max;           /* NNG_OPT_RECVMAXSZ */
    uint64_t lease_ttl_ms;     /* default TTL of OpenLease */
    uint64_t lease_ttl_max_ms; /* largest TTL a client may ask for */
    uint64_t window;           /* unacknowledged seqs allowed per client */
    uint64_t gc_interval_ms;   /* between collector passes */
    uint64_t gc_budget;        /* record deletions per collector pass */
    uint64_t compact_after;    /* deletions before an idle compaction */
    bool dev;                  /* --dev: create a dev principal (auth.h) */
    const char *tls_cert;      /* PEM certificate for tls+tcp:// listeners */
    const char *tls_key;       /* its PEM private key */
    uint64_t listen_check_ms;  /* probe ipc:// listeners this often
                                  (listen_watch.h); 0: never */

    /* Quotas. Live leases in all, and of one principal (0: no cap);
     * bytes free on the data folder's file system below which new
     * mutating calls are refused (disk_floor.h; 0: no floor). */
    uint64_t lease_max;
    uint64_t lease_max_principal;
    uint64_t disk_free_min;
    /* once.v1.KV's bounds: --kv-key-max, --kv-value-max, --kv-ops-max,
     * --kv-quota (kv/kv.h). */
    kv_limits kv;
    /* The outbox's bounds: --outbox-max-bytes, --outbox-payload-max
     * (outbox/outbox.h). */
    outbox_limits outbox;

    size_t conn_inflight;     /* requests one connection may have in
                                 flight (listener.h) */
    uint64_t send_timeout_ms; /* a reply not taken by its connection in
                                 this long drops that connection */
    size_t conn_max;          /* open connections in all (conns.h) */
    size_t conn_max_per_peer; /* and of one peer */
    uint64_t conn_idle_ms;    /* closed after this long without a request;
                                 0: never */
    /* The HTTP listeners' connections in all (http_srv.h; 0: no HTTP
     * listener). server_open lowers both this and conn_max so that the
     * two fit the open-file limit together, and writes the result here. */
    size_t http_conn_max;
    size_t http_conn_max_per_peer; /* of them, from one IP address */
    uint64_t http_header_ms;       /* a request's line and headers, at most */

    /* onced --replicate (repl/replica.h): every group is appended to the
     * replicated log before it is written (store.h, "replicate.c"). NULL:
     * not replicated. */
    store_append_fn append_fn;
    void *append_arg;
} server_config;

typedef struct server server;
typedef struct executor executor;
typedef struct listener listener;
typedef struct verifier verifier;

struct server {
    server_config cfg;
    /* The parts calls use, owned here: env.st, env.leases (executor
     * thread only), env.auth, env.gc; env.stats and env.disk point at the
     * two below; env.cfg is the executor's (executor thread only). */
    exec_env env;
    server_stats stats;
    disk_floor disk; /* the free-space floor (disk_floor.h) */
    executor *ex;
    verifier *vf; /* between the listener and the executor (verify.h) */
    listener *ls;
};

/* Opens the store, starts the executor and listens. On failure returns an
 * errno-style code after logging why. */
int server_open(server **sp, const server_config *cfg);

/* SIGHUP: re-read the principals and policy now (auth.h). Any thread. */
void server_reload_auth(server *s);

/* SIGHUP: put cfg's window and lease TTLs in force for the calls after
 * the ones running (through the executor thread). Any thread. */
void server_set_limits(server *s, const server_config *cfg);

/* Stops listening, lets queued calls execute and every commit finish, then
 * closes the store. NULL is ok. */
void server_close(server *s);

#endif /* SERVER_SERVER_H */
