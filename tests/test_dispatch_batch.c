/* SPDX-License-Identifier: BSD-2-Clause */
/* Batches (batch_handler, async_batch_handler, batch_max): what a batch holds (consecutive jobs
 * of one key and one tag, at most batch_max), a failure inside a batch (the jobs after it of its
 * key end after it, never before: parked behind its retry, or run again after its dead letter),
 * a failure of the whole batch, per-job completions of an asynchronous batch, take_tag and
 * wait_tag with a batch in flight, and a lane change that takes the batch's key away while the
 * batch runs. The options' refusals are in test_options_refused. */
#define _POSIX_C_SOURCE 200809L
#include "dispatch_util.h"

#define MAX_RECS 64
#define MAX_CALLS 64

/* A job: its key, its number within the key, and what happened to it. */
typedef struct rec {
    char key[16];
    int n;
    int64_t tag;
    int calls;     /* handler calls that included it */
    int outcome;   /* -1 until on_done */
    int attempts;  /* job->attempts at on_done */
    int done_rank; /* its place among on_done calls */
} rec;

typedef struct ctx {
    uv_loop_t loop;
    rl_dispatcher_t *d;
    rec recs[MAX_RECS];
    int nrec;
    /* handler calls: the jobs of each (rec indexes), in order */
    uv_mutex_t log_mu;
    int call_len[MAX_CALLS];
    int call_rec[MAX_CALLS][16];
    int ncalls;
    int done_order[MAX_RECS];
    int ndone;
    int closed;
    gate hold;     /* the first job (key "hold") waits here: the queue fills behind it */
    gate in_batch; /* a batch whose first job is gated waits here */
    rec *gated;
    atomic_int inside_violations; /* a key in two handlers at once */
    atomic_int inside[MAX_RECS];  /* per key index (the rec of its first job) */
    /* the scripted results: fail[rec] is the status of its first call, whole_fail the status
     * the first call returns for its whole batch */
    int fail[MAX_RECS];
    int whole_fail;
    /* asynchronous: the batch waiting for the test to complete it */
    uint64_t ticket;
    size_t ticket_n;
} ctx;

static int rec_index(ctx *c, const rl_dispatch_job *job)
{
    return (int)((rec *)job->data - c->recs);
}

static int key_index(ctx *c, const rec *r)
{
    for (int i = 0; i < c->nrec; i++)
        if (strcmp(c->recs[i].key, r->key) == 0)
            return i;
    return 0;
}

static void log_call(ctx *c, rl_dispatch_job *const *jobs, size_t n)
{
    uv_mutex_lock(&c->log_mu);
    assert_true(c->ncalls < MAX_CALLS && n <= 16);
    for (size_t i = 0; i < n; i++) {
        c->call_rec[c->ncalls][i] = rec_index(c, jobs[i]);
        ((rec *)jobs[i]->data)->calls++;
    }
    c->call_len[c->ncalls++] = (int)n;
    uv_mutex_unlock(&c->log_mu);
}

/* Blocking: logs the call, holds it at the gates, and answers the scripted results. It runs
 * every job of the batch and reports each one's status, also after a failure: the dispatcher
 * must not read the statuses after the first failed one. */
static int batch_handler(rl_dispatcher_t *d, rl_dispatch_job *const *jobs, size_t n, int *status)
{
    ctx *c = rl_dispatch_get_data(d);
    rec *first = jobs[0]->data;
    atomic_int *inside = &c->inside[key_index(c, first)];
    if (atomic_exchange(inside, 1))
        atomic_fetch_add(&c->inside_violations, 1);
    log_call(c, jobs, n);
    if (strcmp(first->key, "hold") == 0)
        gate_pass(&c->hold);
    if (first == c->gated)
        gate_pass(&c->in_batch);
    int whole = 0;
    for (size_t i = 0; i < n; i++) {
        int r = rec_index(c, jobs[i]);
        if (jobs[i]->attempts == 0 && c->fail[r])
            status[i] = c->fail[r];
    }
    if (jobs[0]->attempts == 0 && c->whole_fail && strcmp(first->key, "hold") != 0) {
        whole = c->whole_fail;
        c->whole_fail = 0;
    }
    atomic_store(inside, 0);
    return whole;
}

