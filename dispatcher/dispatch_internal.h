/* SPDX-License-Identifier: BSD-2-Clause */
/* Internals shared by the dispatcher's source files. Not installed.
 *
 * Locks, in the only order they are ever nested:
 *   wait_mu -> route_lock (write) -> one lane's mu  (wait_tag looks: no job moves meanwhile)
 *   route_lock (write) -> one lane's mu            (lane changes, close)
 *   one lane's mu -> returned_mu
 *   one lane's mu -> ready_mu                       (a lane put on the ready list)
 *   route_lock (read) -> one lane's mu             (rl_dispatch_complete finds the lane)
 *   wait_mu -> timer_mu                            (wait_tag looks for timer requests)
 *   one lane's mu -> space_mu                       (a lane's worker makes room)
 *   timer_mu, space_mu alone otherwise; wait_mu is not held while jobs end (they take it)
 *   route_lock (write) -> ready_mu                  (take_tag pauses job starts)
 *   one lane's mu -> rate_mu                        (a submission takes its token)
 *   one lane's mu -> hot->locked                    (a submission counts its key)
 * No code holds two lane mutexes at once; nothing is taken while holding space_mu, rate_mu or
 * hot->locked (hot_keys.c: a spin lock). */
#ifndef RINGLANE_DISPATCH_INTERNAL_H
#define RINGLANE_DISPATCH_INTERNAL_H

#include "ringlane/dispatcher.h"
#include "ringlane/error.h"
#include "ringlane/ring_view.h"
#include "token_bucket.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdbool.h>
#include <uv.h>

/* A job as the dispatcher holds it: the public view first. */
typedef struct rl__job {
    rl_dispatch_job pub;
    struct rl__job *next; /* in one queue, parked list, or the completion stack */
    uint64_t submit_ns;
    int outcome;
} rl__job;

/* A FIFO of jobs (singly linked, with a tail for O(1) append). */
typedef struct rl__jobq {
    rl__job *head, *tail;
    size_t len;
} rl__jobq;

static inline void rl__jobq_push(rl__jobq *q, rl__job *j)
{
    j->next = NULL;
    if (q->tail)
        q->tail->next = j;
    else
        q->head = j;
    q->tail = j;
    q->len++;
}

static inline rl__job *rl__jobq_pop(rl__jobq *q)
{
    rl__job *j = q->head;
    if (j) {
        q->head = j->next;
        if (!q->head)
            q->tail = NULL;
        q->len--;
        j->next = NULL;
    }
    return j;
}

/* Moves all of src to the end of dst. */
static inline void rl__jobq_append(rl__jobq *dst, rl__jobq *src)
{
    if (!src->head)
        return;
    if (dst->tail)
        dst->tail->next = src->head;
    else
        dst->head = src->head;
    dst->tail = src->tail;
    dst->len += src->len;
    *src = (rl__jobq){0};
}

/* Moves all of src to the front of dst. */
static inline void rl__jobq_prepend(rl__jobq *dst, rl__jobq *src)
{
    if (!src->head)
        return;
    src->tail->next = dst->head;
    if (!dst->head)
        dst->tail = src->tail;
    dst->head = src->head;
    dst->len += src->len;
    *src = (rl__jobq){0};
}

/* Sorts a queue by submission sequence (a stable merge sort; allocates nothing). */
void rl__jobq_sort_seq(rl__jobq *q);

/* Unlinks the jobs with `tag` from q and appends them to out, keeping order. Returns how many. */
size_t rl__jobq_take_tag(rl__jobq *q, int64_t tag, rl__jobq *out);

/* A lane's queue: a ring buffer of (key position, job). The positions sit beside the pointers
 * so a lane change can route every queued job without touching the jobs themselves. Capacity is
 * a power of two and never shrinks; the lane keeps cap >= len + parked, so jobs parked for it
 * can always be spliced in without allocating. */
typedef struct rl__qent {
    uint64_t hash;
    rl__job *job;
} rl__qent;

typedef struct rl__lq {
    rl__qent *v;
    size_t cap, head, len;
} rl__lq;

static inline rl__qent *rl__lq_at(const rl__lq *q, size_t i)
{
    return &q->v[(q->head + i) & (q->cap - 1)];
}

/* The caller guarantees room (len < cap). */
static inline void rl__lq_push(rl__lq *q, rl__job *j)
{
    *rl__lq_at(q, q->len) = (rl__qent){j->pub.hash, j};
    q->len++;
}

static inline rl__job *rl__lq_pop(rl__lq *q)
{
    if (!q->len)
        return NULL;
    rl__job *j = q->v[q->head].job;
    q->head = (q->head + 1) & (q->cap - 1);
    q->len--;
    return j;
}

