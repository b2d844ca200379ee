/* SPDX-License-Identifier: BSD-2-Clause */
/* The ring partitioner while the cluster has a bad day: a keyed produce burst on librdkafka's
 * mock cluster (3 brokers, a topic of 12 partitions with the leaders the mock picks) while
 * leaders move, the busiest broker goes down and comes back (named leader all along, as the
 * mock does, or with its partitions leaderless, as a real cluster with replication factor 1
 * shows it), Produce requests answer errors, or a broker answers slowly; each with
 * skip.unavailable off and on, through the C API and through the plugin loaded by
 * configuration.
 *
 * An independent checker reads every delivery report and then the topic itself, and proves:
 *
 * - every delivered message is on its key's partition on a ring built here with the public
 *   ring API (the ring `ringlane route --partitions 12` builds), or, with skip.unavailable on,
 *   on the documented fallback: the first partition of the key's preference list
 *   (rl_ring_replicas) that the case did not leave without a leader;
 * - nothing is lost: every message has exactly one delivery report, a failed one names its
 *   error, and every delivered message is in the log at the offset its report gave (but
 *   those the mock let librdkafka report without an offset: see acked_unwritten, counted);
 * - with enable.idempotence on, each partition's log holds each key's messages in the order
 *   they were produced, and no message twice. With it off, librdkafka promises neither when it
 *   retries (max.in.flight 1,000,000 by default): the inversions and duplicates are counted.
 *
 * One line per case, "pfault | ... |", a row of docs/partitioner.md's table. The keys of the
 * messages are drawn from a seeded stream (RINGLANE_PFAULT_SEED, default 1); timing is printed,
 * never judged. RINGLANE_PFAULT_ONLY=text runs the cases whose line holds the text.
 */
#define _POSIX_C_SOURCE 200809L
#include "kafka_test_util.h"

#include <inttypes.h>
#include <pthread.h>

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLOW_BUILD 1
#else
#define SLOW_BUILD 0
#endif

/* The Kafka protocol's ApiKeys (librdkafka's rdkafka_protocol.h is not installed). */
enum { API_PRODUCE = 0 };

#define PARTITIONS 12
#define BROKERS 3
#define KEYS 600
#define MESSAGES (SLOW_BUILD ? 3000 : 6000) /* per case, spread evenly over the burst */
#define BURST_MS 2400
#define FLUSH_MS 30000
#define READ_MS 20000
#define MAX_STAGES 8

/* --- the cases --- */

typedef enum fault_kind {
    F_LEADER_MOVES,       /* three partitions' leaders move at a time, four times */
    F_BROKER_DOWN,        /* the busiest broker down, then up; the mock keeps it the leader */
    F_LEADERLESS,         /* the busiest broker down, its partitions without a leader */
    F_PRODUCE_ERRORS,     /* Produce answers NOT_LEADER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS */
    F_SLOW_BROKER,        /* broker 1 answers 500 ms late */
    F_OUTAGE_PAST_TIMEOUT /* F_LEADERLESS for longer than message.timeout.ms */
} fault_kind;

typedef struct fault {
    const char *name;
    fault_kind kind;
    const char *message_timeout_ms;
} fault;

static const fault faults[] = {
    {"leader moves", F_LEADER_MOVES, "30000"},
    {"broker down, leader kept", F_BROKER_DOWN, "30000"},
    {"broker down, leaderless", F_LEADERLESS, "30000"},
    {"Produce errors", F_PRODUCE_ERRORS, "30000"},
    {"slow broker", F_SLOW_BROKER, "30000"},
    {"leaderless past message.timeout.ms", F_OUTAGE_PAST_TIMEOUT, "1000"},
};

typedef struct scenario {
    const fault *fault;
    int plugin;      /* loaded by plugin.library.paths, else rl_kafka_partitioner_install */
    int skip;        /* skip.unavailable */
    int idempotence; /* enable.idempotence */
} scenario;

