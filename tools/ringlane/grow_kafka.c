/* SPDX-License-Identifier: BSD-2-Clause */
/* The Kafka requests of `ringlane grow` (grow_kafka.h), on librdkafka. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "grow_kafka.h"

#include "growth_record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* librdkafka's own log lines are left out but for the gravest: every failure this tool meets
 * comes back from a call, and is reported with the call's words. */
static void log_grave(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    if (level <= 2)
        fprintf(stderr, "ringlane grow: librdkafka %s: %s\n", fac, buf);
}

/* A configuration: the -X properties first, then ours. Returns 0, 2 (a property refused), or
 * GROW_KAFKA_FAILED. */
static int make_conf(const grow_kafka *k, const char *const *ours, rd_kafka_conf_t **out, char *err,
                     size_t size)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char why[512];
    rd_kafka_conf_set_log_cb(conf, log_grave);
    if (rd_kafka_conf_set(conf, "bootstrap.servers", k->bootstrap, why, sizeof why) !=
        RD_KAFKA_CONF_OK) {
        snprintf(err, size, "--bootstrap-servers %s: %s", k->bootstrap, why);
        rd_kafka_conf_destroy(conf);
        return 2;
    }
    for (size_t i = 0; i < k->nprops; i++) {
        const char *eq = strchr(k->props[i], '=');
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - k->props[i]), k->props[i]);
        if (rd_kafka_conf_set(conf, name, eq + 1, why, sizeof why) != RD_KAFKA_CONF_OK) {
            snprintf(err, size, "-X %s: %s", k->props[i], why);
            rd_kafka_conf_destroy(conf);
            return 2;
        }
    }
    for (size_t i = 0; ours[i]; i += 2)
        if (rd_kafka_conf_set(conf, ours[i], ours[i + 1], why, sizeof why) != RD_KAFKA_CONF_OK) {
            snprintf(err, size, "%s=%s: %s", ours[i], ours[i + 1], why);
            rd_kafka_conf_destroy(conf);
            return GROW_KAFKA_FAILED;
        }
    *out = conf;
    return 0;
}

static int new_client(const grow_kafka *k, rd_kafka_type_t type, const char *const *ours,
                      rd_kafka_t **out, char *err, size_t size)
{
    rd_kafka_conf_t *conf;
    int rc = make_conf(k, ours, &conf, err, size);
    if (rc)
        return rc;
    char why[512];
    *out = rd_kafka_new(type, conf, why, sizeof why);
    if (!*out) {
        rd_kafka_conf_destroy(conf);
        snprintf(err, size, "cannot make a Kafka client: %s", why);
        return GROW_KAFKA_FAILED;
    }
    return 0;
}

int grow_kafka_open(grow_kafka *k, const char *bootstrap, const char *const *props, size_t nprops,
                    int timeout_ms, char *err, size_t size)
{
    memset(k, 0, sizeof *k);
    k->bootstrap = bootstrap;
    k->props = props;
    k->nprops = nprops;
    k->timeout_ms = timeout_ms;
    /* No group: nothing is committed, and the group coordinator is never asked. */
    /* The record topic is small: the first fetches reach its end, and need not wait for
     * more (fetch.wait.max.ms). */
    static const char *const reader[] = {"isolation.level",
                                         "read_committed",
                                         "enable.partition.eof",
                                         "true",
                                         "enable.auto.commit",
                                         "false",
                                         "allow.auto.create.topics",
                                         "false",
                                         "fetch.wait.max.ms",
                                         "50",
                                         NULL};
    static const char *const marks[] = {"isolation.level", "read_uncommitted",
                                        "allow.auto.create.topics", "false", NULL};
    int rc = new_client(k, RD_KAFKA_CONSUMER, reader, &k->reader, err, size);
    if (rc == 0)
        rc = new_client(k, RD_KAFKA_CONSUMER, marks, &k->marks, err, size);
    if (rc)
        grow_kafka_close(k);
    return rc;
}

void grow_kafka_close(grow_kafka *k)
{
    if (k->writer) {
        rd_kafka_flush(k->writer, k->timeout_ms);
        rd_kafka_destroy(k->writer);
    }
    if (k->reader)
        rd_kafka_destroy(k->reader);
    if (k->marks)
        rd_kafka_destroy(k->marks);
    k->writer = k->reader = k->marks = NULL;
}

/* An rd_kafka_error_t into err; returns the answer for it, and destroys it. */
static int txn_error(rd_kafka_error_t *e, const char *what, char *err, size_t size)
{
    int fenced = rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR__FENCED ||
                 rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
                 rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
    snprintf(err, size, "%s: %s", what, rd_kafka_error_string(e));
    rd_kafka_error_destroy(e);
    return fenced ? GROW_KAFKA_FENCED : GROW_KAFKA_FAILED;
}

