/* SPDX-License-Identifier: BSD-2-Clause */
/* bench_dispatch: the ordered dispatcher against an unordered baseline, and the cost of a lane
 * change with 100,000 jobs queued.
 *
 *   bench_dispatch                      everything below
 *   bench_dispatch throughput [JOBS]    jobs/s, empty handler and ~1 us of work, 1/2/4 lanes
 *   bench_dispatch uv [JOBS]            against uv_queue_work, fed from the loop thread
 *   bench_dispatch handoff              add_lane / remove_lane with 100,000 jobs queued
 *   bench_dispatch one KIND LANES WORK_NS JOBS
 *       one run, for callgrind. KIND: dispatch or baseline (producer thread), loopfed or
 *       loopfed_batched (the dispatcher fed from the loop), uv_queue_work or uv_batched (libuv's
 *       pool fed from the loop; it reads UV_THREADPOOL_SIZE: set it to LANES)
 *
 * uv: jobs are submitted on the loop thread and complete on it, as a libuv program uses
 * uv_queue_work; each run is a child process (libuv sizes its pool once per process).
 *
 * The baseline is the same number of workers pulling from one shared bounded queue (a mutex and
 * two condition variables), with completions delivered to the loop thread the same way (a
 * lock-free stack and one uv_async_t). It keeps no per-key order. Both are fed by one producer
 * thread with blocking submissions over 1,000 keys, and both allocate one node per job. */
#define _POSIX_C_SOURCE 200809L
#include "ringlane/dispatcher.h"
#include "ringlane/error.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#define NKEYS 1000
#define LANE_CAPACITY 1024

static char keys[NKEYS][16];
static size_t key_len[NKEYS];
static double iters_per_ns;

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_dispatch: %s: %s\n", what, rl_strerror(rc));
    exit(1);
}

/* ~ns of CPU work that the compiler cannot remove. */
static void work(uint64_t iters)
{
    uint64_t x = 1;
    for (uint64_t i = 0; i < iters; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        __asm__ volatile("" : "+r"(x));
    }
}

static void calibrate(void)
{
    uint64_t n = 1000000, best = UINT64_MAX;
    for (int r = 0; r < 5; r++) {
        uint64_t t0 = uv_hrtime();
        work(n);
        uint64_t dt = uv_hrtime() - t0;
        if (dt < best)
            best = dt;
    }
    iters_per_ns = (double)n / (double)best;
}

static uint64_t iters_for(uint64_t ns)
{
    return (uint64_t)(iters_per_ns * (double)ns + 0.5);
}

/* --- the dispatcher run --- */

typedef struct run {
    uv_loop_t loop;
    rl_dispatcher_t *d;
    uint64_t jobs, ended, iters;
    uint64_t t0, t1;
} run;

static int work_handler(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    (void)job;
    run *r = rl_dispatch_get_data(d);
    if (r->iters)
        work(r->iters);
    return 0;
}

static void count_done(rl_dispatcher_t *d, rl_dispatch_job *job, int outcome)
{
    (void)job;
    (void)outcome;
    run *r = rl_dispatch_get_data(d);
    if (++r->ended == r->jobs) {
        r->t1 = uv_hrtime();
        rl_dispatch_close(d, RL_DISPATCH_DRAIN, NULL);
    }
}

static void dispatch_producer(void *arg)
{
    run *r = arg;
    for (uint64_t i = 0; i < r->jobs; i++) {
        int k = (int)(i % NKEYS);
        int rc = rl_dispatch_submit(r->d, keys[k], key_len[k], NULL, 0, -1);
        if (rc)
            die("submit", rc);
    }
}

