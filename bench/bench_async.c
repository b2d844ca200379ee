/* SPDX-License-Identifier: BSD-2-Clause */
/* bench_async: the asynchronous dispatcher (async_handler), shared workers, memory per lane and
 * the cost of a lane change with many lanes.
 *
 *   bench_async                          everything below, with the default job counts
 *   bench_async timer [JOBS]             async jobs that end 1 ms after they start (a uv_timer),
 *                                        4,096 / 16,384 / 65,536 lanes, against jobs that end at
 *                                        once (inside the async handler), 10,000 keys
 *   bench_async tcp [JOBS]               async jobs that are a TCP round trip to a local server
 *                                        answering after 1 ms, against the same requests sent
 *                                        without the dispatcher
 *   bench_async blocking [JOBS]          blocking handlers that sleep 1 ms, 64 shared workers
 *                                        over 4,096 lanes, against the ideal 64,000 jobs/s
 *   bench_async memory                   RSS (and heap) per idle async lane, 65,536 lanes minus
 *                                        1, profiles default, balanced and jump
 *   bench_async change                   add_lane / remove_lane with 100,000 jobs queued over
 *                                        4,096 async lanes (last_change_ns); RINGLANE_BENCH_LANES,
 *                                        RINGLANE_BENCH_QUEUED and RINGLANE_BENCH_PROFILE change
 *                                        the lanes, the jobs queued and the ring profile
 *   bench_async loopcpu [JOBS [RUNS]]    the loop thread's CPU per job at 1,024 / 8,192 / 65,536
 *                                        lanes (jobs ending at once and after 1 ms), ratios
 *                                        against 1,024 (RINGLANE_BENCH_PROFILE: the ring profile,
 *                                        RINGLANE_BENCH_KEYS: the keys fed, 10,000 at most)
 *   bench_async lanes                    the cost of idle async lanes at 1,024 / 8,192 / 65,536:
 *                                        init, memory per lane, add_lane and remove_lane, per
 *                                        profile (default, balanced, jump, memento)
 *   bench_async one timer|now LANES JOBS one dispatcher run (for perf stat or callgrind)
 *   bench_async stats                    the statistics' texts (compact JSON of a stats tick,
 *                                        Prometheus, full JSON): length and the time of a call
 *                                        at 1,024 and 65,536 memento lanes, 0 to 200,000 busy keys
 *
 * Jobs are submitted from the loop thread, which also runs the async handlers: a uv_check
 * handle (after every poll) tops the dispatcher up to a window of jobs held with
 * rl_dispatch_try_submit, and on_capacity resumes it after an RL_EAGAIN. Keys are "key-0" ..
 * "key-9999" in turn. */
#define _GNU_SOURCE /* mallinfo2 */
#include "ringlane/dispatcher.h"
#include "ringlane/error.h"
#include "ringlane/ring.h"

#include "delay_server.h" /* examples/delay_server.c: the server the TCP jobs talk to */

#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#define NKEYS 10000
#define WINDOW 20000 /* jobs held (queued or in flight) by the feeder */

static char keys[NKEYS][16];
static size_t key_len[NKEYS];
static int nkeys = NKEYS; /* the keys the feeder uses: RINGLANE_BENCH_KEYS, at most NKEYS */

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_async: %s: %s\n", what, rl_strerror(rc));
    exit(1);
}

static void die_uv(const char *what, int rc)
{
    fprintf(stderr, "bench_async: %s: %s\n", what, uv_strerror(rc));
    exit(1);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (!p)
        die("calloc", RL_ENOMEM);
    return p;
}

