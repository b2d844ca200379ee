/* SPDX-License-Identifier: BSD-2-Clause */
/* The dead-letter producer's configuration. Made from the consumer's (dlq_conf NULL), it must
 * leave out every consumer-only property: librdkafka logs `CONFWARN ... is a consumer property
 * and will be ignored by this producer instance` for each one a producer has set, at every
 * consumer start. Which properties are consumer-only is found here by trying each property
 * librdkafka has on a producer of its own (what librdkafka does, not what a list says), and
 * what a librdkafka client really got is read from its own dump of the properties set on it
 * (debug=conf, the same "set" flags the warning looks at). A dlq_conf given is used as given.
 * The consumers run on librdkafka's mock cluster, in this process. */
#define _POSIX_C_SOURCE 200809L
#include "consumer_test_util.h"

#define TOPIC "dlq-conf.events"

/* --- librdkafka's log, as every client of a test wrote it --- */

#define LOG_LINES_MAX 8192

static uv_mutex_t log_mu;
static char *log_lines[LOG_LINES_MAX]; /* "<client name> <facility> <text>" */
static size_t log_n;

static void capture_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)level;
    char line[1024];
    snprintf(line, sizeof line, "%s %s %s", rd_kafka_name(rk), fac, buf);
    uv_mutex_lock(&log_mu);
    if (log_n < LOG_LINES_MAX)
        log_lines[log_n++] = strdup(line);
    uv_mutex_unlock(&log_mu);
}

static void log_clear(void)
{
    uv_mutex_lock(&log_mu);
    for (size_t i = 0; i < log_n; i++)
        free(log_lines[i]);
    log_n = 0;
    uv_mutex_unlock(&log_mu);
}

/* How many lines contain all of a, b (b may be NULL); each is printed when print is set. */
static size_t log_count(const char *a, const char *b, bool print)
{
    size_t n = 0;
    uv_mutex_lock(&log_mu);
    for (size_t i = 0; i < log_n; i++)
        if (log_lines[i] && strstr(log_lines[i], a) && (!b || strstr(log_lines[i], b))) {
            if (print)
                print_message("  %s\n", log_lines[i]);
            n++;
        }
    uv_mutex_unlock(&log_mu);
    return n;
}

/* --- consumers --- */

static int nop_handler(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)c;
    (void)m;
    (void)attempt;
    return 0;
}

/* A consumer configuration with the properties consumer applications usually set. */
static rd_kafka_conf_t *usual_conf(const char *group)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    conf_set_ok(conf, "bootstrap.servers", k.bootstraps);
    conf_set_ok(conf, "group.id", group);
    conf_set_ok(conf, "auto.offset.reset", "earliest");
    conf_set_ok(conf, "enable.auto.commit", "false");
    conf_set_ok(conf, "enable.auto.offset.store", "false");
    conf_set_ok(conf, "session.timeout.ms", "6000");
    conf_set_ok(conf, "heartbeat.interval.ms", "500");
    conf_set_ok(conf, "max.poll.interval.ms", "60000");
    conf_set_ok(conf, "partition.assignment.strategy", "range");
    conf_set_ok(conf, "fetch.wait.max.ms", "20");
    conf_set_ok(conf, "fetch.min.bytes", "1");
    conf_set_ok(conf, "fetch.max.bytes", "10485760");
    conf_set_ok(conf, "max.partition.fetch.bytes", "1048576");
    conf_set_ok(conf, "queued.min.messages", "1000");
    conf_set_ok(conf, "isolation.level", "read_committed");
    conf_set_ok(conf, "enable.partition.eof", "false");
    conf_set_ok(conf, "check.crcs", "true");
    conf_set_ok(conf, "client.id", "usual");
    rd_kafka_conf_set_log_cb(conf, capture_log);
    return conf;
}

/* Starts a consumer of TOPIC with conf (and dlq_conf, may be NULL), then closes it. Every log
 * line librdkafka wrote meanwhile stays in the capture. */
static void run_consumer(rd_kafka_conf_t *conf, rd_kafka_conf_t *dlq_conf)
{
    static const char *const topics[] = {TOPIC};
    cthread t;
    ct_init(&t, conf, topics, 1, nop_handler, NULL);
    t.opts.dlq_conf = dlq_conf;
    assert_rl_ok(ct_start(&t));
    ct_stop(&t);
    ct_free(&t);
}

/* --- the cases --- */

/* The capture sees the warning: a producer made from the same configuration logs it. Without
 * this, "no CONFWARN" below would prove nothing. */
