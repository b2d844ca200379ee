/* SPDX-License-Identifier: BSD-2-Clause */
/* Statistics: per lane and for the dispatcher, as a struct and as JSON. Never per key. */
#include "dispatch_internal.h"
#include "json_writer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void lane_stats(rl__lane *l, int retiring, rl_dispatch_lane_stats *s, uint64_t *hist)
{
    memset(s, 0, sizeof *s);
    size_t len = strlen(l->name);
    memcpy(s->name, l->name, len + 1);
    s->retiring = retiring;
    rl__lock(&l->mu);
    s->depth = l->queue.len;
    s->parked = l->parked;
    s->retry_parked = l->nparks;
    s->in_flight = l->busy && l->cur_job ? 1 : 0;
    s->processed = l->processed;
    s->failed = l->failed;
    s->retried = l->retried;
    s->dead_lettered = l->dead;
    if (l->hist)
        memcpy(hist, l->hist, sizeof(uint64_t) * RL__HIST_BUCKETS);
    else
        memset(hist, 0, sizeof(uint64_t) * RL__HIST_BUCKETS);
    rl__unlock(&l->mu);
    s->p50_us = rl__hist_quantile_us(hist, 0.50);
    s->p99_us = rl__hist_quantile_us(hist, 0.99);
}

int rl_dispatch_stats_get(rl_dispatcher_t *d, rl_dispatch_stats *out, rl_dispatch_lane_stats *lanes,
                          size_t cap, size_t *n)
{
    if (!d || !out || (!lanes && cap))
        return RL_EINVAL;
    uint64_t *hist = malloc(sizeof(uint64_t) * RL__HIST_BUCKETS);
    if (!hist)
        return RL_ENOMEM;
    rl__enter(d);
    memset(out, 0, sizeof *out);
    size_t k = 0;
    pthread_rwlock_rdlock(&d->route_lock);
    out->lanes = d->route.n;
    for (size_t i = 0; i < d->route.n; i++, k++)
        if (k < cap)
            lane_stats(d->route.lanes[i], 0, &lanes[k], hist);
    for (rl__lane *r = d->retiring; r; r = r->next_retiring, k++) {
        out->retiring++;
        if (k < cap)
            lane_stats(r, 1, &lanes[k], hist);
    }
    pthread_rwlock_unlock(&d->route_lock);
    free(hist);
    /* The ends first, then the submissions: a job counted as ended was submitted before its
     * end was counted (publish releases the count), so the later read of `submitted` shows it.
     * Read the other way round, jobs submitted and ended between the two reads showed more
     * ended than submitted. */
    out->done = atomic_load_explicit(&d->done, memory_order_acquire);
    out->dead_lettered = atomic_load_explicit(&d->dead, memory_order_acquire);
    out->returned = atomic_load_explicit(&d->returned_count, memory_order_acquire);
    out->submitted = atomic_load(&d->seq);
    out->jobs = atomic_load(&d->jobs);
    out->refused = atomic_load(&d->refused);
    out->rate_limited = atomic_load(&d->rate_limited);
    out->lane_changes = atomic_load(&d->changes);
    out->last_change_ns = atomic_load(&d->last_change_ns);
    out->max_change_ns = atomic_load(&d->max_change_ns);
    rl__leave(d);
    if (n)
        *n = k;
    return 0;
}

/* The lanes holding a job, without looking at the idle ones: every lane that holds something
 * is on the held list or was pushed onto it since the last change (lane_change.c, HELD LANES),
 * and neither list loses a lane while the route lock is held for reading. Fills up to cap
 * entries and answers how many hold a job. */
static size_t busy_lane_stats(rl_dispatcher_t *d, rl_dispatch_stats *out,
                              rl_dispatch_lane_stats *lanes, size_t cap, uint64_t *hist)
{
    size_t k = 0;
    rl_dispatch_lane_stats one;
    pthread_rwlock_rdlock(&d->route_lock);
    out->lanes = d->route.n;
    out->retiring = 0;
    rl__lane *pushed = atomic_load_explicit(&d->held_new, memory_order_acquire);
    for (int list = 0; list < 2; list++)
        for (rl__lane *l = list ? d->held_lanes : pushed; l; l = l->next_held_lane) {
            rl_dispatch_lane_stats *e = k < cap ? &lanes[k] : &one;
            lane_stats(l, 0, e, hist);
            if (e->depth || e->in_flight || e->parked || e->retry_parked)
                k++;
        }
    for (rl__lane *r = d->retiring; r; r = r->next_retiring, k++) {
        out->retiring++;
        lane_stats(r, 1, k < cap ? &lanes[k] : &one, hist);
    }
    pthread_rwlock_unlock(&d->route_lock);
    return k;
}

/* --- JSON --- */

