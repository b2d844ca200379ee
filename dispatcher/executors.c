/* SPDX-License-Identifier: BSD-2-Clause */
/* What runs a lane's jobs: a pool of worker threads for blocking handlers, the loop thread for
 * asynchronous ones; and the tickets that finish an asynchronous attempt. */
#include "dispatch_internal.h"

#include <sched.h>
#include <stdlib.h>

_Thread_local rl__lane *rl__worker_lane;

/* Jobs one worker runs from a lane before it puts the lane back at the end of the ready list:
 * a busy lane keeps its worker without a trip through the list, and still cannot keep it from
 * the other ready lanes for long when workers are fewer than lanes. */
#define SERVE_BATCH 64

/* How many times a spinning worker looks at the ready list before it sleeps (a few tens of
 * microseconds). */
#define SPIN_LOOKS 2048

/* Runs up to SERVE_BATCH jobs of a lane this worker took from the ready list. True when it ran
 * all SERVE_BATCH and gave the lane back with work still queued: lanes are backed up. */
static bool serve_lane(rl_dispatcher_t *d, rl__lane *l)
{
    int n;
    rl__worker_lane = l;
    rl__lock(&l->mu);
    l->queued = false;
    l->owned = true;
    for (n = 0; n < SERVE_BATCH; n++) {
        rl__job *returned;
        rl__job *j = rl__lane_next(l, &returned);
        if (!j) {
            if (returned) {
                rl__unlock(&l->mu);
                rl__job_finished(l, returned, RL_DISPATCH_RETURNED);
                rl__lock(&l->mu);
                continue;
            }
            break;
        }
        if (d->opts.batch_handler) {
            if (!rl__batch_serve(l, j))
                break; /* the batch's failed job waits in place for its retry */
            continue;
        }
        rl__unlock(&l->mu);
        int rc = d->opts.handler(d, &j->pub);
        if (rc == 0) {
            rl__job_succeeded(l, j); /* the common case: one lock for its end and the next start */
            continue;
        }
        bool over = rl__attempt_ended(l, j, rc);
        rl__lock(&l->mu);
        if (!over)
            break; /* the job waits for its retry: the lane is busy with it */
    }
    l->owned = false;
    rl__lane_ready(l); /* still runnable: back to the end of the list */
    bool last = rl__lane_wants_loop(l);
    rl__unlock(&l->mu);
    rl__worker_lane = NULL;
    if (last)
        uv_async_send(&d->async);
    return n == SERVE_BATCH;
}

/* Looks up to SPIN_LOOKS times, until *flag is set. Its own function, never inlined, so that a
 * profile tells time spent waiting from time spent working (bench/instructions_per_job.sh
 * looks for its name). */
__attribute__((noinline)) static void rl__spin_until(const atomic_bool *flag)
{
    for (int i = 0; i < SPIN_LOOKS; i++) {
        if (atomic_load_explicit(flag, memory_order_relaxed))
            return;
        if (i % 64 == 63)
            sched_yield(); /* fewer cores than threads: let the submitter run */
        else
            rl__cpu_relax();
    }
}

/* Under ready_mu: the first ready lane, taken off the list, or NULL. */
static rl__lane *ready_pop(rl_dispatcher_t *d)
{
    rl__lane *l = d->ready_head;
    if (!l)
        return NULL;
    d->ready_head = l->next_ready;
    if (!d->ready_head) {
        d->ready_tail = NULL;
        atomic_store_explicit(&d->ready_any, false, memory_order_relaxed);
    }
    return l;
}

/* Under ready_mu: nothing for this worker to take now. */
static bool nothing_to_take(rl_dispatcher_t *d)
{
    return (!d->ready_head || atomic_load(&d->starts_paused)) && !d->pool_quit &&
           d->live_workers <= d->target_workers;
}