static void a_producer_of_the_consumers_conf_warns(void **state)
{
    (void)state;
    log_clear();
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, usual_conf("g-dlq-control"), err, sizeof err);
    assert_non_null(rk);
    rd_kafka_destroy(rk);
    assert_true(log_count("CONFWARN", "auto.offset.reset is a consumer property", true) == 1);
    assert_true(log_count("CONFWARN", "ignored by this producer instance", false) >= 10);
}

/* Before the fix, the dead-letter producer's copy kept the consumer's default topic
 * configuration whole: `auto.offset.reset is a consumer property and will be ignored by this
 * producer instance` at every start. */
static void usual_consumer_properties_log_no_confwarn(void **state)
{
    (void)state;
    log_clear();
    run_consumer(usual_conf("g-dlq-usual"), NULL);
    size_t warnings = log_count("CONFWARN", NULL, true);
    assert_int_equal(warnings, 0);
}

typedef struct property {
    char *name, *value;
} property;

static bool has(const property *props, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(props[i].name, name) == 0)
            return true;
    return false;
}

/* The value of name in a dump, or NULL. */
static const char *dump_value(const char **dump, size_t cnt, const char *name)
{
    for (size_t i = 0; i + 1 < cnt; i += 2)
        if (strcmp(dump[i], name) == 0)
            return dump[i + 1];
    return NULL;
}

/* Sets name on conf: to its default value when it has one, else to the first of a few
 * values it takes. Returns the value set, or NULL (read-only, or set by a function only). */
static const char *set_some_value(rd_kafka_conf_t *conf, const char *name, const char *dflt)
{
    static const char *const tries[] = {"1", "x", "true"};
    char err[512];
    if (dflt)
        return rd_kafka_conf_set(conf, name, dflt, err, sizeof err) == RD_KAFKA_CONF_OK ? dflt
                                                                                        : NULL;
    for (size_t i = 0; i < sizeof tries / sizeof *tries; i++)
        if (rd_kafka_conf_set(conf, name, tries[i], err, sizeof err) == RD_KAFKA_CONF_OK)
            return tries[i];
    return NULL;
}

/* The properties a producer warns about, with a value each: every property librdkafka lists
 * (rd_kafka_conf_properties_show, global and topic), set on a producer of its own. */
static size_t consumer_only_by_trial(property *out, size_t cap, char ***all_names, size_t *n_all)
{
    char *table = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&table, &size);
    assert_non_null(f);
    rd_kafka_conf_properties_show(f);
    assert_int_equal(fclose(f), 0);
    rd_kafka_conf_t *gconf = rd_kafka_conf_new();
    rd_kafka_topic_conf_t *tconf = rd_kafka_topic_conf_new();
    size_t gcnt = 0, tcnt = 0;
    const char **g = rd_kafka_conf_dump(gconf, &gcnt);
    const char **t = rd_kafka_topic_conf_dump(tconf, &tcnt);

    size_t n = 0, listed = 0, tried = 0;
    size_t lines = 1;
    for (const char *c = table; (c = strchr(c, '\n')); c++)
        lines++;
    *all_names = calloc(lines, sizeof **all_names);
    assert_non_null(*all_names);
    for (char *line = table, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        /* "name | C/P | range | default | importance | description"; the header's name is
         * "Property". */
        size_t len = strcspn(line, " ");
        if (!len || !strstr(line, " | ") || strncmp(line, "Property ", 9) == 0)
            continue;
        line[len] = '\0';
        (*all_names)[listed++] = strdup(line);
        const char *dflt = dump_value(g, gcnt, line);
        if (!dflt)
            dflt = dump_value(t, tcnt, line);
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        rd_kafka_conf_set_log_cb(conf, capture_log);
        const char *value = set_some_value(conf, line, dflt);
        char err[512];
        rd_kafka_t *rk = NULL;
        if (value) {
            log_clear();
            rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
        }
        if (!rk) {
            rd_kafka_conf_destroy(conf);
            continue;
        }
        tried++;
        char what[256];
        snprintf(what, sizeof what, "property %s is a consumer property", line);
        if (log_count(what, NULL, false) && n < cap && !has(out, n, line)) {
            out[n].name = strdup(line);
            out[n].value = strdup(value);
            n++;
        }
        rd_kafka_destroy(rk);
    }
    rd_kafka_conf_dump_free(g, gcnt);
    rd_kafka_conf_dump_free(t, tcnt);
    rd_kafka_conf_destroy(gconf);
    rd_kafka_topic_conf_destroy(tconf);
    free(table);
    *n_all = listed;
    for (size_t i = 0; i < n; i++)
        print_message("%s%s", out[i].name, i + 1 < n ? " " : "\n");
    print_message("%zu properties listed, %zu set on a producer, %zu of them make it warn\n",
                  listed, tried, n);
    return n;
}

