/* SPDX-License-Identifier: BSD-2-Clause */
/* job_dispatch: in-process ordered job dispatch with ringlane's dispatcher.
 *
 * A producer thread submits jobs for 200 customers ("orders" numbered per customer); three
 * lanes process them, one worker each. A fourth lane is added a third of the way through and
 * one of the first lanes is removed at two thirds, while jobs keep flowing. At the end the
 * program prints the dispatcher's statistics and an order check: every customer's orders were
 * handled one at a time, in the order they were submitted, each exactly once.
 *
 *   build/examples/job_dispatch [JOBS]
 */
#define _POSIX_C_SOURCE 200809L
#include <ringlane/dispatcher.h>
#include <ringlane/error.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

#define CUSTOMERS 200

typedef struct order {
    int customer;
    int number; /* 0, 1, 2, ... per customer */
} order;

typedef struct app {
    uv_loop_t *loop;
    rl_dispatcher_t *d;
    uv_timer_t timer;
    int jobs;
    atomic_int submitted;
    int next_order[CUSTOMERS];  /* checked and advanced by the handlers */
    atomic_int busy[CUSTOMERS]; /* a customer's order is in a handler */
    atomic_int out_of_order, overlaps;
    int handled[CUSTOMERS]; /* on the loop thread, from on_done */
    int sent[CUSTOMERS];    /* by the producer */
    int ended, changes;
} app;

static int handle_order(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    app *a = rl_dispatch_get_data(d);
    order *o = job->data;
    if (atomic_exchange(&a->busy[o->customer], 1))
        atomic_fetch_add(&a->overlaps, 1);
    if (a->next_order[o->customer] != o->number)
        atomic_fetch_add(&a->out_of_order, 1);
    a->next_order[o->customer] = o->number + 1;
    volatile unsigned x = 0; /* a little work */
    for (int i = 0; i < 200; i++)
        x = x + (unsigned)i;
    (void)x;
    atomic_store(&a->busy[o->customer], 0);
    return 0;
}

static void order_done(rl_dispatcher_t *d, rl_dispatch_job *job, int outcome)
{
    app *a = rl_dispatch_get_data(d);
    order *o = job->data;
    if (outcome == RL_DISPATCH_DONE)
        a->handled[o->customer]++;
    a->ended++;
    free(o);
}

static void produce(void *arg)
{
    app *a = arg;
    unsigned seed = 12345;
    for (int i = 0; i < a->jobs; i++) {
        seed = seed * 1103515245u + 12345u;
        order *o = malloc(sizeof *o);
        if (!o)
            abort();
        int customer = (int)((seed >> 8) % CUSTOMERS);
        o->customer = customer;
        o->number = a->sent[customer];
        char key[32];
        int len = snprintf(key, sizeof key, "customer-%d", customer);
        /* Waits while the customer's lane is full. Once accepted, the order belongs to the
         * dispatcher until on_done (which frees it): do not touch it here any more. */
        int rc = rl_dispatch_submit(a->d, key, (size_t)len, o, 0, -1);
        if (rc) {
            fprintf(stderr, "submit: %s\n", rl_strerror(rc));
            exit(1);
        }
        a->sent[customer]++;
        atomic_fetch_add(&a->submitted, 1);
    }
}

static void on_closed(rl_dispatcher_t *d)
{
    (void)d;
    puts("dispatcher closed");
}

/* On the loop thread: lane changes mid-run, and the close at the end. */
static void on_tick(uv_timer_t *t)
{
    app *a = t->data;
    int n = atomic_load(&a->submitted);
    if (a->changes == 0 && n >= a->jobs / 3) {
        int rc = rl_dispatch_add_lane(a->d, "lane-d");
        printf("%6d submitted: add lane-d: %s%s%s\n", n, rl_strerror(rc), rc ? ": " : "",
               rl_last_error_detail());
        a->changes++;
    } else if (a->changes == 1 && n >= 2 * a->jobs / 3) {
        int rc = rl_dispatch_remove_lane(a->d, "lane-a");
        printf("%6d submitted: remove lane-a: %s%s%s\n", n, rl_strerror(rc), rc ? ": " : "",
               rl_last_error_detail());
        a->changes++;
    } else if (a->changes == 2 && n == a->jobs) {
        char json[4096];
        if (rl_dispatch_stats_json(a->d, json, sizeof json, NULL) == 0)
            printf("stats: %s\n", json);
        rl_dispatch_close(a->d, RL_DISPATCH_DRAIN, on_closed);
        uv_close((uv_handle_t *)t, NULL);
        a->changes++;
    }
}

int main(int argc, char **argv)
{
    static app a;
    a.jobs = argc > 1 ? atoi(argv[1]) : 100000;
    if (a.jobs < 3) {
        fprintf(stderr, "usage: job_dispatch [JOBS >= 3]\n");
        return 2;
    }
    a.loop = uv_default_loop();

    const char *lanes[] = {"lane-a", "lane-b", "lane-c"};
    rl_dispatch_options opts;
    rl_dispatch_options_init(&opts);
    opts.lanes = lanes;
    opts.lane_count = 3;
    opts.handler = handle_order;
    opts.on_done = order_done;
    opts.data = &a;
    opts.lane_capacity = 256;
    int rc = rl_dispatch_init(a.loop, &opts, &a.d);
    if (rc) {
        fprintf(stderr, "rl_dispatch_init: %s: %s\n", rl_strerror(rc), rl_last_error_detail());
        return 1;
    }
    uv_timer_init(a.loop, &a.timer);
    a.timer.data = &a;
    uv_timer_start(&a.timer, on_tick, 1, 1);

    uv_thread_t producer;
    uv_thread_create(&producer, produce, &a);
    uv_run(a.loop, UV_RUN_DEFAULT);
    uv_thread_join(&producer);
    uv_loop_close(a.loop);

    int lost = 0;
    for (int c = 0; c < CUSTOMERS; c++)
        if (a.handled[c] != a.sent[c] || a.next_order[c] != a.sent[c])
            lost++;
    int bad = atomic_load(&a.out_of_order) + atomic_load(&a.overlaps) + lost;
    printf("order check: %d jobs for %d customers, %d lane changes: %d out of order, "
           "%d overlapping, %d customers with lost or repeated orders: %s\n",
           a.ended, CUSTOMERS, a.changes - 1, atomic_load(&a.out_of_order),
           atomic_load(&a.overlaps), lost, bad ? "FAILED" : "ok");
    return bad ? 1 : 0;
}
