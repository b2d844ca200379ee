/* SPDX-License-Identifier: BSD-2-Clause */
/* Fuzz target: the partitioner's property parser, directly (rl_kafka_partitioner_option_set)
 * and through the real plugin loaded by librdkafka (plugin.library.paths, then ringlane.*
 * properties through rd_kafka_conf_set). A property is accepted, or refused with a message
 * that names it; accepted options make a partitioner whose answers are valid partitions. */
#include "fuzz_input.h"
#include "ringlane/error.h"
#include "ringlane/partitioner.h"
#include "ringlane/ring.h"

#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_plugin_props: broken promise: %s\n", what);
        abort();
    }
}

static const char *const names[] = {
    "ringlane.profile",          "ringlane.vnodes", "ringlane.null.key",
    "ringlane.skip.unavailable", "ringlane.topics", "ringlane.no.such.property",
};
#define N_NAMES (sizeof names / sizeof names[0])

/* A fresh configuration with the plugin, per input: properties are checked against the ones
 * set before them, so the plugin and the API must start from the same (default) options. */
static rd_kafka_conf_t *plugin_conf(void)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "plugin.library.paths", RL_PLUGIN_PATH, errstr, sizeof errstr) !=
        RD_KAFKA_CONF_OK) {
        fprintf(stderr, "fuzz_plugin_props: cannot load the plugin: %s\n", errstr);
        abort();
    }
    return conf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size, 0};
    const char *name = names[fuzz_byte(&in) % N_NAMES];
    size_t len;
    const uint8_t *rest = fuzz_rest(&in, &len);
    char *value = malloc(len + 1);
    if (!value)
        return 0;
    memcpy(value, rest, len);
    value[len] = 0;

    /* Through librdkafka and the plugin. */
    char errstr[512] = "";
    rd_kafka_conf_t *conf = plugin_conf();
    rd_kafka_conf_res_t res = rd_kafka_conf_set(conf, name, value, errstr, sizeof errstr);
    rd_kafka_conf_destroy(conf);
    check(res == RD_KAFKA_CONF_OK || res == RD_KAFKA_CONF_INVALID,
          "ringlane.* properties are known to the plugin");
    if (res == RD_KAFKA_CONF_INVALID)
        check(strstr(errstr, name) != NULL, "a refusal names the property");

    /* Directly, and then the partitioner made from what was accepted. */
    rl_kafka_partitioner_options opts;
    rl_kafka_partitioner_options_init(&opts);
    errstr[0] = 0;
    int rc = rl_kafka_partitioner_option_set(&opts, name, value, errstr, sizeof errstr);
    if (strcmp(name, "ringlane.topics") != 0) /* topics belong to the plugin alone */
        check((rc == 0) == (res == RD_KAFKA_CONF_OK), "the plugin and the API agree");
    if (rc != 0) {
        check(errstr[0] != 0, "a refusal says why");
        free(value);
        return 0;
    }
    rl_kafka_partitioner_t *p = NULL;
    rc = rl_kafka_partitioner_new(&opts, &p);
    /* vnodes alone is checked against the default profile only by the constructor (a profile
     * may still follow it in a configuration). */
    check(rc == 0 || rc == RL_ENOMEM || (rc == RL_EVNODES && !opts.profile),
          "accepted options make a partitioner");
    if (rc == 0 && (opts.vnodes == RL_VNODES_PROFILE || opts.vnodes <= 1024)) {
        for (int32_t parts = 1; parts <= 12; parts += 5) {
            int32_t part = -1;
            rc = rl_kafka_partitioner_partition(p, value, len, parts, &part);
            if (rc == 0)
                check(part >= 0 && part < parts, "a partition in range");
        }
    }
    rl_kafka_partitioner_destroy(p);
    free(value);
    return 0;
}
