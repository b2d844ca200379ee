/* SPDX-License-Identifier: BSD-2-Clause */
/* `ringlane grow` on librdkafka's mock cluster, running the real binary (RINGLANE_CLI) against
 * a cluster in this process. The mock cluster (librdkafka 2.0.2) cannot add partitions or
 * create topics, so each topic is made here with its final count and `--from P` records the
 * growth of a topic whose producers used P of them, as an operator with pre-created
 * partitions does; __ringlane_growth is made here too. What the mock cannot show (fencing by
 * transactional id, CreatePartitions, CreateTopics, transaction markers) is listed in
 * docs/partition_growth.md, "How it is tested". */
#define _POSIX_C_SOURCE 200809L
#include "test_util.h"

#include "growth_record.h"
#include "kafka_test_util.h"

#include <fcntl.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct cluster {
    rd_kafka_t *host;
    rd_kafka_mock_cluster_t *mock;
    const char *bootstraps;
} cluster;

static cluster *cluster_new_brokers(const char *topic, int partitions, int brokers);

static cluster *cluster_new(const char *topic, int partitions)
{
    return cluster_new_brokers(topic, partitions, 1);
}

static cluster *cluster_new_brokers(const char *topic, int partitions, int brokers)
{
    cluster *c = calloc(1, sizeof *c);
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    c->host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    assert_non_null(c->host);
    c->mock = rd_kafka_mock_cluster_new(c->host, brokers);
    assert_non_null(c->mock);
    c->bootstraps = rd_kafka_mock_cluster_bootstraps(c->mock);
    assert_int_equal(rd_kafka_mock_topic_create(c->mock, topic, partitions, 1), 0);
    assert_int_equal(rd_kafka_mock_topic_create(c->mock, RL__GROWTH_TOPIC, 1, 1), 0);
    return c;
}

static void cluster_free(cluster *c)
{
    rd_kafka_mock_cluster_destroy(c->mock);
    rd_kafka_destroy(c->host);
    free(c);
}

/* Writes n messages to one partition of the topic (key, value: NULL for a tombstone), with
 * CreateTime timestamp_ms (0: now). */
static void produce_at(const cluster *c, const char *topic, int32_t partition, int n,
                       const char *key, const char *value, int64_t timestamp_ms);

static void produce(const cluster *c, const char *topic, int32_t partition, int n, const char *key,
                    const char *value)
{
    produce_at(c, topic, partition, n, key, value, 0);
}

static void produce_at(const cluster *c, const char *topic, int32_t partition, int n,
                       const char *key, const char *value, int64_t timestamp_ms)
{
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    conf_set_ok(conf, "bootstrap.servers", c->bootstraps);
    rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    assert_non_null(p);
    for (int i = 0; i < n; i++) {
        char k[64];
        snprintf(k, sizeof k, "user:%d:%d", (int)partition, i);
        const char *kk = key ? key : k;
        assert_int_equal(
            rd_kafka_producev(p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
                              RD_KAFKA_V_KEY(kk, strlen(kk)),
                              RD_KAFKA_V_VALUE((void *)value, value ? strlen(value) : 0),
                              RD_KAFKA_V_TIMESTAMP(timestamp_ms),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
            0);
    }
    assert_int_equal(rd_kafka_flush(p, 10000), 0);
    rd_kafka_destroy(p);
}

typedef struct run_result {
    char *out, *err;
    int status;
} run_result;

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t cap = 4096, n = 0, got;
    char *buf = malloc(cap);
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0)
        if ((n += got) == cap - 1)
            buf = realloc(buf, cap *= 2);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* A run of "ringlane grow --bootstrap-servers <cluster> <args>" in a child process. */
typedef struct child {
    pid_t pid;
    char out[64], err[64];
} child;

