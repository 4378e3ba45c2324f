/*
 * pg_cluster.h — a PostgreSQL 15 cluster of a benchmark's own: initdb into
 * a temp dir, pg_ctl start with the socket in that dir and no TCP
 * listener, synchronous_commit=on and fsync=on, a schema, libpq
 * connections to it. Used by bench_compare's postgres peer and by
 * bench_outbox.
 *
 * Owns: the cluster's processes, from start to stop. As root, the cluster
 * runs as the user "postgres" (or "nobody"): Debian's initdb refuses root.
 * Invariant: start checks SHOW synchronous_commit/fsync on the running
 * server before it returns, so COMMIT returns only after the WAL holding it
 * is flushed. Every statement is bounded by statement_timeout (10 s, in the
 * conninfo); pg_ctl and initdb by their own timeouts.
 * Never: touches a cluster it did not create; leaves a server running when
 * start fails.
 */
#ifndef BENCH_PG_CLUSTER_H
#define BENCH_PG_CLUSTER_H

#include <stdbool.h>

#include <libpq-fe.h>

#include "bench/compare_proc.h"

#define PG_ERR_LEN 512

typedef struct pg_cluster {
    compare_user user;
    char bin[256];
    char data[300];
    char dir[256];
    char log[300];
    char conninfo[512];
    bool started;
} pg_cluster;

/*
 * initdb into dir/data (dir exists and is empty; it is chowned to the
 * cluster's user), start with max_conns connections, check the durability
 * settings and run schema. bin is PostgreSQL's bin dir (initdb, pg_ctl).
 * 0, or -1 after saying why on stderr (nothing left running).
 */
int pg_cluster_start(pg_cluster *p, const char *bin, const char *dir,
                     int max_conns, const char *schema);

/* pg_ctl stop -m fast when started. */
void pg_cluster_stop(pg_cluster *p);

/* A new connection, or NULL with err (PG_ERR_LEN) filled. */
PGconn *pg_cluster_connect(const pg_cluster *p, char *err);

/* Prepares sql as statement name on c; 0 or -1 with err filled. */
int pg_prepare(PGconn *c, const char *name, const char *sql, int nparams,
               char *err);

/* Runs sql (no result rows wanted); 0 or -1 with err filled. */
int pg_exec(PGconn *c, const char *sql, char *err);

/* err = "postgres WHAT: message" (r's, else c's), one line. */
void pg_say(char *err, const char *what, PGconn *c, PGresult *r);

#endif /* BENCH_PG_CLUSTER_H */
