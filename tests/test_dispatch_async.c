/* SPDX-License-Identifier: BSD-2-Clause */
/* Asynchronous jobs, tickets, deadlines and shared workers: the options refused, every wrong
 * completion refused, one job in flight per lane while a job is pending, retries on the loop's
 * timer, take_tag and close with pending jobs, 65,536 lanes, W workers over more lanes, and
 * wait_tag on the loop thread while a retry is due. Waits wait for events, never for time. */
#define _POSIX_C_SOURCE 200809L
#include "dispatch_util.h"

#include <sched.h>

#define MAXJ 256

typedef struct world {
    uv_loop_t loop;
    rl_dispatcher_t *d;
    /* async handler calls, in order (loop thread) */
    uint64_t tickets[MAXJ];
    int started[MAXJ], nstarted;
    int complete_inline; /* status to complete with inside the handler, or INT_MIN: later */
    int ended[MAXJ], outcome[MAXJ], status[MAXJ];
    uint32_t attempts[MAXJ];
    int nended, closed;
} world;

static int ids[MAXJ]; /* job data: &ids[i] is job i */

static void async_handler(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    world *w = rl_dispatch_get_data(d);
    if (w->nstarted < MAXJ) { /* the first MAXJ are kept; test_many_lanes only counts */
        w->tickets[w->nstarted] = job->ticket;
        w->started[w->nstarted] = *(int *)job->data;
    }
    w->nstarted++;
    if (w->complete_inline != INT32_MIN)
        assert_rl_ok(rl_dispatch_complete(d, job->ticket, w->complete_inline));
}

static void on_done(rl_dispatcher_t *d, rl_dispatch_job *job, int outcome)
{
    world *w = rl_dispatch_get_data(d);
    if (w->nended < MAXJ) {
        w->ended[w->nended] = *(int *)job->data;
        w->outcome[w->nended] = outcome;
        w->status[w->nended] = job->status;
        w->attempts[w->nended] = job->attempts;
    }
    w->nended++;
}

static void on_closed(rl_dispatcher_t *d)
{
    world *w = rl_dispatch_get_data(d);
    w->closed++;
}

static world *world_new(void)
{
    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    assert_int_equal(uv_loop_init(&w->loop), 0);
    w->complete_inline = INT32_MIN;
    for (int i = 0; i < MAXJ; i++)
        ids[i] = i;
    return w;
}

static void async_options(world *w, rl_dispatch_options *o, const char *const *lanes, size_t n)
{
    rl_dispatch_options_init(o);
    o->lanes = lanes;
    o->lane_count = n;
    o->async_handler = async_handler;
    o->on_done = on_done;
    o->data = w;
    o->backoff_ms = 1;
    o->backoff_max_ms = 2;
}

