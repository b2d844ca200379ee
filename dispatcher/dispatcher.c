/* SPDX-License-Identifier: BSD-2-Clause */
/* The dispatcher's life on the loop: init, completion delivery, capacity news, close. */
#define _GNU_SOURCE /* pthread_rwlockattr_setkind_np: a writer-preferring route lock */
#include "dispatch_internal.h"
#include "stats_options.h"
#include "error_detail_internal.h"

#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rl_dispatch_options_init(rl_dispatch_options *opts)
{
    if (!opts)
        return;
    memset(opts, 0, sizeof *opts);
    opts->lane_capacity = 1024;
    opts->max_jobs = 65536;
    opts->max_attempts = 5;
    opts->backoff_ms = 10;
    opts->backoff_max_ms = 1000;
    opts->stats_lanes = RL_DISPATCH_STATS_LANES;
    opts->hot_keys = RL_DISPATCH_HOT_KEYS;
}

void *rl_dispatch_get_data(const rl_dispatcher_t *d)
{
    return d ? d->opts.data : NULL; /* set once by init, never written again */
}

/* --- ending jobs on the loop thread --- */

/* Counts of jobs ended in one batch, published once per batch. */
typedef struct ended {
    uint64_t n[3];
    uint64_t unreleased; /* places in max_jobs not yet given back */
} ended;

/* Ends one job. Places in max_jobs go back every few jobs rather than one by one: the counter
 * is shared with every submitter, and the count only ever overstates what is held. */
static void end_job(rl_dispatcher_t *d, rl__job *j, int outcome, ended *e)
{
    e->n[outcome]++;
    if (d->opts.on_done)
        d->opts.on_done(d, &j->pub, outcome);
    rl__job_recycle(d, j);
    if (++e->unreleased == 32) {
        atomic_fetch_sub(&d->jobs, e->unreleased);
        e->unreleased = 0;
    }
}

/* The end counts are released: statistics read them (acquire) before `submitted`, so a
 * snapshot never shows more jobs ended than submitted (rl_dispatch_stats_get). */
static void publish(rl_dispatcher_t *d, const ended *e)
{
    if (e->unreleased)
        atomic_fetch_sub(&d->jobs, e->unreleased);
    if (e->n[RL_DISPATCH_DONE])
        atomic_fetch_add_explicit(&d->done, e->n[RL_DISPATCH_DONE], memory_order_release);
    if (e->n[RL_DISPATCH_DEAD])
        atomic_fetch_add_explicit(&d->dead, e->n[RL_DISPATCH_DEAD], memory_order_release);
    if (e->n[RL_DISPATCH_RETURNED])
        atomic_fetch_add_explicit(&d->returned_count, e->n[RL_DISPATCH_RETURNED],
                                  memory_order_release);
}

void rl__hand_back(rl_dispatcher_t *d, rl__jobq *q)
{
    rl__jobq_sort_seq(q);
    for (rl__job *j = q->head; j; j = j->next)
        j->outcome = RL_DISPATCH_RETURNED;
    if (d->hot)
        rl__hot_end(d->hot, q);
    rl__jobq_append(&d->delivery, q);
    rl__deliver_collected(d);
    rl__space_notify(d);
}

void rl__collect_completions(rl_dispatcher_t *d)
{
    /* The stack holds the newest completion first: reversed, it joins the end of the list. */
    rl__job *stack = atomic_exchange_explicit(&d->done_head, NULL, memory_order_acquire);
    rl__jobq fresh = {0};
    while (stack) {
        rl__job *nx = stack->next;
        stack->next = fresh.head;
        if (!fresh.head)
            fresh.tail = stack;
        fresh.head = stack;
        fresh.len++;
        stack = nx;
    }
    if (d->hot) /* one hold of the sketch's lock for the whole batch */
        rl__hot_end(d->hot, &fresh);
    rl__jobq_append(&d->delivery, &fresh);
}

