/* SPDX-License-Identifier: BSD-2-Clause */
/* A program that links librdkafka in statically, as the default builds of the Node and Go
 * clients do, on a machine that also has the shared librdkafka.so.1 (which the plugin links).
 *
 * Built twice from this file: test_two_librdkafka keeps its librdkafka to itself, so the
 * plugin's own calls bind to the shared copy while the static one loads it: two copies, and
 * loading the plugin must be refused with both named (before, conf_init handed the shared copy
 * a configuration of the static one). test_static_exported_librdkafka exports its librdkafka
 * (-rdynamic), so the plugin binds to that very copy: one librdkafka, and the plugin must load
 * and place every key by the ring on the mock cluster. */
#define _POSIX_C_SOURCE 200809L
#include "kafka_test_util.h"

#include <string.h>

static const char *plugin_path(void)
{
    const char *path = getenv("RINGLANE_PLUGIN");
    if (!path)
        fail_msg("RINGLANE_PLUGIN is not set (the path of ringlane_partitioner.so)");
    return path;
}

#if !RL_EXPORTED
static void two_copies_are_refused(void **state)
{
    (void)state;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char err[1024] = "";
    assert_int_equal(
        rd_kafka_conf_set(conf, "plugin.library.paths", plugin_path(), err, sizeof err),
        RD_KAFKA_CONF_INVALID);
    /* Both copies named: this program, and the shared library the plugin's calls go to. */
    const char *want[] = {"ringlane: two copies of librdkafka in this process",
                          "test_two_librdkafka", "librdkafka.so.1"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (!strstr(err, want[i]))
            fail_msg("loading the plugin said \"%s\", wanted \"%s\" in it", err, want[i]);
    /* The configuration is untouched and still this copy's: no ringlane property exists. */
    assert_int_equal(rd_kafka_conf_set(conf, "ringlane.profile", "ds09", err, sizeof err),
                     RD_KAFKA_CONF_UNKNOWN);
    rd_kafka_conf_destroy(conf);
}
#else
typedef struct delivery_log {
    int32_t partition[64];
    int err[64];
    int reported;
} delivery_log;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    delivery_log *d = opaque;
    size_t i = (size_t)(uintptr_t)m->_private;
    d->partition[i] = m->partition;
    d->err[i] = m->err;
    d->reported++;
}

static void one_copy_loads(void **state)
{
    (void)state;
    char err[512];
    rd_kafka_conf_t *hconf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(hconf, quiet_log);
    rd_kafka_t *host = rd_kafka_new(RD_KAFKA_PRODUCER, hconf, err, sizeof err);
    assert_non_null(host);
    rd_kafka_mock_cluster_t *mock = rd_kafka_mock_cluster_new(host, 1);
    assert_non_null(mock);
    assert_int_equal(rd_kafka_mock_topic_create(mock, "exported", 6, 1), 0);

    delivery_log d = {0};
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    conf_set_ok(conf, "plugin.library.paths", plugin_path());
    conf_set_ok(conf, "bootstrap.servers", rd_kafka_mock_cluster_bootstraps(mock));
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    rd_kafka_conf_set_opaque(conf, &d);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk)
        fail_msg("rd_kafka_new: %s", err);
    char key[64];
    for (size_t i = 0; i < 64; i++) {
        size_t len = test_key(i, key, sizeof key);
        assert_int_equal(rd_kafka_producev(rk, RD_KAFKA_V_TOPIC("exported"),
                                           RD_KAFKA_V_KEY(key, len), RD_KAFKA_V_VALUE("v", 1),
                                           RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                           RD_KAFKA_V_OPAQUE((void *)(uintptr_t)i), RD_KAFKA_V_END),
                         0);
    }
    assert_int_equal(rd_kafka_flush(rk, 30000), 0);
    assert_int_equal(d.reported, 64);
    rl_ring_t *ref = ref_partition_ring(RL_KAFKA_DEFAULT_PROFILE, RL_VNODES_PROFILE, 6);
    for (size_t i = 0; i < 64; i++) {
        size_t len = test_key(i, key, sizeof key);
        assert_int_equal(d.err[i], 0);
        assert_int_equal(d.partition[i], ref_partition(ref, key, len));
    }
    rl_ring_free(ref);
    rd_kafka_destroy(rk);
    rd_kafka_mock_cluster_destroy(mock);
    rd_kafka_destroy(host);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
#if !RL_EXPORTED
        cmocka_unit_test(two_copies_are_refused),
#else
        cmocka_unit_test(one_copy_loads),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
