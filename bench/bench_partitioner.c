/* SPDX-License-Identifier: BSD-2-Clause */
/* The ring partitioner against librdkafka's built-in murmur2_random, in the same run.
 *
 *   bench_partitioner [--messages N] [--rounds R] [--partitions P] [--profile NAME]
 *                     [--vnodes V] [--calls C] [--only WHAT]
 *   bench_partitioner --balance [--keys K]
 *
 * 1. Per call: the partitioner callback vs rd_kafka_msg_partitioner_murmur2_random on the
 *    same keys, ns per call (best of R interleaved rounds), for several partition counts.
 * 2. Throughput: N keyed messages produced to a topic of P partitions on librdkafka's mock
 *    cluster (3 brokers on 127.0.0.1 in this process), once with each partitioner per round,
 *    alternating; median messages/s and the ratio ring / murmur2_random, the CPU time per
 *    message, and how evenly each partitioner spread the messages over partitions and brokers
 *    (the ring's spread depends on its vnodes: --vnodes, default the profile's 160).
 * --only percall-ring | percall-murmur2 runs just that loop, for --partitions P, and
 * --only produce-ring | produce-murmur2 one throughput run of N messages: for instruction counts
 * under valgrind --tool=callgrind (inclusive cost of per_call / --calls; total / N).
 * --profile: the partitioner's profile (default: the partitioner's, RL_KAFKA_DEFAULT_PROFILE).
 * --balance: for P = 2..256, the default partitioner's ring (points, bytes, build time, the
 * busiest partition's share over the mean) and K keys key-1..key-K (default 2,000,000) counted
 * per partition, beside profile "default" (ringlane 0.1's placement); then growth P-1 -> P. */
#define _POSIX_C_SOURCE 200809L
#include "ring_internal.h" /* ix_bytes: the lookup engine's memory */
#include "bench_kafka.h"
#include "ringlane/partitioner.h"
#include "ringlane/ringlane.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KEYS 10000
#define MAX_ROUNDS 64

static char keys[KEYS][32];
static size_t key_len[KEYS];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef int32_t (*partitioner_fn)(const rd_kafka_topic_t *, const void *, size_t, int32_t, void *,
                                  void *);

/* Calls fn on every key `calls` times over; returns ns per call. */
static double per_call(partitioner_fn fn, void *opaque, int32_t partitions, long calls,
                       uint64_t *sink)
{
    uint64_t sum = 0;
    double t0 = now_s();
    for (long i = 0; i < calls; i++) {
        size_t k = (size_t)(i % KEYS);
        sum += (uint64_t)fn(NULL, keys[k], key_len[k], partitions, opaque, NULL);
    }
    double t = now_s() - t0;
    *sink += sum;
    return t * 1e9 / (double)calls;
}

static const char *bench_profile; /* NULL: the partitioner's default */

static void bench_per_call(int rounds, long calls, const char *only, int32_t only_partitions)
{
    rl_kafka_partitioner_options po;
    rl_kafka_partitioner_options_init(&po);
    po.profile = bench_profile;
    rl_kafka_partitioner_t *p;
    if (rl_kafka_partitioner_new(&po, &p) != 0)
        exit(1);
    const int32_t counts[] = {6, 64, 1000};
    uint64_t sink = 0;
    if (only) {
        int ring = strcmp(only, "percall-ring") == 0;
        rl_kafka_partitioner_cb(NULL, "warm", 4, only_partitions, p, NULL); /* build outside */
        per_call(ring ? rl_kafka_partitioner_cb : rd_kafka_msg_partitioner_murmur2_random,
                 ring ? (void *)p : NULL, only_partitions, calls, &sink);
        printf("%s: %d partitions x %ld calls (sink %llu)\n", only, (int)only_partitions, calls,
               (unsigned long long)sink);
        rl_kafka_partitioner_destroy(p);
        return;
    }
    printf("per call (best of %d rounds of %ld calls over %d keys)\n", rounds, calls, KEYS);
    printf("%10s  %10s  %12s  %8s\n", "partitions", "ring ns", "murmur2 ns", "ratio");
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        double best_ring = 1e30, best_mm = 1e30;
        rl_kafka_partitioner_cb(NULL, "warm", 4, counts[c], p, NULL);
        for (int r = 0; r < rounds; r++) {
            double a = per_call(rl_kafka_partitioner_cb, p, counts[c], calls, &sink);
            double b =
                per_call(rd_kafka_msg_partitioner_murmur2_random, NULL, counts[c], calls, &sink);
            best_ring = a < best_ring ? a : best_ring;
            best_mm = b < best_mm ? b : best_mm;
        }
        printf("%10d  %10.1f  %12.1f  %7.2fx\n", (int)counts[c], best_ring, best_mm,
               best_ring / best_mm);
    }
    if (sink == 42) /* keeps the loops */
        puts("");
    rl_kafka_partitioner_destroy(p);
}

