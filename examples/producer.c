/* SPDX-License-Identifier: BSD-2-Clause */
/* A keyed Kafka producer with ringlane's ring partitioner.
 *
 *   producer [--bootstrap-servers LIST] [--topic T] [--partitions N] [--messages M]
 *            [--keys K] [--profile P] [--vnodes V]
 *
 * Without --bootstrap-servers it starts librdkafka's mock cluster (3 brokers on 127.0.0.1, in
 * this process) with a topic of N partitions, so it runs anywhere. It produces M messages over
 * K keys ("user:0".."user:K-1"), checks every delivery report against the partition the ring
 * predicts (the one `ringlane route --partitions N` prints), and prints messages and keys per
 * partition. Exit status: 0 when every message was delivered where predicted. */
#include "ringlane/partitioner.h"
#include "ringlane/ringlane.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PARTITIONS 1024

typedef struct stats {
    rl_kafka_partitioner_t *partitioner;
    int32_t partitions;
    long delivered, failed, misplaced;
    long per_partition[MAX_PARTITIONS];
} stats;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    stats *s = opaque;
    if (m->err) {
        if (s->failed++ < 5)
            fprintf(stderr, "producer: delivery failed: %s\n", rd_kafka_err2str(m->err));
        return;
    }
    int32_t want = -1;
    rl_kafka_partitioner_partition(s->partitioner, m->key, m->key_len, s->partitions, &want);
    if (m->partition != want)
        s->misplaced++;
    s->delivered++;
    if (m->partition >= 0 && m->partition < MAX_PARTITIONS)
        s->per_partition[m->partition]++;
}

