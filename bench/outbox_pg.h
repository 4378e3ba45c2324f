/*
 * outbox_pg.h — the usual alternative to once's outbox, as bench_outbox
 * measures it: a PostgreSQL outbox table written in the business
 * transaction, and a polling dispatcher (SELECT ... FOR UPDATE SKIP
 * LOCKED, deliver, DELETE). Also the PostgreSQL side of once's applying
 * consumer: a batch of events and the consumer's offset in one
 * transaction (docs/outbox.md, receiver pattern 1).
 *
 * Owns: the schema and the statements; one PGconn per caller (the caller
 * owns it). Each call is one round trip to a PL/pgSQL function (prepared),
 * PostgreSQL's best case, except obpg_poll, which is the dispatcher's
 * BEGIN / SELECT ... FOR UPDATE SKIP LOCKED / deliver / DELETE / COMMIT.
 * Invariant: the target table has no key on the event id, so a duplicate
 * delivery shows in obpg_check as count != distinct.
 * Never: commits a business row without its outbox row or the reverse.
 */
#ifndef BENCH_OUTBOX_PG_H
#define BENCH_OUTBOX_PG_H

#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "bench/pg_cluster.h"

/* A cluster with the outbox schema (pg_cluster_start's arguments). */
int obpg_start(pg_cluster *p, const char *bin, const char *dir, int max_conns);

/* A connection with every statement prepared; NULL with err. */
PGconn *obpg_connect(const pg_cluster *p, char *err);

/* One business transaction: the business row of event ev and its outbox
 * row carrying stamp (ns) and payload. 0 or -1 with err. */
int obpg_produce(PGconn *c, uint64_t ev, int64_t stamp, const char *payload,
                 char *err);

/* The applying dispatcher: one transaction that locks at most batch outbox
 * rows (FOR UPDATE SKIP LOCKED), inserts their events into the target
 * table and deletes them. *n: how many. 0 or -1 with err. */
int obpg_dispatch_apply(PGconn *c, int batch, int *n, char *err);

/* The delivering dispatcher: BEGIN; SELECT at most batch rows FOR UPDATE
 * SKIP LOCKED; fn(arg, ev, stamp) for each (the delivery); DELETE them;
 * COMMIT. *n: how many. 0 or -1 with err. */
typedef void (*obpg_deliver_fn)(void *arg, uint64_t ev, int64_t stamp);
int obpg_poll(PGconn *c, int batch, obpg_deliver_fn fn, void *arg, int *n,
              char *err);

/* once's applying consumer: the events of offsets first..first+n-1 into the
 * target table and consumer's offset row, in one transaction; events at or
 * below the stored offset are skipped. 0 or -1 with err. */
int obpg_apply(PGconn *c, const char *consumer, uint64_t first,
               const uint64_t *evs, size_t n, char *err);

/* The first column of the first row of sql as an integer; 0 or -1. */
int obpg_scalar(PGconn *c, const char *sql, int64_t *v, char *err);

/* table ("target" or "outbox"): rows, distinct events, sum of events. */
int obpg_check(PGconn *c, const char *table, int64_t *count, int64_t *distinct,
               int64_t *sum, char *err);

#endif /* BENCH_OUTBOX_PG_H */