/* Makes room for n entries in all; RL_ENOMEM leaves the queue as it was. */
int rl__lq_grow(rl__lq *q, size_t n);
/* Shrinks the array to the smallest power of two (16 at least) holding n >= len entries, when
 * that is smaller; keeps it when the smaller one cannot be had. */
void rl__lq_fit(rl__lq *q, size_t n);

static inline int rl__lq_reserve(rl__lq *q, size_t n)
{
    return n <= q->cap ? 0 : rl__lq_grow(q, n);
}

/* Moves a job list to the front (in its order) or the back; the caller guarantees room. */
void rl__lq_prepend(rl__lq *q, rl__jobq *src);
void rl__lq_append(rl__lq *q, rl__jobq *src);

/* Moves every entry of q to the end of a job list. */
void rl__lq_drain(rl__lq *q, rl__jobq *out);

struct rl__lane;

/* A lane's fence: the key of its in-flight job moved to another lane (the holder) during a
 * change; jobs of that key wait in `parked` until this lane finishes the job. See
 * lane_change.c for the protocol. */
typedef struct rl__fence {
    bool active;
    uint64_t hash;
    struct rl__lane *holder;
    rl__jobq parked;
    struct rl__fence *next_held; /* in holder->fences */
} rl__fence;

/* A key parked for a retry: its job whose attempt failed waits for its retry, and the key's
 * later jobs wait behind it, at the key's owner (the holder), while the holder goes on with its
 * other keys. When the retry is due, job and later jobs go to the front of the holder's queue.
 * See retry_park.c. Linked in holder->parks while it holds jobs; freed by the timer. */
typedef struct rl__park {
    uint64_t hash;
    struct rl__job *job; /* NULL once handed back (take_tag, a STOP close) */
    rl__jobq later;
    struct rl__lane *holder;
    struct rl__park *next;
    bool linked;
    bool due;        /* the retry is due: the holder starts it before its queue */
    bool timer_done; /* its timer entry has fired: whoever unlinks it frees it */
} rl__park;

#define RL__HIST_SUB 8 /* buckets per power of two */
#define RL__HIST_BUCKETS (64 * RL__HIST_SUB)

/* A lane: a FIFO of jobs and the state of its one job in flight. No thread belongs to it: an
 * executor (a pool worker for blocking handlers, the loop thread for asynchronous ones) takes
 * a ready lane from the dispatcher's ready list, starts its next job, and gives it back.
 *
 * Execution state, under mu:
 *   busy       a job is in flight: in its handler, pending its completion, or waiting for a
 *              retry (cur_* describe it; the job is touched through cur_job only by take_tag
 *              and a STOP close, while it waits for its retry)
 *   in_backoff busy, its retry timer has not fired
 *   retry_due  busy, the timer fired: the next executor runs cur_job again
 *   owned      an executor holds the lane (between taking it from the ready list and giving it
 *              back); nothing else puts it on the ready list meanwhile
 *   queued     on the ready list
 * A lane is runnable when retry_due, or when it is not busy and its queue is not empty; a
 * runnable lane that is neither owned nor queued is put on the ready list (rl__lane_ready), so
 * at most one executor serves a lane and at most one job of it is in flight. */
typedef struct rl__lane {
    /* What a submission touches comes first; what the executor writes for every job (busy,
     * cur_*, the statistics) more than a cache line after it. Mixed, a loop thread feeding a
     * lane its worker runs missed on the worker's line at every submission (bench_dispatch
     * uv, one worker: 2.25M to 2.47M jobs/s, medians of 7 interleaved runs). */
    uv_mutex_t mu;
    rl__lq queue;
    atomic_size_t depth_hint; /* queue.len + parked, readable without the lock */
    size_t parked;            /* jobs in the parked lists of fences and parks */
    rl__fence *fences;        /* fences held here (other lanes' keys that now belong here) */
    rl__park *parks;          /* keys parked here for a retry (their jobs count in parked) */
    bool owned, queued;       /* see above: they change when an executor takes or gives it */
    bool blocked;             /* a waiting submitter was refused here (under mu) */
    /* A submission to this lane got RL_EAGAIN and on_capacity has not been called since: the
     * lane is then on the dispatcher's refused stack or list (next_refused links it). Set, and
     * the lane pushed, under mu; cleared by the loop thread once it has unlinked the lane. */
    atomic_bool refused;
    struct rl__lane *next_refused;
    /* The lane may hold something (queued, parked, in flight, a fence): it is then on the
     * dispatcher's stack or list of held lanes (next_held_lane links it), and a lane change
     * looks at it; a lane not on it holds nothing, and a change passes it by. Set, and the lane
     * pushed, under mu whenever something is put in it (rl__lane_hold); cleared by a change,
     * under mu, once it has found the lane empty and unlinked it. */
    atomic_bool held;
    struct rl__lane *next_held_lane;

    rl_dispatcher_t *d;
    char *name;
    uint32_t slot;   /* in d->slots: the lane a ticket names */
    rl__fence fence; /* this lane's own fence; its fields change under the route lock */
    size_t nparks;

    /* The job in flight, under mu. */
    bool busy, in_backoff, retry_due;
    uint64_t cur_hash;
    int64_t cur_tag;
    rl__job *cur_job;
    /* Batches: the jobs in flight after cur_job, of its key and tag, in order (batch.c). */
    rl__jobq batch;
    uint64_t cur_ticket; /* asynchronous: the ticket of the attempt pending completion, or 0 */
    uint64_t gen;        /* changes with each retry delay: names it to the timer */
    uint32_t timer_refs; /* timer entries that name this lane (it is not freed before 0) */
    bool retiring, stopping;

    /* statistics (under mu); the histogram is made at the first sample */
    uint64_t processed, failed, retried, dead;
    uint64_t *hist;

    struct rl__lane *next_ready;
    struct rl__lane *next_taken; /* take_tag's list of lanes to let go on */
    struct rl__lane *next_retiring;
} rl__lane;

