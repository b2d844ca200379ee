/* SPDX-License-Identifier: BSD-2-Clause */
/* The consumer's life on the loop: making it, waking up when librdkafka has something, polling
 * in bounded batches, the periodic tick, and closing. */
#include "consumer_internal.h"
#include "error_detail_internal.h"
#include "growth_record.h"
#include "ringlane/profile.h"
#include "stats_options.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TICK_MS 100 /* the safety-net poll, commits, dead-letter retries, paused partitions */

void rl_consumer_options_init(rl_consumer_options *opts)
{
    if (!opts)
        return;
    memset(opts, 0, sizeof *opts);
    rl_dispatch_options_init(&opts->dispatch);
    /* Deeper lanes and more kept messages than a bare dispatcher needs: pausing a partition
     * drops what librdkafka prefetched for it, and the refetch after the resume leaves the
     * lanes idle unless they hold enough to cover it (bench_consumer: with 1,024 and 2,048 the
     * consumer paused ~30 times in 200,000 messages and ran at 0.4-0.7x a single-threaded
     * consumer with 5 us handlers; with these, no pause and 1.1-1.2x). */
    opts->dispatch.lane_capacity = 8192;
    opts->null_key = RL_CONSUMER_NULL_KEY_PARTITION;
    opts->max_key_len = 4096;
    opts->window = 65536;
    opts->pending_max = 16384;
    opts->poll_batch = 500;
    opts->revoke_timeout_ms = 30000;
    opts->first_assignment_timeout_ms = 5000;
    opts->commit_interval_ms = 1000;
    opts->dlq_retry_ms = 1000;
    opts->stats_lanes = RL_DISPATCH_STATS_LANES;
    opts->offset_map_max_bytes = 4096; /* Kafka's offset.metadata.max.bytes */
    opts->growth_reread_ms = 15000;
    opts->growth_read_timeout_ms = 10000;
    opts->growth_stall_ms = 600000;
}

void *rl_consumer_get_data(const rl_consumer_t *c)
{
    return c ? c->opts.data : NULL;
}

rl_dispatcher_t *rl_consumer_dispatcher(rl_consumer_t *c)
{
    return c ? c->d : NULL;
}

rd_kafka_t *rl_consumer_kafka(rl_consumer_t *c)
{
    return c ? c->rk : NULL;
}

bool rl__consumer_on_loop(const rl_consumer_t *c)
{
    uv_thread_t self = uv_thread_self();
    return uv_thread_equal(&self, &c->loop_thread) != 0;
}

uint64_t rl__now_ms(void)
{
    return uv_hrtime() / 1000000u;
}

void rl__consumer_error(rl_consumer_t *c, rd_kafka_resp_err_t err, const char *fmt, ...)
{
    if (!c->opts.on_error)
        return;
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    c->opts.on_error(c, err, text);
}

static void on_kafka_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    (void)rk;
    rl__consumer_error(opaque, (rd_kafka_resp_err_t)err, "%s", reason);
}

/* On a librdkafka thread, when one of our queues turns non-empty: only wake the loop. */
void rl__wake_cb(rd_kafka_t *rk, void *opaque);
void rl__wake_cb(rd_kafka_t *rk, void *opaque)
{
    (void)rk;
    rl_consumer_t *c = opaque;
    uv_mutex_lock(&c->wake_mu);
    if (c->wake_alive)
        uv_async_send(&c->wake);
    uv_mutex_unlock(&c->wake_mu);
}

/* --- closing --- */

static void on_handle_closed(uv_handle_t *h)
{
    rl_consumer_t *c = h->data;
    if (--c->handles_open > 0)
        return;
    if (c->close_cb)
        c->close_cb(c);
    uv_mutex_destroy(&c->wake_mu);
    rl__map_free(c);
    rl__consumer_stats_free(c);
    free((void *)c->opts.dlq_topic);
    free(c);
}