typedef struct counter {
    long delivered, failed;
} counter;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    counter *c = opaque;
    if (m->err)
        c->failed++;
    else
        c->delivered++;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Produces `messages` keyed messages and returns messages/s (0 on failure); *cpu_ns gets the
 * process CPU time per message (all threads: the application's, librdkafka's and the mock
 * brokers'), steadier than wall time on a shared machine. */
static double produce_run(const char *bootstraps, const char *topic, rl_kafka_partitioner_t *ring,
                          long messages, double *cpu_ns)
{
    char err[512];
    counter c = {0, 0};
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_topic_conf_t *tconf = rd_kafka_topic_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstraps, err, sizeof err) ||
        rd_kafka_conf_set(conf, "linger.ms", "5", err, sizeof err) ||
        rd_kafka_conf_set(conf, "queue.buffering.max.messages", "2000000", err, sizeof err) ||
        rd_kafka_conf_set(conf, "queue.buffering.max.kbytes", "2000000", err, sizeof err) ||
        (!ring &&
         rd_kafka_topic_conf_set(tconf, "partitioner", "murmur2_random", err, sizeof err))) {
        fprintf(stderr, "bench: %s\n", err);
        exit(1);
    }
    if (ring)
        rl_kafka_partitioner_install(ring, tconf);
    rd_kafka_conf_set_default_topic_conf(conf, tconf);
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_opaque(conf, &c);
    rd_kafka_conf_set_log_cb(conf, bench_kafka_quiet);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "bench: %s\n", err);
        exit(1);
    }
    /* Warm: metadata known and every partition's broker connected before timing. */
    rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY("warm", 4),
                      RD_KAFKA_V_VALUE("w", 1), RD_KAFKA_V_END);
    rd_kafka_flush(rk, 10000);
    c.delivered = c.failed = 0;

    static const char value[100] = "ringlane bench payload";
    double t0 = now_s(), c0 = cpu_s();
    for (long i = 0; i < messages; i++) {
        size_t k = (size_t)(i % KEYS);
        rd_kafka_resp_err_t e;
        while (
            (e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(keys[k], key_len[k]),
                                   RD_KAFKA_V_VALUE((void *)value, sizeof value),
                                   RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 1);
        if (e)
            break;
        if ((i & 1023) == 0)
            rd_kafka_poll(rk, 0);
    }
    rd_kafka_flush(rk, 60000);
    double t = now_s() - t0;
    *cpu_ns = (cpu_s() - c0) * 1e9 / (double)messages;
    rd_kafka_destroy(rk);
    return c.delivered == messages && c.failed == 0 ? (double)messages / t : 0;
}

/* Messages per partition for one pass over the keys, and max/mean over partitions and over
 * the 3 mock brokers (the mock cluster gives partition p a leader by round robin). */
static void spread(rl_kafka_partitioner_t *ring, int32_t partitions, double *part_max,
                   double *broker_max)
{
    long *count = calloc((size_t)partitions, sizeof *count);
    long broker[3] = {0, 0, 0};
    if (!count)
        exit(1);
    for (int k = 0; k < KEYS; k++) {
        int32_t p = ring
                        ? rl_kafka_partitioner_cb(NULL, keys[k], key_len[k], partitions, ring, NULL)
                        : rd_kafka_msg_partitioner_murmur2_random(NULL, keys[k], key_len[k],
                                                                  partitions, NULL, NULL);
        count[p]++;
        broker[p % 3]++;
    }
    long mp = 0, mb = 0;
    for (int32_t p = 0; p < partitions; p++)
        mp = count[p] > mp ? count[p] : mp;
    for (int b = 0; b < 3; b++)
        mb = broker[b] > mb ? broker[b] : mb;
    *part_max = (double)mp / ((double)KEYS / partitions);
    *broker_max = partitions >= 3 ? (double)mb / ((double)KEYS / 3) : 1.0;
    free(count);
}

