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

static int ticks;
static char last_stats[65536];

static void stats_cb(rl_consumer_t *c, const char *json, size_t len)
{
    (void)c;
    assert_int_equal(strlen(json), len);
    snprintf(last_stats, sizeof last_stats, "%s", json);
    ticks++;
}

static void dispatch_stats_cb(rl_dispatcher_t *d, const char *json, size_t len)
{
    (void)d;
    (void)json;
    (void)len;
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

/* rl_consumer_new must refuse o with `want`, leave *out NULL, and say why: a detail that starts
 * with `start` (the option as written in C, and its value) and contains `why`. */
static void expect_refused(uv_loop_t *loop, rl_consumer_options *o, int want, const char *start,
                           const char *why, const char *what)
{
    rl_consumer_t *c = (rl_consumer_t *)&c; /* not NULL, to see that it is cleared */
    int rc = rl_consumer_new(loop, o, &c);
    const char *d = rl_last_error_detail();
    if (rc != want)
        fail_msg("%s: got %s, want %s (detail \"%s\")", what, rl_err_name(rc), rl_err_name(want),
                 d);
    if (strncmp(d, start, strlen(start)) != 0 || !strstr(d, why))
        fail_msg("%s: detail \"%s\", want \"%s...%s...\"", what, d, start, why);
    assert_null(c);
}

#define REFUSED(want, start, why, change)                                                          \
    do {                                                                                           \
        rl_consumer_options o;                                                                     \
        valid_options(&o);                                                                         \
        change;                                                                                    \
        expect_refused(&loop, &o, want, start, why, #change);                                      \
    } while (0)

/* Every refusal of docs/errors.md rows 46-52, 60-62 and 68: the code, *out NULL, the
 * configurations freed, and a detail naming the option (as written in C) and its value. */
static void new_refuses_bad_options(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    rl_consumer_options_init(NULL); /* no crash */

    /* NULL arguments. The configuration is taken over even then. */
    rl_consumer_options first;
    valid_options(&first);
    assert_refused(rl_consumer_new(&loop, &first, NULL), RL_EINVAL, "out NULL", "");
    valid_options(&first);
    expect_refused(NULL, &first, RL_EINVAL, "loop NULL", "uv_loop_t", "no loop");
    expect_refused(&loop, NULL, RL_EINVAL, "opts NULL", "", "no options");

    /* What the consumer itself needs. */
    rd_kafka_conf_t *spare = NULL;
    REFUSED(RL_EINVAL, "conf NULL", "group.id", (spare = o.conf, o.conf = NULL));
    rd_kafka_conf_destroy(spare);
    REFUSED(RL_EINVAL, "handler and async_handler NULL", "exactly one", o.handler = NULL);
    REFUSED(RL_EINVAL, "topics NULL", "", o.topics = NULL);
    REFUSED(RL_EINVAL, "topic_count 0", "", o.topic_count = 0);
    REFUSED(RL_EINVAL, "topics[1] \"\"", "", (o.topics = bad_topics, o.topic_count = 2));
    REFUSED(RL_EINVAL, "dispatch.lanes NULL with dispatch.lane_count 0", "blocking handler",
            (o.dispatch.lanes = NULL, o.dispatch.lane_count = 0));
    REFUSED(RL_EINVAL, "dispatch.lane_count 0", "at least one lane", o.dispatch.lane_count = 0);
    REFUSED(RL_EINVAL, "null_key 7", "RL_CONSUMER_NULL_KEY_PARTITION", o.null_key = 7);
    REFUSED(RL_EINVAL, "max_key_len 0", "1..4294967295", o.max_key_len = 0);
    REFUSED(RL_EINVAL, "window 0", "1..16777216", o.window = 0);
    REFUSED(RL_EINVAL, "window 16777217", "16777216", o.window = (1u << 24) + 1);
    REFUSED(RL_EINVAL, "pending_max 0", "", o.pending_max = 0);
    REFUSED(RL_EINVAL, "poll_batch 0", "", o.poll_batch = 0);
    REFUSED(RL_EINVAL, "revoke_timeout_ms 0", "1..4294967295", o.revoke_timeout_ms = 0);
    REFUSED(RL_EINVAL, "commit_interval_ms 0", "", o.commit_interval_ms = 0);
    REFUSED(RL_EINVAL, "dlq_retry_ms 0", "", o.dlq_retry_ms = 0);
    REFUSED(RL_EINVAL, "offset_map_max_bytes 31", "at least 32 bytes (0 turns the offset map off)",
            o.offset_map_max_bytes = 31);
    REFUSED(RL_EINVAL, "offset_map_max_bytes 1", "at least 32", o.offset_map_max_bytes = 1);
    REFUSED(RL_EINVAL, "offset_map_max_bytes 32768", "over 32767", o.offset_map_max_bytes = 32768);
    /* The statistics timer. */
    REFUSED(RL_EINVAL, "stats_interval_ms -5: negative", "0 = off",
            (o.stats_interval_ms = -5, o.on_stats = stats_cb));
    REFUSED(RL_EINVAL, "stats_interval_ms 86400001: over a day", "",
            (o.stats_interval_ms = 86400001, o.on_stats = stats_cb));
    REFUSED(RL_EINVAL, "stats_interval_ms 1000 with on_stats NULL", "", o.stats_interval_ms = 1000);
    REFUSED(RL_EINVAL, "stats_lanes 1025", "RL_DISPATCH_STATS_LANES_MAX", o.stats_lanes = 1025);
    REFUSED(RL_EINVAL, "dispatch.stats_interval_ms 1000 set", "the consumer's own",
            o.dispatch.stats_interval_ms = 1000);
    REFUSED(RL_EINVAL, "dispatch.on_stats set", "the consumer's own",
            o.dispatch.on_stats = dispatch_stats_cb);
    REFUSED(RL_EINVAL, "dispatch.stats_full set", "", o.dispatch.stats_full = 1);
    /* The dispatcher's callbacks are the consumer's own. */
    REFUSED(RL_EINVAL, "dispatch.handler set", "the consumer's own",
            o.dispatch.handler = dispatch_handler);
    REFUSED(RL_EINVAL, "dispatch.data set", "", o.dispatch.data = &o);
    REFUSED(RL_EINVAL, "dispatch.async_handler set", "", o.dispatch.async_handler = dispatch_async);
    /* Exactly one kind of handler, and only its own options. */
    REFUSED(RL_EINVAL, "handler and async_handler both set", "", o.async_handler = ok_async);
    REFUSED(RL_EINVAL, "handler and async_handler NULL", "",
            (o.handler = NULL, o.async_handler = NULL));
    REFUSED(RL_EINVAL, "dispatch.workers 2 with async_handler",
            "workers are for blocking handlers; an asynchronous lane needs no thread",
            (o.handler = NULL, o.async_handler = ok_async, o.dispatch.workers = 2));
    REFUSED(RL_EINVAL, "dispatch.job_timeout_ms 100 with handler", "",
            o.dispatch.job_timeout_ms = 100);
    /* Lanes given with no count: none, for either kind of handler. */
    REFUSED(RL_EINVAL, "dispatch.lane_count 0", "",
            (o.handler = NULL, o.async_handler = ok_async, o.dispatch.lane_count = 0));
    /* A consumer group is the point. */
    REFUSED(RL_EINVAL, "conf: no group.id", "commits a group's offsets",
            (rd_kafka_conf_destroy(o.conf), o.conf = consumer_conf(&k, "", "cooperative-sticky")));
    /* The dead-letter producer's configuration is taken over too. */
    REFUSED(RL_EINVAL, "handler and async_handler NULL", "",
            (o.dlq_conf = rd_kafka_conf_new(), o.handler = NULL));
    /* One configuration given as both: refused, and freed once. */
    REFUSED(RL_EINVAL, "dlq_conf is conf", "", o.dlq_conf = o.conf);

    /* The dispatcher's own refusals come through, under the consumer's option path. */
    REFUSED(RL_EDUPNAME, "dispatch.lanes[1] \"lane-a\"", "unique", o.dispatch.lanes = same_lanes);
    REFUSED(RL_ERANGE, "dispatch.workers 1025", "RL_DISPATCH_THREADS_MAX",
            o.dispatch.workers = RL_DISPATCH_THREADS_MAX + 1);
    REFUSED(RL_EINVAL, "dispatch.lane_capacity 0", "a lane must hold at least one job",
            o.dispatch.lane_capacity = 0);
    REFUSED(RL_EPROFILE, "dispatch.ring->profile \"no-such-profile\"", "unknown profile", {
        static rl_ring_options ring;
        rl_ring_options_init(&ring);
        ring.profile = "no-such-profile";
        o.dispatch.ring = &ring;
    });

    /* librdkafka refuses the configuration when it makes the client: its own words follow. */
    REFUSED(RL_EKAFKA, "conf: librdkafka refused to make the consumer: ", "fetch.max.bytes", {
        conf_set_ok(o.conf, "message.max.bytes", "100000");
        conf_set_ok(o.conf, "fetch.max.bytes", "1000");
    });
    /* ... and the dead-letter producer's. */
    REFUSED(RL_EKAFKA, "dlq_conf: librdkafka refused to make the dead-letter producer: ", "", {
        o.dlq_conf = rd_kafka_conf_new();
        conf_set_ok(o.dlq_conf, "transactional.id", "t");
        conf_set_ok(o.dlq_conf, "enable.idempotence", "false");
    });

    /* ... and the subscription, naming the topics: quoted, a long one cut, at most four. */
    static const char *const bad_regex[] = {"^[unclosed"};
    REFUSED(RL_EKAFKA,
            "topics \"^[unclosed\": librdkafka refused the subscription: ", "Invalid argument",
            o.topics = bad_regex);
    static const char *const many[] = {
        "orders",
        "^[\"quoted",
        "a-topic-name-of-72-bytes-which-is-longer-than-the-sixty-four-bytes-named",
        "c",
        "d",
        "e"};
    REFUSED(RL_EKAFKA,
            "topics \"orders\", \"^[\\\"quoted\", "
            "\"a-topic-name-of-72-bytes-which-is-longer-than-the-sixty-four-byt...\", \"c\" "
            "and 2 more: librdkafka refused the subscription: ",
            "", (o.topics = many, o.topic_count = 6));

    /* A success right after a refusal leaves no detail. */
    rl_consumer_options good;
    valid_options(&good);
    rl_consumer_t *c = NULL;
    assert_rl_ok(rl_consumer_new(&loop, &good, &c));
    assert_no_detail();
    assert_rl_ok(rl_consumer_close(c, NULL));
    /* The offset map's bounds are accepted, and 0 (off). */
    const uint32_t map_limits[] = {0, 32, 32767};
    for (size_t i = 0; i < sizeof map_limits / sizeof *map_limits; i++) {
        valid_options(&good);
        good.offset_map_max_bytes = map_limits[i];
        assert_rl_ok(rl_consumer_new(&loop, &good, &c));
        assert_rl_ok(rl_consumer_close(c, NULL));
    }

    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0); /* nothing left behind */
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* Lanes NULL with a count: that many lanes, named by the dispatcher's rule, for both kinds of
 * handler; an asynchronous consumer given no lanes at all gets RL_CONSUMER_ASYNC_LANES of them,
 * named the same way, or RL_CONSUMER_ASYNC_LANES_RING when it gives a ring. */
static void lanes_named_for_you(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    rl_ring_options ring;
    rl_ring_options_init(&ring);
    const struct {
        bool async;
        size_t count, want;
        const rl_ring_options *ring;
    } cases[] = {{false, 3, 3, NULL},
                 {true, 5, 5, NULL},
                 {true, 0, RL_CONSUMER_ASYNC_LANES, NULL},
                 {true, 0, RL_CONSUMER_ASYNC_LANES_RING, &ring}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        rl_consumer_options o;
        valid_options(&o);
        if (cases[i].async) {
            o.handler = NULL;
            o.async_handler = ok_async;
        }
        o.dispatch.lanes = NULL;
        o.dispatch.lane_count = cases[i].count;
        o.dispatch.ring = cases[i].ring;
        rl_consumer_t *c = NULL;
        assert_rl_ok(rl_consumer_new(&loop, &o, &c));
        assert_no_detail();
        rl_dispatch_lane_stats *made = calloc(cases[i].want, sizeof *made);
        assert_non_null(made);
        rl_dispatch_stats s;
        size_t n = 0;
        assert_rl_ok(rl_dispatch_stats_get(rl_consumer_dispatcher(c), &s, made, cases[i].want, &n));
        assert_int_equal(n, cases[i].want);
        for (size_t l = 0; l < n; l++) {
            char name[32];
            snprintf(name, sizeof name, RL_DISPATCH_LANE_PREFIX "%zu", l);
            assert_string_equal(made[l].name, name);
        }
        free(made);
        assert_rl_ok(rl_consumer_close(c, NULL));
        assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    }
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* --- a live consumer: calls off the loop thread, statistics, close --- */

typedef struct off_thread {
    rl_consumer_t *c;
    int stats_rc, json_rc, close_rc, prom_rc;
} off_thread;

static void call_off_thread(void *arg)
{
    off_thread *t = arg;
    rl_consumer_stats s;
    char buf[64];
    t->stats_rc = rl_consumer_stats_get(t->c, &s, NULL, 0, NULL);
    t->json_rc = rl_consumer_stats_json(t->c, buf, sizeof buf, NULL);
    t->prom_rc = rl_consumer_stats_prometheus(t->c, 16, buf, sizeof buf, NULL);
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
    assert_int_equal(t.prom_rc, RL_ESTATE);

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

/* stats_interval_ms: the compact text on the loop thread, with the dispatcher's inside; the
 * Prometheus text with the consumer's families then the dispatcher's, and its refusals. */
static void stats_on_a_timer(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    rl_consumer_options o;
    valid_options(&o);
    o.stats_interval_ms = 5;
    o.on_stats = stats_cb;
    rl_consumer_t *c = NULL;
    assert_int_equal(rl_consumer_new(&loop, &o, &c), 0);
    ticks = 0;
    while (ticks < 2)
        uv_run(&loop, UV_RUN_ONCE);
    assert_memory_equal(last_stats, "{\"partitions\":", 14);
    assert_non_null(strstr(last_stats, "\"dispatcher\":{\"lanes\":2,"));
    assert_non_null(strstr(last_stats, "\"removed_lanes\":{\"lanes\":0,"));
    assert_non_null(strstr(last_stats, "\"lane_list\":\"all\""));
    /* The growth fence's counters are there (0: it is off). */
    assert_non_null(strstr(last_stats, "\"growth_held\":0,\"growth_released\":0,"));
    assert_non_null(strstr(last_stats, "\"growth_released_by_stall\":0,\"growth_late\":0,"));

    char *buf = malloc(65536);
    assert_non_null(buf);
    size_t len = 0, need = 0;
    assert_int_equal(rl_consumer_stats_prometheus(c, 16, buf, 65536, &len), 0);
    assert_int_equal(strlen(buf), len);
    assert_non_null(strstr(buf, "# TYPE ringlane_consumer_consumed_total counter\n"));
    assert_non_null(strstr(buf, "\nringlane_consumer_growth_held_total 0\n"));
    assert_non_null(strstr(buf, "\nringlane_consumer_growth_waiting 0\n"));
    assert_non_null(strstr(buf, "\nringlane_consumer_growth_hold_seconds_total 0"));
    assert_non_null(strstr(buf, "\nringlane_consumer_partitions 0\n"));
    assert_non_null(strstr(buf, "\nringlane_dispatch_lanes 2\n"));
    assert_non_null(strstr(buf, "ringlane_dispatch_lane_queued{lane=\"lane-b\"} 0\n"));
    assert_prometheus_lines(buf);
    /* The consumer's families come first, then the dispatcher's. */
    const char *dispatcher_part = strstr(buf, "# HELP ringlane_dispatch_");
    assert_non_null(dispatcher_part);
    assert_true(strstr(buf, "ringlane_consumer_") < dispatcher_part);
    printf("# Prometheus text: %zu bytes, the consumer's %zu (no partition assigned)\n", len,
           (size_t)(dispatcher_part - buf));
    char small[40];
    assert_int_equal(rl_consumer_stats_prometheus(c, 16, small, sizeof small, &need), RL_ERANGE);
    assert_int_equal(need, len);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_int_equal(rl_consumer_stats_prometheus(c, 16, NULL, 0, &need), RL_ERANGE);
    assert_int_equal(need, len);
    assert_int_equal(rl_consumer_stats_prometheus(NULL, 16, buf, 65536, NULL), RL_EINVAL);
    assert_int_equal(rl_consumer_stats_prometheus(c, 16, NULL, 5, NULL), RL_EINVAL);
    free(buf);

    closed = 0;
    assert_int_equal(rl_consumer_close(c, on_closed), 0);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(closed, 1);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(new_refuses_bad_options),
        cmocka_unit_test(lanes_named_for_you),
        cmocka_unit_test(live_consumer_rules),
        cmocka_unit_test(stats_on_a_timer),
    };
    return cmocka_run_group_tests(tests, suite_setup, suite_teardown);
}