/* --- the mock cluster --- */

static rd_kafka_t *mock_host;
static rd_kafka_mock_cluster_t *mock;
static uint64_t seed = 1;

static int cluster_up(void **state)
{
    (void)state;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    char err[512];
    mock_host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!mock_host)
        return -1;
    mock = rd_kafka_mock_cluster_new(mock_host, BROKERS);
    return mock ? 0 : -1;
}

static int cluster_down(void **state)
{
    (void)state;
    rd_kafka_mock_cluster_destroy(mock);
    rd_kafka_destroy(mock_host);
    return 0;
}

/* --- what the producer was told --- */

typedef struct message {
    uint32_t key;  /* index of the key */
    uint32_t kseq; /* the key's sequence number */
    float at_ms;   /* when it was produced, into the burst */
    int32_t partition;
    int64_t offset;
    rd_kafka_resp_err_t err;
    int reports;
} message;

typedef struct burst {
    message *m;
    size_t n;
} burst;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *rm, void *opaque)
{
    (void)rk;
    burst *b = opaque;
    size_t i = (size_t)(uintptr_t)rm->_private;
    if (i >= b->n)
        return; /* a warm-up message */
    b->m[i].partition = rm->partition;
    b->m[i].offset = rm->offset;
    b->m[i].err = rm->err;
    b->m[i].reports++;
}

/* --- the faults, staged on the producing thread at their time into the burst --- */

typedef struct topic_state {
    char name[48];
    int32_t leader[PARTITIONS]; /* as the case set them */
} topic_state;

/* The broker that leads the most partitions (the lowest id of a tie). */
static int busiest_broker(const topic_state *t)
{
    int count[BROKERS + 1] = {0}, best = 1;
    for (int32_t p = 0; p < PARTITIONS; p++)
        count[t->leader[p]]++;
    for (int b = 2; b <= BROKERS; b++)
        if (count[b] > count[best])
            best = b;
    return best;
}

typedef struct stage {
    int at_ms;
    int (*act)(topic_state *t, int arg); /* 0, or the mock's error */
    int arg;
} stage;

/* Moves the leaders of partitions arg, arg+4, arg+8 to the next broker. */
static int move_leaders(topic_state *t, int arg)
{
    int err = 0;
    for (int32_t p = arg; p < PARTITIONS; p += 4) {
        t->leader[p] = t->leader[p] % BROKERS + 1;
        err |= rd_kafka_mock_partition_set_leader(mock, t->name, p, t->leader[p]);
    }
    return err;
}

static int broker_down(topic_state *t, int broker)
{
    (void)t;
    return rd_kafka_mock_broker_set_down(mock, broker);
}

static int broker_up(topic_state *t, int broker)
{
    (void)t;
    return rd_kafka_mock_broker_set_up(mock, broker);
}

/* A broker's death as a real cluster with replication factor 1 shows it: down, and the
 * partitions it led without a leader. */
static int broker_gone(topic_state *t, int broker)
{
    int err = broker_down(t, broker);
    for (int32_t p = 0; p < PARTITIONS; p++)
        if (t->leader[p] == broker)
            err |= rd_kafka_mock_partition_set_leader(mock, t->name, p, -1);
    return err;
}

static int broker_back(topic_state *t, int broker)
{
    int err = 0;
    for (int32_t p = 0; p < PARTITIONS; p++)
        if (t->leader[p] == broker)
            err |= rd_kafka_mock_partition_set_leader(mock, t->name, p, broker);
    return err | broker_up(t, broker);
}

/* The next nine Produce requests, to any broker, answer these errors (all retriable). */
static int produce_errors(topic_state *t, int arg)
{
    (void)t;
    (void)arg;
    rd_kafka_mock_push_request_errors(
        mock, API_PRODUCE, 9, RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
        RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
        RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION, RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
        RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS, RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
        RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS);
    return 0;
}

