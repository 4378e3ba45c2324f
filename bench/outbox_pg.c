/*
 * outbox_pg.c — a PostgreSQL outbox table and its polling dispatcher (see
 * outbox_pg.h).
 */
#include "bench/outbox_pg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SCHEMA[] =
    "CREATE TABLE biz (ev bigint PRIMARY KEY, v text NOT NULL);\n"
    "CREATE TABLE outbox (id bigserial PRIMARY KEY, ev bigint NOT NULL,\n"
    "                     stamp bigint NOT NULL, payload text NOT NULL);\n"
    /* no key: a duplicate delivery stays visible to the check */
    "CREATE TABLE target (ev bigint NOT NULL);\n"
    "CREATE TABLE offsets (consumer text PRIMARY KEY, off bigint NOT NULL);\n"
    "CREATE FUNCTION ob_produce(e bigint, s bigint, p text) RETURNS void\n"
    "LANGUAGE plpgsql AS $$\n"
    "BEGIN\n"
    "  INSERT INTO biz(ev, v) VALUES (e, p);\n"
    "  INSERT INTO outbox(ev, stamp, payload) VALUES (e, s, p);\n"
    "END $$;\n"
    "CREATE FUNCTION ob_dispatch_apply(n int) RETURNS int\n"
    "LANGUAGE plpgsql AS $$\n"
    "DECLARE ids bigint[]; evs bigint[];\n"
    "BEGIN\n"
    "  SELECT array_agg(id), array_agg(ev) INTO ids, evs FROM\n"
    "    (SELECT id, ev FROM outbox ORDER BY id LIMIT n\n"
    "     FOR UPDATE SKIP LOCKED) b;\n"
    "  IF ids IS NULL THEN RETURN 0; END IF;\n"
    "  INSERT INTO target(ev) SELECT unnest(evs);\n"
    "  DELETE FROM outbox WHERE id = ANY(ids);\n"
    "  RETURN cardinality(ids);\n"
    "END $$;\n"
    "CREATE FUNCTION ob_apply(c text, first bigint, evs bigint[])\n"
    "RETURNS int LANGUAGE plpgsql AS $$\n"
    "DECLARE cur bigint; k int;\n"
    "BEGIN\n"
    "  INSERT INTO offsets VALUES (c, 0) ON CONFLICT DO NOTHING;\n"
    "  SELECT off INTO cur FROM offsets WHERE consumer = c FOR UPDATE;\n"
    "  INSERT INTO target(ev) SELECT e FROM unnest(evs) WITH ORDINALITY\n"
    "    AS u(e, i) WHERE first + i - 1 > cur;\n"
    "  GET DIAGNOSTICS k = ROW_COUNT;\n"
    "  UPDATE offsets SET off = greatest(off, first + cardinality(evs) - 1)\n"
    "    WHERE consumer = c;\n"
    "  RETURN k;\n"
    "END $$;\n";

int
obpg_start(pg_cluster *p, const char *bin, const char *dir, int max_conns)
{
    return pg_cluster_start(p, bin, dir, max_conns, SCHEMA);
}

PGconn *
obpg_connect(const pg_cluster *p, char *err)
{
    PGconn *c = pg_cluster_connect(p, err);

    if (c == NULL) {
        return NULL;
    }
    if (pg_prepare(c, "produce", "SELECT ob_produce($1, $2, $3)", 3, err) !=
            0 ||
        pg_prepare(c, "dispatch", "SELECT ob_dispatch_apply($1)", 1, err) !=
            0 ||
        pg_prepare(c, "poll",
                   "SELECT id, ev, stamp FROM outbox ORDER BY id LIMIT $1 "
                   "FOR UPDATE SKIP LOCKED",
                   1, err) != 0 ||
        pg_prepare(c, "delete",
                   "DELETE FROM outbox WHERE id = ANY($1::bigint[])", 1,
                   err) != 0 ||
        pg_prepare(c, "apply", "SELECT ob_apply($1, $2, $3::bigint[])", 3,
                   err) != 0) {
        PQfinish(c);
        return NULL;
    }
    return c;
}

/* Runs prepared statement name; *rp the result when rp is not NULL. */
static int
run(PGconn *c, const char *name, int n, const char *const *params,
    PGresult **rp, char *err)
{
    PGresult *r = PQexecPrepared(c, name, n, params, NULL, NULL, 0);
    ExecStatusType s = PQresultStatus(r);

    if (s != PGRES_TUPLES_OK && s != PGRES_COMMAND_OK) {
        pg_say(err, name, c, r);
        PQclear(r);
        return -1;
    }
    if (rp != NULL) {
        *rp = r;
    } else {
        PQclear(r);
    }
    return 0;
}

