/* SPDX-License-Identifier: BSD-2-Clause */
/* Shared by the consumer suites: a mock cluster, a keyed producer with per-key sequence
 * numbers, an order checker, and consumers that each run on a loop thread of their own. */
#ifndef RINGLANE_CONSUMER_TEST_UTIL_H
#define RINGLANE_CONSUMER_TEST_UTIL_H

#include "kafka_test_util.h"

#include "ringlane/consumer.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <uv.h>

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLOW_BUILD 1
#else
#define SLOW_BUILD 0
#endif

/* --- the mock cluster --- */

typedef struct cluster {
    rd_kafka_t *host;
    rd_kafka_mock_cluster_t *mock;
    const char *bootstraps;
} cluster;

static inline void cluster_start(cluster *k, int brokers)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    char err[512];
    k->host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    assert_non_null(k->host);
    k->mock = rd_kafka_mock_cluster_new(k->host, brokers);
    assert_non_null(k->mock);
    k->bootstraps = rd_kafka_mock_cluster_bootstraps(k->mock);
}

static inline void cluster_stop(cluster *k)
{
    rd_kafka_mock_cluster_destroy(k->mock);
    rd_kafka_destroy(k->host);
}

/* librdkafka's own statistics of the consumers, kept for diagnosing a failed run. */
static char kafka_stats[4][65536];
static atomic_int kafka_stats_n;

static int keep_stats(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
    (void)opaque;
    (void)len;
    int slot = -1;
    const char *name = rd_kafka_name(rk);
    for (int i = 0; i < 4; i++)
        if (strncmp(kafka_stats[i] + 1, name, strlen(name)) == 0)
            slot = i;
    if (slot < 0)
        slot = atomic_fetch_add(&kafka_stats_n, 1) % 4;
    snprintf(kafka_stats[slot], sizeof kafka_stats[slot], "[%s] %s", name, json);
    return 0;
}

/* A consumer configuration for the mock cluster: quick group changes (the mock coordinator
 * waits about session.timeout.ms - 1 s for members to rejoin), short fetch waits. */
static inline rd_kafka_conf_t *consumer_conf(const cluster *k, const char *group,
                                             const char *strategy)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    conf_set_ok(conf, "bootstrap.servers", k->bootstraps);
    conf_set_ok(conf, "group.id", group);
    conf_set_ok(conf, "auto.offset.reset", "earliest");
    conf_set_ok(conf, "session.timeout.ms", SLOW_BUILD ? "4000" : "2500");
    conf_set_ok(conf, "heartbeat.interval.ms", "200");
    conf_set_ok(conf, "fetch.wait.max.ms", "20");
    conf_set_ok(conf, "topic.metadata.refresh.interval.ms", "1000");
    conf_set_ok(conf, "partition.assignment.strategy", strategy);
    if (getenv("RINGLANE_TEST_KAFKA_STATS")) {
        conf_set_ok(conf, "statistics.interval.ms", "2000");
        rd_kafka_conf_set_stats_cb(conf, keep_stats);
    }
    const char *debug = getenv("RINGLANE_TEST_KAFKA_DEBUG"); /* e.g. "cgrp" */
    if (debug)
        conf_set_ok(conf, "debug", debug);
    else
        rd_kafka_conf_set_log_cb(conf, quiet_log);
    return conf;
}

/* --- keyed messages: key "k<i>", value "<i> <seq>" --- */

static inline int msg_key(int key, char *buf, size_t size)
{
    return snprintf(buf, size, "k%d", key);
}

/* Parses a value; false when it is not one of ours. */
static inline bool msg_parse(const rd_kafka_message_t *m, int *key, int64_t *seq)
{
    char v[64];
    if (!m->payload || m->len == 0 || m->len >= sizeof v)
        return false;
    memcpy(v, m->payload, m->len);
    v[m->len] = '\0';
    long long s;
    return sscanf(v, "%d %lld", key, &s) == 2 && (*seq = s, true);
}