static int broker_slow(topic_state *t, int rtt_ms)
{
    (void)t;
    return rd_kafka_mock_broker_set_rtt(mock, 1, rtt_ms);
}

/* The stages of a fault; unavailable[p] is set for the partitions it leaves without a leader. */
static size_t stages_of(fault_kind kind, const topic_state *t, stage *s, int *unavailable)
{
    memset(unavailable, 0, PARTITIONS * sizeof *unavailable);
    switch (kind) {
    case F_LEADER_MOVES:
        s[0] = (stage){200, move_leaders, 0};
        s[1] = (stage){600, move_leaders, 1};
        s[2] = (stage){1000, move_leaders, 2};
        s[3] = (stage){1400, move_leaders, 0}; /* partitions 0, 4, 8 move again */
        return 4;
    case F_BROKER_DOWN:
        s[0] = (stage){250, broker_down, busiest_broker(t)};
        s[1] = (stage){1500, broker_up, busiest_broker(t)};
        return 2;
    case F_LEADERLESS:
    case F_OUTAGE_PAST_TIMEOUT: {
        int broker = busiest_broker(t);
        for (int32_t p = 0; p < PARTITIONS; p++)
            unavailable[p] = t->leader[p] == broker;
        /* Past the timeout: back 1.2 s after the burst, when its last messages have timed
         * out (message.timeout.ms 1,000) unless they went elsewhere. */
        s[0] = (stage){250, broker_gone, broker};
        s[1] = (stage){kind == F_LEADERLESS ? 2200 : BURST_MS + 1200, broker_back, broker};
        return 2;
    }
    case F_PRODUCE_ERRORS:
        s[0] = (stage){200, produce_errors, 0};
        s[1] = (stage){800, produce_errors, 0};
        s[2] = (stage){1400, produce_errors, 0};
        return 3;
    case F_SLOW_BROKER:
        s[0] = (stage){250, broker_slow, 500};
        s[1] = (stage){1500, broker_slow, 0};
        return 2;
    }
    return 0;
}

/* --- the producer --- */

static const char *plugin_path(void)
{
    const char *path = getenv("RINGLANE_PLUGIN");
    if (!path)
        fail_msg("RINGLANE_PLUGIN is not set (the path of ringlane_partitioner.so)");
    return path;
}

/* A producer for the case; *part receives the partitioner of the C API (NULL for the plugin,
 * whose partitioner lives inside the client). */
static rd_kafka_t *new_producer(const scenario *sc, burst *b, rl_kafka_partitioner_t **part)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    *part = NULL;
    if (sc->plugin) {
        conf_set_ok(conf, "plugin.library.paths", plugin_path());
        conf_set_ok(conf, "ringlane.profile", RL_KAFKA_DEFAULT_PROFILE);
        conf_set_ok(conf, "ringlane.skip.unavailable", sc->skip ? "true" : "false");
    } else {
        rl_kafka_partitioner_options o;
        rl_kafka_partitioner_options_init(&o);
        o.skip_unavailable = sc->skip;
        assert_rl_ok(rl_kafka_partitioner_new(&o, part));
        rd_kafka_topic_conf_t *tconf = rd_kafka_topic_conf_new();
        assert_rl_ok(rl_kafka_partitioner_install(*part, tconf));
        rd_kafka_conf_set_default_topic_conf(conf, tconf);
    }
    /* Set after the default topic conf is in place: topic-level properties go to it. */
    conf_set_ok(conf, "bootstrap.servers", rd_kafka_mock_cluster_bootstraps(mock));
    conf_set_ok(conf, "linger.ms", "5");
    conf_set_ok(conf, "enable.idempotence", sc->idempotence ? "true" : "false");
    conf_set_ok(conf, "message.timeout.ms", sc->fault->message_timeout_ms);
    /* librdkafka's default (10 s) lets a client wait up to that long to reconnect to a broker
     * that was down for 2 s (a case then took 10.3 s); bounded here to keep the suite short. */
    conf_set_ok(conf, "reconnect.backoff.max.ms", "1000");
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    rd_kafka_conf_set_opaque(conf, b);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk)
        fail_msg("rd_kafka_new: %s", err);
    return rk;
}