int grow_kafka_writer_init(grow_kafka *k, const char *topic, char *err, size_t size)
{
    char txn_id[RL__GROWTH_TOPIC_MAX + 32];
    snprintf(txn_id, sizeof txn_id, "ringlane-grow.%s", topic);
    const char *const ours[] = {"transactional.id", txn_id, NULL};
    int rc = new_client(k, RD_KAFKA_PRODUCER, ours, &k->writer, err, size);
    if (rc)
        return rc;
    rd_kafka_error_t *e = rd_kafka_init_transactions(k->writer, k->timeout_ms);
    return e ? txn_error(e, "cannot start the transactional producer", err, size) : 0;
}

int grow_kafka_partition_count(grow_kafka *k, const char *topic, int32_t *count, char *err,
                               size_t size)
{
    /* Every topic, never one by name: a request by name may create it where brokers
     * auto-create topics. */
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata(k->reader, 1, NULL, &md, k->timeout_ms);
    if (e) {
        snprintf(err, size, "cannot read the cluster's metadata from %s: %s", k->bootstrap,
                 rd_kafka_err2str(e));
        return GROW_KAFKA_FAILED;
    }
    *count = 0;
    for (int i = 0; i < md->topic_cnt; i++)
        if (strcmp(md->topics[i].topic, topic) == 0 && !md->topics[i].err)
            *count = md->topics[i].partition_cnt;
    rd_kafka_metadata_destroy(md);
    return 0;
}

/* Waits for the admin result event of type `type` on q. */
static rd_kafka_event_t *admin_wait(rd_kafka_queue_t *q, rd_kafka_event_type_t type, int ms)
{
    rd_kafka_event_t *ev;
    while ((ev = rd_kafka_queue_poll(q, ms)) != NULL) {
        if (rd_kafka_event_type(ev) == type)
            return ev;
        rd_kafka_event_destroy(ev);
    }
    return NULL;
}

/* The one topic result of a CreateTopics or CreatePartitions event; returns its error. */
static rd_kafka_resp_err_t topic_result(rd_kafka_event_t *ev, const char **why)
{
    rd_kafka_resp_err_t e = rd_kafka_event_error(ev);
    *why = rd_kafka_event_error_string(ev);
    if (e)
        return e;
    const rd_kafka_topic_result_t **res;
    size_t n = 0;
    if (rd_kafka_event_type(ev) == RD_KAFKA_EVENT_CREATETOPICS_RESULT)
        res = rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
    else
        res =
            rd_kafka_CreatePartitions_result_topics(rd_kafka_event_CreatePartitions_result(ev), &n);
    if (n != 1)
        return *why = "no answer for the topic", RD_KAFKA_RESP_ERR__FAIL;
    e = rd_kafka_topic_result_error(res[0]);
    *why = rd_kafka_topic_result_error_string(res[0]);
    if (!*why)
        *why = rd_kafka_err2str(e);
    return e;
}

