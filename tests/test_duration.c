/*
 * test_duration.c — durations as people write them (base/duration.h),
 * shared by onced's flags and oncectl's options.
 *
 * Owns: the grammar's accepted and rejected forms, overflow, and that
 * duration_format writes what duration_parse reads back.
 * Invariant: every loop is bounded by a table or a constant.
 * Never: touches the network or onced.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "base/duration.h"

static void
test_parse_ok(void **state)
{
    static const struct {
        const char *s;
        uint64_t ms;
    } ok[] = {
        {"200ms", 200},   {"2s", 2000}, {"5m", 300000}, {"1h", 3600000},
        {"1m30s", 90000}, {"250", 250}, {"0ms", 0},     {"1h1m1s1ms", 3661001},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        uint64_t ms = 12345;
        if (duration_parse(ok[i].s, &ms) != 0) {
            fail_msg("duration_parse(\"%s\") failed", ok[i].s);
        }
        assert_int_equal(ms, ok[i].ms);
    }
}

static void
test_parse_bad(void **state)
{
    static const char *const bad[] = {
        "",    "ms", "-1s",  "+1s", "1.5s", "1 s", " 1s",
        "1s ", "1d", "1sec", "s1",  "1m30", "10x",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t ms = 777;
        int rv = duration_parse(bad[i], &ms);
        if (rv != EINVAL) {
            fail_msg("duration_parse(\"%s\") = %d, expected EINVAL", bad[i],
                     rv);
        }
        assert_int_equal(ms, 777); /* untouched on error */
    }
}

static void
test_parse_overflow(void **state)
{
    uint64_t ms = 1;

    (void)state;
    assert_int_equal(duration_parse("18446744073709551616ms", &ms), ERANGE);
    assert_int_equal(duration_parse("99999999999999999h", &ms), ERANGE);
    assert_int_equal(ms, 1);
    assert_int_equal(duration_parse("18446744073709551615ms", &ms), 0);
    assert_int_equal(ms, UINT64_MAX);
}

static void
test_format_round_trip(void **state)
{
    static const uint64_t vals[] = {0,       1,        999,       1000,
                                    1500,    30000,    90000,     3600000,
                                    3661001, 86400000, UINT64_MAX};
    char buf[64];

    (void)state;
    assert_string_equal(duration_format(30000, buf, sizeof(buf)), "30s");
    assert_string_equal(duration_format(90000, buf, sizeof(buf)), "1m30s");
    assert_string_equal(duration_format(1500, buf, sizeof(buf)), "1s500ms");
    assert_string_equal(duration_format(0, buf, sizeof(buf)), "0ms");
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        uint64_t back = 0;
        duration_format(vals[i], buf, sizeof(buf));
        if (duration_parse(buf, &back) != 0 || back != vals[i]) {
            fail_msg("%llu formats as \"%s\", which reads back as %llu",
                     (unsigned long long)vals[i], buf,
                     (unsigned long long)back);
        }
    }
    /* A short buffer is still NUL-terminated. */
    duration_format(3661001, buf, 4);
    assert_true(strlen(buf) <= 3);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_ok),
        cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_parse_overflow),
        cmocka_unit_test(test_format_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
