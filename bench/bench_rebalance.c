/* SPDX-License-Identifier: BSD-2-Clause */
/* Duplicates after a rebalance, with the offset map and without it (issue 27's scenario).
 *
 * librdkafka's mock cluster (3 brokers in this process), a topic of 6 partitions prefilled
 * with MESSAGES messages over 1,000 keys (key "k<i>", value "<i> <seq>", the keys in turn).
 * Consumer A of a new group starts; asynchronous handlers finish each message 1 ms after it
 * starts (a timer on the consumer's loop); one key (drawn from the seed) fails its first
 * message's 4 attempts (max_attempts 4, backoff 200 ms doubling to 1 s), which then goes to the
 * dead-letter topic. Consumer B joins the group 1 s after A handled its first message (the
 * seed moves that by up to 200 ms). Once every message is handled or dead-lettered both close
 * at once, as a deployment that stops would (the second close comes while the group
 * rebalances after the first). The consumers' heartbeat.interval.ms is 200 and their
 * session.timeout.ms 2500 (RINGLANE_BENCH_HEARTBEAT_MS and RINGLANE_BENCH_SESSION_MS change
 * them), so that the group notices B while the poison message waits for its retries; with
 * librdkafka's 3 s heartbeat the revoke comes after it was dead-lettered. Everything else is
 * the consumer's defaults.
 *
 * Each run prints: handled (messages handled at least once, or dead-lettered), duplicates
 * (successful handler completions of a message already handled), lost (neither), order
 * violations (a key's message handled before an earlier one of the same key), messages skipped
 * thanks to the offset map, and what a restart would redo: the messages already handled that
 * lie at or above a partition's final committed offset and are not in its final committed map.
 * The same scenario runs with the offset map on (the default, 4096 bytes) and off, for each
 * assignment strategy and seed, on the same prefilled topic (a group of its own per run).
 *
 * Usage: bench_rebalance [MESSAGES (60000)] [SEEDS (3)] [STRATEGY... (range
 * cooperative-sticky)] */
#define _POSIX_C_SOURCE 200809L
#include "bench_common.h"
#include "bench_kafka.h"

#include "../consumer/offset_map.h"
#include "ringlane/consumer.h"

#include <inttypes.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <uv.h>

#define TOPIC "rebalance.events"
#define PARTITIONS 6
#define KEYS 1000
#define MAX_ATTEMPTS 4

static long messages = 60000;
static const char *bootstraps;