void rl__deliver_collected(rl_dispatcher_t *d)
{
    /* A call from inside on_done goes on with the outer call's list, so it ends those jobs
     * before any it adds (the outer call then finds the list empty). */
    if (!d->delivery.head)
        return;
    ended e = {{0}, 0};
    rl__job *j;
    while ((j = rl__jobq_pop(&d->delivery)))
        end_job(d, j, j->outcome, &e);
    publish(d, &e);
    /* Submitters held back by max_jobs wake once a quarter of it is free again. */
    if (atomic_load(&d->blocked_global) &&
        atomic_load(&d->jobs) <= rl__low_water(d->opts.max_jobs) &&
        atomic_exchange(&d->blocked_global, false))
        rl__space_notify(d);
}

void rl__deliver_completions(rl_dispatcher_t *d)
{
    rl__collect_completions(d);
    rl__deliver_collected(d);
}

void rl__note_refused(rl_dispatcher_t *d, rl__lane *l)
{
    if (atomic_exchange(&l->refused, true))
        return; /* already on the stack or the list */
    rl__lane *head = atomic_load_explicit(&d->refused_new, memory_order_relaxed);
    do {
        l->next_refused = head;
    } while (!atomic_compare_exchange_weak_explicit(&d->refused_new, &head, l, memory_order_release,
                                                    memory_order_relaxed));
}

/* Loop thread: moves the lanes submitters pushed onto the loop's list. */
static void take_refused(rl_dispatcher_t *d)
{
    rl__lane *l = atomic_exchange_explicit(&d->refused_new, NULL, memory_order_acquire);
    while (l) {
        rl__lane *nx = l->next_refused;
        l->next_refused = d->refused_lanes;
        d->refused_lanes = l;
        l = nx;
    }
}

void rl__forget_refused(rl_dispatcher_t *d, rl__lane *l)
{
    if (!atomic_load(&l->refused))
        return;
    take_refused(d); /* a push happened under l->mu, which the caller has taken since */
    for (rl__lane **p = &d->refused_lanes; *p; p = &(*p)->next_refused) {
        if (*p == l) {
            *p = l->next_refused;
            break;
        }
    }
    l->next_refused = NULL;
    atomic_store(&l->refused, false);
}

void rl__check_capacity(rl_dispatcher_t *d)
{
    if (!d->opts.on_capacity || atomic_load(&d->closing))
        return;
    take_refused(d);
    bool any = false;
    bool global = atomic_load(&d->refused_global);
    if (global) {
        if (atomic_load(&d->jobs) > d->opts.max_jobs / 2)
            return;
        any = true;
    }
    /* Refused by the rate limit: a token must be there; else its timer entry calls again. */
    if (d->rate_on && atomic_load(&d->refused_rate)) {
        if (!rl__rate_has_token(d)) {
            rl__rate_arm(d);
            return;
        }
        any = true;
    }
    /* Only the lanes that refused: each must have room again (a retiring one's keys went
     * elsewhere, so it counts as room). A lane still full goes to the front of the list, so
     * that the next check stops at it first. */
    for (rl__lane **p = &d->refused_lanes, *l; (l = *p); p = &l->next_refused) {
        d->capacity_looks++;
        if (!l->retiring && atomic_load_explicit(&l->depth_hint, memory_order_relaxed) >
                                d->opts.lane_capacity / 2) {
            if (p != &d->refused_lanes) {
                *p = l->next_refused;
                l->next_refused = d->refused_lanes;
                d->refused_lanes = l;
            }
            return;
        }
        any = true;
    }
    if (!any)
        return;
    atomic_store(&d->refused_global, false);
    atomic_store(&d->refused_rate, false);
    /* Unlinked before its flag goes down: a submitter may push the lane again right after. */
    for (rl__lane *l = d->refused_lanes, *nx; l; l = nx) {
        nx = l->next_refused;
        l->next_refused = NULL;
        atomic_store(&l->refused, false);
    }
    d->refused_lanes = NULL;
    d->opts.on_capacity(d);
}

/* Under the route lock (write): a freed lane's counters go to the removed lanes' totals, in the
 * same moment as it leaves the list the statistics read, so the sums still add up. */
static void fold_removed(rl_dispatcher_t *d, rl__lane *l)
{
    rl__lock(&l->mu);
    d->removed.lanes++;
    d->removed.processed += l->processed;
    d->removed.failed += l->failed;
    d->removed.retried += l->retried;
    d->removed.dead_lettered += l->dead;
    rl__unlock(&l->mu);
}

