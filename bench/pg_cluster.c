/*
 * pg_cluster.c — a PostgreSQL cluster of a benchmark's own (see
 * pg_cluster.h).
 */
#include "bench/pg_cluster.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define PG_INITDB_MS 120000
#define PG_START_S   "60"
#define PG_CTL_MS    90000
#define PG_PORT      "5432" /* only names the socket file in our own dir */

void
pg_say(char *err, const char *what, PGconn *c, PGresult *r)
{
    const char *m = r != NULL ? PQresultErrorMessage(r) : "";
    if (m == NULL || m[0] == '\0') {
        m = PQerrorMessage(c);
    }
    snprintf(err, PG_ERR_LEN, "postgres %s: %s", what, m);
    /* libpq messages end in a newline; the report adds its own. */
    err[strcspn(err, "\n")] = '\0';
}

int
pg_exec(PGconn *c, const char *sql, char *err)
{
    PGresult *r = PQexec(c, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK ||
             PQresultStatus(r) == PGRES_TUPLES_OK;

    if (!ok) {
        pg_say(err, sql, c, r);
    }
    PQclear(r);
    return ok ? 0 : -1;
}

int
pg_prepare(PGconn *c, const char *name, const char *sql, int nparams, char *err)
{
    PGresult *r = PQprepare(c, name, sql, nparams, NULL);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;

    if (!ok) {
        pg_say(err, name, c, r);
    }
    PQclear(r);
    return ok ? 0 : -1;
}

PGconn *
pg_cluster_connect(const pg_cluster *p, char *err)
{
    PGconn *c = PQconnectdb(p->conninfo);

    if (PQstatus(c) != CONNECTION_OK) {
        pg_say(err, "connect", c, NULL);
        PQfinish(c);
        return NULL;
    }
    return c;
}

static int
show_is(PGconn *c, const char *name, const char *want, char *err)
{
    char sql[96];
    PGresult *r;
    int ok;

    snprintf(sql, sizeof(sql), "SHOW %s", name);
    r = PQexec(c, sql);
    ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
         strcmp(PQgetvalue(r, 0, 0), want) == 0;
    if (!ok) {
        snprintf(err, PG_ERR_LEN, "postgres: %s is not %s", name, want);
    }
    PQclear(r);
    return ok ? 0 : -1;
}

static int
pg_ctl(pg_cluster *p, const char *action, const char *opts)
{
    char path[300];
    const char *argv[16];
    int n = 0;

    snprintf(path, sizeof(path), "%s/pg_ctl", p->bin);
    argv[n++] = path;
    argv[n++] = action;
    argv[n++] = "-D";
    argv[n++] = p->data;
    argv[n++] = "-w";
    argv[n++] = "-t";
    argv[n++] = PG_START_S;
    if (strcmp(action, "start") == 0) {
        argv[n++] = "-l";
        argv[n++] = p->log;
        argv[n++] = "-o";
        argv[n++] = opts;
    } else {
        argv[n++] = "-m";
        argv[n++] = "fast";
    }
    argv[n] = NULL;
    return compare_proc_run(argv, &p->user, p->log, PG_CTL_MS);
}

static int
initdb(pg_cluster *p)
{
    char path[300];
    struct stat sb;

    snprintf(path, sizeof(path), "%s/initdb", p->bin);
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "postgres: no %s (--pg-bin DIR)\n", path);
        return -1;
    }
    if (compare_user_for_postgres(&p->user) != 0) {
        fprintf(stderr, "postgres: running as root and no user "
                        "'postgres' or 'nobody' to run PostgreSQL as\n");
        return -1;
    }
    /* The cluster's user owns the whole dir: data, log and socket. */
    if (compare_user_chown(&p->user, p->dir) != 0) {
        fprintf(stderr, "postgres: chown %s: %s\n", p->dir, strerror(errno));
        return -1;
    }
    /* --no-sync only skips syncing initdb's template files; every commit
     * measured is WAL-flushed (fsync=on). */
    const char *argv[] = {path,    "-D",         p->data,     "-U",
                          "bench", "-A",         "trust",     "-E",
                          "UTF8",  "--locale=C", "--no-sync", NULL};
    if (compare_proc_run(argv, &p->user, p->log, PG_INITDB_MS) != 0) {
        fprintf(stderr, "postgres: initdb failed\n");
        compare_proc_tail(p->log, 1500);
        return -1;
    }
    return 0;
}

int
pg_cluster_start(pg_cluster *p, const char *bin, const char *dir, int max_conns,
                 const char *schema)
{
    char opts[600], err[PG_ERR_LEN] = "";
    PGconn *c = NULL;

    memset(p, 0, sizeof(*p));
    snprintf(p->bin, sizeof(p->bin), "%s", bin);
    snprintf(p->dir, sizeof(p->dir), "%s", dir);
    snprintf(p->data, sizeof(p->data), "%s/data", dir);
    snprintf(p->log, sizeof(p->log), "%s/postgres.log", dir);
    if (initdb(p) != 0) {
        return -1;
    }
    snprintf(opts, sizeof(opts),
             "-k %s -p " PG_PORT " -c listen_addresses='' "
             "-c synchronous_commit=on -c fsync=on -c max_connections=%d",
             p->dir, max_conns);
    if (pg_ctl(p, "start", opts) != 0) {
        fprintf(stderr, "postgres: pg_ctl start failed\n");
        compare_proc_tail(p->log, 1500);
        return -1;
    }
    p->started = true;
    snprintf(p->conninfo, sizeof(p->conninfo),
             "host=%s port=" PG_PORT " user=bench dbname=postgres "
             "connect_timeout=10 options='-c statement_timeout=10000'",
             p->dir);
    if ((c = pg_cluster_connect(p, err)) == NULL ||
        show_is(c, "synchronous_commit", "on", err) != 0 ||
        show_is(c, "fsync", "on", err) != 0 || pg_exec(c, schema, err) != 0) {
        fprintf(stderr, "%s\n", err);
        PQfinish(c);
        pg_cluster_stop(p);
        return -1;
    }
    PQfinish(c);
    return 0;
}

void
pg_cluster_stop(pg_cluster *p)
{
    if (p->started && pg_ctl(p, "stop", NULL) != 0) {
        fprintf(stderr, "postgres: pg_ctl stop failed; see %s\n", p->log);
    }
    p->started = false;
}
