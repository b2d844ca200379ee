/* SPDX-License-Identifier: BSD-2-Clause */
/* ringlane: a librdkafka partitioner that places keys on a consistent hash ring.
 *
 * The nodes of the ring are the partitions 0..partition_cnt-1 (member names "0", "1", ...,
 * weight 1), built with the partitioner's profile and vnodes: exactly the ring that
 * `ringlane route --partitions N` builds, so node index == partition number and an operator can
 * predict placement from the command line. Growing a topic from P to P' partitions moves only
 * the keys that the new partitions' points claim (about (P'-P)/P' of them), all of them to the
 * new partitions, where hash(key) % P moves most keys.
 *
 * One ring is built per partition count, on first use, and kept as an immutable snapshot until
 * the partitioner is destroyed. The callback is safe to call from any number of threads at
 * once (application threads and librdkafka's own): finding a built ring takes no lock and
 * allocates nothing; only building a ring for a partition count not seen before takes a mutex.
 *
 * Keys: a non-empty key goes by the ring. A NULL or empty key, or one the profile cannot hash
 * (turnstone keys must start with 4 hex digits), follows the null-key policy: a random
 * available partition, or a fixed partition. librdkafka hands NULL keys to its sticky
 * partitioner and never calls a custom partitioner for them unless
 * `sticky.partitioning.linger.ms` is 0; empty keys always reach the callback.
 */
#ifndef RINGLANE_PARTITIONER_H
#define RINGLANE_PARTITIONER_H

#include "ringlane/common.h"
#include "ringlane/ring.h"

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_kafka_partitioner rl_kafka_partitioner_t;

/* Where NULL and empty keys go when the callback sees them. */
typedef enum rl_kafka_null_key {
    RL_KAFKA_NULL_KEY_RANDOM = 0, /* a random partition among the available ones */
    RL_KAFKA_NULL_KEY_FIXED = 1,  /* null_key_partition modulo the partition count */
} rl_kafka_null_key;

#define RL_KAFKA_PARTITION_MAX 2147483646 /* the largest partition number an option accepts */
#define RL_KAFKA_RINGS_MAX 1024u /* distinct partition counts one partitioner keeps rings for */
#define RL_KAFKA_DEFAULT_PROFILE "balanced" /* the profile when none is given */
#define RL_KAFKA_SKIP_GRACE_MS                                                                     \
    1000 /* skip.unavailable: how long a partition must have been                                  \
            unavailable before its keys go elsewhere */
#define RL_KAFKA_VNODES_MAX                                                                        \
    8388608u /* the largest vnodes any profile takes (envoy's ring size);                          \
                each profile takes its own range (rl_profile_info) */

typedef struct rl_kafka_partitioner_options {
    const char *profile;        /* NULL = RL_KAFKA_DEFAULT_PROFILE ("balanced"); see
                                   rl_profile_find(). "default" is ringlane 0.1's placement */
    uint32_t vnodes;            /* per partition, the profile's range (min_vnodes..max_vnodes,
                                   maglev: a prime; jump: none), or RL_VNODES_PROFILE */
    rl_kafka_null_key null_key; /* policy for NULL and empty keys */
    int32_t null_key_partition; /* with RL_KAFKA_NULL_KEY_FIXED: 0..RL_KAFKA_PARTITION_MAX */
    int skip_unavailable;       /* nonzero: when the owner partition has been unavailable for
                                   RL_KAFKA_SKIP_GRACE_MS, walk clockwise to the next available
                                   one (breaks per-key order while the owner is down; off by
                                   default). Until then its keys wait for it, as with skip off:
                                   librdkafka reports every partition unavailable for a moment
                                   after a client learns a topic, and during leader changes */
    int32_t partitions_used;    /* 0: every partition of the topic (the default); else the ring
                                   uses partitions 0..partitions_used-1 only, while the topic has
                                   at least that many (with fewer, it uses them all). For
                                   partitions created ahead of use, and to switch producers to a
                                   grown topic when the operator says so (docs/partitioner.md:
                                   growing a topic). 0..RL_KAFKA_PARTITION_MAX */
} rl_kafka_partitioner_options;

/* Counters since the partitioner was made (each read atomically; together not a snapshot). */
typedef struct rl_kafka_partitioner_stats {
    uint64_t rings;     /* rings built (one per partition count seen) */
    uint64_t null_keys; /* calls that followed the null-key policy */
    uint64_t skipped;   /* calls that skipped an unavailable owner partition */
    uint64_t fallbacks; /* calls answered by xxh3(key) % partition_cnt because no ring could be
                           had for their partition count: more than RL_POINTS_MAX points (a
                           partition count the options cannot serve), more than
                           RL_KAFKA_RINGS_MAX partition counts, or out of memory. A failed
                           build is remembered (out of memory: retried at most once a second),
                           never retried on every call */
} rl_kafka_partitioner_stats;

/* Fills opts with: no profile (RL_KAFKA_DEFAULT_PROFILE), the profile's vnodes, random
 * partitions for NULL and empty keys, skip.unavailable off. */
RL_EXTERN void rl_kafka_partitioner_options_init(rl_kafka_partitioner_options *opts);