static void world_end(world *w, int mode)
{
    assert_rl_ok(rl_dispatch_close(w->d, mode, on_closed));
    assert_int_equal(uv_run(&w->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(w->closed, 1);
    assert_int_equal(uv_loop_close(&w->loop), 0);
    free(w);
}

static void put(world *w, const char *key, int id, int64_t tag)
{
    assert_rl_ok(rl_dispatch_try_submit(w->d, key, strlen(key), &ids[id], tag));
}

static void run_until(world *w, int *counter, int n)
{
    while (*counter < n)
        uv_run(&w->loop, UV_RUN_ONCE);
}

static int noop(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    (void)d;
    (void)job;
    return 0;
}

static void test_options_refused(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    const char *lanes[] = {"a"};
    rl_dispatch_options o;
    rl_dispatcher_t *d;
    async_options(NULL, &o, lanes, 1);
    o.handler = noop; /* both kinds */
    assert_int_equal(rl_dispatch_init(&loop, &o, &d), RL_EINVAL);
    o.handler = NULL;
    o.async_handler = NULL; /* neither */
    assert_int_equal(rl_dispatch_init(&loop, &o, &d), RL_EINVAL);
    async_options(NULL, &o, lanes, 1);
    o.workers = 4; /* the pool is for blocking handlers */
    assert_int_equal(rl_dispatch_init(&loop, &o, &d), RL_EINVAL);
    rl_dispatch_options_init(&o);
    o.lanes = lanes;
    o.lane_count = 1;
    o.handler = noop;
    o.job_timeout_ms = 10; /* deadlines are for asynchronous attempts */
    assert_int_equal(rl_dispatch_init(&loop, &o, &d), RL_EINVAL);
    o.job_timeout_ms = 0;
    o.workers = RL_DISPATCH_THREADS_MAX + 1;
    assert_int_equal(rl_dispatch_init(&loop, &o, &d), RL_ERANGE);
    /* A thread per lane: at most RL_DISPATCH_THREADS_MAX lanes; with a pool, more. */
    enum { N = RL_DISPATCH_THREADS_MAX + 1 };
    static char names[N][16];
    static const char *many[N];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "l%d", i);
        many[i] = names[i];
    }
    o.lanes = many;
    o.lane_count = N;
    o.workers = 0;
    assert_int_equal(rl_dispatch_init(&loop, &o, &d), RL_ERANGE);
    o.workers = 4;
    assert_rl_ok(rl_dispatch_init(&loop, &o, &d));
    assert_int_equal(rl_dispatch_complete(d, 1, 0), RL_ESTATE); /* blocking handlers */
    assert_rl_ok(rl_dispatch_close(d, RL_DISPATCH_DRAIN, NULL));
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* A pending job holds its lane; completions are checked against the attempt they name. */
static void test_pending_holds_the_lane(void **state)
{
    (void)state;
    world *w = world_new();
    const char *lanes[] = {"a"};
    rl_dispatch_options o;
    async_options(w, &o, lanes, 1);
    assert_rl_ok(rl_dispatch_init(&w->loop, &o, &w->d));
    put(w, "k", 0, 1);
    put(w, "other", 1, 1); /* same lane, another key: waits too */
    run_until(w, &w->nstarted, 1);
    for (int i = 0; i < 20; i++)
        uv_run(&w->loop, UV_RUN_NOWAIT);
    assert_int_equal(w->nstarted, 1); /* nothing else starts on the lane */
    assert_int_equal(rl_dispatch_complete(NULL, w->tickets[0], 0), RL_EINVAL);
    assert_int_equal(rl_dispatch_complete(w->d, 0, 0), RL_EINVAL);
    assert_int_equal(rl_dispatch_complete(w->d, w->tickets[0] + 1, 0), RL_ESTALE);
    assert_int_equal(rl_dispatch_complete(w->d, w->tickets[0] ^ (UINT64_C(77) << 40), 0),
                     RL_ESTALE); /* a slot that holds no lane */
    rl_dispatch_stats s;
    rl_dispatch_lane_stats ls;
    assert_rl_ok(rl_dispatch_stats_get(w->d, &s, &ls, 1, NULL));
    assert_int_equal(ls.in_flight, 1);
    assert_int_equal(ls.depth, 1);
    assert_rl_ok(rl_dispatch_complete(w->d, w->tickets[0], 0));
    assert_int_equal(rl_dispatch_complete(w->d, w->tickets[0], 0), RL_ESTALE); /* twice */
    run_until(w, &w->nstarted, 2);
    assert_int_equal(w->started[1], 1);
    assert_true(w->tickets[1] != w->tickets[0]);
    assert_rl_ok(rl_dispatch_complete(w->d, w->tickets[1], 0));
    run_until(w, &w->nended, 2);
    assert_int_equal(w->ended[0], 0);
    assert_int_equal(w->outcome[0], RL_DISPATCH_DONE);
    assert_int_equal(w->ended[1], 1);
    world_end(w, RL_DISPATCH_DRAIN);
}

/* A failed attempt is retried on the loop's timer with a new ticket; the old one is void. */
static void test_retry_new_ticket(void **state)
{
    (void)state;
    world *w = world_new();
    const char *lanes[] = {"a"};
    rl_dispatch_options o;
    async_options(w, &o, lanes, 1);
    o.max_attempts = 3;
    assert_rl_ok(rl_dispatch_init(&w->loop, &o, &w->d));
    put(w, "k", 0, 1);
    run_until(w, &w->nstarted, 1);
    assert_rl_ok(rl_dispatch_complete(w->d, w->tickets[0], -5));
    run_until(w, &w->nstarted, 2);
    assert_int_equal(w->started[1], 0); /* the same job again */
    assert_int_equal(rl_dispatch_complete(w->d, w->tickets[0], 0), RL_ESTALE);
    assert_rl_ok(rl_dispatch_complete(w->d, w->tickets[1], -6));
    run_until(w, &w->nstarted, 3);
    assert_rl_ok(rl_dispatch_complete(w->d, w->tickets[2], -7));
    run_until(w, &w->nended, 1);
    assert_int_equal(w->outcome[0], RL_DISPATCH_DEAD);
    assert_int_equal(w->status[0], -7);
    assert_int_equal(w->attempts[0], 3);
    world_end(w, RL_DISPATCH_DRAIN);
}

/* An attempt never completed fails at its deadline with RL_ETIMEDOUT; its ticket is void. */
static void test_deadline(void **state)
{
    (void)state;
    world *w = world_new();
    const char *lanes[] = {"a"};
    rl_dispatch_options o;
    async_options(w, &o, lanes, 1);
    o.max_attempts = 2;
    o.job_timeout_ms = 5;
    assert_rl_ok(rl_dispatch_init(&w->loop, &o, &w->d));
    put(w, "k", 0, 1);
    put(w, "k", 1, 1);
    run_until(w, &w->nended, 1); /* two attempts, each abandoned */
    assert_int_equal(w->started[0], 0);
    assert_int_equal(w->started[1], 0);
    assert_int_equal(w->outcome[0], RL_DISPATCH_DEAD);
    assert_int_equal(w->status[0], RL_ETIMEDOUT);
    assert_int_equal(rl_dispatch_complete(w->d, w->tickets[0], 0), RL_ESTALE); /* too late */
    assert_int_equal(rl_dispatch_complete(w->d, w->tickets[1], 0), RL_ESTALE);
    run_until(w, &w->nstarted, 3);
    assert_int_equal(w->started[2], 1); /* the lane went on */
    assert_rl_ok(rl_dispatch_complete(w->d, w->tickets[2], 0));
    run_until(w, &w->nended, 2);
    assert_int_equal(w->outcome[1], RL_DISPATCH_DONE);
    world_end(w, RL_DISPATCH_DRAIN);
}

typedef struct completer {
    rl_dispatcher_t *d;
    uint64_t ticket;
    int rc;
} completer;

static void complete_later(void *arg)
{
    completer *c = arg;
    uv_sleep(10);
    c->rc = rl_dispatch_complete(c->d, c->ticket, 0);
}

/* take_tag leaves a pending job (it has started) and takes one waiting for its retry; a STOP
 * close waits for a pending job's completion, from another thread. */
static void test_take_and_close_with_pending(void **state)
{
    (void)state;
    world *w = world_new();
    const char *lanes[] = {"a", "b"};
    rl_dispatch_options o;
    async_options(w, &o, lanes, 2);
    o.backoff_ms = o.backoff_max_ms = 600000;
    assert_rl_ok(rl_dispatch_init(&w->loop, &o, &w->d));
    put(w, "k", 0, 3);
    put(w, "k", 1, 3);
    run_until(w, &w->nstarted, 1);
    size_t n;
    assert_rl_ok(rl_dispatch_take_tag(w->d, 3, &n));
    assert_int_equal(n, 1); /* job 1; job 0 is pending */
    assert_int_equal(w->ended[0], 1);
    assert_rl_ok(rl_dispatch_complete(w->d, w->tickets[0], -1)); /* fails: waits to retry */
    for (int i = 0; i < 5; i++)
        uv_run(&w->loop, UV_RUN_NOWAIT);
    assert_rl_ok(rl_dispatch_take_tag(w->d, 3, &n));
    assert_int_equal(n, 1);
    assert_int_equal(w->ended[1], 0);
    assert_int_equal(w->outcome[1], RL_DISPATCH_RETURNED);
    assert_rl_ok(rl_dispatch_wait_tag(w->d, 3, 0));

    put(w, "k", 2, 4);
    run_until(w, &w->nstarted, 2);
    completer c = {w->d, w->tickets[1], 1};
    uv_thread_t t;
    assert_int_equal(uv_thread_create(&t, complete_later, &c), 0);
    assert_rl_ok(rl_dispatch_close(w->d, RL_DISPATCH_STOP, on_closed));
    assert_int_equal(uv_run(&w->loop, UV_RUN_DEFAULT), 0);
    uv_thread_join(&t);
    assert_int_equal(c.rc, 0);
    assert_int_equal(w->closed, 1);
    assert_int_equal(w->nended, 3);
    assert_int_equal(w->outcome[2], RL_DISPATCH_DONE);
    assert_int_equal(uv_loop_close(&w->loop), 0);
    free(w);
}

/* A job fails during a DRAIN close and waits for its retry (far away); take_tag hands it back,
 * and the close ends: nothing else is left. On the old code nothing woke the loop for it and
 * close_cb never ran (test_dispatch_review.c has the blocking handlers' case). */
static void test_drain_close_after_take(void **state)
{
    (void)state;
    world *w = world_new();
    const char *lanes[] = {"a"};
    rl_dispatch_options o;
    async_options(w, &o, lanes, 1);
    o.backoff_ms = o.backoff_max_ms = 600000;
    assert_rl_ok(rl_dispatch_init(&w->loop, &o, &w->d));
    put(w, "k", 0, 7);
    run_until(w, &w->nstarted, 1);
    assert_rl_ok(rl_dispatch_close(w->d, RL_DISPATCH_DRAIN, on_closed));
    assert_rl_ok(rl_dispatch_complete(w->d, w->tickets[0], -1)); /* fails: waits to retry */
    for (int i = 0; i < 10; i++)
        uv_run(&w->loop, UV_RUN_NOWAIT);
    assert_int_equal(w->closed, 0);
    size_t n = 0;
    assert_rl_ok(rl_dispatch_take_tag(w->d, 7, &n));
    assert_int_equal(n, 1);
    assert_int_equal(w->outcome[0], RL_DISPATCH_RETURNED);
    for (int i = 0; i < 1000 && !w->closed; i++)
        uv_run(&w->loop, UV_RUN_NOWAIT);
    assert_int_equal(w->closed, 1);
    assert_int_equal(uv_run(&w->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&w->loop), 0);
    free(w);
}

/* 65,536 lanes of asynchronous jobs (jump: a ring of no points), every one used. */
static void test_many_lanes(void **state)
{
    (void)state;
    enum { N = 65536, JOBS = 131072 };
    char(*names)[12] = malloc((size_t)N * sizeof *names);
    const char **lanes = malloc((size_t)N * sizeof *lanes);
    assert_non_null(names);
    assert_non_null(lanes);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "l%d", i);
        lanes[i] = names[i];
    }
    world *w = world_new();
    w->complete_inline = 0;
    rl_ring_options ro;
    rl_ring_options_init(&ro);
    ro.profile = "jump";
    rl_dispatch_options o;
    async_options(w, &o, lanes, N);
    o.ring = &ro;
    o.on_done = NULL;
    o.max_jobs = JOBS;
    assert_rl_ok(rl_dispatch_init(&w->loop, &o, &w->d));
    free(lanes);
    free(names);
    for (int i = 0; i < JOBS; i++) {
        char key[16];
        int len = snprintf(key, sizeof key, "k%d", i);
        assert_rl_ok(rl_dispatch_try_submit(w->d, key, (size_t)len, &ids[0], 0));
    }
    rl_dispatch_stats s;
    do {
        uv_run(&w->loop, UV_RUN_ONCE);
        assert_rl_ok(rl_dispatch_stats_get(w->d, &s, NULL, 0, NULL));
    } while (s.done < JOBS);
    assert_int_equal(s.lanes, N);
    world_end(w, RL_DISPATCH_DRAIN);
}