static double rusage_seconds(int who)
{
    struct rusage u;
    getrusage(who, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec * 1e-6 +
           (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec * 1e-6;
}

static double cpu_seconds(void)
{
    return rusage_seconds(RUSAGE_SELF);
}

/* The CPU of the calling thread: the loop thread, which runs the async handlers. */
static double loop_cpu_seconds(void)
{
    return rusage_seconds(RUSAGE_THREAD);
}

/* Lane names "lane-0" .. "lane-<n-1>" (one block, kept for the process). */
static const char **lane_names(size_t n)
{
    static char(*names)[32];
    static const char **ptrs;
    static size_t have;
    if (n > have) {
        free(names);
        free(ptrs);
        names = xcalloc(n, sizeof *names);
        ptrs = xcalloc(n, sizeof *ptrs);
        for (size_t i = 0; i < n; i++) {
            snprintf(names[i], sizeof names[i], "lane-%zu", i);
            ptrs[i] = names[i];
        }
        have = n;
    }
    return ptrs;
}

/* ------------------------------------------------------------------ the loop-thread feeder */

typedef struct feeder {
    rl_dispatcher_t *d;
    uv_check_t check;
    uint64_t jobs, submitted, ended, window, refused;
    uint64_t t0, t1, t10, t90; /* start, end, and when 10% and 90% of the jobs had ended */
    double cpu10, cpu90, loop10, loop90; /* the process's and the loop thread's CPU seconds */
    void (*finished)(struct feeder *f);  /* after the last on_done */
} feeder;

static void feed(feeder *f)
{
    while (f->submitted < f->jobs && f->submitted - f->ended < f->window) {
        int k = (int)(f->submitted % (uint64_t)nkeys);
        int rc = rl_dispatch_try_submit(f->d, keys[k], key_len[k], NULL, 0);
        if (rc == RL_EAGAIN) {
            f->refused++;
            return; /* on_capacity, or the next check, resumes */
        }
        if (rc)
            die("rl_dispatch_try_submit", rc);
        f->submitted++;
    }
}

static void feed_check(uv_check_t *c)
{
    feed(c->data);
}

static void feeder_start(feeder *f, uv_loop_t *loop, uint64_t jobs, uint64_t window)
{
    f->jobs = jobs;
    f->window = window;
    uv_check_init(loop, &f->check);
    f->check.data = f;
    uv_check_start(&f->check, feed_check);
    f->t0 = uv_hrtime();
    feed(f);
}

/* Counts an ended job; true for the last one. */
static int feeder_count(feeder *f)
{
    ++f->ended;
    if (f->ended == f->jobs / 10) {
        f->t10 = uv_hrtime();
        f->cpu10 = cpu_seconds();
        f->loop10 = loop_cpu_seconds();
    } else if (f->ended == f->jobs - f->jobs / 10) {
        f->t90 = uv_hrtime();
        f->cpu90 = cpu_seconds();
        f->loop90 = loop_cpu_seconds();
    }
    if (f->ended < f->jobs)
        return 0;
    f->t1 = uv_hrtime();
    uv_close((uv_handle_t *)&f->check, NULL);
    return 1;
}

/* Called from on_done. */
static void feeder_ended(feeder *f)
{
    if (feeder_count(f)) {
        rl_dispatch_close(f->d, RL_DISPATCH_DRAIN, NULL);
        if (f->finished)
            f->finished(f);
    }
}

/* A run's jobs/s: over the whole run (the last jobs drain from the fullest lanes alone), and
 * steady, while the 10th to the 90th percent of the jobs ended; cpu is the process's CPU
 * seconds per second in that steady part (1.0: one core busy). */
typedef struct rate {
    double whole, steady, cpu;
    double loop_us; /* the loop thread's CPU microseconds per job, steady */
} rate;

static rate feeder_rate(const feeder *f)
{
    double steady_s = (double)(f->t90 - f->t10) / 1e9;
    return (rate){.whole = (double)f->jobs / ((double)(f->t1 - f->t0) / 1e9),
                  .steady = (double)(f->jobs - 2 * (f->jobs / 10)) / steady_s,
                  .cpu = (f->cpu90 - f->cpu10) / steady_s,
                  .loop_us =
                      (f->loop90 - f->loop10) * 1e6 / (double)(f->jobs - 2 * (f->jobs / 10))};
}

/* ------------------------------------------------------------------ timer: 1 ms async jobs */

typedef struct slot {
    uv_timer_t timer;
    uint64_t ticket;
    struct slot *next_free;
} slot;

typedef struct timer_run {
    feeder f; /* first: the dispatcher's data pointer is the run */
    uv_loop_t loop;
    uint64_t delay_ms;
    slot *slots, *free_slots;
    size_t n_slots;
} timer_run;

static void slot_due(uv_timer_t *t)
{
    slot *s = t->data;
    timer_run *r = s->timer.loop->data;
    uint64_t ticket = s->ticket;
    s->next_free = r->free_slots;
    r->free_slots = s;
    int rc = rl_dispatch_complete(r->f.d, ticket, 0);
    if (rc)
        die("rl_dispatch_complete", rc);
}

static void start_timer_job(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    timer_run *r = rl_dispatch_get_data(d);
    if (r->delay_ms == 0) { /* the ratio's baseline: the job ends inside its handler */
        int rc = rl_dispatch_complete(d, job->ticket, 0);
        if (rc)
            die("rl_dispatch_complete", rc);
        return;
    }
    slot *s = r->free_slots;
    if (!s)
        die("more jobs in flight than slots", RL_ERANGE);
    r->free_slots = s->next_free;
    s->ticket = job->ticket;
    uv_timer_start(&s->timer, slot_due, r->delay_ms, 0);
}

static void timer_done(rl_dispatcher_t *d, rl_dispatch_job *job, int outcome)
{
    (void)job;
    if (outcome != RL_DISPATCH_DONE)
        die("a job did not end done", RL_ESTATE);
    feeder_ended(rl_dispatch_get_data(d));
}

static void timer_capacity(rl_dispatcher_t *d)
{
    feed(rl_dispatch_get_data(d));
}

static void timer_finished(feeder *f)
{
    timer_run *r = (timer_run *)f;
    for (size_t i = 0; i < r->n_slots; i++)
        uv_close((uv_handle_t *)&r->slots[i].timer, NULL);
}

/* Jobs/s of one dispatcher with `lanes` async lanes whose jobs end delay_ms after they start
 * (0: inside the handler). */
static rate run_timer(size_t lanes, uint64_t delay_ms, uint64_t jobs)
{
    timer_run *r = xcalloc(1, sizeof *r);
    uv_loop_init(&r->loop);
    r->loop.data = r;
    r->delay_ms = delay_ms;
    r->n_slots = lanes + 1 < WINDOW ? lanes + 1 : WINDOW;
    r->slots = xcalloc(r->n_slots, sizeof *r->slots);
    for (size_t i = 0; i < r->n_slots; i++) {
        uv_timer_init(&r->loop, &r->slots[i].timer);
        r->slots[i].timer.data = &r->slots[i];
        r->slots[i].next_free = r->free_slots;
        r->free_slots = &r->slots[i];
    }
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lanes = lane_names(lanes);
    o.lane_count = lanes;
    o.async_handler = start_timer_job;
    o.on_done = timer_done;
    o.on_capacity = timer_capacity;
    o.data = r;
    rl_ring_options ring;
    rl_ring_options_init(&ring);
    ring.profile = getenv("RINGLANE_BENCH_PROFILE"); /* NULL: the default */
    o.ring = &ring;
    int rc = rl_dispatch_init(&r->loop, &o, &r->f.d);
    if (rc)
        die("rl_dispatch_init", rc);
    r->f.finished = timer_finished;
    feeder_start(&r->f, &r->loop, jobs, WINDOW);
    uv_run(&r->loop, UV_RUN_DEFAULT);
    if ((rc = uv_loop_close(&r->loop)))
        die_uv("uv_loop_close", rc);
    rate out = feeder_rate(&r->f);
    free(r->slots);
    free(r);
    return out;
}

static void timer_table(uint64_t jobs)
{
    static const size_t lanes[] = {4096, 16384, 65536};
    printf("async jobs, %llu per run, %d keys, window %d jobs, one loop thread\n",
           (unsigned long long)jobs, NKEYS, WINDOW);
    printf("jobs/s steady (10%% to 90%% of the jobs ended) and over the whole run; cpu: "
           "CPU seconds per second, steady\n");
    printf("%-7s %11s %11s %5s | %11s %11s %5s | %6s %7s\n", "lanes", "at once", "whole", "cpu",
           "1 ms timer", "whole", "cpu", "ratio", "target");
    for (size_t i = 0; i < sizeof lanes / sizeof lanes[0]; i++) {
        rate now = run_timer(lanes[i], 0, jobs);
        rate timed = run_timer(lanes[i], 1, jobs);
        printf("%-7zu %11.0f %11.0f %5.2f | %11.0f %11.0f %5.2f | %6.2f %7s\n", lanes[i],
               now.steady, now.whole, now.cpu, timed.steady, timed.whole, timed.cpu,
               timed.steady / now.steady, timed.steady >= 300000 ? "met" : "missed");
        fflush(stdout);
    }
}

/* ------------------------------------------------------------------ loop CPU per job by lanes */

/* The loop thread's CPU per job at 1,024, 8,192 and 65,536 lanes, jobs that end inside their
 * handler and jobs that end 1 ms later, with on_capacity set (as the consumer sets it); runs
 * interleaved, medians, ratios against 1,024 lanes. Work on the loop that grows with the lane
 * count shows here. */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void loop_cpu_table(uint64_t jobs, int runs)
{
    enum { NL = 3, MAX_RUNS = 15 };
    static const size_t lanes[NL] = {1024, 8192, 65536};
    const char *profile = getenv("RINGLANE_BENCH_PROFILE");
    if (runs < 1 || runs > MAX_RUNS)
        runs = 3;
    double us[2][NL][MAX_RUNS];
    for (int r = 0; r < runs; r++)
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < NL; i++)
                us[k][i][r] = run_timer(lanes[i], (uint64_t)k, jobs).loop_us;
    printf("loop thread CPU per job (getrusage RUSAGE_THREAD, 10%% to 90%% of the jobs ended), "
           "%llu jobs, %d keys, profile %s, median of %d runs interleaved\n",
           (unsigned long long)jobs, nkeys, profile ? profile : "default", runs);
    printf("%-7s %12s %7s %12s %7s\n", "lanes", "at once us", "ratio", "1 ms us", "ratio");
    double base[2] = {0, 0};
    for (int i = 0; i < NL; i++) {
        double med[2];
        for (int k = 0; k < 2; k++) {
            qsort(us[k][i], (size_t)runs, sizeof us[k][i][0], cmp_double);
            med[k] = us[k][i][runs / 2];
            if (i == 0)
                base[k] = med[k];
        }
        printf("%-7zu %12.3f %7.2f %12.3f %7.2f\n", lanes[i], med[0], med[0] / base[0], med[1],
               med[1] / base[1]);
    }
    fflush(stdout);
}

/* ------------------------------------------------------------------ tcp: a round trip per job */

#define TCP_CONNS 8
#define TCP_LANES 4096

typedef struct cconn {
    uv_tcp_t tcp;
    uv_connect_t connect;
    struct tcp_run *r;
    size_t len;
    char buf[65536];
} cconn;

static void client_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    cconn *c = h->data;
    *buf = uv_buf_init(c->buf + c->len, (unsigned)(sizeof c->buf - c->len));
}

