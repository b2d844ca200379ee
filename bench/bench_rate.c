/* SPDX-License-Identifier: BSD-2-Clause */
/* The rate limit: the rate achieved against the limit over a span of seconds (10 by default),
 * for the dispatcher fed from its loop (try_submit until RL_EAGAIN, again at each
 * on_capacity), for the dispatcher fed by a thread that waits (rl_dispatch_submit, no
 * timeout), and for the consumer on librdkafka's mock cluster (a topic filled beforehand with
 * more than the span can take, 4 partitions). Prints achieved / limit, counting from the first
 * job or message, burst included (and without it).
 *
 *   bench_rate [dispatch|thread|consumer|all] [RATE] [BURST] [SECONDS]   (all 20000 100 10)
 */
#define _POSIX_C_SOURCE 200809L
#include "bench_common.h"
#include "bench_kafka.h"

#include "ringlane/consumer.h"
#include "ringlane/dispatcher.h"

#include <librdkafka/rdkafka_mock.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <uv.h>

static double rate = 20000;
static uint32_t burst = 100;
static double seconds = 10;

static void report(const char *what, uint64_t n, double span)
{
    double limit = rate * span;
    printf("%-32s %9.0f s-1 over %.2f s: %llu accepted, achieved / limit %.4f (without the burst "
           "%.4f)\n",
           what, (double)n / span, span, (unsigned long long)n, (double)n / limit,
           ((double)n - burst) / limit);
    fflush(stdout);
}

/* --- the dispatcher --- */

typedef struct feeder {
    uv_loop_t loop;
    rl_dispatcher_t *d;
    uv_timer_t stop;
    double start_s;
    uint64_t accepted;
    bool over; /* loop thread */
    atomic_ullong handled;
} feeder;

static void async_done(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    feeder *f = rl_dispatch_get_data(d);
    atomic_fetch_add_explicit(&f->handled, 1, memory_order_relaxed);
    rl_dispatch_complete(d, job->ticket, 0);
}

static int blocking_done(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    (void)job;
    feeder *f = rl_dispatch_get_data(d);
    atomic_fetch_add_explicit(&f->handled, 1, memory_order_relaxed);
    return 0;
}

/* Submits until the limit refuses (keys k0..k999 in turn). */
static void feed(rl_dispatcher_t *d)
{
    feeder *f = rl_dispatch_get_data(d);
    while (!f->over) {
        char key[16];
        int len = snprintf(key, sizeof key, "k%llu", (unsigned long long)(f->accepted % 1000));
        int rc = rl_dispatch_try_submit(d, key, (size_t)len, NULL, 0);
        if (rc == RL_EAGAIN)
            return;
        if (rc) {
            fprintf(stderr, "bench_rate: submit: %s\n", rl_strerror(rc));
            exit(1);
        }
        if (f->accepted++ == 0)
            f->start_s = bench_now();
    }
}

static void on_stop(uv_timer_t *t)
{
    feeder *f = t->data;
    f->over = true;
    report("dispatcher, fed from the loop", f->accepted, bench_now() - f->start_s);
    rl_dispatch_close(f->d, RL_DISPATCH_DRAIN, NULL);
    uv_close((uv_handle_t *)t, NULL);
}

static void run_dispatch_loop(void)
{
    feeder *f = calloc(1, sizeof *f);
    uv_loop_init(&f->loop);
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lane_count = 8;
    o.async_handler = async_done;
    o.on_capacity = feed;
    o.data = f;
    o.max_rate = rate;
    o.max_burst = burst;
    if (rl_dispatch_init(&f->loop, &o, &f->d)) {
        fprintf(stderr, "bench_rate: rl_dispatch_init: %s\n", rl_last_error_detail());
        exit(1);
    }
    uv_timer_init(&f->loop, &f->stop);
    f->stop.data = f;
    uv_timer_start(&f->stop, on_stop, (uint64_t)(seconds * 1000), 0);
    feed(f->d);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    uv_loop_close(&f->loop);
    free(f);
}

typedef struct thread_feed {
    feeder *f;
    double span;
    atomic_bool finished;
} thread_feed;

/* Submits for `seconds` from the first job accepted, waiting (no timeout) whenever refused. */
static void submit_thread(void *arg)
{
    thread_feed *t = arg;
    feeder *f = t->f;
    double end = 0;
    for (uint64_t i = 0;; i++) {
        char key[16];
        int len = snprintf(key, sizeof key, "k%llu", (unsigned long long)(i % 1000));
        int rc = rl_dispatch_submit(f->d, key, (size_t)len, NULL, 0, -1);
        if (rc) {
            fprintf(stderr, "bench_rate: submit: %s\n", rl_strerror(rc));
            exit(1);
        }
        double now = bench_now();
        if (i == 0) {
            f->start_s = now;
            end = now + seconds;
        }
        if (now >= end) {
            f->accepted = i + 1;
            t->span = now - f->start_s;
            atomic_store(&t->finished, true);
            return;
        }
    }
}

static void on_look(uv_timer_t *t)
{
    (void)t; /* wakes the loop, which looks at `finished` */
}

static void run_dispatch_thread(void)
{
    feeder *f = calloc(1, sizeof *f);
    uv_loop_init(&f->loop);
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lane_count = 4;
    o.handler = blocking_done;
    o.data = f;
    o.max_rate = rate;
    o.max_burst = burst;
    if (rl_dispatch_init(&f->loop, &o, &f->d)) {
        fprintf(stderr, "bench_rate: rl_dispatch_init: %s\n", rl_last_error_detail());
        exit(1);
    }
    thread_feed t = {.f = f};
    uv_thread_t th;
    uv_thread_create(&th, submit_thread, &t);
    /* The loop runs the token timer and the completions until the thread is done. */
    uv_timer_init(&f->loop, &f->stop);
    uv_timer_start(&f->stop, on_look, 50, 50);
    while (!atomic_load(&t.finished))
        uv_run(&f->loop, UV_RUN_ONCE);
    uv_thread_join(&th);
    report("dispatcher, a waiting thread", f->accepted, t.span);
    rl_dispatch_close(f->d, RL_DISPATCH_DRAIN, NULL);
    uv_close((uv_handle_t *)&f->stop, NULL);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    uv_loop_close(&f->loop);
    free(f);
}