static child start(const cluster *c, const char *args)
{
    const char *cli = getenv("RINGLANE_CLI");
    assert_non_null(cli);
    child ch;
    close(temp_file(ch.out, sizeof ch.out, "grow-out"));
    close(temp_file(ch.err, sizeof ch.err, "grow-err"));
    char *cmd = malloc(strlen(cli) + strlen(args) + strlen(c->bootstraps) + 300);
    sprintf(cmd, "exec '%s' grow --bootstrap-servers %s --timeout 10 %s >%s 2>%s </dev/null", cli,
            c->bootstraps, args, ch.out, ch.err);
    ch.pid = fork();
    assert_true(ch.pid >= 0);
    if (ch.pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    free(cmd);
    return ch;
}

static run_result finish(child ch)
{
    int status = 0;
    assert_int_equal(waitpid(ch.pid, &status, 0), ch.pid);
    run_result r;
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    r.out = slurp(ch.out);
    r.err = slurp(ch.err);
    unlink(ch.out);
    unlink(ch.err);
    return r;
}

static run_result run(const cluster *c, const char *args)
{
    return finish(start(c, args));
}

static void run_free(run_result *r)
{
    free(r->out);
    free(r->err);
}

/* Runs and checks the exit status (printing what the command said when it differs). */
static run_result run_expect(const cluster *c, const char *args, int status)
{
    run_result r = run(c, args);
    if (r.status != status)
        fail_msg("ringlane grow %s: exit %d, want %d\nstdout: %s\nstderr: %s", args, r.status,
                 status, r.out, r.err);
    return r;
}

/* The record of key `key` as --status prints it ("<key> <value>"), parsed; 0 when absent. */
static int status_record(const cluster *c, const char *topic, const char *key,
                         rl__growth_record *out)
{
    char args[300];
    snprintf(args, sizeof args, "--topic %s --status", topic);
    run_result r = run_expect(c, args, 0);
    int found = 0;
    size_t klen = strlen(key);
    for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n"))
        if (strncmp(line, key, klen) == 0 && line[klen] == ' ') {
            const char *why = NULL;
            if (rl__growth_value_parse(line + klen + 1, strlen(line + klen + 1), out, &why) !=
                RL__GROWTH_OK)
                fail_msg("--status printed an unreadable record: %s (%s)", line, why);
            found = 1;
        }
    run_free(&r);
    return found;
}

/* Waits (up to 20 s) until the growth's record is in `state` with a nonce other than `not`. */
static uint64_t wait_for_state(const cluster *c, const char *topic, const char *key,
                               rl__growth_state state, uint64_t not_nonce)
{
    for (int i = 0; i < 200; i++) {
        rl__growth_record g;
        if (status_record(c, topic, key, &g)) {
            uint64_t nonce = g.nonce;
            int ok = g.state == state && nonce != not_nonce;
            rl__growth_record_free(&g);
            if (ok)
                return nonce;
        }
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
    }
    fail_msg("%s never became %s", key, rl__growth_state_name(state));
    return 0;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Writes the record `announced` of topic's growth from -> to (profile balanced, vnodes as
 * given), as a run of ringlane grow announced it age_s seconds ago. */
static void announce_directly(const cluster *c, const char *topic, uint32_t from, uint32_t to,
                              uint32_t vnodes, int age_s)
{
    rl__growth_record g = {.from = from,
                           .to = to,
                           .profile = "balanced",
                           .vnodes = vnodes,
                           .nonce = 0x0123456789abcdefull,
                           .state = RL__GROWTH_ANNOUNCED};
    snprintf(g.topic, sizeof g.topic, "%s", topic);
    assert_rl_ok(rl__growth_ring_fingerprint("balanced", vnodes, from, &g.ring_from));
    assert_rl_ok(rl__growth_ring_fingerprint("balanced", vnodes, to, &g.ring_to));
    const char *why = NULL;
    char *value = rl__growth_value_format(&g, &why);
    assert_non_null(value);
    char key[RL__GROWTH_KEY_MAX + 1];
    assert_true(rl__growth_key_format(topic, from, to, key, sizeof key) > 0);
    produce_at(c, RL__GROWTH_TOPIC, 0, 1, key, value, wall_ms() - (int64_t)age_s * 1000);
    free(value);
}

/* Writes the growth's record again as it is, timestamped age_s seconds ago: as if its
 * announcement had been that long ago. */
static void backdate(const cluster *c, const char *topic, const char *key, int age_s)
{
    char args[300];
    snprintf(args, sizeof args, "--topic %s --status", topic);
    run_result r = run_expect(c, args, 0);
    size_t klen = strlen(key);
    int found = 0;
    for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n"))
        if (strncmp(line, key, klen) == 0 && line[klen] == ' ') {
            produce_at(c, RL__GROWTH_TOPIC, 0, 1, key, line + klen + 1,
                       wall_ms() - (int64_t)age_s * 1000);
            found = 1;
        }
    assert_true(found);
    run_free(&r);
}

#define GROW_6_TO_8 "--topic events --from 6 --partitions 8 --profile balanced --vnodes 64"

/* A topic of 8 partitions whose producers used 6, with 1, 4, 7, ... messages in partition p:
 * announced, then sealed with the high watermarks; the record names the ring; a second run has
 * nothing to do. */
static void announce_to_seal_on_a_precreated_topic(void **state)
{
    (void)state;
    cluster *c = cluster_new("events", 8);
    for (int32_t p = 0; p < 6; p++)
        produce(c, "events", p, 3 * p + 1, NULL, "v");
    run_result r = run(c, "--topic events --status");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "no growth of events is recorded"));
    run_free(&r);

    r = run_expect(c, GROW_6_TO_8 " --switch-wait 1 --announce-wait 30", 0);
    assert_non_null(strstr(r.out, "announced events/6->8 (profile balanced, vnodes 64, nonce "));
    assert_non_null(strstr(r.out, "waiting 30 s for consumers to read the announcement\n"));
    assert_non_null(strstr(r.out, "sealed events/6->8: points 1,4,7,10,13,16\n"));
    run_free(&r);

    rl__growth_record g;
    assert_true(status_record(c, "events", "events/6->8", &g));
    assert_int_equal(g.state, RL__GROWTH_SEALED);
    assert_string_equal(g.topic, "events");
    assert_int_equal(g.from, 6);
    assert_int_equal(g.to, 8);
    assert_string_equal(g.profile, "balanced");
    assert_int_equal(g.vnodes, 64);
    for (int p = 0; p < 6; p++)
        assert_int_equal(g.points[p], 3 * p + 1); /* the high watermarks */
    uint64_t fp6, fp8;
    assert_rl_ok(rl__growth_ring_fingerprint("balanced", 64, 6, &fp6));
    assert_rl_ok(rl__growth_ring_fingerprint("balanced", 64, 8, &fp8));
    assert_true(g.ring_from == fp6 && g.ring_to == fp8);
    rl__growth_record_free(&g);

    /* Again: sealed, nothing to do; the record stays as it was (a sealed one never reopens). */
    r = run_expect(c, GROW_6_TO_8 " --switch-wait 1", 0);
    assert_string_equal(r.out, "events/6->8 is sealed already: nothing to do\n");
    run_free(&r);
    r = run_expect(c, "--topic events --partitions 8 --abort", 3);
    assert_non_null(strstr(r.err, "--abort: events/6->8 is sealed"));
    run_free(&r);
    cluster_free(c);
}