/* One message to each partition, by number, so that the burst meets a client that knows the
 * topic (a fresh client's first burst is test_kafka_mock's skip_unavailable_fresh_burst); then
 * the leaders the mock chose, from the client's metadata. They are read, not set: librdkafka
 * 2.0.2's mock thread, idle between cases, takes up to a second to answer each of the first
 * few requests such as rd_kafka_mock_partition_set_leader (2-3 s per topic). */
static void warm_up(rd_kafka_t *rk, topic_state *t)
{
    const char *topic = t->name;
    for (int32_t p = 0; p < PARTITIONS; p++) {
        rd_kafka_resp_err_t err =
            rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(p),
                              RD_KAFKA_V_VALUE("w", 1), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                              RD_KAFKA_V_OPAQUE((void *)UINTPTR_MAX), RD_KAFKA_V_END);
        if (err)
            fail_msg("producev: %s", rd_kafka_err2str(err));
    }
    if (rd_kafka_flush(rk, FLUSH_MS) != 0)
        fail_msg("warm-up: %d messages not delivered", rd_kafka_outq_len(rk));
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    assert_int_equal(rd_kafka_metadata(rk, 0, rkt, &md, 10000), 0);
    assert_int_equal(md->topic_cnt, 1);
    assert_int_equal(md->topics[0].partition_cnt, PARTITIONS);
    for (int i = 0; i < PARTITIONS; i++) {
        const rd_kafka_metadata_partition_t *mp = &md->topics[0].partitions[i];
        assert_in_range(mp->id, 0, PARTITIONS - 1);
        assert_in_range(mp->leader, 1, BROKERS);
        t->leader[mp->id] = mp->leader;
    }
    rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
}

static void sleep_ms(double ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
                          .tv_nsec = (long)((ms - (double)(long)(ms / 1000) * 1000) * 1e6)};
    nanosleep(&ts, NULL);
}

/* The stages, run on a thread of their own at their time: a call into the mock can take a
 * second (see warm_up), and the burst must go on meanwhile. */
typedef struct stager {
    topic_state *t;
    const stage *s;
    size_t n;
    double t0;
    int err; /* the first stage's error, read after the join */
} stager;

static void *run_stages(void *arg)
{
    stager *st = arg;
    for (size_t i = 0; i < st->n; i++) {
        sleep_ms(st->s[i].at_ms - (now_s() - st->t0) * 1000);
        int err = st->s[i].act(st->t, st->s[i].arg);
        if (err && !st->err)
            st->err = err;
    }
    return NULL;
}

/* Produces the burst, message i at i * BURST_MS / n into it, while the stages run; returns when
 * the burst and the stages are done. */
