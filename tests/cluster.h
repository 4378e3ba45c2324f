/*
 * cluster.h — test fixtures for replication: a real etcd cluster (Debian's
 * etcd-server, one process per member) and real onced replicas on it
 * (onced --replicate), on free loopback ports and ipc:// paths in a temp
 * dir.
 *
 * Owns: the onced replica processes and their data folders (the etcd
 * members are etcd_procs.h's); starting, killing, stopping, restarting
 * and removing them.
 * Invariant: every wait is bounded; nothing is shared with another test
 * process (own temp dir, own ports, own cluster name).
 * Never: calls cmocka assertions (callers check the return values).
 */
#ifndef TESTS_CLUSTER_H
#define TESTS_CLUSTER_H

#include <stdbool.h>
#include <sys/types.h>

#include "tests/etcd_procs.h"

typedef struct replica_set {
    etcd_cluster *etcd;
    char dir[256];
    char name[64]; /* --cluster */
    int n;
    int ttl_s;
    unsigned retain; /* --replicate-retain (0: onced's default) */
    pid_t pid[CLUSTER_MAX];
    int exit_status[CLUSTER_MAX]; /* wait status of one that exited by
                                     itself (-1: none since its start) */
    char url[CLUSTER_MAX][320];
    char path[CLUSTER_MAX][300];
    char data[CLUSTER_MAX][300];
    char log[CLUSTER_MAX][300];
    char urls[1000]; /* every url, comma-separated (libonce's url) */
    /* With a TLS etcd (etcd->certs set): each replica also listens on
     * tls_url (tls+tcp://127.0.0.1:P, certs/server.pem); url stays the
     * first --listen, the one advertised. */
    char tls_url[CLUSTER_MAX][64];
    /* replicas_start_auth: each data folder holds a principals file
     * (REPLICAS_OP, role operator; REPLICAS_REPL, role replica) and a
     * policy (operator *; replica /once.v1.Admin/Snapshot); their key
     * files are op_key / repl_key in dir. Admin.Stats of this file's
     * waits is signed as REPLICAS_OP. */
    bool auth;
    bool replicate_key; /* spawn with --replicate-key repl_key (auth) */
    char op_key[300];
    char repl_key[300];
    unsigned char op_secret[32];
    /* replicas_start_led: the server binary (NULL: the shipped onced) and
     * what each replica's next spawns add to its environment ("NAME=VALUE",
     * "" nothing; a test may change it between restarts). */
    const char *onced;
    char env[CLUSTER_MAX][128];
} replica_set;

#define REPLICAS_OP   "op"
#define REPLICAS_REPL "repl"

/* Starts n onced replicas on e (etcd lease ttl_s) and waits (at most
 * 30 s) until one of them leads. 0 or -1. Free with replicas_free. */
int replicas_start(replica_set **rp, etcd_cluster *e, int n, int ttl_s);

/* The same, with --replicate-retain retain (0: onced's default). */
int replicas_start_retain(replica_set **rp, etcd_cluster *e, int n, int ttl_s,
                          unsigned retain);

/* replicas_start_retain with authentication on every replica (see
 * replica_set.auth); replicate_key as in replica_set. */
int replicas_start_auth(replica_set **rp, etcd_cluster *e, int n, int ttl_s,
                        unsigned retain, bool replicate_key);

/* Starts n replicas of the server binary onced (NULL: the shipped one) on
 * e, replica 0 first with env0 in its environment (replica_set.env) and
 * alone until it leads (at most 30 s), then the others, waiting until
 * they answer. 0 or -1. Free with replicas_free. */
int replicas_start_led(replica_set **rp, etcd_cluster *e, int n, int ttl_s,
                       const char *onced, const char *env0);

/* Sends sig to replica i; reaps it unless sig is SIGSTOP/SIGCONT. */
void replicas_kill(replica_set *r, int i, int sig);

/* Starts replica i again on its data folder and waits (at most 30 s)
 * until it answers. 0, or -1 (when it exited, pid[i] is 0). */
int replicas_restart(replica_set *r, int i);

/* Waits (at most ms) for replica i to exit by itself and reaps it: its
 * wait status, or -1 (still running, or not running at all). */
int replicas_wait_exit(replica_set *r, int i, int ms);

/* Empties replica i's data folder (it must not run); with auth, the
 * principals and policy files are written again (key files stay). */
void replicas_wipe(replica_set *r, int i);

/* The replica answering Admin.Stats OK (the leader), other than skip
 * (-1: none skipped), waiting at most ms; -1 when none did. */
int replicas_leader(replica_set *r, int skip, int ms);

/* Whether replica i's log contains text. */
bool replicas_log_has(const replica_set *r, int i, const char *text);

/* Prints every replica's log to stderr. */
void replicas_dump(const replica_set *r);

/* SIGTERMs every replica (0 when each exited 0), then frees. NULL is ok. */
int replicas_stop(replica_set *r);
void replicas_free(replica_set *r);

#endif /* TESTS_CLUSTER_H */
