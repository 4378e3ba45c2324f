/*
 * test_window.c — the rpc-id window of libonce (client/window.h): which
 * seqs are incomplete, and first_incomplete, the acknowledgement every
 * call carries.
 *
 * Owns: the window's contract checked on a real window (no mocks):
 * increasing seqs from the first, out-of-order completion, growth past the
 * initial ring, and that a seq is never handed out twice.
 * Invariant: every loop is bounded by a constant.
 * Never: touches the network or onced.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "client/window.h"

#define MANY 5000

static void
test_in_order(void **state)
{
    window w;
    uint64_t s;

    (void)state;
    window_init(&w, 1);
    assert_int_equal(window_first_incomplete(&w), 1);
    for (uint64_t i = 1; i <= 3; i++) {
        assert_int_equal(window_assign(&w, &s), 0);
        assert_int_equal(s, i);
        assert_true(window_is_incomplete(&w, s));
    }
    assert_int_equal(window_first_incomplete(&w), 1);
    assert_true(window_complete(&w, 1));
    assert_int_equal(window_first_incomplete(&w), 2);
    assert_false(window_complete(&w, 1)); /* already complete */
    assert_false(window_complete(&w, 9)); /* never assigned */
    assert_true(window_complete(&w, 2));
    assert_true(window_complete(&w, 3));
    /* Nothing incomplete: first_incomplete is the next seq to assign. */
    assert_int_equal(window_first_incomplete(&w), 4);
    assert_int_equal(window_assign(&w, &s), 0);
    assert_int_equal(s, 4);
    window_fini(&w);
    window_fini(&w); /* repeated calls are accepted */
}

/* A seq still incomplete holds the acknowledgement back, however many
 * later seqs complete; releasing it lets the watermark jump over them. */
static void
test_out_of_order(void **state)
{
    window w;
    uint64_t s;

    (void)state;
    window_init(&w, 10);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(window_assign(&w, &s), 0);
    }
    assert_int_equal(s, 14);
    assert_true(window_complete(&w, 12));
    assert_true(window_complete(&w, 14));
    assert_true(window_complete(&w, 11));
    assert_int_equal(window_first_incomplete(&w), 10);
    assert_true(window_complete(&w, 10));
    assert_int_equal(window_first_incomplete(&w), 13);
    assert_false(window_is_incomplete(&w, 12));
    assert_true(window_is_incomplete(&w, 13));
    assert_true(window_complete(&w, 13));
    assert_int_equal(window_first_incomplete(&w), 15);
    window_fini(&w);
}

/* Past the initial ring: the ring grows, nothing is lost or reused. */
static void
test_grows(void **state)
{
    window w;
    uint64_t s, prev = 0;

    (void)state;
    window_init(&w, 1);
    for (int i = 0; i < MANY; i++) {
        assert_int_equal(window_assign(&w, &s), 0);
        assert_true(s > prev);
        prev = s;
        if (i % 2 == 1) {
            assert_true(window_complete(&w, s)); /* odd positions done */
        }
    }
    /* seq 1 is still incomplete: it holds everything back. */
    assert_int_equal(window_first_incomplete(&w), 1);
    for (uint64_t q = 1; q <= MANY; q += 2) {
        assert_true(window_is_incomplete(&w, q));
        assert_true(window_complete(&w, q));
        assert_int_equal(window_first_incomplete(&w),
                         q + 2 <= MANY ? q + 2 : MANY + 1);
    }
    window_fini(&w);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_order),
        cmocka_unit_test(test_out_of_order),
        cmocka_unit_test(test_grows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