typedef struct creq {
    uv_write_t write;
    delay_frame f;
} creq;

typedef struct tcp_run {
    feeder f; /* first */
    uv_loop_t loop;
    delay_server srv;
    cconn conns[TCP_CONNS];
    int connected;
    unsigned next_conn;
    int direct; /* the baseline: requests sent without the dispatcher */
    uint64_t direct_in_flight;
} tcp_run;

static void request_written(uv_write_t *w, int status)
{
    if (status)
        die_uv("client write", status);
    free(w->data);
}

static void send_request(tcp_run *r, uint64_t ticket)
{
    cconn *c = &r->conns[r->next_conn++ % TCP_CONNS];
    creq *q = malloc(sizeof *q);
    if (!q)
        die("malloc", RL_ENOMEM);
    q->f = (delay_frame){.ticket = ticket};
    q->write.data = q;
    uv_buf_t b = uv_buf_init((char *)&q->f, sizeof q->f);
    int rc = uv_write(&q->write, (uv_stream_t *)&c->tcp, &b, 1, request_written);
    if (rc)
        die_uv("client write", rc);
}

/* Any connection may carry a key's next request: the key's previous one has been answered
 * before the dispatcher starts it (see examples/async_dispatch.c). */
static void start_tcp_job(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    send_request(rl_dispatch_get_data(d), job->ticket);
}

static void tcp_done(rl_dispatcher_t *d, rl_dispatch_job *job, int outcome)
{
    (void)job;
    if (outcome != RL_DISPATCH_DONE)
        die("a job did not end done", RL_ESTATE);
    feeder_ended(rl_dispatch_get_data(d));
}

static void tcp_capacity(rl_dispatcher_t *d)
{
    feed(rl_dispatch_get_data(d));
}

