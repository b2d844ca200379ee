/* SPDX-License-Identifier: BSD-2-Clause */
/* kcat with the plugin: `kcat -P -X plugin.library.paths=ringlane_partitioner.so` produces
 * keyed lines to a mock cluster that this program hosts on 127.0.0.1; reading the topic back
 * shows every key on the partition the ring says. kcat runs with a deadline and is killed
 * if it overruns; nothing here waits without a bound. Skipped when kcat is not installed. */
#define _POSIX_C_SOURCE 200809L
#include "kafka_test_util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define KEYS 500
#define KCAT_DEADLINE_S 60.0
#define CONSUME_DEADLINE_S 30.0

static rd_kafka_t *mock_host;
static rd_kafka_mock_cluster_t *mock;
static char kcat[4096];
static char input_path[4096];

/* kcat from $RINGLANE_KCAT or the PATH; "" when there is none. */
static void find_kcat(void)
{
    const char *env = getenv("RINGLANE_KCAT");
    if (env) {
        snprintf(kcat, sizeof kcat, "%s", env);
        return;
    }
    const char *path = getenv("PATH");
    char *dirs = strdup(path ? path : "/usr/bin:/bin");
    char *save = NULL;
    kcat[0] = 0;
    for (char *d = strtok_r(dirs, ":", &save); d && !kcat[0]; d = strtok_r(NULL, ":", &save)) {
        char candidate[4096];
        snprintf(candidate, sizeof candidate, "%s/kcat", d);
        if (access(candidate, X_OK) == 0)
            snprintf(kcat, sizeof kcat, "%s", candidate);
    }
    free(dirs);
}

static int setup(void **state)
{
    (void)state;
    find_kcat();
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    char err[512];
    mock_host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!mock_host)
        return -1;
    mock = rd_kafka_mock_cluster_new(mock_host, 3);
    if (!mock)
        return -1;
    /* The input: "<key>\t<value>" lines. */
    int fd = temp_file(input_path, sizeof input_path, "kcat-input");
    FILE *f = fdopen(fd, "w");
    char key[64];
    for (uint64_t i = 0; i < KEYS; i++) {
        test_key(i, key, sizeof key);
        fprintf(f, "%s\tvalue-%llu\n", key, (unsigned long long)i);
    }
    fclose(f);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(input_path);
    rd_kafka_mock_cluster_destroy(mock);
    rd_kafka_destroy(mock_host);
    return 0;
}

typedef struct kcat_result {
    int status; /* exit status, or -1 when it had to be killed */
    char err[4096];
} kcat_result;

/* Runs kcat -P with the input file on stdin and extra -X settings; stderr is kept. */
static void run_kcat(const char *topic, const char *const *settings, kcat_result *out)
{
    const char *plugin = getenv("RINGLANE_PLUGIN");
    assert_non_null(plugin);
    char errpath[4096];
    int errfd = temp_file(errpath, sizeof errpath, "kcat-stderr");

    char plugin_x[4200];
    snprintf(plugin_x, sizeof plugin_x, "plugin.library.paths=%s", plugin);
    const char *argv[64];
    int argc = 0;
    argv[argc++] = kcat;
    argv[argc++] = "-P";
    argv[argc++] = "-q";
    argv[argc++] = "-b";
    argv[argc++] = rd_kafka_mock_cluster_bootstraps(mock);
    argv[argc++] = "-t";
    argv[argc++] = topic;
    argv[argc++] = "-K";
    argv[argc++] = "\t";
    argv[argc++] = "-X";
    argv[argc++] = plugin_x; /* first: the plugin's properties need it */
    for (size_t i = 0; settings[i] && argc < 60; i++) {
        argv[argc++] = "-X";
        argv[argc++] = settings[i];
    }
    argv[argc] = NULL;

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int in = open(input_path, O_RDONLY);
        int devnull = open("/dev/null", O_WRONLY);
        if (in < 0 || devnull < 0)
            _exit(126);
        dup2(in, 0);
        dup2(devnull, 1);
        dup2(errfd, 2);
        /* Sanitizer builds: the plugin needs the sanitizer runtime loaded first in kcat. */
        const char *preload = getenv("RINGLANE_KCAT_PRELOAD");
        if (preload && *preload)
            setenv("LD_PRELOAD", preload, 1);
        execv(kcat, (char *const *)argv);
        _exit(127);
    }
    double deadline = now_s() + KCAT_DEADLINE_S;
    int status = 0;
    out->status = -1;
    for (;;) {
        pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid) {
            out->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            break;
        }
        if (now_s() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    }
    ssize_t n = pread(errfd, out->err, sizeof out->err - 1, 0);
    out->err[n > 0 ? n : 0] = 0;
    close(errfd);
    unlink(errpath);
    if (out->status == -1)
        fail_msg("kcat did not finish within %.0f s and was killed; stderr:\n%s", KCAT_DEADLINE_S,
                 out->err);
}

