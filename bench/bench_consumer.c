/* SPDX-License-Identifier: BSD-2-Clause */
/* The ordered consumer against a plain librdkafka consumer, on the same prefilled topic of
 * librdkafka's mock cluster (3 brokers in this process, 6 partitions, keys "k0".."k999").
 * Each side reads every message once in a consumer group of its own; the rate counts from the
 * first message handled to the last. The handler is empty or spins WORK_US microseconds.
 *
 * The baseline handles each message inline on its polling thread, the simplest consumer that
 * keeps per-key order: one thread, no hand-off, librdkafka's auto-commit of what was polled.
 * ringlane's consumer hands messages to LANES ordered lanes and commits only what completed.
 * Runs alternate between the two, and each pair prints the ratio ringlane / baseline.
 *
 * Usage: bench_consumer [MESSAGES (200000)] [WORK_US (0)] [RUNS (3)] [LANES (4)]
 * RINGLANE_BENCH_LANE_CAPACITY and RINGLANE_BENCH_PENDING_MAX override those two defaults;
 * RINGLANE_BENCH_QUEUED_MIN sets librdkafka's queued.min.messages on both sides (librdkafka
 * stops fetching when that many messages are queued and, before 2.1.0, looks again up to a
 * second later: the plain consumer's ~196,000 msg/s here is that wait; set it above the
 * topic's size to let librdkafka fetch the whole topic at once).
 *
 * Fence mode: bench_consumer fence [MESSAGES (200000)] [RUNS (5)] [WORK_US (0)]: ringlane with
 * growth_fence off and on, alternating which goes first, on a topic that never grew (the
 * records' topic exists and is empty): the rate and the loop thread's CPU per message, and
 * their ratios on / off per pair.
 *
 * Asynchronous mode: bench_consumer async [MESSAGES (200000)] [RUNS (3)] [ASYNC_LANES (65536)]
 * [THREADED_LANES (64)] [DELAY_MS (1)]. Each message finishes DELAY_MS after it starts; each
 * run measures, in this order: the plain consumer with an empty handler (the mock cluster's
 * ceiling), ringlane with an asynchronous handler on ASYNC_LANES lanes (the message finishes
 * from a timer on the consumer's loop), the same with the offset map off
 * (offset_map_max_bytes 0; the ratio on / off is printed), and ringlane with today's threaded
 * lanes, one thread per lane, the handler sleeping DELAY_MS. ASYNC_LANES at its default is the
 * consumer's default (RL_CONSUMER_ASYNC_LANES on a RL_CONSUMER_ASYNC_PROFILE ring); another
 * count names its lanes on the default ring (1,024 is the default before 65,536). Each ringlane
 * run prints the loop thread's CPU per message (getrusage RUSAGE_THREAD: polling, submitting,
 * starting and completing, librdkafka's calls on the loop included). */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include "bench_common.h"
#include "bench_kafka.h"

#include "ringlane/consumer.h"

#include <inttypes.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <uv.h>

#define TOPIC "bench.events"
#define PARTITIONS 6
#define KEYS 1000

static long messages = 200000;
static int work_us = 0;
static const char *bootstraps;

static void spin(void)
{
    if (work_us <= 0)
        return;
    double end = bench_now() + work_us * 1e-6;
    while (bench_now() < end)
        ;
}

static void prefill(void)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    bench_kafka_set("bench_consumer", conf, "bootstrap.servers", bootstraps);
    bench_kafka_set("bench_consumer", conf, "linger.ms", "5");
    rd_kafka_conf_set_log_cb(conf, bench_kafka_quiet);
    char err[256];
    rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!p) {
        fprintf(stderr, "bench_consumer: producer: %s\n", err);
        exit(1);
    }
    for (long i = 0; i < messages; i++) {
        char key[16], value[32];
        int kl = snprintf(key, sizeof key, "k%ld", i % KEYS);
        int vl = snprintf(value, sizeof value, "%ld", i);
        while (rd_kafka_producev(p, RD_KAFKA_V_TOPIC(TOPIC), RD_KAFKA_V_KEY(key, (size_t)kl),
                                 RD_KAFKA_V_VALUE(value, (size_t)vl),
                                 RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                 RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(p, 10);
        rd_kafka_poll(p, 0);
    }
    rd_kafka_flush(p, 60000);
    rd_kafka_destroy(p);
}

static rd_kafka_conf_t *consumer_conf(const char *group)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    bench_kafka_set("bench_consumer", conf, "bootstrap.servers", bootstraps);
    bench_kafka_set("bench_consumer", conf, "group.id", group);
    bench_kafka_set("bench_consumer", conf, "auto.offset.reset", "earliest");
    bench_kafka_set("bench_consumer", conf, "fetch.wait.max.ms", "20");
    /* Both sides alike: librdkafka stops fetching at this many queued messages (see
     * bench/RESULTS.md, the consumer with asynchronous handlers). */
    const char *queued_min = getenv("RINGLANE_BENCH_QUEUED_MIN");
    if (queued_min && *queued_min)
        bench_kafka_set("bench_consumer", conf, "queued.min.messages", queued_min);
    rd_kafka_conf_set_log_cb(conf, bench_kafka_quiet);
    return conf;
}

