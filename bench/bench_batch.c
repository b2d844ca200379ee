/* SPDX-License-Identifier: BSD-2-Clause */
/* bench_batch: batches (batch_max) against one job per handler call, for a handler whose cost is
 * mostly per call: a round trip of 1 ms per call plus 5 us per job (a database write of many
 * rows in one statement, say), slept, not spun, so the cores are not what limits it.
 *
 *   bench_batch [KEYS [LANES [BATCH_MAX [SECONDS]]]]      defaults 1000 16 64 3
 *
 * One process, four runs: a dispatcher of LANES lanes fed by one producer thread (blocking
 * submissions, KEYS keys in turn) for SECONDS each. Blocking: a worker thread per lane, first
 * `handler` (one job per call), then `batch_handler` with batch_max BATCH_MAX. Asynchronous:
 * `async_handler`, then `async_batch_handler`; a completer thread completes each call when its
 * cost has passed (a heap of due times), as a client library's reply would come. LANES bounds
 * the calls in flight either way, as a connection pool would. Prints each run's jobs per second,
 * its handler calls and mean jobs per call, and the ratio of the two rates. */
#define _POSIX_C_SOURCE 200809L
#include "ringlane/dispatcher.h"
#include "ringlane/error.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#define PER_CALL_NS 1000000L /* the round trip */
#define PER_JOB_NS 5000L     /* each job's share of the work */

/* A started asynchronous call: its ticket, due when its cost has passed. */
typedef struct due_call {
    uint64_t due_ns, ticket;
} due_call;

typedef struct run {
    /* asynchronous runs: the calls in flight, a min-heap by due time, and their completer */
    uv_mutex_t mu;
    uv_cond_t cv;
    due_call *heap;
    size_t nheap, heap_cap;
    bool quit;
    uv_loop_t loop;
    rl_dispatcher_t *d;
    int keys;
    uint64_t deadline_ns;
    atomic_bool stop;
    atomic_uint_fast64_t calls, done;
    uint64_t submitted;
    int closed;
} run;

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_batch: %s: %s (%s)\n", what, rl_strerror(rc), rl_last_error_detail());
    exit(1);
}

