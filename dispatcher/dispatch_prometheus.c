/* SPDX-License-Identifier: BSD-2-Clause */
/* The statistics in the Prometheus text exposition format: the dispatcher's totals, the removed
 * lanes' counters, and the lanes rl_dispatch_stats_json_bounded lists (every lane up to
 * max_lanes, else the max_lanes busiest), labelled by lane. */
#include "dispatch_internal.h"
#include "key_text.h"
#include "prom_writer.h"

#include <stddef.h>
#include <stdint.h>

/* A lane's counter or gauge, read from its statistics entry. */
typedef struct lane_metric {
    const char *name, *type, *help;
    size_t offset; /* of the uint64_t in rl_dispatch_lane_stats */
} lane_metric;

#define LANE_FIELD(f) offsetof(rl_dispatch_lane_stats, f)

static const lane_metric lane_metrics[] = {
    {"ringlane_dispatch_lane_queued", "gauge", "Jobs queued in the lane.", LANE_FIELD(depth)},
    {"ringlane_dispatch_lane_parked", "gauge",
     "Jobs in the lane waiting behind a key's job elsewhere or a key's retry.", LANE_FIELD(parked)},
    {"ringlane_dispatch_lane_retry_parked", "gauge", "Keys parked in the lane for a retry.",
     LANE_FIELD(retry_parked)},
    {"ringlane_dispatch_lane_in_flight", "gauge",
     "Jobs of the lane in their handler or pending completion (0 or 1; up to batch_max with "
     "batches).",
     LANE_FIELD(in_flight)},
    {"ringlane_dispatch_lane_processed_total", "counter",
     "Jobs that ended in the lane (done and dead-lettered).", LANE_FIELD(processed)},
    {"ringlane_dispatch_lane_failed_total", "counter", "Handler calls of the lane that failed.",
     LANE_FIELD(failed)},
    {"ringlane_dispatch_lane_retried_total", "counter", "Retries scheduled in the lane.",
     LANE_FIELD(retried)},
    {"ringlane_dispatch_lane_dead_lettered_total", "counter", "Jobs of the lane dead-lettered.",
     LANE_FIELD(dead_lettered)},
};

static void lane_sample(rl__json *o, const char *name, const rl_dispatch_lane_stats *l)
{
    rl__json_put(o, "%s{lane=", name);
    rl__prom_label_value(o, l->name);
    rl__json_put(o, "}");
}

static bool lane_busy(const rl_dispatch_lane_stats *l)
{
    return l->depth || l->in_flight || l->parked || l->retry_parked;
}

static void write_totals(rl__json *o, const rl_dispatch_stats *s, size_t busy)
{
    rl__prom_metric_u64(o, "ringlane_dispatch_lanes", "gauge", "Lanes in the ring.", s->lanes);
    rl__prom_metric_u64(o, "ringlane_dispatch_lanes_retiring", "gauge",
                        "Lanes removed and still finishing their job in flight.", s->retiring);
    rl__prom_metric_u64(o, "ringlane_dispatch_lanes_busy", "gauge",
                        "Lanes holding a job: queued, in flight, parked or retry parked.", busy);
    rl__prom_metric_u64(o, "ringlane_dispatch_jobs", "gauge",
                        "Jobs held now, towards max_jobs (the memory bound).", s->jobs);
    rl__prom_metric_u64(o, "ringlane_dispatch_submitted_total", "counter", "Jobs accepted.",
                        s->submitted);
    rl__prom_family(
        o, "ringlane_dispatch_refused_total", "counter",
        "Submissions refused for room (RL_EAGAIN, and each wait of a blocking submit).");
    rl__prom_u64(o, "ringlane_dispatch_refused_total", s->refused);
    rl__prom_metric_u64(o, "ringlane_dispatch_rate_limited_total", "counter",
                        "Submissions refused by the rate limit (max_rate), part of refused_total.",
                        s->rate_limited);
    rl__prom_family(o, "ringlane_dispatch_jobs_ended_total", "counter",
                    "Jobs ended, by outcome: done, dead_lettered, returned (handed back).");
    rl__json_put(o,
                 "ringlane_dispatch_jobs_ended_total{outcome=\"done\"} %" PRIu64 "\n"
                 "ringlane_dispatch_jobs_ended_total{outcome=\"dead_lettered\"} %" PRIu64 "\n"
                 "ringlane_dispatch_jobs_ended_total{outcome=\"returned\"} %" PRIu64 "\n",
                 s->done, s->dead_lettered, s->returned);
    rl__prom_metric_u64(o, "ringlane_dispatch_lane_changes_total", "counter",
                        "Lanes added and removed.", s->lane_changes);
    rl__prom_metric_double(o, "ringlane_dispatch_lane_change_last_seconds", "gauge",
                           "How long the last lane change held submissions and moved keys.",
                           (double)s->last_change_ns / 1e9);
    rl__prom_metric_double(o, "ringlane_dispatch_lane_change_max_seconds", "gauge",
                           "The longest lane change so far.", (double)s->max_change_ns / 1e9);
    const rl_dispatch_removed_stats *r = &s->removed;
    rl__prom_metric_u64(
        o, "ringlane_dispatch_removed_lanes_total", "counter",
        "Lanes removed and gone; their counters are in ringlane_dispatch_removed_*.", r->lanes);
    rl__prom_metric_u64(o, "ringlane_dispatch_removed_processed_total", "counter",
                        "Jobs that ended in lanes since removed.", r->processed);
    rl__prom_metric_u64(o, "ringlane_dispatch_removed_failed_total", "counter",
                        "Handler calls that failed in lanes since removed.", r->failed);
    rl__prom_metric_u64(o, "ringlane_dispatch_removed_retried_total", "counter",
                        "Retries scheduled in lanes since removed.", r->retried);
    rl__prom_metric_u64(o, "ringlane_dispatch_removed_dead_lettered_total", "counter",
                        "Jobs dead-lettered in lanes since removed.", r->dead_lettered);
}