static double run_dispatch(int lanes, uint64_t work_ns, uint64_t jobs)
{
    static const char *names[] = {"lane-0", "lane-1", "lane-2", "lane-3",
                                  "lane-4", "lane-5", "lane-6", "lane-7"};
    run r = {.jobs = jobs, .iters = iters_for(work_ns)};
    uv_loop_init(&r.loop);
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lanes = names;
    o.lane_count = (size_t)lanes;
    o.handler = work_handler;
    o.on_done = count_done;
    o.data = &r;
    o.lane_capacity = LANE_CAPACITY;
    int rc = rl_dispatch_init(&r.loop, &o, &r.d);
    if (rc)
        die("init", rc);
    uv_thread_t t;
    r.t0 = uv_hrtime();
    uv_thread_create(&t, dispatch_producer, &r);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    uv_thread_join(&t);
    uv_loop_close(&r.loop);
    return (double)jobs / ((double)(r.t1 - r.t0) / 1e9);
}

/* --- the unordered baseline --- */

typedef struct bjob {
    struct bjob *next;
    const char *key;
} bjob;

typedef struct pool {
    uv_loop_t loop;
    uv_async_t async;
    uv_mutex_t mu;
    uv_cond_t not_empty, not_full;
    bjob *head, *tail;
    size_t len, cap;
    bool closing, producer_waits;
    uv_thread_t threads[8];
    int n;
    _Atomic(bjob *) done;
    uint64_t jobs, ended, iters, t0, t1;
} pool;

static void pool_worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        uv_mutex_lock(&p->mu);
        for (int spin = 0; spin < 2 && !p->head && !p->closing; spin++) {
            uv_mutex_unlock(&p->mu); /* as the dispatcher's workers: yield twice, then sleep */
            sched_yield();
            uv_mutex_lock(&p->mu);
        }
        while (!p->head && !p->closing)
            uv_cond_wait(&p->not_empty, &p->mu);
        bjob *j = p->head;
        if (!j) {
            uv_mutex_unlock(&p->mu);
            return;
        }
        p->head = j->next;
        if (!p->head)
            p->tail = NULL;
        p->len--;
        /* As the dispatcher: wake the producer when a quarter of the queue is free. */
        bool wake = p->producer_waits && p->len <= p->cap - p->cap / 4;
        if (wake)
            p->producer_waits = false;
        uv_mutex_unlock(&p->mu);
        if (wake)
            uv_cond_signal(&p->not_full);
        if (p->iters)
            work(p->iters);
        bjob *head = atomic_load_explicit(&p->done, memory_order_relaxed);
        do {
            j->next = head;
        } while (!atomic_compare_exchange_weak_explicit(&p->done, &head, j, memory_order_release,
                                                        memory_order_relaxed));
        if (!head)
            uv_async_send(&p->async);
    }
}

static void pool_on_async(uv_async_t *a)
{
    pool *p = a->data;
    bjob *j = atomic_exchange_explicit(&p->done, NULL, memory_order_acquire);
    while (j) {
        bjob *nx = j->next;
        free(j);
        p->ended++;
        j = nx;
    }
    if (p->ended == p->jobs) {
        p->t1 = uv_hrtime();
        uv_mutex_lock(&p->mu);
        p->closing = true;
        uv_cond_broadcast(&p->not_empty);
        uv_mutex_unlock(&p->mu);
        for (int i = 0; i < p->n; i++)
            uv_thread_join(&p->threads[i]);
        uv_close((uv_handle_t *)a, NULL);
    }
}

static void pool_producer(void *arg)
{
    pool *p = arg;
    for (uint64_t i = 0; i < p->jobs; i++) {
        bjob *j = malloc(sizeof *j);
        if (!j)
            die("malloc", RL_ENOMEM);
        j->next = NULL;
        j->key = keys[i % NKEYS];
        uv_mutex_lock(&p->mu);
        while (p->len >= p->cap) {
            p->producer_waits = true;
            uv_cond_wait(&p->not_full, &p->mu);
        }
        if (p->tail)
            p->tail->next = j;
        else
            p->head = j;
        p->tail = j;
        p->len++;
        uv_mutex_unlock(&p->mu);
        uv_cond_signal(&p->not_empty);
    }
}

