/* SPDX-License-Identifier: BSD-2-Clause */
/* A lane: one FIFO queue and its one job in flight, from start to end, whoever runs it. */
#define _GNU_SOURCE /* PTHREAD_MUTEX_ADAPTIVE_NP */
#include "dispatch_internal.h"

#include <stdlib.h>
#include <string.h>

/* Set on a worker thread: the dispatcher whose handler may be running there (a blocking submit
 * from that handler must not wait for its own lane). */
_Thread_local const rl_dispatcher_t *rl__worker_of;

/* The lane mutex spins a moment before it sleeps where the C library offers that (glibc's
 * adaptive mutex). A loop thread feeding a lane meets its worker there at every job, for a few
 * tens of nanoseconds each time; sleeping on the futex and being woken cost microseconds
 * (bench_dispatch uv, one worker, empty jobs: bench/RESULTS.md). */
static int lane_mutex_init(uv_mutex_t *mu)
{
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
    pthread_mutexattr_t attr;
    if (pthread_mutexattr_init(&attr) != 0)
        return -1;
    int rc = pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    if (rc == 0)
        rc = pthread_mutex_init(mu, &attr);
    pthread_mutexattr_destroy(&attr);
    return rc;
#else
    return uv_mutex_init(mu);
#endif
}

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
    if (lane_mutex_init(&l->mu) != 0) {
        free(l->name);
        free(l);
        return RL_ELOOP;
    }
    /* The queue is made at the first job: an idle lane costs this struct and its name. */
    l->d = d;
    atomic_init(&l->depth_hint, 0);
    atomic_init(&l->refused, false);
    atomic_init(&l->held, false);
    *out = l;
    return 0;
}

void rl__lane_free(rl__lane *l)
{
    if (!l)
        return;
    uv_mutex_destroy(&l->mu);
    free(l->queue.v);
    free(l->hist);
    free(l->name);
    free(l);
}

void rl__lane_hold_slow(rl__lane *l)
{
    if (l->retiring)
        return; /* changes look at retiring lanes through d->retiring; it is freed */
    rl_dispatcher_t *d = l->d;
    atomic_store_explicit(&l->held, true, memory_order_relaxed);
    rl__lane *head = atomic_load_explicit(&d->held_new, memory_order_relaxed);
    do {
        l->next_held_lane = head;
    } while (!atomic_compare_exchange_weak_explicit(&d->held_new, &head, l, memory_order_release,
                                                    memory_order_relaxed));
}

