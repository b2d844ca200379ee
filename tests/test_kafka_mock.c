/* SPDX-License-Identifier: BSD-2-Clause */
/* The ring partitioner inside real librdkafka producers, on librdkafka's mock cluster (brokers
 * on 127.0.0.1 in this process): delivery reports show every message on the partition the
 * ring says, through the C API and through the plugin module. */
#define _POSIX_C_SOURCE 200809L
#include "kafka_test_util.h"

#include <pthread.h>
#include <stdatomic.h>

#define FLUSH_MS 30000

/* Delivery reports, indexed by the message's opaque (its sequence number). */
typedef struct delivery {
    int32_t partition;
    rd_kafka_resp_err_t err;
    int reported;
} delivery;

typedef struct run {
    delivery *d;
    size_t n;
} run;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    run *r = opaque;
    size_t i = (size_t)(uintptr_t)m->_private;
    if (i < r->n) {
        r->d[i].partition = m->partition;
        r->d[i].err = m->err;
        r->d[i].reported++;
    }
}

/* A 3-broker mock cluster on 127.0.0.1, hosted by a client of its own so that topics exist
 * with the wanted partition counts before any producer asks for them. */
static rd_kafka_t *mock_host;
static rd_kafka_mock_cluster_t *mock;

static int cluster_up(void **state)
{
    (void)state;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    char err[512];
    mock_host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!mock_host)
        return -1;
    mock = rd_kafka_mock_cluster_new(mock_host, 3);
    return mock ? 0 : -1;
}

static int cluster_down(void **state)
{
    (void)state;
    rd_kafka_mock_cluster_destroy(mock);
    rd_kafka_destroy(mock_host);
    return 0;
}

static void create_topic(const char *topic, int partitions)
{
    assert_int_equal(rd_kafka_mock_topic_create(mock, topic, partitions, 1), 0);
}

/* A producer configuration for the mock cluster. */
static rd_kafka_conf_t *mock_conf(run *r)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    conf_set_ok(conf, "bootstrap.servers", rd_kafka_mock_cluster_bootstraps(mock));
    conf_set_ok(conf, "linger.ms", "2");
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    rd_kafka_conf_set_opaque(conf, r);
    return conf;
}

static rd_kafka_t *new_producer(rd_kafka_conf_t *conf)
{
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk)
        fail_msg("rd_kafka_new: %s", err);
    return rk;
}

/* Produces message `seq` with a key (NULL key when key is NULL) by topic name. */
static void produce_named(rd_kafka_t *rk, const char *topic, const void *key, size_t len,
                          size_t seq)
{
    rd_kafka_resp_err_t err =
        rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, len),
                          RD_KAFKA_V_VALUE("v", 1), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                          RD_KAFKA_V_OPAQUE((void *)(uintptr_t)seq), RD_KAFKA_V_END);
    if (err)
        fail_msg("producev: %s", rd_kafka_err2str(err));
}

static void produce_rkt(rd_kafka_topic_t *rkt, const void *key, size_t len, size_t seq)
{
    if (rd_kafka_produce(rkt, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY, "v", 1, key, len,
                         (void *)(uintptr_t)seq) != 0)
        fail_msg("produce: %s", rd_kafka_err2str(rd_kafka_last_error()));
}

static void flush_all(rd_kafka_t *rk)
{
    rd_kafka_resp_err_t err = rd_kafka_flush(rk, FLUSH_MS);
    if (err)
        fail_msg("flush: %s (%d messages left)", rd_kafka_err2str(err), rd_kafka_outq_len(rk));
}

/* librdkafka counts a partition as available only once the thread of its leader's broker has
 * taken it over, a moment after the client first learns the topic. Policies that ask about
 * availability are tested on a warm client: one message delivered to each partition that has
 * a leader (all but `skip`). */
static void warm_up(rd_kafka_t *rk, const char *topic, int32_t partitions, int32_t skip)
{
    for (int32_t p = 0; p < partitions; p++) {
        if (p == skip)
            continue;
        rd_kafka_resp_err_t err =
            rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(p),
                              RD_KAFKA_V_VALUE("w", 1), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                              RD_KAFKA_V_OPAQUE((void *)UINTPTR_MAX), RD_KAFKA_V_END);
        if (err)
            fail_msg("producev: %s", rd_kafka_err2str(err));
    }
    flush_all(rk);
}

#define KEYS_PER_TOPIC 400

/* For each partition count, two topics: one produced by name (the default topic conf carries
 * the partitioner) and one through a topic object with its own conf. Every delivery report
 * must name the reference ring's partition; each partitioner serves all the counts at once. */