static void usage(void)
{
    fputs("usage: producer [--bootstrap-servers LIST] [--topic T] [--partitions N]\n"
          "                [--messages M] [--keys K] [--profile P] [--vnodes V]\n"
          "Without --bootstrap-servers: librdkafka's mock cluster on 127.0.0.1.\n",
          stderr);
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

/* The topic's partition count from the cluster's metadata; -1 when it cannot be had. */
static int32_t partition_count(rd_kafka_t *rk, const char *topic)
{
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    int32_t n = -1;
    if (rkt && rd_kafka_metadata(rk, 0, rkt, &md, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        if (md->topic_cnt == 1 && !md->topics[0].err)
            n = md->topics[0].partition_cnt;
        rd_kafka_metadata_destroy(md);
    }
    if (rkt)
        rd_kafka_topic_destroy(rkt);
    return n;
}

int main(int argc, char **argv)
{
    const char *servers = NULL, *topic = "ringlane-example", *profile = "default";
    long partitions = 6, messages = 1000, keys = 100, vnodes = 0;
    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage();
            return 0;
        } else if (strcmp(a, "--bootstrap-servers") == 0 && v) {
            servers = v;
        } else if (strcmp(a, "--topic") == 0 && v) {
            topic = v;
        } else if (strcmp(a, "--profile") == 0 && v) {
            profile = v;
        } else if (strcmp(a, "--partitions") == 0) {
            bad = parse_long(v, 1, MAX_PARTITIONS, &partitions);
        } else if (strcmp(a, "--messages") == 0) {
            bad = parse_long(v, 1, 100000000, &messages);
        } else if (strcmp(a, "--keys") == 0) {
            bad = parse_long(v, 1, 100000000, &keys);
        } else if (strcmp(a, "--vnodes") == 0) {
            bad = parse_long(v, 1, RL_VNODES_MAX, &vnodes);
        } else {
            bad = 1;
        }
        if (bad) {
            fprintf(stderr, "producer: bad or incomplete argument '%s'\n", a);
            usage();
            return 2;
        }
    }

    /* The partitioner: one per application, installed on the default topic conf so that every
     * topic produced by name uses it. */
    rl_kafka_partitioner_options opts;
    rl_kafka_partitioner_options_init(&opts);
    opts.profile = profile;
    opts.vnodes = vnodes ? (uint32_t)vnodes : RL_VNODES_PROFILE;
    stats s = {0};
    int rc = rl_kafka_partitioner_new(&opts, &s.partitioner);
    if (rc) {
        fprintf(stderr, "producer: %s: %s\n", rl_strerror(rc), rl_last_error_detail());
        return 2;
    }

    char err[512];
    rd_kafka_t *host = NULL;
    rd_kafka_mock_cluster_t *mock = NULL;
    if (!servers) {
        /* The mock cluster needs a client to live in; that one connects nowhere. */
        rd_kafka_conf_t *hconf = rd_kafka_conf_new();
        rd_kafka_conf_set(hconf, "log_level", "0", err, sizeof err);
        host = rd_kafka_new(RD_KAFKA_PRODUCER, hconf, err, sizeof err);
        mock = host ? rd_kafka_mock_cluster_new(host, 3) : NULL;
        if (!mock || rd_kafka_mock_topic_create(mock, topic, (int)partitions, 1) != 0) {
            fprintf(stderr, "producer: cannot start the mock cluster\n");
            return 1;
        }
        servers = rd_kafka_mock_cluster_bootstraps(mock);
        printf("mock cluster on %s, topic %s with %ld partitions\n", servers, topic, partitions);
    }

    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_topic_conf_t *tconf = rd_kafka_topic_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", servers, err, sizeof err) ||
        rd_kafka_conf_set(conf, "linger.ms", "5", err, sizeof err) ||
        rd_kafka_topic_conf_set(tconf, "message.timeout.ms", "30000", err, sizeof err)) {
        fprintf(stderr, "producer: %s\n", err);
        return 2;
    }
    rl_kafka_partitioner_install(s.partitioner, tconf);
    rd_kafka_conf_set_default_topic_conf(conf, tconf);
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_opaque(conf, &s);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "producer: %s\n", err);
        return 1;
    }
    s.partitions = partition_count(rk, topic);
    if (s.partitions < 1 || s.partitions > MAX_PARTITIONS) {
        fprintf(stderr, "producer: cannot learn how many partitions %s has\n", topic);
        rd_kafka_destroy(rk);
        return 1;
    }

    char key[32], value[64];
    for (long i = 0; i < messages; i++) {
        int klen = snprintf(key, sizeof key, "user:%ld", i % keys);
        int vlen = snprintf(value, sizeof value, "event %ld of %s", i / keys, key);
        rd_kafka_resp_err_t e;
        while ((e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, klen),
                                      RD_KAFKA_V_VALUE(value, vlen),
                                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)) ==
               RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 100);
        if (e) {
            fprintf(stderr, "producer: %s\n", rd_kafka_err2str(e));
            break;
        }
        rd_kafka_poll(rk, 0);
    }
    if (rd_kafka_flush(rk, 60000))
        fprintf(stderr, "producer: %d messages not delivered in 60 s\n", rd_kafka_outq_len(rk));

    /* Keys per partition, from the partitioner's answer (the same for every run and process). */
    long keys_on[MAX_PARTITIONS] = {0};
    for (long k = 0; k < keys; k++) {
        int klen = snprintf(key, sizeof key, "user:%ld", k);
        int32_t p = 0;
        rl_kafka_partitioner_partition(s.partitioner, key, (size_t)klen, s.partitions, &p);
        keys_on[p]++;
    }
    printf("partition  messages  keys   (keys placed as `ringlane route --profile %s "
           "--partitions %d` prints)\n",
           profile, (int)s.partitions);
    for (int32_t p = 0; p < s.partitions; p++)
        printf("%9d  %8ld  %4ld\n", (int)p, s.per_partition[p], keys_on[p]);
    printf("delivered %ld of %ld, failed %ld, not where the ring said %ld\n", s.delivered, messages,
           s.failed, s.misplaced);

    int ok = s.delivered == messages && s.misplaced == 0;
    rd_kafka_destroy(rk);
    rl_kafka_partitioner_destroy(s.partitioner);
    if (mock) {
        rd_kafka_mock_cluster_destroy(mock);
        rd_kafka_destroy(host);
    }
    return ok ? 0 : 1;
}
