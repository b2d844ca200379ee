/* SPDX-License-Identifier: BSD-2-Clause */
/* Statistics: per lane and for the dispatcher, as a struct and as JSON, with the hot keys the
 * sketch follows (hot_keys.c). */
#include "dispatch_internal.h"
#include "json_writer.h"
#include "key_text.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rl__stats_scratch_reserve(rl__stats_scratch *sc, size_t lanes, size_t top)
{
    if (!sc->hist && !(sc->hist = malloc(sizeof(uint64_t) * RL__HIST_BUCKETS)))
        return RL_ENOMEM;
    if (lanes > sc->lanes_cap) {
        void *p = realloc(sc->lanes, lanes * sizeof *sc->lanes);
        if (!p)
            return RL_ENOMEM;
        sc->lanes = p;
        sc->lanes_cap = lanes;
    }
    if (top > sc->top_cap) {
        void *p = realloc(sc->top, top * sizeof *sc->top);
        if (!p)
            return RL_ENOMEM;
        sc->top = p;
        sc->top_cap = top;
    }
    return 0;
}

void rl__stats_scratch_free(rl__stats_scratch *sc)
{
    free(sc->lanes);
    free(sc->top);
    free(sc->hist);
    free(sc->hot);
    *sc = (rl__stats_scratch){0};
}

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
    s->in_flight = l->busy && l->cur_job ? 1 + l->batch.len : 0;
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

/* The totals, read after the lanes (see rl_dispatch_stats_get for the order). */
static void read_totals(rl_dispatcher_t *d, rl_dispatch_stats *out)
{
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
}

/* rl_dispatch_stats_get with the histogram memory given. */
static void stats_get(rl_dispatcher_t *d, rl_dispatch_stats *out, rl_dispatch_lane_stats *lanes,
                      size_t cap, size_t *n, uint64_t *hist)
{
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
    /* With the lanes, under the same lock: a lane freed meanwhile is either listed or here. */
    out->removed = d->removed;
    pthread_rwlock_unlock(&d->route_lock);
    read_totals(d, out);
    *n = k;
}

int rl_dispatch_stats_get(rl_dispatcher_t *d, rl_dispatch_stats *out, rl_dispatch_lane_stats *lanes,
                          size_t cap, size_t *n)
{
    if (!d || !out || (!lanes && cap))
        return RL_EINVAL;
    uint64_t *hist = malloc(sizeof(uint64_t) * RL__HIST_BUCKETS);
    if (!hist)
        return RL_ENOMEM;
    size_t k = 0;
    rl__enter(d);
    stats_get(d, out, lanes, cap, &k, hist);
    rl__leave(d);
    free(hist);
    if (n)
        *n = k;
    return 0;
}

/* --- the busiest lanes: a min-heap of the max_lanes holding most jobs --- */