/* A lane the bounded statistics may list: how many jobs it holds, to rank it. */
typedef struct rl__busy_lane {
    uint64_t held;
    rl__lane *lane;
    bool retiring;
} rl__busy_lane;

/* The memory one statistics call works in: the lane entries it reports, the busiest lanes it
 * ranks, a histogram to read a lane's into. The public functions make one per call; the stats
 * timer keeps one, so that its ticks allocate nothing once it has grown. */
typedef struct rl__stats_scratch {
    rl_dispatch_lane_stats *lanes;
    size_t lanes_cap;
    rl__busy_lane *top;
    size_t top_cap;
    uint64_t *hist;
    rl_dispatch_hot_key *hot; /* the hot keys, hottest first */
    size_t hot_cap;
} rl__stats_scratch;

/* A key the hot-key sketch follows (hot_keys.c): free while jobs is 0. */
typedef struct rl__hot_entry {
    uint64_t hash;
    uint64_t key_len;
    uint32_t jobs;
    uint8_t stored; /* bytes of the key kept */
    unsigned char key[RL_DISPATCH_HOT_KEY_BYTES];
} rl__hot_entry;

/* The hot-key sketch: cap entries, an index of mask + 1 places (entry + 1, 0 empty) at most
 * half full, the free entries on a stack; rounds counts the times every entry lost one. All
 * under `locked`, a leaf lock. */
typedef struct rl__hot_keys {
    atomic_bool locked; /* a spin lock (hot_keys.c says why) */
    uint32_t cap, mask, nfree;
    rl__hot_entry *e;
    uint32_t *index;
    uint32_t *free;
    uint64_t rounds;
} rl__hot_keys;

/* hot_keys.c. A sketch of cap entries (*out NULL for 0), RL_ENOMEM. */
int rl__hot_keys_new(uint32_t cap, rl__hot_keys **out);
void rl__hot_keys_free(rl__hot_keys *h);
size_t rl__hot_keys_bytes(const rl__hot_keys *h); /* its memory, fixed at init */
/* A job of hash was accepted (under its lane's mutex, so its end comes after). */
void rl__hot_add(rl__hot_keys *h, uint64_t hash, const void *key, size_t key_len);
/* Loop thread: the jobs of q ended (they join the delivery list). */
void rl__hot_end(rl__hot_keys *h, const rl__jobq *q);

/* A timer entry: a lane's retry, or an asynchronous attempt's deadline. */
enum { RL__TIMER_RETRY = 0, RL__TIMER_DEADLINE = 1, RL__TIMER_PARK = 2, RL__TIMER_RATE = 3 };
typedef struct rl__timer_entry {
    uint64_t due_ns;
    rl__lane *lane; /* RETRY, DEADLINE (RATE: the rate limit's next token, no lane) */
    uint64_t id;    /* RETRY: the lane's gen then; DEADLINE: the attempt's ticket */
    int kind;
    rl__park *park; /* PARK: the parked key whose retry is due */
} rl__timer_entry;

typedef struct rl__timer_heap {
    rl__timer_entry *v;
    size_t len, cap;
} rl__timer_heap;

/* A worker thread of the pool. */
typedef struct rl__worker {
    rl_dispatcher_t *d;
    uv_thread_t thread;
    bool exited; /* under ready_mu, set by the thread as it leaves */
} rl__worker;

/* The routing state: a ring over lane names and the lane of each node index. */
typedef struct rl__route {
    rl_ring_t *ring;
    rl_ring_view view; /* the ring's lookup engine, read inline (set with the ring) */
    rl__lane **lanes;
    size_t n;
} rl__route;

