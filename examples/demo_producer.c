/* SPDX-License-Identifier: BSD-2-Clause */
/* The demo's producer: keyed events "user:<k>" with per-key sequence numbers, placed on
 * partitions by ringlane's ring partitioner, idempotent so that retries (a broker down) neither
 * reorder nor duplicate. Halfway it also sends three messages for the bad-input policy: one the
 * handler always fails (poison), one without a key, and one whose key is too long. */
#define _POSIX_C_SOURCE 200809L
#include "demo.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OVERSIZED_KEY 5000 /* bytes: over the consumer's max_key_len (4096) */

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    demo_producer *p = opaque;
    if (m->err) {
        atomic_fetch_add(&p->failed, 1);
        return;
    }
    atomic_fetch_add(&p->delivered, 1);
    if (p->app->record_fd >= 0) {
        char key[72];
        long long seq;
        demo_record_key(m, key, sizeof key, &seq);
        demo_record(p->app, "P %" PRIu64 " %s %lld %d %" PRId64, demo_now_ns(), key, seq,
                    (int)m->partition, m->offset);
    }
}

static void quiet(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    if (getenv("RINGLANE_DEMO_VERBOSE"))
        fprintf(stderr, "producer: %d %s %s\n", level, fac, buf);
}

int demo_key(int k, char *buf, size_t size)
{
    return snprintf(buf, size, "user:%d", k);
}

static void produce(demo_producer *p, const void *key, size_t klen, const char *value)
{
    demo *app = p->app;
    rd_kafka_resp_err_t err;
    while ((err = rd_kafka_producev(p->rk, RD_KAFKA_V_TOPIC(app->topic),
                                    RD_KAFKA_V_KEY((void *)key, klen),
                                    RD_KAFKA_V_VALUE((void *)value, strlen(value)),
                                    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)) ==
               RD_KAFKA_RESP_ERR__QUEUE_FULL &&
           !atomic_load(&app->stop))
        rd_kafka_poll(p->rk, 10);
    if (err) {
        atomic_fetch_add(&p->failed, 1);
        return;
    }
    atomic_fetch_add(&p->enqueued, 1);
}

static void produce_specials(demo_producer *p)
{
    char value[64];
    uint64_t run = p->app->run;
    snprintf(value, sizeof value, "%llx poison", (unsigned long long)run);
    produce(p, "user:poison", 11, value);
    snprintf(value, sizeof value, "%llx keyless", (unsigned long long)run);
    produce(p, NULL, 0, value);
    char *big = malloc(OVERSIZED_KEY);
    if (big) {
        memset(big, 'k', OVERSIZED_KEY);
        snprintf(value, sizeof value, "%llx oversized", (unsigned long long)run);
        produce(p, big, OVERSIZED_KEY, value);
        free(big);
    }
}

static void run(void *arg)
{
    demo_producer *p = arg;
    demo *app = p->app;
    uint64_t start = demo_now_ns();
    char key[32], value[64];
    for (long i = 0; i < app->messages && !atomic_load(&app->stop); i++) {
        int k = (int)(i % app->keys);
        int klen = demo_key(app->key_base + k, key, sizeof key);
        snprintf(value, sizeof value, "%llx %d %ld", (unsigned long long)app->run,
                 app->key_base + k, p->per_key[k]);
        produce(p, key, (size_t)klen, value);
        p->per_key[k]++;
        if (p->specials && i == app->messages / 2)
            produce_specials(p);
        if (app->rate > 0 && i % 64 == 0) {
            uint64_t due = start + (uint64_t)((double)i * 1e9 / (double)app->rate);
            uint64_t now = demo_now_ns();
            if (due > now)
                demo_sleep_ms((unsigned)((due - now) / 1000000u));
        }
        rd_kafka_poll(p->rk, 0);
    }
    while (rd_kafka_outq_len(p->rk) > 0 && !atomic_load(&app->stop))
        rd_kafka_flush(p->rk, 100);
    atomic_store(&p->done, true);
}

int demo_producer_start(demo_producer *p, demo *app, bool specials)
{
    memset(p, 0, sizeof *p);
    p->app = app;
    p->specials = specials;
    p->per_key = calloc((size_t)app->keys, sizeof *p->per_key);
    if (!p->per_key)
        return RL_ENOMEM;
    for (int k = 0; k < app->keys; k++)
        p->per_key[k] = app->seq_base;
    rl_kafka_partitioner_options po;
    rl_kafka_partitioner_options_init(&po);
    if (app->partitions_used) {
        char used[16], why[256];
        snprintf(used, sizeof used, "%d", app->partitions_used);
        if (rl_kafka_partitioner_option_set(&po, "partitions.used", used, why, sizeof why)) {
            fprintf(stderr, "ringlane-demo: --partitions-used %s: %s\n", used, why);
            return RL_EINVAL;
        }
    }
    int rc = rl_kafka_partitioner_new(&po, &p->part);
    if (rc)
        return rc;
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    /* The topic configuration with the partitioner first: a default topic conf set after a
     * topic property (message.timeout.ms) would drop it (librdkafka's CONFWARN says so). */
    rd_kafka_topic_conf_t *tconf = rd_kafka_topic_conf_new();
    rl_kafka_partitioner_install(p->part, tconf);
    rd_kafka_conf_set_default_topic_conf(conf, tconf);
    if (rd_kafka_conf_set(conf, "bootstrap.servers", app->servers, err, sizeof err) ||
        rd_kafka_conf_set(conf, "linger.ms", "5", err, sizeof err) ||
        rd_kafka_conf_set(conf, "enable.idempotence", "true", err, sizeof err) ||
        rd_kafka_conf_set(conf, "message.timeout.ms", "120000", err, sizeof err)) {
        fprintf(stderr, "ringlane-demo: producer: %s\n", err);
        rd_kafka_conf_destroy(conf);
        return RL_EKAFKA;
    }
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_log_cb(conf, quiet);
    rd_kafka_conf_set_opaque(conf, p);
    p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!p->rk) {
        fprintf(stderr, "ringlane-demo: producer: %s\n", err);
        rd_kafka_conf_destroy(conf);
        return RL_EKAFKA;
    }
    if (uv_thread_create(&p->thread, run, p) != 0)
        return RL_ELOOP;
    return 0;
}

void demo_producer_join(demo_producer *p)
{
    uv_thread_join(&p->thread);
}

void demo_producer_free(demo_producer *p)
{
    if (p->rk)
        rd_kafka_destroy(p->rk);
    rl_kafka_partitioner_destroy(p->part);
    free(p->per_key);
}

int demo_producer_partition(demo_producer *p, int key, int32_t partitions, int32_t *out)
{
    char k[32];
    int len = demo_key(key, k, sizeof k);
    return rl_kafka_partitioner_partition(p->part, k, (size_t)len, partitions, out);
}