static void prefill(void)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    bench_kafka_set("bench_rebalance", conf, "bootstrap.servers", bootstraps);
    bench_kafka_set("bench_rebalance", conf, "linger.ms", "5");
    bench_kafka_set("bench_rebalance", conf, "enable.idempotence", "true");
    rd_kafka_conf_set_log_cb(conf, bench_kafka_quiet);
    char err[256];
    rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!p) {
        fprintf(stderr, "bench_rebalance: producer: %s\n", err);
        exit(1);
    }
    for (long i = 0; i < messages; i++) {
        char key[16], value[32];
        int kl = snprintf(key, sizeof key, "k%ld", i % KEYS);
        int vl = snprintf(value, sizeof value, "%ld %ld", i % KEYS, i / KEYS);
        while (rd_kafka_producev(p, RD_KAFKA_V_TOPIC(TOPIC), RD_KAFKA_V_KEY(key, (size_t)kl),
                                 RD_KAFKA_V_VALUE(value, (size_t)vl),
                                 RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                 RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(p, 10);
        rd_kafka_poll(p, 0);
    }
    if (rd_kafka_flush(p, 120000)) {
        fprintf(stderr, "bench_rebalance: prefill did not finish\n");
        exit(1);
    }
    rd_kafka_destroy(p);
}

/* --- what happened to every message, shared by both consumers --- */

static struct {
    int poison;                 /* the key whose first message fails */
    atomic_uchar *done;         /* by message index (seq * KEYS + key): handled or dead-lettered */
    _Atomic int64_t next[KEYS]; /* each key's next sequence number */
    atomic_long unique, calls, duplicates, violations, dead, first_seen;
} seen;

static void see(int key, int64_t seq, bool dead)
{
    long idx = (long)seq * KEYS + key;
    if (idx < 0 || idx >= messages)
        return;
    if (atomic_exchange(&seen.done[idx], 1))
        atomic_fetch_add(&seen.duplicates, 1);
    else
        atomic_fetch_add(&seen.unique, 1);
    if (dead)
        atomic_fetch_add(&seen.dead, 1);
    int64_t next = atomic_load(&seen.next[key]);
    if (seq > next)
        atomic_fetch_add(&seen.violations, 1);
    if (seq >= next)
        atomic_store(&seen.next[key], seq + 1);
}

/* --- a consumer on a loop thread of its own --- */

typedef struct due {
    uint64_t at_ns, ticket;
    int key, status;
    int64_t seq;
    bool last; /* the last attempt of a failing message: dead-lettered now */
} due;

typedef struct member {
    uv_thread_t thread;
    uv_loop_t loop;
    uv_async_t ctl;
    uv_timer_t timer; /* every message waits 1 ms: one FIFO, one timer */
    due *v;
    size_t cap, head, len;
    rl_consumer_t *c;
    rl_consumer_options opts;
    atomic_bool close_now;
    atomic_int started; /* 1 running, -1 failed */
    rl_consumer_stats last;
} member;

static void on_due(uv_timer_t *t)
{
    member *mb = t->data;
    uint64_t now = uv_hrtime();
    while (mb->len && mb->v[mb->head].at_ns <= now) {
        due d = mb->v[mb->head];
        mb->head = (mb->head + 1) % mb->cap;
        mb->len--;
        /* Seen before the completion: the key's next message starts only after it. */
        if (d.status == 0 || d.last)
            see(d.key, d.seq, d.status != 0);
        rl_consumer_complete(mb->c, d.ticket, d.status);
    }
    if (mb->len) {
        uint64_t at = mb->v[mb->head].at_ns;
        uv_timer_start(&mb->timer, on_due, (at - now + 999999) / 1000000, 0);
    }
}

static void start(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt, uint64_t ticket)
{
    member *mb = rl_consumer_get_data(c);
    atomic_fetch_add(&seen.calls, 1);
    long first = 0;
    atomic_compare_exchange_strong(&seen.first_seen, &first, 1);
    char v[32];
    int key = -1;
    long long seq = -1;
    if (m->len < sizeof v) {
        memcpy(v, m->payload, m->len);
        v[m->len] = '\0';
        if (sscanf(v, "%d %lld", &key, &seq) != 2)
            key = -1;
    }
    if (key < 0 || key >= KEYS) {
        rl_consumer_complete(c, ticket, 0);
        return;
    }
    if (mb->len == mb->cap) {
        size_t cap = mb->cap ? mb->cap * 2 : 4096;
        due *nv = malloc(cap * sizeof *nv);
        if (!nv)
            abort();
        for (size_t i = 0; i < mb->len; i++)
            nv[i] = mb->v[(mb->head + i) % mb->cap];
        free(mb->v);
        mb->v = nv;
        mb->cap = cap;
        mb->head = 0;
    }
    bool fails = key == seen.poison && seq == 0;
    mb->v[(mb->head + mb->len) % mb->cap] = (due){
        uv_hrtime() + 1000000u, ticket, key, fails ? -1 : 0, seq, fails && attempt == MAX_ATTEMPTS};
    if (mb->len++ == 0)
        uv_timer_start(&mb->timer, on_due, 1, 0);
}

static double t_start;

static void on_error(rl_consumer_t *c, rd_kafka_resp_err_t err, const char *reason)
{
    member *mb = rl_consumer_get_data(c);
    fprintf(stderr, "%.3f %p %s: %s\n", bench_now() - t_start, (void *)mb, rd_kafka_err2name(err),
            reason);
}

static void on_rebalance(rl_consumer_t *c, int event, const rd_kafka_topic_partition_list_t *l)
{
    member *mb = rl_consumer_get_data(c);
    fprintf(stderr, "%.3f %p %s %d partitions\n", bench_now() - t_start, (void *)mb,
            event == RL_CONSUMER_ASSIGNED  ? "assigned"
            : event == RL_CONSUMER_REVOKED ? "revoked"
                                           : "lost",
            l->cnt);
}

static void on_closed(rl_consumer_t *c)
{
    member *mb = rl_consumer_get_data(c);
    rl_consumer_stats_get(c, &mb->last, NULL, 0, NULL);
}

static void on_ctl(uv_async_t *a)
{
    member *mb = a->data;
    if (!atomic_load(&mb->close_now))
        return;
    rl_consumer_close(mb->c, on_closed);
    uv_close((uv_handle_t *)&mb->ctl, NULL);
    uv_close((uv_handle_t *)&mb->timer, NULL);
}

static void member_main(void *arg)
{
    member *mb = arg;
    uv_loop_init(&mb->loop);
    uv_async_init(&mb->loop, &mb->ctl, on_ctl);
    uv_timer_init(&mb->loop, &mb->timer);
    mb->ctl.data = mb;
    mb->timer.data = mb;
    mb->opts.data = mb;
    int rc = rl_consumer_new(&mb->loop, &mb->opts, &mb->c);
    if (rc) {
        fprintf(stderr, "bench_rebalance: rl_consumer_new: %s: %s\n", rl_strerror(rc),
                rl_last_error_detail());
        atomic_store(&mb->started, -1);
        uv_close((uv_handle_t *)&mb->ctl, NULL);
        uv_close((uv_handle_t *)&mb->timer, NULL);
    } else {
        atomic_store(&mb->started, 1);
    }
    uv_run(&mb->loop, UV_RUN_DEFAULT);
    uv_loop_close(&mb->loop);
    free(mb->v);
}

static void member_start(member *mb, const char *group, const char *strategy, uint32_t map_bytes)
{
    static const char *const topics[] = {TOPIC};
    memset(mb, 0, sizeof *mb);
    rl_consumer_options_init(&mb->opts);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    bench_kafka_set("bench_rebalance", conf, "bootstrap.servers", bootstraps);
    bench_kafka_set("bench_rebalance", conf, "group.id", group);
    bench_kafka_set("bench_rebalance", conf, "auto.offset.reset", "earliest");
    bench_kafka_set("bench_rebalance", conf, "partition.assignment.strategy", strategy);
    /* The group notices B within a heartbeat: at librdkafka's default (3 s) the poison
     * message has been dead-lettered long before, and no watermark is held at the revoke. */
    const char *hb = getenv("RINGLANE_BENCH_HEARTBEAT_MS");
    const char *session = getenv("RINGLANE_BENCH_SESSION_MS");
    bench_kafka_set("bench_rebalance", conf, "heartbeat.interval.ms", hb ? hb : "200");
    bench_kafka_set("bench_rebalance", conf, "session.timeout.ms", session ? session : "2500");
    if (getenv("RINGLANE_BENCH_DEBUG")) /* e.g. "cgrp": librdkafka's log on stderr */
        bench_kafka_set("bench_rebalance", conf, "debug", getenv("RINGLANE_BENCH_DEBUG"));
    else
        rd_kafka_conf_set_log_cb(conf, bench_kafka_quiet);
    mb->opts.conf = conf;
    mb->opts.topics = topics;
    mb->opts.topic_count = 1;
    mb->opts.async_handler = start;
    mb->opts.dispatch.max_attempts = MAX_ATTEMPTS;
    mb->opts.dispatch.backoff_ms = 200;
    mb->opts.dispatch.backoff_max_ms = 1000;
    mb->opts.offset_map_max_bytes = map_bytes;
    if (getenv("RINGLANE_BENCH_COMMIT_MS")) /* the consumer's default: 1000 */
        mb->opts.commit_interval_ms = (uint32_t)atoi(getenv("RINGLANE_BENCH_COMMIT_MS"));
    if (getenv("RINGLANE_BENCH_EVENTS")) { /* on stderr: errors and rebalances, timed */
        mb->opts.on_error = on_error;
        mb->opts.on_rebalance = on_rebalance;
    }
    atomic_init(&mb->close_now, false);
    atomic_init(&mb->started, 0);
    if (uv_thread_create(&mb->thread, member_main, mb) != 0)
        abort();
    while (!atomic_load(&mb->started))
        uv_sleep(1);
    if (atomic_load(&mb->started) < 0)
        exit(1);
}

static void member_close(member *mb)
{
    atomic_store(&mb->close_now, true);
    uv_async_send(&mb->ctl);
}

/* --- what a restart would redo --- */

static long restart_redo(const char *group, long *committed_total)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    bench_kafka_set("bench_rebalance", conf, "bootstrap.servers", bootstraps);
    bench_kafka_set("bench_rebalance", conf, "group.id", group);
    rd_kafka_conf_set_log_cb(conf, bench_kafka_quiet);
    char err[256];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk)
        abort();
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(PARTITIONS);
    for (int p = 0; p < PARTITIONS; p++)
        rd_kafka_topic_partition_list_add(l, TOPIC, p);
    long redo = 0;
    *committed_total = 0;
    if (rd_kafka_committed(rk, l, 10000) == 0) {
        for (int p = 0; p < PARTITIONS; p++) {
            const rd_kafka_topic_partition_t *e = &l->elems[p];
            int64_t low = 0, high = 0;
            rd_kafka_query_watermark_offsets(rk, TOPIC, p, &low, &high, 10000);
            int64_t from = e->offset >= 0 ? e->offset : low;
            rl__offset_map m = {0};
            if (e->metadata_size)
                rl__offset_map_decode(e->metadata, e->metadata_size, &m, NULL);
            uint64_t in_map = m.base == from ? rl__offset_map_count(&m) : 0;
            redo += (long)(high - from) - (long)in_map;
            *committed_total += (long)from;
            rl__offset_map_free(&m);
        }
    }
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_destroy(rk);
    return redo;
}