/* Under ready_mu, with nothing to take: one worker at a time looks at the ready list for a
 * moment before it sleeps, when there are several. Their lanes empty and fill again within
 * microseconds; a worker that slept each time would cost a futex wake for every job the
 * submitter hands over (the submitter does not signal while a worker spins). A lone worker
 * sleeps at once: spinning, it took each job the moment it was queued and met the submitter
 * at the lane's mutex for every job, where sleeping it wakes once per burst (bench_dispatch
 * uv, one worker: 2.1M jobs/s sleeping against 1.6M spinning; a worker that waited on its own
 * dry lane instead of the list was slower at 1, 2 and 4 workers, bench/RESULTS.md). */
static void spin_a_moment(rl_dispatcher_t *d)
{
    if (d->spinning || d->live_workers < 2)
        return;
    d->spinning = true;
    rl__unlock(&d->ready_mu);
    rl__spin_until(&d->ready_any);
    rl__lock(&d->ready_mu);
    d->spinning = false;
}

static void pool_worker(void *arg)
{
    rl__worker *self = arg;
    rl_dispatcher_t *d = self->d;
    rl__worker_of = d;
    rl__lock(&d->ready_mu);
    bool backed_up = false;
    for (;;) {
        if (nothing_to_take(d))
            spin_a_moment(d);
        while (nothing_to_take(d)) {
            d->idle_workers++;
            uv_cond_wait(&d->ready_cv, &d->ready_mu);
            d->idle_workers--;
        }
        if (d->pool_quit || d->live_workers > d->target_workers)
            break;
        rl__lane *l = ready_pop(d);
        /* Submitters did not signal while a worker spun: pass the rest on. Also while one
         * spins, when this worker's last lane was backed up: the spinner takes one lane, and
         * with more workers than cores it may have yielded its core to busy workers for a
         * time slice; lanes waited for it while other workers slept (bench_dispatch uv, ~1 us
         * jobs on four workers: 0.83-0.87x of uv_queue_work before, 1.04-1.12x after,
         * bench/RESULTS.md). When workers keep up, lanes run dry before SERVE_BATCH and
         * nothing changes: futex wakes are what a spinner saves empty jobs. */
        if (d->ready_head && d->idle_workers > 0 && (!d->spinning || backed_up))
            uv_cond_signal(&d->ready_cv);
        rl__unlock(&d->ready_mu);
        backed_up = serve_lane(d, l);
        rl__lock(&d->ready_mu);
    }
    d->live_workers--;
    self->exited = true;
    rl__unlock(&d->ready_mu);
    uv_async_send(&d->async); /* the loop joins it */
}

/* Starts one worker thread; a failure sets the refusal's detail (init and add_lane report it). */
static int pool_add(rl_dispatcher_t *d)
{
    if (d->nworkers == d->workers_cap) {
        size_t cap = d->workers_cap ? d->workers_cap * 2 : 8;
        rl__worker **v = realloc(d->workers, cap * sizeof *v);
        if (!v)
            return rl_error_detail_set(RL_ENOMEM, "out of memory: worker thread %zu",
                                       d->nworkers + 1);
        d->workers = v;
        d->workers_cap = cap;
    }
    rl__worker *w = calloc(1, sizeof *w);
    if (!w)
        return rl_error_detail_set(RL_ENOMEM, "out of memory: worker thread %zu", d->nworkers + 1);
    w->d = d;
    rl__lock(&d->ready_mu);
    d->live_workers++;
    rl__unlock(&d->ready_mu);
    int err = uv_thread_create(&w->thread, pool_worker, w);
    if (err != 0) {
        rl__lock(&d->ready_mu);
        d->live_workers--;
        rl__unlock(&d->ready_mu);
        free(w);
        return rl_error_detail_set(RL_ENOMEM, "worker thread %zu: uv_thread_create: %s",
                                   d->nworkers + 1, uv_strerror(err));
    }
    d->workers[d->nworkers++] = w;
    return 0;
}

int rl__pool_resize(rl_dispatcher_t *d, size_t target)
{
    rl__lock(&d->ready_mu);
    size_t live = d->live_workers;
    d->target_workers = target;
    rl__unlock(&d->ready_mu);
    if (target < live)
        uv_cond_broadcast(&d->ready_cv); /* idle ones above the target leave */
    for (size_t k = live; k < target; k++) {
        int rc = pool_add(d);
        if (rc) {
            rl__lock(&d->ready_mu);
            d->target_workers = d->live_workers;
            rl__unlock(&d->ready_mu);
            return rc;
        }
    }
    return 0;
}

