/* SPDX-License-Identifier: BSD-2-Clause */
/* The consumer's statistics in the Prometheus text exposition format: its counters, each
 * assigned partition's offsets (labels topic, partition), then the dispatcher's families. */
#include "consumer_internal.h"
#include "prom_writer.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct counter_metric {
    const char *name, *help;
    size_t offset; /* of the uint64_t in rl_consumer_stats */
} counter_metric;

#define STAT(f) offsetof(rl_consumer_stats, f)

static const counter_metric counters[] = {
    {"ringlane_consumer_consumed_total", "Messages taken from librdkafka (not refetches).",
     STAT(consumed)},
    {"ringlane_consumer_dispatched_total", "Messages submitted to the dispatcher.",
     STAT(dispatched)},
    {"ringlane_consumer_done_total", "Messages handled successfully.", STAT(done)},
    {"ringlane_consumer_dead_lettered_total",
     "Messages delivered to the dead-letter topic (or dropped, with none).", STAT(dead_lettered)},
    {"ringlane_consumer_dlq_failures_total", "Dead-letter produces that failed and were retried.",
     STAT(dlq_failures)},
    {"ringlane_consumer_null_keys_total", "Messages without a key.", STAT(null_keys)},
    {"ringlane_consumer_bad_keys_total", "Keys too long or not hashable: dead-lettered.",
     STAT(bad_keys)},
    {"ringlane_consumer_refetched_total", "Messages delivered again after a resume, dropped.",
     STAT(refetched)},
    {"ringlane_consumer_stale_total", "Completions of a revoked assignment, ignored.", STAT(stale)},
    {"ringlane_consumer_returned_total", "Queued messages handed back at a revoke.",
     STAT(returned)},
    {"ringlane_consumer_pauses_total", "Partitions paused by backpressure.", STAT(pauses)},
    {"ringlane_consumer_resumes_total", "Partitions resumed.", STAT(resumes)},
    {"ringlane_consumer_assigned_total", "Partitions assigned.", STAT(assigned)},
    {"ringlane_consumer_revoked_total", "Partitions revoked.", STAT(revoked)},
    {"ringlane_consumer_lost_total", "Partitions lost (taken away without a revoke).", STAT(lost)},
    {"ringlane_consumer_revoke_timeouts_total",
     "Revokes that stopped waiting for in-flight messages.", STAT(revoke_timeouts)},
    {"ringlane_consumer_abandoned_total",
     "Asynchronous messages in flight let go by a revoke timeout or a loss.", STAT(abandoned)},
    {"ringlane_consumer_commits_total", "Commits acknowledged.", STAT(commits)},
    {"ringlane_consumer_commit_failures_total", "Commits that failed.", STAT(commit_failures)},
    {"ringlane_consumer_dlq_producer_restarts_total",
     "Dead-letter producers replaced after a fatal error.", STAT(dlq_producer_restarts)},
    {"ringlane_consumer_skipped_total",
     "Messages not handled because the committed offset map says they completed.", STAT(skipped)},
    {"ringlane_consumer_offset_map_rejected_total",
     "Assignments whose committed metadata was no usable offset map.", STAT(offset_map_rejected)},
    {"ringlane_consumer_fetch_restarts_total",
     "Times librdkafka's fetching was restarted at once after its queue reached "
     "queued.min.messages.",
     STAT(fetch_restarts)},
    {"ringlane_consumer_rate_limited_total",
     "Times a message found the rate limit's bucket empty and was kept.", STAT(rate_limited)},
    {"ringlane_consumer_rate_pauses_total",
     "Pauses of a partition whose backlog waited for the rate limit.", STAT(rate_pauses)},
    {"ringlane_consumer_growth_held_total",
     "Messages the growth fence held (a moved key's, or a partition's held whole).",
     STAT(growth_held)},
    {"ringlane_consumer_growth_released_total",
     "Moved keys' messages the growth fence held and then let go on.", STAT(growth_released)},
    {"ringlane_consumer_growth_unrouted_total",
     "Messages of a grown partition the producers' ring did not put there: not held.",
     STAT(growth_unrouted)},
    {"ringlane_consumer_growth_read_errors_total", "Reads of the growth records that failed.",
     STAT(growth_read_errors)},
    {"ringlane_consumer_growth_released_by_stall_total",
     "Moved keys' messages that went on because their old partition's commits stalled.",
     STAT(growth_released_by_stall)},
    {"ringlane_consumer_growth_late_total",
     "Messages of an old partition after the seal whose key the grown ring puts elsewhere.",
     STAT(growth_late)},
};

