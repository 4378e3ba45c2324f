/*
 * test_steer.c — the choice of target URL of a libonce handle with several
 * URLs (client/steer.h): hints followed to configured URLs only, stale
 * generations and stale hints ignored, rotation round robin and only when
 * nothing was heard from the target, one URL never moving.
 *
 * Owns: steer.h's contract checked on a real steer (no mocks, no clock:
 * every time is passed in).
 * Invariant: every loop is bounded by a constant.
 * Never: touches the network or onced.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>

#include "client/steer.h"

#define A "tcp://10.0.0.1:7400"
#define B "tcp://10.0.0.2:7400"
#define C "tcp://10.0.0.3:7400"

static void
test_parse(void **state)
{
    steer s;

    (void)state;
    assert_int_equal(steer_init(&s, A "," B ",," C ","), 0);
    assert_int_equal(s.n, 3);
    assert_string_equal(steer_target(&s), A);
    assert_string_equal(s.urls[2], C);
    steer_fini(&s);
    assert_int_equal(steer_init(&s, ","), EINVAL);
    steer_fini(&s);
}

static void
test_follow_hint(void **state)
{
    steer s;
    uint64_t g;

    (void)state;
    assert_int_equal(steer_init(&s, A "," B "," C), 0);
    g = steer_gen(&s);
    assert_int_equal(steer_hint(&s, g, C, 1000), STEER_MOVED);
    assert_string_equal(steer_target(&s), C);
    /* A second call refused on the old target moves nothing. */
    assert_int_equal(steer_hint(&s, g, C, 1000), STEER_STALE);
    assert_int_equal(steer_hint(&s, g, B, 1000), STEER_STALE);
    assert_string_equal(steer_target(&s), C);
    /* A follower naming itself, or no hint: stay. */
    assert_int_equal(steer_hint(&s, steer_gen(&s), C, 1000), STEER_STAY);
    assert_int_equal(steer_hint(&s, steer_gen(&s), NULL, 1000), STEER_STAY);
    assert_int_equal(steer_hint(&s, steer_gen(&s), "", 1000), STEER_STAY);
    assert_int_equal(atomic_load(&s.not_leader), 6);
    assert_int_equal(atomic_load(&s.followed), 1);
    steer_fini(&s);
}

static void
test_unknown_hint_rotates(void **state)
{
    steer s;

    (void)state;
    assert_int_equal(steer_init(&s, A "," B "," C), 0);
    /* Never dialed: the next URL of ours instead, round robin. */
    for (int i = 1; i <= 4; i++) {
        assert_int_equal(
            steer_hint(&s, steer_gen(&s), "tcp://elsewhere:1", 1000),
            STEER_MOVED);
        assert_string_equal(steer_target(&s), s.urls[i % 3]);
    }
    assert_int_equal(atomic_load(&s.ignored), 4);
    steer_fini(&s);
}

static void
test_down_hint_ignored(void **state)
{
    steer s;

    (void)state;
    assert_int_equal(steer_init(&s, A "," B "," C), 0);
    assert_true(steer_rotate(&s, steer_gen(&s), 5000, 5000)); /* A down */
    assert_string_equal(steer_target(&s), B);
    /* B still names A: not followed within STEER_DOWN_MS... */
    assert_int_equal(steer_hint(&s, steer_gen(&s), A, 5000), STEER_STAY);
    assert_int_equal(steer_hint(&s, steer_gen(&s), A, 5000 + STEER_DOWN_MS - 1),
                     STEER_STAY);
    /* ...but after it; and C, not down, at once. */
    assert_int_equal(steer_hint(&s, steer_gen(&s), A, 5000 + STEER_DOWN_MS),
                     STEER_MOVED);
    assert_string_equal(steer_target(&s), A);
    assert_int_equal(steer_hint(&s, steer_gen(&s), C, 5000), STEER_MOVED);
    assert_int_equal(atomic_load(&s.ignored), 2);
    steer_fini(&s);
}

/* A follower that refused us, then went silent (it won and re-executes to
 * lead), is not down: the next follower naming it is followed at once. A
 * URL that served is marked down again when it goes silent. */