/* Frees retired lanes that are idle and that no timer entry names. */
static void reap_retired(rl_dispatcher_t *d)
{
    bool freed = false;
    for (rl__lane **p = &d->retiring; *p;) {
        rl__lane *l = *p;
        rl__lock(&l->mu);
        bool gone = rl__lane_idle(l) && l->timer_refs == 0;
        rl__unlock(&l->mu);
        if (!gone) {
            p = &l->next_retiring;
            continue;
        }
        rl__forget_refused(d, l);
        pthread_rwlock_wrlock(&d->route_lock);
        *p = l->next_retiring;
        rl__slot_free(d, l);
        fold_removed(d, l);
        pthread_rwlock_unlock(&d->route_lock);
        d->n_retiring--;
        rl__lane_free(l);
        freed = true;
    }
    if (freed && !d->async_mode && !d->opts.workers && !atomic_load(&d->closing))
        rl__pool_resize(d, rl__workers_wanted(d)); /* its worker goes too */
}

static void free_dispatcher(rl_dispatcher_t *d)
{
    for (size_t i = 0; i < d->route.n; i++)
        rl__lane_free(d->route.lanes[i]);
    for (rl__lane *r = d->retiring, *nx; r; r = nx) {
        nx = r->next_retiring;
        rl__lane_free(r);
    }
    rl__route_free(&d->route);
    rl_ring_free(d->hash_ring);
    free(d->slots);
    rl__timers_free(d);
    rl__stats_timer_free(d);
    rl__rate_free(d);
    rl__hot_keys_free(d->hot);
    for (rl__job *j; (j = rl__job_spare(d));)
        free(j);
    pthread_rwlock_destroy(&d->route_lock);
    uv_mutex_destroy(&d->returned_mu);
    uv_mutex_destroy(&d->space_mu);
    uv_cond_destroy(&d->space_cv);
    uv_mutex_destroy(&d->wait_mu);
    uv_cond_destroy(&d->wait_cv);
    uv_mutex_destroy(&d->ready_mu);
    uv_cond_destroy(&d->ready_cv);
    free(d);
}

/* Waits for the calls other threads are making (blocked submitters, wait_tag, statistics,
 * completions): they return RL_ECLOSED or their answer, and touch nothing once they have left.
 * Every job has ended, so none of them waits for one: each wakes and leaves at once. */
static void wait_for_callers(rl_dispatcher_t *d)
{
    while (atomic_load(&d->entered) > 0) {
        rl__lock(&d->space_mu);
        d->space_gen++;
        uv_cond_broadcast(&d->space_cv);
        rl__unlock(&d->space_mu);
        rl__lock(&d->wait_mu);
        uv_cond_broadcast(&d->wait_cv);
        rl__unlock(&d->wait_mu);
        sched_yield();
    }
}

static void on_handle_closed(uv_handle_t *h)
{
    rl_dispatcher_t *d = h->data;
    if (--d->handles_open > 0)
        return;
    wait_for_callers(d);
    if (d->close_cb)
        d->close_cb(d);
    free_dispatcher(d);
}

static bool every_lane_idle(rl_dispatcher_t *d)
{
    bool idle = true;
    for (size_t i = 0; i < d->route.n && idle; i++) {
        rl__lane *l = d->route.lanes[i];
        rl__lock(&l->mu);
        idle = rl__lane_idle(l);
        rl__unlock(&l->mu);
    }
    for (rl__lane *r = d->retiring; r && idle; r = r->next_retiring) {
        rl__lock(&r->mu);
        idle = rl__lane_idle(r);
        rl__unlock(&r->mu);
    }
    return idle;
}

/* When closing and every lane is idle: stop the workers, end what is left, close the handles. */
static void maybe_finish_close(rl_dispatcher_t *d)
{
    if (d->close_done || !every_lane_idle(d))
        return;
    rl__pool_stop(d);
    d->close_done = true;
    /* Jobs of a key end in order: those that ran first, then those handed back. */
    rl__deliver_completions(d);
    rl__hand_back(d, &d->returned);
    d->handles_open = 3;
    uv_close((uv_handle_t *)&d->timer, on_handle_closed);
    uv_close((uv_handle_t *)&d->async, on_handle_closed);
    rl__stats_timer_close(d, on_handle_closed);
}