static double run_baseline(int workers, uint64_t work_ns, uint64_t jobs)
{
    pool *p = calloc(1, sizeof *p);
    if (!p)
        die("calloc", RL_ENOMEM);
    p->jobs = jobs;
    p->iters = iters_for(work_ns);
    p->cap = (size_t)LANE_CAPACITY * (size_t)workers;
    p->n = workers;
    uv_loop_init(&p->loop);
    uv_async_init(&p->loop, &p->async, pool_on_async);
    p->async.data = p;
    uv_mutex_init(&p->mu);
    uv_cond_init(&p->not_empty);
    uv_cond_init(&p->not_full);
    for (int i = 0; i < workers; i++)
        uv_thread_create(&p->threads[i], pool_worker, p);
    uv_thread_t t;
    p->t0 = uv_hrtime();
    uv_thread_create(&t, pool_producer, p);
    uv_run(&p->loop, UV_RUN_DEFAULT);
    uv_thread_join(&t);
    uv_loop_close(&p->loop);
    double rate = (double)jobs / ((double)(p->t1 - p->t0) / 1e9);
    uv_cond_destroy(&p->not_full);
    uv_cond_destroy(&p->not_empty);
    uv_mutex_destroy(&p->mu);
    free(p);
    return rate;
}

/* --- fed from the loop thread: the dispatcher against libuv's own threadpool --- */

/* Jobs are submitted on the loop thread, WINDOW per worker at first and then one per completion
 * (completions run on the loop in both), as a libuv program feeds uv_queue_work. */
#define WINDOW 256

/* With batches, jobs go in 64 at a time (rl_dispatch_submit_many; uv_queue_work has no batch
 * call, so its side makes 64 calls at the same moments). */
#define FEED_BATCH 64

typedef struct loopfed {
    uv_loop_t loop;
    rl_dispatcher_t *d;
    bool batched;
    uint64_t jobs, submitted, ended, iters, window, t0, t1;
} loopfed;

static void loopfed_more_batched(loopfed *f)
{
    rl_dispatch_item items[FEED_BATCH];
    while (f->submitted < f->jobs && f->window - (f->submitted - f->ended) >= FEED_BATCH) {
        size_t m =
            f->jobs - f->submitted < FEED_BATCH ? (size_t)(f->jobs - f->submitted) : FEED_BATCH;
        for (size_t i = 0; i < m; i++) {
            int k = (int)((f->submitted + i) % NKEYS);
            items[i] = (rl_dispatch_item){keys[k], key_len[k], NULL, 0};
        }
        size_t queued = 0;
        int rc = rl_dispatch_submit_many(f->d, items, m, NULL, &queued);
        if (rc && rc != RL_EAGAIN)
            die("submit_many", rc);
        /* Refused items of a full lane are sent again next time, with the ones after them:
         * every key's items here are a prefix of its jobs, so skipping none keeps order. */
        if (queued < m) {
            f->submitted += queued; /* counts only; the bench checks no order */
            return;
        }
        f->submitted += m;
    }
}

static void loopfed_more(loopfed *f)
{
    if (f->batched) {
        loopfed_more_batched(f);
        return;
    }
    while (f->submitted < f->jobs && f->submitted - f->ended < f->window) {
        int k = (int)(f->submitted % NKEYS);
        int rc = rl_dispatch_try_submit(f->d, keys[k], key_len[k], NULL, 0);
        if (rc == RL_EAGAIN)
            return; /* a lane is full: the next completion submits again */
        if (rc)
            die("submit", rc);
        f->submitted++;
    }
}

static int loopfed_handler(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    (void)job;
    loopfed *f = rl_dispatch_get_data(d);
    if (f->iters)
        work(f->iters);
    return 0;
}