typedef struct producer {
    rd_kafka_t *rk;
    rl_kafka_partitioner_t *part;
    atomic_long delivered, failed;
} producer;

static void producer_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    producer *p = opaque;
    if (m->err)
        atomic_fetch_add(&p->failed, 1);
    else
        atomic_fetch_add(&p->delivered, 1);
}

/* An idempotent producer with the ring partitioner (options o, NULL for the defaults):
 * retries keep order, never duplicate. */
static inline void producer_start_with(producer *p, const cluster *k,
                                       const rl_kafka_partitioner_options *o)
{
    atomic_init(&p->delivered, 0);
    atomic_init(&p->failed, 0);
    assert_rl_ok(rl_kafka_partitioner_new(o, &p->part));
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    conf_set_ok(conf, "bootstrap.servers", k->bootstraps);
    conf_set_ok(conf, "linger.ms", "5");
    conf_set_ok(conf, "enable.idempotence", "true");
    conf_set_ok(conf, "message.timeout.ms", "60000");
    rd_kafka_topic_conf_t *tconf = rd_kafka_topic_conf_new();
    assert_rl_ok(rl_kafka_partitioner_install(p->part, tconf));
    rd_kafka_conf_set_default_topic_conf(conf, tconf);
    rd_kafka_conf_set_dr_msg_cb(conf, producer_dr);
    rd_kafka_conf_set_opaque(conf, p);
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    char err[512];
    p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!p->rk)
        fail_msg("producer: %s", err);
}

static inline void producer_start(producer *p, const cluster *k)
{
    producer_start_with(p, k, NULL);
}

/* Produces any key and value (NULL key allowed); waits while librdkafka's queue is full. */
static inline void produce_raw(producer *p, const char *topic, const void *key, size_t klen,
                               const void *value, size_t vlen)
{
    rd_kafka_resp_err_t err;
    while ((err = rd_kafka_producev(p->rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, klen),
                                    RD_KAFKA_V_VALUE((void *)value, vlen),
                                    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)) ==
           RD_KAFKA_RESP_ERR__QUEUE_FULL)
        rd_kafka_poll(p->rk, 10);
    if (err)
        fail_msg("producev: %s", rd_kafka_err2str(err));
    rd_kafka_poll(p->rk, 0);
}

static inline void produce_seq(producer *p, const char *topic, int key, int64_t seq)
{
    char k[16], v[48];
    int kl = msg_key(key, k, sizeof k);
    int vl = snprintf(v, sizeof v, "%d %" PRId64, key, seq);
    produce_raw(p, topic, k, (size_t)kl, v, (size_t)vl);
}

static inline void producer_flush(producer *p)
{
    rd_kafka_resp_err_t err = rd_kafka_flush(p->rk, 60000);
    if (err)
        fail_msg("flush: %s", rd_kafka_err2str(err));
}

static inline void producer_stop(producer *p)
{
    rd_kafka_destroy(p->rk);
    rl_kafka_partitioner_destroy(p->part);
}

/* --- the order checker, shared by every consumer of a run --- */

typedef struct checker {
    int keys;
    _Atomic int64_t *next; /* the next sequence number expected, per key */
    atomic_int *busy;      /* a handler has the key now */
    atomic_long handled, duplicates, violations, overlaps, foreign;
} checker;

static inline void checker_init(checker *ck, int keys)
{
    ck->keys = keys;
    ck->next = calloc((size_t)keys, sizeof *ck->next);
    ck->busy = calloc((size_t)keys, sizeof *ck->busy);
    assert_non_null(ck->next);
    assert_non_null(ck->busy);
    for (int i = 0; i < keys; i++) {
        atomic_init(&ck->next[i], 0);
        atomic_init(&ck->busy[i], 0);
    }
    atomic_init(&ck->handled, 0);
    atomic_init(&ck->duplicates, 0);
    atomic_init(&ck->violations, 0);
    atomic_init(&ck->overlaps, 0);
    atomic_init(&ck->foreign, 0);
}

static inline void checker_free(checker *ck)
{
    free(ck->next);
    free(ck->busy);
}

