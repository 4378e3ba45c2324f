/*
 * peer_postgres.c — PostgreSQL as a user would make increments
 * exactly-once: the idempotency-key transaction — INSERT the call's key ON
 * CONFLICT DO NOTHING; if it was new, UPDATE the counter and store the
 * result under the key; if not, read the stored result. One libpq
 * connection per caller, prepared statements.
 *
 *   --pg-mode function    (default) the transaction is a PL/pgSQL function
 *                         called by one prepared statement: one round trip
 *                         per call, PostgreSQL's best case.
 *   --pg-mode statements  BEGIN; the three prepared statements; COMMIT:
 *                         five round trips, as most application code does.
 *
 * postgres-job (--workload job, job_row.h): the job transition as one
 * PL/pgSQL function, one round trip: the idempotency key's stored result
 * if it exists; else UPDATE of the job row WHERE its version is the one
 * the caller read, and the result stored under the key; else the row as
 * it is, for the caller to read again.
 *
 * Owns: a PostgreSQL 15 cluster of its own (pg_cluster.c: initdb and
 * pg_ctl in the peer's temp dir, socket there and no TCP listener,
 * synchronous_commit=on and fsync=on: COMMIT returns after the WAL holding
 * it is flushed, so no reply leaves before its effect is on disk — the
 * same durability as once) and one connection per caller.
 * Invariant: pg_cluster_start checks SHOW synchronous_commit/fsync on the
 * running server before anything is measured.
 * Never: touches a cluster it did not create.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "bench/compare_peer.h"
#include "bench/job_row.h"
#include "bench/pg_cluster.h"

static const char SCHEMA[] =
    "CREATE TABLE counters (name text PRIMARY KEY, v bigint NOT NULL);\n"
    "CREATE TABLE idem (key text PRIMARY KEY, result bigint);\n"
    "CREATE FUNCTION once_incr(k text, ctr text, d bigint,\n"
    "                          OUT replayed boolean, OUT value bigint)\n"
    "LANGUAGE plpgsql AS $$\n"
    "BEGIN\n"
    "  INSERT INTO idem(key) VALUES (k) ON CONFLICT DO NOTHING;\n"
    "  IF NOT FOUND THEN\n"
    "    replayed := true;\n"
    "    SELECT result INTO value FROM idem WHERE key = k;\n"
    "    RETURN;\n"
    "  END IF;\n"
    "  UPDATE counters SET v = v + d WHERE name = ctr RETURNING v INTO value;\n"
    "  UPDATE idem SET result = value WHERE key = k;\n"
    "  replayed := false;\n"
    "END $$;\n"
    /* outcome: job_outcome's numbers; the row exists (pg_open). The lock taken
     * by the UPDATE orders two attempts of one key: the second finds the
     * version moved and, attempting again, the key. */
    "CREATE TABLE jobs (id text PRIMARY KEY, row text NOT NULL,\n"
    "                   ver bigint NOT NULL);\n"
    "CREATE TABLE job_idem (key text PRIMARY KEY, result bigint NOT NULL);\n"
    "CREATE FUNCTION job_transition(k text, job text, expect bigint,\n"
    "                               newrow text, t bigint,\n"
    "                               OUT outcome int, OUT version bigint,\n"
    "                               OUT payload text)\n"
    "LANGUAGE plpgsql AS $$\n"
    "BEGIN\n"
    "  SELECT result::text INTO payload FROM job_idem WHERE key = k;\n"
    "  IF FOUND THEN outcome := 1; version := 0; RETURN; END IF;\n"
    "  UPDATE jobs SET row = newrow, ver = jobs.ver + 1\n"
    "    WHERE id = job AND jobs.ver = expect RETURNING jobs.ver INTO "
    "version;\n"
    "  IF NOT FOUND THEN\n"
    "    outcome := 2;\n"
    "    SELECT j.ver, j.row INTO version, payload FROM jobs j WHERE id = "
    "job;\n"
    "    RETURN;\n"
    "  END IF;\n"
    "  INSERT INTO job_idem(key, result) VALUES (k, t);\n"
    "  outcome := 0; payload := t::text;\n"
    "END $$;\n";

