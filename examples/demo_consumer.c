/* A demo consumer: ringlane's consumer and its dispatcher on a libuv loop of their own thread.
 * The main thread talks to it through an async handle (lane changes, statistics, close). */
#define _POSIX_C_SOURCE 200809L
#include "demo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int handle_event(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)attempt;
    demo_consumer *dc = rl_consumer_get_data(c);
    return demo_check_message(&dc->app->check, m);
}

static void on_rebalance(rl_consumer_t *c, int event, const rd_kafka_topic_partition_list_t *l)
{
    demo_consumer *dc = rl_consumer_get_data(c);
    demo *app = dc->app;
    uv_mutex_lock(&app->mu);
    for (int i = 0; i < l->cnt; i++) {
        int32_t p = l->elems[i].partition;
        if (p < 0 || p >= DEMO_PARTITIONS_MAX || strcmp(l->elems[i].topic, app->topic) != 0)
            continue;
        if (event == RL_CONSUMER_ASSIGNED) {
            app->owner[p] = dc->index;
            atomic_fetch_add(&app->check.part_gen[p], 1);
        } else if (app->owner[p] == dc->index) {
            app->owner[p] = -1;
        }
    }
    uv_mutex_unlock(&app->mu);
    uv_mutex_lock(&dc->mu);
    dc->assigned += event == RL_CONSUMER_ASSIGNED ? l->cnt : -l->cnt;
    uv_mutex_unlock(&dc->mu);
}

static void on_dead_letter(rl_consumer_t *c, const rd_kafka_message_t *m, const char *reason)
{
    (void)m;
    (void)reason;
    demo_consumer *dc = rl_consumer_get_data(c);
    uv_mutex_lock(&dc->mu);
    dc->dead_letters++;
    uv_mutex_unlock(&dc->mu);
}

static void on_error(rl_consumer_t *c, rd_kafka_resp_err_t err, const char *reason)
{
    demo_consumer *dc = rl_consumer_get_data(c);
    uv_mutex_lock(&dc->mu);
    dc->errors++;
    snprintf(dc->last_error, sizeof dc->last_error, "%s: %s", rd_kafka_err2name(err), reason);
    uv_mutex_unlock(&dc->mu);
    if (getenv("RINGLANE_DEMO_VERBOSE"))
        fprintf(stderr, "%s: %s: %s\n", dc->name, rd_kafka_err2name(err), reason);
}

static void on_closed(rl_consumer_t *c)
{
    demo_consumer *dc = rl_consumer_get_data(c);
    rl_consumer_stats_get(c, &dc->stats, NULL, 0, NULL);
}

static void on_ctl(uv_async_t *a)
{
    demo_consumer *dc = a->data;
    uv_mutex_lock(&dc->mu);
    int cmd = dc->cmd;
    uv_mutex_unlock(&dc->mu);
    if (cmd == DEMO_CMD_NONE)
        return;
    int rc = 0;
    rl_dispatcher_t *d = rl_consumer_dispatcher(dc->c);
    switch (cmd) {
    case DEMO_CMD_CLOSE:
        rc = rl_consumer_close(dc->c, on_closed);
        uv_close((uv_handle_t *)&dc->ctl, NULL);
        break;
    case DEMO_CMD_ADD_LANE:
        rc = rl_dispatch_add_lane(d, dc->arg);
        break;
    case DEMO_CMD_REMOVE_LANE:
        rc = rl_dispatch_remove_lane(d, dc->arg);
        break;
    case DEMO_CMD_STATS:
        rc = rl_consumer_stats_json(dc->c, dc->stats_json, sizeof dc->stats_json, NULL);
        rl_consumer_stats_get(dc->c, &dc->stats, NULL, 0, NULL);
        break;
    }
    uv_mutex_lock(&dc->mu);
    dc->cmd = DEMO_CMD_NONE;
    dc->cmd_rc = rc;
    dc->cmd_done = true;
    uv_cond_broadcast(&dc->cv);
    uv_mutex_unlock(&dc->mu);
}