/* Rounds of completions one wake-up delivers at most, before the loop's other handles run. */
#define DELIVERY_ROUNDS 8

/* How long the loop waits for a next completion before it goes back to sleep. Going to sleep
 * and being woken costs more than this on both threads (the worker's eventfd write, the loop's
 * epoll_wait and read); the wait is over the moment a job ends. */
#define COMPLETION_WAIT_NS 2000
/* How long one wake-up goes on waiting for and delivering completions, before the loop's other
 * handles run. */
#define WAKE_UP_BUDGET_NS 50000
/* The most wake-ups skipped after a wait that saw nothing (the count doubles from 1). */
#define COMPLETION_WAIT_SKIP_MAX 64
/* Rounds of delivery without a submission from the loop after which it no longer feeds. */
#define FEEDING_ROUNDS 128

/* Whether the loop waits a moment for a next completion: only while it feeds the workers
 * itself (it submitted within its last FEEDING_ROUNDS rounds of delivery: a program whose other
 * threads submit keeps the core for them), with a core to spare for it beside every worker (so
 * it takes no time from a handler), with jobs held, and not in the wake-ups skipped after a
 * wait that saw nothing (so sparse completions cost almost no waiting). Loop thread, after a
 * round of delivery. */
static bool completion_wait_worth(rl_dispatcher_t *d)
{
    if (d->loop_jobs != d->loop_jobs_seen) {
        d->loop_jobs_seen = d->loop_jobs;
        d->rounds_unfed = 0;
    } else if (d->rounds_unfed < FEEDING_ROUNDS) {
        d->rounds_unfed++;
    }
    if (d->async_mode || d->rounds_unfed == FEEDING_ROUNDS || d->nworkers + 1 > d->cores ||
        atomic_load(&d->jobs) == 0)
        return false;
    if (d->wait_skip) {
        d->wait_skip--;
        return false;
    }
    return true;
}

/* Waits up to COMPLETION_WAIT_NS for the completion stack to fill; `delivering` is up, so the
 * worker that fills it does not write to the loop's eventfd. Never inlined, so that a profile
 * tells time spent waiting from time spent working (bench/instructions_per_job.sh). */
__attribute__((noinline)) static bool rl__wait_for_completion(rl_dispatcher_t *d, uint64_t start)
{
    do {
        for (int i = 0; i < 64; i++) {
            if (atomic_load_explicit(&d->done_head, memory_order_relaxed)) {
                d->wait_backoff = 0;
                return true;
            }
            rl__cpu_relax();
        }
    } while (uv_hrtime() - start < COMPLETION_WAIT_NS);
    d->wait_backoff = d->wait_backoff ? d->wait_backoff * 2 : 1;
    if (d->wait_backoff > COMPLETION_WAIT_SKIP_MAX)
        d->wait_backoff = COMPLETION_WAIT_SKIP_MAX;
    d->wait_skip = d->wait_backoff;
    return false;
}

static void on_async(uv_async_t *a)
{
    rl_dispatcher_t *d = a->data;
    if (d->close_done)
        return;
    /* While `delivering` is up, executors that finish a job do not wake the loop (a write to
     * its eventfd, which the loop then waits out): it looks at the stack again before it goes.
     * Down, then the stack read: a job pushed meanwhile is seen here or wakes the loop. */
    atomic_store(&d->delivering, true);
    int rounds = 1;
    uint64_t waits_end = 0;
    for (;;) {
        rl__deliver_completions(d);
        if (atomic_load(&d->done_head)) {
            if (++rounds > DELIVERY_ROUNDS)
                break;
            continue;
        }
        if (!completion_wait_worth(d))
            break;
        uint64_t now = uv_hrtime();
        if (!waits_end)
            waits_end = now + WAKE_UP_BUDGET_NS;
        else if (now >= waits_end)
            break;
        if (!rl__wait_for_completion(d, now))
            break;
    }
    atomic_store(&d->delivering, false);
    if (atomic_load(&d->done_head))
        uv_async_send(&d->async); /* more came: the loop's next turn delivers them */
    rl__timers_take_requests(d);
    if (d->async_mode)
        rl__run_async_ready(d);
    reap_retired(d);
    rl__pool_reap(d);
    if (atomic_load(&d->closing)) {
        rl__deliver_completions(d);
        maybe_finish_close(d);
    } else {
        rl__check_capacity(d);
    }
}