static void top_sift_down(rl__busy_lane *h, size_t n, size_t i)
{
    for (;;) {
        size_t m = i, a = 2 * i + 1, b = a + 1;
        if (a < n && h[a].held < h[m].held)
            m = a;
        if (b < n && h[b].held < h[m].held)
            m = b;
        if (m == i)
            return;
        rl__busy_lane t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static void top_offer(rl__busy_lane *h, size_t *n, size_t cap, rl__busy_lane e)
{
    if (*n < cap) { /* sift up */
        size_t i = (*n)++;
        h[i] = e;
        while (i && h[(i - 1) / 2].held > h[i].held) {
            rl__busy_lane t = h[i];
            h[i] = h[(i - 1) / 2];
            h[(i - 1) / 2] = t;
            i = (i - 1) / 2;
        }
    } else if (cap && e.held > h[0].held) {
        h[0] = e;
        top_sift_down(h, cap, 0);
    }
}

/* Sorts a min-heap in place, most held first (heapsort: allocates nothing). */
static void top_sort(rl__busy_lane *h, size_t n)
{
    for (size_t end = n; end > 1; end--) {
        rl__busy_lane t = h[0];
        h[0] = h[end - 1];
        h[end - 1] = t;
        top_sift_down(h, end - 1, 0);
    }
}

static uint64_t lane_held(rl__lane *l)
{
    rl__lock(&l->mu);
    uint64_t held = l->queue.len + l->parked + (l->busy && l->cur_job ? 1 + l->batch.len : 0);
    if (!held && l->nparks)
        held = 1; /* a key parked for its retry holds its lane */
    rl__unlock(&l->mu);
    return held;
}

/* The lanes holding a job, without looking at the idle ones: every lane that holds something
 * is on the held list or was pushed onto it since the last change (lane_change.c, HELD LANES),
 * and neither list loses a lane while the route lock is held for reading. Ranks them (and every
 * retiring lane) by the jobs they hold, fills sc->lanes with the top `cap`, busiest first, and
 * answers how many there were. */
static size_t busiest_lanes(rl_dispatcher_t *d, rl_dispatch_stats *out, rl__stats_scratch *sc,
                            size_t cap, size_t *got)
{
    size_t k = 0, n = 0;
    pthread_rwlock_rdlock(&d->route_lock);
    out->lanes = d->route.n;
    out->retiring = 0;
    rl__lane *pushed = atomic_load_explicit(&d->held_new, memory_order_acquire);
    for (int list = 0; list < 2; list++)
        for (rl__lane *l = list ? d->held_lanes : pushed; l; l = l->next_held_lane) {
            uint64_t held = lane_held(l);
            if (held) {
                k++;
                top_offer(sc->top, &n, cap, (rl__busy_lane){held, l, false});
            }
        }
    for (rl__lane *r = d->retiring; r; r = r->next_retiring, k++) {
        out->retiring++;
        top_offer(sc->top, &n, cap, (rl__busy_lane){lane_held(r), r, true});
    }
    top_sort(sc->top, n);
    for (size_t i = 0; i < n; i++)
        lane_stats(sc->top[i].lane, sc->top[i].retiring, &sc->lanes[i], sc->hist);
    out->removed = d->removed;
    pthread_rwlock_unlock(&d->route_lock);
    *got = n;
    return k;
}

int rl__stats_collect(rl_dispatcher_t *d, size_t max_lanes, rl__stats_scratch *sc,
                      rl_dispatch_stats *s, size_t *got, bool *all, size_t *busy)
{
    *got = *busy = 0;
    *all = false;
    int rc = rl__stats_scratch_reserve(sc, 0, 0);
    if (rc)
        return rc;
    rl__enter(d);
    size_t n = 0;
    stats_get(d, s, NULL, 0, &n, sc->hist);
    if (n <= max_lanes) { /* a few lanes: every one, in node order, then the retiring ones */
        rc = rl__stats_scratch_reserve(sc, n, 0);
        if (!rc) {
            stats_get(d, s, sc->lanes, sc->lanes_cap, got, sc->hist);
            if (*got > sc->lanes_cap) /* lanes were added meanwhile: report those we have */
                *got = sc->lanes_cap;
            *all = true;
        }
    } else {
        rc = rl__stats_scratch_reserve(sc, max_lanes, max_lanes);
        if (!rc)
            *busy = busiest_lanes(d, s, sc, max_lanes, got);
    }
    rl__leave(d);
    return rc;
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

/* The "hot_keys" object: the sketch's size and rounds, and its `shown` hottest keys. */
static void json_hot_keys(rl__json *o, const rl_dispatcher_t *d, const rl_dispatch_hot_key *hot,
                          size_t n, size_t shown, uint64_t rounds)
{
    rl__json_put(
        o, ",\"hot_keys\":{\"capacity\":%u,\"followed\":%zu,\"rounds\":%" PRIu64 ",\"list\":[",
        d->hot ? d->hot->cap : 0u, n, rounds);
    for (size_t i = 0; i < n && i < shown; i++) {
        char text[RL__KEY_TEXT_MAX];
        bool hex = rl__key_text(hot[i].key, hot[i].stored, hot[i].key_len, text);
        rl__json_put(o, "%s{\"key\":", i ? "," : "");
        rl__json_string(o, text);
        rl__json_put(o, ",\"key_encoding\":\"%s\",\"key_len\":%zu,\"jobs\":%" PRIu64 ",\"lane\":",
                     hex ? "hex" : "text", hot[i].key_len, hot[i].jobs);
        rl__json_string(o, hot[i].lane);
        rl__json_put(o, "}");
    }
    rl__json_put(o, "]}");
}

/* list: NULL for the plain text, else the "lane_list" value ("all" or "busy", with busy). */
static int json_write(const rl_dispatcher_t *d, const rl_dispatch_stats *s,
                      const rl_dispatch_lane_stats *ls, size_t got, const char *list, size_t busy,
                      const rl__stats_scratch *sc, size_t nhot, uint64_t rounds, char *buf,
                      size_t cap, size_t *len)
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
    const rl_dispatch_removed_stats *r = &s->removed;
    rl__json_put(&o,
                 ",\"removed_lanes\":{\"lanes\":%" PRIu64 ",\"processed\":%" PRIu64
                 ",\"failed\":%" PRIu64 ",\"retried\":%" PRIu64 ",\"dead_lettered\":%" PRIu64 "}",
                 r->lanes, r->processed, r->failed, r->retried, r->dead_lettered);
    rl__json_put(&o, ",\"rate_limited\":%" PRIu64, s->rate_limited);
    json_hot_keys(&o, d, sc->hot, nhot, list ? RL_DISPATCH_STATS_HOT_KEYS : SIZE_MAX, rounds);
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

int rl__stats_json(rl_dispatcher_t *d, size_t max_lanes, rl__stats_scratch *sc, char *buf,
                   size_t cap, size_t *len)
{
    rl_dispatch_stats s;
    size_t got, busy;
    bool all;
    int rc = rl__stats_collect(d, max_lanes, sc, &s, &got, &all, &busy);
    size_t nhot = 0;
    uint64_t rounds = 0;
    if (!rc) {
        rl__enter(d);
        rc = rl__hot_keys_read(d, sc, &nhot, &rounds);
        rl__leave(d);
    }
    if (rc)
        return rc;
    const char *list = max_lanes == SIZE_MAX ? NULL : all ? "all" : "busy";
    return json_write(d, &s, sc->lanes, got, list, busy, sc, nhot, rounds, buf, cap, len);
}

int rl_dispatch_stats_json(rl_dispatcher_t *d, char *buf, size_t cap, size_t *len)
{
    if (!d || (!buf && cap))
        return RL_EINVAL;
    rl__stats_scratch sc = {0};
    int rc = rl__stats_json(d, SIZE_MAX, &sc, buf, cap, len);
    rl__stats_scratch_free(&sc);
    return rc;
}

int rl_dispatch_stats_json_bounded(rl_dispatcher_t *d, size_t max_lanes, char *buf, size_t cap,
                                   size_t *len)
{
    if (!d || (!buf && cap))
        return RL_EINVAL;
    rl__stats_scratch sc = {0};
    int rc = rl__stats_json(d, max_lanes, &sc, buf, cap, len);
    rl__stats_scratch_free(&sc);
    return rc;
}