/* Sets a route's ring and its view. */
static inline void rl__route_set_ring(rl__route *r, rl_ring_t *ring)
{
    r->ring = ring;
    rl_ring_view_init(ring, &r->view);
}

/* Frees a route's ring and lane array (not the lanes). */
void rl__route_free(rl__route *route);

/* The node index that owns a key position; the route's ring must not be empty. Most positions
 * are one read of the core's lookup table, inline: the library call around it was a tenth of
 * an empty job's instructions on the loop thread (bench/instructions_per_job.sh). */
static inline uint32_t rl__route_node(const rl__route *r, uint64_t hash)
{
    uint32_t node = 0;
    rl_ring_view_lookup_hash(&r->view, hash, &node);
    return node;
}

struct rl_dispatcher {
    uv_loop_t *loop;
    uv_async_t async;
    uv_thread_t loop_thread;
    rl_dispatch_options opts; /* lanes/lane_count cleared after init */
    rl_ring_t *hash_ring;     /* an empty ring with the profile: hashes keys without a lock */

    pthread_rwlock_t route_lock; /* writer-preferring: a change is not starved by submitters */
    rl__route route;             /* under route_lock; the loop thread reads it freely */
    rl__lane *retiring;          /* removed lanes still finishing, under route_lock */
    size_t n_retiring;           /* loop thread */

    atomic_bool closing;
    bool close_done;
    /* Loop thread: jobs whose on_done calls are being made: finished ones taken from the
     * completion stack, in completion order, and those handed back (rl__hand_back). One list,
     * so that a call made from inside on_done (take_tag, wait_tag) goes on with the outer
     * call's jobs before its own, and a key's jobs still end in order. */
    rl__jobq delivery;
    int close_mode;
    rl_dispatch_close_cb close_cb;

    _Atomic(rl__job *) done_head; /* finished jobs, pushed by workers (a stack) */
    atomic_bool delivering;       /* the loop is in on_async and reads the stack again */
    uv_mutex_t returned_mu;
    rl__jobq returned; /* jobs to hand back when a STOP close finishes */

    atomic_uint_fast64_t jobs, seq, refused, done, dead, returned_count;
    atomic_bool refused_global;
    /* Lanes that refused a submission since on_capacity was last called: pushed by submitters
     * (a stack, any thread), taken onto the loop thread's list by rl__check_capacity, which
     * looks only at them: its work follows the refusals, not the lane count. capacity_looks
     * counts the lanes it has looked at (loop thread; the tests read it). */
    _Atomic(rl__lane *) refused_new;
    rl__lane *refused_lanes;
    uint64_t capacity_looks;
    /* Lanes that may hold something (see rl__lane.held): pushed by whoever puts something in
     * an empty lane (a stack, any thread), taken onto the list by a change, which looks only at
     * them; change_looks counts the lanes changes have looked at (the tests read it). */
    _Atomic(rl__lane *) held_new;
    rl__lane *held_lanes;
    uint64_t change_looks;
    atomic_bool blocked_global; /* a waiting submitter was refused by max_jobs */

    /* The rate limit (rate_limit.c), when opts.max_rate is set (rate_on): the bucket under
     * rate_mu; a submission refused by it since on_capacity was last called (refused_rate), or
     * a waiting submitter refused by it (blocked_rate); the timer entry for the next token is
     * set (rate_timer_set: one at a time). rate_limited counts the refusals. */
    bool rate_on;
    uv_mutex_t rate_mu;
    rl__bucket bucket;
    atomic_bool refused_rate, blocked_rate, rate_timer_set;
    atomic_uint_fast64_t rate_limited;

    uv_mutex_t space_mu; /* blocked submitters wait for room here */
    uv_cond_t space_cv;
    uint64_t space_gen;
    atomic_int space_waiters;

    uv_mutex_t wait_mu; /* rl_dispatch_wait_tag waits here for handlers to finish */
    uv_cond_t wait_cv;
    atomic_int tag_waiters;

    atomic_uint_fast64_t changes, last_change_ns, max_change_ns;

    /* Executors. Ready lanes wait on one list; pool workers (blocking handlers) take them under
     * ready_mu and sleep on ready_cv; with an asynchronous handler the loop thread takes them. */
    bool async_mode;
    uv_mutex_t ready_mu;
    uv_cond_t ready_cv;
    rl__lane *ready_head, *ready_tail;
    rl__worker **workers; /* loop thread */
    size_t nworkers, workers_cap;
    size_t live_workers, target_workers, idle_workers; /* under ready_mu */
    bool pool_quit;                                    /* under ready_mu */
    bool spinning;         /* under ready_mu: a worker looks at the list before it sleeps */
    atomic_bool ready_any; /* ready_head is set (written under ready_mu; read by the spinner) */
    /* take_tag's moment: no executor starts a job while it is set (written under ready_mu,
     * read under a lane's mutex before each start). */
    atomic_bool starts_paused;

