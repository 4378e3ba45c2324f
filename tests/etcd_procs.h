/*
 * etcd_procs.h — a real etcd cluster (Debian's etcd-server, one process
 * per member) on free loopback ports in a temp dir, for the replication
 * tests and bench_compare; and the small process helpers they share.
 *
 * Owns: the member processes and their data folders.
 * Invariant: every wait is bounded; nothing is shared with another process
 * (own temp dir, own ports).
 * Never: leaves a member running after etcd_cluster_free.
 */
#ifndef TESTS_ETCD_PROCS_H
#define TESTS_ETCD_PROCS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "repl/etcd.h"

#define CLUSTER_MAX 3

typedef struct etcd_cluster {
    char dir[256];
    int n;
    pid_t pid[CLUSTER_MAX];
    int client_port[CLUSTER_MAX];
    int peer_port[CLUSTER_MAX];
    char endpoints[256]; /* http[s]://127.0.0.1:P,... (every member) */
    char initial[512];   /* --initial-cluster */
    /* etcd_cluster_start_tls: the certificate folder (certs.h); the client
     * files in tls ("" otherwise: plain http://). */
    char certs[256];
    char cacert[320], cert[320], key[320];
    etcd_tls tls; /* points into the three above; all NULL when plain */
} etcd_cluster;

/* Starts n (1..3) members and waits (at most 60 s) until the cluster
 * grants a lease. 0, or -1 after printing the members' logs. Free with
 * etcd_cluster_free. */
int etcd_cluster_start(etcd_cluster **ep, int n);

/* etcd_cluster_start with TLS on the members' client port: https://
 * endpoints serving certs/server.pem, client certificates required
 * (--client-cert-auth) and checked against certs/ca.pem; e->tls names
 * certs/client.pem. certs: a folder of certs_make's (tests/certs.h). */
int etcd_cluster_start_tls(etcd_cluster **ep, int n, const char *certs);

/* A client of the cluster (its TLS files when it has them). 0 or an
 * errno of etcd_open_tls. */
int etcd_cluster_client(const etcd_cluster *e, uint32_t timeout_ms, etcd **out);

/* Sends sig to member i and, unless sig is SIGSTOP/SIGCONT, reaps it. */
void etcd_member_kill(etcd_cluster *e, int i, int sig);

/* Starts member i again on its data folder (after etcd_member_kill). */
int etcd_member_restart(etcd_cluster *e, int i);

/* Kills every member still running and removes the folder. NULL is ok. */
void etcd_cluster_free(etcd_cluster *e);

/* Prints every member's log (m<i>.log in e->dir) to stderr: for a test
 * that failed. */
void etcd_cluster_dump(const etcd_cluster *e);

/* fork/exec argv (argv[0] a path) with stdout and stderr appended to
 * log, in a process group of its own. The pid, or -1. */
pid_t procs_spawn_logged(char *const argv[], const char *log);

/* procs_spawn_logged with env ("NAME=VALUE"; NULL or "": none) added to
 * the environment the child inherits. */
pid_t procs_spawn_logged_env(char *const argv[], const char *env,
                             const char *log);

/* Sends sig to pid and reaps it (SIGKILL after 10 s). */
void procs_reap(pid_t pid, int sig);

/* Copies a file to stderr. */
void procs_dump_file(const char *path);

int64_t procs_now_ms(void);
void procs_sleep_ms(int ms);

#endif /* TESTS_ETCD_PROCS_H */