/* Under the route lock (write): a STOP close hands back the lane's queued and parked jobs, and a
 * job waiting for its retry (which must then be let go: *taken). */
static void close_lane(rl_dispatcher_t *d, rl__lane *l, int mode, bool *taken)
{
    *taken = false;
    rl__lock(&l->mu);
    if (mode == RL_DISPATCH_STOP) {
        /* Queued jobs and those parked at this lane go back; sorted when handed back. */
        rl__lock(&d->returned_mu);
        rl__lq_drain(&l->queue, &d->returned);
        for (rl__fence *f = l->fences; f; f = f->next_held)
            rl__jobq_append(&d->returned, &f->parked);
        rl__parks_return_all(l, &d->returned);
        if (l->busy && l->cur_job && (l->in_backoff || l->retry_due)) {
            rl__jobq_push(&d->returned, l->cur_job);
            rl__jobq_append(&d->returned, &l->batch); /* the rest of its batch */
            l->cur_job = NULL;
            *taken = true;
        }
        rl__unlock(&d->returned_mu);
        l->parked = 0;
        rl__lane_set_depth(l);
        l->stopping = true;
    }
    rl__unlock(&l->mu);
}

int rl_dispatch_close(rl_dispatcher_t *d, int mode, rl_dispatch_close_cb cb)
{
    if (!d || (mode != RL_DISPATCH_DRAIN && mode != RL_DISPATCH_STOP))
        return RL_EINVAL;
    if (!rl__on_loop_thread(d))
        return RL_ESTATE;
    if (atomic_load(&d->closing))
        return RL_ECLOSED;
    size_t cap = d->route.n + d->n_retiring, ntaken = 0;
    rl__lane **taken = calloc(cap ? cap : 1, sizeof *taken);
    if (!taken)
        return RL_ENOMEM;
    uv_timer_stop(&d->stats_timer); /* no statistics once closing (a consumer frees its own) */
    pthread_rwlock_wrlock(&d->route_lock);
    atomic_store(&d->closing, true);
    d->close_mode = mode;
    d->close_cb = cb;
    bool t;
    for (size_t i = 0; i < d->route.n; i++) {
        close_lane(d, d->route.lanes[i], mode, &t);
        if (t)
            taken[ntaken++] = d->route.lanes[i];
    }
    for (rl__lane *r = d->retiring; r; r = r->next_retiring) {
        close_lane(d, r, mode, &t);
        if (t && ntaken < cap)
            taken[ntaken++] = r;
    }
    pthread_rwlock_unlock(&d->route_lock);
    for (size_t i = 0; i < ntaken; i++)
        rl__lane_release_taken(taken[i]);
    free(taken);
    /* Wake blocked submitters: they see the close. */
    rl__lock(&d->space_mu);
    d->space_gen++;
    uv_cond_broadcast(&d->space_cv);
    rl__unlock(&d->space_mu);
    uv_async_send(&d->async);
    return 0;
}

/* --- init --- */

static int check_stats_options(const rl_dispatch_options *o)
{
    int rc = rl__stats_options_check(o->stats_interval_ms, o->on_stats != NULL, o->stats_lanes,
                                     "every lane");
    if (rc)
        return rc;
    if (o->hot_keys > RL_DISPATCH_HOT_KEYS_MAX)
        return rl_error_detail_set(RL_EINVAL,
                                   "hot_keys %u: over RL_DISPATCH_HOT_KEYS_MAX (%u keys followed; "
                                   "the statistics list a few, and every submission pays for the "
                                   "sketch's rounds; 0 = off)",
                                   o->hot_keys, RL_DISPATCH_HOT_KEYS_MAX);
    return 0;
}