static void produce_burst(rd_kafka_t *rk, topic_state *t, burst *b, const stage *s, size_t ns)
{
    char key[64], value[24];
    stager st = {t, s, ns, now_s(), 0};
    double t0 = st.t0;
    pthread_t stage_thread;
    assert_int_equal(pthread_create(&stage_thread, NULL, run_stages, &st), 0);
    for (size_t i = 0; i <= b->n; i++) {
        double due_ms = i < b->n ? (double)i * BURST_MS / (double)b->n : BURST_MS;
        for (;;) {
            double at = (now_s() - t0) * 1000;
            rd_kafka_poll(rk, 0);
            if (at >= due_ms)
                break;
            sleep_ms(due_ms - at < 2 ? due_ms - at : 2);
        }
        if (i == b->n)
            break;
        b->m[i].at_ms = (float)((now_s() - t0) * 1000);
        size_t len = test_key(b->m[i].key, key, sizeof key);
        int vlen = snprintf(value, sizeof value, "%zu", i);
        for (;;) {
            rd_kafka_resp_err_t err = rd_kafka_producev(
                rk, RD_KAFKA_V_TOPIC(t->name), RD_KAFKA_V_KEY(key, len),
                RD_KAFKA_V_VALUE(value, (size_t)vlen), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                RD_KAFKA_V_OPAQUE((void *)(uintptr_t)i), RD_KAFKA_V_END);
            if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                rd_kafka_poll(rk, 10);
                continue;
            }
            if (err)
                fail_msg("producev: %s", rd_kafka_err2str(err));
            break;
        }
    }
    assert_int_equal(pthread_join(stage_thread, NULL), 0);
    if (st.err)
        fail_msg("%s: a stage of the fault failed: %s", t->name,
                 rd_kafka_err2str((rd_kafka_resp_err_t)st.err));
}

/* --- the checker --- */

typedef struct outcome {
    size_t delivered, on_ring, on_fallback, fallback_deeper, failed, off_route;
    size_t skipped;          /* messages put on a partition other than their key's owner */
    float first_fallback_ms; /* when the first message that went to a fallback was produced */
    size_t in_log, log_duplicates, inversions, missing_from_log, failed_but_written;
    /* Reported delivered without an offset and in no log: librdkafka's implicit ack of a
     * request refused while a later one was written, which the mock of 2.0.2 allows (it checks
     * the sequence numbers of transactional producers only; a broker answers
     * OUT_OF_ORDER_SEQUENCE_NUMBER to the later one). Counted apart, never with a real offset. */
    size_t acked_unwritten;
    rd_kafka_resp_err_t codes[4];
    size_t code_count[4];
    size_t ncodes;
} outcome;

static void count_code(outcome *o, rd_kafka_resp_err_t err)
{
    for (size_t i = 0; i < o->ncodes; i++)
        if (o->codes[i] == err) {
            o->code_count[i]++;
            return;
        }
    if (o->ncodes < 4) {
        o->codes[o->ncodes] = err;
        o->code_count[o->ncodes++] = 1;
    }
}

/* Reads the whole topic back with a consumer of its own and checks each record against the
 * delivery reports: found where its report said, per key in order on each partition. */
