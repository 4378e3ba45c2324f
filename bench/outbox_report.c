/*
 * outbox_report.c — bench_outbox's rows on stdout and in the CSV (see
 * outbox_report.h).
 */
#include "bench/outbox_report.h"

#include <string.h>

int
report_open(report *rp, const char *path)
{
    memset(rp, 0, sizeof(*rp));
    if (path == NULL) {
        return 0;
    }
    if ((rp->csv = fopen(path, "w")) == NULL) {
        fprintf(stderr, "bench_outbox: cannot write %s\n", path);
        return -1;
    }
    fprintf(rp->csv, "metric,once,postgres,ratio,target,met\n");
    fflush(rp->csv);
    return 0;
}

void
report_add(report *rp, const char *what, double once, double pg, tkind k,
           double target, const char *unit)
{
    row *w;

    if (rp->n >= REPORT_ROWS_MAX) {
        fprintf(stderr, "bench_outbox: row \"%s\" dropped (more than %d)\n",
                what, REPORT_ROWS_MAX);
        return;
    }
    w = &rp->rows[rp->n++];
    snprintf(w->what, sizeof(w->what), "%s", what);
    w->once = once;
    w->pg = pg;
    w->k = k;
    w->target = target;
    w->unit = unit;
}

static const char *
met(const row *w)
{
    double ratio = w->pg > 0 ? w->once / w->pg : 0;

    switch (w->k) {
    case T_RATIO_MIN:
        return ratio >= w->target ? "met" : "MISSED";
    case T_ONCE_MIN:
        return w->once >= w->target ? "met" : "MISSED";
    case T_ONCE_MAX:
        return w->once <= w->target ? "met" : "MISSED";
    default:
        return "";
    }
}

static void
print_header(void)
{
    printf("%-36s %12s %12s %8s  %s\n", "", "once", "postgres", "ratio",
           "target");
}

static void
print_row(const row *w)
{
    char pg[16] = "-", ratio[16] = "-", target[40] = "";

    if (w->pg >= 0) {
        snprintf(pg, sizeof(pg), "%.1f", w->pg);
        snprintf(ratio, sizeof(ratio), "%.2f", w->pg > 0 ? w->once / w->pg : 0);
    }
    if (w->k != T_NONE) {
        snprintf(target, sizeof(target), "%s %g%s: %s",
                 w->k == T_ONCE_MAX ? "<=" : ">=", w->target, w->unit, met(w));
    }
    printf("%-36s %12.1f %12s %8s  %s\n", w->what, w->once, pg, ratio, target);
}

static void
csv_row(FILE *fp, const row *w)
{
    fprintf(fp, "\"%s\",%.3f,", w->what, w->once);
    if (w->pg >= 0) {
        fprintf(fp, "%.3f,%.3f,", w->pg, w->pg > 0 ? w->once / w->pg : 0);
    } else {
        fprintf(fp, ",,");
    }
    if (w->k != T_NONE) {
        fprintf(fp, "\"%s %g%s\",%s\n",
                w->k == T_ONCE_MAX ? "<=" : ">=", w->target, w->unit, met(w));
    } else {
        fprintf(fp, ",\n");
    }
}

void
report_rows(report *rp, const char *phase)
{
    if (rp->shown < rp->n) {
        printf("\n%s:\n", phase);
        print_header();
    }
    for (; rp->shown < rp->n; rp->shown++) {
        print_row(&rp->rows[rp->shown]);
        if (rp->csv != NULL) {
            csv_row(rp->csv, &rp->rows[rp->shown]);
        }
    }
    fflush(stdout);
    if (rp->csv != NULL) {
        fflush(rp->csv);
    }
}

void
report_table(const report *rp, const char *title)
{
    printf("\n%s\n", title);
    print_header();
    for (int i = 0; i < rp->n; i++) {
        print_row(&rp->rows[i]);
    }
    fflush(stdout);
}

void
report_close(report *rp)
{
    if (rp->csv != NULL) {
        fclose(rp->csv);
        rp->csv = NULL;
    }
}
