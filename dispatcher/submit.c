/* Submitting jobs: route by key, bounded queues, and waiting for room. */
#include "dispatch_internal.h"

#include <stdlib.h>

void rl__space_notify(rl_dispatcher_t *d)
{
    if (atomic_load(&d->space_waiters) > 0) {
        uv_mutex_lock(&d->space_mu);
        d->space_gen++;
        uv_cond_broadcast(&d->space_cv);
        uv_mutex_unlock(&d->space_mu);
    }
}

/* Notes a refusal by a lane (under its mutex): for on_capacity, and for the wake-up of a
 * submitter that will wait. The lane's worker reads both under the same mutex. */
static void refuse_lane(rl_dispatcher_t *d, rl__lane *l, bool waiting)
{
    atomic_fetch_add_explicit(&d->refused, 1, memory_order_relaxed);
    atomic_store(&l->refused, true);
    if (waiting)
        l->blocked = true;
}

/* Notes a refusal by max_jobs. The loop thread gives places back and then reads the flags;
 * here the flags are set and then the count is read (all sequentially consistent), so at least
 * one side sees the other: if places were given back before the flag was up, the count read
 * here shows it, and the submitter wakes the waiters itself (waiting) or has the loop look
 * again (on_capacity). */
static void refuse_global(rl_dispatcher_t *d, bool waiting)
{
    atomic_fetch_add_explicit(&d->refused, 1, memory_order_relaxed);
    atomic_store(&d->refused_global, true);
    if (waiting)
        atomic_store(&d->blocked_global, true);
    uint64_t held = atomic_load(&d->jobs);
    if (waiting && held <= rl__low_water(d->opts.max_jobs) &&
        atomic_exchange(&d->blocked_global, false))
        rl__space_notify(d);
    if (d->opts.on_capacity && held <= d->opts.max_jobs / 2)
        uv_async_send(&d->async); /* rl__check_capacity runs on the loop */
}

/* Takes a place in max_jobs if one is free. Never counts past the bound, not even for a
 * moment: the count is what the statistics show, and what the wake-ups are decided on. */
static bool take_place(rl_dispatcher_t *d)
{
    uint_fast64_t held = atomic_load(&d->jobs);
    do {
        if (held >= d->opts.max_jobs)
            return false;
    } while (!atomic_compare_exchange_weak(&d->jobs, &held, held + 1));
    return true;
}

/* One attempt: RL_EAGAIN when there is no room. */
static int submit_once(rl_dispatcher_t *d, uint64_t hash, void *data, int64_t tag, bool waiting)
{
    if (atomic_load_explicit(&d->closing, memory_order_relaxed))
        return RL_ECLOSED;
    rl__job *j = malloc(sizeof *j);
    if (!j)
        return RL_ENOMEM;
    j->pub = (rl_dispatch_job){.data = data, .tag = tag, .hash = hash};
    j->next = NULL;
    j->outcome = 0;
    j->submit_ns = 0;

    int rc = 0;
    bool global_refusal = false;
    pthread_rwlock_rdlock(&d->route_lock);
    if (atomic_load_explicit(&d->closing, memory_order_relaxed)) {
        rc = RL_ECLOSED;
    } else if (d->route.n == 0) {
        rc = RL_ESTATE; /* no lanes */
    } else {
        rl__lane *l = d->route.lanes[rl__route_node(&d->route, hash)];
        uv_mutex_lock(&l->mu);
        if (l->queue.len + l->parked >= d->opts.lane_capacity) {
            rc = RL_EAGAIN;
            refuse_lane(d, l, waiting);
        } else if (rl__lq_reserve(&l->queue, l->queue.len + l->parked + 1) != 0) {
            rc = RL_ENOMEM; /* room for the job wherever it lands: queue or parked */
        } else if (!take_place(d)) {
            /* Over the memory bound: refuse_global (after the unlocks) makes sure the wake-up
             * this refusal waits for is not missed. */
            rc = RL_EAGAIN;
            global_refusal = true;
        } else {
            /* Taken under the lane's mutex, so a key's sequence numbers rise with its order. */
            j->pub.seq = atomic_fetch_add_explicit(&d->seq, 1, memory_order_relaxed);
            /* Latency statistics sample one job in 8 (the first, then every 8th): a clock read
             * per job costs more than the rest of an empty job's bookkeeping. */
            if ((j->pub.seq & 7) == 0)
                j->submit_ns = uv_hrtime();
            rl__fence *f = rl__fence_for(l, hash);
            if (f) {
                rl__jobq_push(&f->parked, j);
                l->parked++;
            } else {
                rl__lq_push(&l->queue, j);
                rl__lane_ready(l); /* an idle lane: an executor takes it */
            }
            rl__lane_set_depth(l);
        }
        uv_mutex_unlock(&l->mu);
    }
    pthread_rwlock_unlock(&d->route_lock);
    if (global_refusal)
        refuse_global(d, waiting);
    if (rc)
        free(j);
    return rc;
}

static int hash_key(rl_dispatcher_t *d, const void *key, size_t key_len, uint64_t *hash)
{
    if (!d || (!key && key_len))
        return RL_EINVAL;
    return rl_ring_hash_key(d->hash_ring, key, key_len, hash);
}

int rl_dispatch_try_submit(rl_dispatcher_t *d, const void *key, size_t key_len, void *data,
                           int64_t tag)
{
    if (!d)
        return RL_EINVAL;
    rl__enter(d);
    uint64_t hash;
    int rc = hash_key(d, key, key_len, &hash);
    if (!rc)
        rc = submit_once(d, hash, data, tag, false);
    rl__leave(d);
    return rc;
}

static int submit_waiting(rl_dispatcher_t *d, uint64_t hash, void *data, int64_t tag,
                          int64_t timeout_ms);

int rl_dispatch_submit(rl_dispatcher_t *d, const void *key, size_t key_len, void *data, int64_t tag,
                       int64_t timeout_ms)
{
    if (!d)
        return RL_EINVAL;
    rl__enter(d);
    uint64_t hash;
    int rc = hash_key(d, key, key_len, &hash);
    if (!rc)
        rc = submit_once(d, hash, data, tag, false); /* the common case: there is room */
    if (rc == RL_EAGAIN && !rl__on_loop_thread(d) && rl__worker_of != d)
        rc = submit_waiting(d, hash, data, tag, timeout_ms);
    rl__leave(d);
    return rc;
}

static int submit_waiting(rl_dispatcher_t *d, uint64_t hash, void *data, int64_t tag,
                          int64_t timeout_ms)
{
    int rc;
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : rl__deadline_after_ms((uint64_t)timeout_ms);
    /* Registered before each attempt: whoever makes room after the attempt looked sees us. */
    atomic_fetch_add(&d->space_waiters, 1);
    for (;;) {
        uv_mutex_lock(&d->space_mu);
        uint64_t gen = d->space_gen;
        uv_mutex_unlock(&d->space_mu);
        rc = submit_once(d, hash, data, tag, true);
        if (rc != RL_EAGAIN)
            break;
        uv_mutex_lock(&d->space_mu);
        while (d->space_gen == gen && !atomic_load(&d->closing) && uv_hrtime() < deadline)
            rl__cond_wait_until(&d->space_cv, &d->space_mu, deadline);
        bool expired = d->space_gen == gen && uv_hrtime() >= deadline;
        uv_mutex_unlock(&d->space_mu);
        if (expired) {
            rc = RL_ETIMEDOUT;
            break;
        }
    }
    atomic_fetch_sub(&d->space_waiters, 1);
    return rc;
}
