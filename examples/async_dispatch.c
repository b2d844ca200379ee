/* SPDX-License-Identifier: BSD-2-Clause */
/* async_dispatch: per-key ordered jobs that do real I/O, with ringlane's asynchronous handler.
 *
 * Each job is one request over TCP to a small server this program starts on 127.0.0.1. The
 * async handler runs on the loop thread: it writes the request (key, sequence number) on one of
 * a few shared connections and returns; when the server's reply comes back, the read callback
 * calls rl_dispatch_complete with the job's ticket, and only then does the key's lane start the
 * key's next job. The server answers every request after 1 ms and records, per key, the
 * sequence numbers in the order they arrived. Lanes are added and removed while jobs flow. At
 * the end the program checks that every key's requests reached the server in submission order,
 * each exactly once, and exits 1 if any did not.
 *
 * The server runs on a second libuv loop in its own thread, as a remote service would: its
 * reads, its 1 ms timers and its writes do not share the client's loop thread, which runs the
 * submissions, the async handlers, the completions and the lane changes. The two sides share
 * no memory while both run (the port is chosen before the thread starts; the server's records
 * are read after the thread is joined), only the sockets. The server itself is in
 * delay_server.c (bench/bench_async.c uses it too); this program gives it a hook,
 * record_arrival, that keeps the order in which each key's requests arrived.
 *
 *   build/examples/async_dispatch [JOBS [PROFILE]]      (20000 jobs, the default profile)
 */
#define _POSIX_C_SOURCE 200809L
#include "delay_server.h"

#include <ringlane/dispatcher.h>
#include <ringlane/error.h>
#include <ringlane/ring.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define KEYS 500          /* customers */
#define CONNS 4           /* client connections, shared by every lane */
#define FIRST_LANES 32    /* lane-0 .. lane-31 at the start */
#define DELAY_MS 1        /* the server's answer time */
#define WATCHDOG_MS 60000 /* a run that has not finished by then has stalled */
#define BUF_SIZE 65536

static void die(const char *what, int rl_err)
{
    fprintf(stderr, "async_dispatch: %s: %s\n", what, rl_strerror(rl_err));
    exit(1);
}

static void die_uv(const char *what, int uv_err)
{
    fprintf(stderr, "async_dispatch: %s: %s\n", what, uv_strerror(uv_err));
    exit(1);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p)
        die("malloc", RL_ENOMEM);
    return p;
}

/* ---------------------------------------------------------------- the server's records */

/* Per key, the sequence numbers in the order the server received them. The server calls
 * record_arrival on its own thread for each request as it arrives, before it schedules the
 * reply; main reads the records only after delay_server_stop has joined that thread. */
typedef struct arrivals {
    uint32_t *seq[KEYS];
    size_t n[KEYS], cap[KEYS];
} arrivals;

static void record_arrival(void *data, const delay_frame *f)
{
    arrivals *r = data;
    if (f->key >= KEYS)
        die("server: key out of range", RL_ERANGE);
    uint32_t k = f->key;
    if (r->n[k] == r->cap[k]) {
        size_t cap = r->cap[k] ? 2 * r->cap[k] : 64;
        uint32_t *p = realloc(r->seq[k], cap * sizeof *p);
        if (!p)
            die("realloc", RL_ENOMEM);
        r->seq[k] = p;
        r->cap[k] = cap;
    }
    r->seq[k][r->n[k]++] = f->seq;
}

/* ---------------------------------------------------------------- the client (the dispatcher) */

typedef struct job_rec {
    uint32_t key, seq;
} job_rec;

typedef struct cconn {
    uv_tcp_t tcp;
    uv_connect_t connect;
    struct app *a;
    size_t len;
    char buf[BUF_SIZE];
} cconn;

typedef struct creq {
    uv_write_t write;
    delay_frame f;
} creq;

typedef struct app {
    uv_loop_t *loop;
    rl_dispatcher_t *d;
    delay_server srv;
    arrivals arrived; /* the server's thread writes them (see record_arrival) */
    cconn conns[CONNS];
    int connected;
    unsigned next_conn;
    uv_timer_t tick, watchdog;
    const char *profile;
    uint32_t jobs, submitted, ended;
    job_rec *recs;            /* job i's key and sequence number, fixed before the run */
    uint32_t sent[KEYS];      /* jobs per key */
    uint32_t done_next[KEYS]; /* the sequence number on_done expects next */
    uint8_t in_flight[KEYS];  /* a request of the key is out, its reply not yet in */
    uint64_t overlaps, done_out_of_order, not_done, stale, refused, capacity_calls;
    int changes, change_errors;
    uint64_t t0, t1;
} app;