static void read_back(const char *topic, burst *b, outcome *o)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    conf_set_ok(conf, "bootstrap.servers", rd_kafka_mock_cluster_bootstraps(mock));
    conf_set_ok(conf, "group.id", "pfault-reader");
    conf_set_ok(conf, "enable.auto.commit", "false");
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk)
        fail_msg("rd_kafka_new (consumer): %s", err);
    int64_t high[PARTITIONS], next[PARTITIONS];
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(PARTITIONS);
    for (int32_t p = 0; p < PARTITIONS; p++) {
        int64_t low;
        assert_int_equal(rd_kafka_query_watermark_offsets(rk, topic, p, &low, &high[p], 10000), 0);
        next[p] = 0;
        rd_kafka_topic_partition_list_add(parts, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    }
    assert_int_equal(rd_kafka_assign(rk, parts), 0);
    rd_kafka_topic_partition_list_destroy(parts);

    uint8_t *seen = calloc(b->n, 1);
    int64_t *last = malloc(sizeof(int64_t) * PARTITIONS * KEYS); /* a key's last kseq */
    assert_non_null(seen);
    assert_non_null(last);
    for (size_t i = 0; i < (size_t)PARTITIONS * KEYS; i++)
        last[i] = -1;
    double deadline = now_s() + READ_MS / 1000.0;
    for (;;) {
        int done = 1;
        for (int32_t p = 0; p < PARTITIONS; p++)
            done &= next[p] >= high[p];
        if (done)
            break;
        if (now_s() > deadline)
            fail_msg("%s: the log was not read back within %d ms", topic, READ_MS);
        rd_kafka_message_t *rm = rd_kafka_consumer_poll(rk, 100);
        if (!rm)
            continue;
        if (rm->err || rm->partition < 0 || rm->partition >= PARTITIONS) {
            rd_kafka_message_destroy(rm);
            continue;
        }
        int32_t p = rm->partition;
        next[p] = rm->offset + 1;
        char value[24] = "";
        memcpy(value, rm->payload, rm->len < sizeof value - 1 ? rm->len : sizeof value - 1);
        if (strcmp(value, "w") != 0) {
            size_t i = (size_t)strtoull(value, NULL, 10);
            assert_true(i < b->n);
            message *m = &b->m[i];
            if (seen[i]++)
                o->log_duplicates++;
            else if (m->err)
                o->failed_but_written++;
            else if (m->partition != p || m->offset != rm->offset)
                fail_msg("%s: message %zu in the log at %d/%" PRId64 ", reported at %d/%" PRId64,
                         topic, i, (int)p, rm->offset, (int)m->partition, m->offset);
            o->in_log++;
            int64_t *k = &last[(size_t)p * KEYS + m->key];
            if ((int64_t)m->kseq <= *k)
                o->inversions++;
            else
                *k = m->kseq;
        }
        rd_kafka_message_destroy(rm);
    }
    for (size_t i = 0; i < b->n; i++)
        if (!b->m[i].err && !seen[i] && b->m[i].offset == RD_KAFKA_OFFSET_INVALID)
            o->acked_unwritten++;
        else if (!b->m[i].err && !seen[i] && o->missing_from_log++ < 5)
            print_message("%s: message %zu reported delivered at %d/%" PRId64
                          " is not in the log (high watermark %" PRId64 ")\n",
                          topic, i, (int)b->m[i].partition, b->m[i].offset,
                          b->m[i].partition >= 0 ? high[b->m[i].partition] : -1);
    free(last);
    free(seen);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
}

static const char *yes_no(int on)
{
    return on ? "on" : "off";
}

