/* SPDX-License-Identifier: BSD-2-Clause */
/* The published-snapshot holder: reference counts, with a grace period over the load-then-
 * count window (see include/ringlane/snapshot.h for why). All atomics are sequentially
 * consistent: the argument below needs one total order of the pointer swap, the epoch flip and
 * the readers' announcements, and on x86-64 it costs the same as acquire/release for RMWs. */
#define _POSIX_C_SOURCE 200809L
#include "ringlane/snapshot.h"
#include "ring_internal.h"
#include "ringlane/error.h"

#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdlib.h>

#define SHARDS 16u

/* The readers announced in each epoch parity, one cache line per shard. */
typedef struct shard {
    alignas(64) atomic_size_t in[2];
} shard;

struct rl_snapshot {
    _Atomic(rl_ring_t *) current;
    atomic_uint_fast64_t epoch; /* parity = epoch & 1 */
    pthread_mutex_t writer;     /* serializes publishers; readers never touch it */
    shard shards[SHARDS];
};

/* Threads spread over shards in the order they first read; any mapping is correct. */
static atomic_uint next_shard;
static _Thread_local unsigned thread_shard = UINT32_MAX;

static shard *my_shard(rl_snapshot_t *h)
{
    if (thread_shard == UINT32_MAX)
        thread_shard = atomic_fetch_add(&next_shard, 1) % SHARDS;
    return &h->shards[thread_shard];
}

/* Announces a reader in the current parity. The re-check makes sure the announcement was made
 * before any flip that happened since the epoch was read: a publish that flips later waits for
 * it; one that flipped in between is not waited on, so the announcement is withdrawn. */
static unsigned enter(shard *s, rl_snapshot_t *h)
{
    for (;;) {
        uint_fast64_t e = atomic_load(&h->epoch);
        atomic_fetch_add(&s->in[e & 1], 1);
        if (atomic_load(&h->epoch) == e)
            return (unsigned)(e & 1);
        atomic_fetch_sub(&s->in[e & 1], 1);
    }
}

static void leave(shard *s, unsigned parity)
{
    atomic_fetch_sub(&s->in[parity], 1);
}

/* Drops one reference; the last one frees the ring. */
static void unref(rl_ring_t *r)
{
    if (r && atomic_fetch_sub(&r->snap_refs, 1) == 1)
        rl_ring_free(r);
}

/* The holder's own reference: 0 -> 1, or RL_EBUSY when another holder has the ring. */
static int adopt(rl_ring_t *r)
{
    size_t none = 0;
    return atomic_compare_exchange_strong(&r->snap_refs, &none, 1) ? 0 : RL_EBUSY;
}

int rl_snapshot_create(rl_ring_t *ring, rl_snapshot_t **out)
{
    rl_error_detail_clear();
    if (!out)
        return rl_error_detail_set(RL_EINVAL, "out NULL: nowhere to put the holder");
    *out = NULL;
    rl_snapshot_t *h = aligned_alloc(alignof(rl_snapshot_t), sizeof *h);
    if (!h)
        return rl_error_detail_set(RL_ENOMEM, "out of memory: the holder (ring is still yours)");
    if (pthread_mutex_init(&h->writer, NULL) != 0) {
        free(h);
        return rl_error_detail_set(
            RL_ENOMEM, "out of memory: the holder's writer mutex (ring is still yours)");
    }
    atomic_init(&h->current, NULL);
    atomic_init(&h->epoch, 0);
    for (unsigned i = 0; i < SHARDS; i++) {
        atomic_init(&h->shards[i].in[0], 0);
        atomic_init(&h->shards[i].in[1], 0);
    }
    if (ring) {
        int rc = adopt(ring);
        if (rc) {
            pthread_mutex_destroy(&h->writer);
            free(h);
            return rl_error_detail_set(rc, "ring: already in a holder (a ring is published once)");
        }
        atomic_store(&h->current, ring);
    }
    *out = h;
    return 0;
}

int rl_snapshot_publish(rl_snapshot_t *h, rl_ring_t *ring)
{
    if (!h || !ring)
        return RL_EINVAL;
    int rc = adopt(ring);
    if (rc)
        return rc;
    pthread_mutex_lock(&h->writer);
    rl_ring_t *old = atomic_exchange(&h->current, ring);
    /* Readers that could have loaded `old` announced themselves in the parity of the epoch
     * before this flip; readers of the new parity load `ring` or later. */
    unsigned parity = (unsigned)(atomic_fetch_add(&h->epoch, 1) & 1);
    for (unsigned i = 0; i < SHARDS; i++)
        while (atomic_load(&h->shards[i].in[parity]) != 0)
            sched_yield();
    pthread_mutex_unlock(&h->writer);
    unref(old); /* readers that hold it keep it alive */
    return 0;
}

int rl_snapshot_acquire(rl_snapshot_t *h, const rl_ring_t **out)
{
    if (!h || !out)
        return RL_EINVAL;
    shard *s = my_shard(h);
    unsigned parity = enter(s, h);
    rl_ring_t *r = atomic_load(&h->current);
    if (r)
        atomic_fetch_add(&r->snap_refs, 1);
    leave(s, parity);
    *out = r;
    return r ? 0 : RL_EEMPTY;
}

void rl_snapshot_release(const rl_ring_t *ring)
{
    unref((rl_ring_t *)ring); /* the count is the one mutable part of a published ring */
}

int rl_snapshot_lookup(rl_snapshot_t *h, const void *key, size_t len, uint32_t *node)
{
    if (!h || !node)
        return RL_EINVAL;
    shard *s = my_shard(h);
    unsigned parity = enter(s, h);
    const rl_ring_t *r = atomic_load(&h->current);
    int rc = r ? rl_ring_lookup(r, key, len, node) : RL_EEMPTY;
    leave(s, parity);
    return rc;
}

int rl_snapshot_lookup_hash(rl_snapshot_t *h, uint64_t hash, uint32_t *node)
{
    if (!h || !node)
        return RL_EINVAL;
    shard *s = my_shard(h);
    unsigned parity = enter(s, h);
    const rl_ring_t *r = atomic_load(&h->current);
    int rc = r ? rl_ring_lookup_hash(r, hash, node) : RL_EEMPTY;
    leave(s, parity);
    return rc;
}

void rl_snapshot_free(rl_snapshot_t *h)
{
    if (!h)
        return;
    unref(atomic_load(&h->current));
    pthread_mutex_destroy(&h->writer);
    free(h);
}