/* In a handler: a sequence below the next expected is a redelivery (at-least-once), above it
 * is a gap (a violation), and two handlers with the same key at once is a violation. Returns
 * the key, or -1 for a message that is not one of ours. */
static inline int checker_see(checker *ck, const rd_kafka_message_t *m)
{
    int key;
    int64_t seq;
    if (!msg_parse(m, &key, &seq) || key < 0 || key >= ck->keys) {
        atomic_fetch_add(&ck->foreign, 1);
        return -1;
    }
    if (atomic_exchange(&ck->busy[key], 1))
        atomic_fetch_add(&ck->overlaps, 1);
    int64_t next = atomic_load(&ck->next[key]);
    if (seq < next) {
        atomic_fetch_add(&ck->duplicates, 1);
    } else {
        if (seq > next)
            atomic_fetch_add(&ck->violations, 1);
        atomic_store(&ck->next[key], seq + 1);
    }
    atomic_fetch_add(&ck->handled, 1);
    atomic_store(&ck->busy[key], 0);
    return key;
}

/* How many of `per_key` sequence numbers per key were seen, summed over keys. */
static inline long checker_complete(checker *ck, int64_t per_key)
{
    long n = 0;
    for (int i = 0; i < ck->keys; i++) {
        int64_t v = atomic_load(&ck->next[i]);
        n += (long)(v < per_key ? v : per_key);
    }
    return n;
}

/* --- a consumer on a loop thread of its own --- */

enum { CMD_NONE, CMD_CLOSE, CMD_STATS, CMD_ADD_LANE, CMD_REMOVE_LANE };

typedef struct cthread {
    uv_thread_t thread;
    uv_loop_t loop;
    uv_async_t ctl;
    uv_mutex_t mu;
    uv_cond_t cv;
    rl_consumer_options opts; /* filled by the test; the thread makes the consumer */
    const char *lanes[8];
    rl_consumer_t *c;
    int new_rc;
    bool started;
    int cmd;
    char arg[64];
    int cmd_rc;
    bool cmd_done;
    char stats[16384];
    rl_consumer_stats last; /* statistics at the last CMD_STATS, then at the end of close */
    rl_consumer_partition_stats parts[8]; /* the partitions at the last CMD_STATS */
    size_t nparts;
    int assigned;      /* partitions held now (loop thread writes, under mu) */
    long dead_letters; /* delivered to the dead-letter topic (under mu) */
    long errors;       /* on_error calls (under mu) */
    void *user;
    rl_consumer_rebalance_cb rebalance_hook; /* the test's, called after the count (may be NULL) */
    rl_consumer_error_cb error_hook;         /* the same for on_error */
    rl_consumer_dead_letter_cb dead_letter_hook; /* and for on_dead_letter */
} cthread;

static void ct_rebalance(rl_consumer_t *c, int event, const rd_kafka_topic_partition_list_t *l)
{
    cthread *t = rl_consumer_get_data(c);
    uv_mutex_lock(&t->mu);
    t->assigned += event == RL_CONSUMER_ASSIGNED ? l->cnt : -l->cnt;
    uv_cond_broadcast(&t->cv);
    uv_mutex_unlock(&t->mu);
    if (t->rebalance_hook)
        t->rebalance_hook(c, event, l);
}

static void ct_dead(rl_consumer_t *c, const rd_kafka_message_t *m, const char *reason)
{
    cthread *t = rl_consumer_get_data(c);
    uv_mutex_lock(&t->mu);
    t->dead_letters++;
    uv_mutex_unlock(&t->mu);
    if (t->dead_letter_hook)
        t->dead_letter_hook(c, m, reason);
}

static void ct_error(rl_consumer_t *c, rd_kafka_resp_err_t err, const char *reason)
{
    (void)err;
    (void)reason;
    cthread *t = rl_consumer_get_data(c);
    uv_mutex_lock(&t->mu);
    t->errors++;
    uv_mutex_unlock(&t->mu);
    if (getenv("RINGLANE_TEST_VERBOSE"))
        fprintf(stderr, "consumer error: %s: %s\n", rd_kafka_err2name(err), reason);
    if (t->error_hook)
        t->error_hook(c, err, reason);
}

