/* A lane: one FIFO queue and the one worker thread that empties it, with retries in place. */
#include "dispatch_internal.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* Set on a worker thread: the dispatcher whose handler may be running there (a blocking submit
 * from that handler must not wait for its own lane). */
_Thread_local const rl_dispatcher_t *rl__worker_of;
_Thread_local const rl__lane *rl__worker_lane;

int rl__lane_new(rl_dispatcher_t *d, const char *name, rl__lane **out)
{
    rl__lane *l = calloc(1, sizeof *l);
    if (!l)
        return RL_ENOMEM;
    size_t len = strlen(name);
    l->name = malloc(len + 1);
    if (!l->name) {
        free(l);
        return RL_ENOMEM;
    }
    memcpy(l->name, name, len + 1);
    if (uv_mutex_init(&l->mu) != 0) {
        free(l->name);
        free(l);
        return RL_ELOOP;
    }
    if (uv_cond_init(&l->cv) != 0) {
        uv_mutex_destroy(&l->mu);
        free(l->name);
        free(l);
        return RL_ELOOP;
    }
    uint32_t want = d->opts.lane_capacity < 4096 ? d->opts.lane_capacity : 4096;
    if (rl__lq_reserve(&l->queue, want) != 0) {
        uv_cond_destroy(&l->cv);
        uv_mutex_destroy(&l->mu);
        free(l->name);
        free(l);
        return RL_ENOMEM;
    }
    l->d = d;
    atomic_init(&l->exited, false);
    atomic_init(&l->depth_hint, 0);
    atomic_init(&l->refused, false);
    *out = l;
    return 0;
}

void rl__lane_free(rl__lane *l)
{
    if (!l)
        return;
    uv_cond_destroy(&l->cv);
    uv_mutex_destroy(&l->mu);
    free(l->queue.v);
    free(l->name);
    free(l);
}

void rl__lane_set_depth(rl__lane *l)
{
    atomic_store_explicit(&l->depth_hint, l->queue.len + l->parked, memory_order_relaxed);
}

/* --- queue-to-done latency: a log-linear histogram (8 buckets per power of two) --- */

void rl__hist_add(uint64_t *hist, uint64_t ns)
{
    unsigned b;
    if (ns < RL__HIST_SUB) {
        b = (unsigned)ns;
    } else {
        unsigned top = 63u - (unsigned)__builtin_clzll(ns); /* >= 3 */
        unsigned sub = (unsigned)(ns >> (top - 3)) & (RL__HIST_SUB - 1);
        b = (top - 2) * RL__HIST_SUB + sub;
    }
    if (b >= RL__HIST_BUCKETS)
        b = RL__HIST_BUCKETS - 1;
    hist[b]++;
}

/* The upper edge of bucket b, in nanoseconds. */
static double hist_upper_ns(unsigned b)
{
    if (b < RL__HIST_SUB)
        return (double)b + 1;
    unsigned top = b / RL__HIST_SUB + 2, sub = b % RL__HIST_SUB;
    return (double)((uint64_t)(RL__HIST_SUB + sub + 1) << (top - 3));
}

double rl__hist_quantile_us(const uint64_t *hist, double q)
{
    uint64_t total = 0;
    for (unsigned b = 0; b < RL__HIST_BUCKETS; b++)
        total += hist[b];
    if (total == 0)
        return 0;
    uint64_t rank = (uint64_t)(q * (double)total);
    if (rank >= total)
        rank = total - 1;
    uint64_t seen = 0;
    for (unsigned b = 0; b < RL__HIST_BUCKETS; b++) {
        seen += hist[b];
        if (seen > rank)
            return hist_upper_ns(b) / 1000.0;
    }
    return 0;
}

/* --- the worker --- */

/* Pushes a finished job onto the completion stack and wakes the loop when the stack was empty
 * (a non-empty stack already has a wake-up on its way: uv_async_send calls coalesce). */
static void push_completion(rl_dispatcher_t *d, rl__job *j)
{
    rl__job *head = atomic_load_explicit(&d->done_head, memory_order_relaxed);
    do {
        j->next = head;
    } while (!atomic_compare_exchange_weak_explicit(&d->done_head, &head, j, memory_order_release,
                                                    memory_order_relaxed));
    if (!head)
        uv_async_send(&d->async);
}

static uint64_t backoff_ns(const rl_dispatch_options *o, uint32_t attempts)
{
    uint64_t ms = o->backoff_ms;
    for (uint32_t i = 1; i < attempts && ms < o->backoff_max_ms; i++)
        ms *= 2;
    if (ms > o->backoff_max_ms)
        ms = o->backoff_max_ms;
    return ms * 1000000u;
}

enum { OUT_TAKEN = -1 }; /* taken back by rl_dispatch_take_tag during a retry delay */

/* Runs the handler until it succeeds, the attempts run out, or the job is taken or stopped
 * during a retry delay. The lane waits meanwhile, so nothing overtakes the job. */