/* Copies bytes out of a consumed message. librdkafka frees the fetch buffer behind a message
 * on one of its threads once its atomic reference count drops to zero; the library is not
 * instrumented, so ThreadSanitizer cannot see that ordering and would report the free racing
 * with this read. The read is plainly ordered (it happens before rd_kafka_message_destroy),
 * so only this copy is left uninstrumented, byte by byte through volatile so that it stays a
 * loop and not a call to the intercepted memcpy. */
__attribute__((no_sanitize_thread)) static void copy_out(void *dst, const void *src, size_t n)
{
    volatile unsigned char *d = dst;
    const volatile unsigned char *s = src;
    for (size_t i = 0; i < n; i++)
        d[i] = s[i];
}

/* Reads the whole topic back; partition_of[i] is where key i was found (-1: not found). */
static void read_back(const char *topic, int32_t partitions, int32_t partition_of[KEYS])
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    conf_set_ok(conf, "bootstrap.servers", rd_kafka_mock_cluster_bootstraps(mock));
    conf_set_ok(conf, "group.id", "ringlane-kcat-check");
    conf_set_ok(conf, "enable.auto.commit", "false");
    conf_set_ok(conf, "enable.partition.eof", "true");
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    assert_non_null(rk);
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(partitions);
    for (int32_t p = 0; p < partitions; p++)
        rd_kafka_topic_partition_list_add(list, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    assert_int_equal(rd_kafka_assign(rk, list), 0);
    rd_kafka_topic_partition_list_destroy(list);

    for (int i = 0; i < KEYS; i++)
        partition_of[i] = -1;
    int eof = 0, seen = 0;
    double deadline = now_s() + CONSUME_DEADLINE_S;
    while ((eof < partitions || seen < KEYS) && now_s() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m)
            continue;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            eof++;
        } else if (m->err) {
            fail_msg("consume: %s", rd_kafka_message_errstr(m));
        } else {
            /* The value names the key's index: "value-<i>". */
            char value[32] = {0}, got_key[64] = {0};
            copy_out(value, m->payload, m->len < sizeof value - 1 ? m->len : sizeof value - 1);
            copy_out(got_key, m->key, m->key_len < sizeof got_key ? m->key_len : 0);
            int i = atoi(value + 6);
            assert_in_range(i, 0, KEYS - 1);
            char key[64];
            size_t len = test_key((uint64_t)i, key, sizeof key);
            assert_int_equal(m->key_len, len);
            assert_memory_equal(got_key, key, len);
            assert_int_equal(partition_of[i], -1); /* each line once */
            partition_of[i] = m->partition;
            seen++;
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    if (seen != KEYS)
        fail_msg("read back %d of %d messages from %s", seen, KEYS, topic);
}

