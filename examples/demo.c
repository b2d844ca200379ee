/* SPDX-License-Identifier: BSD-2-Clause */
/* ringlane-demo: the whole pipeline in one command.
 *
 *   ringlane-demo [--role all|producer|consumer|cluster] [--bootstrap-servers LIST]
 *                 [--topic T] [--partitions N] [--keys K] [--messages M] [--rate R]
 *                 [--group G] [--name NAME] [--lanes N] [--assignor cooperative-sticky|range]
 *                 [--dlq-topic T] [--work-us U] [--idle-exit S] [--replication-factor F]
 *                 [--session-timeout-ms MS] [--offset-map-max-bytes N] [--cycles N]
 *                 [--record FILE] [--no-progress]
 *
 * Without --bootstrap-servers it starts librdkafka's mock cluster in this process (3 brokers on
 * 127.0.0.1, a topic of 6 partitions): nothing to install. With --role all (the default) a
 * producer writes keyed events "user:<k>" with per-key sequence numbers, placed by the ring
 * partitioner, and two consumers of one group, each with its own dispatcher on its own loop
 * thread, handle them. While events flow it adds a lane, stops one consumer and starts it
 * again (two rebalances), takes a broker down and up, and removes a lane. Every handler checks
 * its key's sequence number. At the end a table says what was produced and handled, the order
 * violations and lost events (both must be 0), the duplicates and why, the keys each change
 * moved, and the throughput. Exit status 0 only when order and completeness hold.
 *
 * --role producer and --role consumer run one side only (docker-compose.yml runs them against
 * a real Kafka cluster). --role cluster runs only librdkafka's mock cluster, for producer and
 * consumer processes of their own: when it is up it prints "ready bootstrap.servers=LIST" on
 * stdout, then takes commands on stdin, one a line ("down N", "up N" for broker N, "topic NAME
 * PARTITIONS", "quit"), and answers each line with one line ("ok ..." or "error ..."); its
 * stdout carries nothing else. --record FILE writes what the process produced, handled and
 * saw committed (the format is in demo.h); the process-cluster test in tests/cluster/ checks
 * those files.
 *
 * A process hosting the mock cluster says why before it dies of an abort: librdkafka's mock
 * coordinator asserts (rd_kafka_mock_cgrp_elect_leader) when a group's members use different
 * partition assignment strategies, e.g. a kcat consumer (range by default) joining a group
 * with a cooperative-sticky member. */
#define _POSIX_C_SOURCE 200809L
#include "demo.h"

#include <librdkafka/rdkafka_mock.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MOCK_BROKERS 3
#define DOWN_BROKER 3 /* the broker taken down (leader of partitions 2, 5, ...) */
#define COORDINATOR 1 /* the group's coordinator, which stays up */
#define SETTLE_TIMEOUT_S 60

uint64_t demo_now_ns(void)
{
    return uv_hrtime();
}

void demo_sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static demo app;

static void on_signal(int sig)
{
    (void)sig;
    atomic_store(&app.stop, true);
}

/* The one abort seen in a process that hosts the mock cluster is librdkafka's mock coordinator
 * asserting (its message is on stderr just before): say what usually causes it, then die of
 * the same signal. Only write(2), signal and raise: async-signal-safe. */
static void on_abort(int sig)
{
    static const char why[] =
        "ringlane-demo: aborted (SIGABRT) in a process hosting librdkafka's mock cluster. The "
        "usual cause: a consumer group whose members use different "
        "partition.assignment.strategy values (e.g. kcat, range by default, joining a group "
        "with a cooperative-sticky member): the mock coordinator asserts in "
        "rd_kafka_mock_cgrp_elect_leader. Give every member of a group the same strategy "
        "(kcat: -X partition.assignment.strategy=cooperative-sticky); see docs/demo.md.\n";
    ssize_t n = write(STDERR_FILENO, why, sizeof why - 1);
    (void)n;
    signal(sig, SIG_DFL);
    raise(sig);
}

static void quiet_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    if (getenv("RINGLANE_DEMO_VERBOSE"))
        fprintf(stderr, "librdkafka: %d %s %s\n", level, fac, buf);
}

static void set(rd_kafka_conf_t *conf, const char *name, const char *value)
{
    char err[256];
    if (rd_kafka_conf_set(conf, name, value, err, sizeof err) != RD_KAFKA_CONF_OK)
        fprintf(stderr, "ringlane-demo: %s=%s: %s\n", name, value, err);
}

rd_kafka_conf_t *demo_consumer_conf(demo *a)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", a->servers);
    set(conf, "group.id", a->group);
    set(conf, "auto.offset.reset", "earliest");
    set(conf, "partition.assignment.strategy", a->assignor);
    set(conf, "fetch.wait.max.ms", a->mock_mode ? "20" : "100");
    if (a->mock_mode)
        set(conf, "topic.metadata.refresh.interval.ms", "1000");
    if (a->session_timeout_ms) {
        /* The mock coordinator waits about session.timeout.ms - 1 s for members to rejoin. */
        char ms[16];
        snprintf(ms, sizeof ms, "%d", a->session_timeout_ms);
        set(conf, "session.timeout.ms", ms);
        int heartbeat = a->session_timeout_ms * 2 / 25; /* 200 ms at 2500 */
        snprintf(ms, sizeof ms, "%d", heartbeat > 100 ? heartbeat : 100);
        set(conf, "heartbeat.interval.ms", ms);
    }
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    return conf;
}

/* --- options --- */