static void delivery_reports_follow_the_ring(void **state)
{
    (void)state;
    const char *profiles[] = {"default", "ds09", "xmur3"};
    const int32_t counts[] = {1, 3, 6, 8, 16};
    enum { NC = sizeof counts / sizeof *counts };
    char key[64], topic[64];
    for (size_t pi = 0; pi < sizeof profiles / sizeof *profiles; pi++) {
        const size_t per_run = NC * 2 * KEYS_PER_TOPIC;
        run r = {.d = calloc(per_run, sizeof(delivery)), .n = per_run};
        assert_non_null(r.d);
        rl_kafka_partitioner_options o;
        rl_kafka_partitioner_options_init(&o);
        o.profile = profiles[pi];
        rl_kafka_partitioner_t *p;
        assert_rl_ok(rl_kafka_partitioner_new(&o, &p));

        rd_kafka_conf_t *conf = mock_conf(&r);
        rd_kafka_topic_conf_t *tconf = rd_kafka_topic_conf_new();
        assert_rl_ok(rl_kafka_partitioner_install(p, tconf));
        rd_kafka_conf_set_default_topic_conf(conf, tconf);
        rd_kafka_t *rk = new_producer(conf);

        rd_kafka_topic_t *rkts[NC];
        for (size_t c = 0; c < NC; c++) {
            snprintf(topic, sizeof topic, "%s-named-%d", profiles[pi], (int)counts[c]);
            create_topic(topic, counts[c]);
            snprintf(topic, sizeof topic, "%s-object-%d", profiles[pi], (int)counts[c]);
            create_topic(topic, counts[c]);
            rd_kafka_topic_conf_t *own = rd_kafka_topic_conf_new();
            assert_rl_ok(rl_kafka_partitioner_install(p, own));
            rkts[c] = rd_kafka_topic_new(rk, topic, own);
            assert_non_null(rkts[c]);
        }
        size_t seq = 0;
        for (size_t c = 0; c < NC; c++) {
            snprintf(topic, sizeof topic, "%s-named-%d", profiles[pi], (int)counts[c]);
            for (uint64_t i = 0; i < KEYS_PER_TOPIC; i++) {
                size_t len = test_key(i, key, sizeof key);
                produce_named(rk, topic, key, len, seq++);
                produce_rkt(rkts[c], key, len, seq++);
            }
            rd_kafka_poll(rk, 0);
        }
        flush_all(rk);

        seq = 0;
        for (size_t c = 0; c < NC; c++) {
            rl_ring_t *ref = ref_partition_ring(profiles[pi], RL_VNODES_PROFILE, counts[c]);
            int used[16] = {0};
            for (uint64_t i = 0; i < KEYS_PER_TOPIC; i++) {
                size_t len = test_key(i, key, sizeof key);
                int32_t want = ref_partition(ref, key, len);
                for (int k = 0; k < 2; k++, seq++) {
                    assert_int_equal(r.d[seq].reported, 1);
                    assert_int_equal(r.d[seq].err, 0);
                    if (r.d[seq].partition != want)
                        fail_msg("%s, %d partitions: key %s delivered to %d, ring says %d",
                                 profiles[pi], (int)counts[c], key, (int)r.d[seq].partition,
                                 (int)want);
                    used[want] = 1;
                }
            }
            /* The keys reach every partition (400 keys, at most 16 partitions). */
            for (int32_t k = 0; k < counts[c]; k++)
                assert_true(used[k]);
            rl_ring_free(ref);
            rd_kafka_topic_destroy(rkts[c]);
        }
        rl_kafka_partitioner_stats st;
        assert_rl_ok(rl_kafka_partitioner_stats_get(p, &st));
        assert_int_equal(st.rings, NC);
        assert_int_equal(st.fallbacks, 0);
        rd_kafka_destroy(rk);
        rl_kafka_partitioner_destroy(p); /* after the client: its topics used it */
        free(r.d);
    }
}

/* Produces `n` messages whose keys are NULL (even seq) and empty (odd seq) to a 6-partition
 * topic and returns how many landed on each partition. */
static void produce_null_keys(const rl_kafka_partitioner_options *o, const char *linger, size_t n,
                              int counts[6], rl_kafka_partitioner_stats *st)
{
    static int runs;
    char topic[32];
    snprintf(topic, sizeof topic, "nulls-%d", runs++);
    create_topic(topic, 6);
    run r = {.d = calloc(n, sizeof(delivery)), .n = n};
    assert_non_null(r.d);
    rl_kafka_partitioner_t *p;
    assert_rl_ok(rl_kafka_partitioner_new(o, &p));
    rd_kafka_conf_t *conf = mock_conf(&r);
    conf_set_ok(conf, "sticky.partitioning.linger.ms", linger);
    rd_kafka_topic_conf_t *tconf = rd_kafka_topic_conf_new();
    rl_kafka_partitioner_install(p, tconf);
    rd_kafka_conf_set_default_topic_conf(conf, tconf);
    rd_kafka_t *rk = new_producer(conf);
    warm_up(rk, topic, 6, -1);
    for (size_t i = 0; i < n; i++)
        produce_named(rk, topic, i % 2 ? "" : NULL, 0, i);
    flush_all(rk);
    memset(counts, 0, 6 * sizeof *counts);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(r.d[i].reported, 1);
        assert_int_equal(r.d[i].err, 0);
        assert_in_range(r.d[i].partition, 0, 5);
        counts[r.d[i].partition]++;
    }
    assert_rl_ok(rl_kafka_partitioner_stats_get(p, st));
    rd_kafka_destroy(rk);
    rl_kafka_partitioner_destroy(p);
    free(r.d);
}