static void write_lanes(rl__json *o, const rl_dispatch_lane_stats *ls, size_t got)
{
    if (!got)
        return; /* no family without samples */
    for (size_t m = 0; m < sizeof lane_metrics / sizeof lane_metrics[0]; m++) {
        const lane_metric *lm = &lane_metrics[m];
        rl__prom_family(o, lm->name, lm->type, lm->help);
        for (size_t i = 0; i < got; i++) {
            lane_sample(o, lm->name, &ls[i]);
            rl__json_put(o, " %" PRIu64 "\n",
                         *(const uint64_t *)(const void *)((const char *)&ls[i] + lm->offset));
        }
    }
    rl__prom_family(o, "ringlane_dispatch_lane_retiring", "gauge",
                    "1 for a lane removed and still finishing, else 0.");
    for (size_t i = 0; i < got; i++) {
        lane_sample(o, "ringlane_dispatch_lane_retiring", &ls[i]);
        rl__json_put(o, " %d\n", ls[i].retiring ? 1 : 0);
    }
    /* Two gauges, not a summary: a summary's _sum and _count are not kept per lane. */
    for (int q = 0; q < 2; q++) {
        const char *name = q ? "ringlane_dispatch_lane_latency_p99_seconds"
                             : "ringlane_dispatch_lane_latency_p50_seconds";
        rl__prom_family(o, name, "gauge",
                        q ? "Submission to the end of the last handler call: 99th percentile."
                          : "Submission to the end of the last handler call: median.");
        for (size_t i = 0; i < got; i++) {
            lane_sample(o, name, &ls[i]);
            rl__json_put(o, " %.9g\n", (q ? ls[i].p99_us : ls[i].p50_us) / 1e6);
        }
    }
}

/* The sketch's size and rounds, and its RL_DISPATCH_STATS_HOT_KEYS hottest keys with their
 * jobs, labelled by key (shown as key_text.h says), key_encoding and lane. */
static void write_hot_keys(rl__json *o, const rl_dispatcher_t *d, const rl_dispatch_hot_key *hot,
                           size_t n, uint64_t rounds)
{
    if (!d->hot)
        return;
    rl__prom_metric_u64(o, "ringlane_dispatch_hot_keys_followed", "gauge",
                        "Keys the hot-key sketch follows now (at most its capacity).", n);
    rl__prom_metric_u64(o, "ringlane_dispatch_hot_keys_rounds_total", "counter",
                        "Times the full hot-key sketch took one job from every key it follows.",
                        rounds);
    if (!n)
        return; /* no family without samples */
    rl__prom_family(o, "ringlane_dispatch_hot_key_jobs", "gauge",
                    "Jobs held by one of the hottest keys: queued, parked and in flight (a "
                    "lower bound).");
    for (size_t i = 0; i < n && i < RL_DISPATCH_STATS_HOT_KEYS; i++) {
        char text[RL__KEY_TEXT_MAX];
        bool hex = rl__key_text(hot[i].key, hot[i].stored, hot[i].key_len, text);
        rl__json_put(o, "ringlane_dispatch_hot_key_jobs{key=");
        rl__prom_label_value(o, text);
        rl__json_put(o, ",key_encoding=\"%s\",lane=", hex ? "hex" : "text");
        rl__prom_label_value(o, hot[i].lane);
        rl__json_put(o, "} %" PRIu64 "\n", hot[i].jobs);
    }
}

int rl_dispatch_stats_prometheus(rl_dispatcher_t *d, size_t max_lanes, char *buf, size_t cap,
                                 size_t *len)
{
    if (!d || (!buf && cap))
        return RL_EINVAL;
    rl__stats_scratch sc = {0};
    rl_dispatch_stats s;
    size_t got, busy;
    bool all;
    int rc = rl__stats_collect(d, max_lanes, &sc, &s, &got, &all, &busy);
    size_t nhot = 0;
    uint64_t rounds = 0;
    if (!rc) {
        rl__enter(d);
        rc = rl__hot_keys_read(d, &sc, &nhot, &rounds);
        rl__leave(d);
    }
    if (!rc) {
        if (all) /* every lane is listed: count the busy ones among them */
            for (size_t i = busy = 0; i < got; i++)
                busy += lane_busy(&sc.lanes[i]);
        rl__json o = {buf, cap, 0};
        write_totals(&o, &s, busy);
        write_lanes(&o, sc.lanes, got);
        write_hot_keys(&o, d, sc.hot, nhot, rounds);
        rc = rl__json_end(&o, len);
    }
    rl__stats_scratch_free(&sc);
    return rc;
}
