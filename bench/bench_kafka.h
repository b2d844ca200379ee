/* SPDX-License-Identifier: BSD-2-Clause */
/* Shared by the benchmarks that run librdkafka clients on its mock cluster. */
#ifndef RINGLANE_BENCH_KAFKA_H
#define RINGLANE_BENCH_KAFKA_H

#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>

/* A log callback that drops librdkafka's log: the mock cluster's brokers come and go. */
static inline void bench_kafka_quiet(const rd_kafka_t *rk, int level, const char *fac,
                                     const char *buf)
{
    (void)rk;
    (void)level;
    (void)fac;
    (void)buf;
}

/* Sets a configuration property; a refused one ends the benchmark, naming it. */
static inline void bench_kafka_set(const char *prog, rd_kafka_conf_t *conf, const char *name,
                                   const char *value)
{
    char err[256];
    if (rd_kafka_conf_set(conf, name, value, err, sizeof err) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "%s: %s: %s\n", prog, name, err);
        exit(1);
    }
}

#endif