typedef struct pg_env {
    pg_cluster cl;
    bool function; /* --pg-mode function */
} pg_env;

typedef struct pg_conn {
    PGconn *c;
    bool function;
    char counter[96];
    int level, index;
    uint64_t last_n; /* the last call that returned OK; 0: none */
    job_cache job;   /* postgres-job */
} pg_conn;

static PGconn *
connect_to(const pg_env *e, char *err)
{
    return pg_cluster_connect(&e->cl, err);
}

static int
pg_start(const compare_config *cfg, void **envp)
{
    pg_env *e = calloc(1, sizeof(*e));

    if (e == NULL) {
        return -1;
    }
    e->function = strcmp(cfg->pg_mode, "statements") != 0;
    if (pg_cluster_start(&e->cl, cfg->pg_bin, cfg->dir, cfg->max_callers + 16,
                         SCHEMA) != 0) {
        free(e);
        return -1;
    }
    *envp = e;
    return 0;
}

static void
pg_stop(void *env)
{
    pg_env *e = env;

    if (e != NULL) {
        pg_cluster_stop(&e->cl);
        free(e);
    }
}

static int
pg_open(void *env, const compare_caller *who, void **connp, char *err)
{
    pg_env *e = env;
    pg_conn *k = calloc(1, sizeof(*k));
    const char *params[1];
    PGresult *r;

    if (k == NULL) {
        snprintf(err, COMPARE_ERR_LEN, "out of memory");
        return -1;
    }
    k->function = e->function;
    job_cache_init(&k->job);
    k->level = who->level;
    k->index = who->index;
    snprintf(k->counter, sizeof(k->counter), "%s", who->counter);
    if ((k->c = connect_to(e, err)) == NULL) {
        goto fail;
    }
    if (pg_prepare(k->c, "incr",
                   "SELECT replayed, value FROM once_incr($1, $2, $3)", 3,
                   err) != 0 ||
        pg_prepare(k->c, "ins",
                   "INSERT INTO idem(key) VALUES ($1) ON CONFLICT DO NOTHING",
                   1, err) != 0 ||
        pg_prepare(k->c, "upd",
                   "UPDATE counters SET v = v + $2 WHERE name = $1 RETURNING v",
                   2, err) != 0 ||
        pg_prepare(k->c, "res", "UPDATE idem SET result = $2 WHERE key = $1", 2,
                   err) != 0 ||
        pg_prepare(k->c, "sel", "SELECT result FROM idem WHERE key = $1", 1,
                   err) != 0 ||
        pg_prepare(k->c, "job",
                   "SELECT outcome, version, payload "
                   "FROM job_transition($1, $2, $3, $4, $5)",
                   5, err) != 0) {
        goto fail;
    }
    /* The caller's counter and job row (a job peer uses the latter). */
    params[0] = k->counter;
    for (int i = 0; i < 2; i++) {
        static const char *const rows[] = {
            "INSERT INTO counters(name, v) VALUES ($1, 0) "
            "ON CONFLICT DO NOTHING",
            "INSERT INTO jobs(id, row, ver) VALUES ($1, '', 0) "
            "ON CONFLICT DO NOTHING",
        };
        r = PQexecParams(k->c, rows[i], 1, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            pg_say(err, "counter or job row", k->c, r);
            PQclear(r);
            goto fail;
        }
        PQclear(r);
    }
    *connp = k;
    return 0;
fail:
    PQfinish(k->c);
    free(k);
    return -1;
}

/* Runs prepared statement name; on success *r holds the result (PQclear).
 */
static int
run(pg_conn *k, const char *name, int n, const char *const *params,
    ExecStatusType want, PGresult **rp, char *err)
{
    PGresult *r = PQexecPrepared(k->c, name, n, params, NULL, NULL, 0);

    if (PQresultStatus(r) != want) {
        pg_say(err, name, k->c, r);
        PQclear(r);
        return -1;
    }
    *rp = r;
    return 0;
}