bool rl__lane_idle(const rl__lane *l)
{
    return !l->busy && !l->owned && !l->queued && !l->queue.len && !l->parked && !l->fence.active &&
           !l->fences && !l->parks;
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

/* --- the job in flight --- */

static bool runnable(const rl__lane *l)
{
    return l->retry_due || (!l->busy && (l->queue.len > 0 || (l->parks && rl__parks_due(l))));
}

void rl__lane_ready_slow(rl__lane *l)
{
    if (l->owned || l->queued || !runnable(l))
        return;
    rl_dispatcher_t *d = l->d;
    l->queued = true;
    l->next_ready = NULL;
    rl__lock(&d->ready_mu);
    if (d->ready_tail)
        d->ready_tail->next_ready = l;
    else
        d->ready_head = l;
    d->ready_tail = l;
    atomic_store_explicit(&d->ready_any, true, memory_order_relaxed);
    bool wake_worker = !d->async_mode && d->idle_workers > 0 && !d->spinning;
    rl__unlock(&d->ready_mu);
    if (d->async_mode)
        uv_async_send(&d->async); /* the loop thread starts asynchronous jobs */
    else if (wake_worker)
        uv_cond_signal(&d->ready_cv);
}

rl__job *rl__lane_next(rl__lane *l, rl__job **returned)
{
    rl_dispatcher_t *d = l->d;
    *returned = NULL;
    if (atomic_load(&d->starts_paused))
        return NULL; /* take_tag is looking: nothing starts (the worker waits for it) */
    if (l->retry_due) {
        l->retry_due = false;
        if (!l->stopping)
            return l->cur_job;
        *returned = l->cur_job; /* a STOP close: the retry does not run */
        return NULL;
    }
    if (l->busy)
        return NULL;
    rl__job *j = l->parks ? rl__park_start_due(l) : NULL; /* a due retry before the queue */
    if (!j) {
        if (!l->queue.len)
            return NULL;
        j = rl__lq_pop(&l->queue);
        rl__lane_set_depth(l);
        l->busy = true;
        l->cur_hash = j->pub.hash;
        l->cur_tag = j->pub.tag;
        l->cur_job = j;
    }
    /* Either way the lane's depth (queued + parked) fell by one: room for a waiting submitter
     * (a parked retry counts in the depth while it waits). */
    if (l->blocked && l->queue.len + l->parked <= rl__low_water(d->opts.lane_capacity)) {
        l->blocked = false;
        rl__space_notify(d); /* takes only space_mu, which nests under nothing */
    }
    return j;
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

int rl__attempt_failed(rl__lane *l, rl__job *j, int rc)
{
    j->pub.attempts++;
    j->pub.status = rc;
    rl__lock(&l->mu);
    l->failed++;
    int outcome = -1;
    if (j->pub.attempts >= l->d->opts.max_attempts)
        outcome = RL_DISPATCH_DEAD;
    else if (l->stopping)
        outcome = RL_DISPATCH_RETURNED;
    rl__unlock(&l->mu);
    return outcome;
}

bool rl__attempt_retry(rl__lane *l, rl__job *j, rl__jobq *rest)
{
    rl_dispatcher_t *d = l->d;
    /* The retry waits on the loop's timer with its key parked: the key's later jobs wait
     * behind it, the lane goes on with its other keys (retry_park.c). */
    uint64_t due = uv_hrtime() + backoff_ns(&d->opts, j->pub.attempts);
    if (rl__park_for_retry(l, j, rest, due) == 0)
        return true;
    /* No memory to park it: the lane waits with the job instead, as it did before parking
     * (and with the rest of its batch, which runs again behind it). */
    rl__lock(&l->mu);
    l->cur_job = j;
    if (rest)
        rl__jobq_append(&l->batch, rest);
    l->retried++;
    l->in_backoff = true;
    uint64_t gen = ++l->gen;
    l->timer_refs++;
    rl__unlock(&l->mu);
    rl__timer_entry e = {due, l, gen, RL__TIMER_RETRY, NULL};
    if (rl__timer_add(d, e) != 0) {
        /* No memory for the timer: retry at once rather than never. */
        rl__lock(&l->mu);
        l->timer_refs--;
        l->in_backoff = false;
        l->retry_due = true;
        rl__lane_ready(l);
        rl__unlock(&l->mu);
    }
    return false;
}

bool rl__attempt_ended(rl__lane *l, rl__job *j, int rc)
{
    /* A batch in flight: l->batch is the ender's to read (written at the start, before the
     * handler call or the ticket, under the mutex the claim takes). */
    if (l->batch.len)
        return rl__batch_ended(l, NULL, rc);
    if (rc == 0) {
        j->pub.attempts++;
        j->pub.status = 0;
        rl__job_finished(l, j, RL_DISPATCH_DONE);
        return true;
    }
    int outcome = rl__attempt_failed(l, j, rc);
    if (outcome >= 0) {
        rl__job_finished(l, j, outcome);
        return true;
    }
    return rl__attempt_retry(l, j, NULL);
}

/* Pushes a finished job onto the completion stack and wakes the loop when the stack was empty
 * (a non-empty stack already has a wake-up on its way: uv_async_send calls coalesce), unless
 * the loop is delivering: it reads the stack again after it has put `delivering` down (the
 * push and that read, the store and this read, are sequentially consistent: one side sees the
 * other). */
static void push_completion(rl_dispatcher_t *d, rl__job *j)
{
    rl__job *head = atomic_load_explicit(&d->done_head, memory_order_relaxed);
    do {
        j->next = head;
    } while (!atomic_compare_exchange_weak_explicit(&d->done_head, &head, j, memory_order_seq_cst,
                                                    memory_order_relaxed));
    if (!head && !atomic_load(&d->delivering))
        uv_async_send(&d->async);
}

void rl__wake_tag_waiters(rl_dispatcher_t *d)
{
    if (atomic_load(&d->tag_waiters) > 0) {
        rl__lock(&d->wait_mu);
        uv_cond_broadcast(&d->wait_cv);
        rl__unlock(&d->wait_mu);
    }
}

void rl__lane_count_end(rl__lane *l, bool sampled, uint64_t latency, int outcome)
{
    if (outcome == RL_DISPATCH_DONE || outcome == RL_DISPATCH_DEAD) {
        l->processed++;
        if (outcome == RL_DISPATCH_DEAD)
            l->dead++;
        if (sampled && !l->hist)
            l->hist = calloc(RL__HIST_BUCKETS, sizeof *l->hist);
        if (sampled && l->hist)
            rl__hist_add(l->hist, latency);
    }
}

/* Under l->mu: the lane's statistics and state once its job in flight has ended. */
static void lane_after_job(rl__lane *l, bool sampled, uint64_t latency, int outcome)
{
    rl__lane_count_end(l, sampled, latency, outcome);
    l->busy = false;
    l->in_backoff = false;
    l->retry_due = false;
    l->cur_job = NULL;
    l->cur_ticket = 0;
    l->gen++; /* a timer entry of the old delay, if any, is void */
}

/* The end of the job in flight, once it is out of the lane's hands (published or taken). */
static void let_go(rl__lane *l, bool sampled, uint64_t latency, int outcome)
{
    rl_dispatcher_t *d = l->d;
    rl__lock(&l->mu);
    lane_after_job(l, sampled, latency, outcome);
    bool fenced = l->fence.active;
    /* With a fence, the lane starts nothing before the fence is released (one fence per lane,
     * for the key of its one job in flight): it stays held meanwhile. */
    bool hold = fenced && !l->owned;
    if (hold)
        l->owned = true;
    else
        rl__lane_ready(l);
    bool last = !fenced && rl__lane_wants_loop(l);
    rl__unlock(&l->mu);
    if (fenced) {
        rl__fence_release(l);
        if (hold) {
            rl__lock(&l->mu);
            l->owned = false;
            rl__lane_ready(l);
            last = rl__lane_wants_loop(l);
            rl__unlock(&l->mu);
        }
    }
    rl__wake_tag_waiters(d);
    if (fenced || last)
        uv_async_send(&d->async); /* a retiring lane to free, or a close to finish */
}

/* Publishes a job that ended (on the completion stack, or with the jobs a STOP close hands
 * back): before the lane lets go of the key, so that on_done calls of one key keep their order.
 * The job is not touched after this. Returns its queue-to-done latency when it was sampled. */
uint64_t rl__job_publish(rl_dispatcher_t *d, rl__job *j, int outcome, bool *sampled)
{
    *sampled = false;
    if (outcome != RL_DISPATCH_DONE && outcome != RL_DISPATCH_DEAD) {
        rl__lock(&d->returned_mu);
        rl__jobq_push(&d->returned, j);
        rl__unlock(&d->returned_mu);
        uv_async_send(&d->async);
        return 0;
    }
    uint64_t latency = 0;
    if (j->submit_ns) {
        latency = uv_hrtime() - j->submit_ns;
        *sampled = true;
    }
    j->outcome = outcome;
    push_completion(d, j);
    return latency;
}

/* As rl__attempt_ended then rl__job_finished for a success, but the lane's mutex, taken to let
 * go of the job, is kept for the worker's next start (unless a fence must be released first):
 * one lock per job instead of two. */
void rl__job_succeeded(rl__lane *l, rl__job *j)
{
    j->pub.attempts++;
    j->pub.status = 0;
    bool sampled;
    uint64_t latency = rl__job_publish(l->d, j, RL_DISPATCH_DONE, &sampled);
    rl__lock(&l->mu);
    if (!l->fence.active) {
        /* Owned, so no executor takes the lane meanwhile and the loop does not want it. */
        lane_after_job(l, sampled, latency, RL_DISPATCH_DONE);
        if (atomic_load(&l->d->tag_waiters) > 0) {
            /* Rare: wait_tag takes wait_mu before lane mutexes, so wake it with this one let
             * go (here, not between the next job's start and its handler call). */
            rl__unlock(&l->mu);
            rl__wake_tag_waiters(l->d);
            rl__lock(&l->mu);
        }
        return;
    }
    rl__unlock(&l->mu);
    let_go(l, sampled, latency, RL_DISPATCH_DONE);
    rl__lock(&l->mu);
}

void rl__job_finished(rl__lane *l, rl__job *j, int outcome)
{
    bool sampled;
    uint64_t latency = rl__job_publish(l->d, j, outcome, &sampled);
    if (l->batch.len) {
        /* A batch handed back before its next attempt (a STOP close): the rest of it goes
         * back too, behind j. Only the lane's executor ends it, so l->batch is its to read. */
        rl__lock(&l->mu);
        rl__jobq rest = l->batch;
        l->batch = (rl__jobq){0};
        rl__unlock(&l->mu);
        for (rl__job *b; (b = rl__jobq_pop(&rest));)
            rl__job_publish(l->d, b, outcome, &(bool){false});
    }
    let_go(l, sampled, latency, outcome);
}

void rl__lane_release_taken(rl__lane *l)
{
    let_go(l, false, 0, RL_DISPATCH_RETURNED);
}