/* The counters as close left them (after the last revoke and every late completion). */
static void ct_closed(rl_consumer_t *c)
{
    cthread *t = rl_consumer_get_data(c);
    rl_consumer_stats_get(c, &t->last, NULL, 0, NULL);
}

static void ct_on_ctl(uv_async_t *a)
{
    cthread *t = a->data;
    uv_mutex_lock(&t->mu);
    int cmd = t->cmd;
    uv_mutex_unlock(&t->mu);
    if (cmd == CMD_NONE)
        return;
    int rc = 0;
    switch (cmd) {
    case CMD_CLOSE:
        rc = rl_consumer_close(t->c, ct_closed);
        uv_close((uv_handle_t *)&t->ctl, NULL);
        break;
    case CMD_STATS:
        rc = rl_consumer_stats_json(t->c, t->stats, sizeof t->stats, NULL);
        rl_consumer_stats_get(t->c, &t->last, t->parts, 8, &t->nparts);
        break;
    case CMD_ADD_LANE:
        rc = rl_dispatch_add_lane(rl_consumer_dispatcher(t->c), t->arg);
        break;
    case CMD_REMOVE_LANE:
        rc = rl_dispatch_remove_lane(rl_consumer_dispatcher(t->c), t->arg);
        break;
    }
    uv_mutex_lock(&t->mu);
    t->cmd = CMD_NONE;
    t->cmd_rc = rc;
    t->cmd_done = true;
    uv_cond_broadcast(&t->cv);
    uv_mutex_unlock(&t->mu);
}

static void ct_main(void *arg)
{
    cthread *t = arg;
    int rc = uv_loop_init(&t->loop);
    if (!rc)
        rc = uv_async_init(&t->loop, &t->ctl, ct_on_ctl);
    t->ctl.data = t;
    t->opts.data = t;
    t->opts.on_rebalance = ct_rebalance;
    t->opts.on_dead_letter = ct_dead;
    t->opts.on_error = ct_error;
    if (!rc)
        rc = rl_consumer_new(&t->loop, &t->opts, &t->c);
    uv_mutex_lock(&t->mu);
    t->new_rc = rc;
    t->started = true;
    uv_cond_broadcast(&t->cv);
    uv_mutex_unlock(&t->mu);
    if (rc) {
        uv_close((uv_handle_t *)&t->ctl, NULL);
        uv_run(&t->loop, UV_RUN_DEFAULT);
        uv_loop_close(&t->loop);
        return;
    }
    uv_run(&t->loop, UV_RUN_DEFAULT);
    int lc = uv_loop_close(&t->loop);
    if (lc)
        fprintf(stderr, "consumer loop: %s\n", uv_strerror(lc));
}

/* Fills the options every consumer of the suites starts from; lanes "a".."d" by default. */
static inline void ct_init(cthread *t, rd_kafka_conf_t *conf, const char *const *topics,
                           size_t ntopics, rl_consumer_handler_fn handler, void *user)
{
    memset(t, 0, sizeof *t);
    assert_int_equal(uv_mutex_init(&t->mu), 0);
    assert_int_equal(uv_cond_init(&t->cv), 0);
    rl_consumer_options_init(&t->opts);
    t->opts.conf = conf;
    t->opts.topics = topics;
    t->opts.topic_count = ntopics;
    t->opts.handler = handler;
    t->lanes[0] = "a";
    t->lanes[1] = "b";
    t->lanes[2] = "c";
    t->lanes[3] = "d";
    t->opts.dispatch.lanes = t->lanes;
    t->opts.dispatch.lane_count = 4;
    t->opts.dispatch.backoff_ms = 1;
    t->opts.dispatch.backoff_max_ms = 5;
    t->opts.commit_interval_ms = 100;
    t->opts.revoke_timeout_ms = 10000;
    t->user = user;
}