/* --- one run --- */

typedef struct result {
    long handled, duplicates, lost, violations, dead, skipped, redo, commit_failures;
    double seconds;
} result;

static result run(const char *strategy, uint32_t map_bytes, unsigned seed, int index)
{
    uint64_t rs = 0x9e3779b97f4a7c15ull * (seed + 1);
    seen.poison = (int)(rl_mix64(rs) % KEYS);
    double join_after = 0.8 + (double)(rl_mix64(rs + 1) % 401) / 1000.0;
    memset(seen.done, 0, (size_t)messages);
    for (int k = 0; k < KEYS; k++)
        atomic_store(&seen.next[k], 0);
    atomic_store(&seen.unique, 0);
    atomic_store(&seen.calls, 0);
    atomic_store(&seen.duplicates, 0);
    atomic_store(&seen.violations, 0);
    atomic_store(&seen.dead, 0);
    atomic_store(&seen.first_seen, 0);
    char group[64];
    snprintf(group, sizeof group, "rebalance-%d-%s-%u-%u", index, strategy, map_bytes, seed);
    static member a, b;
    double t0 = bench_now();
    t_start = t0;
    member_start(&a, group, strategy, map_bytes);
    while (!atomic_load(&seen.first_seen))
        uv_sleep(1);
    uv_sleep((unsigned)(join_after * 1000));
    member_start(&b, group, strategy, map_bytes);
    double deadline = bench_now() + 180;
    while (atomic_load(&seen.unique) < messages && bench_now() < deadline)
        uv_sleep(5);
    result r = {0};
    r.seconds = bench_now() - t0;
    member_close(&a);
    member_close(&b);
    uv_thread_join(&a.thread);
    uv_thread_join(&b.thread);
    r.handled = atomic_load(&seen.unique);
    r.duplicates = atomic_load(&seen.duplicates);
    r.lost = messages - r.handled;
    r.violations = atomic_load(&seen.violations);
    r.dead = atomic_load(&seen.dead);
    r.skipped = (long)(a.last.skipped + b.last.skipped);
    r.commit_failures = (long)(a.last.commit_failures + b.last.commit_failures);
    long committed;
    r.redo = restart_redo(group, &committed);
    if (getenv("RINGLANE_BENCH_VERBOSE"))
        for (int i = 0; i < 2; i++) {
            const rl_consumer_stats *st = i ? &b.last : &a.last;
            printf("  %c: consumed %" PRIu64 " dispatched %" PRIu64 " done %" PRIu64
                   " skipped %" PRIu64 " refetched %" PRIu64 " stale %" PRIu64 " returned %" PRIu64
                   " pauses %" PRIu64 " assigned %" PRIu64 " revoked %" PRIu64 " lost %" PRIu64
                   " revoke_timeouts %" PRIu64 " abandoned %" PRIu64 " commits %" PRIu64
                   " failures %" PRIu64 " rejected %" PRIu64 "\n",
                   i ? 'B' : 'A', st->consumed, st->dispatched, st->done, st->skipped,
                   st->refetched, st->stale, st->returned, st->pauses, st->assigned, st->revoked,
                   st->lost, st->revoke_timeouts, st->abandoned, st->commits, st->commit_failures,
                   st->offset_map_rejected);
        }
    printf("%-18s %-4s seed %-3u handled %6ld  duplicates %6ld  lost %ld  order violations %ld  "
           "dead %ld  skipped %6ld  restart would redo %6ld  (poison k%d, B after %.2f s, "
           "commit failures %ld, %.1f s)\n",
           strategy, map_bytes ? "on" : "off", seed, r.handled, r.duplicates, r.lost, r.violations,
           r.dead, r.skipped, r.redo, seen.poison, join_after, r.commit_failures, r.seconds);
    fflush(stdout);
    return r;
}

