/* SPDX-License-Identifier: BSD-2-Clause */
/* The consumer's argument checks (docs/errors.md): what rl_consumer_new, rl_consumer_close and
 * the statistics refuse, and that a refused rl_consumer_new still frees the configurations it
 * took over (ASan and valgrind fail the run on a leaked one). A live consumer, where one is
 * needed, runs on librdkafka's mock cluster (in this process). */
#define _POSIX_C_SOURCE 200809L
#include "consumer_test_util.h"

static const char *const topics[] = {"api.events"};
static const char *const lanes[] = {"lane-a", "lane-b"};
static const char *const same_lanes[] = {"lane-a", "lane-a"};
static const char *const bad_topics[] = {"api.events", ""};

static int ok_handler(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)c;
    (void)m;
    (void)attempt;
    return 0;
}

static int dispatch_handler(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    (void)d;
    (void)job;
    return 0;
}

static void ok_async(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt,
                     uint64_t ticket)
{
    (void)m;
    (void)attempt;
    rl_consumer_complete(c, ticket, 0);
}

static void dispatch_async(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    rl_dispatch_complete(d, job->ticket, 0);
}

static void valid_options(rl_consumer_options *o)
{
    rl_consumer_options_init(o);
    o->conf = consumer_conf(&k, "api-group", "cooperative-sticky");
    o->topics = topics;
    o->topic_count = 1;
    o->handler = ok_handler;
    o->dispatch.lanes = lanes;
    o->dispatch.lane_count = 2;
}

/* rl_consumer_new must refuse o with `want` and leave *out NULL. */
static void expect_refused(uv_loop_t *loop, rl_consumer_options *o, int want, const char *what)
{
    rl_consumer_t *c = (rl_consumer_t *)&c; /* not NULL, to see that it is cleared */
    int rc = rl_consumer_new(loop, o, &c);
    if (rc != want)
        fail_msg("%s: got %s, want %s", what, rl_err_name(rc), rl_err_name(want));
    assert_null(c);
}