/* The baseline's feeder: requests straight onto the connections, TCP_LANES at a time. */
static void direct_feed(uv_check_t *c)
{
    tcp_run *r = c->data;
    while (r->f.submitted < r->f.jobs && r->direct_in_flight < TCP_LANES) {
        send_request(r, ++r->f.submitted);
        r->direct_in_flight++;
    }
}

static void tcp_finished(feeder *f)
{
    tcp_run *r = (tcp_run *)f;
    for (int i = 0; i < TCP_CONNS; i++)
        uv_close((uv_handle_t *)&r->conns[i].tcp, NULL);
}

static void client_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    (void)buf;
    cconn *c = st->data;
    tcp_run *r = c->r;
    if (n < 0)
        die_uv("client read", (int)n);
    c->len += (size_t)n;
    size_t off = 0;
    for (; c->len - off >= sizeof(delay_frame); off += sizeof(delay_frame)) {
        delay_frame f;
        memcpy(&f, c->buf + off, sizeof f);
        if (r->direct) {
            r->direct_in_flight--;
            if (feeder_count(&r->f))
                tcp_finished(&r->f);
            continue;
        }
        int rc = rl_dispatch_complete(r->f.d, f.ticket, 0);
        if (rc)
            die("rl_dispatch_complete", rc);
    }
    memmove(c->buf, c->buf + off, c->len - off);
    c->len -= off;
}

static void client_connected(uv_connect_t *req, int status)
{
    cconn *c = req->data;
    tcp_run *r = c->r;
    if (status)
        die_uv("connect", status);
    uv_tcp_nodelay(&c->tcp, 1);
    int rc = uv_read_start((uv_stream_t *)&c->tcp, client_alloc, client_read);
    if (rc)
        die_uv("client read", rc);
    if (++r->connected < TCP_CONNS)
        return;
    if (r->direct) {
        r->f.window = TCP_LANES;
        uv_check_init(&r->loop, &r->f.check);
        r->f.check.data = r;
        uv_check_start(&r->f.check, direct_feed);
        r->f.t0 = uv_hrtime();
        direct_feed(&r->f.check);
    } else {
        feeder_start(&r->f, &r->loop, r->f.jobs, WINDOW);
    }
}

static rate run_tcp(int direct, uint64_t jobs)
{
    tcp_run *r = xcalloc(1, sizeof *r);
    r->direct = direct;
    r->f.jobs = jobs;
    r->f.finished = tcp_finished;
    uv_loop_init(&r->loop);
    delay_server_start(&r->srv, "bench_async", 1, NULL, NULL); /* answers after 1 ms */
    if (!direct) {
        rl_dispatch_options o;
        rl_dispatch_options_init(&o);
        o.lanes = lane_names(TCP_LANES);
        o.lane_count = TCP_LANES;
        o.async_handler = start_tcp_job;
        o.on_done = tcp_done;
        o.on_capacity = tcp_capacity;
        o.data = r;
        int rc = rl_dispatch_init(&r->loop, &o, &r->f.d);
        if (rc)
            die("rl_dispatch_init", rc);
    }
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", delay_server_port(&r->srv), &addr);
    for (int i = 0; i < TCP_CONNS; i++) {
        cconn *c = &r->conns[i];
        c->r = r;
        uv_tcp_init(&r->loop, &c->tcp);
        c->tcp.data = c;
        c->connect.data = c;
        int rc =
            uv_tcp_connect(&c->connect, &c->tcp, (const struct sockaddr *)&addr, client_connected);
        if (rc)
            die_uv("connect", rc);
    }
    uv_run(&r->loop, UV_RUN_DEFAULT);
    uv_loop_close(&r->loop);
    delay_server_stop(&r->srv);
    rate out = feeder_rate(&r->f);
    free(r);
    return out;
}

static void tcp_table(uint64_t jobs)
{
    printf("\nTCP round trip per job: %d connections to a server thread on 127.0.0.1 that "
           "answers after 1 ms;\n%llu requests per run; the dispatcher: %d async lanes, %d keys, "
           "window %d; direct: %d requests in flight, no order\n",
           TCP_CONNS, (unsigned long long)jobs, TCP_LANES, NKEYS, WINDOW, TCP_LANES);
    printf("%-12s %14s %14s %6s\n", "client", "steady req/s", "whole", "cpu");
    rate direct = run_tcp(1, jobs);
    printf("%-12s %14.0f %14.0f %6.2f\n", "direct", direct.steady, direct.whole, direct.cpu);
    rate disp = run_tcp(0, jobs);
    printf("%-12s %14.0f %14.0f %6.2f\n", "dispatcher", disp.steady, disp.whole, disp.cpu);
    printf("ratio dispatcher / direct: %.2f steady, %.2f whole\n", disp.steady / direct.steady,
           disp.whole / direct.whole);
    fflush(stdout);
}

/* ------------------------------------------------------------------ blocking: shared workers */

typedef struct block_run {
    feeder f; /* first */
    uv_loop_t loop;
} block_run;

static int sleep_handler(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    (void)d;
    (void)job;
    uv_sleep(1);
    return 0;
}

static void block_done(rl_dispatcher_t *d, rl_dispatch_job *job, int outcome)
{
    (void)job;
    if (outcome != RL_DISPATCH_DONE)
        die("a job did not end done", RL_ESTATE);
    feeder_ended(rl_dispatch_get_data(d));
}

static void block_capacity(rl_dispatcher_t *d)
{
    feed(rl_dispatch_get_data(d));
}