static void kcat_places_keys_by_the_ring(void **state)
{
    (void)state;
    if (!kcat[0]) {
        print_message("kcat is not installed (scripts/install-deps.sh installs it): skipped\n");
        skip();
    }
    const struct {
        const char *profile;
        uint32_t vnodes;
        int32_t partitions;
    } cases[] = {{NULL, RL_VNODES_PROFILE, 12},
                 {"default", RL_VNODES_PROFILE, 6},
                 {"ds09", 40, 8},
                 {"xmur3", 100, 5},
                 {"maglev", 1000003, 7}};
    char key[64];
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char topic[64], topics_x[96], profile_x[64], vnodes_x[64];
        const char *profile = cases[c].profile ? cases[c].profile : RL_KAFKA_DEFAULT_PROFILE;
        snprintf(topic, sizeof topic, "kcat-%s-%d", cases[c].profile ? profile : "no-profile",
                 (int)cases[c].partitions);
        assert_int_equal(rd_kafka_mock_topic_create(mock, topic, cases[c].partitions, 1), 0);
        snprintf(topics_x, sizeof topics_x, "ringlane.topics=%s", topic);
        snprintf(profile_x, sizeof profile_x, "ringlane.profile=%s", profile);
        snprintf(vnodes_x, sizeof vnodes_x, "ringlane.vnodes=%u", cases[c].vnodes);
        /* vnodes first: the pair is checked whichever comes last. */
        const char *settings[] = {topics_x, cases[c].vnodes == RL_VNODES_PROFILE ? NULL : vnodes_x,
                                  cases[c].profile ? profile_x : NULL, NULL};
        if (!settings[1]) {
            settings[1] = settings[2];
            settings[2] = NULL;
        }
        kcat_result res;
        run_kcat(topic, settings, &res);
        if (res.status != 0)
            fail_msg("kcat exited with %d; stderr:\n%s", res.status, res.err);

        int32_t partition_of[KEYS];
        read_back(topic, cases[c].partitions, partition_of);
        rl_ring_t *ref = ref_partition_ring(profile, cases[c].vnodes, cases[c].partitions);
        for (uint64_t i = 0; i < KEYS; i++) {
            size_t len = test_key(i, key, sizeof key);
            if (partition_of[i] != ref_partition(ref, key, len))
                fail_msg("%s: key %s is on partition %d, the ring says %d", topic, key,
                         (int)partition_of[i], (int)ref_partition(ref, key, len));
        }
        rl_ring_free(ref);
    }
}

/* Without ringlane.topics kcat's own topic conf wins (librdkafka's default partitioner): the
 * reason for the property, and proof that the check above can fail. */
static void kcat_without_topics_property_uses_its_own_partitioner(void **state)
{
    (void)state;
    if (!kcat[0])
        skip();
    const char *topic = "kcat-no-topics-property";
    assert_int_equal(rd_kafka_mock_topic_create(mock, topic, 6, 1), 0);
    const char *settings[] = {NULL};
    kcat_result res;
    run_kcat(topic, settings, &res);
    if (res.status != 0)
        fail_msg("kcat exited with %d; stderr:\n%s", res.status, res.err);
    int32_t partition_of[KEYS];
    read_back(topic, 6, partition_of);
    rl_ring_t *ref = ref_partition_ring(RL_KAFKA_DEFAULT_PROFILE, RL_VNODES_PROFILE, 6);
    char key[64];
    int differ = 0;
    for (uint64_t i = 0; i < KEYS; i++) {
        size_t len = test_key(i, key, sizeof key);
        differ += partition_of[i] != ref_partition(ref, key, len);
    }
    rl_ring_free(ref);
    assert_true(differ > KEYS / 2); /* about 5/6 differ by chance */
}

/* A bad value stops kcat at start-up with the plugin's message. */
static void kcat_reports_bad_configuration(void **state)
{
    (void)state;
    if (!kcat[0])
        skip();
    const struct {
        const char *setting, *setting2, *says;
    } bad[] = {
        {"ringlane.vnodes=0", NULL, "ringlane.vnodes: expected an integer 1..8388608"},
        {"ringlane.profile=consistent", NULL, "ringlane.profile: unknown profile \"consistent\""},
        {"ringlane.topics=a b", NULL, "ringlane.topics: expected a comma-separated list"},
        {"ringlane.profile=maglev", "ringlane.vnodes=1000",
         "ringlane.vnodes: profile maglev takes a prime 2..5000011 (its table size), got 1000"},
        {"ringlane.vnodes=2", "ringlane.profile=ketama",
         "ringlane.profile: \"ketama\" does not go with vnodes 2: profile ketama takes 5..65536"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *settings[] = {bad[i].setting, bad[i].setting2, NULL};
        kcat_result res;
        run_kcat("kcat-never-created", settings, &res);
        assert_int_not_equal(res.status, 0);
        if (!strstr(res.err, bad[i].says))
            fail_msg("kcat -X %s said:\n%s\nwanted \"%s\"", bad[i].setting, res.err, bad[i].says);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kcat_places_keys_by_the_ring),
        cmocka_unit_test(kcat_without_topics_property_uses_its_own_partitioner),
        cmocka_unit_test(kcat_reports_bad_configuration),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
