/* SPDX-License-Identifier: BSD-2-Clause */
/* bench_poison: one poison key against everyone else's latency.
 *
 *   bench_poison [SECONDS]      both runs below, SECONDS each (default 3)
 *
 * 1,000 keys over 4 lanes (a thread per lane), jobs of ~50 us of work submitted at 20,000/s by
 * one thread. In the poison run, one job in 200 is of key "poison", whose handler fails every
 * attempt (backoff 100 ms doubling to 1 s, 5 attempts: dead-lettered after ~1.5 s). The figure
 * is the p50 / p99 / max of submission-to-done latency of the OTHER keys' jobs, against the same
 * run without the poison key (the baseline, measured in the same process just before). While
 * a retry holds its lane (today), the other keys of the poison key's lane wait through every
 * backoff: this measures that head-of-line blocking, the target of retries that park the key. */
#define _POSIX_C_SOURCE 200809L
#include "ringlane/dispatcher.h"
#include "ringlane/error.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define NKEYS 1000
#define RATE 20000
#define WORK_NS 50000

typedef struct job {
    uint64_t submit_ns;
    bool poison;
} job;

typedef struct run {
    uv_loop_t loop;
    rl_dispatcher_t *d;
    uint64_t *lat; /* other keys' latencies, ns */
    size_t nlat, cap;
    uint64_t poison_jobs, dead, ended, submitted;
    atomic_bool producing;
    bool with_poison;
    double seconds;
} run;

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_poison: %s: %s\n", what, rl_strerror(rc));
    exit(1);
}

static void spin_ns(uint64_t ns)
{
    uint64_t end = uv_hrtime() + ns;
    while (uv_hrtime() < end)
        ;
}

static int handler(rl_dispatcher_t *d, rl_dispatch_job *pj)
{
    (void)d;
    job *j = pj->data;
    spin_ns(WORK_NS);
    return j->poison ? -1 : 0;
}

static void on_done(rl_dispatcher_t *d, rl_dispatch_job *pj, int outcome)
{
    run *r = rl_dispatch_get_data(d);
    job *j = pj->data;
    r->ended++;
    if (j->poison) {
        r->dead += outcome == RL_DISPATCH_DEAD;
    } else if (r->nlat < r->cap) {
        r->lat[r->nlat++] = uv_hrtime() - j->submit_ns;
    }
    free(j);
}

static void producer(void *arg)
{
    run *r = arg;
    uint64_t start = uv_hrtime(), n = 0, total = (uint64_t)(r->seconds * RATE);
    char key[32];
    while (n < total) {
        uint64_t due = start + n * (1000000000ull / RATE);
        while (uv_hrtime() < due)
            ;
        job *j = malloc(sizeof *j);
        if (!j)
            die("malloc", RL_ENOMEM);
        bool poison = r->with_poison && n % 200 == 0;
        j->poison = poison;
        int len =
            poison ? snprintf(key, sizeof key, "poison")
                   : snprintf(key, sizeof key, "key-%llu", (unsigned long long)(n * 7919 % NKEYS));
        j->submit_ns = uv_hrtime();
        int rc = rl_dispatch_submit(r->d, key, (size_t)len, j, 0, -1);
        if (rc)
            die("submit", rc);
        r->poison_jobs += poison; /* not j->poison: j is the dispatcher's now, maybe freed */
        n++;
    }
    r->submitted = n;
    atomic_store(&r->producing, false);
}

static void on_idle(uv_idle_t *h)
{
    run *r = h->data;
    /* Until the other keys' jobs have ended; the poison key's are handed back (each takes
     * ~1.5 s to be dead-lettered, in order, so its backlog outlives the run). */
    if (!atomic_load(&r->producing) && r->nlat + r->poison_jobs >= r->submitted) {
        uv_idle_stop(h);
        rl_dispatch_close(r->d, RL_DISPATCH_STOP, NULL);
        uv_close((uv_handle_t *)h, NULL);
    }
}

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct figures {
    double p50_ms, p99_ms, max_ms;
    size_t n;
    uint64_t dead, poison_jobs;
} figures;

static figures one(bool with_poison, double seconds)
{
    run *r = calloc(1, sizeof *r);
    if (!r)
        die("calloc", RL_ENOMEM);
    r->with_poison = with_poison;
    r->seconds = seconds;
    r->cap = (size_t)(seconds * RATE) + 16;
    r->lat = malloc(r->cap * sizeof *r->lat);
    if (!r->lat || uv_loop_init(&r->loop) != 0)
        die("init", RL_ENOMEM);
    const char *lanes[] = {"lane-0", "lane-1", "lane-2", "lane-3"};
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lanes = lanes;
    o.lane_count = 4;
    o.handler = handler;
    o.on_done = on_done;
    o.data = r;
    o.lane_capacity = 65536;
    o.max_jobs = 1u << 20;
    o.max_attempts = 5;
    o.backoff_ms = 100;
    o.backoff_max_ms = 1000;
    int rc = rl_dispatch_init(&r->loop, &o, &r->d);
    if (rc)
        die("init", rc);
    atomic_store(&r->producing, true);
    uv_idle_t idle;
    uv_idle_init(&r->loop, &idle);
    idle.data = r;
    uv_idle_start(&idle, on_idle);
    uv_thread_t t;
    uv_thread_create(&t, producer, r);
    uv_run(&r->loop, UV_RUN_DEFAULT);
    uv_thread_join(&t);
    uv_loop_close(&r->loop);
    qsort(r->lat, r->nlat, sizeof *r->lat, cmp);
    figures f = {0};
    f.n = r->nlat;
    if (r->nlat) {
        f.p50_ms = (double)r->lat[r->nlat / 2] / 1e6;
        f.p99_ms = (double)r->lat[(size_t)((double)r->nlat * 0.99)] / 1e6;
        f.max_ms = (double)r->lat[r->nlat - 1] / 1e6;
    }
    f.dead = r->dead;
    f.poison_jobs = r->poison_jobs;
    free(r->lat);
    free(r);
    return f;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 3;
    if (seconds <= 0)
        seconds = 3;
    printf("bench_poison: %d keys over 4 lanes, %d jobs/s of ~%d us, %.0f s per run\n", NKEYS, RATE,
           WORK_NS / 1000, seconds);
    figures base = one(false, seconds);
    printf("baseline (no poison key): other keys' latency p50 %.3f ms, p99 %.3f ms, max %.3f ms "
           "(%zu jobs)\n",
           base.p50_ms, base.p99_ms, base.max_ms, base.n);
    figures p = one(true, seconds);
    printf("poison key (1 job in 200, failing 5 attempts, backoff 100 ms..1 s): %llu poison "
           "jobs, %llu dead-lettered\n",
           (unsigned long long)p.poison_jobs, (unsigned long long)p.dead);
    printf("with poison: other keys' latency p50 %.3f ms, p99 %.3f ms, max %.3f ms (%zu jobs)\n",
           p.p50_ms, p.p99_ms, p.max_ms, p.n);
    printf("ratio p99 poison / baseline: %.2f (target <= 2)\n",
           base.p99_ms > 0 ? p.p99_ms / base.p99_ms : 0);
    return 0;
}
