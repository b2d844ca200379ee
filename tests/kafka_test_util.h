/* SPDX-License-Identifier: BSD-2-Clause */
/* Shared by the Kafka partitioner suites: the reference ring, keys, and mock-cluster helpers. */
#ifndef RINGLANE_KAFKA_TEST_UTIL_H
#define RINGLANE_KAFKA_TEST_UTIL_H

#include "test_util.h"

#include "ringlane/partitioner.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <time.h>

/* The ring `ringlane route --partitions n` builds, made here independently of the
 * partitioner: members "0".."n-1", weight 1. */
static inline rl_ring_t *ref_partition_ring(const char *profile, uint32_t vnodes, int32_t n)
{
    char(*names)[12] = calloc((size_t)n, sizeof *names);
    const char **ptrs = calloc((size_t)n, sizeof *ptrs);
    assert_non_null(names);
    assert_non_null(ptrs);
    for (int32_t i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "%d", (int)i);
        ptrs[i] = names[i];
    }
    rl_ring_t *r = test_ring(profile, vnodes, ptrs, (size_t)n);
    free(ptrs);
    free(names);
    return r;
}

/* The partition a key has on the reference ring, checking that the node's name is the
 * partition number written in decimal (node index == partition). */
static inline int32_t ref_partition(const rl_ring_t *r, const void *key, size_t len)
{
    uint32_t node;
    assert_rl_ok(rl_ring_lookup(r, key, len, &node));
    char want[12];
    snprintf(want, sizeof want, "%u", node);
    assert_string_equal(rl_ring_node_name(r, node), want);
    return (int32_t)node;
}

/* Key i of a test set: "user:<i>" and a few shapes Kafka keys often have. */
static inline size_t test_key(uint64_t i, char *buf, size_t size)
{
    int n;
    switch (i % 4) {
    case 0:
        n = snprintf(buf, size, "user:%llu", (unsigned long long)i);
        break;
    case 1:
        n = snprintf(buf, size, "order-%08llx", (unsigned long long)(i * 2654435761u));
        break;
    case 2:
        n = snprintf(buf, size, "%llu", (unsigned long long)i);
        break;
    default:
        n = snprintf(buf, size, "tenant/%llu/device/%llu", (unsigned long long)(i % 97),
                     (unsigned long long)i);
        break;
    }
    return (size_t)n;
}

/* A new temporary file "<dir>/rl-<stem>-XXXXXX" in $TMPDIR, else the working directory (the
 * test's build directory). Returns its descriptor; path receives the name. */
static inline int temp_file(char *path, size_t size, const char *stem)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, size, "%s/rl-%s-XXXXXX", dir && *dir ? dir : ".", stem);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    return fd;
}

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void conf_set_ok(rd_kafka_conf_t *conf, const char *name, const char *value)
{
    char err[512];
    if (rd_kafka_conf_set(conf, name, value, err, sizeof err) != RD_KAFKA_CONF_OK)
        fail_msg("%s=%s: %s", name, value, err);
}

/* Quiet librdkafka's own log lines unless a test asks for them. */
static inline void quiet_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    (void)level;
    (void)fac;
    (void)buf;
}

#endif
