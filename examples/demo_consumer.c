/* SPDX-License-Identifier: BSD-2-Clause */
/* A demo consumer: ringlane's consumer and its dispatcher on a libuv loop of their own thread.
 * The main thread talks to it through an async handle (lane changes, statistics, close). */
#define _POSIX_C_SOURCE 200809L
#include "demo.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int handle_event(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)attempt;
    demo_consumer *dc = rl_consumer_get_data(c);
    demo *app = dc->app;
    /* The assignment this message belongs to, read before the work (see demo_record). */
    bool in_range = m->partition >= 0 && m->partition < DEMO_PARTITIONS_MAX;
    unsigned gen = in_range ? atomic_load(&app->check.part_gen[m->partition]) : 0;
    uint64_t start = demo_now_ns(); /* the H line's last field: when the handling began */
    int rc = demo_check_message(&app->check, m);
    if (rc == 0 && app->record_fd >= 0) {
        char key[72];
        long long seq;
        demo_record_key(m, key, sizeof key, &seq);
        demo_record(app, "H %" PRIu64 " %s %lld %d %" PRId64 " %u %" PRIu64, demo_now_ns(), key,
                    seq, (int)m->partition, m->offset, gen, start);
    }
    return rc;
}

/* Writes the commits the group acknowledged since the last call (C), and the refused ones'
 * count when it grew (F). Loop thread. */
static void record_commits(demo_consumer *dc)
{
    if (dc->app->record_fd < 0 || !dc->c)
        return;
    rl_consumer_stats s;
    rl_consumer_partition_stats parts[DEMO_PARTITIONS_MAX];
    size_t n = 0;
    if (rl_consumer_stats_get(dc->c, &s, parts, DEMO_PARTITIONS_MAX, &n) != 0)
        return;
    uint64_t now = demo_now_ns();
    for (size_t i = 0; i < n && i < DEMO_PARTITIONS_MAX; i++) {
        int32_t p = parts[i].partition;
        if (p < 0 || p >= DEMO_PARTITIONS_MAX || strcmp(parts[i].topic, dc->app->topic) != 0)
            continue;
        if (parts[i].committed >= 0 && parts[i].committed > dc->recorded_commit[p]) {
            dc->recorded_commit[p] = parts[i].committed;
            demo_record(dc->app, "C %" PRIu64 " %d %" PRId64, now, (int)p, parts[i].committed);
        }
    }
    if (s.commit_failures > dc->recorded_failures) {
        dc->recorded_failures = s.commit_failures;
        demo_record(dc->app, "F %" PRIu64 " %" PRIu64, now, s.commit_failures);
    }
}

static void on_record_timer(uv_timer_t *t)
{
    record_commits(t->data);
}

static void on_rebalance(rl_consumer_t *c, int event, const rd_kafka_topic_partition_list_t *l)
{
    demo_consumer *dc = rl_consumer_get_data(c);
    demo *app = dc->app;
    /* A revoke has made its final commit by now: write it before the partitions go. */
    if (event != RL_CONSUMER_ASSIGNED)
        record_commits(dc);
    uint64_t now = demo_now_ns();
    uv_mutex_lock(&app->mu);
    for (int i = 0; i < l->cnt; i++) {
        int32_t p = l->elems[i].partition;
        if (p < 0 || p >= DEMO_PARTITIONS_MAX || strcmp(l->elems[i].topic, app->topic) != 0)
            continue;
        if (event == RL_CONSUMER_ASSIGNED) {
            app->owner[p] = dc->index;
            unsigned gen = atomic_fetch_add(&app->check.part_gen[p], 1) + 1;
            dc->recorded_commit[p] = -1; /* the consumer's committed offset starts again */
            demo_record(app, "A %" PRIu64 " %d %u", now, (int)p, gen);
        } else {
            if (app->owner[p] == dc->index)
                app->owner[p] = -1;
            demo_record(app, "%c %" PRIu64 " %d", event == RL_CONSUMER_LOST ? 'L' : 'R', now,
                        (int)p);
        }
    }
    uv_mutex_unlock(&app->mu);
    uv_mutex_lock(&dc->mu);
    dc->assigned += event == RL_CONSUMER_ASSIGNED ? l->cnt : -l->cnt;
    uv_mutex_unlock(&dc->mu);
}

static void on_dead_letter(rl_consumer_t *c, const rd_kafka_message_t *m, const char *reason)
{
    (void)reason;
    demo_consumer *dc = rl_consumer_get_data(c);
    if (dc->app->record_fd >= 0) {
        char key[72];
        long long seq;
        demo_record_key(m, key, sizeof key, &seq);
        demo_record(dc->app, "D %" PRIu64 " %s %lld %d %" PRId64, demo_now_ns(), key, seq,
                    (int)m->partition, m->offset);
    }
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
        if (dc->record_timer_on) {
            record_commits(dc);
            uv_close((uv_handle_t *)&dc->record_timer, NULL);
            dc->record_timer_on = false;
        }
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
    if (app->offset_map_max_bytes >= 0)
        o.offset_map_max_bytes = (uint32_t)app->offset_map_max_bytes;
    o.on_rebalance = on_rebalance;
    o.on_dead_letter = on_dead_letter;
    o.on_error = on_error;
    o.growth_fence = app->growth_fence;
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
    if (rc == 0 && app->record_fd >= 0 && uv_timer_init(&dc->loop, &dc->record_timer) == 0) {
        /* Commits are sampled from the statistics every 50 ms, and at every revoke. */
        dc->record_timer.data = dc;
        dc->record_timer_on = uv_timer_start(&dc->record_timer, on_record_timer, 50, 50) == 0;
        if (!dc->record_timer_on)
            uv_close((uv_handle_t *)&dc->record_timer, NULL);
    }
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
    if (strcmp(app->role, "consumer") == 0 && app->name)
        snprintf(dc->name, sizeof dc->name, "%s", app->name);
    else if (strcmp(app->role, "consumer") == 0) /* processes of one group, told apart */
        snprintf(dc->name, sizeof dc->name, "consumer-%ld", (long)getpid());
    else
        snprintf(dc->name, sizeof dc->name, "consumer-%d", index + 1);
    for (int p = 0; p < DEMO_PARTITIONS_MAX; p++)
        dc->recorded_commit[p] = -1;
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

void demo_consumer_describe(demo_consumer *dc, char *out, size_t cap)
{
    uv_mutex_lock(&dc->mu);
    snprintf(out, cap, "%s: %d partitions assigned, %ld errors%s%s", dc->name, dc->assigned,
             dc->errors, dc->errors ? ", the last: " : "", dc->errors ? dc->last_error : "");
    uv_mutex_unlock(&dc->mu);
}

int demo_consumer_assigned(demo_consumer *dc)
{
    uv_mutex_lock(&dc->mu);
    int n = dc->assigned;
    uv_mutex_unlock(&dc->mu);
    return n;
}