/* Everything librdkafka had is gone and every job has ended: free the rest. */
static void finish(rl_consumer_t *c)
{
    rl__dlq_close(c, c->opts.revoke_timeout_ms);
    uv_mutex_lock(&c->wake_mu);
    c->wake_alive = false;
    uv_mutex_unlock(&c->wake_mu);
    if (c->q) {
        rd_kafka_queue_cb_event_enable(c->q, NULL, NULL);
        rd_kafka_queue_destroy(c->q);
        c->q = NULL;
    }
    if (c->rk) {
        if (!c->keep_kafka) /* see may_leave */
            rd_kafka_destroy(c->rk);
        c->rk = NULL;
    }
    if (!c->keep_kafka)
        rl__group_watch_free(c); /* else librdkafka's threads may still use it */
    rl__growth_fence_free(c);
    rl__revoke_free(c);
    rl__topics_free(c);
    uv_close((uv_handle_t *)&c->wake, on_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
    uv_close((uv_handle_t *)&c->revoke_timer, on_handle_closed);
    uv_close((uv_handle_t *)&c->rate_timer, on_handle_closed);
}

static void on_dispatcher_closed(rl_dispatcher_t *d)
{
    rl_consumer_t *c = rl_dispatch_get_data(d);
    c->d = NULL;
    finish(c);
}

/* At most this many messages are dropped by one poll of a closing consumer's queue (a full
 * fetch queue is queued.min.messages, 100,000 by default). */
#define LEAVE_POLL_MAX 1000000

/* A closing consumer serves everything librdkafka queued (its rebalance callbacks among it)
 * and drops the messages (closing: never dispatched, read again by the partitions' next
 * owner). */
static void serve_queued(rl_consumer_t *c)
{
    rd_kafka_message_t *m;
    for (int i = 0; i < LEAVE_POLL_MAX && (m = rd_kafka_consumer_poll(c->rk, 0)); i++)
        rl__on_message(c, m);
}

/* Hands the partitions back (the rebalance callback revokes them, committing the watermarks)
 * and leaves the group, without blocking the loop: librdkafka posts the steps on our queue.
 * The close's commit may take a while, and the group may start rebalancing meanwhile (another
 * member left: its Heartbeat answer makes librdkafka queue a revoke). That revoke is served
 * before the close request goes in: librdkafka 2.0.2 closing an eager consumer with a revoke
 * still queued unassigns by itself and ends its group while the revoke is still to be served
 * (see left_group in rebalance.c). For the same reason the close request waits while a
 * revoke of asynchronous handlers is deferred (librdkafka waits for its unassign call). */
static void start_leaving(rl_consumer_t *c)
{
    for (uint32_t i = 0; i < c->ntopics; i++)
        for (int32_t k = 0; k < c->topics[i]->nparts; k++)
            if (c->topics[i]->parts[k]) {
                rl__msgq_clear(&c->topics[i]->parts[k]->pending);
                rl__growth_fence_drop(c, c->topics[i]->parts[k]);
            }
    rl__commit_before_leaving(c);
    serve_queued(c);
    if (c->revoke.active)
        return; /* its end wakes the loop, and serve() comes back here */
    c->leaving = true;
    c->leave_mark = rl__group_leaves(c);
    rd_kafka_error_t *error = rd_kafka_consumer_close_queue(c->rk, c->q);
    if (error) {
        rl__consumer_error(c, rd_kafka_error_code(error), "close: %s",
                           rd_kafka_error_string(error));
        rd_kafka_error_destroy(error);
        c->kafka_closed = true;
    }
}

/* librdkafka before 2.3.0 aborts in rd_kafka_destroy ("Assertion `assignor_state' failed",
 * librdkafka issue 4312, fixed in 2.3.0) when a cooperative-sticky consumer is destroyed after
 * the group answered its JoinGroup (the assignor is chosen) and before the first SyncGroup
 * answer (which makes the assignor's state); closing it first does not help, and once closing,
 * librdkafka ignores JoinGroup and SyncGroup answers, so the state can no longer come. A close
 * before the first assignment therefore waits for it, serving the queue, up to
 * first_assignment_timeout_ms (a bound of its own: a cluster that cannot be reached never
 * answers, and a Ctrl-C at start-up should not wait a revoke's 30 s). serve() asks only after
 * a poll, so an assignment that arrives with the deadline is taken, and leaving is safe. When
 * none came: a group that never answered a join has chosen no assignor, and leaving is safe
 * (the one window left is a JoinGroup answer that librdkafka takes between this check and the
 * close request right after it); otherwise the librdkafka handle is left undestroyed (a leak,
 * not an abort), and on_error says so. An assignment librdkafka takes in that same window is
 * served after the close request (assign_late in rebalance.c). tests/test_consumer_close.c
 * closes in the window on the mock cluster, before any answer, and as the assignment comes. */
static bool may_leave(rl_consumer_t *c)
{
    if (!c->coop_destroy_hazard || c->assigned_once)
        return true;
    if (rl__now_ms() < c->leave_deadline_ms)
        return false;
    const char *protocol = rd_kafka_rebalance_protocol(c->rk);
    if (!protocol || strcmp(protocol, "NONE") != 0) {
        c->keep_kafka = true;
        rl__consumer_error(c, RD_KAFKA_RESP_ERR__STATE,
                           "close: no first assignment within %u ms; librdkafka %s would abort "
                           "in rd_kafka_destroy (librdkafka issue 4312, fixed in 2.3.0), so its "
                           "consumer handle is left undestroyed",
                           (unsigned)c->opts.first_assignment_timeout_ms, rd_kafka_version_str());
    }
    return true;
}

static void serve(rl_consumer_t *c)
{
    if (c->serving || c->kafka_closed)
        return;
    c->serving = true;
    if (c->fence && !c->closing)
        rl__growth_fence_poll(c, false);
    uint32_t i = 0;
    rd_kafka_message_t *m;
    rl__fetch_restart_before_poll(c);
    while (i < c->opts.poll_batch && (m = rd_kafka_consumer_poll(c->rk, 0))) {
        rl__on_message(c, m);
        i++;
    }
    bool more = i == c->opts.poll_batch; /* the queue's wake-up only comes when it was empty */
    rl__fetch_restart_after_poll(c, !more);
    /* Only after the whole queue is served: an assignment librdkafka queued before now is
     * served before the close request, so it reaches the group as an assign call and not after
     * its close began (see may_leave, and assign_late in rebalance.c for one that comes all the
     * same). */
    if (c->closing && !c->leaving)
        serve_queued(c);
    if (c->closing && !c->leaving && !c->revoke.active && may_leave(c) &&
        rl__drained_for_leaving(c))
        start_leaving(c);
    /* kafka_stuck: librdkafka's close will never finish (assign_late). */
    if (c->leaving && !c->kafka_closed && (c->kafka_stuck || rd_kafka_consumer_closed(c->rk)))
        c->kafka_closed = true;
    if (c->dlq)
        rd_kafka_poll(c->dlq, 0);
    c->serving = false;
    if (c->kafka_closed) {
        if (rl_dispatch_close(c->d, RL_DISPATCH_STOP, on_dispatcher_closed) != 0)
            on_dispatcher_closed(c->d); /* not reached: only closed here */
    } else if (more) {
        uv_async_send(&c->wake);
    }
}

static void on_wake(uv_async_t *a)
{
    serve(a->data);
}

static void on_tick(uv_timer_t *t)
{
    rl_consumer_t *c = t->data;
    serve(c);
    if (c->closing)
        return;
    if (c->map_read)
        rl__commit_maps(c);
    else
        rl__store_watermarks(c);
    rl__dlq_retry(c);
    if (c->fence)
        rl__growth_fence_poll(c, true);
    rl__drain_all_pending(c); /* in case the lanes made room without telling */
}

int rl_consumer_complete(rl_consumer_t *c, uint64_t ticket, int status)
{
    if (!c || !ticket)
        return RL_EINVAL;
    if (!c->async)
        return RL_ESTATE;
    /* Revoked, lost and timed-out attempts were ended by the consumer or the dispatcher: their
     * tickets answer RL_ESTALE there. */
    return rl_dispatch_complete(c->d_for_complete, ticket, status);
}

int rl_consumer_complete_batch(rl_consumer_t *c, uint64_t ticket, const int *status, size_t n)
{
    if (!c || !ticket || !status || !n)
        return RL_EINVAL;
    if (!c->async)
        return RL_ESTATE;
    return rl_dispatch_complete_batch(c->d_for_complete, ticket, status, n);
}

int rl_consumer_close(rl_consumer_t *c, rl_consumer_close_cb cb)
{
    if (!c)
        return RL_EINVAL;
    if (!rl__consumer_on_loop(c))
        return RL_ESTATE;
    if (c->closing)
        return RL_ECLOSED;
    c->closing = true;
    c->close_cb = cb;
    c->leave_deadline_ms = rl__now_ms() + c->opts.first_assignment_timeout_ms;
    uv_async_send(&c->wake); /* the work starts outside any callback of ours */
    return 0;
}

/* --- making one --- */

/* The growth fence's options: bounds, and a profile that can be fenced at all. */
static int check_growth(const rl_consumer_options *o)
{
    if (o->growth_reread_ms < 100 || o->growth_reread_ms > 30000)
        return rl_error_detail_set(RL_EINVAL,
                                   "growth_reread_ms %u: must be 100..30000 (15000): `ringlane "
                                   "grow` lets producers route over a grown count 30 s after "
                                   "the announce at the earliest, and every consumer must have "
                                   "read it by then",
                                   o->growth_reread_ms);
    if (o->growth_read_timeout_ms < 1000 || o->growth_read_timeout_ms > 600000)
        return rl_error_detail_set(RL_EINVAL,
                                   "growth_read_timeout_ms %u: must be 1000..600000 (10000): a "
                                   "read starts a fetch from the beginning of the records",
                                   o->growth_read_timeout_ms);
    if (o->growth_stall_ms && (o->growth_stall_ms < 1000 || o->growth_stall_ms > 86400000))
        return rl_error_detail_set(RL_EINVAL,
                                   "growth_stall_ms %u: must be 0 (never) or 1000..86400000 "
                                   "(600000: 10 minutes)",
                                   o->growth_stall_ms);
    const char *name = o->growth_profile ? o->growth_profile : RL_CONSUMER_GROWTH_PROFILE;
    const rl_profile_info *info = rl_profile_find(name);
    if (!info)
        return rl_error_detail_set(RL_EPROFILE, "growth_profile \"%.64s\": no such profile", name);
    if (!info->local_add)
        return rl_error_detail_set(RL_ENOTSUP,
                                   "growth_profile \"%s\": its rings move keys between old "
                                   "partitions when a topic grows (no local_add), so no fence "
                                   "can keep their order",
                                   info->name);
    uint64_t fp;
    int rc = rl__growth_ring_fingerprint(
        info->name,
        rl__growth_record_vnodes(info->name,
                                 o->growth_vnodes ? o->growth_vnodes : RL_VNODES_PROFILE),
        1, &fp);
    if (rc)
        return rl_error_detail_set(rc, "growth_vnodes %u: profile \"%s\" builds no ring with it",
                                   o->growth_vnodes, info->name);
    return 0;
}

static int check_options(const rl_consumer_options *o)
{
    if (!o->conf)
        return rl_error_detail_set(RL_EINVAL, "conf NULL: the consumer needs its librdkafka "
                                              "configuration (bootstrap.servers, group.id)");
    if (o->dlq_conf == o->conf)
        return rl_error_detail_set(RL_EINVAL, "dlq_conf is conf: both are taken over; give the "
                                              "dead-letter producer a configuration of its own, "
                                              "or NULL for a copy of conf");
    if (!o->topics)
        return rl_error_detail_set(RL_EINVAL, "topics NULL: subscribe to at least one topic");
    if (!o->topic_count)
        return rl_error_detail_set(RL_EINVAL, "topic_count 0: subscribe to at least one topic");
    for (size_t i = 0; i < o->topic_count; i++)
        if (!o->topics[i] || !*o->topics[i])
            return rl_error_detail_set(RL_EINVAL, "topics[%zu] %s: a topic needs a name", i,
                                       o->topics[i] ? "\"\"" : "NULL");
    int handlers =
        !!o->handler + !!o->async_handler + !!o->batch_handler + !!o->async_batch_handler;
    if (!handlers)
        return rl_error_detail_set(RL_EINVAL, "handler and async_handler NULL: give exactly one "
                                              "(handler blocks on a lane worker, async_handler "
                                              "starts the work on the loop; batch_handler and "
                                              "async_batch_handler take batches)");
    if (o->handler && o->async_handler)
        return rl_error_detail_set(RL_EINVAL,
                                   "handler and async_handler both set: give exactly one");
    if (handlers > 1)
        return rl_error_detail_set(RL_EINVAL, "%s and %s both set: give exactly one handler",
                                   o->handler         ? "handler"
                                   : o->async_handler ? "async_handler"
                                                      : "batch_handler",
                                   o->async_batch_handler ? "async_batch_handler"
                                                          : "batch_handler");
    const rl_dispatch_options *d = &o->dispatch;
    const char *own = d->handler               ? "handler"
                      : d->async_handler       ? "async_handler"
                      : d->batch_handler       ? "batch_handler"
                      : d->async_batch_handler ? "async_batch_handler"
                      : d->on_done             ? "on_done"
                      : d->on_capacity         ? "on_capacity"
                      : d->data                ? "data"
                      : d->on_stats            ? "on_stats"
                      : d->stats_full          ? "stats_full"
                                               : NULL;
    if (own)
        return rl_error_detail_set(RL_EINVAL,
                                   "dispatch.%s set: the consumer's own (give handler or "
                                   "async_handler, and data, in the consumer's options)",
                                   own);
    if (d->stats_interval_ms)
        return rl_error_detail_set(RL_EINVAL,
                                   "dispatch.stats_interval_ms %" PRId64 " set: the consumer's "
                                   "own (set stats_interval_ms and on_stats in the consumer's "
                                   "options: its statistics include the dispatcher's)",
                                   d->stats_interval_ms);
    int stats_rc = rl__stats_options_check(o->stats_interval_ms, o->on_stats != NULL,
                                           o->stats_lanes, "rl_consumer_stats_json's text");
    if (stats_rc)
        return stats_rc;
    if (d->max_rate != 0 || d->max_burst)
        return rl_error_detail_set(RL_EINVAL,
                                   d->max_rate != 0 ? "dispatch.max_rate %g: the consumer limits "
                                                      "its intake itself (it pauses partitions): "
                                                      "set max_rate and max_burst in the "
                                                      "consumer's options"
                                                    : "dispatch.max_burst %g: the consumer limits "
                                                      "its intake itself (it pauses partitions): "
                                                      "set max_rate and max_burst in the "
                                                      "consumer's options",
                                   d->max_rate != 0 ? d->max_rate : (double)d->max_burst);
    int rate_rc = rl__rate_check(o->max_rate, o->max_burst, "max_rate", "max_burst", "messages");
    if (rate_rc)
        return rate_rc;
    if (o->async_handler && d->workers)
        return rl_error_detail_set(RL_EINVAL,
                                   "dispatch.workers %u with async_handler: workers are for "
                                   "blocking handlers; an asynchronous lane needs no thread",
                                   d->workers);
    if (o->handler && d->job_timeout_ms)
        return rl_error_detail_set(RL_EINVAL,
                                   "dispatch.job_timeout_ms %u with handler: the time limit is "
                                   "for async_handler (a blocking call cannot be cut short)",
                                   d->job_timeout_ms);
    /* Lanes NULL with a count are named for you (by the dispatcher); neither is the default of
     * an asynchronous consumer only. */
    if (o->handler && !d->lanes && !d->lane_count)
        return rl_error_detail_set(RL_EINVAL,
                                   "dispatch.lanes NULL with dispatch.lane_count 0: a blocking "
                                   "handler needs lanes (a thread each, or dispatch.workers): "
                                   "set dispatch.lane_count, or dispatch.lanes");
    if (o->null_key != RL_CONSUMER_NULL_KEY_PARTITION &&
        o->null_key != RL_CONSUMER_NULL_KEY_DEAD_LETTER)
        return rl_error_detail_set(RL_EINVAL,
                                   "null_key %d: not a policy (RL_CONSUMER_NULL_KEY_PARTITION %d "
                                   "or RL_CONSUMER_NULL_KEY_DEAD_LETTER %d)",
                                   o->null_key, RL_CONSUMER_NULL_KEY_PARTITION,
                                   RL_CONSUMER_NULL_KEY_DEAD_LETTER);
    static const char *const range = "1..4294967295";
    const char *zero = !o->max_key_len          ? "max_key_len"
                       : !o->window             ? "window"
                       : !o->pending_max        ? "pending_max"
                       : !o->poll_batch         ? "poll_batch"
                       : !o->revoke_timeout_ms  ? "revoke_timeout_ms"
                       : !o->commit_interval_ms ? "commit_interval_ms"
                       : !o->dlq_retry_ms       ? "dlq_retry_ms"
                                                : NULL;
    if (zero)
        return rl_error_detail_set(RL_EINVAL, "%s 0: must be %s", zero,
                                   strcmp(zero, "window") == 0 ? "1..16777216" : range);
    if (o->window > (1u << 24))
        return rl_error_detail_set(
            RL_EINVAL, "window %u: over 16777216 offsets in flight per partition", o->window);
    if (o->offset_map_max_bytes && (o->offset_map_max_bytes < RL__OFFSET_MAP_MIN_BYTES ||
                                    o->offset_map_max_bytes > RL__OFFSET_MAP_MAX_BYTES))
        return rl_error_detail_set(
            RL_EINVAL,
            o->offset_map_max_bytes < RL__OFFSET_MAP_MIN_BYTES
                ? "offset_map_max_bytes %u: a map needs at least %u bytes (0 turns the offset "
                  "map off)"
                : "offset_map_max_bytes %u: over %u, the longest metadata a commit can carry "
                  "(Kafka's protocol writes its length in 16 bits)",
            o->offset_map_max_bytes,
            o->offset_map_max_bytes < RL__OFFSET_MAP_MIN_BYTES ? RL__OFFSET_MAP_MIN_BYTES
                                                               : RL__OFFSET_MAP_MAX_BYTES);
    if (!o->first_assignment_timeout_ms)
        return rl_error_detail_set(RL_EINVAL,
                                   "first_assignment_timeout_ms 0: a close before the first "
                                   "assignment must wait at least 1 ms for it (default 5000)");
    if (o->growth_fence) {
        int rc = check_growth(o);
        if (rc)
            return rc;
    }
    char group[8];
    size_t size = sizeof group;
    rd_kafka_conf_res_t res = rd_kafka_conf_get(o->conf, "group.id", group, &size);
    if (res != RD_KAFKA_CONF_OK || size <= 1)
        return rl_error_detail_set(RL_EINVAL,
                                   "conf: no group.id (the consumer commits a group's offsets)");
    return 0;
}

static int set(rd_kafka_conf_t *conf, const char *what, const char *name, const char *value)
{
    char err[256];
    if (rd_kafka_conf_set(conf, name, value, err, sizeof err) == RD_KAFKA_CONF_OK)
        return 0;
    return rl_error_detail_set(RL_EKAFKA, "%s: librdkafka refused %s=%s: %s", what, name, value,
                               err);
}

/* The topics as a detail names them: each quoted (cut, escaped), the first SUBSCRIPTION_NAMED
 * of them, then how many more (librdkafka does not say which one it refused). */
#define SUBSCRIPTION_NAMED 4

static void topics_named(const rl_consumer_options *o, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < o->topic_count && i < SUBSCRIPTION_NAMED && n < size; i++) {
        char q[RL__QUOTE_SIZE];
        int w = snprintf(buf + n, size - n, "%s%s", i ? ", " : "", rl__quote(q, o->topics[i]));
        n += w > 0 ? (size_t)w : 0;
    }
    if (o->topic_count > SUBSCRIPTION_NAMED && n < size)
        snprintf(buf + n, size - n, " and %zu more", o->topic_count - SUBSCRIPTION_NAMED);
}

