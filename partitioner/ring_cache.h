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
    int error;                   /* why there is no ring (RL_ETOOBIG): remembered, never retried */
    rl_ring_t *ring;             /* NULL when error is set */
    struct rl__ring_entry *next; /* older entries; never changes once published */
} rl__ring_entry;

typedef struct rl__ring_cache {
    _Atomic(rl__ring_entry *) head; /* newest first: a topic that grew finds its ring first */
    pthread_mutex_t build_lock;     /* serialises builds and guards count */
    unsigned count;
    _Atomic uint64_t builds;
    const char *profile; /* static profile name */
    uint32_t vnodes;     /* per partition, or RL_VNODES_PROFILE */
} rl__ring_cache;

int rl__ring_cache_init(rl__ring_cache *c, const char *profile, uint32_t vnodes);
void rl__ring_cache_destroy(rl__ring_cache *c);

/* The entry for partition_cnt (>= 1), building its ring if needed: one with a ring, or one
 * that remembers why there can be none (e->error). NULL, with *err set, when no entry could be
 * made (RL_ERANGE: RL_KAFKA_RINGS_MAX entries already; RL_ENOMEM). */
const rl__ring_entry *rl__ring_cache_obtain(rl__ring_cache *c, int32_t partition_cnt, int *err);

/* The ring for partition_cnt (>= 1), building it if needed. Errors: RL_ERANGE (the cache
 * already holds RL_KAFKA_RINGS_MAX entries), RL_ETOOBIG (remembered: asking again is cheap),
 * RL_ENOMEM (not remembered). */
int rl__ring_cache_get(rl__ring_cache *c, int32_t partition_cnt, const rl_ring_t **ring);

/* The entry of partition_cnt if there is one, else NULL. Lock-free, allocation-free. */
static inline const rl__ring_entry *rl__ring_cache_find(rl__ring_cache *c, int32_t partition_cnt)
{
    for (const rl__ring_entry *e = atomic_load_explicit(&c->head, memory_order_acquire); e;
         e = e->next)
        if (e->partition_cnt == partition_cnt)
            return e;
    return NULL;
}

/* Builds the ring of `ringlane route --partitions n`: members "0".."n-1", weight 1. */
int rl__partition_ring_build(int32_t n, const char *profile, uint32_t vnodes, rl_ring_t **out);

#endif