static void loopfed_done(rl_dispatcher_t *d, rl_dispatch_job *job, int outcome)
{
    (void)job;
    (void)outcome;
    loopfed *f = rl_dispatch_get_data(d);
    if (++f->ended == f->jobs) {
        f->t1 = uv_hrtime();
        rl_dispatch_close(d, RL_DISPATCH_DRAIN, NULL);
        return;
    }
    loopfed_more(f);
}

static double run_dispatch_fed(int lanes, uint64_t work_ns, uint64_t jobs, bool batched)
{
    static const char *names[] = {"lane-0", "lane-1", "lane-2", "lane-3",
                                  "lane-4", "lane-5", "lane-6", "lane-7"};
    loopfed f = {.jobs = jobs,
                 .iters = iters_for(work_ns),
                 .window = WINDOW * (uint64_t)lanes,
                 .batched = batched};
    uv_loop_init(&f.loop);
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lanes = names;
    o.lane_count = (size_t)lanes;
    o.handler = loopfed_handler;
    o.on_done = loopfed_done;
    o.data = &f;
    o.lane_capacity = LANE_CAPACITY;
    int rc = rl_dispatch_init(&f.loop, &o, &f.d);
    if (rc)
        die("init", rc);
    f.t0 = uv_hrtime();
    loopfed_more(&f);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    uv_loop_close(&f.loop);
    return (double)jobs / ((double)(f.t1 - f.t0) / 1e9);
}

static double run_dispatch_loopfed(int lanes, uint64_t work_ns, uint64_t jobs)
{
    return run_dispatch_fed(lanes, work_ns, jobs, false);
}

static double run_dispatch_batched(int lanes, uint64_t work_ns, uint64_t jobs)
{
    return run_dispatch_fed(lanes, work_ns, jobs, true);
}

typedef struct uvjob {
    uv_work_t req;
    const char *key; /* carried, as the dispatcher's jobs carry theirs; not used for order */
} uvjob;

static void uvq_more(loopfed *f);

static void uvq_work(uv_work_t *w)
{
    loopfed *f = w->loop->data;
    if (f->iters)
        work(f->iters);
}

static void uvq_after(uv_work_t *w, int status)
{
    (void)status;
    loopfed *f = w->loop->data;
    free(w);
    if (++f->ended == f->jobs) {
        f->t1 = uv_hrtime();
        return;
    }
    uvq_more(f);
}

static void uvq_more(loopfed *f)
{
    if (f->batched && f->window - (f->submitted - f->ended) < FEED_BATCH &&
        f->submitted - f->ended > 0)
        return; /* as the dispatcher's side: 64 at a time */
    while (f->submitted < f->jobs && f->submitted - f->ended < f->window) {
        uvjob *j = malloc(sizeof *j);
        if (!j)
            die("malloc", RL_ENOMEM);
        j->key = keys[f->submitted % NKEYS];
        if (uv_queue_work(&f->loop, &j->req, uvq_work, uvq_after) != 0)
            die("uv_queue_work", RL_ELOOP);
        f->submitted++;
    }
}

/* libuv sizes its pool once per process from UV_THREADPOOL_SIZE, so this runs in a child
 * process (see in_child). */
static double run_uv_fed(int workers, uint64_t work_ns, uint64_t jobs, bool batched)
{
    loopfed f = {.jobs = jobs,
                 .iters = iters_for(work_ns),
                 .window = WINDOW * (uint64_t)workers,
                 .batched = batched};
    char n[16];
    snprintf(n, sizeof n, "%d", workers);
    setenv("UV_THREADPOOL_SIZE", n, 1);
    uv_loop_init(&f.loop);
    f.loop.data = &f;
    f.t0 = uv_hrtime();
    uvq_more(&f);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    uv_loop_close(&f.loop);
    return (double)jobs / ((double)(f.t1 - f.t0) / 1e9);
}

static double run_uv_queue_work(int workers, uint64_t work_ns, uint64_t jobs)
{
    return run_uv_fed(workers, work_ns, jobs, false);
}