static void bench_throughput(int rounds, long messages, int32_t partitions, uint32_t vnodes,
                             const char *only)
{
    char err[512];
    rd_kafka_conf_t *hconf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(hconf, bench_kafka_quiet);
    rd_kafka_t *host = rd_kafka_new(RD_KAFKA_PRODUCER, hconf, err, sizeof err);
    rd_kafka_mock_cluster_t *mock = host ? rd_kafka_mock_cluster_new(host, 3) : NULL;
    if (!mock || rd_kafka_mock_topic_create(mock, "bench", partitions, 1) != 0) {
        fprintf(stderr, "bench: cannot start the mock cluster\n");
        exit(1);
    }
    rl_kafka_partitioner_options o;
    rl_kafka_partitioner_options_init(&o);
    o.profile = bench_profile;
    o.vnodes = vnodes;
    rl_kafka_partitioner_t *p;
    if (rl_kafka_partitioner_new(&o, &p) != 0)
        exit(1);
    double ring[MAX_ROUNDS], mm[MAX_ROUNDS], ring_cpu[MAX_ROUNDS], mm_cpu[MAX_ROUNDS];
    const char *servers = rd_kafka_mock_cluster_bootstraps(mock);
    printf("\nthroughput: %ld keyed messages (100-byte values, %d keys) to %d partitions, "
           "mock cluster of 3 brokers\n",
           messages, KEYS, (int)partitions);
    if (only) {
        double cpu;
        int ring_only = strcmp(only, "produce-ring") == 0;
        double rate = produce_run(servers, "bench", ring_only ? p : NULL, messages, &cpu);
        printf("%s: %.0f msg/s, %.0f cpu ns/msg\n", only, rate, cpu);
        rl_kafka_partitioner_destroy(p);
        rd_kafka_mock_cluster_destroy(mock);
        rd_kafka_destroy(host);
        return;
    }
    double rp, rb, mp, mb;
    spread(p, partitions, &rp, &rb);
    spread(NULL, partitions, &mp, &mb);
    rl_kafka_partitioner_options used;
    rl_kafka_partitioner_get_options(p, &used);
    const rl_profile_info *info = rl_profile_find(used.profile);
    printf("spread (max/mean messages): ring (%s, %u vnodes) %.3f per partition, %.3f per "
           "broker; murmur2_random %.3f per partition, %.3f per broker\n",
           used.profile, vnodes == RL_VNODES_PROFILE ? info->default_vnodes : vnodes, rp, rb, mp,
           mb);
    printf("%5s  %12s  %12s  %7s  %13s  %13s\n", "round", "ring msg/s", "murmur2 msg/s", "ratio",
           "ring cpu ns", "murmur2 cpu ns");
    for (int r = 0; r < rounds; r++) {
        /* Alternate which goes first, so neither always meets a warmer machine. */
        if (r % 2) {
            mm[r] = produce_run(servers, "bench", NULL, messages, &mm_cpu[r]);
            ring[r] = produce_run(servers, "bench", p, messages, &ring_cpu[r]);
        } else {
            ring[r] = produce_run(servers, "bench", p, messages, &ring_cpu[r]);
            mm[r] = produce_run(servers, "bench", NULL, messages, &mm_cpu[r]);
        }
        printf("%5d  %12.0f  %12.0f  %6.3fx  %13.0f  %13.0f\n", r + 1, ring[r], mm[r],
               mm[r] ? ring[r] / mm[r] : 0, ring_cpu[r], mm_cpu[r]);
    }
    double ratios[MAX_ROUNDS], cpu_ratios[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        ratios[r] = mm[r] ? ring[r] / mm[r] : 0;
        cpu_ratios[r] = ring_cpu[r] ? mm_cpu[r] / ring_cpu[r] : 0;
    }
    double mr = median(ratios, rounds), a = median(ring, rounds), b = median(mm, rounds);
    printf("median: ring %.0f msg/s, murmur2_random %.0f msg/s; median of per-round ratios "
           "%.3fx (target >= 0.97x)\n",
           a, b, mr);
    printf("median CPU per message: ring %.0f ns, murmur2_random %.0f ns; throughput by CPU "
           "(murmur2 cpu / ring cpu) %.3fx\n",
           median(ring_cpu, rounds), median(mm_cpu, rounds), median(cpu_ratios, rounds));
    rl_kafka_partitioner_destroy(p);
    rd_kafka_mock_cluster_destroy(mock);
    rd_kafka_destroy(host);
}

/* One profile's ring for n partitions: its numbers. */
typedef struct ring_numbers {
    size_t points, bytes;
    double build_ms, ring_max_mean, keys_max_mean;
} ring_numbers;

