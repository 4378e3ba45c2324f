/*
 * test_prom_text.c — the Prometheus text writer (server/prom_text.h) on
 * its own: what onced's own label values never contain (quotes,
 * backslashes, newlines) is escaped, histogram buckets are cumulated with
 * a last +Inf bucket equal to _count, and the text is NUL-terminated.
 * Never: starts onced (test_metrics scrapes a real one).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "server/prom_text.h"

static void
test_labels_escaped(void **state)
{
    prom_text t = {NULL, 0, 0, false};
    const char *labels[4] = {"method", "a\"b\\c\nd", "code", "OK"};
    char *out;
    size_t len;

    (void)state;
    prom_text_family(&t, "x_total", "counter", "An x.");
    prom_text_u64(&t, "x_total", labels, 2, 7);
    prom_text_double(&t, "y", NULL, 0, 0.5);
    assert_int_equal(prom_text_take(&t, &out, &len), 0);
    assert_int_equal(strlen(out), len);
    assert_string_equal(out,
                        "# HELP x_total An x.\n"
                        "# TYPE x_total counter\n"
                        "x_total{method=\"a\\\"b\\\\c\\nd\",code=\"OK\"} 7\n"
                        "y 0.5\n");
    free(out);
}

static void
test_histogram_cumulated(void **state)
{
    prom_text t = {NULL, 0, 0, false};
    const uint64_t bounds[2] = {250, 1000000};
    const uint64_t counts[3] = {2, 0, 5}; /* per bucket, last is +Inf */
    char *out;
    size_t len;

    (void)state;
    prom_text_histogram(&t, "d_seconds", bounds, 2, 1e6, counts, 12.5);
    assert_int_equal(prom_text_take(&t, &out, &len), 0);
    assert_string_equal(out, "d_seconds_bucket{le=\"0.00025\"} 2\n"
                             "d_seconds_bucket{le=\"1\"} 2\n"
                             "d_seconds_bucket{le=\"+Inf\"} 7\n"
                             "d_seconds_sum 12.5\n"
                             "d_seconds_count 7\n");
    free(out);
}

/* Grows past its first 4 KiB without losing a byte. */
static void
test_grows(void **state)
{
    prom_text t = {NULL, 0, 0, false};
    char *out;
    size_t len;

    (void)state;
    for (int i = 0; i < 1000; i++) {
        prom_text_u64(&t, "some_long_metric_name_total", NULL, 0, (uint64_t)i);
    }
    assert_int_equal(prom_text_take(&t, &out, &len), 0);
    assert_true(len > 4096);
    assert_non_null(strstr(out, "some_long_metric_name_total 999\n"));
    assert_int_equal(out[len], '\0');
    free(out);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_labels_escaped),
        cmocka_unit_test(test_histogram_cumulated),
        cmocka_unit_test(test_grows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