/* Lane changes, spread evenly over the submissions. */
static const char *const changes[] = {"+lane-32", "-lane-0", "+lane-33", "-lane-5",
                                      "-lane-32", "+lane-0", "-lane-17", "+lane-34"};
#define N_CHANGES (int)(sizeof changes / sizeof changes[0])

static void request_written(uv_write_t *w, int status)
{
    if (status)
        die_uv("client write", status);
    free(w->data);
}

/* The async handler, on the loop thread: send the request and return; the job stays in flight
 * until its reply arrives (client_read) and completes it.
 *
 * Connections are taken in turn, so a key's consecutive requests usually go out on different
 * connections, and TCP keeps order only within one connection. That is still safe: the
 * dispatcher starts a key's next job only after rl_dispatch_complete for the previous one,
 * which we call only once the server's reply has come back, and the server replies only after
 * it has recorded the request. So two requests of one key are never in flight at once, on one
 * connection or two, and the server sees each key's requests in submission order. (With
 * job_timeout_ms the dispatcher would give up on a late attempt and retry while the first
 * request may still be on the wire; this example sets no timeout, and its watchdog catches a
 * lost reply instead.) */
static void start_request(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    app *a = rl_dispatch_get_data(d);
    job_rec *j = job->data;
    if (a->in_flight[j->key]++)
        a->overlaps++; /* the dispatcher started a second job of the key: must not happen */
    cconn *c = &a->conns[a->next_conn++ % CONNS];
    creq *r = xmalloc(sizeof *r);
    r->f = (delay_frame){.ticket = job->ticket, .key = j->key, .seq = j->seq};
    r->write.data = r;
    uv_buf_t b = uv_buf_init((char *)&r->f, sizeof r->f);
    int rc = uv_write(&r->write, (uv_stream_t *)&c->tcp, &b, 1, request_written);
    if (rc) {
        /* Not sent: fail the attempt (the dispatcher retries it after its backoff). */
        free(r);
        a->in_flight[j->key]--;
        rl_dispatch_complete(d, job->ticket, rc);
    }
}

static void client_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    cconn *c = h->data;
    *buf = uv_buf_init(c->buf + c->len, (unsigned)(sizeof c->buf - c->len));
}

static void client_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    (void)buf;
    cconn *c = st->data;
    app *a = c->a;
    if (n < 0)
        die_uv("client read", (int)n);
    c->len += (size_t)n;
    size_t off = 0;
    for (; c->len - off >= sizeof(delay_frame); off += sizeof(delay_frame)) {
        delay_frame f;
        memcpy(&f, c->buf + off, sizeof f);
        if (f.key < KEYS)
            a->in_flight[f.key]--;
        int rc = rl_dispatch_complete(a->d, f.ticket, 0);
        if (rc == RL_ESTALE)
            a->stale++; /* a ticket no attempt waits for: a late or repeated reply */
        else if (rc)
            die("rl_dispatch_complete", rc);
    }
    memmove(c->buf, c->buf + off, c->len - off);
    c->len -= off;
}

static void dispatcher_closed(rl_dispatcher_t *d)
{
    app *a = rl_dispatch_get_data(d);
    a->d = NULL;
    for (int i = 0; i < CONNS; i++)
        uv_close((uv_handle_t *)&a->conns[i].tcp, NULL);
    uv_close((uv_handle_t *)&a->tick, NULL);
    uv_close((uv_handle_t *)&a->watchdog, NULL);
}

static void job_done(rl_dispatcher_t *d, rl_dispatch_job *job, int outcome)
{
    app *a = rl_dispatch_get_data(d);
    job_rec *j = job->data;
    if (outcome != RL_DISPATCH_DONE)
        a->not_done++;
    if (a->done_next[j->key] != j->seq)
        a->done_out_of_order++;
    a->done_next[j->key] = j->seq + 1;
    if (++a->ended == a->jobs) {
        a->t1 = uv_hrtime();
        rl_dispatch_stats s;
        if (rl_dispatch_stats_get(d, &s, NULL, 0, NULL) == 0)
            printf("stats in the last on_done: %zu lanes, %llu submitted, %llu refused, %llu done, "
                   "%llu lane changes "
                   "(longest %.3f ms)\n",
                   s.lanes, (unsigned long long)s.submitted, (unsigned long long)s.refused,
                   (unsigned long long)s.done, (unsigned long long)s.lane_changes,
                   (double)s.max_change_ns / 1e6);
        rl_dispatch_close(d, RL_DISPATCH_DRAIN, dispatcher_closed);
    }
}