/* --- the baseline: handle inline on the polling thread --- */

static double run_baseline(int run)
{
    char group[32];
    snprintf(group, sizeof group, "base-%d", run);
    char err[256];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, consumer_conf(group), err, sizeof err);
    if (!rk) {
        fprintf(stderr, "bench_consumer: consumer: %s\n", err);
        exit(1);
    }
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, TOPIC, RD_KAFKA_PARTITION_UA);
    rd_kafka_subscribe(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    long seen = 0;
    double first = 0, last = 0;
    while (seen < messages) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m)
            continue;
        if (!m->err) {
            if (!seen)
                first = bench_now();
            spin();
            seen++;
            last = bench_now();
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return (double)(messages - 1) / (last - first);
}

/* --- ringlane's ordered consumer on a loop in this thread --- */

static atomic_long handled;
static _Atomic double first_s, last_s; /* bench_now() of the first and the last handled */

static int handler(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)c;
    (void)m;
    (void)attempt;
    double zero = 0, now = bench_now();
    atomic_compare_exchange_strong(&first_s, &zero, now);
    spin();
    if (atomic_fetch_add(&handled, 1) + 1 == messages)
        atomic_store(&last_s, bench_now());
    return 0;
}

/* --- asynchronous mode: messages that finish delay_ms after they start --- */

static int delay_ms = 1;
static uv_loop_t *async_loop;

/* Every message waits the same delay, so the waiting ones are due in the order they started:
 * one FIFO and one timer, rather than a timer per message. */
typedef struct due {
    uint64_t at_ns, ticket;
} due;

static struct {
    due *v;
    size_t cap, head, len;
    uv_timer_t timer;
    rl_consumer_t *c;
} waits;

static void note_handled(void)
{
    if (atomic_fetch_add(&handled, 1) + 1 == messages)
        atomic_store(&last_s, bench_now());
}

static void on_due(uv_timer_t *t)
{
    (void)t;
    uint64_t now = uv_hrtime();
    while (waits.len && waits.v[waits.head].at_ns <= now) {
        uint64_t ticket = waits.v[waits.head].ticket;
        waits.head = (waits.head + 1) % waits.cap;
        waits.len--;
        rl_consumer_complete(waits.c, ticket, 0);
        note_handled();
    }
    if (waits.len) {
        uint64_t at = waits.v[waits.head].at_ns;
        uv_timer_start(&waits.timer, on_due, (at - now + 999999) / 1000000, 0);
    }
}

static void async_handler(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt,
                          uint64_t ticket)
{
    (void)m;
    (void)attempt;
    double zero = 0;
    atomic_compare_exchange_strong(&first_s, &zero, bench_now());
    if (waits.len == waits.cap) {
        size_t cap = waits.cap ? waits.cap * 2 : 4096;
        due *v = malloc(cap * sizeof *v);
        if (!v) {
            fprintf(stderr, "bench_consumer: out of memory\n");
            exit(1);
        }
        for (size_t i = 0; i < waits.len; i++)
            v[i] = waits.v[(waits.head + i) % waits.cap];
        free(waits.v);
        waits.v = v;
        waits.cap = cap;
        waits.head = 0;
    }
    waits.c = c;
    waits.v[(waits.head + waits.len) % waits.cap] =
        (due){uv_hrtime() + (uint64_t)delay_ms * 1000000u, ticket};
    if (waits.len++ == 0)
        uv_timer_start(&waits.timer, on_due, (uint64_t)delay_ms, 0);
}

static int sleeping_handler(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)c;
    (void)m;
    (void)attempt;
    double zero = 0;
    atomic_compare_exchange_strong(&first_s, &zero, bench_now());
    struct timespec ts = {0, (long)delay_ms * 1000000L};
    nanosleep(&ts, NULL);
    note_handled();
    return 0;
}