static void null_and_empty_keys(void **state)
{
    (void)state;
    int counts[6];
    rl_kafka_partitioner_stats st;
    rl_kafka_partitioner_options o;
    rl_kafka_partitioner_options_init(&o);

    /* sticky.partitioning.linger.ms=0: NULL and empty keys both reach the callback. */
    o.null_key = RL_KAFKA_NULL_KEY_FIXED;
    o.null_key_partition = 4;
    produce_null_keys(&o, "0", 600, counts, &st);
    assert_int_equal(counts[4], 600);
    assert_int_equal(st.null_keys, 600);

    /* random: 600 messages over 6 partitions, each expecting 100 (sd 9.1); at least 40 on
     * each is far below 4 sd and still shows the spread. */
    rl_kafka_partitioner_options_init(&o);
    produce_null_keys(&o, "0", 600, counts, &st);
    for (int i = 0; i < 6; i++)
        assert_true(counts[i] >= 40);
    assert_int_equal(st.null_keys, 600);

    /* librdkafka's default linger: NULL keys go to its sticky partitioner, never to ours;
     * empty keys still do. */
    o.null_key = RL_KAFKA_NULL_KEY_FIXED;
    o.null_key_partition = 1;
    produce_null_keys(&o, "10", 600, counts, &st);
    assert_int_equal(st.null_keys, 300);
    assert_true(counts[1] >= 300);
}

/* A producer configuration whose partitioner has skip.unavailable `skip` (made in *p), with
 * message.timeout.ms `timeout_ms` when not NULL. */
static rd_kafka_conf_t *skip_conf(run *r, int skip, const char *timeout_ms,
                                  rl_kafka_partitioner_t **p)
{
    rl_kafka_partitioner_options o;
    rl_kafka_partitioner_options_init(&o);
    o.skip_unavailable = skip;
    assert_rl_ok(rl_kafka_partitioner_new(&o, p));
    rd_kafka_conf_t *conf = mock_conf(r);
    rd_kafka_topic_conf_t *tconf = rd_kafka_topic_conf_new();
    char err[256];
    if (timeout_ms)
        assert_int_equal(
            rd_kafka_topic_conf_set(tconf, "message.timeout.ms", timeout_ms, err, sizeof err),
            RD_KAFKA_CONF_OK);
    rl_kafka_partitioner_install(*p, tconf);
    rd_kafka_conf_set_default_topic_conf(conf, tconf);
    return conf;
}

/* Partition 2 has no leader. skip.unavailable on: once it has been unavailable for
 * RL_KAFKA_SKIP_GRACE_MS, its keys go to the next available partition clockwise (the first
 * other entry of the key's preference list); off: they wait for the leader and time out, and
 * every other key is unaffected either way. */
static void skip_unavailable(void **state)
{
    (void)state;
    const size_t n = 600;
    const int32_t down = 2;
    rl_ring_t *ref = ref_partition_ring(RL_KAFKA_DEFAULT_PROFILE, RL_VNODES_PROFILE, 6);
    char key[64];
    for (int skip = 1; skip >= 0; skip--) {
        run r = {.d = calloc(n, sizeof(delivery)), .n = n};
        assert_non_null(r.d);
        rl_kafka_partitioner_t *p;
        rd_kafka_conf_t *conf = skip_conf(&r, skip, "2500", &p);
        char topic[32];
        snprintf(topic, sizeof topic, "degraded-%d", skip);
        create_topic(topic, 6);
        assert_int_equal(rd_kafka_mock_partition_set_leader(mock, topic, down, -1), 0);
        rd_kafka_t *rk = new_producer(conf);
        warm_up(rk, topic, 6, down);
        /* One key of the partition starts its unavailability count; the grace passes. */
        for (size_t i = 0;; i++) {
            size_t len = test_key(1000000 + i, key, sizeof key);
            if (ref_partition(ref, key, len) != down)
                continue;
            produce_named(rk, topic, key, len, (size_t)UINTPTR_MAX);
            break;
        }
        struct timespec grace = {.tv_sec = (RL_KAFKA_SKIP_GRACE_MS + 200) / 1000,
                                 .tv_nsec = (RL_KAFKA_SKIP_GRACE_MS + 200) % 1000 * 1000000L};
        nanosleep(&grace, NULL);
        for (size_t i = 0; i < n; i++) {
            size_t len = test_key(i, key, sizeof key);
            produce_named(rk, topic, key, len, i);
        }
        rd_kafka_flush(rk, FLUSH_MS); /* with skip off, the orphaned messages time out */
        assert_int_equal(rd_kafka_outq_len(rk), 0);
        size_t orphans = 0;
        for (size_t i = 0; i < n; i++) {
            size_t len = test_key(i, key, sizeof key);
            int32_t owner = ref_partition(ref, key, len);
            assert_int_equal(r.d[i].reported, 1);
            if (owner != down) {
                assert_int_equal(r.d[i].err, 0);
                assert_int_equal(r.d[i].partition, owner);
                continue;
            }
            orphans++;
            if (!skip) {
                assert_int_equal(r.d[i].err, RD_KAFKA_RESP_ERR__MSG_TIMED_OUT);
                continue;
            }
            uint32_t list[6];
            size_t got;
            assert_rl_ok(rl_ring_replicas(ref, key, len, list, 6, &got));
            assert_int_equal(list[0], down);
            assert_int_equal(r.d[i].err, 0);
            assert_int_equal(r.d[i].partition, list[1]);
        }
        assert_true(orphans > 50); /* about a sixth of the keys */
        rl_kafka_partitioner_stats st;
        assert_rl_ok(rl_kafka_partitioner_stats_get(p, &st));
        assert_int_equal(st.skipped, skip ? orphans : 0);
        rd_kafka_destroy(rk);
        rl_kafka_partitioner_destroy(p);
        free(r.d);
    }
    rl_ring_free(ref);
}