/* A partition's gauge; a negative value (unknown) has no sample. */
typedef struct partition_metric {
    const char *name, *help;
    int64_t (*get)(const rl_consumer_partition_stats *e);
} partition_metric;

static int64_t p_lag(const rl_consumer_partition_stats *e)
{
    return e->lag;
}
static int64_t p_in_flight(const rl_consumer_partition_stats *e)
{
    return (int64_t)e->in_flight;
}
static int64_t p_pending(const rl_consumer_partition_stats *e)
{
    return (int64_t)e->pending;
}
static int64_t p_paused(const rl_consumer_partition_stats *e)
{
    return e->paused ? 1 : 0;
}
static int64_t p_committed(const rl_consumer_partition_stats *e)
{
    return e->committed;
}
static int64_t p_watermark(const rl_consumer_partition_stats *e)
{
    return e->watermark;
}
static int64_t p_high(const rl_consumer_partition_stats *e)
{
    return e->high;
}
static int64_t p_dlq(const rl_consumer_partition_stats *e)
{
    return (int64_t)e->dead_letters_in_flight;
}
static int64_t p_map(const rl_consumer_partition_stats *e)
{
    return (int64_t)e->offset_map_bytes;
}
static int64_t p_epoch(const rl_consumer_partition_stats *e)
{
    return e->epoch;
}

static const partition_metric partition_metrics[] = {
    {"ringlane_consumer_partition_lag",
     "Messages not finished: high watermark minus the oldest unfinished offset.", p_lag},
    {"ringlane_consumer_partition_in_flight", "Offsets dispatched and not yet below the watermark.",
     p_in_flight},
    {"ringlane_consumer_partition_pending", "Messages kept while the partition is paused.",
     p_pending},
    {"ringlane_consumer_partition_paused", "1 while paused by backpressure, else 0.", p_paused},
    {"ringlane_consumer_partition_committed_offset", "The last commit the group acknowledged.",
     p_committed},
    {"ringlane_consumer_partition_watermark_offset",
     "Everything below it has completed: the next commit.", p_watermark},
    {"ringlane_consumer_partition_high_offset", "The partition's high watermark last seen.",
     p_high},
    {"ringlane_consumer_partition_dead_letters_in_flight",
     "Dead letters waiting for their delivery report.", p_dlq},
    {"ringlane_consumer_partition_offset_map_bytes",
     "The length of the offset map the last acknowledged commit carried.", p_map},
    {"ringlane_consumer_partition_epoch", "Assignments and revokes of the partition so far.",
     p_epoch},
};

/* The watermark's holders: one sample per partition that has one, labelled by its key too
 * (shown as key_text.h says), so an alert names the key. */