static ring_numbers measure(const char *profile, int32_t n, const uint64_t *h, size_t k,
                            uint64_t *count)
{
    ring_numbers out = {0};
    char(*names)[12] = calloc((size_t)n, sizeof *names);
    rl_member *m = calloc((size_t)n, sizeof *m);
    if (!names || !m)
        exit(1);
    for (int32_t i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "%d", (int)i);
        m[i] = (rl_member){.name = names[i], .weight = 1};
    }
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = profile;
    rl_ring_t *r;
    double t0 = now_s();
    if (rl_ring_build(m, (size_t)n, &o, &r) != 0)
        exit(1);
    out.build_ms = (now_s() - t0) * 1e3;
    out.points = rl_ring_point_count(r);
    out.bytes = out.points * (sizeof(uint64_t) + sizeof(uint32_t)) + r->ix_bytes;
    rl_ring_stats st;
    if (rl_ring_stats_get(r, &st, NULL) != 0)
        exit(1);
    out.ring_max_mean = st.max_mean_share;
    memset(count, 0, (size_t)n * sizeof *count);
    for (size_t i = 0; i < k; i++) {
        uint32_t node;
        rl_ring_lookup_hash(r, h[i], &node);
        count[node]++;
    }
    uint64_t max = 0;
    for (int32_t i = 0; i < n; i++)
        max = count[i] > max ? count[i] : max;
    out.keys_max_mean = (double)max * n / (double)k;
    rl_ring_free(r);
    free(names);
    free(m);
    return out;
}

static void bench_balance(size_t k)
{
    uint64_t *h = malloc(k * sizeof *h), *count = malloc(256 * sizeof *count);
    if (!h || !count)
        exit(1);
    char key[32];
    for (size_t i = 0; i < k; i++) /* both profiles hash keys with xxh3-64 */
        h[i] = rl_xxh3(key, (size_t)snprintf(key, sizeof key, "key-%zu", i + 1));
    printf("P\t%s points\tbytes\tbuild ms\tring max/mean\tkeys max/mean\t"
           "default(160) points\tbytes\tring max/mean\tkeys max/mean\n",
           RL_KAFKA_DEFAULT_PROFILE);
    for (int32_t n = 2; n <= 256; n++) {
        ring_numbers a = measure(RL_KAFKA_DEFAULT_PROFILE, n, h, k, count);
        ring_numbers b = measure("default", n, h, k, count);
        printf("%d\t%zu\t%zu\t%.2f\t%.4f\t%.4f\t%zu\t%zu\t%.4f\t%.4f\n", (int)n, a.points, a.bytes,
               a.build_ms, a.ring_max_mean, a.keys_max_mean, b.points, b.bytes, b.ring_max_mean,
               b.keys_max_mean);
        fflush(stdout);
    }
    free(h);
    free(count);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--balance") == 0) {
        size_t k = 2000000;
        if (argc == 4 && strcmp(argv[2], "--keys") == 0)
            k = (size_t)atol(argv[3]);
        if (k < 1) {
            fprintf(stderr, "bench_partitioner: bad --keys\n");
            return 2;
        }
        bench_balance(k);
        return 0;
    }
    long messages = 200000, calls = 2000000;
    int rounds = 7;
    int32_t partitions = 12;
    uint32_t vnodes = RL_VNODES_PROFILE;
    const char *only = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--messages") == 0)
            messages = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--rounds") == 0)
            rounds = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--partitions") == 0)
            partitions = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--vnodes") == 0)
            vnodes = (uint32_t)atol(argv[i + 1]);
        else if (strcmp(argv[i], "--calls") == 0)
            calls = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--only") == 0)
            only = argv[i + 1];
        else if (strcmp(argv[i], "--profile") == 0)
            bench_profile = argv[i + 1];
        else {
            fprintf(stderr, "bench_partitioner: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (messages < 1 || calls < 1 || rounds < 1 || rounds > MAX_ROUNDS || partitions < 1 ||
        vnodes < 1 || (vnodes > RL_VNODES_MAX && vnodes != RL_VNODES_PROFILE) ||
        (bench_profile && !rl_profile_find(bench_profile))) {
        fprintf(stderr, "bench_partitioner: bad arguments\n");
        return 2;
    }
    for (int i = 0; i < KEYS; i++) {
        int n = i % 2 ? snprintf(keys[i], sizeof keys[i], "user:%d", i)
                      : snprintf(keys[i], sizeof keys[i], "order-%08x", (unsigned)i * 2654435761u);
        key_len[i] = (size_t)n;
    }
    if (only && strncmp(only, "produce-", 8) == 0) {
        bench_throughput(1, messages, partitions, vnodes, only);
        return 0;
    }
    if (only) {
        bench_per_call(1, calls, only, partitions);
        return 0;
    }
    bench_per_call(rounds, calls, NULL, 0);
    bench_throughput(rounds, messages, partitions, vnodes, NULL);
    return 0;
}