static double run_uv_batched(int workers, uint64_t work_ns, uint64_t jobs)
{
    return run_uv_fed(workers, work_ns, jobs, true);
}

typedef double (*run_fn)(int, uint64_t, uint64_t);

/* One run in a fresh process, so that each side starts from the same state (and libuv's
 * pool gets its size). */
static double in_child(run_fn fn, int workers, uint64_t work_ns, uint64_t jobs)
{
    int fd[2];
    if (pipe(fd) != 0)
        die("pipe", RL_ELOOP);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork", RL_ELOOP);
    if (pid == 0) {
        close(fd[0]);
        double rate = fn(workers, work_ns, jobs);
        ssize_t w = write(fd[1], &rate, sizeof rate);
        _exit(w == (ssize_t)sizeof rate ? 0 : 1);
    }
    close(fd[1]);
    double rate = 0;
    ssize_t r = read(fd[0], &rate, sizeof rate);
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (r != (ssize_t)sizeof rate || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        die("child run", RL_ELOOP);
    return rate;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void throughput(uint64_t jobs)
{
    enum { REPS = 5 };
    printf("throughput: %llu jobs per run, 1 producer thread, %d keys; %d pairs of runs\n"
           "(baseline then dispatcher), best rate of each and the median of the pairs' ratios\n",
           (unsigned long long)jobs, NKEYS, REPS);
    printf("%-6s %-8s %14s %14s %13s\n", "lanes", "work", "baseline/s", "dispatcher/s",
           "median ratio");
    static const uint64_t works[] = {0, 1000};
    static const int lanes[] = {1, 2, 4};
    for (size_t w = 0; w < 2; w++) {
        for (size_t l = 0; l < 3; l++) {
            double best_b = 0, best_d = 0, ratio[REPS];
            for (int rep = 0; rep < REPS; rep++) { /* paired, so drift hits both */
                double b = run_baseline(lanes[l], works[w], jobs);
                double d = run_dispatch(lanes[l], works[w], jobs);
                if (b > best_b)
                    best_b = b;
                if (d > best_d)
                    best_d = d;
                ratio[rep] = d / b;
            }
            qsort(ratio, REPS, sizeof ratio[0], cmp_double);
            printf("%-6d %-8s %14.0f %14.0f %13.2f\n", lanes[l], works[w] ? "~1us" : "empty",
                   best_b, best_d, ratio[REPS / 2]);
            fflush(stdout);
        }
    }
}

/* One row of the comparison: paired runs, uv_queue_work then the dispatcher, each in its own
 * process; the best rate of each side and the median of the pairs' ratios. */
static void against_uv_row(const char *how, run_fn uv, run_fn dispatch, int workers,
                           uint64_t work_ns, uint64_t jobs)
{
    enum { REPS = 7 };
    double best_u = 0, best_d = 0, ratio[REPS];
    for (int rep = 0; rep < REPS; rep++) {
        double u = in_child(uv, workers, work_ns, jobs);
        double d = in_child(dispatch, workers, work_ns, jobs);
        if (u > best_u)
            best_u = u;
        if (d > best_d)
            best_d = d;
        ratio[rep] = d / u;
    }
    qsort(ratio, REPS, sizeof ratio[0], cmp_double);
    printf("%-8d %-6s %-12s %16.0f %14.0f %13.2f\n", workers, work_ns ? "~1us" : "empty", how,
           best_u, best_d, ratio[REPS / 2]);
    fflush(stdout);
}

/* Jobs fed from the loop thread, completions on the loop, the same number of threads. */
static void against_uv(uint64_t jobs)
{
    printf("against uv_queue_work: %llu jobs per run fed from the loop thread (%d per worker in "
           "flight), completions on the loop, %d keys; 7 pairs of runs, best rate of each and "
           "the median of the pairs' ratios. one: a call per job as each completes; batch: "
           "%d jobs at a time (rl_dispatch_submit_many; %d uv_queue_work calls)\n",
           (unsigned long long)jobs, WINDOW, NKEYS, FEED_BATCH, FEED_BATCH);
    printf("%-8s %-6s %-12s %16s %14s %13s\n", "workers", "work", "submission", "uv_queue_work/s",
           "dispatcher/s", "median ratio");
    static const uint64_t works[] = {0, 1000};
    static const int lanes[] = {1, 2, 4};
    for (size_t w = 0; w < 2; w++) {
        for (size_t l = 0; l < 3; l++) {
            against_uv_row("one", run_uv_queue_work, run_dispatch_loopfed, lanes[l], works[w],
                           jobs);
            against_uv_row("batch", run_uv_batched, run_dispatch_batched, lanes[l], works[w], jobs);
        }
    }
}

/* --- hand-off: a lane change with 100,000 jobs queued --- */

typedef struct held {
    uv_mutex_t mu;
    uv_cond_t cv;
    bool open;
    int arrived;
} held;

static int held_handler(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    (void)job;
    held *h = rl_dispatch_get_data(d);
    uv_mutex_lock(&h->mu);
    h->arrived++;
    uv_cond_broadcast(&h->cv);
    while (!h->open)
        uv_cond_wait(&h->cv, &h->mu);
    uv_mutex_unlock(&h->mu);
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* One dispatcher with 4 lanes, every worker held in a handler and QUEUED jobs behind them; then
 * add lane-4, remove it, and remove lane-0. Writes the changes' critical sections (ns) and the
 * jobs each one moved. */
#define QUEUED 100000
static void handoff_once(uint64_t ns[3], uint64_t moved[3])
{
    static const char *names[] = {"lane-0", "lane-1", "lane-2", "lane-3"};
    uv_loop_t loop;
    uv_loop_init(&loop);
    held h = {.open = false};
    uv_mutex_init(&h.mu);
    uv_cond_init(&h.cv);
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lanes = names;
    o.lane_count = 4;
    o.handler = held_handler;
    o.data = &h;
    o.lane_capacity = 2 * QUEUED;
    o.max_jobs = 2 * QUEUED;
    rl_dispatcher_t *d;
    int rc = rl_dispatch_init(&loop, &o, &d);
    if (rc)
        die("init", rc);
    char key[32];
    for (int i = 0; i < QUEUED + 4; i++) {
        int len = snprintf(key, sizeof key, "key-%d", i % 10000);
        if ((rc = rl_dispatch_try_submit(d, key, (size_t)len, NULL, 0)))
            die("submit", rc);
    }
    uv_mutex_lock(&h.mu);
    while (h.arrived < 4)
        uv_cond_wait(&h.cv, &h.mu);
    uv_mutex_unlock(&h.mu);

    rl_dispatch_stats s;
    rl_dispatch_lane_stats ls[8];
    size_t n;
    const char *steps[3] = {"+lane-4", "-lane-4", "-lane-0"};
    for (int i = 0; i < 3; i++) {
        /* Jobs moved = what the lanes that stay gained (queued or parked), by name. */
        char names_before[8][RL_NAME_MAX + 1];
        uint64_t before[8];
        size_t nb;
        rl_dispatch_stats_get(d, &s, ls, 8, &nb);
        for (size_t k = 0; k < nb && k < 8; k++) {
            memcpy(names_before[k], ls[k].name, sizeof ls[k].name);
            before[k] = ls[k].retiring ? UINT64_MAX : ls[k].depth + ls[k].parked;
        }
        rc = steps[i][0] == '+' ? rl_dispatch_add_lane(d, steps[i] + 1)
                                : rl_dispatch_remove_lane(d, steps[i] + 1);
        if (rc)
            die(steps[i], rc);
        rl_dispatch_stats_get(d, &s, ls, 8, &n);
        ns[i] = s.last_change_ns;
        uint64_t gained = 0;
        for (size_t k = 0; k < n && k < 8; k++) {
            if (ls[k].retiring)
                continue;
            uint64_t was = 0;
            for (size_t b = 0; b < nb && b < 8; b++)
                if (before[b] != UINT64_MAX && strcmp(names_before[b], ls[k].name) == 0)
                    was = before[b];
            uint64_t now = ls[k].depth + ls[k].parked;
            if (now > was)
                gained += now - was;
        }
        moved[i] = gained;
    }
    uv_mutex_lock(&h.mu);
    h.open = true;
    uv_cond_broadcast(&h.cv);
    uv_mutex_unlock(&h.mu);
    rl_dispatch_close(d, RL_DISPATCH_STOP, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    uv_cond_destroy(&h.cv);
    uv_mutex_destroy(&h.mu);
}

static void handoff(void)
{
    enum { REPS = 7 };
    uint64_t ns[3][REPS], moved[3][REPS];
    for (int r = 0; r < REPS; r++) {
        uint64_t a[3], m[3];
        handoff_once(a, m);
        for (int i = 0; i < 3; i++) {
            ns[i][r] = a[i];
            moved[i][r] = m[i];
        }
    }
    printf("\nhand-off: 4 lanes, each worker held in a handler, %d jobs queued over 10,000 keys;\n"
           "time the change holds submissions and moved keys (its critical section), %d runs\n",
           QUEUED, REPS);
    printf("%-22s %12s %10s %10s\n", "change", "jobs moved", "median ms", "max ms");
    const char *what[3] = {"add lane-4", "remove lane-4", "remove lane-0"};
    for (int i = 0; i < 3; i++) {
        qsort(ns[i], REPS, sizeof ns[i][0], cmp_u64);
        qsort(moved[i], REPS, sizeof moved[i][0], cmp_u64);
        printf("%-22s %12llu %10.3f %10.3f\n", what[i], (unsigned long long)moved[i][REPS / 2],
               (double)ns[i][REPS / 2] / 1e6, (double)ns[i][REPS - 1] / 1e6);
    }
}

int main(int argc, char **argv)
{
    for (int i = 0; i < NKEYS; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        key_len[i] = strlen(keys[i]);
    }
    calibrate();
    const char *mode = argc > 1 ? argv[1] : "all";
    if (strcmp(mode, "one") == 0 && argc == 6) {
        int lanes = atoi(argv[3]);
        uint64_t work_ns = strtoull(argv[4], NULL, 10), jobs = strtoull(argv[5], NULL, 10);
        if (lanes < 1 || lanes > 8 || jobs == 0)
            die("arguments", RL_EINVAL);
        run_fn fn = strcmp(argv[2], "baseline") == 0          ? run_baseline
                    : strcmp(argv[2], "uv_queue_work") == 0   ? run_uv_queue_work
                    : strcmp(argv[2], "uv_batched") == 0      ? run_uv_batched
                    : strcmp(argv[2], "loopfed") == 0         ? run_dispatch_loopfed
                    : strcmp(argv[2], "loopfed_batched") == 0 ? run_dispatch_batched
                                                              : run_dispatch;
        double rate = fn(lanes, work_ns, jobs);
        printf("%s lanes=%d work_ns=%llu jobs=%llu: %.0f jobs/s\n", argv[2], lanes,
               (unsigned long long)work_ns, (unsigned long long)jobs, rate);
        return 0;
    }
    if (strcmp(mode, "throughput") == 0 || strcmp(mode, "all") == 0)
        throughput(argc > 2 ? strtoull(argv[2], NULL, 10) : 300000);
    if (strcmp(mode, "uv") == 0 || strcmp(mode, "all") == 0)
        against_uv(argc > 2 ? strtoull(argv[2], NULL, 10) : 300000);
    if (strcmp(mode, "handoff") == 0 || strcmp(mode, "all") == 0)
        handoff();
    return 0;
}