/* Starts the thread and waits until the consumer exists. Returns rl_consumer_new's answer. */
static inline int ct_start(cthread *t)
{
    assert_int_equal(uv_thread_create(&t->thread, ct_main, t), 0);
    uv_mutex_lock(&t->mu);
    while (!t->started)
        uv_cond_wait(&t->cv, &t->mu);
    int rc = t->new_rc;
    uv_mutex_unlock(&t->mu);
    if (rc)
        uv_thread_join(&t->thread);
    return rc;
}

static inline int ct_command(cthread *t, int cmd, const char *arg)
{
    uv_mutex_lock(&t->mu);
    t->cmd = cmd;
    t->cmd_done = false;
    snprintf(t->arg, sizeof t->arg, "%s", arg ? arg : "");
    uv_mutex_unlock(&t->mu);
    uv_async_send(&t->ctl);
    uv_mutex_lock(&t->mu);
    while (!t->cmd_done)
        uv_cond_wait(&t->cv, &t->mu);
    int rc = t->cmd_rc;
    uv_mutex_unlock(&t->mu);
    return rc;
}

/* Closes the consumer (revoking and committing) and waits for its thread to end. */
static inline void ct_stop(cthread *t)
{
    assert_rl_ok(ct_command(t, CMD_CLOSE, NULL));
    uv_thread_join(&t->thread);
}

/* Starts the close and returns at once; ct_join waits for it to end. */
static inline void ct_close_async(cthread *t)
{
    assert_rl_ok(ct_command(t, CMD_CLOSE, NULL));
}

static inline void ct_join(cthread *t)
{
    uv_thread_join(&t->thread);
}

static inline void ct_free(cthread *t)
{
    uv_cond_destroy(&t->cv);
    uv_mutex_destroy(&t->mu);
}

static inline long ct_dead_letters(cthread *t)
{
    uv_mutex_lock(&t->mu);
    long n = t->dead_letters;
    uv_mutex_unlock(&t->mu);
    return n;
}

static inline int ct_assigned(cthread *t)
{
    uv_mutex_lock(&t->mu);
    int n = t->assigned;
    uv_mutex_unlock(&t->mu);
    return n;
}

static inline void sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits (polling every 10 ms) until cond holds or timeout_s passes. These waits are for events
 * (a rebalance, the last message); the timeout only stops a hung run, and the test then checks
 * cond itself. */
#define WAIT_FOR(cond, timeout_s)                                                                  \
    do {                                                                                           \
        double wait_end__ = now_s() + (timeout_s);                                                 \
        while (!(cond) && now_s() < wait_end__)                                                    \
            sleep_ms(10);                                                                          \
    } while (0)

/* The committed offset of each partition of a topic for a group (-1 where none). */
static inline void committed_offsets(const cluster *k, const char *group, const char *topic,
                                     int partitions, int64_t *out)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    conf_set_ok(conf, "bootstrap.servers", k->bootstraps);
    conf_set_ok(conf, "group.id", group);
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    assert_non_null(rk);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; p++)
        rd_kafka_topic_partition_list_add(l, topic, p);
    rd_kafka_resp_err_t e = rd_kafka_committed(rk, l, 10000);
    if (e)
        fail_msg("committed: %s", rd_kafka_err2str(e));
    for (int p = 0; p < partitions; p++)
        out[p] = l->elems[p].offset >= 0 ? l->elems[p].offset : -1;
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_destroy(rk);
}

/* The committed offset (-1 where none) and metadata ("" where none; cut to size) of one
 * partition for a group. */
static inline int64_t committed_meta(const cluster *k, const char *group, const char *topic,
                                     int partition, char *meta, size_t size)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    conf_set_ok(conf, "bootstrap.servers", k->bootstraps);
    conf_set_ok(conf, "group.id", group);
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    assert_non_null(rk);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, topic, partition);
    rd_kafka_resp_err_t e = rd_kafka_committed(rk, l, 10000);
    if (e)
        fail_msg("committed: %s", rd_kafka_err2str(e));
    size_t n = l->elems[0].metadata_size < size ? l->elems[0].metadata_size : size - 1;
    if (n)
        memcpy(meta, l->elems[0].metadata, n);
    meta[n] = '\0';
    int64_t off = l->elems[0].offset >= 0 ? l->elems[0].offset : -1;
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_destroy(rk);
    return off;
}