static void write_holders(rl__json *o, const rl_consumer_partition_stats *ps, size_t n)
{
    static const char *const names[3] = {"ringlane_consumer_partition_holder_age_seconds",
                                         "ringlane_consumer_partition_holder_failures",
                                         "ringlane_consumer_partition_holder_parked"};
    static const char *const helps[3] = {
        ("Age of the message holding the watermark (the oldest offset not finished), since "
         "the consumer took it."),
        "Handler calls that failed for the message holding the watermark.",
        "1 while the message holding the watermark waits for its retry (blocking handlers)."};
    for (int m = 0; m < 3; m++) {
        bool started = false;
        for (size_t i = 0; i < n; i++) {
            const rl_consumer_partition_stats *e = &ps[i];
            if (e->holder_offset < 0 || e->holder_age_ms < 0)
                continue;
            if (!started) /* no family without samples */
                rl__prom_family(o, names[m], "gauge", helps[m]);
            started = true;
            rl__json_put(o, "%s{topic=", names[m]);
            rl__prom_label_value(o, e->topic);
            rl__json_put(o, ",partition=\"%d\",key=", (int)e->partition);
            rl__prom_label_value(o, e->holder_key);
            rl__json_put(o, ",key_encoding=\"%s\"} ", e->holder_key_hex ? "hex" : "text");
            if (m == 0)
                rl__json_put(o, "%.3f\n", (double)e->holder_age_ms / 1e3);
            else
                rl__json_put(o, "%d\n", m == 1 ? (int)e->holder_failures : e->holder_parked);
        }
    }
}

static void write_consumer(rl__json *o, const rl_consumer_stats *s,
                           const rl_consumer_partition_stats *ps, size_t n)
{
    rl__prom_metric_u64(o, "ringlane_consumer_partitions", "gauge", "Partitions assigned now.",
                        s->partitions);
    for (size_t m = 0; m < sizeof counters / sizeof counters[0]; m++) {
        rl__prom_family(o, counters[m].name, "counter", counters[m].help);
        rl__prom_u64(o, counters[m].name,
                     *(const uint64_t *)(const void *)((const char *)s + counters[m].offset));
    }
    rl__prom_metric_u64(o, "ringlane_consumer_growth_records", "gauge",
                        "Growth records in the last complete read (every topic's).",
                        s->growth_records);
    rl__prom_metric_u64(o, "ringlane_consumer_growth_waiting", "gauge",
                        "Moved keys' messages the growth fence holds now.", s->growth_waiting);
    rl__prom_metric_double(o, "ringlane_consumer_growth_hold_seconds_total", "counter",
                           "Time the released messages were held by the growth fence, summed.",
                           (double)s->growth_hold_ms / 1e3);
    for (size_t m = 0; m < sizeof partition_metrics / sizeof partition_metrics[0]; m++) {
        const partition_metric *pm = &partition_metrics[m];
        bool started = false;
        for (size_t i = 0; i < n; i++) {
            int64_t v = pm->get(&ps[i]);
            if (v < 0)
                continue;
            if (!started) /* no family without samples */
                rl__prom_family(o, pm->name, "gauge", pm->help);
            started = true;
            rl__json_put(o, "%s{topic=", pm->name);
            rl__prom_label_value(o, ps[i].topic);
            rl__json_put(o, ",partition=\"%d\"} %" PRId64 "\n", (int)ps[i].partition, v);
        }
    }
    write_holders(o, ps, n);
}

int rl_consumer_stats_prometheus(rl_consumer_t *c, size_t max_lanes, char *buf, size_t cap,
                                 size_t *len)
{
    if (!c || (!buf && cap))
        return RL_EINVAL;
    if (!rl__consumer_on_loop(c))
        return RL_ESTATE;
    rl_consumer_stats s;
    size_t n = 0;
    int rc = rl_consumer_stats_get(c, &s, NULL, 0, &n);
    if (rc)
        return rc;
    rl_consumer_partition_stats *ps = calloc(n ? n : 1, sizeof *ps);
    if (!ps)
        return RL_ENOMEM;
    rl_consumer_stats_get(c, &s, ps, n, &n);
    rl__json o = {buf, cap, 0};
    write_consumer(&o, &s, ps, n);
    free(ps);
    if (c->d) { /* the dispatcher's families, written in place after ours */
        size_t room = o.len < o.cap ? o.cap - o.len : 0, dlen = 0;
        rc =
            rl_dispatch_stats_prometheus(c->d, max_lanes, room ? o.buf + o.len : NULL, room, &dlen);
        if (rc && rc != RL_ERANGE)
            return rc;
        o.len += dlen;
    }
    return rl__json_end(&o, len);
}