/* skip.unavailable sees a partition only when one of its keys comes. A key of the leaderless
 * partition 2 starts its count; the next one comes 11 s later, more than 10 x
 * RL_KAFKA_SKIP_GRACE_MS after: the partition may have been available in between (a quiet
 * partition's two short outages are not one long one), so the count starts again and the key
 * waits for its partition, which gets its leader back. The old count, never ended, skipped it
 * at once. */
static void skip_unavailable_forgets_an_old_sighting(void **state)
{
    (void)state;
    const int32_t down = 2;
    rl_ring_t *ref = ref_partition_ring(RL_KAFKA_DEFAULT_PROFILE, RL_VNODES_PROFILE, 6);
    run r = {.d = calloc(2, sizeof(delivery)), .n = 2};
    assert_non_null(r.d);
    rl_kafka_partitioner_t *p;
    rd_kafka_conf_t *conf = skip_conf(&r, 1, NULL, &p);
    const char *topic = "stale-outage";
    create_topic(topic, 6);
    assert_int_equal(rd_kafka_mock_partition_set_leader(mock, topic, down, -1), 0);
    rd_kafka_t *rk = new_producer(conf);
    warm_up(rk, topic, 6, down);
    char key[64];
    size_t len = 0;
    for (size_t i = 0;; i++) {
        len = test_key(2000000 + i, key, sizeof key);
        if (ref_partition(ref, key, len) == down)
            break;
    }
    produce_named(rk, topic, key, len, 0);
    struct timespec quiet = {.tv_sec = 11};
    nanosleep(&quiet, NULL);
    produce_named(rk, topic, key, len, 1);
    assert_int_equal(rd_kafka_mock_partition_set_leader(mock, topic, down, 1), 0);
    flush_all(rk);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(r.d[i].reported, 1);
        assert_int_equal(r.d[i].err, 0);
        assert_int_equal(r.d[i].partition, down);
    }
    rl_kafka_partitioner_stats st;
    assert_rl_ok(rl_kafka_partitioner_stats_get(p, &st));
    assert_int_equal(st.skipped, 0);
    rd_kafka_destroy(rk);
    rl_kafka_partitioner_destroy(p);
    free(r.d);
    rl_ring_free(ref);
}

/* A fresh producer's first burst, every partition with a leader: librdkafka reports the
 * partitions unavailable while it hands them to its broker threads, and the keys it partitions
 * then (the burst was queued before the topic's metadata came) must still go to their ring
 * partitions, as they do with skip.unavailable off. 3,000 keys to 12 partitions right after
 * rd_kafka_new, five fresh producers; before the grace, five trials put 2,240 / 894 / 883 /
 * 214 / 0 keys elsewhere. */
static void skip_unavailable_fresh_burst(void **state)
{
    (void)state;
    const size_t n = 3000;
    rl_ring_t *ref = ref_partition_ring(RL_KAFKA_DEFAULT_PROFILE, RL_VNODES_PROFILE, 12);
    char key[64];
    for (int trial = 0; trial < 5; trial++) {
        run r = {.d = calloc(n, sizeof(delivery)), .n = n};
        assert_non_null(r.d);
        rl_kafka_partitioner_t *p;
        rd_kafka_conf_t *conf = skip_conf(&r, 1, NULL, &p);
        char topic[32];
        snprintf(topic, sizeof topic, "fresh-%d", trial);
        create_topic(topic, 12);
        rd_kafka_t *rk = new_producer(conf);
        for (size_t i = 0; i < n; i++) {
            size_t len = test_key(i, key, sizeof key);
            produce_named(rk, topic, key, len, i);
        }
        flush_all(rk);
        size_t off = 0;
        for (size_t i = 0; i < n; i++) {
            size_t len = test_key(i, key, sizeof key);
            assert_int_equal(r.d[i].reported, 1);
            assert_int_equal(r.d[i].err, 0);
            off += r.d[i].partition != ref_partition(ref, key, len);
        }
        rl_kafka_partitioner_stats st;
        assert_rl_ok(rl_kafka_partitioner_stats_get(p, &st));
        print_message("fresh producer %d: %zu of %zu keys off their ring partition, %llu skipped\n",
                      trial, off, n, (unsigned long long)st.skipped);
        assert_int_equal(off, 0);
        assert_int_equal(st.skipped, 0);
        rd_kafka_destroy(rk);
        rl_kafka_partitioner_destroy(p);
        free(r.d);
    }
    rl_ring_free(ref);
}