static void async_batch_handler(rl_dispatcher_t *d, rl_dispatch_job *const *jobs, size_t n)
{
    ctx *c = rl_dispatch_get_data(d);
    log_call(c, jobs, n);
    for (size_t i = 1; i < n; i++)
        assert_int_equal(jobs[i]->ticket, jobs[0]->ticket);
    c->ticket = jobs[0]->ticket;
    c->ticket_n = n;
}

static void on_done(rl_dispatcher_t *d, rl_dispatch_job *job, int outcome)
{
    ctx *c = rl_dispatch_get_data(d);
    rec *r = job->data;
    r->outcome = outcome;
    r->attempts = (int)job->attempts;
    r->done_rank = c->ndone;
    c->done_order[c->ndone++] = rec_index(c, job);
}

static void on_closed(rl_dispatcher_t *d)
{
    ctx *c = rl_dispatch_get_data(d);
    c->closed++;
}

static ctx *ctx_new(void)
{
    ctx *c = calloc(1, sizeof *c);
    assert_non_null(c);
    assert_int_equal(uv_loop_init(&c->loop), 0);
    assert_int_equal(uv_mutex_init(&c->log_mu), 0);
    gate_init(&c->hold, false);
    gate_init(&c->in_batch, false);
    return c;
}

static void options(ctx *c, rl_dispatch_options *o, uint32_t batch_max)
{
    rl_dispatch_options_init(o);
    o->lane_count = 1;
    o->workers = 1;
    o->batch_handler = batch_handler;
    o->batch_max = batch_max;
    o->on_done = on_done;
    o->data = c;
    o->backoff_ms = 1;
    o->backoff_max_ms = 4;
}

static rec *add(ctx *c, const char *key, int n, int64_t tag)
{
    rec *r = &c->recs[c->nrec++];
    snprintf(r->key, sizeof r->key, "%s", key);
    r->n = n;
    r->tag = tag;
    r->outcome = -1;
    return r;
}

static void submit(ctx *c, rec *r)
{
    assert_rl_ok(rl_dispatch_try_submit(c->d, r->key, strlen(r->key), r, r->tag));
}

/* Submits "hold" and waits until its handler holds the lane: what is submitted next queues
 * behind it, so the batches after it are known. */
static void hold_lane(ctx *c)
{
    submit(c, add(c, "hold", 0, 99));
    gate_wait_arrived(&c->hold, 1);
}

static void run_until_done(ctx *c, int n)
{
    while (c->ndone < n)
        uv_run(&c->loop, UV_RUN_ONCE);
}