static rate run_blocking(uint32_t workers, size_t lanes, uint64_t jobs)
{
    block_run *r = xcalloc(1, sizeof *r);
    uv_loop_init(&r->loop);
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lanes = lane_names(lanes);
    o.lane_count = lanes;
    o.handler = sleep_handler;
    o.workers = workers;
    o.on_done = block_done;
    o.on_capacity = block_capacity;
    o.data = r;
    int rc = rl_dispatch_init(&r->loop, &o, &r->f.d);
    if (rc)
        die("rl_dispatch_init", rc);
    feeder_start(&r->f, &r->loop, jobs, 8192);
    uv_run(&r->loop, UV_RUN_DEFAULT);
    uv_loop_close(&r->loop);
    rate out = feeder_rate(&r->f);
    free(r);
    return out;
}

static void blocking_table(uint64_t jobs)
{
    /* What one uv_sleep(1) really takes here: the ideal with it is 64 / that. */
    uint64_t t = uv_hrtime();
    for (int i = 0; i < 200; i++)
        uv_sleep(1);
    double sleep_ms = (double)(uv_hrtime() - t) / 200 / 1e6;
    rate r = run_blocking(64, 4096, jobs);
    double ideal = 64 / sleep_ms * 1000;
    printf("\nblocking handlers, uv_sleep(1) each, 64 shared workers over 4,096 lanes, %d keys, "
           "%llu jobs:\n%.0f jobs/s steady (%.0f whole run, cpu %.2f); against 64,000: %.2f "
           "(target 0.8: %s);\none uv_sleep(1) takes %.3f ms here, so the ideal is %.0f and the "
           "ratio to it %.2f\n",
           NKEYS, (unsigned long long)jobs, r.steady, r.whole, r.cpu, r.steady / 64000,
           r.steady >= 0.8 * 64000 ? "met" : "missed", sleep_ms, ideal, r.steady / ideal);
    fflush(stdout);
}

/* ------------------------------------------------------------------ memory per lane */

static void noop_async(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    rl_dispatch_complete(d, job->ticket, 0);
}

static long rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (!f || fscanf(f, "%ld %ld", &size, &resident) != 2)
        die("/proc/self/statm", RL_ESTATE);
    fclose(f);
    return resident * sysconf(_SC_PAGESIZE);
}

static long heap_bytes(void)
{
    struct mallinfo2 m = mallinfo2();
    return (long)(m.uordblks + m.hblkhd);
}

/* In a child process: the RSS and heap a dispatcher of `lanes` idle async lanes adds. */
static void memory_child(const char *profile, size_t lanes, int fd)
{
    const char **names = lane_names(lanes); /* the caller's, not counted */
    uv_loop_t loop;
    uv_loop_init(&loop);
    rl_ring_options ring;
    rl_ring_options_init(&ring);
    ring.profile = profile;
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lanes = names;
    o.lane_count = lanes;
    o.ring = &ring;
    o.async_handler = noop_async;
    long rss0 = rss_bytes(), heap0 = heap_bytes();
    rl_dispatcher_t *d;
    int rc = rl_dispatch_init(&loop, &o, &d);
    if (rc)
        die("rl_dispatch_init", rc);
    uv_run(&loop, UV_RUN_NOWAIT);
    long out[2] = {rss_bytes() - rss0, heap_bytes() - heap0};
    if (write(fd, out, sizeof out) != (ssize_t)sizeof out)
        die("write", RL_ESTATE);
    rl_dispatch_close(d, RL_DISPATCH_STOP, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
}

static void memory_of(const char *profile, size_t lanes, long out[2])
{
    int fds[2];
    if (pipe(fds))
        die("pipe", RL_ESTATE);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork", RL_ESTATE);
    if (pid == 0) {
        close(fds[0]);
        memory_child(profile, lanes, fds[1]);
        _exit(0);
    }
    close(fds[1]);
    if (read(fds[0], out, 2 * sizeof out[0]) != (ssize_t)(2 * sizeof out[0]))
        die("the child measured nothing", RL_ESTATE);
    close(fds[0]);
    int st;
    waitpid(pid, &st, 0);
}

static void memory_table(void)
{
    static const char *profiles[] = {"default", "balanced", "jump"};
    const size_t lanes = 65536;
    printf("\nmemory per idle async lane: (dispatcher with %zu lanes) - (dispatcher with 1 lane),"
           "\ndivided by %zu; each in a fresh process; the ring's points included\n",
           lanes, lanes - 1);
    printf("%-10s %8s %14s %14s %12s %12s\n", "profile", "vnodes", "RSS 65,536", "RSS 1",
           "RSS/lane", "heap/lane");
    for (size_t i = 0; i < sizeof profiles / sizeof profiles[0]; i++) {
        long one[2], many[2];
        memory_of(profiles[i], 1, one);
        memory_of(profiles[i], lanes, many);
        rl_ring_options ro;
        rl_ring_options_init(&ro);
        ro.profile = profiles[i];
        rl_member m = {.name = "lane-0", .weight = 1};
        rl_ring_t *ring = NULL;
        unsigned vnodes = 0;
        if (rl_ring_build(&m, 1, &ro, &ring) == 0) {
            vnodes = rl_ring_vnodes(ring);
            rl_ring_free(ring);
        }
        printf("%-10s %8u %12.1f MB %11.1f MB %10.1f B %10.1f B\n", profiles[i], vnodes,
               (double)many[0] / 1e6, (double)one[0] / 1e6,
               (double)(many[0] - one[0]) / (double)(lanes - 1),
               (double)(many[1] - one[1]) / (double)(lanes - 1));
        fflush(stdout);
    }
}

/* ------------------------------------------------------------------ the cost of lanes */

static int cmp_u64(const void *a, const void *b);

/* In a child process: a dispatcher of `lanes` idle async lanes of `profile`: rl_dispatch_init's
 * time, the RSS and heap it adds, and the median time of the whole add_lane and remove_lane
 * calls (each repeated REPS times: a lane added, then removed; and a lane of the start removed,
 * then added back), with the largest critical section (max_change_ns). */
enum { LANE_REPS = 5, LANE_COST_FIELDS = 7 };

static uint64_t median_u64(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_u64);
    return v[n / 2];
}

