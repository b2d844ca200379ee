/* SPDX-License-Identifier: BSD-2-Clause */
/* What `ringlane grow` asks of Kafka: the topic's partition count, the growth records of
 * __ringlane_growth (read committed, from the beginning to the end), a record written in a
 * transaction, the old partitions' high watermarks (read uncommitted), CreateTopics and
 * CreatePartitions. Each call answers 0, or GROW_KAFKA_FAILED / GROW_KAFKA_FENCED with the
 * reason in err. */
#ifndef RINGLANE_CLI_GROW_KAFKA_H
#define RINGLANE_CLI_GROW_KAFKA_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

#define GROW_KAFKA_FAILED (-1)  /* a request failed or timed out */
#define GROW_KAFKA_FENCED (-2)  /* another run's producer has the transactional id now */
#define GROW_KAFKA_REFUSED (-3) /* a write's check before its commit said no */

typedef struct grow_kafka {
    rd_kafka_t *reader; /* no group, read_committed: records, metadata, the admin API */
    rd_kafka_t *marks;  /* no group, read_uncommitted: the high watermarks of the seal */
    rd_kafka_t *writer; /* the transactional producer (grow_kafka_writer_init), or NULL */
    const char *bootstrap;
    const char *const *props; /* -X name=value pairs, as given */
    size_t nprops;
    int timeout_ms; /* for each request */
} grow_kafka;

/* One growth record as read: the last value of its key, and where and when it was written. */
typedef struct grow_entry {
    char *key;
    char *value; /* terminated; a NUL inside is refused by the codec (value_len says so) */
    size_t value_len;
    int64_t offset;
    int64_t timestamp_ms; /* the record's CreateTime (-1 when unknown) */
} grow_entry;

typedef struct grow_log {
    grow_entry *entries; /* in the order of their last write */
    size_t n;
} grow_log;

/* The clients (reader and marks). A property -X refuses is a usage error: returns 2 with the
 * property named in err; other failures GROW_KAFKA_FAILED. */
int grow_kafka_open(grow_kafka *k, const char *bootstrap, const char *const *props, size_t nprops,
                    int timeout_ms, char *err, size_t size);
void grow_kafka_close(grow_kafka *k);

/* The transactional producer with transactional.id ringlane-grow.<topic>, initialised:
 * older producers of the same id are fenced from here on. */
int grow_kafka_writer_init(grow_kafka *k, const char *topic, char *err, size_t size);

/* *count: the topic's partitions, 0 when the topic does not exist. */
int grow_kafka_partition_count(grow_kafka *k, const char *topic, int32_t *count, char *err,
                               size_t size);

/* Creates __ringlane_growth (1 partition, cleanup.policy=compact) when it is missing. */
int grow_kafka_ensure_record_topic(grow_kafka *k, char *err, size_t size);

/* Reads __ringlane_growth from its beginning to its end: the last record of every key that
 * starts with "<topic>/" (a tombstone removes the key). */
int grow_kafka_read_log(grow_kafka *k, const char *topic, grow_log *out, char *err, size_t size);
void grow_log_free(grow_log *log);
const grow_entry *grow_log_find(const grow_log *log, const char *key);

/* Writes key = value in one transaction (GROW_KAFKA_FENCED when fenced), its CreateTime
 * timestamp_ms (0: now). check(ctx), when given, runs in the transaction just before the record
 * is produced and committed: nonzero aborts the transaction and returns GROW_KAFKA_REFUSED (the
 * check reports why). */
int grow_kafka_write(grow_kafka *k, const char *key, const char *value, int64_t timestamp_ms,
                     int (*check)(void *ctx), void *ctx, char *err, size_t size);

/* The high watermarks of partitions 0..n-1 (read uncommitted: open transactions lie below),
 * within the request timeout even when a partition's leader is down. */
int grow_kafka_high_watermarks(grow_kafka *k, const char *topic, int32_t n, int64_t *out, char *err,
                               size_t size);

/* CreatePartitions: the topic to `total` partitions. */
int grow_kafka_create_partitions(grow_kafka *k, const char *topic, int32_t total, char *err,
                                 size_t size);

#endif