static void
test_silent_follower_not_down(void **state)
{
    steer s;

    (void)state;
    assert_int_equal(steer_init(&s, A "," B "," C), 0);
    /* A refuses, naming C (the old leader, found down already). */
    s.down_ms[2] = 4000;
    assert_int_equal(steer_hint(&s, steer_gen(&s), C, 4500), STEER_STAY);
    steer_heard(&s, steer_gen(&s), false, 4500);
    /* A goes silent: the next URL; A not marked down. */
    assert_true(steer_rotate(&s, steer_gen(&s), 5000, 5000));
    assert_string_equal(steer_target(&s), B);
    assert_int_equal(s.down_ms[0], 0);
    /* B names A, the winner: followed within STEER_DOWN_MS. */
    assert_int_equal(steer_hint(&s, steer_gen(&s), A, 5001), STEER_MOVED);
    assert_string_equal(steer_target(&s), A);
    /* Still silent (re-executing): still not down, B again. */
    assert_true(steer_rotate(&s, steer_gen(&s), 5500, 6000));
    assert_int_equal(steer_hint(&s, steer_gen(&s), A, 6001), STEER_MOVED);
    /* A serves, then dies: now it is a leader others may name stale. */
    steer_heard(&s, steer_gen(&s), true, 6500);
    assert_true(steer_rotate(&s, steer_gen(&s), 7000, 7000));
    assert_int_equal(s.down_ms[0], 7000);
    assert_int_equal(steer_hint(&s, steer_gen(&s), A, 7001), STEER_STAY);
    /* A served reply on an older generation clears nothing. */
    assert_int_equal(steer_hint(&s, steer_gen(&s), C, 7002), STEER_MOVED);
    assert_int_equal(steer_hint(&s, steer_gen(&s), NULL, 7003), STEER_STAY);
    steer_heard(&s, steer_gen(&s) - 1, true, 7004);
    assert_true(atomic_load(&s.refused[2]));
    steer_fini(&s);
}

/* A follower that knows no leader: the next URL, not marked down, round
 * robin; a stale generation moves nothing; one URL never moves. */
static void
test_leaderless_moves_on(void **state)
{
    steer s;
    uint64_t g;

    (void)state;
    assert_int_equal(steer_init(&s, A "," B "," C), 0);
    g = steer_gen(&s);
    assert_true(steer_leaderless(&s, g));
    assert_string_equal(steer_target(&s), B);
    assert_false(steer_leaderless(&s, g)); /* another call moved it */
    assert_int_equal(s.down_ms[0], 0);
    /* B names A (it was only leaderless): followed at once. */
    assert_int_equal(steer_hint(&s, steer_gen(&s), A, 1000), STEER_MOVED);
    assert_true(steer_leaderless(&s, steer_gen(&s)));
    assert_string_equal(steer_target(&s), B);
    assert_int_equal(atomic_load(&s.rotated), 2);
    steer_fini(&s);
    assert_int_equal(steer_init(&s, A), 0);
    assert_false(steer_leaderless(&s, steer_gen(&s)));
    steer_fini(&s);
}

static void
test_rotate_only_when_silent(void **state)
{
    steer s;
    uint64_t g;

    (void)state;
    assert_int_equal(steer_init(&s, A "," B), 0);
    g = steer_gen(&s);
    /* Heard from the target after the attempt was sent: it is up. */
    steer_heard(&s, g, true, 2000);
    assert_false(steer_rotate(&s, g, 1500, 3000));
    assert_true(steer_rotate(&s, g, 2500, 3000));
    assert_string_equal(steer_target(&s), B);
    /* Another call's timeout on the old generation: already moved. */
    assert_false(steer_rotate(&s, g, 2500, 3000));
    assert_true(steer_rotate(&s, steer_gen(&s), 3000, 4000));
    assert_string_equal(steer_target(&s), A); /* round robin */
    assert_int_equal(atomic_load(&s.rotated), 2);
    steer_fini(&s);
}

/* steer_led: only the URL that gave the handle its last answer. Never one
 * not heard from yet, one whose last word was a follower's refusal, or one
 * that led in an earlier term before another answered: a winner
 * re-executing to lead refuses dials for a moment, and a handle must wait
 * for it rather than move off (conn_poll_move; bench_failover saw a
 * client leave a winner that had led two failovers before, then ignore
 * the hints to it for a second). The mark stays across a move: a leader
 * that went silent is still the one that led when a stale hint leads back
 * to it. */