static int subscribe(rl_consumer_t *c, const rl_consumer_options *o)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)o->topic_count);
    for (size_t i = 0; i < o->topic_count; i++)
        rd_kafka_topic_partition_list_add(l, o->topics[i], RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t err = rd_kafka_subscribe(c->rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (err) {
        char named[SUBSCRIPTION_NAMED * (RL__QUOTE_SIZE + 2) + 32];
        topics_named(o, named, sizeof named);
        rl__consumer_error(c, err, "subscribe");
        return rl_error_detail_set(RL_EKAFKA, "topics %s: librdkafka refused the subscription: %s",
                                   named, rd_kafka_err2str(err));
    }
    return 0;
}

/* librdkafka's version with the fix for issue 4312 (see may_leave). */
#define KAFKA_COOP_DESTROY_FIXED 0x020300ff /* 2.3.0 */

/* True when this librdkafka would abort destroying this configuration's consumer before its
 * first assignment: before 2.3.0, with cooperative-sticky among the strategies. */
static bool coop_destroy_hazard(const rd_kafka_conf_t *conf)
{
    if (rd_kafka_version() >= KAFKA_COOP_DESTROY_FIXED)
        return false;
    char strategy[512];
    size_t size = sizeof strategy;
    if (rd_kafka_conf_get(conf, "partition.assignment.strategy", strategy, &size) !=
        RD_KAFKA_CONF_OK)
        return true; /* a value too long to read: assume the worst */
    return strstr(strategy, "cooperative-sticky") != NULL;
}

/* The Kafka side: the consumer, its queue, the dead-letter producer, the subscription. Takes
 * both configurations over. */
static int kafka_new(rl_consumer_t *c, const rl_consumer_options *o)
{
    rd_kafka_conf_t *conf = o->conf, *dconf = o->dlq_conf;
    int rc = 0;
    if (c->dlq_enabled && !dconf) {
        char err[512];
        rc = rl__dlq_conf(conf, &dconf, err, sizeof err);
        if (rc)
            rl_error_detail_set(rc, "conf: its copy for the dead-letter producer: %s", err);
    } else if (!c->dlq_enabled && dconf) {
        rd_kafka_conf_destroy(dconf);
        dconf = NULL;
    }
    /* Without the offset map, librdkafka commits what we store, and only the watermark is
     * ever stored. With it the consumer commits by itself: librdkafka's auto-committer commits
     * only a stored offset that moved, never a map that grew above a watermark that did not
     * (a message held for its retries), and before 2.2.0 drops a stored offset's metadata. */
    char interval[16];
    snprintf(interval, sizeof interval, "%u", (unsigned)o->commit_interval_ms);
    if (!rc)
        rc = set(conf, "conf", "enable.auto.commit", o->offset_map_max_bytes ? "false" : "true");
    if (!rc)
        rc = set(conf, "conf", "enable.auto.offset.store", "false");
    if (!rc)
        rc = set(conf, "conf", "auto.commit.interval.ms", interval);
    if (rc) {
        rd_kafka_conf_destroy(conf);
        if (dconf)
            rd_kafka_conf_destroy(dconf);
        return rc;
    }
    c->coop_destroy_hazard = coop_destroy_hazard(conf);
    rl__fetch_restart_init(c, conf);
    if ((rc = rl__group_watch_install(c, conf)) != 0) {
        rd_kafka_conf_destroy(conf);
        if (dconf)
            rd_kafka_conf_destroy(dconf);
        return rc == RL_ENOMEM ? rl_error_detail_set(rc, "out of memory: the group's watch")
                               : rl_error_detail_set(rc, "conf: librdkafka refused the consumer's "
                                                         "interceptor (it watches the group's "
                                                         "joins)");
    }
    /* The growth fence's reader copies the configuration as the user gave it. */
    if (o->growth_fence && (rc = rl__growth_fence_new(c, o, conf)) != 0) {
        rd_kafka_conf_destroy(conf);
        if (dconf)
            rd_kafka_conf_destroy(dconf);
        return rc;
    }
    rd_kafka_conf_set_rebalance_cb(conf, rl__rebalance_cb);
    rd_kafka_conf_set_offset_commit_cb(conf, rl__commit_cb);
    rd_kafka_conf_set_error_cb(conf, on_kafka_error);
    rd_kafka_conf_set_opaque(conf, c);
    char err[512];
    c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!c->rk) {
        rl__consumer_error(c, RD_KAFKA_RESP_ERR__INVALID_ARG, "consumer: %s", err);
        rd_kafka_conf_destroy(conf);
        if (dconf)
            rd_kafka_conf_destroy(dconf);
        return rl_error_detail_set(RL_EKAFKA, "conf: librdkafka refused to make the consumer: %s",
                                   err);
    }
    rd_kafka_poll_set_consumer(c->rk);
    c->q = rd_kafka_queue_get_consumer(c->rk);
    rd_kafka_queue_cb_event_enable(c->q, rl__wake_cb, c);
    if (dconf) {
        rd_kafka_conf_set_error_cb(dconf, on_kafka_error);
        rc = rl__dlq_new(c, dconf);
    }
    if (!rc)
        rc = subscribe(c, o);
    return rc;
}