void rl__pool_reap(rl_dispatcher_t *d)
{
    size_t kept = 0;
    for (size_t i = 0; i < d->nworkers; i++) {
        rl__worker *w = d->workers[i];
        rl__lock(&d->ready_mu);
        bool exited = w->exited;
        rl__unlock(&d->ready_mu);
        if (exited) {
            uv_thread_join(&w->thread);
            free(w);
        } else {
            d->workers[kept++] = w;
        }
    }
    d->nworkers = kept;
}

void rl__pool_stop(rl_dispatcher_t *d)
{
    rl__lock(&d->ready_mu);
    d->pool_quit = true;
    uv_cond_broadcast(&d->ready_cv);
    rl__unlock(&d->ready_mu);
    for (size_t i = 0; i < d->nworkers; i++) {
        uv_thread_join(&d->workers[i]->thread);
        free(d->workers[i]);
    }
    d->nworkers = 0;
    free(d->workers);
    d->workers = NULL;
    d->workers_cap = 0;
}

/* --- asynchronous jobs: started on the loop thread --- */

/* The ticket of an attempt: the lane's slot above, a dispatcher-wide count below (never 0). */
#define TICKET_COUNT_BITS 40
#define TICKET_COUNT_MASK ((UINT64_C(1) << TICKET_COUNT_BITS) - 1)

/* Lanes started per call, before the loop gets a turn (the rest are started on the next). */
#define ASYNC_BATCH 4096

void rl__run_async_ready(rl_dispatcher_t *d)
{
    rl_dispatch_job *batch[RL_DISPATCH_BATCH_MAX]; /* async_batch_handler's jobs */
    size_t batch_max = d->opts.batch_max > 1 ? d->opts.batch_max : 1;
    for (int n = 0; n < ASYNC_BATCH; n++) {
        rl__lock(&d->ready_mu);
        rl__lane *l = ready_pop(d);
        rl__unlock(&d->ready_mu);
        if (!l)
            return;
        rl__lock(&l->mu);
        l->queued = false;
        rl__job *returned;
        rl__job *j = rl__lane_next(l, &returned);
        uint64_t ticket = 0;
        size_t batch_n = 0;
        if (j) {
            d->ticket_gen = (d->ticket_gen + 1) & TICKET_COUNT_MASK;
            if (!d->ticket_gen)
                d->ticket_gen = 1;
            ticket = ((uint64_t)l->slot << TICKET_COUNT_BITS) | d->ticket_gen;
            l->cur_ticket = ticket;
            j->pub.ticket = ticket;
            if (d->opts.async_batch_handler) {
                batch_n = rl__batch_take(l, j, batch, batch_max);
                for (size_t i = 1; i < batch_n; i++)
                    batch[i]->ticket = ticket; /* one ticket names the batch */
            }
            if (d->opts.job_timeout_ms)
                l->timer_refs++;
        }
        rl__unlock(&l->mu);
        if (returned) {
            rl__job_finished(l, returned, RL_DISPATCH_RETURNED);
            continue;
        }
        if (!j)
            continue;
        if (d->opts.job_timeout_ms) {
            rl__timer_entry e = {uv_hrtime() + (uint64_t)d->opts.job_timeout_ms * 1000000u, l,
                                 ticket, RL__TIMER_DEADLINE, NULL};
            if (rl__timer_add(d, e) != 0) {
                rl__lock(&l->mu);
                l->timer_refs--; /* no deadline for this attempt: it waits for its completion */
                rl__unlock(&l->mu);
            }
        }
        rl__lane *outer = rl__worker_lane; /* wait_tag inside a handler may start others */
        rl__worker_lane = l; /* wait_tag from the handler on its own job's tag: RL_ESTATE */
        if (batch_n)
            d->opts.async_batch_handler(d, batch, batch_n); /* may complete it inside */
        else
            d->opts.async_handler(d, &j->pub); /* may complete the job inside */
        rl__worker_lane = outer;
    }
    uv_async_send(&d->async); /* more may be ready: after the loop's other work */
}

