/* SPDX-License-Identifier: BSD-2-Clause */
/* The rate limit: the token bucket's arithmetic on a fake clock, the options it refuses, and
 * the dispatcher with a limit: refusals answered RL_EAGAIN and counted (rate_limited, refused),
 * on_capacity when the next token is due, a waiting submitter let in by it, order kept. Nothing
 * here passes or fails on time: the dispatcher tests choose rates and bursts whose outcome does
 * not depend on how fast the test runs (a rate of one token in 1,000 s, or one call that asks
 * for more than the burst at one instant), and wait for events. */
#define _POSIX_C_SOURCE 200809L
#include "dispatch_util.h"

#include "token_bucket.h"

#include <math.h>

#define SEC 1000000000ull

/* --- the bucket, on a fake clock --- */

static void test_bucket_arithmetic(void **state)
{
    (void)state;
    rl__bucket b;
    uint64_t t = 5 * SEC; /* any start */
    rl__bucket_init(&b, 10, 5, t);
    assert_int_equal(rl__bucket_wait_ns(&b, t), 0);
    assert_int_equal(rl__bucket_take(&b, t, 3), 3); /* starts full */
    assert_int_equal(rl__bucket_take(&b, t, 3), 2); /* what is left */
    assert_int_equal(rl__bucket_take(&b, t, 1), 0);
    /* 10 a second: the next token in 100 ms, not a nanosecond sooner. */
    assert_int_equal(rl__bucket_wait_ns(&b, t), SEC / 10);
    assert_int_equal(rl__bucket_take(&b, t + SEC / 10 - 1000, 1), 0);
    assert_int_equal(rl__bucket_take(&b, t + SEC / 10, 1), 1);
    t += SEC / 10;
    /* A clock read before the last refill (another thread's) adds nothing and takes nothing. */
    assert_int_equal(rl__bucket_take(&b, t - SEC, 1), 0);
    assert_int_equal(rl__bucket_wait_ns(&b, t), SEC / 10);
    /* Half-way: half a token, the rest due in 50 ms. */
    assert_int_equal(rl__bucket_wait_ns(&b, t + SEC / 20), SEC / 20);
    /* A long pause refills up to the burst, no more. */
    t += 3600 * SEC;
    assert_int_equal(rl__bucket_take(&b, t, 100), 5);
    /* Tokens given back (jobs refused after their token was taken) go back, up to the burst. */
    rl__bucket_give_back(&b, 2);
    assert_int_equal(rl__bucket_take(&b, t, 100), 2);
    rl__bucket_give_back(&b, 50);
    assert_int_equal(rl__bucket_take(&b, t, 100), 5);

    /* A slow rate: half a token a second, burst 1. */
    rl__bucket_init(&b, 0.5, 1, 0);
    assert_int_equal(rl__bucket_take(&b, 0, 1), 1);
    assert_int_equal(rl__bucket_wait_ns(&b, 0), 2 * SEC);
    assert_int_equal(rl__bucket_take(&b, 2 * SEC - 1000, 1), 0);
    assert_int_equal(rl__bucket_take(&b, 2 * SEC, 1), 1);
    /* The slowest rate allowed: its wait fits the clock. */
    rl__bucket_init(&b, RL__RATE_MIN, 1, 0);
    assert_int_equal(rl__bucket_take(&b, 0, 1), 1);
    assert_int_equal(rl__bucket_wait_ns(&b, 0), 1000 * SEC);
    /* The fastest: a token a nanosecond. */
    rl__bucket_init(&b, RL__RATE_MAX, 1, 0);
    assert_int_equal(rl__bucket_take(&b, 0, 1), 1);
    assert_int_equal(rl__bucket_wait_ns(&b, 0), 1);
    assert_int_equal(rl__bucket_take(&b, 1000, 1000), 1); /* the burst caps it */
}

/* A taker always ready, on a clock that moves by random steps (fixed seed) for 10 simulated
 * seconds at 20,000 tokens a second, burst 100: it gets every token the rate makes, no more.
 * Over the span it takes at most burst + rate x T and at least rate x T (the bucket never
 * overflows while it is emptied at every step shorter than burst / rate). */
static void test_bucket_holds_the_rate(void **state)
{
    (void)state;
    const double rate = 20000;
    const uint32_t burst = 100;
    rl__bucket b;
    rl__bucket_init(&b, rate, burst, 0);
    uint64_t rng = 29, t = 0, taken = 0;
    while (t < 10 * SEC) {
        taken += rl__bucket_take(&b, t, SIZE_MAX);
        t += 1 + test_rand(&rng) % (2 * SEC / 1000); /* up to 2 ms: 40 tokens, under the burst */
    }
    double made = rate * (double)t / 1e9;
    assert_true((double)taken <= burst + made);
    assert_true((double)taken >= made - 1);
    /* A taker that asks less often than the burst lasts loses what overflows: 10 ms steps make
     * 200 tokens each, of which 100 are held. */
    rl__bucket_init(&b, rate, burst, 0);
    taken = 0;
    for (t = 10 * SEC / 1000; t <= 10 * SEC; t += 10 * SEC / 1000)
        taken += rl__bucket_take(&b, t, SIZE_MAX);
    assert_int_equal(taken, 1000 * burst);
}