static void kafka_free(rl_consumer_t *c)
{
    rl__dlq_close(c, 0);
    if (c->q) {
        rd_kafka_queue_cb_event_enable(c->q, NULL, NULL);
        rd_kafka_queue_destroy(c->q);
    }
    if (c->rk)
        rd_kafka_destroy(c->rk);
    c->q = NULL;
    c->rk = NULL;
    rl__group_watch_free(c);
    rl__growth_fence_free(c);
}

int rl_consumer_new(struct uv_loop_s *loop, const rl_consumer_options *opts, rl_consumer_t **out)
{
    rl_error_detail_clear();
    if (out)
        *out = NULL;
    int rc = !out    ? rl_error_detail_set(RL_EINVAL, "out NULL: nowhere to put the consumer")
             : !loop ? rl_error_detail_set(RL_EINVAL, "loop NULL: a consumer runs on a uv_loop_t")
             : !opts ? rl_error_detail_set(RL_EINVAL,
                                           "opts NULL: fill them with rl_consumer_options_init()")
                     : check_options(opts);
    rl_consumer_t *c = rc ? NULL : calloc(1, sizeof *c);
    if (!rc && !c)
        rc = rl_error_detail_set(RL_ENOMEM, "out of memory: the consumer");
    if (!rc && uv_mutex_init(&c->wake_mu) != 0) {
        rc = rl_error_detail_set(RL_ELOOP, "loop: uv_mutex_init failed for the consumer");
    } else if (!rc) {
        c->opts.offset_map_max_bytes = opts->offset_map_max_bytes;
        if (rl__map_init(c) != 0) {
            rl__map_free(c);
            uv_mutex_destroy(&c->wake_mu);
            rc = rl_error_detail_set(RL_ENOMEM, "out of memory: the offset map's buffer");
        }
    }
    if (rc) {
        free(c);
        if (opts && opts->conf)
            rd_kafka_conf_destroy(opts->conf);
        if (opts && opts->dlq_conf && opts->dlq_conf != opts->conf)
            rd_kafka_conf_destroy(opts->dlq_conf);
        return rc;
    }
    c->loop = loop;
    c->loop_thread = uv_thread_self();
    c->opts = *opts;
    c->opts.conf = c->opts.dlq_conf = NULL;
    c->opts.topics = NULL;
    c->opts.topic_count = 0;
    c->opts.dispatch.lanes = NULL;
    c->opts.dispatch.lane_count = 0;
    rl__intake_init(c);
    c->dlq_enabled = !opts->dlq_topic || *opts->dlq_topic;
    c->opts.dlq_topic = NULL;
    if (opts->dlq_topic && *opts->dlq_topic && !(c->opts.dlq_topic = strdup(opts->dlq_topic)))
        rc = rl_error_detail_set(RL_ENOMEM, "out of memory: a copy of dlq_topic");

    rl_dispatch_options dopts = opts->dispatch;
    c->async = opts->async_handler || opts->async_batch_handler;
    if (opts->async_batch_handler)
        dopts.async_batch_handler = rl__job_async_batch;
    else if (opts->batch_handler)
        dopts.batch_handler = rl__job_batch_handler;
    else if (c->async)
        dopts.async_handler = rl__job_async;
    else
        dopts.handler = rl__job_handler;
    dopts.on_done = rl__job_done;
    dopts.on_capacity = rl__on_capacity;
    dopts.data = c;
    /* The statistics ride the dispatcher's timer: its text, wrapped in the consumer's. */
    dopts.stats_interval_ms = opts->stats_interval_ms;
    dopts.on_stats = opts->stats_interval_ms ? rl__consumer_stats_tick : NULL;
    dopts.stats_lanes = opts->stats_full ? RL_CONSUMER_STATS_LANES_MAX : opts->stats_lanes;
    /* No lanes at all: an asynchronous consumer's many, named by the dispatcher's rule, on a
     * ring that makes them in milliseconds and keeps them small (consumer.h); fewer on a ring
     * the caller chose, whose profile may build every point. */
    rl_ring_options lane_ring;
    if (c->async && !dopts.lanes && !dopts.lane_count) {
        dopts.lane_count = dopts.ring ? RL_CONSUMER_ASYNC_LANES_RING : RL_CONSUMER_ASYNC_LANES;
        if (!dopts.ring) {
            rl_ring_options_init(&lane_ring);
            lane_ring.profile = RL_CONSUMER_ASYNC_PROFILE;
            dopts.ring = &lane_ring;
        }
    }
    if (!rc && (rc = rl_dispatch_init(loop, &dopts, &c->d)) != 0)
        rl__detail_prefix(rc, "dispatch.");
    c->d_for_complete = c->d;
    if (rc) {
        rd_kafka_conf_destroy(opts->conf);
        if (opts->dlq_conf)
            rd_kafka_conf_destroy(opts->dlq_conf);
    } else {
        rc = kafka_new(c, opts); /* takes the configurations over */
    }
    if (!rc) {
        int uerr = uv_async_init(loop, &c->wake, on_wake);
        if (uerr) {
            rc = rl_error_detail_set(RL_ELOOP, "loop: uv_async_init: %s", uv_strerror(uerr));
        } else {
            c->wake.data = c;
            c->timer.data = c;
            c->revoke_timer.data = c;
            c->rate_timer.data = c;
            c->handles_open = 1;
            if ((uerr = uv_timer_init(loop, &c->timer)) == 0) {
                c->handles_open = 2;
                if ((uerr = uv_timer_init(loop, &c->revoke_timer)) == 0) {
                    c->handles_open = 3;
                    if ((uerr = uv_timer_init(loop, &c->rate_timer)) == 0)
                        c->handles_open = 4;
                }
            }
            if (uerr)
                rc = rl_error_detail_set(RL_ELOOP, "loop: uv_timer_init: %s", uv_strerror(uerr));
        }
    }
    if (rc) {
        kafka_free(c);
        rl__topics_free(c);
        if (c->d)
            rl_dispatch_close(c->d, RL_DISPATCH_STOP, NULL); /* frees itself on the loop */
        if (c->handles_open) {
            /* Handles exist: they must be closed on the loop before c can go. */
            c->close_cb = NULL;
            uv_close((uv_handle_t *)&c->wake, on_handle_closed);
            if (c->handles_open >= 2)
                uv_close((uv_handle_t *)&c->timer, on_handle_closed);
            if (c->handles_open >= 3)
                uv_close((uv_handle_t *)&c->revoke_timer, on_handle_closed);
        } else {
            uv_mutex_destroy(&c->wake_mu);
            rl__map_free(c);
            free((void *)c->opts.dlq_topic);
            free(c);
        }
        return rc;
    }
    uv_mutex_lock(&c->wake_mu);
    c->wake_alive = true;
    uv_mutex_unlock(&c->wake_mu);
    uv_timer_start(&c->timer, on_tick, TICK_MS, TICK_MS);
    uv_async_send(&c->wake); /* anything librdkafka queued before the wake-up was armed */
    *out = c;
    return 0;
}