static int
incr_function(pg_conn *k, const char *key, bool *replayed, int64_t *value,
              char *err)
{
    const char *params[] = {key, k->counter, "1"};
    PGresult *r;

    if (run(k, "incr", 3, params, PGRES_TUPLES_OK, &r, err) != 0) {
        return -1;
    }
    if (PQntuples(r) != 1 || PQgetisnull(r, 0, 1)) {
        snprintf(err, COMPARE_ERR_LEN, "postgres: once_incr: no value");
        PQclear(r);
        return -1;
    }
    *replayed = PQgetvalue(r, 0, 0)[0] == 't';
    *value = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
    PQclear(r);
    return 0;
}

static int
incr_statements(pg_conn *k, const char *key, bool *replayed, int64_t *value,
                char *err)
{
    const char *p1[] = {key};
    const char *p2[2];
    char v[32];
    PGresult *r;

    if (pg_exec(k->c, "BEGIN", err) != 0) {
        return -1;
    }
    if (run(k, "ins", 1, p1, PGRES_COMMAND_OK, &r, err) != 0) {
        goto abort;
    }
    *replayed = strcmp(PQcmdTuples(r), "0") == 0;
    PQclear(r);
    if (*replayed) {
        if (run(k, "sel", 1, p1, PGRES_TUPLES_OK, &r, err) != 0) {
            goto abort;
        }
        *value =
            PQntuples(r) == 1 ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : -1;
        PQclear(r);
    } else {
        p2[0] = k->counter;
        p2[1] = "1";
        if (run(k, "upd", 2, p2, PGRES_TUPLES_OK, &r, err) != 0) {
            goto abort;
        }
        if (PQntuples(r) != 1) {
            snprintf(err, COMPARE_ERR_LEN, "postgres: no counter row");
            PQclear(r);
            goto abort;
        }
        *value = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        PQclear(r);
        snprintf(v, sizeof(v), "%lld", (long long)*value);
        p2[0] = key;
        p2[1] = v;
        if (run(k, "res", 2, p2, PGRES_COMMAND_OK, &r, err) != 0) {
            goto abort;
        }
        PQclear(r);
    }
    return pg_exec(k->c, "COMMIT", err);
abort:
    PQclear(PQexec(k->c, "ROLLBACK"));
    return -1;
}

static int
incr(pg_conn *k, uint64_t n, bool *replayed, int64_t *value, char *err)
{
    char key[96];

    snprintf(key, sizeof(key), "%d/%d/%llu", k->level, k->index,
             (unsigned long long)n);
    return k->function ? incr_function(k, key, replayed, value, err)
                       : incr_statements(k, key, replayed, value, err);
}

static int
pg_call(void *conn, uint64_t n, int64_t *value, char *err)
{
    pg_conn *k = conn;
    bool replayed;

    if (incr(k, n, &replayed, value, err) != 0) {
        return -1;
    }
    if (replayed) {
        snprintf(err, COMPARE_ERR_LEN, "postgres: key %llu already used",
                 (unsigned long long)n);
        return -1;
    }
    k->last_n = n;
    return 0;
}

static int
pg_replay_last(void *conn, bool *replayed, int64_t *value, char *err)
{
    pg_conn *k = conn;

    if (k->last_n == 0) {
        snprintf(err, COMPARE_ERR_LEN, "no call to replay");
        return -1;
    }
    return incr(k, k->last_n, replayed, value, err);
}

static void
pg_close(void *conn)
{
    pg_conn *k = conn;

    if (k != NULL) {
        PQfinish(k->c);
        free(k);
    }
}

static int
pg_read(void *env, const char *counter, int64_t *value, char *err)
{
    const char *params[] = {counter};
    PGconn *c = connect_to(env, err);
    PGresult *r;
    int rv = -1;

    if (c == NULL) {
        return -1;
    }
    r = PQexecParams(c, "SELECT v FROM counters WHERE name = $1", 1, NULL,
                     params, NULL, NULL, 0);
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
        *value = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        rv = 0;
    } else {
        pg_say(err, "read", c, r);
    }
    PQclear(r);
    PQfinish(c);
    return rv;
}