static void unused_consume_cb(rd_kafka_message_t *m, void *opaque)
{
    (void)m;
    (void)opaque;
}

static void unused_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                                rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    (void)rk;
    (void)err;
    (void)parts;
    (void)opaque;
}

static void unused_commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                             rd_kafka_topic_partition_list_t *offsets, void *opaque)
{
    (void)rk;
    (void)err;
    (void)offsets;
    (void)opaque;
}

/* Every consumer-only property the installed librdkafka knows, set on the consumer's
 * configuration: none reaches the dead-letter producer. */
static void every_consumer_only_property_is_left_out(void **state)
{
    (void)state;
    property found[256];
    char **names;
    size_t n_names;
    size_t n = consumer_only_by_trial(found, sizeof found / sizeof *found, &names, &n_names);
    /* The trial works: the well-known ones are among them (global and topic). */
    const char *known[] = {"group.id",           "partition.assignment.strategy",
                           "session.timeout.ms", "enable.auto.commit",
                           "fetch.wait.max.ms",  "auto.offset.reset",
                           "isolation.level",    "max.poll.interval.ms"};
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (!has(found, n, known[i]))
            fail_msg("the trial missed %s", known[i]);
    /* librdkafka's copy filters by name prefix: none of these may begin another name. */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n_names; j++)
            if (strcmp(names[j], found[i].name) != 0 &&
                strncmp(names[j], found[i].name, strlen(found[i].name)) == 0)
                fail_msg("%s begins %s: filtering it would filter both", found[i].name, names[j]);
    for (size_t j = 0; j < n_names; j++)
        free(names[j]);
    free(names);

    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    for (size_t i = 0; i < n; i++)
        conf_set_ok(conf, found[i].name, found[i].value);
    conf_set_ok(conf, "bootstrap.servers", k.bootstraps);
    conf_set_ok(conf, "group.id", "g-dlq-every");
    conf_set_ok(conf, "partition.assignment.strategy", "range");
    /* The consumer-only ones set by a function (ringlane sets its own rebalance and commit
     * callbacks on the consumer afterwards; consume_cb is unused by the consumer's poll). */
    rd_kafka_conf_set_consume_cb(conf, unused_consume_cb);
    rd_kafka_conf_set_rebalance_cb(conf, unused_rebalance_cb);
    rd_kafka_conf_set_offset_commit_cb(conf, unused_commit_cb);
    rd_kafka_conf_set_log_cb(conf, capture_log);
    log_clear();
    run_consumer(conf, NULL);
    assert_int_equal(log_count("CONFWARN", "will be ignored by this producer", true), 0);
    for (size_t i = 0; i < n; i++) {
        free(found[i].name);
        free(found[i].value);
    }
}

/* Lines "<name> CONF   <property> = <value>" of the producer clients (debug=conf). */
static size_t producer_conf_line(const char *client_prefix, const char *property_eq_value)
{
    char a[128], b[256];
    snprintf(a, sizeof a, "%s", client_prefix);
    snprintf(b, sizeof b, " CONF [thrd:app]:   %s", property_eq_value);
    return log_count(a, b, false);
}

/* What the copy keeps: the connection, the client id, and the producer's own properties,
 * global (linger.ms, which librdkafka names queue.buffering.max.ms) and topic-level
 * (message.timeout.ms, partitioner), plus enable.idempotence; and none of the consumer's. */