static void usage(FILE *f)
{
    fputs(
        "usage: ringlane-demo [--role all|producer|consumer|cluster] [--bootstrap-servers LIST]\n"
        "         [--topic T] [--partitions N] [--keys K] [--messages M] [--rate R]\n"
        "         [--group G] [--name NAME] [--lanes N] [--assignor cooperative-sticky|range]\n"
        "         [--dlq-topic T] [--work-us U] [--idle-exit S] [--replication-factor F]\n"
        "         [--session-timeout-ms MS] [--offset-map-max-bytes N] [--cycles N]\n"
        "         [--record FILE] [--no-progress] [--key-base B] [--seq-base S]\n"
        "         [--partitions-used N] [--growth-fence]\n"
        "Without --bootstrap-servers: librdkafka's mock cluster (3 brokers) in this process.\n"
        "--role cluster runs only that mock cluster: it prints \"ready bootstrap.servers=LIST\",\n"
        "then reads commands on stdin: down N, up N (broker N), topic NAME PARTITIONS, quit,\n"
        "and answers each line with one line, \"ok ...\" or \"error ...\".\n"
        "--rate 0 produces as fast as possible; --idle-exit S ends a consumer after S\n"
        "seconds without an event, counted from its start (0: run until SIGINT/SIGTERM).\n"
        "--name names a consumer run alone (default consumer-<pid>). --session-timeout-ms\n"
        "sets the group's session timeout (2500 on the mock cluster in this process).\n"
        "--record FILE appends what the process produced, handled and saw committed.\n"
        "--offset-map-max-bytes N sets the consumers' offset map limit (0: no offset map).\n"
        "--cycles N runs the changes N times over the run (for soaks; the table lists the\n"
        "first cycle's).\n"
        "A producer's --key-base B names its keys user:B.. (to split keys between producers),\n"
        "--seq-base S starts each key's sequence numbers at S (a producer that takes over\n"
        "from an earlier one), --partitions-used N routes over the topic's first N partitions\n"
        "(ringlane.partitions.used, for a growth: docs/partition_growth.md). A consumer's\n"
        "--growth-fence turns on its growth fence (growth_fence).\n",
        f);
}

static int parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv)
{
    app.role = "all";
    app.topic = "ringlane.events";
    app.assignor = "cooperative-sticky";
    app.partitions = 6;
    app.keys = 1000;
    app.lanes = 4;
    app.messages = 100000;
    app.rate = 10000;
    app.replication = 1;
    app.cycles = 1;
    app.offset_map_max_bytes = -1;
    app.progress = isatty(2);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n = 0;
        int bad = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--no-progress") == 0) {
            app.progress = false;
            continue;
        } else if (strcmp(a, "--growth-fence") == 0) {
            app.growth_fence = true;
            continue;
        } else if (!v) {
            bad = 1;
        } else if (strcmp(a, "--role") == 0) {
            app.role = v;
            bad = strcmp(v, "all") && strcmp(v, "producer") && strcmp(v, "consumer") &&
                  strcmp(v, "cluster");
        } else if (strcmp(a, "--name") == 0) {
            app.name = v;
            bad = !*v || strlen(v) > 31;
        } else if (strcmp(a, "--record") == 0) {
            app.record = v;
            bad = !*v;
        } else if (strcmp(a, "--offset-map-max-bytes") == 0) {
            bad = parse_long(v, 0, 32767, &app.offset_map_max_bytes);
        } else if (strcmp(a, "--session-timeout-ms") == 0) {
            bad = parse_long(v, 1000, 3600000, &n);
            app.session_timeout_ms = (int)n;
        } else if (strcmp(a, "--bootstrap-servers") == 0) {
            app.servers = v;
        } else if (strcmp(a, "--topic") == 0) {
            app.topic = v;
            bad = !*v;
        } else if (strcmp(a, "--group") == 0) {
            app.group = v;
            bad = !*v;
        } else if (strcmp(a, "--assignor") == 0) {
            app.assignor = v;
        } else if (strcmp(a, "--dlq-topic") == 0) {
            app.dlq_topic = v;
        } else if (strcmp(a, "--partitions") == 0) {
            bad = parse_long(v, 1, DEMO_PARTITIONS_MAX, &n);
            app.partitions = (int)n;
        } else if (strcmp(a, "--keys") == 0) {
            bad = parse_long(v, 1, 1000000, &n);
            app.keys = (int)n;
        } else if (strcmp(a, "--lanes") == 0) {
            bad = parse_long(v, 2, DEMO_LANES_MAX - 1, &n);
            app.lanes = (int)n;
        } else if (strcmp(a, "--messages") == 0) {
            bad = parse_long(v, 1, 1000000000, &app.messages);
        } else if (strcmp(a, "--rate") == 0) {
            bad = parse_long(v, 0, 100000000, &app.rate);
        } else if (strcmp(a, "--work-us") == 0) {
            bad = parse_long(v, 0, 1000000, &n);
            app.work_us = (int)n;
        } else if (strcmp(a, "--idle-exit") == 0) {
            bad = parse_long(v, 0, 86400, &n);
            app.idle_exit_s = (int)n;
        } else if (strcmp(a, "--cycles") == 0) {
            bad = parse_long(v, 1, 100000, &n);
            app.cycles = (int)n;
        } else if (strcmp(a, "--key-base") == 0) {
            bad = parse_long(v, 0, 1000000, &n);
            app.key_base = (int)n;
        } else if (strcmp(a, "--seq-base") == 0) {
            bad = parse_long(v, 0, 1000000000, &app.seq_base);
        } else if (strcmp(a, "--partitions-used") == 0) {
            bad = parse_long(v, 1, DEMO_PARTITIONS_MAX, &n);
            app.partitions_used = (int)n;
        } else if (strcmp(a, "--replication-factor") == 0) {
            bad = parse_long(v, 1, 16, &n);
            app.replication = (int)n;
        } else {
            bad = 1;
        }
        if (bad) {
            fprintf(stderr, "ringlane-demo: bad or incomplete argument '%s'\n", a);
            usage(stderr);
            return -1;
        }
        i++;
    }
    app.mock_mode = app.servers == NULL;
    if (strcmp(app.role, "cluster") == 0 && app.servers) {
        fprintf(stderr,
                "ringlane-demo: --role cluster is the mock cluster: no --bootstrap-servers\n");
        return -1;
    }
    if (app.mock_mode && !app.session_timeout_ms)
        app.session_timeout_ms = 2500;
    for (int i = 0; i < app.lanes; i++) {
        snprintf(app.lane_buf[i], sizeof app.lane_buf[i], "lane-%c", 'a' + i);
        app.lane_names[i] = app.lane_buf[i];
    }
    if (!app.dlq_topic) {
        snprintf(app.dlq_buf, sizeof app.dlq_buf, "%s.dlq", app.topic);
        app.dlq_topic = app.dlq_buf;
    }
    if (!app.group) {
        if (app.mock_mode || strcmp(app.role, "consumer") == 0)
            snprintf(app.group_buf, sizeof app.group_buf, "ringlane-demo");
        else /* a fresh group for each run against a real cluster */
            snprintf(app.group_buf, sizeof app.group_buf, "ringlane-demo-%llx",
                     (unsigned long long)app.run);
        app.group = app.group_buf;
    }
    return 0;
}