/* Submits from the loop thread until the dispatcher refuses (RL_EAGAIN: a lane or max_jobs is
 * full), then waits for on_capacity. */
static void top_up(app *a)
{
    while (a->submitted < a->jobs) {
        job_rec *j = &a->recs[a->submitted];
        char key[32];
        int len = snprintf(key, sizeof key, "customer-%u", (unsigned)j->key);
        int rc = rl_dispatch_try_submit(a->d, key, (size_t)len, j, 0);
        if (rc == RL_EAGAIN) {
            a->refused++;
            return;
        }
        if (rc)
            die("rl_dispatch_try_submit", rc);
        a->submitted++;
    }
}

static void on_capacity(rl_dispatcher_t *d)
{
    app *a = rl_dispatch_get_data(d);
    a->capacity_calls++;
    top_up(a);
}

/* The lane changes, on the loop thread, each once its share of the jobs has been submitted. */
static void on_tick(uv_timer_t *t)
{
    app *a = t->data;
    if (a->changes >= N_CHANGES || !a->d)
        return;
    uint64_t due = (uint64_t)a->jobs * (uint64_t)(a->changes + 1) / (N_CHANGES + 1);
    if (a->submitted < due)
        return;
    const char *c = changes[a->changes++];
    int rc = c[0] == '+' ? rl_dispatch_add_lane(a->d, c + 1) : rl_dispatch_remove_lane(a->d, c + 1);
    rl_dispatch_stats s;
    rl_dispatch_stats_get(a->d, &s, NULL, 0, NULL);
    printf("%6u submitted, %6u ended: %s %s: %s%s%s (%zu lanes, %.3f ms)\n", a->submitted, a->ended,
           c[0] == '+' ? "add" : "remove", c + 1, rl_strerror(rc), rc ? ": " : "",
           rc ? rl_last_error_detail() : "", s.lanes, (double)s.last_change_ns / 1e6);
    if (rc)
        a->change_errors++;
}

static void on_watchdog(uv_timer_t *t)
{
    app *a = t->data;
    static char json[65536];
    if (a->d && rl_dispatch_stats_json(a->d, json, sizeof json, NULL) == 0)
        fprintf(stderr, "stats: %s\n", json);
    fprintf(stderr,
            "async_dispatch: stalled: %u of %u jobs submitted, %u ended after %d ms "
            "(%llu refusals, %llu on_capacity calls)\n",
            a->submitted, a->jobs, a->ended, WATCHDOG_MS, (unsigned long long)a->refused,
            (unsigned long long)a->capacity_calls);
    exit(1);
}

static void connected(uv_connect_t *req, int status)
{
    cconn *c = req->data;
    app *a = c->a;
    if (status)
        die_uv("connect", status);
    uv_tcp_nodelay(&c->tcp, 1);
    int rc = uv_read_start((uv_stream_t *)&c->tcp, client_alloc, client_read);
    if (rc)
        die_uv("client read", rc);
    if (++a->connected == CONNS) { /* every connection is up: start */
        a->t0 = uv_hrtime();
        uv_timer_start(&a->tick, on_tick, 1, 1);
        uv_timer_start(&a->watchdog, on_watchdog, WATCHDOG_MS, 0);
        top_up(a);
    }
}

/* Server and client agree if every key's requests arrived as 0, 1, 2, ... sent - 1. */
static uint64_t check_server(const app *a)
{
    uint64_t broken = 0;
    const arrivals *r = &a->arrived;
    for (uint32_t k = 0; k < KEYS; k++) {
        int ok = r->n[k] == a->sent[k];
        for (size_t i = 0; ok && i < r->n[k]; i++)
            ok = r->seq[k][i] == i;
        if (!ok && broken++ < 5) {
            printf("customer-%u: sent %u, the server received %zu:", (unsigned)k,
                   (unsigned)a->sent[k], r->n[k]);
            for (size_t i = 0; i < r->n[k] && i < 12; i++)
                printf(" %u", (unsigned)r->seq[k][i]);
            printf("%s\n", r->n[k] > 12 ? " ..." : "");
        }
    }
    return broken;
}

