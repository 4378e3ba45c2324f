/*
 * outbox_report.h — bench_outbox's figures as rows: printed and appended
 * to the CSV the moment a phase hands them over, so a later phase that
 * fails or overruns never takes the earlier figures with it.
 *
 * Owns: the rows handed over so far and the CSV file, from open to close.
 * Invariant: every row handed over is on stdout and flushed to the CSV
 * before report_rows returns.
 * Never: measures or decides anything; a row's verdict is its target's.
 */
#ifndef BENCH_OUTBOX_REPORT_H
#define BENCH_OUTBOX_REPORT_H

#include <stdio.h>

typedef enum tkind {
    T_NONE,      /* no target: shown */
    T_RATIO_MIN, /* once / postgres at least target */
    T_ONCE_MIN,  /* once at least target */
    T_ONCE_MAX,  /* once at most target */
} tkind;

typedef struct row {
    char what[64];
    double once, pg; /* pg < 0: no PostgreSQL figure */
    tkind k;
    double target;
    const char *unit; /* of the target */
} row;

#define REPORT_ROWS_MAX 32

typedef struct report {
    row rows[REPORT_ROWS_MAX];
    int n;
    int shown; /* rows already printed and written */
    FILE *csv; /* NULL: no --csv */
} report;

/* Opens path (NULL: none) and writes the CSV header. 0, or -1 (said). */
int report_open(report *rp, const char *path);

/* Adds a row (dropped past REPORT_ROWS_MAX, said on stderr). */
void report_add(report *rp, const char *what, double once, double pg, tkind k,
                double target, const char *unit);

/* Prints the rows added since the last call under a header naming the
 * phase, and appends them to the CSV, flushed. */
void report_rows(report *rp, const char *phase);

/* Every row so far as one table, with header (the end of a run). */
void report_table(const report *rp, const char *title);

void report_close(report *rp);

#endif