static int run_job(rl__lane *l, rl__job *j)
{
    rl_dispatcher_t *d = l->d;
    for (;;) {
        int rc = d->opts.handler(d, &j->pub);
        j->pub.attempts++;
        j->pub.status = rc;
        if (rc == 0)
            return RL_DISPATCH_DONE;
        uv_mutex_lock(&l->mu);
        l->failed++;
        if (j->pub.attempts >= d->opts.max_attempts) {
            uv_mutex_unlock(&l->mu);
            return RL_DISPATCH_DEAD;
        }
        if (l->stopping) {
            uv_mutex_unlock(&l->mu);
            return RL_DISPATCH_RETURNED;
        }
        l->retried++;
        uint64_t deadline = uv_hrtime() + backoff_ns(&d->opts, j->pub.attempts);
        l->in_backoff = true;
        for (;;) {
            uint64_t now = uv_hrtime();
            if (l->stopping || l->cur_job != j || now >= deadline)
                break;
            uv_cond_timedwait(&l->cv, &l->mu, deadline - now);
        }
        l->in_backoff = false;
        bool taken = l->cur_job != j, stopped = l->stopping;
        uv_mutex_unlock(&l->mu);
        if (taken)
            return OUT_TAKEN;
        if (stopped)
            return RL_DISPATCH_RETURNED;
    }
}

static bool should_exit(const rl__lane *l)
{
    if (l->queue.len)
        return false;
    return l->stopping || ((l->retiring || l->draining) && !l->fences);
}

static void wake_tag_waiters(rl_dispatcher_t *d)
{
    if (atomic_load(&d->tag_waiters) > 0) {
        uv_mutex_lock(&d->wait_mu);
        uv_cond_broadcast(&d->wait_cv);
        uv_mutex_unlock(&d->wait_mu);
    }
}

static void worker(void *arg)
{
    rl__lane *l = arg;
    rl_dispatcher_t *d = l->d;
    rl__worker_of = d;
    rl__worker_lane = l;
    uv_mutex_lock(&l->mu);
    for (;;) {
        for (int spin = 0; spin < 2 && !l->queue.len && !should_exit(l); spin++) {
            uv_mutex_unlock(&l->mu);
            sched_yield();
            uv_mutex_lock(&l->mu);
        }
        while (!should_exit(l) && !l->queue.len) {
            l->sleeping = true;
            uv_cond_wait(&l->cv, &l->mu);
            l->sleeping = false;
        }
        if (!l->queue.len)
            break;
        rl__job *j = rl__lq_pop(&l->queue);
        rl__lane_set_depth(l);
        l->busy = true;
        l->cur_hash = j->pub.hash;
        l->cur_tag = j->pub.tag;
        l->cur_job = j;
        bool room = l->blocked && l->queue.len + l->parked <= rl__low_water(d->opts.lane_capacity);
        if (room)
            l->blocked = false;
        uv_mutex_unlock(&l->mu);
        if (room)
            rl__space_notify(d);

        int outcome = run_job(l, j);
        uint64_t latency = 0;
        if (outcome == RL_DISPATCH_DONE || outcome == RL_DISPATCH_DEAD) {
            if (j->submit_ns)
                latency = uv_hrtime() - j->submit_ns;
            j->outcome = outcome;
            /* Before the lane lets go of the key (below), so that on_done calls of one key
             * keep their order. The job is not touched after this. */
            push_completion(d, j);
        } else if (outcome == RL_DISPATCH_RETURNED) {
            uv_mutex_lock(&d->returned_mu);
            rl__jobq_push(&d->returned, j);
            uv_mutex_unlock(&d->returned_mu);
        }

        uv_mutex_lock(&l->mu);
        if (outcome == RL_DISPATCH_DONE || outcome == RL_DISPATCH_DEAD) {
            l->processed++;
            if (outcome == RL_DISPATCH_DEAD)
                l->dead++;
            if (latency)
                rl__hist_add(l->hist, latency);
        }
        l->busy = false;
        l->cur_job = NULL;
        /* Usually nothing else to do: keep the lock and take the next job. The waiter count
         * is read after busy is cleared (see rl_dispatch_wait_tag). */
        bool fenced = l->fence.active;
        if (fenced || atomic_load(&d->tag_waiters) > 0) {
            uv_mutex_unlock(&l->mu);
            if (fenced)
                rl__fence_release(l);
            wake_tag_waiters(d);
            uv_mutex_lock(&l->mu);
        }
    }
    uv_mutex_unlock(&l->mu);
    atomic_store(&l->exited, true);
    uv_async_send(&d->async);
}

int rl__lane_start(rl__lane *l)
{
    if (uv_thread_create(&l->thread, worker, l) != 0)
        return RL_ENOMEM;
    l->thread_started = true;
    return 0;
}
