/* SPDX-License-Identifier: BSD-2-Clause */
/* The per-partition-count ring cache of the Kafka partitioner. */
#include "ring_cache.h"
#include "ringlane/error.h"
#include "ringlane/partitioner.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int rl__partition_ring_build(int32_t n, const char *profile, uint32_t vnodes, rl_ring_t **out)
{
    *out = NULL;
    if (n < 1)
        return RL_ERANGE;
    if ((uint32_t)n > RL_MEMBERS_MAX)
        return RL_ETOOBIG;
    /* All names in one buffer: at most 10 digits and a NUL each. */
    char *names = malloc((size_t)n * 11);
    rl_member *members = malloc((size_t)n * sizeof *members);
    if (!names || !members) {
        free(names);
        free(members);
        return RL_ENOMEM;
    }
    char *at = names;
    for (int32_t i = 0; i < n; i++) {
        members[i] = (rl_member){.name = at, .weight = 1, .zone = NULL};
        at += sprintf(at, "%ld", (long)i) + 1;
    }
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = profile;
    o.vnodes = vnodes;
    int rc = rl_ring_build(members, (size_t)n, &o, out);
    free(names);
    free(members);
    return rc;
}

int rl__ring_cache_init(rl__ring_cache *c, const char *profile, uint32_t vnodes)
{
    atomic_init(&c->head, NULL);
    atomic_init(&c->builds, 0);
    atomic_init(&c->full, 0);
    c->count = 0;
    c->profile = profile;
    c->vnodes = vnodes;
    return pthread_mutex_init(&c->build_lock, NULL) == 0 ? 0 : RL_ENOMEM;
}

void rl__ring_cache_destroy(rl__ring_cache *c)
{
    rl__ring_entry *e = atomic_load_explicit(&c->head, memory_order_acquire);
    while (e) {
        rl__ring_entry *next = e->next;
        rl_ring_free(atomic_load_explicit(&e->ring, memory_order_relaxed));
        free(e);
        e = next;
    }
    atomic_store_explicit(&c->head, NULL, memory_order_relaxed);
    pthread_mutex_destroy(&c->build_lock);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Builds e's ring (with build_lock held) and records the outcome in e. */
static void build_into(rl__ring_cache *c, rl__ring_entry *e)
{
    rl_ring_t *ring = NULL;
    int rc = rl__partition_ring_build(e->partition_cnt, c->profile, c->vnodes, &ring);
    if (rc == 0) {
        atomic_fetch_add_explicit(&c->builds, 1, memory_order_relaxed);
        atomic_store_explicit(&e->error, 0, memory_order_relaxed);
        /* Release: a reader that sees the ring sees it finished. */
        atomic_store_explicit(&e->ring, ring, memory_order_release);
        return;
    }
    atomic_store_explicit(&e->retry_ns, now_ns() + RL__RING_RETRY_NS, memory_order_relaxed);
    atomic_store_explicit(&e->error, rc, memory_order_relaxed);
}

/* What a found entry answers: its ring, or its remembered error (retried when due). */
static const rl_ring_t *answer(rl__ring_cache *c, rl__ring_entry *e, int *err)
{
    rl_ring_t *ring = atomic_load_explicit(&e->ring, memory_order_acquire);
    if (ring)
        return ring;
    int rc = atomic_load_explicit(&e->error, memory_order_relaxed);
    if (rc == RL_ENOMEM && now_ns() >= atomic_load_explicit(&e->retry_ns, memory_order_relaxed) &&
        pthread_mutex_trylock(&c->build_lock) == 0) { /* one retry at a time; others fall back */
        if (!atomic_load_explicit(&e->ring, memory_order_relaxed))
            build_into(c, e);
        pthread_mutex_unlock(&c->build_lock);
        ring = atomic_load_explicit(&e->ring, memory_order_acquire);
        if (ring)
            return ring;
        rc = atomic_load_explicit(&e->error, memory_order_relaxed);
    }
    if (err)
        *err = rc;
    return NULL;
}

const rl_ring_t *rl__ring_cache_obtain(rl__ring_cache *c, int32_t partition_cnt, int *err)
{
    rl__ring_entry *found = rl__ring_cache_find(c, partition_cnt);
    if (found)
        return answer(c, found, err);
    if (atomic_load_explicit(&c->full, memory_order_relaxed)) {
        if (err)
            *err = RL_ERANGE;
        return NULL;
    }
    pthread_mutex_lock(&c->build_lock);
    /* Another thread may have built it while this one waited. */
    found = rl__ring_cache_find(c, partition_cnt);
    int rc = 0;
    if (!found && c->count >= RL_KAFKA_RINGS_MAX) {
        atomic_store_explicit(&c->full, 1, memory_order_relaxed);
        rc = RL_ERANGE;
    }
    if (!found && rc == 0) {
        rl__ring_entry *e = calloc(1, sizeof *e);
        if (!e) {
            rc = RL_ENOMEM;
        } else {
            e->partition_cnt = partition_cnt;
            atomic_init(&e->ring, NULL);
            atomic_init(&e->error, 0);
            atomic_init(&e->retry_ns, 0);
            build_into(c, e);
            e->next = atomic_load_explicit(&c->head, memory_order_relaxed);
            /* Release: a reader that sees e also sees its fields and e->next. */
            atomic_store_explicit(&c->head, e, memory_order_release);
            c->count++;
            found = e;
        }
    }
    pthread_mutex_unlock(&c->build_lock);
    if (!found) {
        if (err)
            *err = rc;
        return NULL;
    }
    return answer(c, found, err);
}

int rl__ring_cache_get(rl__ring_cache *c, int32_t partition_cnt, const rl_ring_t **ring)
{
    int rc = 0;
    const rl_ring_t *r = rl__ring_cache_obtain(c, partition_cnt, &rc);
    if (!r)
        return rc;
    *ring = r;
    return 0;
}