int main(int argc, char **argv)
{
    static app a;
    long jobs = argc > 1 ? strtol(argv[1], NULL, 10) : 20000;
    a.profile = argc > 2 ? argv[2] : NULL;
    if (jobs < 1 || jobs > 10000000 || argc > 3) {
        fprintf(stderr, "usage: async_dispatch [JOBS [PROFILE]]\n");
        return 2;
    }
    a.jobs = (uint32_t)jobs;
    a.loop = uv_default_loop();

    /* The jobs, fixed before the run: keys drawn with a fixed seed, numbered per key. */
    a.recs = xmalloc(a.jobs * sizeof *a.recs);
    uint32_t seed = 2024;
    for (uint32_t i = 0; i < a.jobs; i++) {
        seed = seed * 1103515245u + 12345u;
        uint32_t k = (seed >> 8) % KEYS;
        a.recs[i] = (job_rec){.key = k, .seq = a.sent[k]++};
    }

    /* The server, on its own thread: it answers each request DELAY_MS after it arrived and
     * calls record_arrival for it first. */
    delay_server_start(&a.srv, "async_dispatch", DELAY_MS, record_arrival, &a.arrived);

    char names[FIRST_LANES][16];
    const char *lanes[FIRST_LANES];
    for (int i = 0; i < FIRST_LANES; i++) {
        snprintf(names[i], sizeof names[i], "lane-%d", i);
        lanes[i] = names[i];
    }
    rl_ring_options ring;
    rl_ring_options_init(&ring);
    if (a.profile)
        ring.profile = a.profile;
    rl_dispatch_options opts;
    rl_dispatch_options_init(&opts);
    opts.lanes = lanes;
    opts.lane_count = FIRST_LANES;
    opts.ring = &ring;
    opts.async_handler = start_request; /* on the loop thread; no worker threads */
    opts.on_done = job_done;
    opts.on_capacity = on_capacity;
    opts.data = &a;
    opts.lane_capacity = 64;
    opts.max_jobs = 2048;
    int rc = rl_dispatch_init(a.loop, &opts, &a.d);
    if (rc) {
        fprintf(stderr, "async_dispatch: rl_dispatch_init: %s: %s\n", rl_strerror(rc),
                rl_last_error_detail());
        exit(1);
    }

    uv_timer_init(a.loop, &a.tick);
    uv_timer_init(a.loop, &a.watchdog);
    a.tick.data = a.watchdog.data = &a;
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", delay_server_port(&a.srv), &addr);
    for (int i = 0; i < CONNS; i++) {
        cconn *c = &a.conns[i];
        c->a = &a;
        uv_tcp_init(a.loop, &c->tcp);
        c->tcp.data = c;
        c->connect.data = c;
        if ((rc = uv_tcp_connect(&c->connect, &c->tcp, (const struct sockaddr *)&addr, connected)))
            die_uv("connect", rc);
    }

    uv_run(a.loop, UV_RUN_DEFAULT); /* until the dispatcher and the connections have closed */
    delay_server_stop(&a.srv);
    uv_loop_close(a.loop);

    uint64_t broken = check_server(&a);
    int bad = broken || a.overlaps || a.done_out_of_order || a.not_done || a.stale ||
              a.change_errors || a.ended != a.jobs || a.srv.requests != a.jobs;
    double secs = (double)(a.t1 - a.t0) / 1e9;
    printf("async_dispatch: %u jobs, %d keys, %d lane changes (%d failed), profile %s, %d "
           "connections: %.3f s, %.0f jobs/s\n",
           a.ended, KEYS, a.changes, a.change_errors, a.profile ? a.profile : "default", CONNS,
           secs, secs > 0 ? a.ended / secs : 0.0);
    printf("order check: server received %llu requests; %llu keys out of order or incomplete, "
           "%llu overlapping jobs, %llu on_done out of order, %llu not done, %llu stale "
           "replies, %llu replies pending: %s\n",
           (unsigned long long)a.srv.requests, (unsigned long long)broken,
           (unsigned long long)a.overlaps, (unsigned long long)a.done_out_of_order,
           (unsigned long long)a.not_done, (unsigned long long)a.stale,
           (unsigned long long)a.srv.replies_pending, bad ? "FAILED" : "ok");
    for (int k = 0; k < KEYS; k++)
        free(a.arrived.seq[k]);
    free(a.recs);
    return bad ? 1 : 0;
}