/* The handlers: exactly one, and batch_max only with a batch handler. */
static int check_handler_options(const rl_dispatch_options *o)
{
    int given = !!o->handler + !!o->async_handler + !!o->batch_handler + !!o->async_batch_handler;
    if (!given)
        return rl_error_detail_set(RL_EINVAL, "handler and async_handler NULL: give exactly one "
                                              "(handler blocks on a worker thread, async_handler "
                                              "starts the job on the loop; batch_handler and "
                                              "async_batch_handler take batches)");
    if (o->handler && o->async_handler)
        return rl_error_detail_set(RL_EINVAL,
                                   "handler and async_handler both set: give exactly one");
    if (given > 1)
        return rl_error_detail_set(RL_EINVAL, "%s and %s both set: give exactly one handler",
                                   o->handler         ? "handler"
                                   : o->async_handler ? "async_handler"
                                                      : "batch_handler",
                                   o->async_batch_handler ? "async_batch_handler"
                                                          : "batch_handler");
    if (o->batch_max > RL_DISPATCH_BATCH_MAX)
        return rl_error_detail_set(RL_ERANGE,
                                   "batch_max %u: over RL_DISPATCH_BATCH_MAX (%u jobs per handler "
                                   "call; 0 and 1: one job per call)",
                                   o->batch_max, RL_DISPATCH_BATCH_MAX);
    if (o->batch_max > 1 && !o->batch_handler && !o->async_batch_handler)
        return rl_error_detail_set(RL_EINVAL,
                                   "batch_max %u with %s: batches go to batch_handler or "
                                   "async_batch_handler (0 and 1: one job per call)",
                                   o->batch_max, o->handler ? "handler" : "async_handler");
    return 0;
}

static int check_options(const rl_dispatch_options *o)
{
    int rc = check_handler_options(o);
    if (rc)
        return rc;
    bool blocking = o->handler || o->batch_handler;
    if (o->lane_count == 0)
        return o->lanes
                   ? rl_error_detail_set(RL_EINVAL,
                                         "lane_count 0: a dispatcher needs at least one lane")
                   : rl_error_detail_set(RL_EINVAL,
                                         "lanes NULL with lane_count 0: no lanes (lane_count "
                                         "N alone makes N lanes named \"" RL_DISPATCH_LANE_PREFIX
                                         "0\" .. \"" RL_DISPATCH_LANE_PREFIX "<N-1>\")");
    if (o->lane_capacity == 0)
        return rl_error_detail_set(RL_EINVAL, "lane_capacity 0: a lane must hold at least one job "
                                              "(1..4294967295)");
    if (o->max_jobs == 0)
        return rl_error_detail_set(RL_EINVAL, "max_jobs 0: the dispatcher must hold at least one "
                                              "job (1..4294967295)");
    if (o->max_attempts == 0)
        return rl_error_detail_set(RL_EINVAL, "max_attempts 0: a job needs at least one handler "
                                              "call (1..4294967295)");
    if (o->backoff_max_ms < o->backoff_ms)
        return rl_error_detail_set(RL_EINVAL,
                                   "backoff_max_ms %u below backoff_ms %u: the largest delay must "
                                   "be at least the first",
                                   o->backoff_max_ms, o->backoff_ms);
    if (!blocking && o->workers)
        return rl_error_detail_set(RL_EINVAL,
                                   "workers %u with async_handler: workers are for blocking "
                                   "handlers; an asynchronous lane needs no thread",
                                   o->workers);
    if (blocking && o->job_timeout_ms)
        return rl_error_detail_set(RL_EINVAL,
                                   "job_timeout_ms %u with handler: the time limit is for "
                                   "async_handler (a blocking call cannot be cut short)",
                                   o->job_timeout_ms);
    if (o->lane_count > RL_DISPATCH_LANES_MAX)
        return rl_error_detail_set(RL_ERANGE,
                                   "lane_count %zu: over RL_DISPATCH_LANES_MAX (%u lanes)",
                                   o->lane_count, RL_DISPATCH_LANES_MAX);
    if (o->workers > RL_DISPATCH_THREADS_MAX)
        return rl_error_detail_set(RL_ERANGE,
                                   "workers %u: over RL_DISPATCH_THREADS_MAX (%u threads)",
                                   o->workers, RL_DISPATCH_THREADS_MAX);
    if (blocking && !o->workers && o->lane_count > RL_DISPATCH_THREADS_MAX)
        return rl_error_detail_set(RL_ERANGE,
                                   "lane_count %zu with workers 0: a thread per lane is over "
                                   "RL_DISPATCH_THREADS_MAX (%u threads); set workers (a pool "
                                   "shared by the lanes) or use async_handler",
                                   o->lane_count, RL_DISPATCH_THREADS_MAX);
    for (size_t i = 0; o->lanes && i < o->lane_count; i++)
        if (!o->lanes[i])
            return rl_error_detail_set(RL_EINVAL, "lanes[%zu] NULL: every lane needs a name", i);
    int stats_rc = check_stats_options(o);
    if (stats_rc)
        return stats_rc;
    return rl__rate_check(o->max_rate, o->max_burst, "max_rate", "max_burst", "jobs");
}