    /* Timers of retries and deadlines: a heap on the loop thread under one uv_timer, and the
     * requests other threads leave for it. */
    uv_timer_t timer;
    rl__timer_heap heap;
    uv_mutex_t timer_mu;
    rl__timer_heap requests;
    int handles_open; /* async, timer and stats_timer: freed when all have closed */

    /* Statistics: the counters of removed lanes once freed (under route_lock, written with
     * it held for writing), and the stats timer with the memory its ticks reuse. */
    rl_dispatch_removed_stats removed;
    rl__hot_keys *hot; /* the hot-key sketch, NULL when opts.hot_keys is 0 */
    uv_timer_t stats_timer;
    rl__stats_scratch stats_scratch;
    char *stats_text;
    size_t stats_text_cap;

    /* Tickets name a lane's slot; slots change under route_lock (write). */
    rl__lane **slots;
    uint32_t nslots, slots_cap, free_slot; /* free_slot: a free index, or nslots */
    uint64_t ticket_gen;                   /* loop thread */

    /* Loop thread: ended jobs kept for the loop thread's next submissions (a stack of at most
     * RL__SPARE_JOBS), so that a program feeding the dispatcher from its loop allocates
     * nothing per job once warm. */
    rl__job *spare;
    size_t nspare;

    /* Calls in progress from any thread (submit, wait_tag, statistics, get_data): the end of a
     * close waits for them before close_cb runs and the dispatcher is freed. */
    atomic_int entered;

    /* Loop thread: whether it waits a moment for a next completion before it sleeps (see
     * on_async): the cores this process may use, the jobs it has tried to submit (and how many
     * at its last round of delivery, and the rounds since it last tried), and the wake-ups to go
     * without waiting after a wait that saw no completion. */
    unsigned cores;
    uint64_t loop_jobs, loop_jobs_seen;
    uint32_t rounds_unfed, wait_skip, wait_backoff;
};

#define RL__SPARE_JOBS 1024

/* --- statistics (dispatch_stats.c) --- */

/* Room for `lanes` entries and `top` ranked lanes (grows, never shrinks); RL_ENOMEM. */
int rl__stats_scratch_reserve(rl__stats_scratch *sc, size_t lanes, size_t top);
void rl__stats_scratch_free(rl__stats_scratch *sc);

/* The statistics of rl_dispatch_stats_json_bounded: *s with its totals, and in sc->lanes the
 * lanes it lists (*got of them): every lane when there are at most max_lanes (*all true), else
 * the max_lanes busiest, busiest first (*busy counts the busy ones). */
int rl__stats_collect(rl_dispatcher_t *d, size_t max_lanes, rl__stats_scratch *sc,
                      rl_dispatch_stats *s, size_t *got, bool *all, size_t *busy);

/* The JSON texts of rl_dispatch_stats_json (max_lanes SIZE_MAX, no "lane_list") and
 * rl_dispatch_stats_json_bounded, in sc's memory. */
int rl__stats_json(rl_dispatcher_t *d, size_t max_lanes, rl__stats_scratch *sc, char *buf,
                   size_t cap, size_t *len);

/* The hot keys in sc->hot, hottest first, with their lanes (*n of them; *rounds: the sketch's
 * rounds so far). 0 with *n 0 when the sketch is off; RL_ENOMEM. */
int rl__hot_keys_read(rl_dispatcher_t *d, rl__stats_scratch *sc, size_t *n, uint64_t *rounds);

/* The statistics timer (stats_timer.c): made by init (unreferenced, so it never keeps the loop
 * alive), started when stats_interval_ms is set, closed with the other handles. */
void rl__stats_timer_init(rl_dispatcher_t *d);
void rl__stats_timer_close(rl_dispatcher_t *d, uv_close_cb cb);
void rl__stats_timer_free(rl_dispatcher_t *d);

static inline void rl__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Loop thread: a kept job, or NULL. */
static inline rl__job *rl__job_spare(rl_dispatcher_t *d)
{
    rl__job *j = d->spare;
    if (j) {
        d->spare = j->next;
        d->nspare--;
    }
    return j;
}

/* Loop thread: a job that has ended, kept for a next submission or freed. */
static inline void rl__job_recycle(rl_dispatcher_t *d, rl__job *j)
{
    if (d->nspare < RL__SPARE_JOBS) {
        j->next = d->spare;
        d->spare = j;
        d->nspare++;
    } else {
        free(j);
    }
}

/* Brackets a call that may come from any thread (see `entered`). */
static inline void rl__enter(rl_dispatcher_t *d)
{
    atomic_fetch_add(&d->entered, 1);
}
static inline void rl__leave(rl_dispatcher_t *d)
{
    atomic_fetch_sub(&d->entered, 1);
}