/* ---- postgres-job -------------------------------------------------------- */

/* One call of job_transition (job_attempt_fn). */
static int
job_attempt(void *conn, uint64_t n, int64_t expect, const char *row,
            size_t rlen, int64_t t, job_outcome *out, int64_t *version,
            int64_t *transitions, char *err)
{
    pg_conn *k = conn;
    char key[96], ex[32], ts[32], text[JOB_ROW_MAX];
    const char *params[] = {key, k->counter, ex, text, ts};
    const char *payload;
    PGresult *r;
    int o, rv = 0;

    snprintf(key, sizeof(key), "%d/%d/%llu", k->level, k->index,
             (unsigned long long)n);
    snprintf(ex, sizeof(ex), "%lld", (long long)expect);
    snprintf(ts, sizeof(ts), "%lld", (long long)t);
    snprintf(text, sizeof(text), "%.*s", (int)rlen, row);
    if (run(k, "job", 5, params, PGRES_TUPLES_OK, &r, err) != 0) {
        return -1;
    }
    if (PQntuples(r) != 1 || (o = atoi(PQgetvalue(r, 0, 0))) < 0 ||
        o > JOB_MOVED) {
        snprintf(err, COMPARE_ERR_LEN, "postgres: job_transition: odd row");
        PQclear(r);
        return -1;
    }
    *out = (job_outcome)o;
    *version = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
    payload = PQgetvalue(r, 0, 2);
    *transitions = strtoll(payload, NULL, 10);
    if (*out == JOB_MOVED && payload[0] != '\0' &&
        job_row_parse(payload, strlen(payload), transitions) != 0) {
        snprintf(err, COMPARE_ERR_LEN, "postgres: not a job row");
        rv = -1;
    }
    PQclear(r);
    return rv;
}

static int
job_call(void *conn, uint64_t n, int64_t *value, char *err)
{
    return job_transition(conn, job_attempt, &((pg_conn *)conn)->job, n, value,
                          err);
}

static int
job_replay_last(void *conn, bool *replayed, int64_t *value, char *err)
{
    return job_replay(conn, job_attempt, &((pg_conn *)conn)->job, replayed,
                      value, err);
}

static int
job_read(void *env, const char *job, int64_t *value, char *err)
{
    const char *params[] = {job};
    PGconn *c = connect_to(env, err);
    PGresult *r;
    int rv = -1;

    if (c == NULL) {
        return -1;
    }
    r = PQexecParams(c, "SELECT row FROM jobs WHERE id = $1", 1, NULL, params,
                     NULL, NULL, 0);
    if (PQresultStatus(r) == PGRES_TUPLES_OK &&
        (PQntuples(r) == 0 || PQgetlength(r, 0, 0) == 0)) {
        *value = 0; /* no transition yet */
        rv = 0;
    } else if (PQresultStatus(r) == PGRES_TUPLES_OK &&
               job_row_parse(PQgetvalue(r, 0, 0), (size_t)PQgetlength(r, 0, 0),
                             value) == 0) {
        rv = 0;
    } else {
        pg_say(err, "read job", c, r);
    }
    PQclear(r);
    PQfinish(c);
    return rv;
}

const compare_peer compare_peer_postgres_job = {
    .name = "postgres-job",
    .what = "PostgreSQL 15, synchronous_commit=on, job_transition(): key "
            "check + UPDATE ... WHERE ver = read",
    .exactly_once = true,
    .job = true,
    .start = pg_start,
    .stop = pg_stop,
    .open = pg_open,
    .call = job_call,
    .replay_last = job_replay_last,
    .close = pg_close,
    .read = job_read,
};

const compare_peer compare_peer_postgres = {
    .name = "postgres",
    .what = "PostgreSQL 15, synchronous_commit=on, idempotency-key "
            "transaction (prepared)",
    .exactly_once = true,
    .start = pg_start,
    .stop = pg_stop,
    .open = pg_open,
    .call = pg_call,
    .replay_last = pg_replay_last,
    .close = pg_close,
    .read = pg_read,
};