/* The ring's refusal of the lanes and of opts->ring, in the dispatcher's words: the ring's
 * members are the lanes (its "members[i].name" is lanes[i]), its options opts->ring. */
static int ring_refusal(int rc)
{
    if (rl__detail_is_resource(rc))
        return rc;
    const char *d = rl_last_error_detail();
    if (strncmp(d, "members[", 8) == 0) {
        char *end;
        unsigned long long i = strtoull(d + 8, &end, 10);
        if (strncmp(end, "].name", 6) == 0) {
            char rest[RL_ERROR_DETAIL_MAX];
            snprintf(rest, sizeof rest, "%s", end + 6);
            return rl_error_detail_set(rc, "lanes[%llu]%s", i, rest);
        }
    }
    return rl__detail_prefix(rc, "ring->");
}

/* The ring members of the lanes: opts->lanes, or for lanes NULL the names
 * RL_DISPATCH_LANE_PREFIX "<i>", written into *names (freed by the caller). */
#define LANE_NAME_SIZE 32 /* "lane-", up to 20 digits and the NUL */
static int lane_members(const rl_dispatch_options *o, rl_member **members, char **names)
{
    *names = NULL;
    *members = calloc(o->lane_count, sizeof **members);
    if (!*members)
        return rl_error_detail_set(RL_ENOMEM, "out of memory: the ring of %zu lanes",
                                   o->lane_count);
    if (!o->lanes) {
        *names = malloc(o->lane_count * LANE_NAME_SIZE);
        if (!*names) {
            free(*members);
            *members = NULL;
            return rl_error_detail_set(RL_ENOMEM, "out of memory: the names of %zu lanes",
                                       o->lane_count);
        }
    }
    for (size_t i = 0; i < o->lane_count; i++) {
        const char *name = o->lanes ? o->lanes[i] : *names + i * LANE_NAME_SIZE;
        if (!o->lanes)
            snprintf(*names + i * LANE_NAME_SIZE, LANE_NAME_SIZE, RL_DISPATCH_LANE_PREFIX "%zu", i);
        (*members)[i] = (rl_member){.name = name, .weight = 1, .zone = NULL};
    }
    return 0;
}

