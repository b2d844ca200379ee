/* SPDX-License-Identifier: BSD-2-Clause */
/* One immutable ring per partition count, built on first use and kept until the cache is
 * destroyed. Finding a built ring is a lock-free walk of a short list; only building one takes
 * the mutex, so concurrent first uses of one partition count build it once. */
#ifndef RINGLANE_RING_CACHE_H
#define RINGLANE_RING_CACHE_H

#include "ringlane/ring.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rl__ring_entry {
    int32_t partition_cnt;
    /* The ring, or NULL with error saying why there is none. A build that failed is
     * remembered: RL_ETOOBIG for good, RL_ENOMEM until retry_ns (CLOCK_MONOTONIC), when the
     * next caller tries once more under the mutex and publishes the ring here if it succeeds. */
    _Atomic(rl_ring_t *) ring;
    _Atomic int error;
    _Atomic int64_t retry_ns;
    struct rl__ring_entry *next; /* older entries; never changes once published */
} rl__ring_entry;

#define RL__RING_RETRY_NS 1000000000 /* a build that ran out of memory is tried again after 1 s */

typedef struct rl__ring_cache {
    _Atomic(rl__ring_entry *) head; /* newest first: a topic that grew finds its ring first */
    pthread_mutex_t build_lock;     /* serialises builds and guards count */
    unsigned count;
    _Atomic int full; /* RL_KAFKA_RINGS_MAX entries: new partition counts fall back at once */
    _Atomic uint64_t builds;
    const char *profile; /* static profile name */
    uint32_t vnodes;     /* per partition, or RL_VNODES_PROFILE */
} rl__ring_cache;

int rl__ring_cache_init(rl__ring_cache *c, const char *profile, uint32_t vnodes);
void rl__ring_cache_destroy(rl__ring_cache *c);

/* The ring for partition_cnt (>= 1), building it if needed, or NULL with *err saying why
 * (RL_ERANGE: RL_KAFKA_RINGS_MAX entries already; RL_ETOOBIG; RL_ENOMEM). Only the first
 * call for a count, and a retry after RL__RING_RETRY_NS, take the mutex; every other call is
 * a lock-free walk, whatever the answer. */
const rl_ring_t *rl__ring_cache_obtain(rl__ring_cache *c, int32_t partition_cnt, int *err);

/* The ring for partition_cnt (>= 1), building it if needed. Errors: RL_ERANGE (the cache
 * already holds RL_KAFKA_RINGS_MAX entries), RL_ETOOBIG, RL_ENOMEM. */
int rl__ring_cache_get(rl__ring_cache *c, int32_t partition_cnt, const rl_ring_t **ring);

/* The entry of partition_cnt if there is one, else NULL. Lock-free, allocation-free. */
static inline rl__ring_entry *rl__ring_cache_find(rl__ring_cache *c, int32_t partition_cnt)
{
    for (rl__ring_entry *e = atomic_load_explicit(&c->head, memory_order_acquire); e; e = e->next)
        if (e->partition_cnt == partition_cnt)
            return e;
    return NULL;
}

/* Builds the ring of `ringlane route --partitions n`: members "0".."n-1", weight 1. */
int rl__partition_ring_build(int32_t n, const char *profile, uint32_t vnodes, rl_ring_t **out);

#endif