/* W = 2 workers over 8 lanes: at most 2 handlers at once, each lane by one worker at a time. */
typedef struct pool_probe {
    atomic_int running, most;
    atomic_int lane_inside[8];
    atomic_int violations;
} pool_probe;

static pool_probe probe;

static int probing_handler(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    (void)d;
    int lane = *(int *)job->data; /* the lane the ring gives the key (see below) */
    int now = atomic_fetch_add(&probe.running, 1) + 1;
    int most = atomic_load(&probe.most);
    while (now > most && !atomic_compare_exchange_weak(&probe.most, &most, now))
        ;
    if (atomic_exchange(&probe.lane_inside[lane], 1))
        atomic_fetch_add(&probe.violations, 1);
    sched_yield();
    atomic_store(&probe.lane_inside[lane], 0);
    atomic_fetch_sub(&probe.running, 1);
    return 0;
}

static void count_done(rl_dispatcher_t *d, rl_dispatch_job *job, int outcome)
{
    (void)job;
    world *w = rl_dispatch_get_data(d);
    w->nended += outcome == RL_DISPATCH_DONE;
}

static void test_shared_workers(void **state)
{
    (void)state;
    world *w = world_new();
    const char *lanes[] = {"l0", "l1", "l2", "l3", "l4", "l5", "l6", "l7"};
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lanes = lanes;
    o.lane_count = 8;
    o.handler = probing_handler;
    o.on_done = count_done;
    o.data = w;
    o.workers = 2;
    assert_rl_ok(rl_dispatch_init(&w->loop, &o, &w->d));
    /* Keys named after their lane: the lane index rides in the job's data. */
    rl_ring_t *ring = test_ring(NULL, RL_VNODES_PROFILE, lanes, 8);
    static int lane_of[64];
    char keys[64][16];
    for (int i = 0; i < 64; i++) {
        snprintf(keys[i], sizeof keys[i], "key-%d", i);
        const char *owner = test_owner(ring, keys[i]);
        lane_of[i] = owner[1] - '0';
    }
    rl_ring_free(ring);
    int total = 0;
    for (int round = 0; round < 40; round++)
        for (int i = 0; i < 64; i++, total++)
            assert_rl_ok(rl_dispatch_submit(w->d, keys[i], strlen(keys[i]), &lane_of[i], 0, -1));
    run_until(w, &w->nended, total);
    assert_int_equal(atomic_load(&probe.violations), 0);
    assert_true(atomic_load(&probe.most) <= 2);
    world_end(w, RL_DISPATCH_DRAIN);
}