static int init_sync(rl_dispatcher_t *d)
{
    pthread_rwlockattr_t attr;
    if (pthread_rwlockattr_init(&attr) != 0)
        return RL_ENOMEM;
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int rc = pthread_rwlock_init(&d->route_lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    if (rc != 0)
        return RL_ENOMEM;
    if (uv_mutex_init(&d->returned_mu) || uv_mutex_init(&d->space_mu) ||
        uv_cond_init(&d->space_cv) || uv_mutex_init(&d->wait_mu) || uv_cond_init(&d->wait_cv) ||
        uv_mutex_init(&d->ready_mu) || uv_cond_init(&d->ready_cv))
        return RL_ELOOP; /* not reached on Linux, where these cannot fail */
    int trc = rl__timers_init(d);
    return trc ? trc : rl__rate_init(d);
}

/* The worker threads a dispatcher of blocking handlers keeps: its pool, or one per lane (the
 * retiring ones included, which may still have a retry to run). */
size_t rl__workers_wanted(const rl_dispatcher_t *d)
{
    if (d->async_mode)
        return 0;
    if (d->opts.workers)
        return d->opts.workers;
    size_t n = d->route.n + d->n_retiring;
    return n ? n : 1;
}

int rl_dispatch_init(struct uv_loop_s *loop, const rl_dispatch_options *opts, rl_dispatcher_t **out)
{
    rl_error_detail_clear();
    if (!out)
        return rl_error_detail_set(RL_EINVAL, "out NULL: nowhere to put the dispatcher");
    *out = NULL;
    if (!loop)
        return rl_error_detail_set(RL_EINVAL, "loop NULL: a dispatcher runs on a uv_loop_t");
    if (!opts)
        return rl_error_detail_set(RL_EINVAL,
                                   "opts NULL: fill them with rl_dispatch_options_init()");
    int rc = check_options(opts);
    if (rc)
        return rc;

    rl_member *members = NULL;
    char *names = NULL;
    rc = lane_members(opts, &members, &names);
    if (rc)
        return rc;
    rl_ring_t *ring = NULL, *hash_ring = NULL;
    rc = rl_ring_build(members, opts->lane_count, opts->ring, &ring);
    free(members);
    free(names); /* the ring and the lanes keep copies */
    if (!rc)
        rc = rl_ring_build(NULL, 0, opts->ring, &hash_ring);
    if (rc)
        ring_refusal(rc);
    rl_dispatcher_t *d = rc ? NULL : calloc(1, sizeof *d);
    if (!rc && !d)
        rc = rl_error_detail_set(RL_ENOMEM, "out of memory: the dispatcher");
    if (rc) {
        rl_ring_free(ring);
        rl_ring_free(hash_ring);
        return rc;
    }
    d->loop = loop;
    d->loop_thread = uv_thread_self();
    d->opts = *opts;
    d->opts.lanes = NULL;
    d->opts.lane_count = 0;
    d->async_mode = opts->async_handler || opts->async_batch_handler;
    d->cores = uv_available_parallelism();
    d->rounds_unfed = FEEDING_ROUNDS; /* it feeds once it submits */
    d->hash_ring = hash_ring;
    rl__route_set_ring(&d->route, ring);
    d->route.n = opts->lane_count;
    d->route.lanes = calloc(d->route.n, sizeof *d->route.lanes);
    atomic_init(&d->done_head, NULL);
    if (!d->route.lanes || init_sync(d) != 0) {
        free(d->route.lanes);
        rl_ring_free(ring);
        rl_ring_free(hash_ring);
        free(d);
        return rl_error_detail_set(RL_ENOMEM, "out of memory: the dispatcher's %zu lanes or locks",
                                   opts->lane_count);
    }
    if (rl__hot_keys_new(opts->hot_keys, &d->hot) != 0)
        rc = rl_error_detail_set(RL_ENOMEM, "out of memory: the hot-key sketch of %u keys",
                                 opts->hot_keys);
    for (size_t i = 0; i < d->route.n && !rc; i++) {
        const char *name = rl_ring_node_name(ring, (uint32_t)i);
        rc = rl__lane_new(d, name, &d->route.lanes[i]);
        if (!rc)
            rc = rl__slot_take(d, d->route.lanes[i]);
        if (rc)
            rl_error_detail_set(rc, "%s: lane %zu of %zu",
                                rc == RL_ENOMEM ? "out of memory" : "libuv could not make a mutex",
                                i, d->route.n);
    }
    if (!rc)
        rc = rl__pool_resize(d, rl__workers_wanted(d)); /* sets its detail */
    int uerr = rc ? 0 : uv_async_init(loop, &d->async, on_async);
    if (uerr)
        rc = rl_error_detail_set(RL_ELOOP, "loop: uv_async_init: %s", uv_strerror(uerr));
    if (rc) {
        rl__pool_stop(d);
        free_dispatcher(d);
        return rc;
    }
    d->async.data = d;
    rl__timers_start(d);
    rl__stats_timer_init(d);
    *out = d;
    return 0;
}
