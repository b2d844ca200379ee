/* SPDX-License-Identifier: BSD-2-Clause */
/* Hosts librdkafka's mock cluster for clients in other languages (tests/clients/, Python):
 *
 *   mock_cluster_host BROKERS TOPIC:PARTITIONS...
 *
 * creates the topics, prints the bootstrap servers on one line, and keeps the cluster up until
 * its standard input closes. */
#define _POSIX_C_SOURCE 200809L
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void quiet(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    (void)level;
    (void)fac;
    (void)buf;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: mock_cluster_host BROKERS TOPIC:PARTITIONS...\n");
        return 2;
    }
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(conf, quiet);
    rd_kafka_t *host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    rd_kafka_mock_cluster_t *mock = host ? rd_kafka_mock_cluster_new(host, atoi(argv[1])) : NULL;
    if (!mock) {
        fprintf(stderr, "mock_cluster_host: cannot start the mock cluster: %s\n", err);
        return 1;
    }
    for (int i = 2; i < argc; i++) {
        char *colon = strrchr(argv[i], ':');
        if (!colon) {
            fprintf(stderr, "mock_cluster_host: expected TOPIC:PARTITIONS, got %s\n", argv[i]);
            return 2;
        }
        *colon = 0;
        if (rd_kafka_mock_topic_create(mock, argv[i], atoi(colon + 1), 1) != 0) {
            fprintf(stderr, "mock_cluster_host: cannot create %s\n", argv[i]);
            return 1;
        }
    }
    printf("%s\n", rd_kafka_mock_cluster_bootstraps(mock));
    fflush(stdout);
    char buf[256];
    while (fgets(buf, sizeof buf, stdin))
        ;
    rd_kafka_mock_cluster_destroy(mock);
    rd_kafka_destroy(host);
    return 0;
}
