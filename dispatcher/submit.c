/* SPDX-License-Identifier: BSD-2-Clause */
/* Submitting jobs: route by key, bounded queues, and waiting for room. */
#include "dispatch_internal.h"

#include <stdlib.h>

/* The submission path, inlined into its callers: calls cost a measurable share of an empty job
 * (bench/instructions_per_job.sh). */
#define RL__HOT_INLINE __attribute__((always_inline)) inline

void rl__space_notify(rl_dispatcher_t *d)
{
    if (atomic_load(&d->space_waiters) > 0) {
        rl__lock(&d->space_mu);
        d->space_gen++;
        uv_cond_broadcast(&d->space_cv);
        rl__unlock(&d->space_mu);
    }
}

/* Notes a refusal by a lane (under its mutex): for on_capacity, and for the wake-up of a
 * submitter that will wait. The lane's worker reads both under the same mutex. `count`: the
 * refusals to add to the statistics (rl_dispatch_submit_many counts its items itself). */
static void refuse_lane(rl_dispatcher_t *d, rl__lane *l, bool waiting, uint64_t count)
{
    atomic_fetch_add_explicit(&d->refused, count, memory_order_relaxed);
    rl__note_refused(d, l);
    if (waiting)
        l->blocked = true;
}

/* Notes a refusal by max_jobs. The loop thread gives places back and then reads the flags;
 * here the flags are set and then the count is read (all sequentially consistent), so at least
 * one side sees the other: if places were given back before the flag was up, the count read
 * here shows it, and the submitter wakes the waiters itself (waiting) or has the loop look
 * again (on_capacity). */
