/*
 * test_queue.c — the intrusive FIFO of base/queue.h that every queue of
 * once is (the executor's tasks, the fair queue's lanes and ring, the
 * store's commit queue, libonce's batch queue and async pool).
 *
 * Owns: the queue's contract checked on real elements: first in, first
 * out; pop on empty; a group taken off the front (queue_take, the group
 * commit) leaves the rest in order; removal from the head, the middle and
 * the tail (queue_remove, a batch waiter that gives up) keeps head, tail
 * and len right, and pushing after it still appends at the tail.
 * Invariant: every loop is bounded by a constant.
 * Never: touches the network, a lock or onced.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/queue.h"

#define N 8

typedef struct item {
    int value;
    queue_link link;
} item;

static int
value(queue_link *l)
{
    return QUEUE_ITEM(l, item, link)->value;
}

/* Pops everything, checking the values come out as want[0, n). */
static void
drain_is(queue *q, const int *want, size_t n)
{
    assert_int_equal(q->len, n);
    for (size_t i = 0; i < n; i++) {
        queue_link *l = queue_pop(q);
        assert_non_null(l);
        assert_null(l->next);
        assert_int_equal(value(l), want[i]);
    }
    assert_true(queue_empty(q));
    assert_null(queue_pop(q));
    assert_null(q->tail);
    assert_int_equal(q->len, 0);
}

static void
fill(queue *q, item *it, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        it[i].value = (int)i;
        queue_push(q, &it[i].link);
    }
}

static void
test_fifo(void **state)
{
    queue q = {0};
    item it[N];
    const int want[N] = {0, 1, 2, 3, 4, 5, 6, 7};

    (void)state;
    assert_true(queue_empty(&q));
    assert_null(queue_pop(&q));
    fill(&q, it, N);
    assert_false(queue_empty(&q));
    drain_is(&q, want, N);
    /* Reused after running dry. */
    fill(&q, it, 2);
    drain_is(&q, want, 2);
}

static void
test_take(void **state)
{
    queue q = {0}, group = {0};
    item it[N];
    const int first[3] = {0, 1, 2}, rest[5] = {3, 4, 5, 6, 7};
    const int all[N] = {0, 1, 2, 3, 4, 5, 6, 7};

    (void)state;
    assert_int_equal(queue_take(&q, &group, 3), 0);
    assert_true(queue_empty(&group));
    fill(&q, it, N);
    assert_int_equal(queue_take(&q, &group, 0), 0);
    assert_int_equal(queue_take(&q, &group, 3), 3);
    drain_is(&group, first, 3);
    assert_ptr_equal(q.tail, &it[N - 1].link);
    drain_is(&q, rest, 5);
    /* More asked than held: all of it, the source left empty. */
    fill(&q, it, N);
    assert_int_equal(queue_take(&q, &group, 100), N);
    assert_true(queue_empty(&q));
    assert_null(q.tail);
    assert_int_equal(q.len, 0);
    assert_ptr_equal(group.tail, &it[N - 1].link);
    drain_is(&group, all, N);
}

static void
test_remove(void **state)
{
    queue q = {0};
    item it[N], other = {.value = 99};
    const int want[5] = {1, 2, 4, 5, 8};

    (void)state;
    assert_false(queue_remove(&q, &other.link));
    fill(&q, it, 7);                             /* 0..6 */
    assert_false(queue_remove(&q, &other.link)); /* not in it */
    assert_int_equal(q.len, 7);
    assert_true(queue_remove(&q, &it[0].link)); /* head */
    assert_true(queue_remove(&q, &it[3].link)); /* middle */
    assert_false(queue_remove(&q, &it[3].link));
    assert_true(queue_remove(&q, &it[6].link)); /* tail */
    assert_ptr_equal(q.tail, &it[5].link);
    it[7].value = 8;
    queue_push(&q, &it[7].link); /* appended after the new tail */
    drain_is(&q, want, 5);
    /* The only element. */
    queue_push(&q, &it[0].link);
    assert_true(queue_remove(&q, &it[0].link));
    assert_true(queue_empty(&q));
    assert_null(q.tail);
    assert_int_equal(q.len, 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo),
        cmocka_unit_test(test_take),
        cmocka_unit_test(test_remove),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