/* Several application threads produce at once through one partitioner, to topics of
 * different partition counts that none of them has used before; librdkafka's main thread
 * joins in for the messages queued before the topics' metadata arrived. */
#define PRODUCERS 4
#define PER_THREAD 300

typedef struct producer_thread {
    rd_kafka_t *rk;
    int index;
} producer_thread;

static const int32_t concurrent_counts[] = {5, 7, 11};

static void *produce_from_thread(void *arg)
{
    producer_thread *t = arg;
    char key[64], topic[32];
    for (size_t i = 0; i < PER_THREAD; i++) {
        size_t seq = (size_t)t->index * PER_THREAD + i;
        snprintf(topic, sizeof topic, "concurrent-%d", (int)concurrent_counts[seq % 3]);
        size_t len = test_key(seq, key, sizeof key);
        rd_kafka_resp_err_t err =
            rd_kafka_producev(t->rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, len),
                              RD_KAFKA_V_VALUE("v", 1), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                              RD_KAFKA_V_OPAQUE((void *)(uintptr_t)seq), RD_KAFKA_V_END);
        if (err)
            return (void *)1;
    }
    return NULL;
}

static void concurrent_producers(void **state)
{
    (void)state;
    const size_t n = PRODUCERS * PER_THREAD;
    run r = {.d = calloc(n, sizeof(delivery)), .n = n};
    assert_non_null(r.d);
    rl_kafka_partitioner_t *p;
    assert_rl_ok(rl_kafka_partitioner_new(NULL, &p));
    rd_kafka_conf_t *conf = mock_conf(&r);
    rd_kafka_topic_conf_t *tconf = rd_kafka_topic_conf_new();
    rl_kafka_partitioner_install(p, tconf);
    rd_kafka_conf_set_default_topic_conf(conf, tconf);
    char topic[32];
    for (int c = 0; c < 3; c++) {
        snprintf(topic, sizeof topic, "concurrent-%d", (int)concurrent_counts[c]);
        create_topic(topic, concurrent_counts[c]);
    }
    rd_kafka_t *rk = new_producer(conf);
    pthread_t threads[PRODUCERS];
    producer_thread args[PRODUCERS];
    for (int i = 0; i < PRODUCERS; i++) {
        args[i] = (producer_thread){.rk = rk, .index = i};
        assert_int_equal(pthread_create(&threads[i], NULL, produce_from_thread, &args[i]), 0);
    }
    for (int i = 0; i < PRODUCERS; i++) {
        void *ret;
        assert_int_equal(pthread_join(threads[i], &ret), 0);
        assert_null(ret);
    }
    flush_all(rk);
    rl_ring_t *refs[3];
    for (int c = 0; c < 3; c++)
        refs[c] =
            ref_partition_ring(RL_KAFKA_DEFAULT_PROFILE, RL_VNODES_PROFILE, concurrent_counts[c]);
    char key[64];
    for (size_t seq = 0; seq < n; seq++) {
        size_t len = test_key(seq, key, sizeof key);
        assert_int_equal(r.d[seq].reported, 1);
        assert_int_equal(r.d[seq].err, 0);
        assert_int_equal(r.d[seq].partition, ref_partition(refs[seq % 3], key, len));
    }
    for (int c = 0; c < 3; c++)
        rl_ring_free(refs[c]);
    rl_kafka_partitioner_stats st;
    assert_rl_ok(rl_kafka_partitioner_stats_get(p, &st));
    assert_int_equal(st.rings, 3);
    rd_kafka_destroy(rk);
    rl_kafka_partitioner_destroy(p);
    free(r.d);
}

/* --- the plugin --- */

static const char *plugin_path(void)
{
    const char *path = getenv("RINGLANE_PLUGIN");
    if (!path)
        fail_msg("RINGLANE_PLUGIN is not set (the path of ringlane_partitioner.so)");
    return path;
}

/* Produces KEYS_PER_TOPIC keys to `topic` (count partitions) by name, or through a topic
 * object with a conf of the application's own (murmur2) when own_conf is set, and checks
 * every delivery against the reference ring. */
