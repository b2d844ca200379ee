/* SPDX-License-Identifier: BSD-2-Clause */
/* The consumer's offset window: the committed watermark never passes an unfinished offset. */
#include "test_util.h"

#include "offsets.h"

static void in_order_and_out_of_order(void **state)
{
    (void)state;
    rl__offsets o;
    assert_rl_ok(rl__offsets_init(&o, 8));
    assert_true(rl__offsets_watermark(&o) == -1);
    for (int64_t off = 10; off < 15; off++)
        assert_rl_ok(rl__offsets_push(&o, off));
    assert_rl_ok(rl__offsets_complete(&o, 12)); /* a later lane finishes first */
    assert_true(rl__offsets_watermark(&o) == -1);
    assert_rl_ok(rl__offsets_complete(&o, 10));
    assert_true(rl__offsets_watermark(&o) == 11); /* 11 is unfinished: stop there */
    assert_rl_ok(rl__offsets_complete(&o, 11));
    assert_true(rl__offsets_watermark(&o) == 13); /* 10, 11, 12 done */
    assert_int_equal(rl__offsets_in_flight(&o), 2);
    assert_int_equal(rl__offsets_complete(&o, 12), RL_ENOENT); /* already popped */
    assert_rl_ok(rl__offsets_complete(&o, 14));
    assert_int_equal(rl__offsets_complete(&o, 14), RL_ENOENT); /* twice */
    assert_true(rl__offsets_watermark(&o) == 13);
    assert_rl_ok(rl__offsets_complete(&o, 13));
    assert_true(rl__offsets_watermark(&o) == 15);
    assert_int_equal(rl__offsets_in_flight(&o), 0);
    rl__offsets_free(&o);
}

static void gaps_full_and_bad_input(void **state)
{
    (void)state;
    rl__offsets o;
    assert_int_equal(rl__offsets_init(&o, 0), RL_EINVAL);
    assert_rl_ok(rl__offsets_init(&o, 3));
    assert_rl_ok(rl__offsets_push(&o, 5));
    assert_rl_ok(rl__offsets_push(&o, 7)); /* a gap: 6 was compacted away */
    assert_int_equal(rl__offsets_push(&o, 7), RL_EINVAL);
    assert_int_equal(rl__offsets_push(&o, 6), RL_EINVAL);
    assert_int_equal(rl__offsets_push(&o, -1), RL_EINVAL);
    assert_rl_ok(rl__offsets_push(&o, 9));
    assert_int_equal(rl__offsets_push(&o, 10), RL_EAGAIN); /* full: push back */
    assert_int_equal(rl__offsets_complete(&o, 6), RL_ENOENT);
    assert_rl_ok(rl__offsets_complete(&o, 9));
    assert_true(rl__offsets_watermark(&o) == -1);
    assert_rl_ok(rl__offsets_complete(&o, 5));
    assert_true(rl__offsets_watermark(&o) == 6); /* 7 unfinished */
    assert_rl_ok(rl__offsets_push(&o, 10));      /* room again, wrapping the buffer */
    assert_rl_ok(rl__offsets_complete(&o, 7));
    assert_true(rl__offsets_watermark(&o) == 10);
    rl__offsets_reset(&o);
    assert_true(rl__offsets_watermark(&o) == -1);
    assert_rl_ok(rl__offsets_push(&o, 3)); /* after a reset, any start */
    rl__offsets_free(&o);
}

/* Random completion orders: at every step the watermark equals the reference (the smallest
 * unfinished offset, or one past the largest done when all are done). Fixed seed. */
static void random_orders_match_reference(void **state)
{
    (void)state;
    enum { N = 2000, CAP = 64 };
    uint64_t seed = 42;
    static int64_t offs[N];
    static int done[N];
    rl__offsets o;
    assert_rl_ok(rl__offsets_init(&o, CAP));
    int64_t next = 100;
    int pushed = 0, completed = 0;
    while (completed < N) {
        int in_flight = (int)rl__offsets_in_flight(&o);
        if (pushed < N && (completed == pushed || test_rand(&seed) % 2)) {
            next += 1 + (int64_t)(test_rand(&seed) % 3); /* gaps of 0..2 offsets */
            int rc = rl__offsets_push(&o, next);
            if (in_flight == CAP) {
                assert_int_equal(rc, RL_EAGAIN); /* full exactly when CAP are held */
            } else {
                assert_rl_ok(rc);
                offs[pushed++] = next;
                continue;
            }
        }
        /* complete a random in-flight offset */
        int pick;
        do
            pick = (int)(test_rand(&seed) % (uint64_t)pushed);
        while (done[pick]);
        assert_rl_ok(rl__offsets_complete(&o, offs[pick]));
        done[pick] = 1;
        completed++;
        int64_t want = -1;
        int first_open = 0;
        while (first_open < pushed && done[first_open])
            first_open++;
        if (first_open > 0)
            want = offs[first_open - 1] + 1;
        assert_true(rl__offsets_watermark(&o) == want);
    }
    rl__offsets_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(in_order_and_out_of_order),
        cmocka_unit_test(gaps_full_and_bad_input),
        cmocka_unit_test(random_orders_match_reference),
    };
    return cmocka_run_group_tests_name("offsets", tests, NULL, NULL);
}