static void lane_cost_child(const char *profile, size_t lanes, int fd)
{
    const char **names = lane_names(lanes + LANE_REPS); /* the caller's, not counted */
    uv_loop_t loop;
    uv_loop_init(&loop);
    rl_ring_options ring;
    rl_ring_options_init(&ring);
    ring.profile = profile;
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lanes = names;
    o.lane_count = lanes;
    o.ring = &ring;
    o.async_handler = noop_async;
    long rss0 = rss_bytes(), heap0 = heap_bytes();
    rl_dispatcher_t *d;
    uint64_t t = uv_hrtime();
    int rc = rl_dispatch_init(&loop, &o, &d);
    uint64_t init_ns = uv_hrtime() - t;
    if (rc)
        die("rl_dispatch_init", rc);
    uv_run(&loop, UV_RUN_NOWAIT);
    long rss = rss_bytes() - rss0, heap = heap_bytes() - heap0;
    uint64_t add[2 * LANE_REPS], rem[2 * LANE_REPS];
    char name[32];
    for (int i = 0; i < LANE_REPS; i++) {
        t = uv_hrtime();
        if ((rc = rl_dispatch_add_lane(d, names[lanes + (size_t)i])))
            die("rl_dispatch_add_lane", rc);
        add[i] = uv_hrtime() - t;
        uv_run(&loop, UV_RUN_NOWAIT);
        t = uv_hrtime();
        if ((rc = rl_dispatch_remove_lane(d, names[lanes + (size_t)i])))
            die("rl_dispatch_remove_lane", rc);
        rem[i] = uv_hrtime() - t;
        uv_run(&loop, UV_RUN_NOWAIT);
        snprintf(name, sizeof name, "%s", names[(size_t)i * (lanes / LANE_REPS)]);
        t = uv_hrtime();
        if ((rc = rl_dispatch_remove_lane(d, name)))
            die("rl_dispatch_remove_lane", rc);
        rem[LANE_REPS + i] = uv_hrtime() - t;
        uv_run(&loop, UV_RUN_NOWAIT);
        t = uv_hrtime();
        if ((rc = rl_dispatch_add_lane(d, name)))
            die("rl_dispatch_add_lane", rc);
        add[LANE_REPS + i] = uv_hrtime() - t;
        uv_run(&loop, UV_RUN_NOWAIT);
    }
    rl_dispatch_stats s;
    rl_dispatch_stats_get(d, &s, NULL, 0, NULL);
    long out[LANE_COST_FIELDS] = {(long)init_ns,
                                  rss,
                                  heap,
                                  (long)median_u64(add, 2 * LANE_REPS),
                                  (long)median_u64(rem, 2 * LANE_REPS),
                                  (long)s.max_change_ns,
                                  0};
    if (write(fd, out, sizeof out) != (ssize_t)sizeof out)
        die("write", RL_ESTATE);
    rl_dispatch_close(d, RL_DISPATCH_STOP, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
}

static void lane_cost_of(const char *profile, size_t lanes, long out[LANE_COST_FIELDS])
{
    int fds[2];
    if (pipe(fds))
        die("pipe", RL_ESTATE);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork", RL_ESTATE);
    if (pid == 0) {
        close(fds[0]);
        lane_cost_child(profile, lanes, fds[1]);
        _exit(0);
    }
    close(fds[1]);
    ssize_t want = (ssize_t)(LANE_COST_FIELDS * sizeof out[0]);
    if (read(fds[0], out, (size_t)want) != want)
        die("the child measured nothing", RL_ESTATE);
    close(fds[0]);
    int st;
    waitpid(pid, &st, 0);
}

static void lane_cost_table(void)
{
    static const char *profiles[] = {"default", "balanced", "jump", "memento"};
    static const size_t counts[] = {1024, 8192, 65536};
    const char *only = getenv("RINGLANE_BENCH_PROFILE");
    printf("the cost of async lanes: rl_dispatch_init, memory per idle lane ((RSS or heap with N "
           "lanes - with 1) / (N - 1), the ring included), and the whole add_lane / remove_lane "
           "call on the loop thread (median of %d of each, half of them on a lane of the start); "
           "max cs: the largest critical section (max_change_ns)\n",
           2 * LANE_REPS);
    printf("%-9s %7s %10s %10s %10s %10s %10s %10s\n", "profile", "lanes", "init ms", "RSS B/lane",
           "heap B/ln", "add ms", "remove ms", "max cs ms");
    for (size_t p = 0; p < sizeof profiles / sizeof profiles[0]; p++) {
        if (only && strcmp(only, profiles[p]) != 0)
            continue;
        long one[LANE_COST_FIELDS];
        lane_cost_of(profiles[p], 1 + LANE_REPS, one); /* the baseline: the fewest lanes */
        for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
            long v[LANE_COST_FIELDS];
            lane_cost_of(profiles[p], counts[i], v);
            double per = (double)(counts[i] - 1 - LANE_REPS);
            printf("%-9s %7zu %10.2f %10.0f %10.0f %10.3f %10.3f %10.3f\n", profiles[p], counts[i],
                   (double)v[0] / 1e6, (double)(v[1] - one[1]) / per, (double)(v[2] - one[2]) / per,
                   (double)v[3] / 1e6, (double)v[4] / 1e6, (double)v[5] / 1e6);
            fflush(stdout);
        }
    }
}