/* Waits on cv (mu held) until it is signalled or the clock passes deadline_ns (uv_hrtime;
 * UINT64_MAX: no limit). Waits are cut into pieces of at most an hour, so that no deadline,
 * however far, overflows the clock arithmetic of the wait (a wrapped deadline is a wait that
 * ends at once, and a caller looping on it spins). */
void rl__cond_wait_until(uv_cond_t *cv, uv_mutex_t *mu, uint64_t deadline_ns);

/* The deadline timeout_ms from now (UINT64_MAX when it is beyond what the clock can hold). */
uint64_t rl__deadline_after_ms(uint64_t timeout_ms);

/* True on the thread that called rl_dispatch_init. uv_thread_t is a pthread_t on unix, so it
 * is compared inline: every submission asks. */
/* uv_mutex_lock and uv_mutex_unlock without their call: a uv_mutex_t is a pthread_mutex_t on
 * the platforms this builds on (POSIX), and the lane mutex is taken twice per job. Failing, as
 * uv_mutex_lock does, is an abort: only a corrupted mutex fails. */
static inline void rl__lock(uv_mutex_t *m)
{
    if (pthread_mutex_lock(m) != 0)
        abort();
}

static inline void rl__unlock(uv_mutex_t *m)
{
    if (pthread_mutex_unlock(m) != 0)
        abort();
}

static inline bool rl__on_loop_thread(const rl_dispatcher_t *d)
{
    return pthread_equal(pthread_self(), d->loop_thread) != 0;
}

/* Wakes submitters waiting for room, if there are any. */
void rl__space_notify(rl_dispatcher_t *d);

/* The depth a full lane (or the job count) must fall to before waiting submitters are woken:
 * three quarters, so that a waiter wakes to room for a batch, not for one job; and at least
 * one place free, whatever the capacity (with a capacity under 4 three quarters is all). */
static inline size_t rl__low_water(size_t cap)
{
    size_t free_places = cap / 4 ? cap / 4 : 1;
    return cap - free_places;
}

/* Loop thread: runs on_done for every finished job and frees it (collect, then deliver). */
void rl__deliver_completions(rl_dispatcher_t *d);
/* Loop thread: moves the finished jobs to the end of the delivery list, without delivering. */
void rl__collect_completions(rl_dispatcher_t *d);
/* Loop thread: runs on_done for the jobs on the delivery list, in order. */
void rl__deliver_collected(rl_dispatcher_t *d);

/* Loop thread: hands back the jobs of q (RL_DISPATCH_RETURNED), in submission order, after
 * the jobs already on the delivery list. On the same list as completions, so that a call made
 * from inside one of their on_done calls (take_tag, wait_tag) ends the rest of them before
 * anything of its own, and a key's jobs still end in order. */
void rl__hand_back(rl_dispatcher_t *d, rl__jobq *q);

/* Loop thread: fires on_capacity if a refused submission would now find room. */
void rl__check_capacity(rl_dispatcher_t *d);
/* Under l->mu: notes that l refused a submission (for rl__check_capacity). */
void rl__note_refused(rl_dispatcher_t *d, rl__lane *l);
/* Loop thread, l retired and idle (nothing submits to it any more): takes it off the refused
 * list before it is freed. */
void rl__forget_refused(rl_dispatcher_t *d, rl__lane *l);

/* rate_limit.c */
int rl__rate_init(rl_dispatcher_t *d); /* the bucket, full, when opts.max_rate is set */
void rl__rate_free(rl_dispatcher_t *d);
/* Any thread, d->rate_on: takes up to `want` tokens (under a lane's mutex or none); how many. */
size_t rl__rate_take(rl_dispatcher_t *d, size_t want);
void rl__rate_give_back(rl_dispatcher_t *d, size_t n); /* tokens taken for jobs not queued */
/* Any thread, no lock held: `count` submissions were refused by the bucket; counts them and
 * sets the timer entry for the next token when someone waits for it (on_capacity, or a
 * submitter that waits: `waiting`). */
void rl__rate_refused(rl_dispatcher_t *d, bool waiting, uint64_t count);
void rl__rate_arm(rl_dispatcher_t *d);       /* the timer entry for the next token, if none */
bool rl__rate_has_token(rl_dispatcher_t *d); /* a whole token is in the bucket now */
void rl__rate_due(rl_dispatcher_t *d);       /* loop thread: the entry fired */

/* lane.c */
int rl__lane_new(rl_dispatcher_t *d, const char *name, rl__lane **out);
void rl__lane_free(rl__lane *l); /* an idle lane no timer names */
void rl__hist_add(uint64_t *hist, uint64_t ns);
double rl__hist_quantile_us(const uint64_t *hist, double q);