static void check_plugin_producer(rd_kafka_conf_t *conf, run *r, const char *topic, int32_t count,
                                  int own_conf, const char *profile, uint32_t vnodes)
{
    create_topic(topic, count);
    rd_kafka_t *rk = new_producer(conf);
    rd_kafka_topic_t *rkt = NULL;
    if (own_conf) {
        rd_kafka_topic_conf_t *tc = rd_kafka_topic_conf_new();
        char err[256];
        assert_int_equal(rd_kafka_topic_conf_set(tc, "partitioner", "murmur2", err, sizeof err),
                         RD_KAFKA_CONF_OK);
        rkt = rd_kafka_topic_new(rk, topic, tc);
        assert_non_null(rkt);
    }
    char key[64];
    memset(r->d, 0, r->n * sizeof *r->d);
    for (size_t i = 0; i < KEYS_PER_TOPIC; i++) {
        size_t len = test_key(i, key, sizeof key);
        if (rkt)
            produce_rkt(rkt, key, len, i);
        else
            produce_named(rk, topic, key, len, i);
    }
    flush_all(rk);
    rl_ring_t *ref = ref_partition_ring(profile, vnodes, count);
    for (size_t i = 0; i < KEYS_PER_TOPIC; i++) {
        size_t len = test_key(i, key, sizeof key);
        assert_int_equal(r->d[i].reported, 1);
        assert_int_equal(r->d[i].err, 0);
        assert_int_equal(r->d[i].partition, ref_partition(ref, key, len));
    }
    rl_ring_free(ref);
    if (rkt)
        rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
}

static void plugin_from_c_producer(void **state)
{
    (void)state;
    run r = {.d = calloc(KEYS_PER_TOPIC, sizeof(delivery)), .n = KEYS_PER_TOPIC};
    assert_non_null(r.d);

    /* Defaults. */
    rd_kafka_conf_t *conf = mock_conf(&r);
    conf_set_ok(conf, "plugin.library.paths", plugin_path());
    check_plugin_producer(conf, &r, "plain", 8, 0, RL_KAFKA_DEFAULT_PROFILE, RL_VNODES_PROFILE);

    /* Properties, including topic-level ones set afterwards on the global conf (they go to
     * the default topic conf the plugin put its partitioner on). */
    conf = mock_conf(&r);
    conf_set_ok(conf, "plugin.library.paths", plugin_path());
    conf_set_ok(conf, "ringlane.profile", "ds09");
    conf_set_ok(conf, "ringlane.vnodes", "50");
    conf_set_ok(conf, "ringlane.skip.unavailable", "true");
    conf_set_ok(conf, "ringlane.skip.unavailable", "false"); /* a cold client: see warm_up() */
    conf_set_ok(conf, "ringlane.null.key", "3");
    conf_set_ok(conf, "acks", "all");
    check_plugin_producer(conf, &r, "tuned", 12, 0, "ds09", 50);

    /* plugin.library.paths given twice: the plugin stays loaded once, with its settings. */
    conf = mock_conf(&r);
    conf_set_ok(conf, "plugin.library.paths", plugin_path());
    conf_set_ok(conf, "ringlane.profile", "xmur3");
    conf_set_ok(conf, "plugin.library.paths", plugin_path());
    check_plugin_producer(conf, &r, "twice", 5, 0, "xmur3", RL_VNODES_PROFILE);

    /* ringlane.topics: the application's own topic conf (murmur2) is replaced by the ring for
     * the topics listed. */
    conf = mock_conf(&r);
    conf_set_ok(conf, "plugin.library.paths", plugin_path());
    conf_set_ok(conf, "ringlane.topics", "other,own-conf");
    check_plugin_producer(conf, &r, "own-conf", 7, 1, RL_KAFKA_DEFAULT_PROFILE, RL_VNODES_PROFILE);
    free(r.d);
}

/* Copies of a configuration: with the plugin copied, the copy gets a partitioner of its own
 * with the same properties; with plugin.library.paths filtered out, the copy keeps using the
 * original's. Either way the copy outlives the original. */
static void plugin_conf_copies(void **state)
{
    (void)state;
    run r = {.d = calloc(KEYS_PER_TOPIC, sizeof(delivery)), .n = KEYS_PER_TOPIC};
    assert_non_null(r.d);
    for (int filtered = 0; filtered < 2; filtered++) {
        rd_kafka_conf_t *conf = mock_conf(&r);
        conf_set_ok(conf, "plugin.library.paths", plugin_path());
        conf_set_ok(conf, "ringlane.profile", "ds09");
        conf_set_ok(conf, "ringlane.vnodes", "30");
        const char *filter[] = {"plugin.library.paths"};
        rd_kafka_conf_t *copy =
            filtered ? rd_kafka_conf_dup_filter(conf, 1, filter) : rd_kafka_conf_dup(conf);
        rd_kafka_conf_destroy(conf);
        char err[256];
        /* Only a copy that loaded the plugin knows its properties. */
        assert_int_equal(rd_kafka_conf_set(copy, "ringlane.vnodes", "31", err, sizeof err),
                         filtered ? RD_KAFKA_CONF_UNKNOWN : RD_KAFKA_CONF_OK);
        if (!filtered)
            conf_set_ok(copy, "ringlane.vnodes", "30");
        check_plugin_producer(copy, &r, filtered ? "copied-filtered" : "copied", 9, 0, "ds09", 30);
    }
    free(r.d);
}