/* ------------------------------------------------------------------ lane change cost */

typedef struct held_run {
    uint64_t *tickets; /* the jobs in flight, never completed until the close */
    size_t n, cap;
} held_run;

static void hold_async(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    held_run *h = rl_dispatch_get_data(d);
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 8192;
        h->tickets = realloc(h->tickets, h->cap * sizeof *h->tickets);
        if (!h->tickets)
            die("realloc", RL_ENOMEM);
    }
    h->tickets[h->n++] = job->ticket;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static size_t change_lanes = 4096, queued = 100000;

static void change_once(uint64_t ns[3], uint64_t call_ns[3], uint64_t *in_flight)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    held_run h = {0};
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lanes = lane_names(change_lanes);
    o.lane_count = change_lanes;
    o.async_handler = hold_async;
    o.data = &h;
    o.lane_capacity = (uint32_t)(2 * queued);
    o.max_jobs = 2 * queued;
    rl_ring_options ring;
    rl_ring_options_init(&ring);
    ring.profile = getenv("RINGLANE_BENCH_PROFILE"); /* NULL: the default */
    o.ring = &ring;
    rl_dispatcher_t *d;
    int rc = rl_dispatch_init(&loop, &o, &d);
    if (rc)
        die("rl_dispatch_init", rc);
    char key[32];
    for (size_t i = 0; i < queued; i++) {
        int len = snprintf(key, sizeof key, "key-%zu", i % (size_t)nkeys);
        if ((rc = rl_dispatch_try_submit(d, key, (size_t)len, NULL, 0)))
            die("rl_dispatch_try_submit", rc);
    }
    for (int i = 0; i < 100; i++) /* let the lanes start their first jobs */
        uv_run(&loop, UV_RUN_NOWAIT);
    *in_flight = h.n;
    const char *steps[3] = {"+lane-new", "-lane-new", "-lane-0"};
    rl_dispatch_stats s;
    for (int i = 0; i < 3; i++) {
        uint64_t t = uv_hrtime();
        rc = steps[i][0] == '+' ? rl_dispatch_add_lane(d, steps[i] + 1)
                                : rl_dispatch_remove_lane(d, steps[i] + 1);
        call_ns[i] = uv_hrtime() - t; /* with the new ring's build, before the critical part */
        if (rc)
            die(steps[i], rc);
        rl_dispatch_stats_get(d, &s, NULL, 0, NULL);
        ns[i] = s.last_change_ns;
    }
    rl_dispatch_close(d, RL_DISPATCH_STOP, NULL);
    for (size_t i = 0; i < h.n; i++) /* the close waits for the jobs in flight */
        if ((rc = rl_dispatch_complete(d, h.tickets[i], 0)))
            die("rl_dispatch_complete", rc);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    free(h.tickets);
}

static void change_table(void)
{
    enum { REPS = 7 };
    uint64_t ns[3][REPS], call[3][REPS], flight = 0;
    const char *env = getenv("RINGLANE_BENCH_LANES");
    if (env && atol(env) >= 1 && atol(env) <= (long)RL_DISPATCH_LANES_MAX)
        change_lanes = (size_t)atol(env);
    if ((env = getenv("RINGLANE_BENCH_QUEUED")) && atol(env) >= 1)
        queued = (size_t)atol(env);
    for (int r = 0; r < REPS; r++) {
        uint64_t a[3], c[3];
        change_once(a, c, &flight);
        for (int i = 0; i < 3; i++) {
            ns[i][r] = a[i];
            call[i][r] = c[i];
        }
    }
    printf(
        "\nlane change: %zu async lanes (%s), %zu jobs queued over %d keys (%llu in flight, "
        "never completed during the changes);\nlast_change_ns (median and max of %d dispatchers; "
        "budget 5 ms) and the median time of the whole call (the new ring is built before)\n",
        change_lanes,
        getenv("RINGLANE_BENCH_PROFILE") ? getenv("RINGLANE_BENCH_PROFILE") : "default", queued,
        nkeys, (unsigned long long)flight, REPS);
    printf("%-16s %10s %10s %16s\n", "change", "median ms", "max ms", "whole call ms");
    const char *what[3] = {"add lane-new", "remove lane-new", "remove lane-0"};
    for (int i = 0; i < 3; i++) {
        qsort(ns[i], REPS, sizeof ns[i][0], cmp_u64);
        qsort(call[i], REPS, sizeof call[i][0], cmp_u64);
        printf("%-16s %10.3f %10.3f %16.3f\n", what[i], (double)ns[i][REPS / 2] / 1e6,
               (double)ns[i][REPS - 1] / 1e6, (double)call[i][REPS / 2] / 1e6);
    }
    fflush(stdout);
}

/* --- the statistics: what one tick of stats_interval_ms costs, and how long the texts are --- */

/* Jobs held in flight (their lanes stay busy) until the table ends them. */
static uint64_t *held_tickets;
static size_t held_n, held_cap;
static bool held_release; /* from then on, each job ends as it starts */

static void hold_job(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    if (held_release) {
        rl_dispatch_complete(d, job->ticket, 0);
        return;
    }
    if (held_n == held_cap) {
        held_cap = held_cap ? 2 * held_cap : 4096;
        held_tickets = realloc(held_tickets, held_cap * sizeof *held_tickets);
        if (!held_tickets)
            die("realloc", RL_ENOMEM);
    }
    held_tickets[held_n++] = job->ticket;
}