static int cmp_long(const void *x, const void *y)
{
    long a = *(const long *)x, b = *(const long *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv)
{
    messages = argc > 1 ? atol(argv[1]) : 60000;
    int seeds = argc > 2 ? atoi(argv[2]) : 3;
    const char *defaults[] = {"range", "cooperative-sticky"};
    const char *const *strategies = argc > 3 ? (const char *const *)argv + 3 : defaults;
    int nstrategies = argc > 3 ? argc - 3 : 2;
    if (messages < KEYS || seeds < 1 || seeds > 99) {
        fprintf(stderr, "usage: bench_rebalance [MESSAGES >= 1000] [SEEDS 1..99] "
                        "[STRATEGY...]\n");
        return 2;
    }
    rd_kafka_conf_t *hconf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(hconf, bench_kafka_quiet);
    char err[256];
    rd_kafka_t *host = rd_kafka_new(RD_KAFKA_PRODUCER, hconf, err, sizeof err);
    rd_kafka_mock_cluster_t *mock = host ? rd_kafka_mock_cluster_new(host, 3) : NULL;
    if (!mock || rd_kafka_mock_topic_create(mock, TOPIC, PARTITIONS, 1) ||
        rd_kafka_mock_topic_create(mock, TOPIC ".dlq", 1, 1)) {
        fprintf(stderr, "bench_rebalance: no mock cluster\n");
        return 1;
    }
    bootstraps = rd_kafka_mock_cluster_bootstraps(mock);
    seen.done = calloc((size_t)messages, 1);
    if (!seen.done)
        return 1;
    prefill();
    printf("bench_rebalance: %ld messages over %d keys, %d partitions; async handlers of 1 ms; "
           "one key's first message fails %d attempts (backoff 200 ms .. 1 s); consumer B joins "
           "1 s after the first message; both close when all are handled\n",
           messages, KEYS, PARTITIONS, MAX_ATTEMPTS);
    int index = 0;
    for (int s = 0; s < nstrategies; s++) {
        long dup[2][99], redo[2][99], lost = 0, viol = 0;
        for (int seed = 0; seed < seeds; seed++) {
            for (int on = 1; on >= 0; on--) {
                if (getenv("RINGLANE_BENCH_MAP_ONLY") && !on) { /* for a look at one side */
                    dup[0][seed] = redo[0][seed] = 0;
                    continue;
                }
                result r = run(strategies[s], on ? 4096 : 0, (unsigned)seed, index++);
                dup[on][seed] = r.duplicates;
                redo[on][seed] = r.redo;
                lost += r.lost;
                viol += r.violations;
            }
        }
        for (int on = 0; on < 2; on++) {
            qsort(dup[on], (size_t)seeds, sizeof **dup, cmp_long);
            qsort(redo[on], (size_t)seeds, sizeof **redo, cmp_long);
        }
        printf("%s, median of %d seeds: duplicates %ld with the offset map, %ld without; a "
               "restart would redo %ld with, %ld without; lost %ld, order violations %ld in "
               "all runs\n",
               strategies[s], seeds, dup[1][seeds / 2], dup[0][seeds / 2], redo[1][seeds / 2],
               redo[0][seeds / 2], lost, viol);
        fflush(stdout);
    }
    free(seen.done);
    rd_kafka_mock_cluster_destroy(mock);
    rd_kafka_destroy(host);
    return 0;
}