/* wait_tag on the loop thread while the tag's job waits for a retry: the retry's timer lives
 * on the loop, which wait_tag blocks, so wait_tag runs the timers itself. */
static int fail_once(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    (void)d;
    return job->attempts == 0 ? -1 : 0;
}

static void test_wait_tag_runs_retries(void **state)
{
    (void)state;
    for (int pool = 0; pool < 2; pool++) {
        world *w = world_new();
        const char *lanes[] = {"a", "b"};
        rl_dispatch_options o;
        rl_dispatch_options_init(&o);
        o.lanes = lanes;
        o.lane_count = 2;
        o.handler = fail_once;
        o.on_done = on_done;
        o.data = w;
        o.workers = (uint32_t)pool;
        o.backoff_ms = o.backoff_max_ms = 20;
        assert_rl_ok(rl_dispatch_init(&w->loop, &o, &w->d));
        put(w, "k", 0, 8);
        rl_dispatch_stats s;
        rl_dispatch_lane_stats ls[2];
        do { /* until the job waits for its retry */
            assert_rl_ok(rl_dispatch_stats_get(w->d, &s, ls, 2, NULL));
            sched_yield();
        } while (ls[0].retried + ls[1].retried == 0);
        assert_rl_ok(rl_dispatch_wait_tag(w->d, 8, UINT64_MAX));
        assert_int_equal(w->nended, 1);
        assert_int_equal(w->outcome[0], RL_DISPATCH_DONE);
        assert_int_equal(w->attempts[0], 2);
        world_end(w, RL_DISPATCH_DRAIN);
    }
}

