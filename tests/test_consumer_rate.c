/* SPDX-License-Identifier: BSD-2-Clause */
/* The consumer's rate limit on librdkafka's mock cluster: the options it refuses, and a
 * consumer limited below what it could take, blocking and asynchronous: every message handled
 * once, each key in order, the limit met (messages kept for it, partitions paused for it) and
 * every offset committed at the close. Nothing passes or fails on time: the rate only sets how
 * long a run lasts; the time limits stop a run that hangs. */
#define _POSIX_C_SOURCE 200809L
#include "consumer_test_util.h"

#include <math.h>

/* Every refusal of docs/errors.md row 72: the code, the detail naming the option, its value and
 * the reason; the configuration is freed all the same (ASan and memcheck check it). */
static void rate_options_refused(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    const char *topics[] = {"t"};
    static const struct {
        double rate;
        uint32_t burst;
        double dispatch_rate;
        uint32_t dispatch_burst;
        const char *start, *why;
    } cases[] = {
        {-5, 10, 0, 0, "max_rate -5", "cannot be negative"},
        {NAN, 10, 0, 0, "max_rate nan", "not a number of messages per second"},
        {INFINITY, 10, 0, 0, "max_rate inf", "not a number of messages per second"},
        {1e-6, 10, 0, 0, "max_rate 1e-06", "below 0.001"},
        {1e10, 10, 0, 0, "max_rate 1e+10", "over 1e+09"},
        {100, 0, 0, 0, "max_burst 0 with max_rate 100", "at least one token"},
        {0, 10, 0, 0, "max_burst 10 without max_rate", "belongs to a rate limit"},
        {0, 0, 100, 10, "dispatch.max_rate 100", "set max_rate and max_burst in the consumer"},
        {0, 0, 0, 10, "dispatch.max_burst 10", "set max_rate and max_burst in the consumer"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rl_consumer_options o;
        rl_consumer_options_init(&o);
        assert_true(o.max_rate == 0);
        assert_int_equal(o.max_burst, 0);
        o.conf = consumer_conf(&k, "g-rate-options", "range");
        o.topics = topics;
        o.topic_count = 1;
        o.handler = (rl_consumer_handler_fn)1; /* never called */
        o.dispatch.lane_count = 2;
        o.max_rate = cases[i].rate;
        o.max_burst = cases[i].burst;
        o.dispatch.max_rate = cases[i].dispatch_rate;
        o.dispatch.max_burst = cases[i].dispatch_burst;
        rl_consumer_t *c = (void *)1;
        assert_refused(rl_consumer_new(&loop, &o, &c), RL_EINVAL, cases[i].start, cases[i].why);
        assert_null(c);
    }
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* --- a limited consumer --- */

typedef struct limited {
    checker ck;
    cthread t;
} limited;

static int count_handler(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)attempt;
    cthread *t = rl_consumer_get_data(c);
    limited *l = t->user;
    checker_see(&l->ck, m);
    return 0;
}

static void count_async(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt,
                        uint64_t ticket)
{
    count_handler(c, m, attempt);
    assert_rl_ok(rl_consumer_complete(c, ticket, 0));
}

#define PARTS 4
#define KEYS 50

/* The topic filled first (KEYS keys x per_key messages), then one consumer limited to `rate`
 * messages a second with a burst of 16 and pending_max 64 kept per partition: messages find
 * the bucket empty, partitions pause for it and resume. */
static void run_limited(const char *topic, const char *group, bool async, double rate)
{
    const int per_key = SLOW_BUILD ? 20 : 60;
    const long total = (long)KEYS * per_key;
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, PARTS, 1), 0);
    producer p;
    producer_start(&p, &k);
    for (int s = 0; s < per_key; s++)
        for (int key = 0; key < KEYS; key++)
            produce_seq(&p, topic, key, s);
    producer_flush(&p);
    assert_int_equal(atomic_load(&p.delivered), total);

    limited l;
    checker_init(&l.ck, KEYS);
    const char *topics[] = {topic};
    ct_init(&l.t, consumer_conf(&k, group, "range"), topics, 1, async ? NULL : count_handler, &l);
    if (async) {
        l.t.opts.async_handler = count_async;
        l.t.opts.dispatch.lanes = NULL;
        l.t.opts.dispatch.lane_count = 16;
    }
    l.t.opts.max_rate = rate;
    l.t.opts.max_burst = 16;
    l.t.opts.pending_max = 64;
    assert_rl_ok(ct_start(&l.t));
    WAIT_FOR(checker_complete(&l.ck, per_key) == total, 120);
    assert_rl_ok(ct_command(&l.t, CMD_STATS, NULL));
    rl_consumer_stats s = l.t.last;
    assert_non_null(strstr(l.t.stats, "\"rate_limited\":"));
    assert_non_null(strstr(l.t.stats, "\"rate_pauses\":"));
    ct_stop(&l.t);
    printf("  %s (%s, %.0f/s): %ld messages, handled %ld, rate_limited %" PRIu64
           ", rate_pauses %" PRIu64 " of %" PRIu64 " pauses\n",
           topic, async ? "async" : "blocking", rate, total, atomic_load(&l.ck.handled),
           s.rate_limited, s.rate_pauses, s.pauses);
    /* Everything once, each key in order, and nothing of another topic. */
    assert_int_equal(checker_complete(&l.ck, per_key), total);
    assert_int_equal(atomic_load(&l.ck.handled), total);
    assert_int_equal(atomic_load(&l.ck.duplicates), 0);
    assert_int_equal(atomic_load(&l.ck.violations), 0);
    assert_int_equal(atomic_load(&l.ck.overlaps), 0);
    assert_int_equal(atomic_load(&l.ck.foreign), 0);
    /* The limit was met, and the partitions paused for it. */
    assert_true(s.rate_limited > 0);
    assert_true(s.rate_pauses > 0);
    assert_true(s.rate_pauses <= s.pauses);
    assert_int_equal(s.dispatched, total);
    /* Every offset committed by the close: the partitions' committed offsets add up to all. */
    int64_t committed[PARTS];
    committed_offsets(&k, group, topic, PARTS, committed);
    int64_t sum = 0;
    for (int i = 0; i < PARTS; i++)
        sum += committed[i] > 0 ? committed[i] : 0;
    assert_int_equal(sum, total);
    ct_free(&l.t);
    producer_stop(&p);
    checker_free(&l.ck);
}

static void limited_blocking_in_order(void **state)
{
    (void)state;
    run_limited("rate-blocking", "g-rate-blocking", false, 2000);
}

static void limited_async_in_order(void **state)
{
    (void)state;
    run_limited("rate-async", "g-rate-async", true, 2000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rate_options_refused),
        cmocka_unit_test(limited_blocking_in_order),
        cmocka_unit_test(limited_async_in_order),
    };
    if (getenv("RINGLANE_TEST_FILTER"))
        cmocka_set_test_filter(getenv("RINGLANE_TEST_FILTER"));
    return cmocka_run_group_tests(tests, suite_setup, suite_teardown);
}