/* --- the options --- */

static int noop_handler(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    (void)d;
    (void)job;
    return 0;
}

static const char *const AB[] = {"a", "b"};

/* Every refusal of docs/errors.md row 71: its code, and a detail naming the option, the value
 * and the reason. */
static void test_rate_options_refused(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    rl_dispatcher_t *d = (void *)1;
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    assert_true(o.max_rate == 0);
    assert_int_equal(o.max_burst, 0);
    o.handler = noop_handler;
    o.lanes = AB;
    o.lane_count = 2;
    o.max_burst = 10;
    o.max_rate = -1;
    assert_refused(rl_dispatch_init(&loop, &o, &d), RL_EINVAL, "max_rate -1", "cannot be negative");
    assert_null(d);
    o.max_rate = NAN;
    assert_refused(rl_dispatch_init(&loop, &o, &d), RL_EINVAL, "max_rate nan",
                   "not a number of jobs per second");
    o.max_rate = INFINITY;
    assert_refused(rl_dispatch_init(&loop, &o, &d), RL_EINVAL, "max_rate inf",
                   "not a number of jobs per second");
    o.max_rate = 0.0001;
    assert_refused(rl_dispatch_init(&loop, &o, &d), RL_EINVAL, "max_rate 0.0001", "below 0.001");
    o.max_rate = 2e9;
    assert_refused(rl_dispatch_init(&loop, &o, &d), RL_EINVAL, "max_rate 2e+09", "over 1e+09");
    o.max_rate = 100;
    o.max_burst = 0;
    assert_refused(rl_dispatch_init(&loop, &o, &d), RL_EINVAL, "max_burst 0 with max_rate 100",
                   "at least one token");
    o.max_rate = 0;
    o.max_burst = 7;
    assert_refused(rl_dispatch_init(&loop, &o, &d), RL_EINVAL, "max_burst 7 without max_rate",
                   "belongs to a rate limit");
    assert_null(d);
    o.max_rate = RL__RATE_MIN; /* the ends of the range are taken */
    o.max_burst = 1;
    assert_rl_ok(rl_dispatch_init(&loop, &o, &d));
    assert_no_detail();
    assert_rl_ok(rl_dispatch_close(d, RL_DISPATCH_DRAIN, NULL));
    o.max_rate = RL__RATE_MAX;
    o.max_burst = UINT32_MAX;
    assert_rl_ok(rl_dispatch_init(&loop, &o, &d));
    assert_rl_ok(rl_dispatch_close(d, RL_DISPATCH_DRAIN, NULL));
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* --- the dispatcher with a limit --- */

#define JOBS 64

typedef struct ctx {
    uv_loop_t loop;
    rl_dispatcher_t *d;
    uv_timer_t guard; /* fails a test that waits for an event that never comes */
    bool gave_up;
    uv_mutex_t mu;
    int calls[JOBS]; /* handler calls, in order: the job's index */
    int ncalls;
    int ndone;
    int capacity_calls;
    int ids[JOBS];
} ctx;

static int log_handler(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    ctx *c = rl_dispatch_get_data(d);
    uv_mutex_lock(&c->mu);
    c->calls[c->ncalls++] = *(int *)job->data;
    uv_mutex_unlock(&c->mu);
    return 0;
}

static void on_done(rl_dispatcher_t *d, rl_dispatch_job *job, int outcome)
{
    ctx *c = rl_dispatch_get_data(d);
    (void)job;
    assert_int_equal(outcome, RL_DISPATCH_DONE);
    c->ndone++;
}

static void on_capacity(rl_dispatcher_t *d)
{
    ctx *c = rl_dispatch_get_data(d);
    c->capacity_calls++;
}

static void on_guard(uv_timer_t *t)
{
    ctx *c = t->data;
    c->gave_up = true;
}

static void ctx_start_capacity(ctx *c, double rate, uint32_t burst, uint32_t lane_capacity)
{
    memset(c, 0, sizeof *c);
    assert_int_equal(uv_loop_init(&c->loop), 0);
    assert_int_equal(uv_mutex_init(&c->mu), 0);
    for (int i = 0; i < JOBS; i++)
        c->ids[i] = i;
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lanes = AB;
    o.lane_count = 2;
    o.handler = log_handler;
    o.on_done = on_done;
    o.on_capacity = on_capacity;
    o.data = c;
    o.max_rate = rate;
    o.max_burst = burst;
    if (lane_capacity)
        o.lane_capacity = lane_capacity;
    assert_rl_ok(rl_dispatch_init(&c->loop, &o, &c->d));
    assert_int_equal(uv_timer_init(&c->loop, &c->guard), 0);
    c->guard.data = c;
    assert_int_equal(uv_timer_start(&c->guard, on_guard, 60000, 0), 0);
    uv_unref((uv_handle_t *)&c->guard);
}

static void ctx_start(ctx *c, double rate, uint32_t burst)
{
    ctx_start_capacity(c, rate, burst, 0);
}

static void ctx_finish(ctx *c)
{
    assert_rl_ok(rl_dispatch_close(c->d, RL_DISPATCH_DRAIN, NULL));
    uv_close((uv_handle_t *)&c->guard, NULL);
    assert_int_equal(uv_run(&c->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&c->loop), 0);
    uv_mutex_destroy(&c->mu);
}

static void run_until(ctx *c, const int *counter, int n)
{
    while (*counter < n && !c->gave_up)
        uv_run(&c->loop, UV_RUN_ONCE);
    assert_false(c->gave_up);
}

static rl_dispatch_stats stats_of(ctx *c)
{
    rl_dispatch_stats s;
    assert_rl_ok(rl_dispatch_stats_get(c->d, &s, NULL, 0, NULL));
    return s;
}

typedef struct waiter {
    ctx *c;
    int64_t timeout_ms;
    int rc;
    atomic_bool over;
    uv_async_t *wake; /* NULL, or woken once `over` is set (the loop may be asleep) */
} waiter;

static void waiting_submit(void *arg)
{
    waiter *w = arg;
    w->rc = rl_dispatch_submit(w->c->d, "k", 1, &w->c->ids[JOBS - 1], 0, w->timeout_ms);
    atomic_store(&w->over, true);
    if (w->wake)
        uv_async_send(w->wake);
}

static void on_wake(uv_async_t *a)
{
    (void)a; /* the loop looks at `over` when uv_run returns */
}

/* One token in 1,000 s, burst 3: three submissions in, the fourth refused with RL_EAGAIN
 * although its lane is empty, counted as refused and rate_limited (the struct and the JSON); a
 * waiting submitter gives up at its timeout, its attempts counted the same. */
static void test_rate_refuses_with_eagain(void **state)
{
    (void)state;
    ctx c;
    ctx_start(&c, RL__RATE_MIN, 3);
    for (int i = 0; i < 3; i++)
        assert_rl_ok(rl_dispatch_try_submit(c.d, "k", 1, &c.ids[i], 0));
    assert_int_equal(rl_dispatch_try_submit(c.d, "other", 5, &c.ids[3], 0), RL_EAGAIN);
    rl_dispatch_stats s = stats_of(&c);
    assert_int_equal(s.submitted, 3);
    assert_int_equal(s.refused, 1);
    assert_int_equal(s.rate_limited, 1);
    char buf[4096];
    assert_rl_ok(rl_dispatch_stats_json(c.d, buf, sizeof buf, NULL));
    assert_non_null(strstr(buf, "\"rate_limited\":1"));
    /* submit_many: every item refused by the rate limit, each counted once. */
    rl_dispatch_item items[4];
    int status[4];
    for (int i = 0; i < 4; i++)
        items[i] = (rl_dispatch_item){i % 2 ? "x" : "y", 1, &c.ids[4 + i], 0};
    size_t queued = 9;
    assert_int_equal(rl_dispatch_submit_many(c.d, items, 4, status, &queued), RL_EAGAIN);
    assert_int_equal(queued, 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(status[i], RL_EAGAIN);
    s = stats_of(&c);
    assert_int_equal(s.refused, 5);
    assert_int_equal(s.rate_limited, 5);
    /* A waiting submitter on another thread waits for a token, and gives up after 20 ms. */
    waiter w = {&c, 20, 0, false, NULL};
    uv_thread_t t;
    assert_int_equal(uv_thread_create(&t, waiting_submit, &w), 0);
    uv_thread_join(&t);
    assert_int_equal(w.rc, RL_ETIMEDOUT);
    s = stats_of(&c);
    assert_true(s.rate_limited >= 6);
    assert_int_equal(s.refused, s.rate_limited); /* the lanes never refused */
    run_until(&c, &c.ndone, 3);
    assert_int_equal(c.capacity_calls, 0); /* no token is due for 1,000 s */
    ctx_finish(&c);
}

/* One call of submit_many meeting the three limits in one lane: lane_capacity 4 and 3 tokens
 * (one in 1,000 s) for 6 items of one key: the first 3 queued, the 4th refused by the rate
 * limit (its lane had room), the last 2 by the lane; each answered RL_EAGAIN and counted once,
 * the rate limit's in rate_limited. The lane's mutex is held for the whole group, so no job
 * starts in between. */
static void test_rate_and_lane_in_one_call(void **state)
{
    (void)state;
    ctx c;
    ctx_start_capacity(&c, RL__RATE_MIN, 3, 4);
    rl_dispatch_item items[6];
    int status[6];
    for (int i = 0; i < 6; i++)
        items[i] = (rl_dispatch_item){"key", 3, &c.ids[i], 0};
    size_t queued = 0;
    assert_int_equal(rl_dispatch_submit_many(c.d, items, 6, status, &queued), RL_EAGAIN);
    assert_int_equal(queued, 3);
    for (int i = 0; i < 6; i++)
        assert_int_equal(status[i], i < 3 ? 0 : RL_EAGAIN);
    rl_dispatch_stats s = stats_of(&c);
    assert_int_equal(s.submitted, 3);
    assert_int_equal(s.refused, 3);
    assert_int_equal(s.rate_limited, 1);
    run_until(&c, &c.ndone, 3);
    ctx_finish(&c);
}

/* Burst 5 at 1,000 a second: one submit_many of 12 jobs of one key at one instant takes the 5
 * tokens and no more (the bucket is capped at its burst, and the items are counted under one
 * hold of its lock): 5 queued, 7 answered RL_EAGAIN and counted. on_capacity then comes when
 * the next token is due (a timer; nothing else would call it: the lanes never refused), and
 * the rest goes in at its calls, in order: the key's handler calls are 0..11. */
static void test_rate_capacity_when_token_due(void **state)
{
    (void)state;
    ctx c;
    ctx_start(&c, 1000, 5);
    enum { N = 12 };
    rl_dispatch_item items[N];
    int status[N];
    for (int i = 0; i < N; i++)
        items[i] = (rl_dispatch_item){"key", 3, &c.ids[i], 0};
    size_t queued = 0;
    assert_int_equal(rl_dispatch_submit_many(c.d, items, N, status, &queued), RL_EAGAIN);
    assert_int_equal(queued, 5);
    for (int i = 0; i < N; i++)
        assert_int_equal(status[i], i < 5 ? 0 : RL_EAGAIN);
    rl_dispatch_stats s = stats_of(&c);
    assert_int_equal(s.refused, N - 5);
    assert_int_equal(s.rate_limited, N - 5);
    size_t sent = queued;
    int rounds = 0;
    while (sent < N) {
        int calls = c.capacity_calls;
        run_until(&c, &c.capacity_calls, calls + 1);
        rounds++;
        int rc = rl_dispatch_submit_many(c.d, items + sent, N - sent, NULL, &queued);
        assert_true(rc == 0 || rc == RL_EAGAIN);
        assert_true(queued > 0); /* on_capacity came with a token */
        sent += queued;
    }
    run_until(&c, &c.ndone, N);
    assert_true(rounds >= 1);
    for (int i = 0; i < N; i++)
        assert_int_equal(c.calls[i], i);
    s = stats_of(&c);
    assert_int_equal(s.submitted, N);
    assert_int_equal(s.refused, s.rate_limited);
    ctx_finish(&c);
}

/* A submitter waiting on another thread (timeout -1) with the bucket empty gets in when the
 * next token is due: the refusal set the timer, and the timer wakes it. Without that wake-up
 * it would wait for ever (the guard fails the test). */
static void test_rate_wakes_waiting_submitter(void **state)
{
    (void)state;
    ctx c;
    ctx_start(&c, 50, 1);
    assert_rl_ok(rl_dispatch_try_submit(c.d, "k", 1, &c.ids[0], 0));
    uv_async_t wake;
    assert_int_equal(uv_async_init(&c.loop, &wake, on_wake), 0);
    waiter w = {&c, -1, 1, false, &wake};
    uv_thread_t t;
    assert_int_equal(uv_thread_create(&t, waiting_submit, &w), 0);
    while (!atomic_load(&w.over) && !c.gave_up)
        uv_run(&c.loop, UV_RUN_ONCE);
    uv_thread_join(&t);
    uv_close((uv_handle_t *)&wake, NULL);
    assert_false(c.gave_up);
    assert_int_equal(w.rc, 0);
    run_until(&c, &c.ndone, 2);
    ctx_finish(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket_arithmetic),
        cmocka_unit_test(test_bucket_holds_the_rate),
        cmocka_unit_test(test_rate_options_refused),
        cmocka_unit_test(test_rate_refuses_with_eagain),
        cmocka_unit_test(test_rate_and_lane_in_one_call),
        cmocka_unit_test(test_rate_capacity_when_token_due),
        cmocka_unit_test(test_rate_wakes_waiting_submitter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