/* --- the cluster: mock, or real with the topics created when missing --- */

static rd_kafka_t *mock_host;
static rd_kafka_mock_cluster_t *mock;

static int start_mock(void)
{
    char err[256];
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_abort;
    sigaction(SIGABRT, &sa, NULL);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    mock_host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    mock = mock_host ? rd_kafka_mock_cluster_new(mock_host, MOCK_BROKERS) : NULL;
    if (!mock || rd_kafka_mock_topic_create(mock, app.topic, app.partitions, MOCK_BROKERS) ||
        rd_kafka_mock_topic_create(mock, app.dlq_topic, 1, MOCK_BROKERS)) {
        fprintf(stderr, "ringlane-demo: cannot start the mock cluster\n");
        return -1;
    }
    /* Leaders round the brokers, so that the broker taken down leads some partitions; the
     * group's coordinator stays on a broker that stays up. */
    for (int p = 0; p < app.partitions; p++)
        rd_kafka_mock_partition_set_leader(mock, app.topic, p, p % MOCK_BROKERS + 1);
    rd_kafka_mock_coordinator_set(mock, "group", app.group, COORDINATOR);
    app.servers = rd_kafka_mock_cluster_bootstraps(mock);
    return 0;
}

static rd_kafka_t *admin_client(void)
{
    char err[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", app.servers);
    /* Asking for a missing topic's metadata must not create it with the broker's defaults. */
    set(conf, "allow.auto.create.topics", "false");
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk)
        fprintf(stderr, "ringlane-demo: %s\n", err);
    return rk;
}

static int create_topic(rd_kafka_t *rk, const char *topic, int partitions)
{
    char err[256];
    rd_kafka_NewTopic_t *nt =
        rd_kafka_NewTopic_new(topic, partitions, app.replication, err, sizeof err);
    if (!nt) {
        fprintf(stderr, "ringlane-demo: topic %s: %s\n", topic, err);
        return -1;
    }
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 10000);
    int rc = -1;
    const rd_kafka_CreateTopics_result_t *res = ev ? rd_kafka_event_CreateTopics_result(ev) : NULL;
    if (res) {
        size_t n = 0;
        const rd_kafka_topic_result_t **t = rd_kafka_CreateTopics_result_topics(res, &n);
        rd_kafka_resp_err_t e = n ? rd_kafka_topic_result_error(t[0]) : rd_kafka_event_error(ev);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR || e == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
            rc = 0;
        else
            fprintf(stderr, "ringlane-demo: create topic %s: %s\n", topic, rd_kafka_err2str(e));
    } else {
        fprintf(stderr, "ringlane-demo: create topic %s: no answer in 10 s\n", topic);
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
    return rc;
}