static void producer_properties_reach_the_dead_letter_producer(void **state)
{
    (void)state;
    rd_kafka_conf_t *conf = usual_conf("g-dlq-keeps");
    conf_set_ok(conf, "debug", "conf");
    conf_set_ok(conf, "client.id", "keeps");
    conf_set_ok(conf, "linger.ms", "7");
    conf_set_ok(conf, "message.timeout.ms", "123456");
    conf_set_ok(conf, "partitioner", "murmur2");
    log_clear();
    run_consumer(conf, NULL);
    assert_true(producer_conf_line("keeps#producer-", "metadata.broker.list = ") == 1);
    assert_true(producer_conf_line("keeps#producer-", "queue.buffering.max.ms = 7") == 1);
    assert_true(producer_conf_line("keeps#producer-", "enable.idempotence = true") == 1);
    assert_true(producer_conf_line("keeps#producer-", "message.timeout.ms = 123456") == 1);
    assert_true(producer_conf_line("keeps#producer-", "partitioner = murmur2") == 1);
    /* The consumer itself got them all. */
    assert_true(producer_conf_line("keeps#consumer-", "auto.offset.reset = smallest") == 1);
    assert_true(producer_conf_line("keeps#consumer-", "message.timeout.ms = 123456") == 1);
    const char *consumer_only[] = {"group.id = ", "auto.offset.reset = ", "session.timeout.ms = ",
                                   "fetch.wait.max.ms = ", "enable.auto.commit = "};
    for (size_t i = 0; i < sizeof consumer_only / sizeof *consumer_only; i++)
        if (producer_conf_line("keeps#producer-", consumer_only[i]))
            fail_msg("the dead-letter producer got %s...", consumer_only[i]);
    /* The producer warns about nothing; the consumer does about the producer's properties
     * (which is why they belong in a dlq_conf, docs/consumer.md). */
    assert_int_equal(log_count("keeps#producer-", " CONFWARN ", true), 0);
    assert_int_equal(log_count("keeps#consumer-", "is a producer property", false), 3);
}

/* A dlq_conf is the dead-letter producer's configuration as it is: nothing of the consumer's,
 * and no enable.idempotence added. */
static void a_dlq_conf_is_used_as_given(void **state)
{
    (void)state;
    rd_kafka_conf_t *dconf = rd_kafka_conf_new();
    conf_set_ok(dconf, "bootstrap.servers", k.bootstraps);
    conf_set_ok(dconf, "client.id", "given");
    conf_set_ok(dconf, "linger.ms", "3");
    conf_set_ok(dconf, "debug", "conf");
    rd_kafka_conf_set_log_cb(dconf, capture_log);
    log_clear();
    run_consumer(usual_conf("g-dlq-given"), dconf);
    assert_true(producer_conf_line("given#producer-", "queue.buffering.max.ms = 3") == 1);
    assert_true(producer_conf_line("given#producer-", "enable.idempotence = ") == 0);
    assert_true(producer_conf_line("given#producer-", "message.timeout.ms = ") == 0);
    assert_int_equal(log_count("CONFWARN", NULL, true), 0);
}

/* The ring partitioner loaded by plugin.library.paths on the consumer's configuration: the
 * copy loads it again and it partitions the dead letters; nothing warns. */
static void a_plugin_on_the_consumers_conf_comes_along(void **state)
{
    (void)state;
    const char *plugin = getenv("RINGLANE_PLUGIN");
    if (!plugin)
        fail_msg("RINGLANE_PLUGIN is not set (the path of ringlane_partitioner.so)");
    rd_kafka_conf_t *conf = usual_conf("g-dlq-plugin");
    conf_set_ok(conf, "client.id", "plugin");
    conf_set_ok(conf, "debug", "conf");
    conf_set_ok(conf, "plugin.library.paths", plugin);
    conf_set_ok(conf, "ringlane.profile", "jump");
    log_clear();
    run_consumer(conf, NULL);
    assert_true(producer_conf_line("plugin#producer-", "plugin.library.paths = ") == 1);
    assert_true(producer_conf_line("plugin#producer-", "partitioner_cb = 0x") == 1);
    assert_int_equal(log_count("plugin#producer-", " CONFWARN ", true), 0);
    assert_int_equal(log_count("plugin#producer-", "ringlane:", true), 0); /* its on_new */
}

static int setup(void **state)
{
    assert_int_equal(uv_mutex_init(&log_mu), 0);
    suite_setup(state);
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, TOPIC, 2, 1), 0);
    return 0;
}

static int teardown(void **state)
{
    suite_teardown(state);
    log_clear();
    uv_mutex_destroy(&log_mu);
    return 0;
}

int main(void)
{
    print_message("librdkafka %s\n", rd_kafka_version_str());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_producer_of_the_consumers_conf_warns),
        cmocka_unit_test(usual_consumer_properties_log_no_confwarn),
        cmocka_unit_test(every_consumer_only_property_is_left_out),
        cmocka_unit_test(producer_properties_reach_the_dead_letter_producer),
        cmocka_unit_test(a_dlq_conf_is_used_as_given),
        cmocka_unit_test(a_plugin_on_the_consumers_conf_comes_along),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
