/* The per-partition-count ring cache of the Kafka partitioner. */
#include "ring_cache.h"
#include "ringlane/error.h"
#include "ringlane/partitioner.h"

#include <stdio.h>
#include <stdlib.h>

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
        rl_ring_free(e->ring);
        free(e);
        e = next;
    }
    atomic_store_explicit(&c->head, NULL, memory_order_relaxed);
    pthread_mutex_destroy(&c->build_lock);
}

/* Publishes a new entry at the head. Called with build_lock held. */
static void publish(rl__ring_cache *c, rl__ring_entry *e)
{
    e->next = atomic_load_explicit(&c->head, memory_order_relaxed);
    /* Release: a reader that sees e also sees the finished ring and e->next. */
    atomic_store_explicit(&c->head, e, memory_order_release);
    c->count++;
}

const rl__ring_entry *rl__ring_cache_obtain(rl__ring_cache *c, int32_t partition_cnt, int *err)
{
    const rl__ring_entry *found = rl__ring_cache_find(c, partition_cnt);
    if (found)
        return found;
    pthread_mutex_lock(&c->build_lock);
    /* Another thread may have built it while this one waited. */
    found = rl__ring_cache_find(c, partition_cnt);
    int rc = 0;
    if (!found && c->count >= RL_KAFKA_RINGS_MAX)
        rc = RL_ERANGE;
    rl__ring_entry *e = NULL;
    if (!found && rc == 0 && !(e = calloc(1, sizeof *e)))
        rc = RL_ENOMEM;
    if (e) {
        e->partition_cnt = partition_cnt;
        rc = rl__partition_ring_build(partition_cnt, c->profile, c->vnodes, &e->ring);
        if (rc == 0)
            atomic_fetch_add_explicit(&c->builds, 1, memory_order_relaxed);
        e->error = rc;
        if (rc == 0 || rc == RL_ETOOBIG) { /* a ring, or a count that can never have one */
            publish(c, e);
            found = e;
        } else {
            free(e);
        }
    }
    pthread_mutex_unlock(&c->build_lock);
    if (!found && err)
        *err = rc;
    return found;
}

int rl__ring_cache_get(rl__ring_cache *c, int32_t partition_cnt, const rl_ring_t **ring)
{
    int rc = 0;
    const rl__ring_entry *e = rl__ring_cache_obtain(c, partition_cnt, &rc);
    if (!e)
        return rc;
    if (e->error)
        return e->error;
    *ring = e->ring;
    return 0;
}