/* Under l->mu: something is put in l; a lane change must look at it (see rl__lane.held). The
 * test inline (the lane is on the list already, the common case), the push in lane.c. */
void rl__lane_hold_slow(rl__lane *l);
static inline void rl__lane_hold(rl__lane *l)
{
    if (!atomic_load_explicit(&l->held, memory_order_relaxed))
        rl__lane_hold_slow(l);
}

/* Under l->mu: the depth readable without the lock. Inline: every submission and start sets it. */
static inline void rl__lane_set_depth(rl__lane *l)
{
    atomic_store_explicit(&l->depth_hint, l->queue.len + l->parked, memory_order_relaxed);
}

/* Under l->mu: puts a runnable lane that no executor holds on the ready list and wakes an
 * executor. Does nothing otherwise: the test inline (a submission to a lane its worker holds
 * is the common case), the rest in lane.c. */
void rl__lane_ready_slow(rl__lane *l);
static inline void rl__lane_ready(rl__lane *l)
{
    if (!l->owned && !l->queued)
        rl__lane_ready_slow(l);
}

/* Under l->mu, l owned by the caller: the job to run now (a due retry, or the next queued job,
 * made the one in flight), or NULL. A due retry of a stopping lane is handed back instead
 * (its caller finishes it: *returned). */
rl__job *rl__lane_next(rl__lane *l, rl__job **returned);

/* An attempt of j on l ended with status rc (no lock held): schedules the retry, or ends the
 * job (DONE, DEAD, or RETURNED when stopping). True when the lane's job in flight is over. */
bool rl__attempt_ended(rl__lane *l, rl__job *j, int rc);

/* Ends l's job in flight with `outcome` (no lock held): publishes it, lets go of the key,
 * releases the fence, and puts the lane back on the ready list if it is not owned. */
void rl__job_finished(rl__lane *l, rl__job *j, int outcome);

/* A worker's attempt that succeeded in the lane it holds (owned): the job ends, and the lane's
 * mutex is kept for the next start. Called without l->mu, returns with it. */
void rl__job_succeeded(rl__lane *l, rl__job *j);

/* lane.c, for batch.c. Publishes a job that ended (see rl__job_finished); the lane still
 * holds its key. Returns the queue-to-done latency when it was sampled. */
uint64_t rl__job_publish(rl_dispatcher_t *d, rl__job *j, int outcome, bool *sampled);
/* Under l->mu: counts an ended job (DONE or DEAD) in the lane's statistics. */
void rl__lane_count_end(rl__lane *l, bool sampled, uint64_t latency, int outcome);
/* An attempt of j failed with rc (no lock held): counts it and answers its outcome,
 * RL_DISPATCH_DEAD or RL_DISPATCH_RETURNED, or -1 when it is to be retried. */
int rl__attempt_failed(rl__lane *l, rl__job *j, int rc);
/* Retries j later with its key parked, `rest` (may be NULL: the jobs of j's batch after it)
 * parked behind it. True when the lane's unit in flight is over; false when the lane waits
 * with it (no memory to park). */
bool rl__attempt_retry(rl__lane *l, rl__job *j, rl__jobq *rest);

/* batch.c. Under l->mu, l owned: j (just made the job in flight by rl__lane_next) and the
 * key's next jobs of its tag make a batch of at most max: jobs[] gets them, in order, and
 * l->batch those after j. Returns how many. */
size_t rl__batch_take(rl__lane *l, rl__job *j, rl_dispatch_job **jobs, size_t max);
/* The batch in flight on l (cur_job and l->batch) ended (no lock held): status[i] per job,
 * or, status NULL, rc for the whole batch. True when the lane's unit in flight is over. */
bool rl__batch_ended(rl__lane *l, const int *status, int rc);
/* A worker runs a batch from j on l (owned; l->mu held, and held again on return). True when
 * the lane may go on. */
bool rl__batch_serve(rl__lane *l, rl__job *j);

/* Wakes rl_dispatch_wait_tag callers, if any (no lane mutex held). */
void rl__wake_tag_waiters(rl_dispatcher_t *d);

/* After take_tag or a STOP close took l's job from its retry delay (cur_job NULL): the lane's
 * job in flight is over (no lock held). */
void rl__lane_release_taken(rl__lane *l);

/* Idle: nothing queued, parked, in flight or held, and no executor on it. Under l->mu. */
bool rl__lane_idle(const rl__lane *l);

/* Under l->mu: an idle lane the loop thread must look at (a retiring lane to free, or a close
 * to finish); the caller then wakes the loop. */
static inline bool rl__lane_wants_loop(const rl__lane *l)
{
    return (l->retiring || atomic_load(&l->d->closing)) && rl__lane_idle(l);
}