int grow_kafka_ensure_record_topic(grow_kafka *k, char *err, size_t size)
{
    int32_t count = 0;
    int rc = grow_kafka_partition_count(k, RL__GROWTH_TOPIC, &count, err, size);
    if (rc || count > 0)
        return rc;
    char why[512];
    rd_kafka_NewTopic_t *t = rd_kafka_NewTopic_new(RL__GROWTH_TOPIC, 1, -1, why, sizeof why);
    if (!t || rd_kafka_NewTopic_set_config(t, "cleanup.policy", "compact")) {
        snprintf(err, size, "cannot describe %s: %s", RL__GROWTH_TOPIC, t ? "config" : why);
        rd_kafka_NewTopic_destroy(t);
        return GROW_KAFKA_FAILED;
    }
    rd_kafka_queue_t *q = rd_kafka_queue_new(k->reader);
    rd_kafka_AdminOptions_t *o =
        rd_kafka_AdminOptions_new(k->reader, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_AdminOptions_set_request_timeout(o, k->timeout_ms, why, sizeof why);
    rd_kafka_CreateTopics(k->reader, &t, 1, o, q);
    rd_kafka_event_t *ev = admin_wait(q, RD_KAFKA_EVENT_CREATETOPICS_RESULT, k->timeout_ms + 5000);
    rc = 0;
    if (!ev) {
        snprintf(err, size, "creating %s: no answer", RL__GROWTH_TOPIC);
        rc = GROW_KAFKA_FAILED;
    } else {
        const char *reason;
        rd_kafka_resp_err_t e = topic_result(ev, &reason);
        if (e && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
            snprintf(err, size, "cannot create %s (1 partition, cleanup.policy=compact): %s",
                     RL__GROWTH_TOPIC, reason ? reason : rd_kafka_err2str(e));
            rc = GROW_KAFKA_FAILED;
        }
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_NewTopic_destroy(t);
    rd_kafka_queue_destroy(q);
    return rc;
}

void grow_log_free(grow_log *log)
{
    for (size_t i = 0; i < log->n; i++) {
        free(log->entries[i].key);
        free(log->entries[i].value);
    }
    free(log->entries);
    log->entries = NULL;
    log->n = 0;
}

const grow_entry *grow_log_find(const grow_log *log, const char *key)
{
    for (size_t i = 0; i < log->n; i++)
        if (strcmp(log->entries[i].key, key) == 0)
            return &log->entries[i];
    return NULL;
}

/* Takes one record into the log: the key's earlier value goes, the new one is appended (the
 * order of last writes); a tombstone only removes. */
static int log_take(grow_log *log, const rd_kafka_message_t *m, const char *topic)
{
    size_t tlen = strlen(topic);
    if (!m->key || m->key_len <= tlen || memcmp(m->key, topic, tlen) != 0 ||
        ((const char *)m->key)[tlen] != '/')
        return 0;
    char *key = malloc(m->key_len + 1);
    if (!key)
        return -1;
    memcpy(key, m->key, m->key_len);
    key[m->key_len] = 0;
    for (size_t i = 0; i < log->n; i++)
        if (strcmp(log->entries[i].key, key) == 0) {
            free(log->entries[i].key);
            free(log->entries[i].value);
            memmove(&log->entries[i], &log->entries[i + 1],
                    (log->n - i - 1) * sizeof *log->entries);
            log->n--;
            break;
        }
    if (!m->payload) {
        free(key);
        return 0;
    }
    grow_entry *grown = realloc(log->entries, (log->n + 1) * sizeof *grown);
    char *value = malloc(m->len + 1);
    if (!grown || !value) {
        free(key);
        free(value);
        if (grown)
            log->entries = grown;
        return -1;
    }
    log->entries = grown;
    memcpy(value, m->payload, m->len);
    value[m->len] = 0;
    rd_kafka_timestamp_type_t tt;
    log->entries[log->n++] =
        (grow_entry){key, value, m->len, m->offset, rd_kafka_message_timestamp(m, &tt)};
    return 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int grow_kafka_read_log(grow_kafka *k, const char *topic, grow_log *out, char *err, size_t size)
{
    memset(out, 0, sizeof *out);
    /* librdkafka's simple consumer: a partition read without a group (rd_kafka_assign needs
     * one in librdkafka 2.0.2). */
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(k->reader, RL__GROWTH_TOPIC, NULL);
    if (!rkt || rd_kafka_consume_start(rkt, 0, RD_KAFKA_OFFSET_BEGINNING) != 0) {
        snprintf(err, size, "cannot read %s: %s", RL__GROWTH_TOPIC,
                 rd_kafka_err2str(rd_kafka_last_error()));
        if (rkt)
            rd_kafka_topic_destroy(rkt);
        return GROW_KAFKA_FAILED;
    }
    /* To the end: the partition's end event (its last stable offset, read committed). */
    int64_t deadline = now_ms() + k->timeout_ms;
    int rc = GROW_KAFKA_FAILED;
    snprintf(err, size, "reading %s: its end not reached within %d ms", RL__GROWTH_TOPIC,
             k->timeout_ms);
    while (now_ms() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consume(rkt, 0, 100);
        if (!m)
            continue;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            rd_kafka_message_destroy(m);
            rc = 0;
            break;
        }
        if (m->err) {
            /* Fail closed: a failed read is never "no record". A broken connection is
             * retried within the time left. */
            rd_kafka_resp_err_t me = m->err;
            snprintf(err, size, "reading %s: %s", RL__GROWTH_TOPIC, rd_kafka_message_errstr(m));
            rd_kafka_message_destroy(m);
            if (me != RD_KAFKA_RESP_ERR__TRANSPORT)
                break;
            continue;
        }
        int taken = log_take(out, m, topic);
        rd_kafka_message_destroy(m);
        if (taken) {
            snprintf(err, size, "reading %s: out of memory", RL__GROWTH_TOPIC);
            break;
        }
    }
    rd_kafka_consume_stop(rkt, 0);
    rd_kafka_topic_destroy(rkt);
    if (rc)
        grow_log_free(out);
    return rc;
}

int grow_kafka_write(grow_kafka *k, const char *key, const char *value, int64_t timestamp_ms,
                     int (*check)(void *ctx), void *ctx, char *err, size_t size)
{
    rd_kafka_error_t *e = rd_kafka_begin_transaction(k->writer);
    if (e)
        return txn_error(e, "cannot begin a transaction", err, size);
    /* The check inside the transaction, before the record is produced: a reader may see an
     * uncommitted record where no transaction markers are written (the mock cluster). */
    if (check && check(ctx)) {
        snprintf(err, size, "the record was not written");
        rd_kafka_error_t *a = rd_kafka_abort_transaction(k->writer, k->timeout_ms);
        if (a)
            rd_kafka_error_destroy(a);
        return GROW_KAFKA_REFUSED;
    }
    rd_kafka_resp_err_t pe = rd_kafka_producev(
        k->writer, RD_KAFKA_V_TOPIC(RL__GROWTH_TOPIC), RD_KAFKA_V_PARTITION(0),
        RD_KAFKA_V_KEY(key, strlen(key)), RD_KAFKA_V_VALUE((void *)value, strlen(value)),
        RD_KAFKA_V_TIMESTAMP(timestamp_ms > 0 ? timestamp_ms : 0),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
    if (pe) {
        snprintf(err, size, "cannot write the record: %s", rd_kafka_err2str(pe));
        rd_kafka_error_t *a = rd_kafka_abort_transaction(k->writer, k->timeout_ms);
        if (a)
            rd_kafka_error_destroy(a);
        return GROW_KAFKA_FAILED;
    }
    e = rd_kafka_commit_transaction(k->writer, k->timeout_ms);
    if (!e)
        return 0;
    if (rd_kafka_error_txn_requires_abort(e)) {
        rd_kafka_error_t *a = rd_kafka_abort_transaction(k->writer, k->timeout_ms);
        if (a)
            rd_kafka_error_destroy(a);
    }
    return txn_error(e, "cannot commit the record's transaction", err, size);
}

int grow_kafka_high_watermarks(grow_kafka *k, const char *topic, int32_t n, int64_t *out, char *err,
                               size_t size)
{
    /* rd_kafka_offsets_for_times, not rd_kafka_query_watermark_offsets: the latter waits for
     * the leader's answer however long it takes (librdkafka 2.0.2 checks no deadline), so a
     * leader that is down held it until the broker came back. ListOffsets at the latest
     * timestamp answers the high watermark (read uncommitted), and the call gives up at the
     * timeout. */
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(n > 0 ? n : 1);
    for (int32_t p = 0; p < n; p++)
        rd_kafka_topic_partition_list_add(parts, topic, p)->offset = RD_KAFKA_OFFSET_END;
    rd_kafka_resp_err_t e = rd_kafka_offsets_for_times(k->marks, parts, k->timeout_ms);
    int rc = 0;
    if (e) {
        snprintf(err, size, "cannot read the high watermarks of %s within %d ms: %s", topic,
                 k->timeout_ms, rd_kafka_err2str(e));
        rc = GROW_KAFKA_FAILED;
    }
    for (int32_t p = 0; rc == 0 && p < n; p++) {
        const rd_kafka_topic_partition_t *t = rd_kafka_topic_partition_list_find(parts, topic, p);
        if (!t || t->err || t->offset < 0) {
            snprintf(err, size, "cannot read the high watermark of %s [%d]: %s", topic, (int)p,
                     rd_kafka_err2str(t ? t->err : RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION));
            rc = GROW_KAFKA_FAILED;
        } else {
            out[p] = t->offset;
        }
    }
    rd_kafka_topic_partition_list_destroy(parts);
    return rc;
}

int grow_kafka_create_partitions(grow_kafka *k, const char *topic, int32_t total, char *err,
                                 size_t size)
{
    char why[512];
    rd_kafka_NewPartitions_t *np =
        rd_kafka_NewPartitions_new(topic, (size_t)total, why, sizeof why);
    if (!np) {
        snprintf(err, size, "cannot describe the new partitions: %s", why);
        return GROW_KAFKA_FAILED;
    }
    rd_kafka_queue_t *q = rd_kafka_queue_new(k->reader);
    rd_kafka_AdminOptions_t *o =
        rd_kafka_AdminOptions_new(k->reader, RD_KAFKA_ADMIN_OP_CREATEPARTITIONS);
    rd_kafka_AdminOptions_set_request_timeout(o, k->timeout_ms, why, sizeof why);
    rd_kafka_CreatePartitions(k->reader, &np, 1, o, q);
    rd_kafka_event_t *ev =
        admin_wait(q, RD_KAFKA_EVENT_CREATEPARTITIONS_RESULT, k->timeout_ms + 5000);
    int rc = 0;
    if (!ev) {
        snprintf(err, size, "CreatePartitions of %s: no answer", topic);
        rc = GROW_KAFKA_FAILED;
    } else {
        const char *reason;
        rd_kafka_resp_err_t e = topic_result(ev, &reason);
        if (e) {
            snprintf(err, size, "CreatePartitions of %s to %d: %s", topic, (int)total,
                     reason ? reason : rd_kafka_err2str(e));
            rc = GROW_KAFKA_FAILED;
        }
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_NewPartitions_destroy(np);
    rd_kafka_queue_destroy(q);
    return rc;
}
