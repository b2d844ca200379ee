/* The ring partitioner: the librdkafka callback and its lifecycle. */
#include "partitioner_internal.h"
#include "ringlane/error.h"
#include "ringlane/hash.h"

#include <stdlib.h>
#include <time.h>

int rl_kafka_partitioner_new(const rl_kafka_partitioner_options *opts, rl_kafka_partitioner_t **out)
{
    if (!out)
        return RL_EINVAL;
    *out = NULL;
    rl_kafka_partitioner_options o;
    int rc = rl__kafka_options_check(opts, &o);
    if (rc)
        return rc;
    rl_kafka_partitioner_t *p = calloc(1, sizeof *p);
    if (!p)
        return RL_ENOMEM;
    p->opts = o;
    if (rl__ring_cache_init(&p->rings, o.profile, o.vnodes) != 0) {
        free(p);
        return RL_ENOMEM;
    }
    /* Random NULL-key partitions need no reproducibility, only a different stream per
     * partitioner: mix the clock and the address. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    atomic_init(&p->rand_state, rl_mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
                                         (uint64_t)(uintptr_t)p));
    atomic_init(&p->null_keys, 0);
    atomic_init(&p->skipped, 0);
    atomic_init(&p->fallbacks, 0);
    *out = p;
    return 0;
}

void rl_kafka_partitioner_destroy(rl_kafka_partitioner_t *p)
{
    if (!p)
        return;
    rl__ring_cache_destroy(&p->rings);
    free(p);
}

int rl__kafka_partitioner_reconfigure(rl_kafka_partitioner_t *p,
                                      const rl_kafka_partitioner_options *opts)
{
    rl_kafka_partitioner_options o;
    int rc = rl__kafka_options_check(opts, &o);
    if (rc)
        return rc;
    if (atomic_load_explicit(&p->rings.head, memory_order_acquire))
        return RL_ESTATE;
    p->opts = o;
    p->rings.profile = o.profile;
    p->rings.vnodes = o.vnodes;
    return 0;
}

void rl__kafka_partitioner_refuse(rl_kafka_partitioner_t *p)
{
    p->refused = 1;
}

int rl_kafka_partitioner_install(rl_kafka_partitioner_t *p, rd_kafka_topic_conf_t *topic_conf)
{
    if (!p || !topic_conf)
        return RL_EINVAL;
    rd_kafka_topic_conf_set_partitioner_cb(topic_conf, rl_kafka_partitioner_cb);
    rd_kafka_topic_conf_set_opaque(topic_conf, p);
    return 0;
}

static int available(const rd_kafka_topic_t *rkt, int32_t partition)
{
    return !rkt || rd_kafka_topic_partition_available(rkt, partition);
}

/* A uniformly random partition; with a topic, one of the available partitions when any is. */
static int32_t random_partition(rl_kafka_partitioner_t *p, const rd_kafka_topic_t *rkt,
                                int32_t partition_cnt)
{
    uint64_t r = rl_mix64(atomic_fetch_add_explicit(&p->rand_state, UINT64_C(0x9E3779B97F4A7C15),
                                                    memory_order_relaxed));
    int32_t first = (int32_t)((r & 0xFFFFFFFFu) % (uint32_t)partition_cnt);
    if (available(rkt, first))
        return first;
    /* Rare: count the available partitions, then take the k-th, so that the choice stays
     * uniform over them. Availability may change meanwhile; then keep the first pick. */
    int32_t n = 0;
    for (int32_t i = 0; i < partition_cnt; i++)
        n += available(rkt, i) != 0;
    if (n == 0)
        return first;
    int32_t k = (int32_t)((r >> 32) % (uint32_t)n);
    for (int32_t i = 0; i < partition_cnt; i++)
        if (available(rkt, i) && k-- == 0)
            return i;
    return first;
}

static int32_t null_key_partition(rl_kafka_partitioner_t *p, const rd_kafka_topic_t *rkt,
                                  int32_t partition_cnt)
{
    atomic_fetch_add_explicit(&p->null_keys, 1, memory_order_relaxed);
    if (p->opts.null_key == RL_KAFKA_NULL_KEY_FIXED)
        return p->opts.null_key_partition % partition_cnt;
    return random_partition(p, rkt, partition_cnt);
}

/* The first available partition clockwise from the key; the owner when none is. The walk
 * reads the ring's preference list in growing chunks, so a healthy cluster pays nothing and a
 * degraded one pays for as many partitions as it has to look at. */
static int32_t next_available(rl_kafka_partitioner_t *p, const rd_kafka_topic_t *rkt,
                              const rl_ring_t *ring, const void *key, size_t keylen, int32_t owner,
                              int32_t partition_cnt)
{
    static const size_t chunks[] = {4, 16, 64, 256};
    uint32_t list[256];
    size_t checked = 1; /* list[0] is the owner */
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        size_t want = chunks[c] < (size_t)partition_cnt ? chunks[c] : (size_t)partition_cnt;
        size_t got = 0;
        if (rl_ring_replicas(ring, key, keylen, list, want, &got) != 0)
            break;
        for (size_t i = checked; i < got; i++) {
            if (available(rkt, (int32_t)list[i])) {
                atomic_fetch_add_explicit(&p->skipped, 1, memory_order_relaxed);
                return (int32_t)list[i];
            }
        }
        checked = got;
        if (got < want || got >= (size_t)partition_cnt)
            break;
    }
    return owner;
}