static void run(void *arg)
{
    demo_consumer *dc = arg;
    demo *app = dc->app;
    rl_consumer_options o;
    rl_consumer_options_init(&o);
    const char *topics[] = {app->topic};
    o.conf = demo_consumer_conf(app);
    o.topics = topics;
    o.topic_count = 1;
    o.handler = handle_event;
    o.data = dc;
    o.dispatch.lanes = app->lane_names;
    o.dispatch.lane_count = (size_t)app->lanes;
    o.dispatch.max_attempts = 3;
    o.dispatch.backoff_ms = 5;
    o.dispatch.backoff_max_ms = 20;
    o.dlq_topic = app->dlq_topic;
    o.commit_interval_ms = 200;
    o.on_rebalance = on_rebalance;
    o.on_dead_letter = on_dead_letter;
    o.on_error = on_error;
    bool loop = uv_loop_init(&dc->loop) == 0;
    bool ctl = loop && uv_async_init(&dc->loop, &dc->ctl, on_ctl) == 0;
    dc->ctl.data = dc;
    int rc;
    if (ctl) {
        rc = rl_consumer_new(&dc->loop, &o, &dc->c);
    } else {
        rc = RL_ELOOP;
        rd_kafka_conf_destroy(o.conf);
    }
    uv_mutex_lock(&dc->mu);
    dc->start_rc = rc;
    dc->started = true;
    dc->running = rc == 0;
    uv_cond_broadcast(&dc->cv);
    uv_mutex_unlock(&dc->mu);
    if (rc && ctl)
        uv_close((uv_handle_t *)&dc->ctl, NULL);
    if (loop) {
        uv_run(&dc->loop, UV_RUN_DEFAULT);
        uv_loop_close(&dc->loop);
    }
}

int demo_consumer_start(demo_consumer *dc, demo *app, int index)
{
    memset(dc, 0, sizeof *dc);
    dc->app = app;
    dc->index = index;
    snprintf(dc->name, sizeof dc->name, "consumer-%d", index + 1);
    if (uv_mutex_init(&dc->mu) || uv_cond_init(&dc->cv))
        return RL_ELOOP;
    if (uv_thread_create(&dc->thread, run, dc) != 0)
        return RL_ELOOP;
    uv_mutex_lock(&dc->mu);
    while (!dc->started)
        uv_cond_wait(&dc->cv, &dc->mu);
    int rc = dc->start_rc;
    uv_mutex_unlock(&dc->mu);
    if (rc)
        uv_thread_join(&dc->thread);
    return rc;
}

int demo_consumer_command(demo_consumer *dc, int cmd, const char *arg)
{
    uv_mutex_lock(&dc->mu);
    if (!dc->running) {
        uv_mutex_unlock(&dc->mu);
        return RL_ECLOSED;
    }
    dc->cmd = cmd;
    dc->cmd_done = false;
    snprintf(dc->arg, sizeof dc->arg, "%s", arg ? arg : "");
    if (cmd == DEMO_CMD_CLOSE)
        dc->running = false;
    uv_mutex_unlock(&dc->mu);
    uv_async_send(&dc->ctl);
    uv_mutex_lock(&dc->mu);
    while (!dc->cmd_done)
        uv_cond_wait(&dc->cv, &dc->mu);
    int rc = dc->cmd_rc;
    uv_mutex_unlock(&dc->mu);
    return rc;
}

void demo_consumer_stop(demo_consumer *dc)
{
    if (demo_consumer_command(dc, DEMO_CMD_CLOSE, NULL) == 0)
        uv_thread_join(&dc->thread);
    uv_cond_destroy(&dc->cv);
    uv_mutex_destroy(&dc->mu);
}

int demo_consumer_assigned(demo_consumer *dc)
{
    uv_mutex_lock(&dc->mu);
    int n = dc->assigned;
    uv_mutex_unlock(&dc->mu);
    return n;
}