/* The loop thread waits in wait_tag for an async job nobody completes: its deadlines still
 * fire, the retry's included (started inside the wait), and the wait ends when the job is
 * dead-lettered, however long its own timeout. (An outside review saw the retry's deadline
 * missed: the wait slept until its own timeout, forever with UINT64_MAX.) */
static void ignore_job(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    (void)d;
    (void)job;
}

static void test_deadlines_while_loop_waits(void **state)
{
    (void)state;
    world *w = world_new();
    const char *lanes[] = {"a"};
    rl_dispatch_options o;
    async_options(w, &o, lanes, 1);
    o.async_handler = ignore_job;
    o.max_attempts = 2;
    o.job_timeout_ms = 20;
    assert_rl_ok(rl_dispatch_init(&w->loop, &o, &w->d));
    put(w, "k", 0, 5);
    for (int i = 0; i < 3; i++)
        uv_run(&w->loop, UV_RUN_NOWAIT); /* started */
    assert_rl_ok(rl_dispatch_wait_tag(w->d, 5, UINT64_MAX));
    assert_int_equal(w->nended, 1);
    assert_int_equal(w->outcome[0], RL_DISPATCH_DEAD);
    assert_int_equal(w->status[0], RL_ETIMEDOUT);
    assert_int_equal(w->attempts[0], 2);
    world_end(w, RL_DISPATCH_DRAIN);
}