/* Every invalid property value is refused with a message naming the property and its range. */
static void plugin_bad_configuration(void **state)
{
    (void)state;
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    /* Before the plugin is loaded librdkafka knows no ringlane property. */
    assert_int_equal(rd_kafka_conf_set(conf, "ringlane.profile", "ds09", err, sizeof err),
                     RD_KAFKA_CONF_UNKNOWN);
    conf_set_ok(conf, "plugin.library.paths", plugin_path());
    char long_topic[300];
    memset(long_topic, 't', 250);
    long_topic[250] = 0;
    const struct {
        const char *name, *value, *says;
    } bad[] = {
        {"ringlane.profile", "nope", "ringlane.profile: unknown profile \"nope\" (valid: "},
        {"ringlane.vnodes", "0", "ringlane.vnodes: expected an integer 1..8388608"},
        {"ringlane.vnodes", "8388609", "ringlane.vnodes: expected an integer 1..8388608"},
        {"ringlane.vnodes", "many", "ringlane.vnodes: expected an integer 1..8388608"},
        {"ringlane.null.key", "sticky",
         "ringlane.null.key: expected \"random\" or a partition number 0..2147483646"},
        {"ringlane.null.key", "-4", "ringlane.null.key: expected"},
        {"ringlane.skip.unavailable", "maybe",
         "ringlane.skip.unavailable: expected true or "
         "false"},
        {"ringlane.topics", "a,,b",
         "ringlane.topics: expected a comma-separated list of topic "
         "names (1..249 characters"},
        {"ringlane.topics", "has space", "ringlane.topics: expected"},
        {"ringlane.topics", long_topic, "ringlane.topics: expected"},
        {"ringlane.topics", "a,", "ringlane.topics: expected"},
        {"ringlane.vnodez", "10",
         "ringlane.vnodez: unknown ringlane property (known: "
         "ringlane.profile, ringlane.vnodes"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        assert_int_equal(rd_kafka_conf_set(conf, bad[i].name, bad[i].value, err, sizeof err),
                         RD_KAFKA_CONF_INVALID);
        if (!strstr(err, bad[i].says))
            fail_msg("%s=%s said \"%s\", wanted \"%s\"", bad[i].name, bad[i].value, err,
                     bad[i].says);
    }
    /* The good values still go through, and other properties are librdkafka's. */
    conf_set_ok(conf, "ringlane.vnodes", "65536");
    conf_set_ok(conf, "ringlane.topics", "a.b_c-D9");
    conf_set_ok(conf, "ringlane.topics", "");
    conf_set_ok(conf, "linger.ms", "1");
    assert_int_equal(rd_kafka_conf_set(conf, "no.such.property", "1", err, sizeof err),
                     RD_KAFKA_CONF_UNKNOWN);
    rd_kafka_conf_destroy(conf);

    /* A plugin path that does not exist is librdkafka's error. */
    conf = rd_kafka_conf_new();
    assert_int_equal(rd_kafka_conf_set(conf, "plugin.library.paths", "/nonexistent/ringlane.so",
                                       err, sizeof err),
                     RD_KAFKA_CONF_INVALID);
    rd_kafka_conf_destroy(conf);
}

static atomic_int replaced_warning;

static void watch_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    (void)level;
    (void)fac;
    if (strstr(buf, "ringlane: the default topic configuration was replaced"))
        atomic_store(&replaced_warning, 1);
}

/* An application that replaces the default topic conf after loading the plugin is told so in
 * librdkafka's log. */
static void plugin_warns_when_default_topic_conf_is_replaced(void **state)
{
    (void)state;
    run r = {0};
    rd_kafka_conf_t *conf = mock_conf(&r);
    rd_kafka_conf_set_log_cb(conf, watch_log);
    conf_set_ok(conf, "plugin.library.paths", plugin_path());
    rd_kafka_conf_set_default_topic_conf(conf, rd_kafka_topic_conf_new());
    atomic_store(&replaced_warning, 0);
    rd_kafka_t *rk = new_producer(conf);
    rd_kafka_destroy(rk);
    assert_int_equal(atomic_load(&replaced_warning), 1);

    conf = mock_conf(&r);
    rd_kafka_conf_set_log_cb(conf, watch_log);
    conf_set_ok(conf, "plugin.library.paths", plugin_path());
    atomic_store(&replaced_warning, 0);
    rk = new_producer(conf);
    rd_kafka_destroy(rk);
    assert_int_equal(atomic_load(&replaced_warning), 0);
}

/* Pairs of properties that cannot give a working ring: refused by whichever comes second, with
 * both named. vnodes set with no profile yet is taken (a profile may follow, in any order); if
 * none that takes it follows, the client says so when it is created and refuses every keyed
 * message. */
static char plugin_log[2048];
static pthread_mutex_t plugin_log_lock = PTHREAD_MUTEX_INITIALIZER;

static void keep_ringlane_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    (void)level;
    (void)fac;
    pthread_mutex_lock(&plugin_log_lock);
    if (strstr(buf, "ringlane") && !plugin_log[0])
        snprintf(plugin_log, sizeof plugin_log, "%s", buf);
    pthread_mutex_unlock(&plugin_log_lock);
}