/* Every refusal names the option, the value and the reason, writes nothing, and exits 2 (the
 * arguments) or 3 (what the cluster or the records hold). */
static void refusals(void **state)
{
    (void)state;
    cluster *c = cluster_new("events", 8);
    assert_int_equal(rd_kafka_mock_topic_create(c->mock, "six", 6, 1), 0);
    const struct {
        const char *args;
        int status;
        const char *says;
    } cases[] = {
        {"--topic events --from 6 --partitions 8 --profile ketama --vnodes 160", 2,
         "--profile ketama: it has no local_add"},
        {"--topic events --from 6 --partitions 8 --profile maglev --vnodes 65537", 2,
         "--profile maglev: it has no local_add"},
        {"--topic events --from 6 --partitions 8 --profile nope --vnodes 64", 2, "nope"},
        {"--topic events --from 6 --partitions 8 --profile balanced", 2, "--vnodes is required"},
        {"--topic events --from 6 --partitions 8 --vnodes 64", 2, "--profile is required"},
        {"--topic events --from 6 --partitions 8 --profile balanced --vnodes 0", 2,
         "--vnodes: profile balanced takes 1..65536 vnodes, got 0"},
        {"--topic events --from 6 --partitions 8 --profile jump --vnodes 64", 2,
         "--vnodes: profile jump has no vnodes"},
        {"--topic events --from 8 --partitions 8 --profile balanced --vnodes 64", 2,
         "--from 8: expected a count 1..7"},
        {"--topic events --partitions 1 --profile balanced --vnodes 64", 2,
         "--partitions 1: expected a count 2..100000"},
        {GROW_6_TO_8 " --switch-wait 0", 2, "--switch-wait 0: producers need time to switch"},
        {GROW_6_TO_8 " --pinned --announce-only", 2, "one at most"},
        {GROW_6_TO_8 " --pinned --announce-wait 0", 2, "--announce-wait 0: at least 30 s"},
        {GROW_6_TO_8 " --announce-wait 29", 2, "--announce-wait 29: at least 30 s"},
        {"--topic events --from 6 --partitions 08 --profile balanced --vnodes 64", 2,
         "--partitions 08: expected a count 2..100000"},
        {"--topic events --from 06 --partitions 8 --profile balanced --vnodes 64", 2,
         "--from 06: expected a count 1..7"},
        {"--topic events --partitions 08 --abort", 2, "--partitions 08: expected a count"},
        {GROW_6_TO_8 " -X no.such.property=1", 2, "-X no.such.property=1: "},
        {GROW_6_TO_8 " -X transactional.id=mine", 2, "ringlane grow sets transactional.id"},
        {"--topic 'a b' --status", 2, "--topic 'a b': a topic name is"},
        {"--topic __ringlane_growth --partitions 2 --profile balanced --vnodes 64", 2,
         "--topic __ringlane_growth: a topic of ringlane's own"},
        {"--topic __ringlane_other --status", 2, "--topic __ringlane_other: a topic of ringlane's"},
        {"--topic __consumer_offsets --partitions 60 --profile balanced --vnodes 64", 2,
         "--topic __consumer_offsets: a name starting with __ is Kafka's own internal topic"},
        {"--topic events --status --partitions 8", 2, "--status takes only"},
        {"--topic missing --from 6 --partitions 8 --profile balanced --vnodes 64", 3,
         "--topic missing: no such topic at"},
        /* P' <= P without --from: the topic has 6. */
        {"--topic six --partitions 6 --profile balanced --vnodes 64", 3,
         "--partitions 6: topic six has 6 partitions already"},
        {"--topic six --partitions 4 --profile balanced --vnodes 64", 3,
         "--partitions 4: topic six has 6 partitions already"},
        {"--topic six --from 4 --partitions 8 --profile balanced --vnodes 64", 3,
         "--from 4: topic six has 6 partitions"},
        {GROW_6_TO_8 " --pinned", 3, "--pinned: events/6->8 is not announced"},
        {"--topic events --partitions 8 --abort", 3,
         "--abort: no growth of events to 8 partitions is announced"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run_result r = run_expect(c, cases[i].args, cases[i].status);
        if (!strstr(r.err, cases[i].says))
            fail_msg("ringlane grow %s: said '%s', want '%s'", cases[i].args, r.err, cases[i].says);
        assert_string_equal(r.out, "");
        run_free(&r);
    }
    rl__growth_record g;
    assert_false(status_record(c, "events", "events/6->8", &g)); /* nothing was written */

    /* A new partition that holds messages before the announcement: order is lost already. */
    produce(c, "events", 7, 2, NULL, "v");
    run_result r = run_expect(c, GROW_6_TO_8 " --switch-wait 1", 3);
    assert_non_null(strstr(r.err, "--from 6: partition 7 of events holds 2 messages already"));
    run_free(&r);
    assert_false(status_record(c, "events", "events/6->8", &g));
    cluster_free(c);
}

/* A record the codec refuses stops every growth of its topic (fail closed) and is shown as
 * unreadable; a tombstone removes it. */
static void unreadable_records_stop_the_topic(void **state)
{
    (void)state;
    cluster *c = cluster_new("events", 8);
    produce(c, RL__GROWTH_TOPIC, 0, 1, "events/4->6", "ringlane-growth 1 topic=events from=4");
    produce(c, RL__GROWTH_TOPIC, 0, 1, "other/1->2", "not ours at all"); /* another topic */
    run_result r = run_expect(c, "--topic events --status", 1);
    assert_string_equal(r.out, "events/4->6 unreadable (expected ' to=' after from): "
                               "ringlane-growth 1 topic=events from=4\n");
    run_free(&r);
    r = run_expect(c, GROW_6_TO_8 " --switch-wait 1", 3);
    assert_non_null(strstr(r.err, "--topic events: the growth record events/4->6 cannot be "
                                  "read (expected ' to=' after from)"));
    run_free(&r);
    produce(c, RL__GROWTH_TOPIC, 0, 1, "events/4->6", NULL); /* a tombstone */
    r = run_expect(c, "--topic events --status", 0);
    assert_string_equal(r.out, "");
    run_free(&r);
    cluster_free(c);
}

/* A run killed in its announce wait leaves the record announced; the same command again takes
 * it over (a new nonce) and seals it. */
static void a_killed_run_resumes(void **state)
{
    (void)state;
    cluster *c = cluster_new("events", 8);
    for (int32_t p = 0; p < 6; p++)
        produce(c, "events", p, 2, NULL, "v");
    child first = start(c, GROW_6_TO_8 " --switch-wait 120");
    uint64_t first_nonce = wait_for_state(c, "events", "events/6->8", RL__GROWTH_ANNOUNCED, 0);
    kill(first.pid, SIGKILL);
    run_result r = finish(first);
    assert_int_equal(r.status, -SIGKILL);
    run_free(&r);
    produce(c, "events", 3, 5, NULL, "v"); /* written by producers still on 6 */

    r = run_expect(c, GROW_6_TO_8 " --switch-wait 1 --announce-wait 30", 0);
    assert_non_null(strstr(r.out, "announced events/6->8"));
    assert_non_null(strstr(r.out, "sealed events/6->8: points 2,2,2,7,2,2\n"));
    run_free(&r);
    rl__growth_record g;
    assert_true(status_record(c, "events", "events/6->8", &g));
    assert_int_equal(g.state, RL__GROWTH_SEALED);
    assert_true(g.nonce != first_nonce);
    rl__growth_record_free(&g);
    cluster_free(c);
}

/* A second run takes a growth over while the first waits: the first stops before it seals
 * (exit 4) and the record is the second's. The pinned path: --announce-only, then --pinned,
 * refused until --announce-wait has passed since the announcement. */
static void a_second_run_fences_the_first(void **state)
{
    (void)state;
    cluster *c = cluster_new("events", 8);
    for (int32_t p = 0; p < 6; p++)
        produce(c, "events", p, 1 + p, NULL, "v");
    child first = start(c, GROW_6_TO_8 " --switch-wait 8 --announce-wait 30");
    uint64_t first_nonce = wait_for_state(c, "events", "events/6->8", RL__GROWTH_ANNOUNCED, 0);

    run_result r = run_expect(c, GROW_6_TO_8 " --announce-only --announce-wait 30", 0);
    assert_non_null(strstr(r.out, "now raise ringlane.partitions.used to 8 on every producer "
                                  "(restart each with it, after it flushed its queue)"));
    run_free(&r);
    uint64_t second_nonce =
        wait_for_state(c, "events", "events/6->8", RL__GROWTH_ANNOUNCED, first_nonce);

    r = finish(first);
    assert_int_equal(r.status, 4);
    assert_non_null(strstr(r.err, "events/6->8: another run of ringlane grow took the growth "
                                  "over (its record is now announced, nonce "));
    assert_null(strstr(r.out, "sealed"));
    run_free(&r);
    rl__growth_record g;
    assert_true(status_record(c, "events", "events/6->8", &g));
    assert_int_equal(g.state, RL__GROWTH_ANNOUNCED);
    assert_true(g.nonce == second_nonce);
    rl__growth_record_free(&g);

    /* --pinned before consumers had time to see the announcement: refused. */
    r = run_expect(c, GROW_6_TO_8 " --pinned", 3);
    assert_non_null(strstr(r.err, "--pinned: events/6->8 was announced "));
    assert_non_null(strstr(r.err, " s ago; consumers re-read the records every 10-30 s"));
    run_free(&r);
    /* Another growth cannot start while this one is announced. */
    r = run_expect(c,
                   "--topic events --from 7 --partitions 8 --profile balanced --vnodes 64 "
                   "--switch-wait 1",
                   3);
    assert_non_null(strstr(r.err, "another growth of events is in progress (events/6->8"));
    run_free(&r);
    /* A resumed growth must name the same ring. */
    r = run_expect(c,
                   "--topic events --from 6 --partitions 8 --profile default --vnodes 64 "
                   "--pinned",
                   3);
    assert_non_null(strstr(r.err, "was announced with profile balanced vnodes 64"));
    run_free(&r);
    backdate(c, "events", "events/6->8", 120); /* consumers have seen it */
    r = run_expect(c, GROW_6_TO_8 " --pinned", 0);
    assert_non_null(strstr(r.out, "sealed events/6->8: points 1,2,3,4,5,6\n"));
    run_free(&r);
    assert_true(status_record(c, "events", "events/6->8", &g));
    assert_int_equal(g.state, RL__GROWTH_SEALED);
    assert_true(g.nonce != second_nonce); /* the --pinned run took it over with its own */
    rl__growth_record_free(&g);
    cluster_free(c);
}

/* --abort ends an announced growth; again, it has nothing to do; it can be announced again;
 * once a new partition holds messages it is refused (producers routed over P'), and the
 * growth can only be sealed. */
static void abort_and_again(void **state)
{
    (void)state;
    cluster *c = cluster_new("events", 8);
    announce_directly(c, "events", 6, 8, 64, 0);
    run_result r = run_expect(c, "--topic events --partitions 8 --abort", 0);
    assert_non_null(strstr(r.out, "aborted events/6->8"));
    run_free(&r);
    rl__growth_record g;
    assert_true(status_record(c, "events", "events/6->8", &g));
    assert_int_equal(g.state, RL__GROWTH_ABORTED);
    assert_null(g.points);
    rl__growth_record_free(&g);
    r = run_expect(c, "--topic events --status", 0);
    assert_non_null(strstr(r.out, " state=aborted\n"));
    run_free(&r);
    r = run_expect(c, "--topic events --partitions 8 --abort", 0);
    assert_string_equal(r.out, "events/6->8 is aborted already: nothing to do\n");
    run_free(&r);

    announce_directly(c, "events", 6, 8, 64, 0);
    produce(c, "events", 7, 1, NULL, "v"); /* a producer routed over 8 */
    r = run_expect(c, "--topic events --partitions 8 --abort", 3);
    assert_non_null(strstr(r.err, "--abort: partition 7 of events holds 1 messages: producers "
                                  "routed over 8 partitions already"));
    run_free(&r);
    assert_true(status_record(c, "events", "events/6->8", &g));
    assert_int_equal(g.state, RL__GROWTH_ANNOUNCED);
    rl__growth_record_free(&g);
    r = run_expect(c, GROW_6_TO_8 " --switch-wait 1 --announce-wait 30", 0);
    assert_non_null(strstr(r.out, "sealed events/6->8: points 0,0,0,0,0,0\n"));
    run_free(&r);
    cluster_free(c);
}

/* --status prints the records of a topic that was deleted (they apply to a topic created
 * again under its name); a topic with neither is refused. */
static void status_of_a_deleted_topic(void **state)
{
    (void)state;
    cluster *c = cluster_new("events", 8);
    announce_directly(c, "gone", 4, 6, 64, 0);
    run_result r = run_expect(c, "--topic gone --status", 0);
    assert_non_null(strstr(r.out, "gone/4->6 ringlane-growth 1 topic=gone from=4 to=6 "));
    assert_non_null(strstr(r.err, "topic gone does not exist at "));
    run_free(&r);
    r = run_expect(c, "--topic never --status", 3);
    assert_non_null(strstr(r.err, "--topic never: no such topic at "));
    assert_non_null(strstr(r.err, "and no growth of it is recorded"));
    assert_string_equal(r.out, "");
    run_free(&r);
    cluster_free(c);
}

/* An announced growth whose partitions were never made (CreatePartitions failed, the run
 * was stopped): --pinned refuses to seal it, naming the counts, and the record stays
 * announced (so --abort can still end it). */
static void pinned_never_seals_missing_partitions(void **state)
{
    (void)state;
    cluster *c = cluster_new("t2", 4);
    uint32_t vnodes = rl__growth_record_vnodes("balanced", RL_VNODES_PROFILE);
    announce_directly(c, "t2", 4, 6, vnodes, 120);
    static const char *const runs[] = {
        "--topic t2 --partitions 6 --profile balanced --vnodes default --pinned",
        "--topic t2 --from 4 --partitions 6 --profile balanced --vnodes default --pinned",
    };
    for (size_t i = 0; i < 2; i++) {
        run_result r = run_expect(c, runs[i], 3);
        assert_non_null(strstr(r.err, "--partitions 6: topic t2 has 4 partitions, not 6: "
                                      "t2/4->6 is not sealed"));
        assert_string_equal(r.out, "");
        run_free(&r);
    }
    rl__growth_record g;
    assert_true(status_record(c, "t2", "t2/4->6", &g));
    assert_int_equal(g.state, RL__GROWTH_ANNOUNCED);
    assert_true(g.nonce == 0x0123456789abcdefull); /* not even taken over */
    rl__growth_record_free(&g);
    run_result r = run_expect(c, "--topic t2 --partitions 6 --abort", 0);
    run_free(&r);
    cluster_free(c);
}

/* Two --pinned runs at once: each takes the growth over with a nonce of its own, and exactly
 * one seals; the other stops (exit 4) or finds it sealed. The record is sealed once. */
static void two_pinned_runs_seal_once(void **state)
{
    (void)state;
    for (int round = 0; round < 3; round++) {
        cluster *c = cluster_new("events", 8);
        for (int32_t p = 0; p < 6; p++)
            produce(c, "events", p, 1 + p, NULL, "v");
        announce_directly(c, "events", 6, 8, 64, 120);
        child a = start(c, GROW_6_TO_8 " --pinned");
        child b = start(c, GROW_6_TO_8 " --pinned");
        run_result ra = finish(a), rb = finish(b);
        int sealed = !!strstr(ra.out, "sealed events/6->8: points") +
                     !!strstr(rb.out, "sealed events/6->8: points");
        if (sealed != 1)
            fail_msg("round %d: %d runs sealed\nA (exit %d): %s%s\nB (exit %d): %s%s", round,
                     sealed, ra.status, ra.out, ra.err, rb.status, rb.out, rb.err);
        for (int i = 0; i < 2; i++) {
            const run_result *o = i ? &rb : &ra;
            if (strstr(o->out, "sealed events/6->8: points"))
                continue;
            assert_true(o->status == 4 || (o->status == 0 && strstr(o->out, "is sealed already")));
            /* Its message names the other run's nonce, never the announcer's. */
            assert_null(strstr(o->err, "nonce 0123456789abcdef"));
        }
        run_free(&ra);
        run_free(&rb);
        rl__growth_record g;
        assert_true(status_record(c, "events", "events/6->8", &g));
        assert_int_equal(g.state, RL__GROWTH_SEALED);
        assert_true(g.nonce != 0x0123456789abcdefull); /* the sealing run's own nonce */
        rl__growth_record_free(&g);
        cluster_free(c);
    }
}

/* A leader that is down bounds the seal by --timeout: the high watermark of its partition
 * cannot be read, the run stops with exit 1 (the record stays announced, resumable) instead
 * of waiting for the broker to come back. */
static void a_down_leader_is_bounded_by_the_timeout(void **state)
{
    (void)state;
    cluster *c = cluster_new_brokers("events", 8, 3);
    for (int32_t p = 0; p < 6; p++)
        produce(c, "events", p, 2, NULL, "v");
    /* Everything on broker 1 but partition 3, on broker 3, which goes down. */
    for (int32_t p = 0; p < 8; p++)
        assert_int_equal(rd_kafka_mock_partition_set_leader(c->mock, "events", p, p == 3 ? 3 : 1),
                         0);
    assert_int_equal(rd_kafka_mock_partition_set_leader(c->mock, RL__GROWTH_TOPIC, 0, 1), 0);
    assert_int_equal(
        rd_kafka_mock_coordinator_set(c->mock, "transaction", "ringlane-grow.events", 1), 0);
    announce_directly(c, "events", 6, 8, 64, 120);
    assert_int_equal(rd_kafka_mock_broker_set_down(c->mock, 3), 0);

    /* The test's limit (--timeout 3 here) is 60 s: librdkafka's own request timeout, which
     * the broken run waited for at least, is as long. */
    child ch = start(c, GROW_6_TO_8 " --pinned --timeout 3");
    int status = 0, waited_ms = 0;
    while (waitpid(ch.pid, &status, WNOHANG) == 0 && waited_ms < 60000) {
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
        waited_ms += 100;
    }
    if (waited_ms >= 60000) {
        kill(ch.pid, SIGKILL);
        run_result r = finish(ch);
        run_free(&r);
        fail_msg("ringlane grow --pinned --timeout 3 still ran after 60 s with a leader down");
    }
    /* finish() would wait again: read what it wrote instead. */
    char *out = slurp(ch.out), *err = slurp(ch.err);
    unlink(ch.out);
    unlink(ch.err);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 1)
        fail_msg("exit %d, want 1\nstdout: %s\nstderr: %s", WEXITSTATUS(status), out, err);
    assert_non_null(strstr(err, "cannot read the high watermark"));
    assert_null(strstr(out, "sealed"));
    free(out);
    free(err);
    assert_int_equal(rd_kafka_mock_broker_set_up(c->mock, 3), 0);
    rl__growth_record g;
    assert_true(status_record(c, "events", "events/6->8", &g));
    assert_int_equal(g.state, RL__GROWTH_ANNOUNCED);
    rl__growth_record_free(&g);
    cluster_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(announce_to_seal_on_a_precreated_topic),
        cmocka_unit_test(refusals),
        cmocka_unit_test(unreadable_records_stop_the_topic),
        cmocka_unit_test(a_killed_run_resumes),
        cmocka_unit_test(a_second_run_fences_the_first),
        cmocka_unit_test(abort_and_again),
        cmocka_unit_test(status_of_a_deleted_topic),
        cmocka_unit_test(pinned_never_seals_missing_partitions),
        cmocka_unit_test(two_pinned_runs_seal_once),
        cmocka_unit_test(a_down_leader_is_bounded_by_the_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