static void
test_led_only_after_an_answer(void **state)
{
    steer s;

    (void)state;
    assert_int_equal(steer_init(&s, A "," B "," C), 0);
    assert_false(steer_led(&s));               /* never heard from */
    steer_heard(&s, steer_gen(&s), false, 10); /* a reply saying nothing */
    assert_false(steer_led(&s));
    steer_heard(&s, steer_gen(&s), true, 20); /* A answered: it led */
    assert_true(steer_led(&s));
    assert_true(steer_rotate(&s, steer_gen(&s), 30, 30)); /* A went silent */
    assert_string_equal(steer_target(&s), B);
    assert_false(steer_led(&s));
    assert_int_equal(steer_hint(&s, steer_gen(&s), A, 1500), STEER_MOVED);
    assert_true(steer_led(&s)); /* back on A: it led when last heard */
    steer_heard(&s, steer_gen(&s), true, 1600);
    assert_true(steer_rotate(&s, steer_gen(&s), 1700, 1700)); /* A killed */
    assert_string_equal(steer_target(&s), B);
    assert_false(steer_led(&s)); /* B refused before: a follower */
    steer_heard(&s, steer_gen(&s), true, 1800);
    assert_true(steer_led(&s)); /* B now answers: it leads */
    /* B is killed too; C names A, the winner. A led in an earlier term,
     * but B answered since: A is re-executing, not dead. */
    assert_true(steer_rotate(&s, steer_gen(&s), 1900, 1900));
    assert_string_equal(steer_target(&s), C);
    assert_false(steer_led(&s)); /* C: never heard from */
    assert_int_equal(steer_hint(&s, steer_gen(&s), A, 3000), STEER_MOVED);
    assert_string_equal(steer_target(&s), A);
    assert_false(steer_led(&s));
    /* A refuses and names none: on to B, which gave the last answer. */
    assert_true(steer_leaderless(&s, steer_gen(&s)));
    assert_string_equal(steer_target(&s), B);
    assert_true(steer_led(&s));
    steer_fini(&s);
}

/* steer_down_within: the target was left for being down less than the
 * window ago (conn_poll_move then gives it a short look when a hint leads
 * back to it); not a follower gone silent, not after the window. */
static void
test_down_within(void **state)
{
    steer s;

    (void)state;
    assert_int_equal(steer_init(&s, A "," B), 0);
    assert_false(steer_down_within(&s, 100, 2500));           /* never down */
    assert_true(steer_rotate(&s, steer_gen(&s), 1000, 1000)); /* A silent */
    assert_int_equal(steer_hint(&s, steer_gen(&s), A, 2100), STEER_MOVED);
    assert_true(steer_down_within(&s, 2100, 2500));
    assert_true(steer_down_within(&s, 3499, 2500));
    assert_false(steer_down_within(&s, 3500, 2500));
    /* B refused (NOT_LEADER above): a follower gone silent is not down. */
    assert_int_equal(steer_hint(&s, steer_gen(&s), B, 3600), STEER_MOVED);
    assert_true(steer_rotate(&s, steer_gen(&s), 3700, 3700)); /* B silent */
    assert_string_equal(steer_target(&s), A);
    assert_int_equal(steer_hint(&s, steer_gen(&s), B, 3800), STEER_MOVED);
    assert_false(steer_down_within(&s, 3800, 2500));
    steer_fini(&s);
}

static void
test_one_url_never_moves(void **state)
{
    steer s;

    (void)state;
    assert_int_equal(steer_init(&s, A), 0);
    assert_int_equal(steer_hint(&s, steer_gen(&s), B, 1000), STEER_STAY);
    assert_false(steer_rotate(&s, steer_gen(&s), 1000, 1000));
    assert_string_equal(steer_target(&s), A);
    assert_int_equal(steer_gen(&s), 0);
    steer_fini(&s);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_follow_hint),
        cmocka_unit_test(test_unknown_hint_rotates),
        cmocka_unit_test(test_down_hint_ignored),
        cmocka_unit_test(test_silent_follower_not_down),
        cmocka_unit_test(test_leaderless_moves_on),
        cmocka_unit_test(test_rotate_only_when_silent),
        cmocka_unit_test(test_led_only_after_an_answer),
        cmocka_unit_test(test_down_within),
        cmocka_unit_test(test_one_url_never_moves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