/* The median of `rounds` calls of one statistics text, in microseconds; *len its length. */
static double stats_call_us(rl_dispatcher_t *d, int kind, char *buf, size_t cap, size_t *len,
                            int rounds)
{
    double t[64];
    for (int i = 0; i < rounds; i++) {
        uint64_t t0 = uv_hrtime();
        int rc =
            kind == 0   ? rl_dispatch_stats_json_bounded(d, RL_DISPATCH_STATS_LANES, buf, cap, len)
            : kind == 1 ? rl_dispatch_stats_prometheus(d, RL_DISPATCH_STATS_LANES, buf, cap, len)
                        : rl_dispatch_stats_json(d, buf, cap, len);
        if (rc)
            die("statistics", rc);
        t[i] = (double)(uv_hrtime() - t0) / 1e3;
    }
    for (int i = 1; i < rounds; i++) /* insertion sort: a few values */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    return t[rounds / 2];
}

/* Asynchronous memento lanes with `busy` keys holding a job each (in flight, never completed):
 * the compact JSON of a tick (RL_DISPATCH_STATS_LANES lanes), the Prometheus text of the same
 * lanes, and the full JSON, each its length and the median time of a call. */
static void stats_row(size_t lanes, size_t busy)
{
    uv_loop_t loop;
    if (uv_loop_init(&loop))
        die("uv_loop_init", RL_ELOOP);
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lane_count = lanes;
    o.async_handler = hold_job;
    o.max_jobs = 1u << 20;
    rl_ring_options ring;
    rl_ring_options_init(&ring);
    ring.profile = "memento";
    o.ring = &ring;
    rl_dispatcher_t *d = NULL;
    int rc = rl_dispatch_init(&loop, &o, &d);
    if (rc)
        die("rl_dispatch_init", rc);
    for (size_t i = 0; i < busy; i++) {
        char key[32];
        snprintf(key, sizeof key, "busy-%zu", i);
        rc = rl_dispatch_try_submit(d, key, strlen(key), NULL, 0);
        if (rc && rc != RL_EAGAIN)
            die("rl_dispatch_try_submit", rc);
    }
    uv_run(&loop, UV_RUN_NOWAIT); /* the jobs start */
    rl_dispatch_stats s;
    rl_dispatch_stats_get(d, &s, NULL, 0, NULL);
    size_t cap = 64u << 20, compact = 0, prom = 0, full = 0;
    char *buf = xcalloc(cap, 1);
    double compact_us = stats_call_us(d, 0, buf, cap, &compact, 21);
    double prom_us = stats_call_us(d, 1, buf, cap, &prom, 21);
    double full_us = stats_call_us(d, 2, buf, cap, &full, 3);
    printf("%7zu %8zu %10llu %9zu %9.0f %9zu %9.0f %11zu %9.0f\n", lanes, busy,
           (unsigned long long)s.jobs, compact, compact_us, prom, prom_us, full, full_us);
    free(buf);
    held_release = true;
    for (size_t i = 0; i < held_n; i++)
        rl_dispatch_complete(d, held_tickets[i], 0);
    held_n = 0;
    rl_dispatch_close(d, RL_DISPATCH_DRAIN, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&loop))
        die("uv_loop_close", RL_ELOOP);
    held_release = false;
}

static void stats_table(void)
{
    printf("statistics texts (memento lanes, asynchronous jobs held in flight; median call)\n");
    printf("%7s %8s %10s %9s %9s %9s %9s %11s %9s\n", "lanes", "keys", "jobs", "compact", "us",
           "prom", "us", "full JSON", "us");
    size_t lanes[] = {1024, 65536};
    size_t busy[] = {0, 1000, 10000, 200000};
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 4; j++)
            stats_row(lanes[i], busy[j]);
}

int main(int argc, char **argv)
{
    const char *nk = getenv("RINGLANE_BENCH_KEYS");
    if (nk && atoi(nk) >= 1 && atoi(nk) <= NKEYS)
        nkeys = atoi(nk);
    for (int i = 0; i < NKEYS; i++) {
        snprintf(keys[i], sizeof keys[i], "key-%d", i);
        key_len[i] = strlen(keys[i]);
    }
    const char *mode = argc > 1 ? argv[1] : "all";
    uint64_t jobs = argc > 2 ? strtoull(argv[2], NULL, 10) : 0;
    int all = strcmp(mode, "all") == 0;
    if (strcmp(mode, "lanes") == 0) {
        lane_cost_table();
        return 0;
    }
    if (strcmp(mode, "stats") == 0) {
        stats_table();
        return 0;
    }
    if (strcmp(mode, "loopcpu") == 0) {
        loop_cpu_table(jobs ? jobs : 1000000, argc > 3 ? atoi(argv[3]) : 3);
        return 0;
    }
    if (strcmp(mode, "one") == 0) {
        if (argc != 5)
            die("usage: bench_async one timer|now LANES JOBS", RL_EINVAL);
        size_t lanes = strtoull(argv[3], NULL, 10);
        jobs = strtoull(argv[4], NULL, 10);
        rate r = run_timer(lanes, strcmp(argv[2], "now") == 0 ? 0 : 1, jobs);
        printf("%s lanes=%zu jobs=%llu: %.0f jobs/s steady, %.0f whole run (cpu %.2f)\n", argv[2],
               lanes, (unsigned long long)jobs, r.steady, r.whole, r.cpu);
        return 0;
    }
    if (all || strcmp(mode, "timer") == 0)
        timer_table(jobs ? jobs : 1000000);
    if (all || strcmp(mode, "tcp") == 0)
        tcp_table(jobs ? jobs : 200000);
    if (all || strcmp(mode, "blocking") == 0)
        blocking_table(jobs ? jobs : 200000);
    if (all || strcmp(mode, "memory") == 0)
        memory_table();
    if (all || strcmp(mode, "change") == 0)
        change_table();
    return 0;
}