/* executors.c */
size_t rl__workers_wanted(const rl_dispatcher_t *d);    /* dispatcher.c */
int rl__pool_resize(rl_dispatcher_t *d, size_t target); /* loop thread: dedicated workers */
void rl__pool_reap(rl_dispatcher_t *d);                 /* loop thread: joins exited workers */
void rl__pool_stop(rl_dispatcher_t *d);                 /* loop thread: joins every worker */
void rl__run_async_ready(rl_dispatcher_t *d);           /* loop thread: starts ready async jobs */
int rl__slot_take(rl_dispatcher_t *d, rl__lane *l);     /* under route_lock (write) */
/* Claims the attempt a ticket names, if it still waits: the ticket is void after this, and the
 * caller ends the attempt (rl__attempt_ended). RL_ESTALE otherwise. */
int rl__attempt_claim(rl_dispatcher_t *d, uint64_t ticket, rl__lane **lane, rl__job **job);
void rl__slot_free(rl_dispatcher_t *d, rl__lane *l); /* under route_lock (write) */

/* timers.c */
int rl__timers_init(rl_dispatcher_t *d);   /* the lock */
void rl__timers_start(rl_dispatcher_t *d); /* the handle, once nothing else can fail */
/* Any thread: runs the entry's action on the loop thread once due_ns has passed. RL_ENOMEM
 * leaves the caller to act at once. */
int rl__timer_add(rl_dispatcher_t *d, rl__timer_entry e);
void rl__timers_take_requests(rl_dispatcher_t *d); /* loop thread */
/* Loop thread: fires the due entries; the time of the next one (UINT64_MAX: none). */
uint64_t rl__timers_run(rl_dispatcher_t *d);
bool rl__timers_pending(rl_dispatcher_t *d);  /* any thread: requests not yet taken */
uint64_t rl__timers_next(rl_dispatcher_t *d); /* loop thread: the next due time, or UINT64_MAX */
void rl__timers_free(rl_dispatcher_t *d);

/* retry_park.c */
/* The attempt of l's job j failed and is to be retried: parks its key at the key's owner, with
 * `rest` (may be NULL: the jobs of j's batch after it) first behind it, and lets l go on with
 * other keys. RL_ENOMEM changes nothing (the caller makes the lane wait). */
int rl__park_for_retry(rl__lane *l, rl__job *j, rl__jobq *rest, uint64_t due_ns);
rl__park *rl__park_for(const rl__lane *holder, uint64_t hash); /* under holder->mu */
void rl__park_due(rl_dispatcher_t *d, rl__park *p);            /* loop thread: the timer */
/* Under the holder's mutex: takes the jobs of `tag` from the lane's parks into out (in order
 * per park); a park whose job goes dissolves, its later jobs first in the lane's queue. */
void rl__parks_take_tag(rl__lane *l, int64_t tag, rl__jobq *out);
/* Under the holder's mutex: hands back every parked job (a STOP close). */
void rl__parks_return_all(rl__lane *l, rl__jobq *out);
bool rl__parks_run_tag(const rl__lane *l, int64_t tag); /* under l->mu */
/* Under l->mu, l not busy: a due park's job, made the lane's job in flight (its key's later
 * jobs go to the front of the queue, behind it), or NULL. */
rl__job *rl__park_start_due(rl__lane *l);
bool rl__parks_due(const rl__lane *l); /* under l->mu */
/* Under the route lock (write): where each park goes in a new route (counted into incoming
 * per new node, as jobs that may arrive there), and the move itself. */
void rl__parks_count(rl__lane *l, const rl__route *next, size_t *incoming);
void rl__parks_retarget(rl__lane *l, const rl__route *next);

/* lane_change.c, HELD LANES: under the route lock (write), the lanes pushed since the last look
 * join d->held_lanes; and the lanes that hold nothing leave it (`removed` too, when not NULL).
 * Then a lane off the list holds nothing (take_tag and wait_tag look only at the list). */
void rl__held_take(rl_dispatcher_t *d);
void rl__held_prune(rl_dispatcher_t *d, const rl__lane *removed);

/* lane_change.c: called after a lane's job ended, with no lock held. */
void rl__fence_release(rl__lane *l);

/* lane_change.c: the fence of `hash` held by `holder`, or NULL. Under the route lock (read)
 * and the holder's mutex, or the route lock (write). */
rl__fence *rl__fence_for(const rl__lane *holder, uint64_t hash);

/* lane.c: the dispatcher whose handler may be running on this thread. */
extern _Thread_local const rl_dispatcher_t *rl__worker_of;
/* executors.c: the lane this worker thread is serving (its cur_tag is this thread's to read),
 * or NULL. */
extern _Thread_local rl__lane *rl__worker_lane;

#endif