static void finish(ctx *c)
{
    assert_rl_ok(rl_dispatch_close(c->d, RL_DISPATCH_DRAIN, on_closed));
    assert_int_equal(uv_run(&c->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(c->closed, 1);
    assert_int_equal(uv_loop_close(&c->loop), 0);
    assert_int_equal(atomic_load(&c->inside_violations), 0);
    gate_destroy(&c->hold);
    gate_destroy(&c->in_batch);
    uv_mutex_destroy(&c->log_mu);
    free(c);
}

/* Asserts call i held exactly the recs listed (-1 ends the list). */
static void assert_call(ctx *c, int i, const int *want)
{
    int n = 0;
    while (want[n] >= 0)
        n++;
    if (i >= c->ncalls)
        fail_msg("call %d: only %d calls", i, c->ncalls);
    if (c->call_len[i] != n)
        fail_msg("call %d: %d jobs, want %d", i, c->call_len[i], n);
    for (int k = 0; k < n; k++)
        if (c->call_rec[i][k] != want[k])
            fail_msg("call %d: job %d is rec %d, want rec %d", i, k, c->call_rec[i][k], want[k]);
}

/* The jobs of each key ended in their order. */
static void assert_key_order(ctx *c)
{
    for (int i = 0; i < c->nrec; i++)
        for (int k = i + 1; k < c->nrec; k++)
            if (strcmp(c->recs[i].key, c->recs[k].key) == 0 &&
                c->recs[i].done_rank > c->recs[k].done_rank)
                fail_msg("key %s: job %d ended after job %d", c->recs[i].key, c->recs[i].n,
                         c->recs[k].n);
}

static void test_options_refused(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    rl_dispatcher_t *d = NULL;
    rl_dispatch_options o;
    options(NULL, &o, RL_DISPATCH_BATCH_MAX + 1);
    assert_refused(rl_dispatch_init(&loop, &o, &d), RL_ERANGE, "batch_max 1025",
                   "RL_DISPATCH_BATCH_MAX");
    o.batch_max = UINT32_MAX;
    assert_refused(rl_dispatch_init(&loop, &o, &d), RL_ERANGE, "batch_max 4294967295", "1024");
    o.batch_max = 8;
    o.batch_handler = NULL;
    o.handler = (rl_dispatch_handler_fn)(void (*)(void))batch_handler; /* never called */
    assert_refused(rl_dispatch_init(&loop, &o, &d), RL_EINVAL, "batch_max 8 with handler",
                   "batch_handler");
    o.handler = NULL;
    o.async_batch_handler = async_batch_handler;
    o.batch_handler = batch_handler;
    assert_refused(rl_dispatch_init(&loop, &o, &d), RL_EINVAL,
                   "batch_handler and async_batch_handler both set", "exactly one");
    o.batch_handler = NULL;
    assert_refused(rl_dispatch_init(&loop, &o, &d), RL_EINVAL, "workers 1 with async_handler", "");
    o.workers = 0;
    o.job_timeout_ms = 0;
    o.async_batch_handler = NULL;
    o.batch_handler = batch_handler;
    o.job_timeout_ms = 5;
    assert_refused(rl_dispatch_init(&loop, &o, &d), RL_EINVAL, "job_timeout_ms 5 with handler", "");
    assert_null(d);
    /* 0 and 1 are "one job per call", and RL_DISPATCH_BATCH_MAX is allowed. */
    uint32_t ok[] = {0, 1, RL_DISPATCH_BATCH_MAX};
    for (size_t i = 0; i < 3; i++) {
        o.job_timeout_ms = 0;
        o.batch_max = ok[i];
        assert_rl_ok(rl_dispatch_init(&loop, &o, &d));
        assert_rl_ok(rl_dispatch_close(d, RL_DISPATCH_DRAIN, NULL));
        assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
        d = NULL;
    }
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* A batch takes the next jobs of one key in the lane, up to batch_max, passing over other keys'
 * jobs (which keep their order); a job of the key with another tag ends it. */
static void test_batches_take_the_next_jobs_of_one_key(void **state)
{
    (void)state;
    ctx *c = ctx_new();
    rl_dispatch_options o;
    options(c, &o, 4);
    assert_rl_ok(rl_dispatch_init(&c->loop, &o, &c->d));
    hold_lane(c); /* rec 0 */
    for (int i = 0; i < 5; i++)
        submit(c, add(c, "a", i, 1)); /* recs 1..5 */
    submit(c, add(c, "b", 0, 1));     /* 6 */
    submit(c, add(c, "b", 1, 1));     /* 7 */
    submit(c, add(c, "b", 2, 2));     /* 8: another tag */
    submit(c, add(c, "a", 5, 1));     /* 9 */
    gate_set(&c->hold, true);
    run_until_done(c, 10);
    assert_int_equal(c->ncalls, 5);
    assert_call(c, 0, (int[]){0, -1});
    assert_call(c, 1, (int[]){1, 2, 3, 4, -1});
    assert_call(c, 2, (int[]){5, 9, -1}); /* a4, then a5 from behind b's jobs */
    assert_call(c, 3, (int[]){6, 7, -1}); /* b0, b1: b2 is of another tag */
    assert_call(c, 4, (int[]){8, -1});
    int want[] = {0, 1, 2, 3, 4, 5, 9, 6, 7, 8};
    for (int i = 0; i < 10; i++) {
        assert_int_equal(c->done_order[i], want[i]);
        assert_int_equal(c->recs[i].outcome, RL_DISPATCH_DONE);
        assert_int_equal(c->recs[i].attempts, 1);
    }
    finish(c);
}

/* A batch looks at 8 x batch_max queued jobs for its key's: a job further away waits its turn. */
static void test_batch_looks_a_bounded_way(void **state)
{
    (void)state;
    ctx *c = ctx_new();
    rl_dispatch_options o;
    options(c, &o, 2);
    assert_rl_ok(rl_dispatch_init(&c->loop, &o, &c->d));
    hold_lane(c);
    submit(c, add(c, "a", 0, 1)); /* rec 1 */
    for (int i = 0; i < 16; i++)
        submit(c, add(c, "b", i, 1)); /* recs 2..17 */
    submit(c, add(c, "a", 1, 1));     /* 18: the 17th queued behind a0, past the 16 looked at */
    submit(c, add(c, "c", 0, 1));     /* 19 */
    gate_set(&c->hold, true);
    run_until_done(c, 20);
    assert_call(c, 1, (int[]){1, -1});
    assert_call(c, 2, (int[]){2, 3, -1});
    assert_call(c, 9, (int[]){16, 17, -1});
    assert_call(c, 10, (int[]){18, -1});
    assert_call(c, 11, (int[]){19, -1});
    assert_int_equal(c->ncalls, 12);
    assert_key_order(c);
    finish(c);
}

/* A failed job inside a batch: the jobs before it end, it is retried with its key parked, and
 * the jobs after it of its key (all of the batch's: one key) wait behind it and run again with
 * it, though the handler said they succeeded; they end after it. The lane goes on with another
 * key meanwhile. On the code that ended them at once, a2 and a3 end before a1. */
static void test_failure_inside_batch_parks_later_jobs(void **state)
{
    (void)state;
    ctx *c = ctx_new();
    rl_dispatch_options o;
    options(c, &o, 8);
    assert_rl_ok(rl_dispatch_init(&c->loop, &o, &c->d));
    hold_lane(c);
    for (int i = 0; i < 4; i++)
        submit(c, add(c, "a", i, 1)); /* recs 1..4 */
    submit(c, add(c, "b", 0, 1));     /* 5 */
    c->fail[2] = -7;                  /* a1's first call fails; a2 and a3 say 0 */
    gate_set(&c->hold, true);
    run_until_done(c, 6);
    assert_key_order(c);
    assert_call(c, 1, (int[]){1, 2, 3, 4, -1});
    /* b runs on its own while a is parked; the retry's batch is a1, a2, a3 (in either order
     * with b: the retry waits for its backoff on the loop's timer). */
    int retry = c->call_len[2] == 3 ? 2 : 3;
    assert_call(c, retry, (int[]){2, 3, 4, -1});
    assert_call(c, retry == 2 ? 3 : 2, (int[]){5, -1});
    assert_int_equal(c->ncalls, 4);
    assert_int_equal(c->recs[1].attempts, 1);
    assert_int_equal(c->recs[2].attempts, 2); /* failed once, then done */
    assert_int_equal(c->recs[3].attempts, 1); /* its first call's status was not taken */
    assert_int_equal(c->recs[3].calls, 2);
    assert_int_equal(c->recs[4].calls, 2);
    for (int i = 0; i < 6; i++)
        assert_int_equal(c->recs[i].outcome, RL_DISPATCH_DONE);
    rl_dispatch_stats s;
    rl_dispatch_lane_stats ls;
    assert_rl_ok(rl_dispatch_stats_get(c->d, &s, &ls, 1, NULL));
    assert_int_equal(ls.failed, 1);
    assert_int_equal(ls.retried, 1);
    assert_int_equal(ls.processed, 6);
    finish(c);
}

/* A job dead-lettered inside a batch ends DEAD, and the jobs after it run again at once, in a
 * batch of their own, before any other job of their key. */
static void test_dead_letter_inside_batch(void **state)
{
    (void)state;
    ctx *c = ctx_new();
    rl_dispatch_options o;
    options(c, &o, 8);
    o.max_attempts = 1;
    assert_rl_ok(rl_dispatch_init(&c->loop, &o, &c->d));
    hold_lane(c);
    for (int i = 0; i < 4; i++)
        submit(c, add(c, "a", i, 1)); /* recs 1..4 */
    c->fail[2] = -7;
    gate_set(&c->hold, true);
    run_until_done(c, 5);
    assert_int_equal(c->ncalls, 3);
    assert_call(c, 1, (int[]){1, 2, 3, 4, -1});
    assert_call(c, 2, (int[]){3, 4, -1});
    for (int i = 0; i < 5; i++)
        assert_int_equal(c->done_order[i], i);
    assert_int_equal(c->recs[2].outcome, RL_DISPATCH_DEAD);
    assert_int_equal(c->recs[3].outcome, RL_DISPATCH_DONE);
    assert_int_equal(c->recs[3].attempts, 1);
    finish(c);
}

/* A non-zero return fails the whole batch: its first job is retried, the others come again
 * behind it with their attempts unchanged. */
static void test_whole_batch_failure(void **state)
{
    (void)state;
    ctx *c = ctx_new();
    rl_dispatch_options o;
    options(c, &o, 8);
    assert_rl_ok(rl_dispatch_init(&c->loop, &o, &c->d));
    hold_lane(c);
    for (int i = 0; i < 3; i++)
        submit(c, add(c, "a", i, 1)); /* recs 1..3 */
    c->whole_fail = -3;
    gate_set(&c->hold, true);
    run_until_done(c, 4);
    assert_int_equal(c->ncalls, 3);
    assert_call(c, 1, (int[]){1, 2, 3, -1});
    assert_call(c, 2, (int[]){1, 2, 3, -1});
    for (int i = 0; i < 4; i++)
        assert_int_equal(c->done_order[i], i);
    assert_int_equal(c->recs[1].attempts, 2);
    assert_int_equal(c->recs[2].attempts, 1);
    assert_int_equal(c->recs[3].attempts, 1);
    finish(c);
}

/* Asynchronous batches: one ticket for the batch, rl_dispatch_complete_batch with a status per
 * job (the wrong length is refused and changes nothing), a failure inside it parks the jobs
 * after it, and rl_dispatch_complete finishes the retry's batch. */
static void test_async_batch_complete(void **state)
{
    (void)state;
    ctx *c = ctx_new();
    rl_dispatch_options o;
    options(c, &o, 8);
    o.workers = 0;
    o.batch_handler = NULL;
    o.async_batch_handler = async_batch_handler;
    assert_rl_ok(rl_dispatch_init(&c->loop, &o, &c->d));
    for (int i = 0; i < 4; i++)
        submit(c, add(c, "a", i, 1)); /* recs 0..3, queued before the loop runs */
    while (!c->ticket)
        uv_run(&c->loop, UV_RUN_ONCE);
    assert_int_equal(c->ticket_n, 4);
    assert_call(c, 0, (int[]){0, 1, 2, 3, -1});
    int status[4] = {0, -5, 0, 0};
    assert_int_equal(rl_dispatch_complete_batch(c->d, c->ticket, status, 3), RL_EINVAL);
    assert_int_equal(rl_dispatch_complete_batch(c->d, c->ticket, NULL, 4), RL_EINVAL);
    uint64_t t = c->ticket;
    c->ticket = 0;
    assert_rl_ok(rl_dispatch_complete_batch(c->d, t, status, 4));
    assert_int_equal(rl_dispatch_complete_batch(c->d, t, status, 4), RL_ESTALE);
    while (!c->ticket) /* the retry, after its backoff */
        uv_run(&c->loop, UV_RUN_ONCE);
    assert_int_equal(c->ticket_n, 3);
    assert_call(c, 1, (int[]){1, 2, 3, -1});
    assert_int_equal(c->ndone, 1); /* a0 only: a2 and a3 wait behind a1 */
    assert_rl_ok(rl_dispatch_complete(c->d, c->ticket, 0));
    run_until_done(c, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(c->done_order[i], i);
        assert_int_equal(c->recs[i].outcome, RL_DISPATCH_DONE);
    }
    assert_int_equal(c->recs[1].attempts, 2);
    assert_int_equal(c->recs[2].attempts, 1);
    finish(c);
}

static void open_later(void *arg)
{
    gate *g = arg;
    uv_sleep(20); /* wait_tag is waiting by then, or not: either way it returns 0 */
    gate_set(g, true);
}

/* take_tag with a batch in flight hands back the key's queued jobs (they end first: the
 * header's exception, as wide as the batch), not the batch's; wait_tag waits for the whole
 * batch. The statistics count the batch's jobs in flight. */
static void test_take_and_wait_tag_with_batch_in_flight(void **state)
{
    (void)state;
    ctx *c = ctx_new();
    rl_dispatch_options o;
    options(c, &o, 3);
    assert_rl_ok(rl_dispatch_init(&c->loop, &o, &c->d));
    hold_lane(c);
    for (int i = 0; i < 6; i++)
        submit(c, add(c, "a", i, 1)); /* recs 1..6 */
    c->gated = &c->recs[1];
    gate_set(&c->hold, true);
    gate_wait_arrived(&c->in_batch, 1); /* a0, a1, a2 in the handler */
    rl_dispatch_stats s;
    rl_dispatch_lane_stats ls;
    assert_rl_ok(rl_dispatch_stats_get(c->d, &s, &ls, 1, NULL));
    assert_int_equal(ls.in_flight, 3);
    assert_int_equal(ls.depth, 3);
    size_t n = 0;
    assert_rl_ok(rl_dispatch_take_tag(c->d, 1, &n));
    assert_int_equal(n, 3);
    assert_int_equal(rl_dispatch_wait_tag(c->d, 1, 0), RL_ETIMEDOUT);
    uv_thread_t t;
    assert_int_equal(uv_thread_create(&t, open_later, &c->in_batch), 0);
    assert_rl_ok(rl_dispatch_wait_tag(c->d, 1, UINT64_MAX));
    uv_thread_join(&t);
    assert_int_equal(c->ndone, 7); /* every job of tag 1 has ended */
    /* hold, then a3..a5 handed back, then a0..a2 done */
    int want[] = {0, 4, 5, 6, 1, 2, 3};
    for (int i = 0; i < 7; i++)
        assert_int_equal(c->done_order[i], want[i]);
    for (int i = 4; i <= 6; i++)
        assert_int_equal(c->recs[i].outcome, RL_DISPATCH_RETURNED);
    for (int i = 1; i <= 3; i++)
        assert_int_equal(c->recs[i].outcome, RL_DISPATCH_DONE);
    finish(c);
}

/* A lane change takes the key of a batch in flight away (an add that may move it, then the
 * removal of its lane, which must): the key's queued jobs and those submitted after wait at
 * the new lane behind the fence until the whole batch has ended, then run in order; the key is
 * never in two handlers at once (the other worker is free to start it). */
static void test_lane_change_with_batch_in_flight(void **state)
{
    (void)state;
    ctx *c = ctx_new();
    rl_dispatch_options o;
    options(c, &o, 3);
    o.workers = 2;
    assert_rl_ok(rl_dispatch_init(&c->loop, &o, &c->d));
    hold_lane(c);
    for (int i = 0; i < 6; i++)
        submit(c, add(c, "a", i, 1)); /* recs 1..6 */
    c->gated = &c->recs[1];
    gate_set(&c->hold, true);
    gate_wait_arrived(&c->in_batch, 1);
    assert_rl_ok(rl_dispatch_add_lane(c->d, "lane-1"));
    assert_rl_ok(rl_dispatch_remove_lane(c->d, "lane-0"));
    submit(c, add(c, "a", 6, 1)); /* 7, 8: to lane-1, behind the fence */
    submit(c, add(c, "a", 7, 1));
    rl_dispatch_stats s;
    rl_dispatch_lane_stats ls[2];
    size_t nl = 0;
    assert_rl_ok(rl_dispatch_stats_get(c->d, &s, ls, 2, &nl));
    assert_int_equal(nl, 2); /* lane-1, and lane-0 retiring with its batch */
    assert_int_equal(ls[0].parked, 5);
    assert_int_equal(ls[0].depth, 0);
    assert_int_equal(ls[1].retiring, 1);
    assert_int_equal(ls[1].in_flight, 3);
    for (int i = 0; i < 20; i++)
        uv_run(&c->loop, UV_RUN_NOWAIT); /* nothing of "a" may start: the fence holds it */
    assert_int_equal(c->ncalls, 2);
    gate_set(&c->in_batch, true);
    run_until_done(c, 9);
    for (int i = 0; i < 9; i++)
        assert_int_equal(c->done_order[i], i);
    for (int i = 1; i <= 8; i++)
        assert_int_equal(c->recs[i].calls, 1);
    assert_call(c, 1, (int[]){1, 2, 3, -1});
    assert_call(c, 2, (int[]){4, 5, 6, -1});
    assert_call(c, 3, (int[]){7, 8, -1});
    finish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options_refused),
        cmocka_unit_test(test_batches_take_the_next_jobs_of_one_key),
        cmocka_unit_test(test_batch_looks_a_bounded_way),
        cmocka_unit_test(test_failure_inside_batch_parks_later_jobs),
        cmocka_unit_test(test_dead_letter_inside_batch),
        cmocka_unit_test(test_whole_batch_failure),
        cmocka_unit_test(test_async_batch_complete),
        cmocka_unit_test(test_take_and_wait_tag_with_batch_in_flight),
        cmocka_unit_test(test_lane_change_with_batch_in_flight),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