/* The topic's partition count from the cluster, -1 when unknown. */
static int partition_count(rd_kafka_t *rk, const char *topic)
{
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    int n = -1;
    if (rkt && rd_kafka_metadata(rk, 0, rkt, &md, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        if (md->topic_cnt == 1 && !md->topics[0].err)
            n = md->topics[0].partition_cnt;
        rd_kafka_metadata_destroy(md);
    }
    if (rkt)
        rd_kafka_topic_destroy(rkt);
    return n;
}

/* The producer's and the whole demo's topics, on a real cluster: made when missing. A consumer
 * alone (--role consumer) makes none and waits for nothing: it subscribes, and the group hands
 * it partitions once the topic exists (docker-compose.yml creates the topics first). */
static int prepare_real_cluster(void)
{
    if (strcmp(app.role, "consumer") == 0)
        return 0;
    rd_kafka_t *rk = admin_client();
    if (!rk)
        return -1;
    /* Existing topics are asked for first, so that a cluster that never answers a creation
     * (librdkafka's mock cluster, in a process of its own) holds nobody back. A failed
     * creation is not the end: the cluster may create the topic on first use; its partition
     * count decides. */
    int n = partition_count(rk, app.topic);
    if (n < 1) {
        create_topic(rk, app.topic, app.partitions);
        n = partition_count(rk, app.topic);
    }
    if (strcmp(app.role, "producer") != 0 && partition_count(rk, app.dlq_topic) < 1) {
        create_topic(rk, app.dlq_topic, 1);
        partition_count(rk, app.dlq_topic);
    }
    rd_kafka_destroy(rk);
    if (n < 1 || n > DEMO_PARTITIONS_MAX) {
        fprintf(stderr, "ringlane-demo: cannot learn the partitions of %s\n", app.topic);
        return -1;
    }
    app.partitions = n; /* an existing topic keeps its own count */
    return 0;
}

static int64_t high_watermark(rd_kafka_t *rk, const char *topic, int partitions)
{
    int64_t sum = 0;
    for (int p = 0; p < partitions; p++) {
        int64_t low = 0, high = 0;
        if (rd_kafka_query_watermark_offsets(rk, topic, p, &low, &high, 10000))
            return -1;
        sum += high;
    }
    return sum;
}

/* --- progress --- */

typedef struct change {
    char what[64];
    char moved[160];
    long dup_phase;
} change;

/* changes[1..nchanges] are the first cycle's; the last row counts every later cycle's. */
static change changes[DEMO_PHASES_MAX];
static int nchanges;
static change *cur = &changes[0];
static long later_changes;
static const char *phase_name = "starting";
static uint64_t t0;
static demo_producer prod;
static demo_consumer cons[DEMO_CONSUMERS];
static bool cons_running[DEMO_CONSUMERS];
static uint64_t last_line;

static void progress(bool force)
{
    uint64_t now = demo_now_ns();
    if (!force && now - last_line < (app.progress ? 100000000u : 2000000000u))
        return;
    last_line = now;
    long produced = atomic_load(&prod.delivered);
    long unique = atomic_load(&app.check.unique);
    long total = app.messages;
    double frac = total ? (double)unique / (double)total : 0;
    if (frac > 1)
        frac = 1;
    char bar[41];
    int fill = (int)(frac * 40);
    for (int i = 0; i < 40; i++)
        bar[i] = i < fill ? '#' : '-';
    bar[40] = '\0';
    char line[256];
    snprintf(line, sizeof line,
             "[%s] %3.0f%%  produced %ld  handled %ld  dup %ld  violations %ld  %5.1fs  %s", bar,
             frac * 100, produced, unique, atomic_load(&app.check.duplicates),
             atomic_load(&app.check.violations), (double)(now - t0) / 1e9, phase_name);
    if (app.progress)
        fprintf(stderr, "\r%-120.120s", line);
    else
        fprintf(stderr, "%s\n", line);
}

static void progress_done(void)
{
    if (app.progress)
        fprintf(stderr, "\n");
}

/* Waits ms milliseconds, keeping the progress line fresh; stops early on a signal. */
static void wait_ms(unsigned ms)
{
    uint64_t end = demo_now_ns() + (uint64_t)ms * 1000000u;
    while (demo_now_ns() < end && !atomic_load(&app.stop)) {
        progress(false);
        demo_sleep_ms(20);
    }
}

/* --- who owns what --- */

static void owners(int *out)
{
    uv_mutex_lock(&app.mu);
    memcpy(out, app.owner, sizeof app.owner);
    uv_mutex_unlock(&app.mu);
}

/* Every partition owned, each running consumer holding at least one (when there are enough
 * partitions), and the holdings adding up. */
static bool settled(void)
{
    int own[DEMO_PARTITIONS_MAX];
    owners(own);
    int held = 0, running = 0;
    for (int i = 0; i < DEMO_CONSUMERS; i++) {
        if (!cons_running[i])
            continue;
        running++;
        int n = demo_consumer_assigned(&cons[i]);
        if (n == 0 && app.partitions >= running)
            return false;
        held += n;
    }
    for (int p = 0; p < app.partitions; p++)
        if (own[p] < 0)
            return false;
    return held == app.partitions;
}

static bool wait_settled(void)
{
    uint64_t end = demo_now_ns() + (uint64_t)SETTLE_TIMEOUT_S * 1000000000u;
    while (!settled() && demo_now_ns() < end && !atomic_load(&app.stop)) {
        progress(false);
        demo_sleep_ms(20);
    }
    return settled();
}

/* Keys whose partition changed owner between two snapshots. */
static int keys_moved(const int *before, const int *after, int *partitions_moved)
{
    int moved = 0, pm = 0;
    for (int p = 0; p < app.partitions; p++)
        pm += before[p] != after[p];
    for (int k = 0; k < app.keys; k++) {
        int32_t p = 0;
        demo_producer_partition(&prod, k, app.partitions, &p);
        moved += before[p] != after[p];
    }
    *partitions_moved = pm;
    return moved;
}

/* Keys whose lane changes when the dispatcher's lanes go from `from` to `to` (the same ring the
 * dispatcher builds: the lane names, weight 1, the default profile). */
static int lane_keys_moved(const char *const *from, size_t nfrom, const char *const *to, size_t nto)
{
    rl_member mf[DEMO_LANES_MAX], mt[DEMO_LANES_MAX];
    for (size_t i = 0; i < nfrom; i++)
        mf[i] = (rl_member){.name = from[i], .weight = 1};
    for (size_t i = 0; i < nto; i++)
        mt[i] = (rl_member){.name = to[i], .weight = 1};
    rl_ring_t *a = NULL, *b = NULL;
    int moved = -1;
    if (rl_ring_build(mf, nfrom, NULL, &a) == 0 && rl_ring_build(mt, nto, NULL, &b) == 0) {
        moved = 0;
        char key[32];
        for (int k = 0; k < app.keys; k++) {
            int len = demo_key(k, key, sizeof key);
            uint32_t na = 0, nb = 0;
            rl_ring_lookup(a, key, (size_t)len, &na);
            rl_ring_lookup(b, key, (size_t)len, &nb);
            moved += strcmp(rl_ring_node_name(a, na), rl_ring_node_name(b, nb)) != 0;
        }
    }
    rl_ring_free(a);
    rl_ring_free(b);
    return moved;
}

static void begin_change(const char *what, int cycle)
{
    static char name[64];
    snprintf(name, sizeof name, "%s", what);
    phase_name = name;
    if (cycle == 0 && nchanges + 2 < DEMO_PHASES_MAX) {
        cur = &changes[++nchanges];
        snprintf(cur->what, sizeof cur->what, "%s", what);
        atomic_store(&app.check.phase, nchanges);
    } else {
        cur = &changes[DEMO_PHASES_MAX - 1];
        later_changes++;
        snprintf(cur->what, sizeof cur->what, "%ld changes of later cycles", later_changes);
        atomic_store(&app.check.phase, DEMO_PHASES_MAX - 1);
    }
    progress(true);
}

/* --- the run --- */

static const char *cur_lanes[DEMO_LANES_MAX];
static size_t ncur_lanes;

static void change_lane(bool add, const char *lane, int cycle)
{
    char what[64];
    snprintf(what, sizeof what, "%s lane %s (consumer-1)", add ? "add" : "remove", lane);
    begin_change(what, cycle);
    const char *next[DEMO_LANES_MAX];
    size_t n = 0;
    for (size_t i = 0; i < ncur_lanes; i++)
        if (add || strcmp(cur_lanes[i], lane) != 0)
            next[n++] = cur_lanes[i];
    if (add)
        next[n++] = lane;
    int moved = lane_keys_moved(cur_lanes, ncur_lanes, next, n);
    int rc = demo_consumer_command(&cons[0], add ? DEMO_CMD_ADD_LANE : DEMO_CMD_REMOVE_LANE, lane);
    if (rc == 0) {
        memcpy(cur_lanes, next, n * sizeof *next);
        ncur_lanes = n;
    }
    if (rc)
        snprintf(cur->moved, sizeof cur->moved, "failed: %s", rl_strerror(rc));
    else
        snprintf(cur->moved, sizeof cur->moved,
                 "%d of %d keys change lane (%.1f%%), their queued events with them", moved,
                 app.keys, 100.0 * moved / app.keys);
}

static bool consumer_change(bool stop, int cycle)
{
    begin_change(stop ? "stop consumer-2" : "start consumer-2 again", cycle);
    int before[DEMO_PARTITIONS_MAX], after[DEMO_PARTITIONS_MAX];
    owners(before);
    if (stop) {
        demo_consumer_stop(&cons[1]);
        cons_running[1] = false;
    } else {
        int rc = demo_consumer_start(&cons[1], &app, 1);
        if (rc) {
            fprintf(stderr, "\nringlane-demo: consumer-2: %s\n", rl_strerror(rc));
            return false;
        }
        cons_running[1] = true;
    }
    bool ok = wait_settled();
    owners(after);
    int pm = 0, moved = keys_moved(before, after, &pm);
    snprintf(cur->moved, sizeof cur->moved, "%d of %d keys (%d partition%s) move %s consumer-1",
             moved, app.keys, pm, pm == 1 ? "" : "s", stop ? "to" : "back from");
    if (!ok)
        snprintf(cur->moved, sizeof cur->moved, "the group did not settle in %d s",
                 SETTLE_TIMEOUT_S);
    return ok;
}

static void broker_change(bool down, int cycle)
{
    char what[64];
    snprintf(what, sizeof what, "broker %d %s", DOWN_BROKER, down ? "down" : "up");
    begin_change(what, cycle);
    if (down)
        rd_kafka_mock_broker_set_down(mock, DOWN_BROKER);
    else
        rd_kafka_mock_broker_set_up(mock, DOWN_BROKER);
    int waiting = 0, parts = 0;
    for (int p = 0; p < app.partitions; p++)
        parts += p % MOCK_BROKERS + 1 == DOWN_BROKER;
    for (int k = 0; k < app.keys; k++) {
        int32_t p = 0;
        demo_producer_partition(&prod, k, app.partitions, &p);
        waiting += p % MOCK_BROKERS + 1 == DOWN_BROKER;
    }
    if (down)
        snprintf(cur->moved, sizeof cur->moved,
                 "0: the %d keys of its %d partitions wait for their leader", waiting, parts);
    else
        snprintf(cur->moved, sizeof cur->moved,
                 "0: those keys flow again, from where they stopped");
}

static double produced_fraction(void)
{
    return (double)atomic_load(&prod.enqueued) / (double)app.messages;
}

/* Waits until the producer has sent `frac` of the events (or has finished). */
static void wait_produced(double frac)
{
    while (produced_fraction() < frac && !atomic_load(&prod.done) && !atomic_load(&app.stop)) {
        progress(false);
        demo_sleep_ms(10);
    }
}

static long total_dead_letters(void)
{
    long n = 0;
    for (int i = 0; i < DEMO_CONSUMERS; i++) {
        if (!cons_running[i])
            continue;
        uv_mutex_lock(&cons[i].mu);
        n += cons[i].dead_letters;
        uv_mutex_unlock(&cons[i].mu);
    }
    return n;
}

static long dead_letters_seen;            /* by consumers that were stopped meanwhile */
static rl_consumer_stats first_run_stats; /* consumer-2 before its restarts */

static void stopped_stats_add(const rl_consumer_stats *s)
{
    rl_consumer_stats *t = &first_run_stats;
    t->consumed += s->consumed;
    t->commits += s->commits;
    t->commit_failures += s->commit_failures;
    t->pauses += s->pauses;
    t->assigned += s->assigned;
    t->revoked += s->revoked;
    t->dead_lettered += s->dead_lettered;
}

static void print_summary(int64_t dlq_before, int64_t dlq_after, double seconds, bool drained)
{
    demo_check *ck = &app.check;
    long missing = demo_check_missing(ck, prod.per_key);
    long dups = atomic_load(&ck->duplicates);
    double handle_s = (double)(atomic_load(&ck->last_ns) - atomic_load(&ck->first_ns)) / 1e9;
    long unique = atomic_load(&ck->unique);
    printf("\n== ringlane demo: %s, topic %s (%d partitions), %d keys, group %s (%s) ==\n",
           app.mock_mode ? "librdkafka's mock cluster, 3 brokers" : app.servers, app.topic,
           app.partitions, app.keys, app.group, app.assignor);
    printf("  %-22s %ld keyed events (+ 3: a poison event, one without a key, one with a "
           "5000-byte key)\n",
           "produced", app.messages);
    printf("  %-22s %ld delivered, %ld failed\n", "producer", atomic_load(&prod.delivered),
           atomic_load(&prod.failed));
    printf("  %-22s %ld events (%ld handler calls incl. duplicates), %ld without a key (handled "
           "by partition)\n",
           "handled", unique, atomic_load(&ck->handled), atomic_load(&ck->keyless));
    printf("  %-22s %ld  (each key's sequence checked in every handler)\n", "order violations",
           atomic_load(&ck->violations));
    printf("  %-22s %ld  (two handlers with one key at once)\n", "overlaps",
           atomic_load(&ck->overlaps));
    printf("  %-22s %ld%s\n", "lost", missing, drained ? "" : "  (the run did not drain)");
    uint64_t refused = first_run_stats.commit_failures;
    for (int c = 0; c < DEMO_CONSUMERS; c++)
        refused += cons[c].stats.commit_failures;
    printf("  %-22s %ld", "duplicates", dups);
    if (dups)
        printf("  redelivered (at-least-once): a partition's new owner starts at the last "
               "commit the group accepted, and %" PRIu64 " commits were refused while the "
               "group rebalanced",
               refused);
    printf("\n");
    for (int i = 0; i < DEMO_PHASES_MAX; i++) {
        long d = atomic_load(&ck->dup_in_phase[i]);
        if (d)
            printf("  %-22s   %ld after: %s\n", "", d, i ? changes[i].what : "start");
    }
    long dead = dead_letters_seen + total_dead_letters();
    printf("  %-22s %ld (the poison event after %d handler calls, the oversized key); "
           "%s holds %" PRId64 " new\n",
           "dead-lettered", dead, 3, app.dlq_topic,
           dlq_after >= 0 && dlq_before >= 0 ? dlq_after - dlq_before : -1);
    printf("  %-22s %.0f events/s handled (%ld in %.1f s; the producer's pace: %s)\n", "throughput",
           handle_s > 0 ? (double)unique / handle_s : 0.0, unique, handle_s,
           app.rate ? "--rate" : "unlimited");
    printf("  %-22s %.1f s\n", "run time", seconds);
    printf("\n  %-34s keys moved\n", "change");
    for (int i = 1; i <= nchanges; i++)
        if (changes[i].moved[0])
            printf("  %-34s %s\n", changes[i].what, changes[i].moved);
    if (later_changes)
        printf("  %-34s (%d cycles in all; the last: %s)\n", changes[DEMO_PHASES_MAX - 1].what,
               app.cycles, changes[DEMO_PHASES_MAX - 1].moved);
    printf("\n  %-12s %10s %8s %8s %8s %8s %8s %8s\n", "consumer", "consumed", "commits", "refused",
           "pauses", "assigned", "revoked", "dead");
    for (int i = 0; i <= DEMO_CONSUMERS; i++) {
        const rl_consumer_stats *s = i < DEMO_CONSUMERS ? &cons[i].stats : &first_run_stats;
        printf("  %-12s %10" PRIu64 " %8" PRIu64 " %8" PRIu64 " %8" PRIu64 " %8" PRIu64 " %8" PRIu64
               " %8" PRIu64 "\n",
               i < DEMO_CONSUMERS ? cons[i].name : "consumer-2*", s->consumed, s->commits,
               s->commit_failures, s->pauses, s->assigned, s->revoked, s->dead_lettered);
    }
    printf("  (consumer-2* is consumer-2 before it was stopped%s)\n",
           app.cycles > 1 ? ", all its runs" : "");
}

static int run_all(void)
{
    demo_check *ck = &app.check;
    rd_kafka_t *admin = admin_client();
    int64_t dlq_before = admin ? high_watermark(admin, app.dlq_topic, 1) : -1;
    for (int i = 0; i < app.lanes; i++)
        cur_lanes[i] = app.lane_names[i];
    ncur_lanes = (size_t)app.lanes;
    snprintf(changes[0].what, sizeof changes[0].what, "start");

    /* The producer starts once both consumers hold their partitions. */
    phase_name = "two consumers join the group";
    for (int i = 0; i < DEMO_CONSUMERS; i++) {
        int rc = demo_consumer_start(&cons[i], &app, i);
        if (rc) {
            fprintf(stderr, "ringlane-demo: %s: %s\n", cons[i].name, rl_strerror(rc));
            return 1;
        }
        cons_running[i] = true;
    }
    if (!wait_settled()) {
        fprintf(stderr, "\nringlane-demo: the group did not form in %d s\n", SETTLE_TIMEOUT_S);
        for (int i = 0; i < DEMO_CONSUMERS; i++) {
            char line[400];
            demo_consumer_describe(&cons[i], line, sizeof line);
            fprintf(stderr, "  %s\n", line);
        }
        return 1;
    }
    phase_name = "events flowing";
    if (demo_producer_start(&prod, &app, true) != 0)
        return 1;

    /* The change script, once per cycle over the run. Cycles alternate between adding lane-e
     * and removing lane-b, and adding lane-b back and removing lane-e. */
    bool ok = true;
    for (int c = 0; ok && c < app.cycles && !atomic_load(&app.stop); c++) {
        double base = (double)c / app.cycles, span = 1.0 / app.cycles;
        const char *add = c % 2 ? "lane-b" : "lane-e", *remove = c % 2 ? "lane-e" : "lane-b";
        wait_produced(base + 0.10 * span);
        change_lane(true, add, c);
        wait_produced(base + 0.25 * span);
        ok = consumer_change(true, c);
        /* Bank what consumer-2 counted before it went. */
        dead_letters_seen += cons[1].dead_letters;
        stopped_stats_add(&cons[1].stats);
        if (ok) {
            wait_produced(base + 0.40 * span);
            ok = consumer_change(false, c);
        }
        if (ok && app.mock_mode) {
            wait_produced(base + 0.55 * span);
            broker_change(true, c);
            wait_ms(1500);
            broker_change(false, c);
        }
        if (ok) {
            wait_produced(base + 0.85 * span);
            change_lane(false, remove, c);
        }
    }
    begin_change("drain", 0);
    demo_producer_join(&prod);
    /* Everything produced must arrive; the time limit only ends a run that lost events. */
    uint64_t last_change = demo_now_ns();
    long last_unique = -1;
    while (!atomic_load(&app.stop)) {
        long u = atomic_load(&ck->unique);
        if (u >= app.messages && total_dead_letters() + dead_letters_seen >= 2 &&
            atomic_load(&ck->keyless) >= 1)
            break;
        if (u != last_unique) {
            last_unique = u;
            last_change = demo_now_ns();
        } else if (demo_now_ns() - last_change > 20000000000u) {
            break; /* 20 s without progress */
        }
        progress(false);
        demo_sleep_ms(20);
    }
    progress(true);
    progress_done();
    bool drained = atomic_load(&ck->unique) >= app.messages;
    for (int i = 0; i < DEMO_CONSUMERS; i++) {
        if (!cons_running[i])
            continue;
        uv_mutex_lock(&cons[i].mu);
        long d = cons[i].dead_letters;
        uv_mutex_unlock(&cons[i].mu);
        demo_consumer_stop(&cons[i]);
        cons_running[i] = false;
        dead_letters_seen += d;
    }
    int64_t dlq_after = admin ? high_watermark(admin, app.dlq_topic, 1) : -1;
    if (admin)
        rd_kafka_destroy(admin);
    print_summary(dlq_before, dlq_after, (double)(demo_now_ns() - t0) / 1e9, drained);

    long missing = demo_check_missing(ck, prod.per_key);
    bool pass = ok && drained && missing == 0 && atomic_load(&ck->violations) == 0 &&
                atomic_load(&ck->overlaps) == 0 && atomic_load(&prod.failed) == 0 &&
                dead_letters_seen >= 2 && dlq_after - dlq_before >= 2 &&
                atomic_load(&ck->keyless) >= 1;
    printf("\n  result: %s\n",
           pass ? "per-key order and completeness hold (exit 0)" : "FAILED: see above (exit 1)");
    demo_producer_free(&prod);
    return pass ? 0 : 1;
}

static int run_producer(void)
{
    if (demo_producer_start(&prod, &app, true) != 0)
        return 1;
    while (!atomic_load(&prod.done) && !atomic_load(&app.stop)) {
        if (!app.progress || demo_now_ns() - last_line > 2000000000u) {
            last_line = demo_now_ns();
            fprintf(stderr, "producer: %ld of %ld sent, %ld delivered\n",
                    atomic_load(&prod.enqueued), app.messages, atomic_load(&prod.delivered));
        }
        demo_sleep_ms(50);
    }
    demo_producer_join(&prod);
    printf("producer: %ld keyed events to %s, %ld delivered, %ld failed (%.1f s)\n", app.messages,
           app.topic, atomic_load(&prod.delivered), atomic_load(&prod.failed),
           (double)(demo_now_ns() - t0) / 1e9);
    int rc = atomic_load(&prod.failed) == 0 && !atomic_load(&app.stop) ? 0 : 1;
    demo_producer_free(&prod);
    return rc;
}

/* --role cluster: the mock cluster alone, steered by commands on stdin. Every line read is
 * answered by one line on stdout, so that a program driving it never waits for an answer that
 * does not come. */
static int run_cluster(void)
{
    printf("ready bootstrap.servers=%s\n", app.servers);
    fflush(stdout);
    char line[512];
    while (!atomic_load(&app.stop) && fgets(line, sizeof line, stdin)) {
        if (!strchr(line, '\n') && !feof(stdin)) {
            int ch; /* the rest of a line too long to be a command */
            while ((ch = getchar()) != EOF && ch != '\n')
                ;
            printf("error %.40s...: line too long\n", line);
            fflush(stdout);
            continue;
        }
        char cmd[16] = "", name[256] = "";
        int n = 0, fields = sscanf(line, "%15s %255s %d", cmd, name, &n);
        int broker = fields >= 2 ? atoi(name) : 0;
        rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR__INVALID_ARG;
        if (fields < 1) {
            ; /* an empty line: answered as an error below */
        } else if (strcmp(cmd, "quit") == 0) {
            printf("ok quit\n");
            fflush(stdout);
            break;
        } else if ((strcmp(cmd, "down") == 0 || strcmp(cmd, "up") == 0) && fields == 2 &&
                   broker >= 1 && broker <= MOCK_BROKERS) {
            err = strcmp(cmd, "down") == 0 ? rd_kafka_mock_broker_set_down(mock, broker)
                                           : rd_kafka_mock_broker_set_up(mock, broker);
        } else if (strcmp(cmd, "topic") == 0 && fields == 3 && n >= 1 && n <= DEMO_PARTITIONS_MAX) {
            err = rd_kafka_mock_topic_create(mock, name, n, MOCK_BROKERS);
        }
        line[strcspn(line, "\r\n")] = '\0';
        if (err)
            printf("error %s: %s\n", *line ? line : "(empty line)",
                   err == RD_KAFKA_RESP_ERR__INVALID_ARG
                       ? "expected down N, up N (N = 1..3), topic NAME PARTITIONS or quit"
                       : rd_kafka_err2str(err));
        else
            printf("ok %s\n", line);
        fflush(stdout);
    }
    return 0;
}

static int run_consumer(void)
{
    demo_check *ck = &app.check;
    int rc = demo_consumer_start(&cons[0], &app, 0);
    if (rc) {
        fprintf(stderr, "ringlane-demo: consumer: %s\n", rl_strerror(rc));
        return 1;
    }
    cons_running[0] = true;
    uint64_t last_progress = demo_now_ns();
    long last = 0;
    while (!atomic_load(&app.stop)) {
        long h = atomic_load(&ck->handled);
        uint64_t now = demo_now_ns();
        if (h != last) {
            last = h;
            last_progress = now;
        } else if (app.idle_exit_s &&
                   now - last_progress > (uint64_t)app.idle_exit_s * 1000000000u) {
            /* Idle since the last event, or since the start when there was none. */
            break;
        }
        if (now - last_line > 5000000000u) {
            last_line = now;
            fprintf(stderr, "%s: handled %ld (%ld duplicates, %ld violations), %d partitions\n",
                    cons[0].name, atomic_load(&ck->unique), atomic_load(&ck->duplicates),
                    atomic_load(&ck->violations), demo_consumer_assigned(&cons[0]));
        }
        demo_sleep_ms(100);
    }
    demo_consumer_command(&cons[0], DEMO_CMD_STATS, NULL);
    char json[sizeof cons[0].stats_json];
    memcpy(json, cons[0].stats_json, sizeof json);
    demo_consumer_stop(&cons[0]);
    printf("%s: handled %ld events (%ld handler calls), %ld duplicates, %ld order violations, "
           "%ld overlaps, %ld without a key, %ld dead letters, %ld foreign\n",
           cons[0].name, atomic_load(&ck->unique), atomic_load(&ck->handled),
           atomic_load(&ck->duplicates), atomic_load(&ck->violations), atomic_load(&ck->overlaps),
           atomic_load(&ck->keyless), cons[0].dead_letters, atomic_load(&ck->foreign));
    printf("statistics: %s\n", json);
    return atomic_load(&ck->violations) == 0 && atomic_load(&ck->overlaps) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    t0 = demo_now_ns();
    app.run = (uint64_t)time(NULL) << 20 ^ (uint64_t)getpid() ^ (t0 & 0xfffff);
    app.record_fd = -1;
    if (parse_args(argc, argv) != 0)
        return 2;
    if (app.record) {
        app.record_fd = open(app.record, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (app.record_fd < 0) {
            fprintf(stderr, "ringlane-demo: --record %s: cannot open it\n", app.record);
            return 2;
        }
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    uv_mutex_init(&app.mu);
    for (int p = 0; p < DEMO_PARTITIONS_MAX; p++)
        app.owner[p] = -1;
    bool consumer_role = strcmp(app.role, "consumer") == 0;
    /* A consumer on its own cannot know what other processes handled: its check restarts
     * for a key whenever the key's partition comes to it (and accepts any run's events). */
    if (demo_check_init(&app.check, app.keys, consumer_role ? 0 : app.run, consumer_role) != 0)
        return 1;
    atomic_store(&app.check.work_us, app.work_us);

    if (app.mock_mode ? start_mock() : prepare_real_cluster())
        return 1;
    bool cluster_role = strcmp(app.role, "cluster") == 0;
    if (app.mock_mode) /* --role cluster keeps stdout for its answers */
        fprintf(cluster_role ? stderr : stdout,
                "mock cluster: %d brokers on %s; topic %s: %d partitions (leaders on brokers "
                "1..3)\n",
                MOCK_BROKERS, app.servers, app.topic, app.partitions);
    if (!consumer_role && !cluster_role)
        printf("producer: %ld events over keys user:%d..user:%d at %ld/s (0: unlimited) to %s\n",
               app.messages, app.key_base, app.key_base + app.keys - 1, app.rate, app.topic);
    if (strcmp(app.role, "producer") != 0 && !cluster_role)
        printf("consumers: group %s, %s, %d lanes each (%s..lane-%c), dead letters to %s\n",
               app.group, app.assignor, app.lanes, app.lane_names[0], 'a' + app.lanes - 1,
               app.dlq_topic);
    fflush(stdout);

    if (app.record_fd >= 0) {
        const char *who = strcmp(app.role, "producer") == 0 ? "producer" : app.role;
        if (consumer_role)
            who = app.name ? app.name : NULL;
        if (who)
            demo_record(&app, "N %" PRIu64 " %s %ld", demo_now_ns(), who, (long)getpid());
        else
            demo_record(&app, "N %" PRIu64 " consumer-%ld %ld", demo_now_ns(), (long)getpid(),
                        (long)getpid());
    }

    int rc;
    if (cluster_role)
        rc = run_cluster();
    else if (strcmp(app.role, "producer") == 0)
        rc = run_producer();
    else if (consumer_role)
        rc = run_consumer();
    else
        rc = run_all();

    if (mock) {
        rd_kafka_mock_cluster_destroy(mock);
        rd_kafka_destroy(mock_host);
    }
    demo_check_free(&app.check);
    uv_mutex_destroy(&app.mu);
    if (app.record_fd >= 0)
        close(app.record_fd);
    return rc;
}