/* Applies one property by name to opts, as the plugin does for "ringlane.<name>":
 *   profile            a profile name (rl_profile_at lists them)
 *   vnodes             1..RL_KAFKA_VNODES_MAX; with a profile set, the profile's range
 *   null.key           "random" or a partition number 0..RL_KAFKA_PARTITION_MAX
 *   skip.unavailable   "true" or "false" (also "1", "0")
 *   partitions.used    0 (every partition) or 1..RL_KAFKA_PARTITION_MAX
 * value NULL or "" restores the default (librdkafka passes an empty value as NULL). Values
 * that do not go together are refused by whichever property completes the pair: a profile
 * whose vnodes range excludes the vnodes set (maglev: not a prime; ketama: below 5; jump and
 * memento: any vnodes), skip.unavailable with a profile that is not a ring (maglev, jump,
 * memento). vnodes set while no profile is set is checked against the default profile by
 * rl_kafka_partitioner_new (a profile may still follow). On error returns RL_EINVAL (unknown name,
 * NULL opts or name), RL_EPROFILE, RL_ERANGE (a value that is no value of the property), RL_EVNODES
 * or RL_ENOTSUP (a pair that does not go together), leaves opts unchanged and writes a one-line
 * message naming the property, the value and why to errstr (when errstr_size > 0), and the same
 * line to rl_last_error_detail() (errstr or not; "" on success). */
RL_EXTERN int rl_kafka_partitioner_option_set(rl_kafka_partitioner_options *opts, const char *name,
                                              const char *value, char *errstr, size_t errstr_size);

/* Makes a partitioner; opts NULL means the defaults. The profile name is resolved here, so
 * opts need not outlive the call. Every option and pair that cannot give a working ring is
 * refused: RL_EINVAL (NULL out, bad null_key), RL_EPROFILE, RL_EVNODES (vnodes outside the
 * profile's range, not a prime for maglev, any for jump and memento), RL_ENOTSUP
 * (skip_unavailable with maglev, jump or memento), RL_ERANGE (null_key_partition), RL_ENOMEM;
 * *out is NULL then, and rl_last_error_detail() names the field as written in C, its value and the
 * reason ("vnodes 1000: profile maglev takes a prime 2..5000011 (its table size), got 1000"). */
RL_EXTERN int rl_kafka_partitioner_new(const rl_kafka_partitioner_options *opts,
                                       rl_kafka_partitioner_t **out);

/* Frees the partitioner and every ring it built. Call it only when no topic that uses it is
 * left (after rd_kafka_destroy() of every client it was installed for). NULL is a no-op. */
RL_EXTERN void rl_kafka_partitioner_destroy(rl_kafka_partitioner_t *p);

/* Installs the partitioner on a topic conf: sets rl_kafka_partitioner_cb as its partitioner
 * and p as its opaque (the topic opaque is how librdkafka passes state to a partitioner, so
 * the application must not set another opaque on this topic conf). Use it on the default topic
 * conf (rd_kafka_conf_set_default_topic_conf) to cover rd_kafka_producev(RD_KAFKA_V_TOPIC())
 * and topics created without a conf. Returns 0 or RL_EINVAL. */
RL_EXTERN int rl_kafka_partitioner_install(rl_kafka_partitioner_t *p,
                                           rd_kafka_topic_conf_t *topic_conf);

/* The partitioner callback (rd_kafka_topic_conf_set_partitioner_cb); rkt_opaque must be an
 * rl_kafka_partitioner_t. Returns a partition in 0..partition_cnt-1, or RD_KAFKA_PARTITION_UA
 * when partition_cnt < 1 (librdkafka never asks then). The only librdkafka function it calls
 * is rd_kafka_topic_partition_available(), and only for skip.unavailable and random NULL keys
 * (never when rkt is NULL). */
RL_EXTERN int32_t rl_kafka_partitioner_cb(const rd_kafka_topic_t *rkt, const void *key,
                                          size_t keylen, int32_t partition_cnt, void *rkt_opaque,
                                          void *msg_opaque);

/* The partition of a key for partition_cnt partitions, as the callback would choose it with
 * every partition available. NULL/empty keys follow the null-key policy (random: a random
 * partition). Errors: RL_EINVAL (NULL p or partition, key NULL with keylen > 0), RL_ERANGE
 * (partition_cnt < 1). Out-of-ring cases answer as the callback does (see fallbacks). */
RL_EXTERN int rl_kafka_partitioner_partition(rl_kafka_partitioner_t *p, const void *key,
                                             size_t keylen, int32_t partition_cnt,
                                             int32_t *partition);

/* The ring the partitioner uses for partition_cnt partitions, built now if needed. It stays
 * valid until rl_kafka_partitioner_destroy(). Errors: RL_EINVAL, RL_ERANGE (partition_cnt < 1
 * or RL_KAFKA_RINGS_MAX partition counts already cached), RL_ETOOBIG, RL_ENOMEM. */
RL_EXTERN int rl_kafka_partitioner_ring(rl_kafka_partitioner_t *p, int32_t partition_cnt,
                                        const rl_ring_t **ring);

/* The options in effect (the profile name points to static storage). RL_EINVAL on NULL. */
RL_EXTERN int rl_kafka_partitioner_get_options(const rl_kafka_partitioner_t *p,
                                               rl_kafka_partitioner_options *out);

RL_EXTERN int rl_kafka_partitioner_stats_get(const rl_kafka_partitioner_t *p,
                                             rl_kafka_partitioner_stats *out);

#ifdef __cplusplus
}
#endif
#endif