/* wait_tag from inside an asynchronous handler on its own job's tag would wait for itself. */
static int waited[2];
static void waiting_async(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    waited[0] = rl_dispatch_wait_tag(d, job->tag, UINT64_MAX);
    waited[1] = rl_dispatch_wait_tag(d, job->tag + 1, 0);
    assert_rl_ok(rl_dispatch_complete(d, job->ticket, 0));
    /* Its job has ended: the same tag is nobody's in flight now. */
    assert_rl_ok(rl_dispatch_wait_tag(d, job->tag, 0));
}

static void test_wait_tag_in_async_handler(void **state)
{
    (void)state;
    world *w = world_new();
    const char *lanes[] = {"a"};
    rl_dispatch_options o;
    async_options(w, &o, lanes, 1);
    o.async_handler = waiting_async;
    assert_rl_ok(rl_dispatch_init(&w->loop, &o, &w->d));
    put(w, "k", 0, 6);
    run_until(w, &w->nended, 1);
    assert_int_equal(waited[0], RL_ESTATE);
    assert_int_equal(waited[1], 0);
    world_end(w, RL_DISPATCH_DRAIN);
}

/* A key parked for a retry fills a lane of capacity 1; a submitter of another key blocks. When
 * the retry starts, the lane has room again: the submitter must wake (it slept forever when
 * only a job taken from the queue counted as room). */
typedef struct blocked_submit {
    rl_dispatcher_t *d;
    atomic_int rc;
    atomic_bool returned;
} blocked_submit;

static void submit_other_key(void *arg)
{
    blocked_submit *b = arg;
    atomic_store(&b->rc, rl_dispatch_submit(b->d, "x", 1, &ids[1], 0, -1));
    atomic_store(&b->returned, true);
}

static void test_parked_retry_makes_room(void **state)
{
    (void)state;
    world *w = world_new();
    const char *lanes[] = {"a"};
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lanes = lanes;
    o.lane_count = 1;
    o.handler = fail_once;
    o.on_done = on_done;
    o.data = w;
    o.lane_capacity = 1;
    o.backoff_ms = o.backoff_max_ms = 20;
    assert_rl_ok(rl_dispatch_init(&w->loop, &o, &w->d));
    put(w, "k", 0, 0);
    rl_dispatch_stats s;
    rl_dispatch_lane_stats ls;
    do { /* until k is parked: the lane is full */
        uv_run(&w->loop, UV_RUN_NOWAIT);
        assert_rl_ok(rl_dispatch_stats_get(w->d, &s, &ls, 1, NULL));
    } while (ls.retry_parked == 0);
    blocked_submit b = {.d = w->d};
    uv_thread_t t;
    assert_int_equal(uv_thread_create(&t, submit_other_key, &b), 0);
    while (!atomic_load(&b.returned) || w->nended < 2)
        uv_run(&w->loop, UV_RUN_ONCE);
    uv_thread_join(&t);
    assert_int_equal(atomic_load(&b.rc), 0);
    assert_int_equal(w->ended[0], 0);
    assert_int_equal(w->attempts[0], 2);
    world_end(w, RL_DISPATCH_DRAIN);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options_refused),
        cmocka_unit_test(test_pending_holds_the_lane),
        cmocka_unit_test(test_retry_new_ticket),
        cmocka_unit_test(test_deadline),
        cmocka_unit_test(test_take_and_close_with_pending),
        cmocka_unit_test(test_drain_close_after_take),
        cmocka_unit_test(test_many_lanes),
        cmocka_unit_test(test_shared_workers),
        cmocka_unit_test(test_wait_tag_runs_retries),
        cmocka_unit_test(test_deadlines_while_loop_waits),
        cmocka_unit_test(test_wait_tag_in_async_handler),
        cmocka_unit_test(test_parked_retry_makes_room),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