static void plugin_refuses_pairs(void **state)
{
    (void)state;
    const struct {
        const char *n1, *v1, *n2, *v2, *says;
    } bad[] = {
        {"ringlane.profile", "maglev", "ringlane.vnodes", "1000",
         "ringlane.vnodes: profile maglev takes a prime 2..5000011 (its table size), got 1000"},
        {"ringlane.vnodes", "1000", "ringlane.profile", "maglev",
         "ringlane.profile: \"maglev\" does not go with vnodes 1000: profile maglev takes a prime"},
        {"ringlane.profile", "ketama", "ringlane.vnodes", "3",
         "ringlane.vnodes: profile ketama takes 5..65536 vnodes (points per server at equal "
         "weights: vnodes / 4 labels, none below 5), got 3"},
        {"ringlane.profile", "jump", "ringlane.vnodes", "100",
         "ringlane.vnodes: profile jump has no vnodes"},
        {"ringlane.profile", "jump", "ringlane.skip.unavailable", "true",
         "ringlane.skip.unavailable: profile jump has no ring to walk"},
        {"ringlane.skip.unavailable", "true", "ringlane.profile", "maglev",
         "ringlane.profile: \"maglev\" does not go with skip.unavailable true"},
    };
    char err[512];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        conf_set_ok(conf, "plugin.library.paths", plugin_path());
        conf_set_ok(conf, bad[i].n1, bad[i].v1);
        err[0] = 0;
        assert_int_equal(rd_kafka_conf_set(conf, bad[i].n2, bad[i].v2, err, sizeof err),
                         RD_KAFKA_CONF_INVALID);
        if (!strstr(err, bad[i].says))
            fail_msg("%s=%s after %s=%s said \"%s\", wanted \"%s\"", bad[i].n2, bad[i].v2,
                     bad[i].n1, bad[i].v1, err, bad[i].says);
        rd_kafka_conf_destroy(conf);
    }

    /* vnodes first, then the profile that takes it: the partitioner has both. */
    run r = {.d = calloc(KEYS_PER_TOPIC, sizeof(delivery)), .n = KEYS_PER_TOPIC};
    assert_non_null(r.d);
    rd_kafka_conf_t *conf = mock_conf(&r);
    conf_set_ok(conf, "plugin.library.paths", plugin_path());
    conf_set_ok(conf, "ringlane.vnodes", "100003");
    conf_set_ok(conf, "ringlane.profile", "maglev");
    check_plugin_producer(conf, &r, "pair-late", 6, 0, "maglev", 100003);

    /* vnodes with no profile that takes it: logged at rd_kafka_new, keyed messages refused. */
    conf = mock_conf(&r);
    rd_kafka_conf_set_log_cb(conf, keep_ringlane_log);
    conf_set_ok(conf, "plugin.library.paths", plugin_path());
    conf_set_ok(conf, "ringlane.vnodes", "100003");
    create_topic("pair-never", 4);
    plugin_log[0] = 0;
    rd_kafka_t *rk = new_producer(conf);
    pthread_mutex_lock(&plugin_log_lock);
    if (!strstr(plugin_log, "ringlane.vnodes=100003 without a ringlane.profile that takes it: "
                            "profile balanced takes 1..65536 vnodes, got"))
        fail_msg("rd_kafka_new logged \"%s\"", plugin_log);
    pthread_mutex_unlock(&plugin_log_lock);
    memset(r.d, 0, r.n * sizeof *r.d);
    for (size_t i = 0; i < 20; i++) {
        char key[64];
        size_t len = test_key(i, key, sizeof key);
        rd_kafka_resp_err_t e =
            rd_kafka_producev(rk, RD_KAFKA_V_TOPIC("pair-never"), RD_KAFKA_V_KEY(key, len),
                              RD_KAFKA_V_VALUE("v", 1), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                              RD_KAFKA_V_OPAQUE((void *)(uintptr_t)i), RD_KAFKA_V_END);
        if (e) { /* refused at once (metadata known), or by the delivery report below */
            assert_int_equal(e, RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION);
            r.d[i].reported = 1;
            r.d[i].err = e;
        }
    }
    rd_kafka_flush(rk, FLUSH_MS);
    for (size_t i = 0; i < 20; i++) {
        assert_int_equal(r.d[i].reported, 1);
        assert_int_equal(r.d[i].err, RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION);
    }
    rd_kafka_destroy(rk);
    free(r.d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(delivery_reports_follow_the_ring),
        cmocka_unit_test(null_and_empty_keys),
        cmocka_unit_test(skip_unavailable),
        cmocka_unit_test(skip_unavailable_forgets_an_old_sighting),
        cmocka_unit_test(skip_unavailable_fresh_burst),
        cmocka_unit_test(plugin_refuses_pairs),
        cmocka_unit_test(concurrent_producers),
        cmocka_unit_test(plugin_from_c_producer),
        cmocka_unit_test(plugin_conf_copies),
        cmocka_unit_test(plugin_bad_configuration),
        cmocka_unit_test(plugin_warns_when_default_topic_conf_is_replaced),
    };
    return cmocka_run_group_tests(tests, cluster_up, cluster_down);
}