static void refuse_global(rl_dispatcher_t *d, bool waiting, uint64_t count)
{
    atomic_fetch_add_explicit(&d->refused, count, memory_order_relaxed);
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

/* A job to fill in: on the loop thread, an ended one kept for reuse if there is one. */
static rl__job *job_alloc(rl_dispatcher_t *d, bool on_loop)
{
    rl__job *j = NULL;
    if (on_loop) {
        d->loop_jobs++;
        j = rl__job_spare(d);
    }
    return j ? j : malloc(sizeof *j);
}

/* A job that was not queued after all. */
static void job_drop(rl_dispatcher_t *d, bool on_loop, rl__job *j)
{
    if (on_loop)
        rl__job_recycle(d, j);
    else
        free(j);
}

static void job_init(rl__job *j, void *data, int64_t tag, uint64_t hash)
{
    j->pub = (rl_dispatch_job){.data = data, .tag = tag, .hash = hash};
    j->next = NULL;
    j->outcome = 0;
    j->submit_ns = 0;
}

/* Under the lane's mutex, so a key's sequence numbers rise with its order. Latency statistics
 * sample one job in 8 (the first, then every 8th): a clock read per job costs more than the
 * rest of an empty job's bookkeeping. */
static void job_number(rl__job *j, uint64_t seq)
{
    j->pub.seq = seq;
    if ((seq & 7) == 0)
        j->submit_ns = uv_hrtime();
}

/* Under l->mu, with room kept: a new job goes behind its key's fence or parked retry at l if
 * there is one, else to the queue (true). */
RL__HOT_INLINE static bool place_job(rl__lane *l, rl__job *j)
{
    rl__lane_hold(l);
    if (!l->fences && !l->parks) { /* the common case: no key waits at this lane */
        rl__lq_push(&l->queue, j);
        return true;
    }
    uint64_t hash = j->pub.hash;
    rl__fence *f = rl__fence_for(l, hash);
    rl__park *pk = f || !l->parks ? NULL : rl__park_for(l, hash);
    if (f) {
        rl__jobq_push(&f->parked, j);
        l->parked++;
        return false;
    }
    if (pk) { /* the key waits for a retry: behind it */
        rl__jobq_push(&pk->later, j);
        l->parked++;
        return false;
    }
    rl__lq_push(&l->queue, j);
    return true;
}

/* One attempt: RL_EAGAIN when there is no room. On the loop thread (on_loop) the route is read
 * without its lock: only that thread changes it (lane changes, take_tag and close run there,
 * and call no callback while they hold the lock), so nothing can change it meanwhile. */
RL__HOT_INLINE static int submit_once(rl_dispatcher_t *d, const void *key, size_t key_len,
                                      uint64_t hash, void *data, int64_t tag, bool waiting,
                                      bool on_loop)
{
    if (atomic_load_explicit(&d->closing, memory_order_relaxed))
        return RL_ECLOSED;
    rl__job *j = job_alloc(d, on_loop);
    if (!j)
        return RL_ENOMEM;
    job_init(j, data, tag, hash);

    int rc = 0;
    bool global_refusal = false, rate_refusal = false;
    if (!on_loop)
        pthread_rwlock_rdlock(&d->route_lock);
    if (atomic_load_explicit(&d->closing, memory_order_relaxed)) {
        rc = RL_ECLOSED;
    } else if (d->route.n == 0) {
        rc = RL_ESTATE; /* no lanes */
    } else {
        rl__lane *l = d->route.lanes[rl__route_node(&d->route, hash)];
        rl__lock(&l->mu);
        if (l->queue.len + l->parked >= d->opts.lane_capacity) {
            rc = RL_EAGAIN;
            refuse_lane(d, l, waiting, 1);
        } else if (rl__lq_reserve(&l->queue, l->queue.len + l->parked + 1) != 0) {
            rc = RL_ENOMEM; /* room for the job wherever it lands: queue or parked */
        } else if (d->rate_on && !rl__rate_take(d, 1)) {
            rc = RL_EAGAIN; /* the rate limit: rl__rate_refused after the unlocks */
            rate_refusal = true;
        } else if (!take_place(d)) {
            /* Over the memory bound: refuse_global (after the unlocks) makes sure the wake-up
             * this refusal waits for is not missed. */
            if (d->rate_on)
                rl__rate_give_back(d, 1);
            rc = RL_EAGAIN;
            global_refusal = true;
        } else {
            job_number(j, atomic_fetch_add_explicit(&d->seq, 1, memory_order_relaxed));
            if (place_job(l, j))
                rl__lane_ready(l); /* an idle lane: an executor takes it */
            rl__lane_set_depth(l);
            if (d->hot) /* under the lane's mutex: counted before the job can end */
                rl__hot_add(d->hot, hash, key, key_len);
        }
        rl__unlock(&l->mu);
    }
    if (!on_loop)
        pthread_rwlock_unlock(&d->route_lock);
    if (global_refusal)
        refuse_global(d, waiting, 1);
    if (rate_refusal)
        rl__rate_refused(d, waiting, 1);
    if (rc)
        job_drop(d, on_loop, j);
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
    /* The loop thread's calls need no count: the close they would hold up runs there too. */
    bool on_loop = rl__on_loop_thread(d);
    if (!on_loop)
        rl__enter(d);
    uint64_t hash;
    int rc = hash_key(d, key, key_len, &hash);
    if (!rc)
        rc = submit_once(d, key, key_len, hash, data, tag, false, on_loop);
    if (!on_loop)
        rl__leave(d);
    return rc;
}

static int submit_waiting(rl_dispatcher_t *d, const void *key, size_t key_len, uint64_t hash,
                          void *data, int64_t tag, int64_t timeout_ms);

int rl_dispatch_submit(rl_dispatcher_t *d, const void *key, size_t key_len, void *data, int64_t tag,
                       int64_t timeout_ms)
{
    if (!d)
        return RL_EINVAL;
    bool on_loop = rl__on_loop_thread(d);
    if (!on_loop)
        rl__enter(d);
    uint64_t hash;
    int rc = hash_key(d, key, key_len, &hash);
    if (!rc)
        rc = submit_once(d, key, key_len, hash, data, tag, false, on_loop); /* mostly: room */
    if (rc == RL_EAGAIN && !on_loop && rl__worker_of != d)
        rc = submit_waiting(d, key, key_len, hash, data, tag, timeout_ms);
    if (!on_loop)
        rl__leave(d);
    return rc;
}

static int submit_waiting(rl_dispatcher_t *d, const void *key, size_t key_len, uint64_t hash,
                          void *data, int64_t tag, int64_t timeout_ms)
{
    int rc;
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : rl__deadline_after_ms((uint64_t)timeout_ms);
    /* Registered before each attempt: whoever makes room after the attempt looked sees us. */
    atomic_fetch_add(&d->space_waiters, 1);
    for (;;) {
        rl__lock(&d->space_mu);
        uint64_t gen = d->space_gen;
        rl__unlock(&d->space_mu);
        rc = submit_once(d, key, key_len, hash, data, tag, true, false);
        if (rc != RL_EAGAIN)
            break;
        rl__lock(&d->space_mu);
        while (d->space_gen == gen && !atomic_load(&d->closing) && uv_hrtime() < deadline)
            rl__cond_wait_until(&d->space_cv, &d->space_mu, deadline);
        bool expired = d->space_gen == gen && uv_hrtime() >= deadline;
        rl__unlock(&d->space_mu);
        if (expired) {
            rc = RL_ETIMEDOUT;
            break;
        }
    }
    atomic_fetch_sub(&d->space_waiters, 1);
    return rc;
}

/* --- a batch: rl_dispatch_submit_many --- */

/* Items handled together: each lane's lock is taken once for its items among them. */
#define BATCH 64

/* An item refused by the rate limit, inside a call: answered RL_EAGAIN, and counted as
 * rate_limited as well as refused. Not an RL_E* code, and not 1 (an item still waiting). */
#define RATE_CUT (-100)

/* Takes up to `want` places in max_jobs with one CAS, never past the bound; returns how many. */
static size_t take_places(rl_dispatcher_t *d, size_t want)
{
    uint_fast64_t held = atomic_load(&d->jobs), got;
    do {
        if (held >= d->opts.max_jobs)
            return 0;
        got = d->opts.max_jobs - held < want ? d->opts.max_jobs - held : want;
    } while (!atomic_compare_exchange_weak(&d->jobs, &held, held + got));
    return (size_t)got;
}

/* One call's state. The route stays as it is for the whole call (the route lock is held for
 * reading, or the call is on the loop thread, which alone changes it), so lanes are named by
 * their index in it. */
/* The lanes a call has cut, and the answer that cut each: an open-addressing set keyed by the
 * lane's index, made at the first cut and grown as lanes are cut, so its cost follows the cuts
 * and not the lane count. */
typedef struct cut_set {
    uint32_t *node1; /* the lane's index + 1; 0: an empty place */
    signed char *err;
    size_t cap, n; /* cap a power of two, kept at least twice n */
} cut_set;

/* One call's state. The route stays as it is for the whole call (the route lock is held for
 * reading, or the call is on the loop thread, which alone changes it), so lanes are named by
 * their index in it. */
typedef struct batch {
    rl_dispatcher_t *d;
    bool on_loop;
    int all_cut; /* max_jobs refused (RL_EAGAIN) or the rate limit (RATE_CUT): every item not
                    queued yet is refused */
    cut_set cut; /* the lanes cut and their answers */
    bool refused_global; /* refuse_global to call once the locks are let go */
    bool refused_rate;   /* rl__rate_refused to call once the locks are let go */
    size_t queued;
} batch;

static size_t cut_place(const cut_set *c, uint32_t node)
{
    size_t i = ((size_t)node * 0x9E3779B1u) & (c->cap - 1);
    while (c->node1[i] && c->node1[i] != node + 1)
        i = (i + 1) & (c->cap - 1);
    return i;
}

/* Makes room for one more lane; false when memory is short. */
static bool cut_room(cut_set *c)
{
    if (2 * (c->n + 1) <= c->cap)
        return true;
    size_t cap = c->cap ? 2 * c->cap : 16;
    cut_set g = {calloc(cap, sizeof *g.node1), calloc(cap, 1), cap, c->n};
    if (!g.node1 || !g.err) {
        free(g.node1);
        free(g.err);
        return false;
    }
    for (size_t i = 0; i < c->cap; i++) {
        if (!c->node1[i])
            continue;
        size_t k = cut_place(&g, c->node1[i] - 1);
        g.node1[k] = c->node1[i];
        g.err[k] = c->err[i];
    }
    free(c->node1);
    free(c->err);
    *c = g;
    return true;
}

/* Without memory to remember the lane, a cut cuts every lane. */
static void cut_lane(batch *b, uint32_t node, int err)
{
    cut_set *c = &b->cut;
    if (!cut_room(c)) {
        b->all_cut = err;
        return;
    }
    size_t i = cut_place(c, node);
    if (!c->node1[i]) {
        c->node1[i] = node + 1;
        c->n++;
    }
    c->err[i] = (signed char)err;
}

static int lane_cut(const batch *b, uint32_t node)
{
    if (b->all_cut)
        return b->all_cut;
    if (!b->cut.n)
        return 0;
    size_t i = cut_place(&b->cut, node);
    return b->cut.node1[i] ? b->cut.err[i] : 0;
}

/* The items of lane `node` among items[from..m), in order, that still wait (st == 1), under
 * its mutex: as many as it has room for are queued, the rest refused and the lane cut. */
static void queue_group(batch *b, const rl_dispatch_item *items, size_t from, size_t m,
                        const uint64_t *hash, const uint32_t *node, rl__job **job, int *st)
{
    rl_dispatcher_t *d = b->d;
    uint32_t n = node[from];
    rl__lane *l = d->route.lanes[n];
    size_t want = 0;
    for (size_t i = from; i < m; i++)
        want += st[i] == 1 && node[i] == n;
    rl__lock(&l->mu);
    size_t held = l->queue.len + l->parked, cap = d->opts.lane_capacity;
    /* The items in order: [0, got) queued, [got, allowed) refused by max_jobs, [allowed, take)
     * by the rate limit, [take, want) by the lane (full, or no memory for its queue). */
    size_t take = held >= cap ? 0 : cap - held < want ? cap - held : want;
    int lane_err = take < want ? RL_EAGAIN : 0;
    if (take && rl__lq_reserve(&l->queue, held + take) != 0) {
        take = 0;
        lane_err = RL_ENOMEM;
    } else if (take < want) {
        refuse_lane(d, l, false, 0);
    }
    size_t allowed = take && d->rate_on ? rl__rate_take(d, take) : take;
    if (allowed < take) {
        b->all_cut = RATE_CUT; /* the bucket is empty: nothing more is queued in this call */
        b->refused_rate = true;
    }
    size_t got = allowed ? take_places(d, allowed) : 0;
    if (got < allowed) {
        if (d->rate_on)
            rl__rate_give_back(d, allowed - got);
        b->all_cut = RL_EAGAIN; /* max_jobs: nothing more is queued in this call */
        b->refused_global = true;
    }
    uint64_t seq = got ? atomic_fetch_add_explicit(&d->seq, got, memory_order_relaxed) : 0;
    bool to_queue = false;
    size_t done = 0;
    for (size_t i = from; i < m; i++) {
        if (st[i] != 1 || node[i] != n)
            continue;
        if (done >= got) {
            st[i] = done < allowed ? RL_EAGAIN : done < take ? RATE_CUT : lane_err;
            done++;
            continue;
        }
        rl__job *j = job[i];
        job[i] = NULL;
        job_init(j, items[i].data, items[i].tag, hash[i]);
        job_number(j, seq++);
        to_queue |= place_job(l, j);
        if (d->hot)
            rl__hot_add(d->hot, hash[i], items[i].key, items[i].key_len);
        st[i] = 0;
        done++;
    }
    if (to_queue)
        rl__lane_ready(l);
    rl__lane_set_depth(l);
    rl__unlock(&l->mu);
    if (lane_err)
        cut_lane(b, n, lane_err); /* the other refusals cut every lane (all_cut) */
    b->queued += got;
}

/* Up to BATCH items. st[i]: 0 queued, 1 still waiting (inside), else the error. */
static void submit_chunk(batch *b, const rl_dispatch_item *items, size_t m, int *st)
{
    rl_dispatcher_t *d = b->d;
    uint64_t hash[BATCH];
    uint32_t node[BATCH];
    rl__job *job[BATCH];
    for (size_t i = 0; i < m; i++) {
        job[i] = NULL;
        st[i] = hash_key(d, items[i].key, items[i].key_len, &hash[i]);
        if (st[i])
            continue; /* a key that cannot be hashed: never queued, so no gap follows it */
        node[i] = rl__route_node(&d->route, hash[i]);
        st[i] = lane_cut(b, node[i]);
        if (st[i])
            continue;
        job[i] = job_alloc(d, b->on_loop);
        if (!job[i]) {
            st[i] = RL_ENOMEM;
            cut_lane(b, node[i], RL_ENOMEM);
            continue;
        }
        st[i] = 1;
    }
    for (size_t i = 0; i < m; i++) {
        if (st[i] != 1)
            continue;
        if (b->all_cut)
            st[i] = b->all_cut;
        else
            queue_group(b, items, i, m, hash, node, job, st);
    }
    for (size_t i = 0; i < m; i++)
        if (job[i])
            job_drop(d, b->on_loop, job[i]);
}

int rl_dispatch_submit_many(rl_dispatcher_t *d, const rl_dispatch_item *items, size_t n,
                            int *status, size_t *queued)
{
    if (queued)
        *queued = 0;
    if (!d || (!items && n))
        return RL_EINVAL;
    batch b = {.d = d, .on_loop = rl__on_loop_thread(d)};
    if (!b.on_loop) {
        rl__enter(d);
        pthread_rwlock_rdlock(&d->route_lock);
    }
    int first = 0;
    uint64_t refused = 0;      /* items answered RL_EAGAIN: each a refusal for room */
    uint64_t rate_limited = 0; /* of them, those the rate limit refused */
    if (atomic_load(&d->closing))
        b.all_cut = RL_ECLOSED;
    else if (d->route.n == 0)
        b.all_cut = RL_ESTATE;
    for (size_t at = 0; at < n; at += BATCH) {
        size_t m = n - at < BATCH ? n - at : BATCH;
        int st[BATCH];
        submit_chunk(&b, items + at, m, st);
        for (size_t i = 0; i < m; i++) {
            rate_limited += st[i] == RATE_CUT;
            if (st[i] == RATE_CUT)
                st[i] = RL_EAGAIN;
            if (status)
                status[at + i] = st[i];
            if (!first)
                first = st[i];
            refused += st[i] == RL_EAGAIN;
        }
    }
    if (!b.on_loop)
        pthread_rwlock_unlock(&d->route_lock);
    free(b.cut.node1);
    free(b.cut.err);
    if (b.refused_global)
        refuse_global(d, false, 0);
    if (refused)
        atomic_fetch_add_explicit(&d->refused, refused - rate_limited, memory_order_relaxed);
    if (b.refused_rate)
        rl__rate_refused(d, false, rate_limited); /* counts them in refused too */
    if (!b.on_loop)
        rl__leave(d);
    if (queued)
        *queued = b.queued;
    return first;
}