/* The lane a ticket names, locked, if its attempt still waits; else NULL. Under route_lock. */
static rl__lane *ticket_lane(rl_dispatcher_t *d, uint64_t ticket)
{
    uint64_t slot = ticket >> TICKET_COUNT_BITS;
    if (slot >= d->nslots || !d->slots[slot])
        return NULL;
    rl__lane *l = d->slots[slot];
    rl__lock(&l->mu);
    if (l->busy && l->cur_job && l->cur_ticket == ticket)
        return l;
    rl__unlock(&l->mu);
    return NULL;
}

/* As rl__attempt_claim; n, when not 0, is the length the batch must have (else RL_EINVAL and
 * nothing claimed). */
static int claim(rl_dispatcher_t *d, uint64_t ticket, size_t n, rl__lane **lane, rl__job **job)
{
    pthread_rwlock_rdlock(&d->route_lock);
    rl__lane *l = ticket_lane(d, ticket);
    pthread_rwlock_unlock(&d->route_lock);
    if (!l)
        return RL_ESTALE;
    if (n && n != 1 + l->batch.len) {
        rl__unlock(&l->mu);
        return RL_EINVAL;
    }
    /* Claimed: no one else can end this attempt now (the ticket is void), and the lane stays
     * busy, so it is not freed, until the attempt has ended. */
    l->cur_ticket = 0;
    *job = l->cur_job;
    *lane = l;
    rl__unlock(&l->mu);
    return 0;
}

int rl__attempt_claim(rl_dispatcher_t *d, uint64_t ticket, rl__lane **lane, rl__job **job)
{
    return claim(d, ticket, 0, lane, job);
}

int rl_dispatch_complete(rl_dispatcher_t *d, uint64_t ticket, int status)
{
    if (!d || !ticket)
        return RL_EINVAL;
    if (!d->async_mode)
        return RL_ESTATE;
    rl__enter(d);
    rl__lane *l;
    rl__job *j;
    int rc = rl__attempt_claim(d, ticket, &l, &j);
    if (!rc)
        rl__attempt_ended(l, j, status);
    rl__leave(d);
    return rc;
}

int rl_dispatch_complete_batch(rl_dispatcher_t *d, uint64_t ticket, const int *status, size_t n)
{
    if (!d || !ticket || !status || !n)
        return RL_EINVAL;
    if (!d->async_mode)
        return RL_ESTATE;
    rl__enter(d);
    rl__lane *l;
    rl__job *j;
    int rc = claim(d, ticket, n, &l, &j);
    if (!rc)
        rl__batch_ended(l, status, 0);
    rl__leave(d);
    return rc;
}

/* --- slots: the lane of a ticket --- */

int rl__slot_take(rl_dispatcher_t *d, rl__lane *l)
{
    if (d->free_slot < d->nslots) {
        uint32_t s = d->free_slot;
        /* Free slots hold NULL; the next free one is found by a scan from here, rarely long:
         * slots are freed only when retired lanes are. */
        d->slots[s] = l;
        l->slot = s;
        uint32_t next = s + 1;
        while (next < d->nslots && d->slots[next])
            next++;
        d->free_slot = next;
        return 0;
    }
    if (d->nslots == d->slots_cap) {
        uint32_t cap = d->slots_cap ? d->slots_cap * 2 : 64;
        rl__lane **v = realloc(d->slots, cap * sizeof *v);
        if (!v)
            return RL_ENOMEM;
        d->slots = v;
        d->slots_cap = cap;
    }
    l->slot = d->nslots;
    d->slots[d->nslots++] = l;
    d->free_slot = d->nslots;
    return 0;
}

void rl__slot_free(rl_dispatcher_t *d, rl__lane *l)
{
    if (l->slot < d->nslots && d->slots[l->slot] == l) {
        d->slots[l->slot] = NULL;
        if (l->slot < d->free_slot)
            d->free_slot = l->slot;
    }
}