int
obpg_produce(PGconn *c, uint64_t ev, int64_t stamp, const char *payload,
             char *err)
{
    char e[24], s[24];
    const char *params[] = {e, s, payload};

    snprintf(e, sizeof(e), "%" PRIu64, ev);
    snprintf(s, sizeof(s), "%" PRId64, stamp);
    return run(c, "produce", 3, params, NULL, err);
}

/* The int in the first cell of a one-row result; clears r. */
static int
first_int(PGresult *r, int *n, char *err)
{
    if (PQntuples(r) != 1 || PQgetisnull(r, 0, 0)) {
        snprintf(err, PG_ERR_LEN, "postgres: expected one value");
        PQclear(r);
        return -1;
    }
    *n = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return 0;
}

int
obpg_dispatch_apply(PGconn *c, int batch, int *n, char *err)
{
    char b[16];
    const char *params[] = {b};
    PGresult *r;

    snprintf(b, sizeof(b), "%d", batch);
    if (run(c, "dispatch", 1, params, &r, err) != 0) {
        return -1;
    }
    return first_int(r, n, err);
}

/* "{a,b,...}" of v[0..n); malloc'd, NULL when out of memory. */
static char *
u64_array(const uint64_t *v, size_t n)
{
    size_t cap = 3 + n * 21, off = 0;
    char *s = malloc(cap);

    if (s == NULL) {
        return NULL;
    }
    s[off++] = '{';
    for (size_t i = 0; i < n; i++) {
        off += (size_t)snprintf(s + off, cap - off, "%s%" PRIu64,
                                i > 0 ? "," : "", v[i]);
    }
    snprintf(s + off, cap - off, "}");
    return s;
}

/* "{id,...}" of the first column of r's rows, or NULL. */
static char *
id_array(PGresult *r)
{
    size_t rows = (size_t)PQntuples(r);
    uint64_t *v = malloc((rows + 1) * sizeof(*v));
    char *s;

    if (v == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < rows; i++) {
        v[i] = strtoull(PQgetvalue(r, (int)i, 0), NULL, 10);
    }
    s = u64_array(v, rows);
    free(v);
    return s;
}

int
obpg_poll(PGconn *c, int batch, obpg_deliver_fn fn, void *arg, int *n,
          char *err)
{
    char b[16], *ids = NULL;
    const char *params[] = {b};
    PGresult *r = NULL;

    snprintf(b, sizeof(b), "%d", batch);
    if (pg_exec(c, "BEGIN", err) != 0) {
        return -1;
    }
    if (run(c, "poll", 1, params, &r, err) != 0) {
        goto abort;
    }
    *n = PQntuples(r);
    for (int i = 0; i < *n; i++) {
        fn(arg, strtoull(PQgetvalue(r, i, 1), NULL, 10),
           strtoll(PQgetvalue(r, i, 2), NULL, 10));
    }
    if (*n > 0) {
        if ((ids = id_array(r)) == NULL) {
            snprintf(err, PG_ERR_LEN, "out of memory");
            goto abort;
        }
        params[0] = ids;
        if (run(c, "delete", 1, params, NULL, err) != 0) {
            goto abort;
        }
    }
    free(ids);
    PQclear(r);
    return pg_exec(c, "COMMIT", err);
abort:
    free(ids);
    PQclear(r);
    PQclear(PQexec(c, "ROLLBACK"));
    return -1;
}

int
obpg_apply(PGconn *c, const char *consumer, uint64_t first, const uint64_t *evs,
           size_t n, char *err)
{
    char f[24], *arr = u64_array(evs, n);
    const char *params[] = {consumer, f, arr};
    int rv;

    if (arr == NULL) {
        snprintf(err, PG_ERR_LEN, "out of memory");
        return -1;
    }
    snprintf(f, sizeof(f), "%" PRIu64, first);
    rv = run(c, "apply", 3, params, NULL, err);
    free(arr);
    return rv;
}

int
obpg_scalar(PGconn *c, const char *sql, int64_t *v, char *err)
{
    PGresult *r = PQexec(c, sql);
    int ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;

    if (ok) {
        *v = PQgetisnull(r, 0, 0) ? 0 : strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    } else {
        pg_say(err, sql, c, r);
    }
    PQclear(r);
    return ok ? 0 : -1;
}

int
obpg_check(PGconn *c, const char *table, int64_t *count, int64_t *distinct,
           int64_t *sum, char *err)
{
    char sql[3][96];

    snprintf(sql[0], sizeof(sql[0]), "SELECT count(*) FROM %s", table);
    snprintf(sql[1], sizeof(sql[1]), "SELECT count(DISTINCT ev) FROM %s",
             table);
    snprintf(sql[2], sizeof(sql[2]), "SELECT sum(ev) FROM %s", table);
    if (obpg_scalar(c, sql[0], count, err) != 0 ||
        obpg_scalar(c, sql[1], distinct, err) != 0 ||
        obpg_scalar(c, sql[2], sum, err) != 0) {
        return -1;
    }
    return 0;
}