static void run_case(const scenario *sc, int index)
{
    double started = now_s();
    topic_state t;
    snprintf(t.name, sizeof t.name, "pfault-%d", index);
    assert_int_equal(rd_kafka_mock_topic_create(mock, t.name, PARTITIONS, BROKERS), 0);

    /* The keys, drawn from the seeded stream; each key's messages numbered in order. */
    burst b = {.m = calloc(MESSAGES, sizeof(message)), .n = MESSAGES};
    uint32_t *kseq = calloc(KEYS, sizeof *kseq);
    assert_non_null(b.m);
    assert_non_null(kseq);
    uint64_t rs = seed * 1000003u + (uint64_t)index;
    for (size_t i = 0; i < b.n; i++) {
        b.m[i].key = (uint32_t)(test_rand(&rs) % KEYS);
        b.m[i].kseq = kseq[b.m[i].key]++;
        b.m[i].partition = RD_KAFKA_PARTITION_UA;
    }

    /* Where each key must go: its owner on the reference ring, and with skip.unavailable its
     * fallback, the first partition of its preference list the case leaves available. */
    rl_kafka_partitioner_t *part;
    rd_kafka_t *rk = new_producer(sc, &b, &part);
    warm_up(rk, &t);
    stage stages[MAX_STAGES];
    int unavailable[PARTITIONS];
    size_t nstages = stages_of(sc->fault->kind, &t, stages, unavailable);

    rl_ring_t *ref = ref_partition_ring(RL_KAFKA_DEFAULT_PROFILE, RL_VNODES_PROFILE, PARTITIONS);
    int32_t owner[KEYS], fallback[KEYS];
    char key[64];
    for (uint32_t k = 0; k < KEYS; k++) {
        size_t len = test_key(k, key, sizeof key);
        owner[k] = ref_partition(ref, key, len);
        uint32_t list[PARTITIONS];
        size_t got = 0;
        assert_rl_ok(rl_ring_replicas(ref, key, len, list, PARTITIONS, &got));
        assert_int_equal(got, PARTITIONS);
        assert_int_equal(list[0], owner[k]);
        fallback[k] = owner[k];
        for (size_t j = 0; j < got; j++)
            if (!unavailable[list[j]]) {
                fallback[k] = (int32_t)list[j];
                break;
            }
        if (fallback[k] != owner[k] && fallback[k] != (int32_t)list[1])
            fallback[k] = -1 - fallback[k]; /* marks "deeper than the first other entry" */
    }
    rl_ring_free(ref);

    produce_burst(rk, &t, &b, stages, nstages);
    rd_kafka_flush(rk, FLUSH_MS);
    assert_int_equal(rd_kafka_outq_len(rk), 0);
    rl_kafka_partitioner_stats st = {0};
    if (part)
        assert_rl_ok(rl_kafka_partitioner_stats_get(part, &st));
    rd_kafka_destroy(rk);
    rl_kafka_partitioner_destroy(part);

    outcome o = {0};
    for (size_t i = 0; i < b.n; i++) {
        message *m = &b.m[i];
        if (m->reports != 1)
            fail_msg("%s: message %zu has %d delivery reports", t.name, i, m->reports);
        int32_t want = owner[m->key];
        int32_t fb = fallback[m->key] < 0 ? -1 - fallback[m->key] : fallback[m->key];
        int on_owner = m->partition == want;
        int on_fallback = sc->skip && fb != want && m->partition == fb;
        o.skipped += m->partition != want && m->partition != RD_KAFKA_PARTITION_UA;
        if (m->err) {
            o.failed++;
            count_code(&o, m->err);
        } else {
            o.delivered++;
            o.on_ring += on_owner;
            o.on_fallback += on_fallback;
            o.fallback_deeper += on_fallback && fallback[m->key] < 0;
            if (on_fallback && (o.on_fallback == 1 || m->at_ms < o.first_fallback_ms))
                o.first_fallback_ms = m->at_ms;
        }
        if (!on_owner && !on_fallback && m->partition != RD_KAFKA_PARTITION_UA) {
            if (o.off_route++ < 5)
                print_message("%s: message %zu (key %u) on partition %d, ring says %d, "
                              "fallback %d, %s\n",
                              t.name, i, m->key, (int)m->partition, (int)want, (int)fb,
                              m->err ? rd_kafka_err2name(m->err) : "delivered");
        }
    }
    read_back(t.name, &b, &o);

    char codes[160] = "none";
    size_t used = 0;
    for (size_t c = 0; c < o.ncodes && used < sizeof codes; c++) {
        int n = snprintf(codes + used, sizeof codes - used, "%s`%s` x%zu", c ? ", " : "",
                         rd_kafka_err2name(o.codes[c]), o.code_count[c]);
        used += n > 0 ? (size_t)n : 0;
    }
    char fell[96] = "0";
    if (o.on_fallback)
        snprintf(fell, sizeof fell, "%zu (%zu past the next; from %.1f s after the fault)",
                 o.on_fallback, o.fallback_deeper,
                 (o.first_fallback_ms - (float)stages[0].at_ms) / 1000);
    printf("pfault | %s | %s | %s | %s | %zu | %zu | %zu | %s | %zu | %s | %zu | %zu | %zu | "
           "%.1f s |\n",
           sc->plugin ? "plugin" : "C API", sc->fault->name, yes_no(sc->skip),
           yes_no(sc->idempotence), b.n, o.delivered, o.on_ring, fell, o.failed, codes,
           o.acked_unwritten, o.inversions, o.log_duplicates, now_s() - started);
    fflush(stdout);

    /* Nothing lost: one report each (above), failures named, every delivery in the log. */
    assert_int_equal(o.delivered + o.failed, b.n);
    assert_int_equal(o.missing_from_log, 0);
    /* Every message on its ring partition or, with skip.unavailable, its fallback. */
    assert_int_equal(o.off_route, 0);
    assert_int_equal(o.on_ring + o.on_fallback, o.delivered);
    if (part)
        assert_int_equal(st.skipped, o.skipped);
    if (!sc->skip)
        assert_int_equal(o.on_fallback, 0);
    /* Order and no duplicates: librdkafka's promise with idempotence only. */
    if (!sc->idempotence)
        assert_int_equal(o.acked_unwritten, 0);
    if (sc->idempotence) {
        assert_int_equal(o.inversions, 0);
        assert_int_equal(o.log_duplicates, 0);
    }
    /* Only an outage longer than message.timeout.ms may fail messages, and only by time. */
    if (sc->fault->kind != F_OUTAGE_PAST_TIMEOUT)
        assert_int_equal(o.failed, 0);
    for (size_t c = 0; c < o.ncodes; c++)
        assert_int_equal(o.codes[c], RD_KAFKA_RESP_ERR__MSG_TIMED_OUT);
    free(kseq);
    free(b.m);
}