/* Only when no ring can be had: the messages still flow, each key still to one partition. */
static int32_t fallback_partition(rl_kafka_partitioner_t *p, const void *key, size_t keylen,
                                  int32_t partition_cnt)
{
    atomic_fetch_add_explicit(&p->fallbacks, 1, memory_order_relaxed);
    return (int32_t)(rl_xxh3(key, keylen) % (uint64_t)partition_cnt);
}

/* The callback's body; rkt NULL means "every partition is available". */
static int32_t choose(rl_kafka_partitioner_t *p, const rd_kafka_topic_t *rkt, const void *key,
                      size_t keylen, int32_t partition_cnt)
{
    if (p->refused)
        return partition_cnt; /* out of range: librdkafka refuses the message */
    if (!key || keylen == 0)
        return null_key_partition(p, rkt, partition_cnt);
    /* The first use of a partition count builds its ring (once, whoever comes first). */
    const rl_ring_t *ring = rl__ring_cache_obtain(&p->rings, partition_cnt, NULL);
    if (!ring)
        return fallback_partition(p, key, keylen, partition_cnt);
    uint32_t node;
    int rc = rl_ring_lookup(ring, key, keylen, &node);
    if (rc == RL_EBADKEY)
        return null_key_partition(p, rkt, partition_cnt);
    if (rc != 0 || node >= (uint32_t)partition_cnt)
        return fallback_partition(p, key, keylen, partition_cnt);
    int32_t owner = (int32_t)node;
    if (p->opts.skip_unavailable && rkt && !available(rkt, owner))
        return next_available(p, rkt, ring, key, keylen, owner, partition_cnt);
    return owner;
}

int32_t rl_kafka_partitioner_cb(const rd_kafka_topic_t *rkt, const void *key, size_t keylen,
                                int32_t partition_cnt, void *rkt_opaque, void *msg_opaque)
{
    (void)msg_opaque;
    if (partition_cnt < 1)
        return RD_KAFKA_PARTITION_UA;
    rl_kafka_partitioner_t *p = rkt_opaque;
    if (!p) /* not installed through rl_kafka_partitioner_install: still a valid answer */
        return key ? (int32_t)(rl_xxh3(key, keylen) % (uint64_t)partition_cnt) : 0;
    return choose(p, rkt, key, keylen, partition_cnt);
}

int rl_kafka_partitioner_partition(rl_kafka_partitioner_t *p, const void *key, size_t keylen,
                                   int32_t partition_cnt, int32_t *partition)
{
    if (!p || !partition || (!key && keylen))
        return RL_EINVAL;
    if (partition_cnt < 1)
        return RL_ERANGE;
    *partition = choose(p, NULL, key, keylen, partition_cnt);
    return 0;
}

int rl_kafka_partitioner_ring(rl_kafka_partitioner_t *p, int32_t partition_cnt,
                              const rl_ring_t **ring)
{
    if (!p || !ring)
        return RL_EINVAL;
    if (partition_cnt < 1)
        return RL_ERANGE;
    return rl__ring_cache_get(&p->rings, partition_cnt, ring);
}

int rl_kafka_partitioner_get_options(const rl_kafka_partitioner_t *p,
                                     rl_kafka_partitioner_options *out)
{
    if (!p || !out)
        return RL_EINVAL;
    *out = p->opts;
    return 0;
}

int rl_kafka_partitioner_stats_get(const rl_kafka_partitioner_t *p, rl_kafka_partitioner_stats *out)
{
    if (!p || !out)
        return RL_EINVAL;
    rl_kafka_partitioner_t *m = (rl_kafka_partitioner_t *)p; /* atomics are read, not written */
    out->rings = atomic_load_explicit(&m->rings.builds, memory_order_relaxed);
    out->null_keys = atomic_load_explicit(&m->null_keys, memory_order_relaxed);
    out->skipped = atomic_load_explicit(&m->skipped, memory_order_relaxed);
    out->fallbacks = atomic_load_explicit(&m->fallbacks, memory_order_relaxed);
    return 0;
}