enum { SYNC_SPIN = 0, ASYNC_DELAY = 1, SYNC_SLEEP = 2 };

static uint32_t offset_map_max_bytes = 4096; /* the consumer's default; 0: the map off */
static int growth_fence;                     /* the consumer's growth_fence (fence mode) */
static double last_loop_us;                  /* the last run's loop CPU per message */

/* The CPU of the calling thread: the consumer's loop thread. */
static double loop_cpu_seconds(void)
{
    struct rusage u;
    getrusage(RUSAGE_THREAD, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec * 1e-6 +
           (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec * 1e-6;
}

static double run_ringlane(int run, int lanes, int kind)
{
    char group[48];
    snprintf(group, sizeof group, "ringlane-%d-%d-%u-%d", kind, run, offset_map_max_bytes,
             growth_fence);
    static const char *short_names[] = {"lane-a", "lane-b", "lane-c", "lane-d",
                                        "lane-e", "lane-f", "lane-g", "lane-h"};
    char **names = NULL;
    const char *topics[] = {TOPIC};
    rl_consumer_options o;
    rl_consumer_options_init(&o);
    o.conf = consumer_conf(group);
    o.topics = topics;
    o.topic_count = 1;
    if (kind == ASYNC_DELAY) {
        o.async_handler = async_handler;
        o.dispatch.lanes = NULL; /* the default for asynchronous work, unless lanes is given */
        o.dispatch.lane_count = 0;
        if (lanes != (int)RL_CONSUMER_ASYNC_LANES) {
            names = calloc((size_t)lanes, sizeof *names);
            for (int i = 0; names && i < lanes; i++) {
                names[i] = malloc(24);
                if (names[i])
                    snprintf(names[i], 24, "lane-%d", i);
            }
            o.dispatch.lanes = (const char *const *)names;
            o.dispatch.lane_count = (size_t)lanes;
        }
    } else if (kind == SYNC_SLEEP) {
        o.handler = sleeping_handler;
        names = calloc((size_t)lanes, sizeof *names);
        for (int i = 0; names && i < lanes; i++) {
            names[i] = malloc(24);
            if (names[i])
                snprintf(names[i], 24, "lane-%d", i);
        }
        o.dispatch.lanes = (const char *const *)names;
        o.dispatch.lane_count = (size_t)lanes;
    } else {
        o.handler = handler;
        o.dispatch.lanes = short_names;
        o.dispatch.lane_count = (size_t)lanes;
    }
    o.dlq_topic = ""; /* no dead letters here */
    o.offset_map_max_bytes = offset_map_max_bytes;
    o.growth_fence = growth_fence;
    /* The consumer's defaults unless asked otherwise (to measure other depths). */
    if (getenv("RINGLANE_BENCH_LANE_CAPACITY"))
        o.dispatch.lane_capacity = (uint32_t)atoi(getenv("RINGLANE_BENCH_LANE_CAPACITY"));
    if (getenv("RINGLANE_BENCH_PENDING_MAX"))
        o.pending_max = (uint32_t)atoi(getenv("RINGLANE_BENCH_PENDING_MAX"));
    atomic_store(&handled, 0);
    atomic_store(&first_s, 0);
    atomic_store(&last_s, 0);
    uv_loop_t loop;
    uv_loop_init(&loop);
    async_loop = &loop;
    uv_timer_init(&loop, &waits.timer);
    rl_consumer_t *c = NULL;
    int rc = rl_consumer_new(&loop, &o, &c);
    for (int i = 0; names && i < lanes; i++)
        free(names[i]);
    free(names);
    if (rc) {
        fprintf(stderr, "bench_consumer: rl_consumer_new: %s\n", rl_strerror(rc));
        exit(1);
    }
    double cpu0 = loop_cpu_seconds();
    while (atomic_load(&handled) < messages)
        uv_run(&loop, UV_RUN_ONCE);
    double loop_us = (loop_cpu_seconds() - cpu0) * 1e6 / (double)messages;
    last_loop_us = loop_us;
    rl_consumer_stats st;
    if (rl_consumer_stats_get(c, &st, NULL, 0, NULL) == 0)
        printf("  ringlane: %" PRIu64 " pauses, %" PRIu64 " resumes, %" PRIu64
               " fetch restarts, %" PRIu64 " refetched, %" PRIu64
               " commits, loop CPU %.2f us per message\n",
               st.pauses, st.resumes, st.fetch_restarts, st.refetched, st.commits, loop_us);
    rl_consumer_close(c, NULL);
    uv_close((uv_handle_t *)&waits.timer, NULL);
    /* The loop ends once the consumer has closed all it holds. */
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return (double)(messages - 1) / (atomic_load(&last_s) - atomic_load(&first_s));
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static int main_async(int argc, char **argv)
{
    messages = argc > 2 ? atol(argv[2]) : 200000;
    int runs = argc > 3 ? atoi(argv[3]) : 3;
    int async_lanes = argc > 4 ? atoi(argv[4]) : (int)RL_CONSUMER_ASYNC_LANES;
    int threaded_lanes = argc > 5 ? atoi(argv[5]) : 64;
    delay_ms = argc > 6 ? atoi(argv[6]) : 1;
    if (messages < 2 || runs < 1 || runs > 99 || async_lanes < 1 ||
        async_lanes > (int)RL_DISPATCH_LANES_MAX || threaded_lanes < 1 ||
        threaded_lanes > (int)RL_DISPATCH_THREADS_MAX || delay_ms < 1) {
        fprintf(stderr, "usage: bench_consumer async [MESSAGES >= 2] [RUNS 1..99] [ASYNC_LANES] "
                        "[THREADED_LANES 1..1024] [DELAY_MS >= 1]\n");
        return 2;
    }
    printf("bench_consumer async: %ld messages over %d keys, %d partitions, each finishing %d ms "
           "after it starts; ringlane async with %d lanes, threaded with %d lanes\n",
           messages, KEYS, PARTITIONS, delay_ms, async_lanes, threaded_lanes);
    double plain[99], async[99], async_off[99], ratio[99], threaded[99];
    for (int r = 0; r < runs; r++) {
        work_us = 0;
        plain[r] = run_baseline(100 + r);
        offset_map_max_bytes = 4096;
        async[r] = run_ringlane(r, async_lanes, ASYNC_DELAY);
        offset_map_max_bytes = 0; /* the same, the offset map off */
        async_off[r] = run_ringlane(r, async_lanes, ASYNC_DELAY);
        offset_map_max_bytes = 4096;
        ratio[r] = async[r] / async_off[r];
        threaded[r] = run_ringlane(r, threaded_lanes, SYNC_SLEEP);
        printf("run %d: plain consumer (empty handler) %.0f msg/s, ringlane async %.0f msg/s "
               "(offset map off: %.0f msg/s, ratio on/off %.2f), ringlane threaded %.0f msg/s\n",
               r + 1, plain[r], async[r], async_off[r], ratio[r], threaded[r]);
        fflush(stdout);
    }
    printf("median: plain consumer (empty handler) %.0f msg/s, ringlane async %.0f msg/s "
           "(offset map off: %.0f msg/s, ratio on/off %.2f), ringlane threaded %.0f msg/s\n",
           median(plain, runs), median(async, runs), median(async_off, runs), median(ratio, runs),
           median(threaded, runs));
    return 0;
}

/* Fence mode: what the growth fence costs when nothing grows. */
static int main_fence(int argc, char **argv)
{
    messages = argc > 2 ? atol(argv[2]) : 200000;
    int runs = argc > 3 ? atoi(argv[3]) : 5;
    work_us = argc > 4 ? atoi(argv[4]) : 0;
    if (messages < 2 || runs < 1 || runs > 99 || work_us < 0) {
        fprintf(stderr, "usage: bench_consumer fence [MESSAGES >= 2] [RUNS 1..99] [WORK_US]\n");
        return 2;
    }
    printf("bench_consumer fence: %ld messages over %d keys, %d partitions, handler %d us, 4 "
           "lanes; growth_fence off and on (the record topic exists, no growth recorded)\n",
           messages, KEYS, PARTITIONS, work_us);
    double ratio[99], cpu_ratio[99];
    for (int r = 0; r < runs; r++) {
        double rate[2], cpu[2];
        for (int i = 0; i < 2; i++) { /* off first in even runs, on first in odd ones */
            growth_fence = (r + i) % 2;
            rate[growth_fence] = run_ringlane(r, 4, SYNC_SPIN);
            cpu[growth_fence] = last_loop_us;
        }
        ratio[r] = rate[1] / rate[0];
        cpu_ratio[r] = cpu[1] / cpu[0];
        printf("run %d: fence off %.0f msg/s (loop CPU %.2f us/msg), on %.0f msg/s (%.2f us/msg); "
               "ratio on/off: rate %.2f, loop CPU %.2f\n",
               r + 1, rate[0], cpu[0], rate[1], cpu[1], ratio[r], cpu_ratio[r]);
        fflush(stdout);
    }
    printf("median ratio on/off: rate %.2f, loop CPU per message %.2f\n", median(ratio, runs),
           median(cpu_ratio, runs));
    return 0;
}

static rd_kafka_mock_cluster_t *start_cluster(rd_kafka_t **host_out)
{
    rd_kafka_conf_t *hconf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(hconf, bench_kafka_quiet);
    char err[256];
    rd_kafka_t *host = rd_kafka_new(RD_KAFKA_PRODUCER, hconf, err, sizeof err);
    rd_kafka_mock_cluster_t *mock = host ? rd_kafka_mock_cluster_new(host, 3) : NULL;
    if (!mock || rd_kafka_mock_topic_create(mock, TOPIC, PARTITIONS, 1)) {
        fprintf(stderr, "bench_consumer: no mock cluster\n");
        exit(1);
    }
    bootstraps = rd_kafka_mock_cluster_bootstraps(mock);
    *host_out = host;
    return mock;
}

/* A mode named by argv[1]: the cluster, the records' topic when asked (as a cluster where
 * `ringlane grow` ran once), the prefilled topic, then the mode's own main. */
static int run_mode(int argc, char **argv, int (*mode_main)(int, char **), bool growth_topic)
{
    rd_kafka_t *host;
    rd_kafka_mock_cluster_t *mock = start_cluster(&host);
    if (growth_topic && rd_kafka_mock_topic_create(mock, "__ringlane_growth", 1, 1)) {
        fprintf(stderr, "bench_consumer: no record topic\n");
        return 1;
    }
    messages = argc > 2 ? atol(argv[2]) : 200000;
    if (messages < 2)
        return mode_main(argc, argv); /* the usage */
    prefill();
    int rc = mode_main(argc, argv);
    rd_kafka_mock_cluster_destroy(mock);
    rd_kafka_destroy(host);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "fence") == 0)
        return run_mode(argc, argv, main_fence, true);
    if (argc > 1 && strcmp(argv[1], "async") == 0)
        return run_mode(argc, argv, main_async, false);
    messages = argc > 1 ? atol(argv[1]) : 200000;
    work_us = argc > 2 ? atoi(argv[2]) : 0;
    int runs = argc > 3 ? atoi(argv[3]) : 3;
    int lanes = argc > 4 ? atoi(argv[4]) : 4;
    if (messages < 2 || work_us < 0 || runs < 1 || runs > 99 || lanes < 1 || lanes > 8) {
        fprintf(stderr, "usage: bench_consumer [MESSAGES >= 2] [WORK_US] [RUNS 1..99] "
                        "[LANES 1..8]\n");
        return 2;
    }
    rd_kafka_conf_t *hconf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(hconf, bench_kafka_quiet);
    char err[256];
    rd_kafka_t *host = rd_kafka_new(RD_KAFKA_PRODUCER, hconf, err, sizeof err);
    rd_kafka_mock_cluster_t *mock = host ? rd_kafka_mock_cluster_new(host, 3) : NULL;
    if (!mock || rd_kafka_mock_topic_create(mock, TOPIC, PARTITIONS, 1)) {
        fprintf(stderr, "bench_consumer: no mock cluster\n");
        return 1;
    }
    bootstraps = rd_kafka_mock_cluster_bootstraps(mock);
    prefill();
    printf("bench_consumer: %ld messages over %d keys, %d partitions, handler %d us, "
           "ringlane with %d lanes\n",
           messages, KEYS, PARTITIONS, work_us, lanes);
    double ratios[99];
    for (int r = 0; r < runs; r++) {
        double base = run_baseline(r), rl = run_ringlane(r, lanes, SYNC_SPIN);
        ratios[r] = rl / base;
        printf("run %d: baseline %.0f msg/s, ringlane %.0f msg/s, ratio %.2f\n", r + 1, base, rl,
               ratios[r]);
        fflush(stdout);
    }
    qsort(ratios, (size_t)runs, sizeof *ratios, cmp_double);
    printf("median ratio ringlane / baseline: %.2f\n", ratios[runs / 2]);
    rd_kafka_mock_cluster_destroy(mock);
    rd_kafka_destroy(host);
    return 0;
}