static void cost(size_t jobs)
{
    long ns = PER_CALL_NS + PER_JOB_NS * (long)jobs;
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static int one_handler(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    (void)job;
    run *r = rl_dispatch_get_data(d);
    atomic_fetch_add(&r->calls, 1);
    cost(1);
    return 0;
}

static int batch_handler(rl_dispatcher_t *d, rl_dispatch_job *const *jobs, size_t n, int *status)
{
    (void)jobs;
    (void)status;
    run *r = rl_dispatch_get_data(d);
    atomic_fetch_add(&r->calls, 1);
    cost(n);
    return 0;
}

static uint64_t cost_ns(size_t jobs)
{
    return (uint64_t)(PER_CALL_NS + PER_JOB_NS * (long)jobs);
}

static void heap_push(run *r, due_call c)
{
    if (r->nheap == r->heap_cap) {
        r->heap_cap = r->heap_cap ? r->heap_cap * 2 : 1024;
        r->heap = realloc(r->heap, r->heap_cap * sizeof *r->heap);
        if (!r->heap)
            die("heap", RL_ENOMEM);
    }
    size_t i = r->nheap++;
    while (i > 0 && r->heap[(i - 1) / 2].due_ns > c.due_ns) {
        r->heap[i] = r->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    r->heap[i] = c;
}

static due_call heap_pop(run *r)
{
    due_call top = r->heap[0], last = r->heap[--r->nheap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= r->nheap)
            break;
        if (c + 1 < r->nheap && r->heap[c + 1].due_ns < r->heap[c].due_ns)
            c++;
        if (r->heap[c].due_ns >= last.due_ns)
            break;
        r->heap[i] = r->heap[c];
        i = c;
    }
    if (r->nheap)
        r->heap[i] = last;
    return top;
}

static void start_call(run *r, uint64_t ticket, size_t jobs)
{
    atomic_fetch_add(&r->calls, 1);
    uv_mutex_lock(&r->mu);
    heap_push(r, (due_call){uv_hrtime() + cost_ns(jobs), ticket});
    uv_cond_signal(&r->cv);
    uv_mutex_unlock(&r->mu);
}

static void one_async(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    start_call(rl_dispatch_get_data(d), job->ticket, 1);
}

static void batch_async(rl_dispatcher_t *d, rl_dispatch_job *const *jobs, size_t n)
{
    start_call(rl_dispatch_get_data(d), jobs[0]->ticket, n);
}

/* Completes each call once its due time has passed. */
static void completer(void *arg)
{
    run *r = arg;
    uv_mutex_lock(&r->mu);
    while (!r->quit) {
        uint64_t now = uv_hrtime();
        if (!r->nheap) {
            uv_cond_wait(&r->cv, &r->mu);
            continue;
        }
        if (r->heap[0].due_ns > now) {
            uv_cond_timedwait(&r->cv, &r->mu, r->heap[0].due_ns - now);
            continue;
        }
        due_call c = heap_pop(r);
        uv_mutex_unlock(&r->mu);
        rl_dispatch_complete(r->d, c.ticket, 0); /* RL_ESTALE after a STOP close: fine */
        uv_mutex_lock(&r->mu);
    }
    uv_mutex_unlock(&r->mu);
}

static void on_done(rl_dispatcher_t *d, rl_dispatch_job *job, int outcome)
{
    (void)job;
    (void)outcome;
    run *r = rl_dispatch_get_data(d);
    atomic_fetch_add(&r->done, 1);
}

static void on_closed(rl_dispatcher_t *d)
{
    run *r = rl_dispatch_get_data(d);
    r->closed = 1;
}

static void producer(void *arg)
{
    run *r = arg;
    char key[32];
    for (uint64_t i = 0; uv_hrtime() < r->deadline_ns; i++) {
        int len = snprintf(key, sizeof key, "key-%d", (int)(i % (uint64_t)r->keys));
        int rc = rl_dispatch_submit(r->d, key, (size_t)len, NULL, 0, 100);
        if (rc == RL_ETIMEDOUT) {
            i--;
            continue;
        }
        if (rc)
            die("rl_dispatch_submit", rc);
        r->submitted++;
    }
    atomic_store(&r->stop, true);
}

/* Closes the dispatcher once the producer is done: every job submitted still runs (DRAIN), and
 * the rate counts the jobs that ended within the time. */
static void on_check(uv_timer_t *t)
{
    run *r = t->data;
    if (!atomic_load(&r->stop))
        return;
    uv_timer_stop(t);
    uv_close((uv_handle_t *)t, NULL);
    int rc = rl_dispatch_close(r->d, RL_DISPATCH_STOP, on_closed);
    if (rc)
        die("rl_dispatch_close", rc);
}

/* One run; returns jobs ended per second within the time, and the calls made. */
static double one_run(int keys, int lanes, bool async, uint32_t batch_max, double seconds,
                      uint64_t *calls, uint64_t *ended)
{
    run *r = calloc(1, sizeof *r);
    if (!r || uv_loop_init(&r->loop) != 0 || uv_mutex_init(&r->mu) != 0 ||
        uv_cond_init(&r->cv) != 0)
        die("setup", RL_ENOMEM);
    r->keys = keys;
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lane_count = (size_t)lanes;
    if (async && batch_max > 1)
        o.async_batch_handler = batch_async;
    else if (async)
        o.async_handler = one_async;
    else if (batch_max > 1)
        o.batch_handler = batch_handler;
    else
        o.handler = one_handler;
    if (batch_max > 1)
        o.batch_max = batch_max;
    o.on_done = on_done;
    o.data = r;
    o.lane_capacity = 1024;
    o.max_jobs = 1024u * (uint32_t)lanes;
    int rc = rl_dispatch_init(&r->loop, &o, &r->d);
    if (rc)
        die("rl_dispatch_init", rc);
    uint64_t start = uv_hrtime();
    r->deadline_ns = start + (uint64_t)(seconds * 1e9);
    uv_thread_t t, ct;
    if (async && uv_thread_create(&ct, completer, r) != 0)
        die("uv_thread_create", RL_ENOMEM);
    if (uv_thread_create(&t, producer, r) != 0)
        die("uv_thread_create", RL_ENOMEM);
    uv_timer_t check;
    uv_timer_init(&r->loop, &check);
    check.data = r;
    uv_timer_start(&check, on_check, 10, 10);
    /* The rate: jobs ended by the deadline (those after it are the STOP close's hand-back or the
     * calls in progress). */
    uint64_t ended_by_deadline = 0;
    while (uv_run(&r->loop, UV_RUN_ONCE)) {
        if (uv_hrtime() <= r->deadline_ns)
            ended_by_deadline = atomic_load(&r->done);
    }
    uv_thread_join(&t);
    if (async) {
        uv_mutex_lock(&r->mu);
        r->quit = true;
        uv_cond_signal(&r->cv);
        uv_mutex_unlock(&r->mu);
        uv_thread_join(&ct);
    }
    uv_loop_close(&r->loop);
    free(r->heap);
    uv_cond_destroy(&r->cv);
    uv_mutex_destroy(&r->mu);
    double elapsed = (double)(r->deadline_ns - start) / 1e9;
    *calls = atomic_load(&r->calls);
    *ended = ended_by_deadline;
    free(r);
    return (double)ended_by_deadline / elapsed;
}

int main(int argc, char **argv)
{
    int keys = argc > 1 ? atoi(argv[1]) : 1000;
    int lanes = argc > 2 ? atoi(argv[2]) : 16;
    uint32_t batch_max = argc > 3 ? (uint32_t)atoi(argv[3]) : 64;
    double seconds = argc > 4 ? atof(argv[4]) : 3;
    if (keys < 1 || lanes < 1 || seconds <= 0) {
        fprintf(stderr, "usage: bench_batch [KEYS [LANES [BATCH_MAX [SECONDS]]]]\n");
        return 2;
    }
    printf("handler cost: 1 ms per call + 5 us per job; %d keys, %d lanes, %.0f s per run\n", keys,
           lanes, seconds);
    for (int async = 0; async < 2; async++) {
        const char *kind = async ? "asynchronous" : "blocking (a worker per lane)";
        uint64_t calls1, ended1, callsb, endedb;
        double one = one_run(keys, lanes, async, 1, seconds, &calls1, &ended1);
        printf("%s, one job per call: %10.0f jobs/s  (%llu ended, %llu calls)\n", kind, one,
               (unsigned long long)ended1, (unsigned long long)calls1);
        double bat = one_run(keys, lanes, async, batch_max, seconds, &callsb, &endedb);
        printf("%s, batch_max %u: %10.0f jobs/s  (%llu ended, %llu calls, %.1f jobs per "
               "call)\n",
               kind, batch_max, bat, (unsigned long long)endedb, (unsigned long long)callsb,
               callsb ? (double)endedb / (double)callsb : 0.0);
        printf("%s: ratio %.2fx\n", kind, one > 0 ? bat / one : 0.0);
    }
    return 0;
}