#define REFUSED(want, change)                                                                      \
    do {                                                                                           \
        rl_consumer_options o;                                                                     \
        valid_options(&o);                                                                         \
        change;                                                                                    \
        expect_refused(&loop, &o, want, #change);                                                  \
    } while (0)

static void new_refuses_bad_options(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    rl_consumer_options_init(NULL); /* no crash */

    /* NULL arguments. The configuration is taken over even then. */
    rl_consumer_options first;
    valid_options(&first);
    assert_int_equal(rl_consumer_new(&loop, &first, NULL), RL_EINVAL);
    valid_options(&first);
    expect_refused(NULL, &first, RL_EINVAL, "no loop");
    expect_refused(&loop, NULL, RL_EINVAL, "no options");

    /* What the consumer itself needs. */
    rd_kafka_conf_t *spare = NULL;
    REFUSED(RL_EINVAL, (spare = o.conf, o.conf = NULL));
    rd_kafka_conf_destroy(spare);
    REFUSED(RL_EINVAL, o.handler = NULL);
    REFUSED(RL_EINVAL, o.topics = NULL);
    REFUSED(RL_EINVAL, o.topic_count = 0);
    REFUSED(RL_EINVAL, (o.topics = bad_topics, o.topic_count = 2));
    REFUSED(RL_EINVAL, o.dispatch.lanes = NULL);
    REFUSED(RL_EINVAL, o.dispatch.lane_count = 0);
    REFUSED(RL_EINVAL, o.null_key = 7);
    REFUSED(RL_EINVAL, o.max_key_len = 0);
    REFUSED(RL_EINVAL, o.window = 0);
    REFUSED(RL_EINVAL, o.window = (1u << 24) + 1);
    REFUSED(RL_EINVAL, o.pending_max = 0);
    REFUSED(RL_EINVAL, o.poll_batch = 0);
    REFUSED(RL_EINVAL, o.commit_interval_ms = 0);
    REFUSED(RL_EINVAL, o.dlq_retry_ms = 0);
    /* The dispatcher's callbacks are the consumer's own. */
    REFUSED(RL_EINVAL, o.dispatch.handler = dispatch_handler);
    REFUSED(RL_EINVAL, o.dispatch.data = &o);
    REFUSED(RL_EINVAL, o.dispatch.async_handler = dispatch_async);
    /* Exactly one kind of handler, and only its own options. */
    REFUSED(RL_EINVAL, o.async_handler = ok_async);
    REFUSED(RL_EINVAL, (o.handler = NULL, o.async_handler = NULL));
    REFUSED(RL_EINVAL, (o.handler = NULL, o.async_handler = ok_async, o.dispatch.workers = 2));
    REFUSED(RL_EINVAL, o.dispatch.job_timeout_ms = 100);
    /* Default lanes are for asynchronous consumers, and only when none are given at all. */
    REFUSED(RL_EINVAL, (o.handler = NULL, o.async_handler = ok_async, o.dispatch.lanes = NULL));
    REFUSED(RL_EINVAL, (o.handler = NULL, o.async_handler = ok_async, o.dispatch.lane_count = 0));
    /* A consumer group is the point. */
    REFUSED(RL_EINVAL,
            (rd_kafka_conf_destroy(o.conf), o.conf = consumer_conf(&k, "", "cooperative-sticky")));
    /* The dead-letter producer's configuration is taken over too. */
    REFUSED(RL_EINVAL, (o.dlq_conf = rd_kafka_conf_new(), o.handler = NULL));

    /* The dispatcher's own refusals come through. */
    REFUSED(RL_EDUPNAME, o.dispatch.lanes = same_lanes);
    REFUSED(RL_ERANGE, o.dispatch.workers = RL_DISPATCH_THREADS_MAX + 1);
    REFUSED(RL_EINVAL, o.dispatch.lane_capacity = 0);
    REFUSED(RL_EPROFILE, {
        static rl_ring_options ring;
        rl_ring_options_init(&ring);
        ring.profile = "no-such-profile";
        o.dispatch.ring = &ring;
    });

    /* librdkafka refuses the configuration when it makes the client. */
    REFUSED(RL_EKAFKA, {
        conf_set_ok(o.conf, "message.max.bytes", "100000");
        conf_set_ok(o.conf, "fetch.max.bytes", "1000");
    });

    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0); /* nothing left behind */
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* --- a live consumer: calls off the loop thread, statistics, close --- */

typedef struct off_thread {
    rl_consumer_t *c;
    int stats_rc, json_rc, close_rc;
} off_thread;

static void call_off_thread(void *arg)
{
    off_thread *t = arg;
    rl_consumer_stats s;
    char buf[64];
    t->stats_rc = rl_consumer_stats_get(t->c, &s, NULL, 0, NULL);
    t->json_rc = rl_consumer_stats_json(t->c, buf, sizeof buf, NULL);
    t->close_rc = rl_consumer_close(t->c, NULL);
}

static int closed;

static void on_closed(rl_consumer_t *c)
{
    (void)c;
    closed++;
}

static void live_consumer_rules(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    rl_consumer_options o;
    valid_options(&o);
    int tag = 42;
    o.data = &tag;
    rl_consumer_t *c = NULL;
    assert_int_equal(rl_consumer_new(&loop, &o, &c), 0);
    assert_non_null(c);

    /* The accessors answer NULL for NULL. */
    assert_ptr_equal(rl_consumer_get_data(c), &tag);
    assert_null(rl_consumer_get_data(NULL));
    assert_non_null(rl_consumer_dispatcher(c));
    assert_null(rl_consumer_dispatcher(NULL));
    assert_non_null(rl_consumer_kafka(c));
    assert_null(rl_consumer_kafka(NULL));

    /* Statistics: bad buffers, and the loop thread only. */
    rl_consumer_stats s;
    rl_consumer_partition_stats parts[2];
    size_t n = 99;
    assert_int_equal(rl_consumer_stats_get(NULL, &s, parts, 2, &n), RL_EINVAL);
    assert_int_equal(n, 0);
    assert_int_equal(rl_consumer_stats_get(c, NULL, parts, 2, NULL), RL_EINVAL);
    assert_int_equal(rl_consumer_stats_get(c, &s, NULL, 2, NULL), RL_EINVAL);
    assert_int_equal(rl_consumer_stats_get(c, &s, parts, 2, &n), 0);
    assert_int_equal(rl_consumer_stats_json(NULL, NULL, 0, NULL), RL_EINVAL);
    assert_int_equal(rl_consumer_stats_json(c, NULL, 16, NULL), RL_EINVAL);
    /* Like snprintf: the length it needs, and a cut but terminated text. */
    char small[8];
    size_t need = 0;
    assert_int_equal(rl_consumer_stats_json(c, small, sizeof small, &need), RL_ERANGE);
    assert_true(need >= sizeof small);
    assert_int_equal(strlen(small), sizeof small - 1);
    char *full = malloc(need + 1);
    assert_non_null(full);
    size_t len = 0;
    assert_int_equal(rl_consumer_stats_json(c, full, need + 1, &len), 0);
    assert_int_equal(len, need);
    assert_int_equal(full[0], '{');
    assert_non_null(strstr(full, "\"dispatcher\""));
    free(full);

    off_thread t = {.c = c};
    uv_thread_t th;
    assert_int_equal(uv_thread_create(&th, call_off_thread, &t), 0);
    assert_int_equal(uv_thread_join(&th), 0);
    assert_int_equal(t.stats_rc, RL_ESTATE);
    assert_int_equal(t.json_rc, RL_ESTATE);
    assert_int_equal(t.close_rc, RL_ESTATE);

    /* rl_consumer_complete: bad arguments, and a consumer with a blocking handler. */
    assert_int_equal(rl_consumer_complete(NULL, 1, 0), RL_EINVAL);
    assert_int_equal(rl_consumer_complete(c, 0, 0), RL_EINVAL);
    assert_int_equal(rl_consumer_complete(c, 1, 0), RL_ESTATE);

    /* Close: NULL, then once, then again. */
    assert_int_equal(rl_consumer_close(NULL, NULL), RL_EINVAL);
    closed = 0;
    assert_int_equal(rl_consumer_close(c, on_closed), 0);
    assert_int_equal(rl_consumer_close(c, on_closed), RL_ECLOSED);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(closed, 1);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(new_refuses_bad_options),
        cmocka_unit_test(live_consumer_rules),
    };
    return cmocka_run_group_tests(tests, suite_setup, suite_teardown);
}
