/* SPDX-License-Identifier: BSD-2-Clause */
/* Internals of the Kafka partitioner layer. Not installed. */
#ifndef RINGLANE_PARTITIONER_INTERNAL_H
#define RINGLANE_PARTITIONER_INTERNAL_H

#include "ring_cache.h"
#include "ringlane/partitioner.h"

#include <pthread.h>
#include <stdatomic.h>

/* Per topic and partition count (skip.unavailable only): since when each partition has been
 * seen unavailable without a break (CLOCK_MONOTONIC ns, 0 = seen available or never asked). */
/* A partition's unavailability as the callback sees it: since when (0: not seen unavailable,
 * or seen available since), and when it was last seen so. */
typedef struct rl__down {
    _Atomic int64_t since, last;
} rl__down;

typedef struct rl__topic_watch {
    const void *rkt; /* librdkafka's topic, as the callback gets it */
    int32_t partition_cnt;
    struct rl__topic_watch *next; /* never changes once published */
    rl__down down[];
} rl__topic_watch;

/* A partition is seen only when one of its keys comes: one last seen unavailable longer ago
 * than this may have been available in between, so its count starts again (two short outages
 * of a quiet partition are not one long one). */
#define RL__SKIP_STALE_MS (10 * RL_KAFKA_SKIP_GRACE_MS)

#define RL__TOPIC_WATCH_MAX 4096 /* topics x partition counts watched; past it, no grace */

struct rl_kafka_partitioner {
    /* Fixed before the first callback (at rl_kafka_partitioner_new, or by the plugin while the
     * configuration is being set, before rd_kafka_new starts any thread), read-only after. */
    rl_kafka_partitioner_options opts; /* opts.profile is the profile's static name */

    int refused; /* set by the plugin before the client starts when its options never came to
                    go together: every keyed call answers partition_cnt (out of range) */

    rl__ring_cache rings;
    _Atomic uint64_t rand_state; /* SplitMix64 counter for random NULL-key partitions */
    _Atomic uint64_t null_keys;
    _Atomic uint64_t skipped;
    _Atomic uint64_t fallbacks;

    _Atomic(rl__topic_watch *) watched; /* newest first; freed with the partitioner */
    pthread_mutex_t watch_lock;         /* serialises additions, guards watch_count */
    unsigned watch_count;
};

/* Checks opts and writes the normalised copy (profile resolved to its static name); on error
 * writes why (without the property's name) and returns the RL_E* code. */
int rl__kafka_options_explain(const rl_kafka_partitioner_options *opts,
                              rl_kafka_partitioner_options *out, char *why, size_t size);

/* The same without the reason. */
int rl__kafka_options_check(const rl_kafka_partitioner_options *opts,
                            rl_kafka_partitioner_options *out);

/* Replaces the options of a partitioner that has built no ring yet (the plugin applies its
 * properties one by one). RL_ESTATE once a ring exists, or the check's error. */
int rl__kafka_partitioner_reconfigure(rl_kafka_partitioner_t *p,
                                      const rl_kafka_partitioner_options *opts);

/* Makes every keyed call refused from now on (see refused). Before any callback runs. */
void rl__kafka_partitioner_refuse(rl_kafka_partitioner_t *p);

#endif