static int selected(const scenario *sc)
{
    const char *only = getenv("RINGLANE_PFAULT_ONLY");
    if (!only || !*only)
        return 1;
    char line[160];
    snprintf(line, sizeof line, "%s | %s | skip %s | idempotence %s",
             sc->plugin ? "plugin" : "C API", sc->fault->name, yes_no(sc->skip),
             yes_no(sc->idempotence));
    return strstr(line, only) != NULL;
}

static void run_matrix(const scenario *cases, size_t n)
{
    static int index;
    printf("pfault | route | fault | skip.unavailable | idempotence | sent | delivered | on ring "
           "partition | on fallback | failed | error codes | delivered at offset -1001, not in "
           "the log (mock) | per-key inversions | duplicates in log | took |\n");
    for (size_t i = 0; i < n; i++)
        if (selected(&cases[i]))
            run_case(&cases[i], index++);
}

#define FAULT(i) (&faults[i])

/* Every fault, skip.unavailable off and on, through rl_kafka_partitioner_install. */
static void c_api_faults(void **state)
{
    (void)state;
    scenario cases[2 * sizeof faults / sizeof *faults];
    size_t n = 0;
    for (size_t f = 0; f < sizeof faults / sizeof *faults; f++)
        for (int skip = 0; skip < 2; skip++)
            cases[n++] = (scenario){FAULT(f), 0, skip, 1};
    run_matrix(cases, n);
}

/* The plugin, loaded by configuration, under the faults that touch routing. */
static void plugin_faults(void **state)
{
    (void)state;
    scenario cases[] = {
        {FAULT(0), 1, 0, 1},
        {FAULT(0), 1, 1, 1},
        {FAULT(2), 1, 0, 1},
        {FAULT(2), 1, 1, 1},
    };
    run_matrix(cases, sizeof cases / sizeof *cases);
}

/* enable.idempotence off: routing still holds; order and duplicates are counted, not judged. */
static void without_idempotence(void **state)
{
    (void)state;
    scenario cases[] = {{FAULT(3), 0, 0, 0}, {FAULT(2), 0, 1, 0}};
    run_matrix(cases, sizeof cases / sizeof *cases);
}

int main(void)
{
    const char *s = getenv("RINGLANE_PFAULT_SEED");
    if (s && *s)
        seed = strtoull(s, NULL, 10);
    printf("pfault: seed %" PRIu64 " (RINGLANE_PFAULT_SEED repeats it), librdkafka %s\n", seed,
           rd_kafka_version_str());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(c_api_faults),
        cmocka_unit_test(plugin_faults),
        cmocka_unit_test(without_idempotence),
    };
    return cmocka_run_group_tests(tests, cluster_up, cluster_down);
}