static void json_lane(rl__json *o, const rl_dispatch_lane_stats *l, bool first)
{
    rl__json_put(o, "%s{\"name\":", first ? "" : ",");
    rl__json_string(o, l->name);
    rl__json_put(o,
                 ",\"retiring\":%s,\"depth\":%" PRIu64 ",\"parked\":%" PRIu64
                 ",\"in_flight\":%" PRIu64 ",\"processed\":%" PRIu64 ",\"failed\":%" PRIu64,
                 l->retiring ? "true" : "false", l->depth, l->parked, l->in_flight, l->processed,
                 l->failed);
    rl__json_put(o,
                 ",\"retried\":%" PRIu64 ",\"retry_parked\":%" PRIu64 ",\"dead_lettered\":%" PRIu64
                 ",\"p50_us\":%.3f,\"p99_us\":%.3f}",
                 l->retried, l->retry_parked, l->dead_lettered, l->p50_us, l->p99_us);
}

/* list: NULL for the plain text, else the "lane_list" value ("all" or "busy", with busy). */
static int json_write(const rl_dispatch_stats *s, const rl_dispatch_lane_stats *ls, size_t got,
                      const char *list, size_t busy, char *buf, size_t cap, size_t *len)
{
    rl__json o = {buf, cap, 0};
    rl__json_put(&o,
                 "{\"lanes\":%zu,\"retiring\":%zu,\"jobs\":%" PRIu64 ",\"submitted\":%" PRIu64
                 ",\"refused\":%" PRIu64 ",\"done\":%" PRIu64 ",\"dead_lettered\":%" PRIu64,
                 s->lanes, s->retiring, s->jobs, s->submitted, s->refused, s->done,
                 s->dead_lettered);
    rl__json_put(&o,
                 ",\"returned\":%" PRIu64 ",\"lane_changes\":%" PRIu64
                 ",\"last_change_ns\":%" PRIu64 ",\"max_change_ns\":%" PRIu64,
                 s->returned, s->lane_changes, s->last_change_ns, s->max_change_ns);
    rl__json_put(&o, ",\"rate_limited\":%" PRIu64, s->rate_limited);
    if (list && strcmp(list, "busy") == 0)
        rl__json_put(&o, ",\"lane_list\":\"busy\",\"lanes_busy\":%zu", busy);
    else if (list)
        rl__json_put(&o, ",\"lane_list\":\"%s\"", list);
    rl__json_put(&o, ",\"lane\":[");
    for (size_t i = 0; i < got; i++)
        json_lane(&o, &ls[i], i == 0);
    rl__json_put(&o, "]}");
    return rl__json_end(&o, len);
}

/* The JSON with every lane; list as for json_write. */
static int json_all_lanes(rl_dispatcher_t *d, const char *list, char *buf, size_t cap, size_t *len)
{
    rl_dispatch_stats s;
    size_t n = 0;
    int rc = rl_dispatch_stats_get(d, &s, NULL, 0, &n);
    if (rc)
        return rc;
    rl_dispatch_lane_stats *ls = calloc(n ? n : 1, sizeof *ls);
    if (!ls)
        return RL_ENOMEM;
    size_t got = n;
    rc = rl_dispatch_stats_get(d, &s, ls, n, &got);
    if (got > n) /* lanes were added meanwhile: report those we have */
        got = n;
    if (!rc)
        rc = json_write(&s, ls, got, list, 0, buf, cap, len);
    free(ls);
    return rc;
}

int rl_dispatch_stats_json(rl_dispatcher_t *d, char *buf, size_t cap, size_t *len)
{
    if (!d || (!buf && cap))
        return RL_EINVAL;
    return json_all_lanes(d, NULL, buf, cap, len);
}

int rl_dispatch_stats_json_bounded(rl_dispatcher_t *d, size_t max_lanes, char *buf, size_t cap,
                                   size_t *len)
{
    if (!d || (!buf && cap))
        return RL_EINVAL;
    rl_dispatch_stats s;
    size_t n = 0;
    int rc = rl_dispatch_stats_get(d, &s, NULL, 0, &n);
    if (rc)
        return rc;
    if (n <= max_lanes) /* a few lanes: all of them, as rl_dispatch_stats_json lists them */
        return json_all_lanes(d, "all", buf, cap, len);
    rl_dispatch_lane_stats *ls = calloc(max_lanes ? max_lanes : 1, sizeof *ls);
    uint64_t *hist = malloc(sizeof(uint64_t) * RL__HIST_BUCKETS);
    if (!ls || !hist) {
        free(ls);
        free(hist);
        return RL_ENOMEM;
    }
    rl__enter(d);
    size_t busy = busy_lane_stats(d, &s, ls, max_lanes, hist);
    rl__leave(d);
    free(hist);
    rc = json_write(&s, ls, busy < max_lanes ? busy : max_lanes, "busy", busy, buf, cap, len);
    free(ls);
    return rc;
}