/* Commits offsets with metadata for a group from outside it (no member: the group must have
 * none yet), as another tool would. */
static inline void commit_with_meta(const cluster *k, const char *group, const char *topic,
                                    int partitions, const int64_t *offsets,
                                    const char *const *metas)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    conf_set_ok(conf, "bootstrap.servers", k->bootstraps);
    conf_set_ok(conf, "group.id", group);
    conf_set_ok(conf, "enable.auto.commit", "false");
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    assert_non_null(rk);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; p++) {
        rd_kafka_topic_partition_t *e = rd_kafka_topic_partition_list_add(l, topic, p);
        e->offset = offsets[p];
        if (metas[p] && *metas[p]) {
            e->metadata_size = strlen(metas[p]);
            e->metadata = malloc(e->metadata_size);
            memcpy(e->metadata, metas[p], e->metadata_size);
        }
    }
    rd_kafka_resp_err_t e = rd_kafka_commit(rk, l, 0);
    if (e)
        fail_msg("commit: %s", rd_kafka_err2str(e));
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_destroy(rk);
}

/* Every message of a topic (all its partitions, from the beginning to the high watermark),
 * handed to fn in each partition's order. Returns how many. */
typedef void (*read_fn)(const rd_kafka_message_t *m, void *arg);

static inline long read_topic(const cluster *k, const char *topic, int partitions, read_fn fn,
                              void *arg)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    conf_set_ok(conf, "bootstrap.servers", k->bootstraps);
    conf_set_ok(conf, "group.id", "reader"); /* never joins: partitions are assigned */
    conf_set_ok(conf, "enable.auto.commit", "false");
    conf_set_ok(conf, "fetch.wait.max.ms", "20");
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    assert_non_null(rk);
    long n = 0;
    for (int p = 0; p < partitions; p++) {
        int64_t low = 0, high = 0;
        assert_int_equal(rd_kafka_query_watermark_offsets(rk, topic, p, &low, &high, 10000), 0);
        if (high <= low)
            continue;
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(l, topic, p)->offset = low;
        assert_int_equal(rd_kafka_assign(rk, l), 0);
        rd_kafka_topic_partition_list_destroy(l);
        int64_t next = low;
        double end = now_s() + 30;
        while (next < high && now_s() < end) {
            rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
            if (!m)
                continue;
            if (!m->err && m->partition == p) {
                fn(m, arg);
                next = m->offset + 1;
                n++;
            }
            rd_kafka_message_destroy(m);
        }
        assert_true(next >= high);
        assert_int_equal(rd_kafka_assign(rk, NULL), 0);
    }
    rd_kafka_destroy(rk);
    return n;
}

/* A header's value as a string ("" when missing). */
static inline void header_str(const rd_kafka_message_t *m, const char *name, char *buf, size_t size)
{
    rd_kafka_headers_t *h = NULL;
    const void *v = NULL;
    size_t len = 0;
    buf[0] = '\0';
    if (rd_kafka_message_headers(m, &h) == 0 && rd_kafka_header_get_last(h, name, &v, &len) == 0 &&
        v) {
        if (len >= size)
            len = size - 1;
        memcpy(buf, v, len);
        buf[len] = '\0';
    }
}

/* The suite's cluster: 3 mock brokers, started and stopped around the whole group of tests by
 * suite_setup and suite_teardown (or by the suite itself). */
static cluster k;

static inline int suite_setup(void **state)
{
    (void)state;
    cluster_start(&k, 3);
    return 0;
}

static inline int suite_teardown(void **state)
{
    (void)state;
    cluster_stop(&k);
    return 0;
}

#endif