/* --- the consumer --- */

#define TOPIC "rate"
#define PARTITIONS 4

static const char *bootstraps;
static atomic_llong consumed;
static _Atomic double first_s;

static int count_handler(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)c;
    (void)m;
    (void)attempt;
    if (atomic_fetch_add(&consumed, 1) == 0)
        atomic_store(&first_s, bench_now());
    return 0;
}

static void prefill(long n)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    bench_kafka_set("bench_rate", conf, "bootstrap.servers", bootstraps);
    bench_kafka_set("bench_rate", conf, "linger.ms", "5");
    rd_kafka_conf_set_log_cb(conf, bench_kafka_quiet);
    char err[256];
    rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!p) {
        fprintf(stderr, "bench_rate: producer: %s\n", err);
        exit(1);
    }
    for (long i = 0; i < n; i++) {
        char key[16];
        int kl = snprintf(key, sizeof key, "k%ld", i % 1000);
        while (rd_kafka_producev(p, RD_KAFKA_V_TOPIC(TOPIC), RD_KAFKA_V_KEY(key, (size_t)kl),
                                 RD_KAFKA_V_VALUE("v", 1), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                 RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(p, 10);
        rd_kafka_poll(p, 0);
    }
    rd_kafka_flush(p, 60000);
    rd_kafka_destroy(p);
}

static void run_consumer(void)
{
    char err[256];
    rd_kafka_conf_t *hconf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(hconf, bench_kafka_quiet);
    rd_kafka_t *host = rd_kafka_new(RD_KAFKA_PRODUCER, hconf, err, sizeof err);
    rd_kafka_mock_cluster_t *mock = host ? rd_kafka_mock_cluster_new(host, 3) : NULL;
    if (!mock || rd_kafka_mock_topic_create(mock, TOPIC, PARTITIONS, 1)) {
        fprintf(stderr, "bench_rate: no mock cluster\n");
        exit(1);
    }
    bootstraps = rd_kafka_mock_cluster_bootstraps(mock);
    long n = (long)(rate * seconds * 1.3) + 10000; /* more than the span can take */
    prefill(n);

    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    bench_kafka_set("bench_rate", conf, "bootstrap.servers", bootstraps);
    bench_kafka_set("bench_rate", conf, "group.id", "bench-rate");
    bench_kafka_set("bench_rate", conf, "auto.offset.reset", "earliest");
    bench_kafka_set("bench_rate", conf, "fetch.wait.max.ms", "20");
    rd_kafka_conf_set_log_cb(conf, bench_kafka_quiet);
    const char *topics[] = {TOPIC};
    rl_consumer_options o;
    rl_consumer_options_init(&o);
    o.conf = conf;
    o.topics = topics;
    o.topic_count = 1;
    o.handler = count_handler;
    o.dispatch.lane_count = 4;
    o.dlq_topic = "";
    o.max_rate = rate;
    o.max_burst = burst;
    uv_loop_t loop;
    uv_loop_init(&loop);
    rl_consumer_t *c = NULL;
    if (rl_consumer_new(&loop, &o, &c)) {
        fprintf(stderr, "bench_rate: rl_consumer_new: %s\n", rl_last_error_detail());
        exit(1);
    }
    while (atomic_load(&consumed) == 0)
        uv_run(&loop, UV_RUN_ONCE);
    double start = atomic_load(&first_s), end = start + seconds;
    while (bench_now() < end)
        uv_run(&loop, UV_RUN_ONCE); /* the consumer's timers wake it at least every 100 ms */
    long long got = atomic_load(&consumed);
    double span = bench_now() - start;
    rl_consumer_stats st;
    rl_consumer_stats_get(c, &st, NULL, 0, NULL);
    report("consumer, 4 partitions", (uint64_t)got, span);
    printf("  rate_limited %llu, pauses %llu (for the limit %llu), resumes %llu, refetched %llu\n",
           (unsigned long long)st.rate_limited, (unsigned long long)st.pauses,
           (unsigned long long)st.rate_pauses, (unsigned long long)st.resumes,
           (unsigned long long)st.refetched);
    rl_consumer_close(c, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    rd_kafka_mock_cluster_destroy(mock);
    rd_kafka_destroy(host);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "all";
    if (argc > 2)
        rate = atof(argv[2]);
    if (argc > 3)
        burst = (uint32_t)atol(argv[3]);
    if (argc > 4)
        seconds = atof(argv[4]);
    bool all = strcmp(what, "all") == 0;
    if (!all && strcmp(what, "dispatch") && strcmp(what, "thread") && strcmp(what, "consumer")) {
        fprintf(stderr, "usage: bench_rate [dispatch|thread|consumer|all] [RATE] [BURST] "
                        "[SECONDS]\n");
        return 2;
    }
    printf("limit %.0f per second, burst %u, %.0f s\n", rate, burst, seconds);
    if (all || strcmp(what, "dispatch") == 0)
        run_dispatch_loop();
    if (all || strcmp(what, "thread") == 0)
        run_dispatch_thread();
    if (all || strcmp(what, "consumer") == 0)
        run_consumer();
    return 0;
}
