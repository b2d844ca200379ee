/* SPDX-License-Identifier: BSD-2-Clause */
/* The consumer's statistics: counters, each assigned partition's offsets, and the dispatcher's
 * lanes. */
#include "consumer_internal.h"
#include "json_writer.h"
#include "key_text.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

_Static_assert(RL_CONSUMER_KEY_TEXT_MAX == RL__KEY_TEXT_MAX, "the key text's room");

/* The message holding the watermark: the job the window keeps for its oldest offset. */
static void holder_stats(rl_consumer_t *c, const rl__part *p, rl_consumer_partition_stats *e)
{
    const rl__cjob *j = rl__holder(p);
    e->holder_offset = rl__offsets_oldest(&p->win);
    e->holder_key[0] = '\0';
    e->holder_key_hex = 0;
    e->holder_key_len = 0;
    e->holder_age_ms = -1;
    e->holder_failures = 0;
    e->holder_parked = 0;
    if (!j)
        return;
    if (j->msg && j->msg->key) {
        e->holder_key_len = j->msg->key_len;
        e->holder_key_hex =
            rl__key_text(j->msg->key, j->msg->key_len, j->msg->key_len, e->holder_key);
    }
    /* The loop's clock now, not its cached time: a tick may come late in a long iteration. */
    uint64_t now = uv_hrtime() / 1000000;
    e->holder_age_ms = now > j->taken_ms ? (int64_t)(now - j->taken_ms) : 0;
    e->holder_failures = atomic_load_explicit(&j->failures, memory_order_relaxed);
    e->holder_parked = !c->async && e->holder_failures > 0 &&
                       !atomic_load_explicit(&j->running, memory_order_relaxed);
}

static void part_stats(rl_consumer_t *c, const rl__part *p, rl_consumer_partition_stats *e)
{
    e->topic = p->topic->name;
    e->partition = p->partition;
    e->epoch = p->epoch;
    e->paused = p->paused;
    e->committed = p->committed;
    e->watermark = rl__offsets_watermark(&p->win);
    int64_t low = -1, high = -1;
    /* librdkafka's cached value from the last fetch: no request, no wait. */
    if (rd_kafka_get_watermark_offsets(c->rk, p->topic->name, p->partition, &low, &high) != 0)
        high = -1;
    e->high = high >= 0 ? high : -1;
    /* Lag counts what is not finished yet: from the oldest offset in flight, else the
     * watermark, else where fetching stands. */
    int64_t from = rl__offsets_oldest(&p->win);
    if (from < 0)
        from = e->watermark >= 0 ? e->watermark : p->next_offset;
    e->lag = e->high >= 0 && from >= 0 ? (e->high > from ? e->high - from : 0) : -1;
    e->in_flight = rl__offsets_in_flight(&p->win);
    e->pending = p->pending.len;
    e->dead_letters_in_flight = p->dlq_in_flight;
    e->offset_map_bytes = p->map_bytes;
    holder_stats(c, p, e);
}

int rl_consumer_stats_get(rl_consumer_t *c, rl_consumer_stats *out,
                          rl_consumer_partition_stats *parts, size_t cap, size_t *n)
{
    if (n)
        *n = 0;
    if (!c || !out || (!parts && cap))
        return RL_EINVAL;
    if (!rl__consumer_on_loop(c))
        return RL_ESTATE;
    *out = c->stats;
    size_t k = 0;
    for (uint32_t i = 0; i < c->ntopics; i++) {
        const rl__topic *t = c->topics[i];
        for (int32_t j = 0; j < t->nparts; j++) {
            const rl__part *p = t->parts[j];
            if (!p || !p->assigned)
                continue;
            if (k < cap)
                part_stats(c, p, &parts[k]);
            k++;
        }
    }
    if (n)
        *n = k;
    return 0;
}

/* The dispatcher's statistics, bounded (consumer.h, RL_CONSUMER_STATS_LANES_MAX), in a buffer
 * of our own: the busy lanes may change between the length asked and the text written. */
static int dispatcher_json(rl_dispatcher_t *d, char **out)
{
    size_t need = 0;
    int rc = rl_dispatch_stats_json_bounded(d, RL_CONSUMER_STATS_LANES_MAX, NULL, 0, &need);
    for (int tries = 0; rc == RL_ERANGE && tries < 8; tries++) {
        size_t cap = need + need / 8 + 256; /* room for a few more busy lanes */
        char *buf = malloc(cap);
        if (!buf)
            return RL_ENOMEM;
        rc = rl_dispatch_stats_json_bounded(d, RL_CONSUMER_STATS_LANES_MAX, buf, cap, &need);
        if (rc == 0) {
            *out = buf;
            return 0;
        }
        free(buf);
    }
    return rc ? rc : RL_ENOMEM;
}

/* The consumer's JSON around the dispatcher's text `dj` (NULL: null). */
static int write_json(const rl_consumer_stats *s, const rl_consumer_partition_stats *ps, size_t n,
                      const char *dj, char *buf, size_t cap, size_t *len)
{
    rl__json o = {buf, cap, 0};
    rl__json_put(&o,
                 "{\"partitions\":%zu,\"consumed\":%" PRIu64 ",\"dispatched\":%" PRIu64
                 ",\"done\":%" PRIu64 ",\"dead_lettered\":%" PRIu64 ",\"dlq_failures\":%" PRIu64
                 ",\"null_keys\":%" PRIu64 ",\"bad_keys\":%" PRIu64 ",\"refetched\":%" PRIu64,
                 s->partitions, s->consumed, s->dispatched, s->done, s->dead_lettered,
                 s->dlq_failures, s->null_keys, s->bad_keys, s->refetched);
    rl__json_put(&o,
                 ",\"stale\":%" PRIu64 ",\"returned\":%" PRIu64 ",\"pauses\":%" PRIu64
                 ",\"resumes\":%" PRIu64 ",\"assigned\":%" PRIu64 ",\"revoked\":%" PRIu64
                 ",\"lost\":%" PRIu64 ",\"revoke_timeouts\":%" PRIu64 ",\"abandoned\":%" PRIu64
                 ",\"commits\":%" PRIu64 ",\"commit_failures\":%" PRIu64
                 ",\"dlq_producer_restarts\":%" PRIu64,
                 s->stale, s->returned, s->pauses, s->resumes, s->assigned, s->revoked, s->lost,
                 s->revoke_timeouts, s->abandoned, s->commits, s->commit_failures,
                 s->dlq_producer_restarts);
    rl__json_put(&o,
                 ",\"skipped\":%" PRIu64 ",\"offset_map_rejected\":%" PRIu64
                 ",\"fetch_restarts\":%" PRIu64,
                 s->skipped, s->offset_map_rejected, s->fetch_restarts);
    rl__json_put(&o, ",\"rate_limited\":%" PRIu64 ",\"rate_pauses\":%" PRIu64, s->rate_limited,
                 s->rate_pauses);
    rl__json_put(&o,
                 ",\"growth_held\":%" PRIu64 ",\"growth_released\":%" PRIu64
                 ",\"growth_unrouted\":%" PRIu64 ",\"growth_records\":%" PRIu64
                 ",\"growth_read_errors\":%" PRIu64 ",\"growth_waiting\":%" PRIu64
                 ",\"growth_hold_ms\":%" PRIu64 ",\"growth_released_by_stall\":%" PRIu64
                 ",\"growth_late\":%" PRIu64 ",\"partition\":[",
                 s->growth_held, s->growth_released, s->growth_unrouted, s->growth_records,
                 s->growth_read_errors, s->growth_waiting, s->growth_hold_ms,
                 s->growth_released_by_stall, s->growth_late);
    for (size_t i = 0; i < n; i++) {
        const rl_consumer_partition_stats *e = &ps[i];
        rl__json_put(&o, "%s{\"topic\":", i ? "," : "");
        rl__json_string(&o, e->topic);
        rl__json_put(&o,
                     ",\"partition\":%d,\"epoch\":%u,\"paused\":%s,\"committed\":%" PRId64
                     ",\"watermark\":%" PRId64 ",\"high\":%" PRId64 ",\"lag\":%" PRId64
                     ",\"in_flight\":%" PRIu64 ",\"pending\":%" PRIu64
                     ",\"dead_letters_in_flight\":%" PRIu64 ",\"offset_map_bytes\":%" PRIu64,
                     (int)e->partition, (unsigned)e->epoch, e->paused ? "true" : "false",
                     e->committed, e->watermark, e->high, e->lag, e->in_flight, e->pending,
                     e->dead_letters_in_flight, e->offset_map_bytes);
        if (e->holder_offset >= 0 && e->holder_age_ms >= 0) {
            rl__json_put(&o, ",\"holder\":{\"offset\":%" PRId64 ",\"key\":", e->holder_offset);
            rl__json_string(&o, e->holder_key);
            rl__json_put(&o,
                         ",\"key_encoding\":\"%s\",\"key_len\":%" PRIu64 ",\"age_ms\":%" PRId64
                         ",\"failures\":%u,\"parked\":%s}",
                         e->holder_key_hex ? "hex" : "text", e->holder_key_len, e->holder_age_ms,
                         (unsigned)e->holder_failures, e->holder_parked ? "true" : "false");
        } else {
            rl__json_put(&o, ",\"holder\":null");
        }
        rl__json_put(&o, "}");
    }
    rl__json_put(&o, "],\"dispatcher\":%s}", dj ? dj : "null");
    return rl__json_end(&o, len);
}

/* The assigned partitions' statistics in a new array (*ps, *n of them). */
static int partitions_new(rl_consumer_t *c, rl_consumer_stats *s, rl_consumer_partition_stats **ps,
                          size_t *n)
{
    int rc = rl_consumer_stats_get(c, s, NULL, 0, n);
    if (rc)
        return rc;
    *ps = calloc(*n ? *n : 1, sizeof **ps);
    if (!*ps)
        return RL_ENOMEM;
    return rl_consumer_stats_get(c, s, *ps, *n, n);
}

int rl_consumer_stats_json(rl_consumer_t *c, char *buf, size_t cap, size_t *len)
{
    if (!c || (!buf && cap))
        return RL_EINVAL;
    rl_consumer_stats s;
    rl_consumer_partition_stats *ps = NULL;
    size_t n = 0;
    char *dj = NULL;
    int rc = partitions_new(c, &s, &ps, &n);
    if (!rc && c->d)
        rc = dispatcher_json(c->d, &dj);
    if (!rc)
        rc = write_json(&s, ps, n, dj, buf, cap, len);
    free(ps);
    free(dj);
    return rc;
}

/* --- on a timer: the dispatcher's tick hands its text over, the consumer wraps it --- */

void rl__consumer_stats_tick(rl_dispatcher_t *d, const char *json, size_t len)
{
    (void)len;
    rl_consumer_t *c = rl_dispatch_get_data(d);
    rl_consumer_stats s;
    size_t n = 0;
    if (rl_consumer_stats_get(c, &s, NULL, 0, &n) != 0)
        return;
    if (n > c->stats_parts_cap) { /* grows with the assignment, then is reused */
        void *p = realloc(c->stats_parts, n * sizeof *c->stats_parts);
        if (!p)
            return; /* out of memory: this tick is skipped */
        c->stats_parts = p;
        c->stats_parts_cap = n;
    }
    rl_consumer_stats_get(c, &s, c->stats_parts, c->stats_parts_cap, &n);
    size_t need = 0;
    int rc = write_json(&s, c->stats_parts, n, json, c->stats_text, c->stats_text_cap, &need);
    if (rc == RL_ERANGE) { /* the same data: one larger buffer fits it */
        char *p = realloc(c->stats_text, need + need / 8 + 256);
        if (!p)
            return;
        c->stats_text = p;
        c->stats_text_cap = need + need / 8 + 256;
        rc = write_json(&s, c->stats_parts, n, json, c->stats_text, c->stats_text_cap, &need);
    }
    if (rc == 0)
        c->opts.on_stats(c, c->stats_text, need);
}

void rl__consumer_stats_free(rl_consumer_t *c)
{
    free(c->stats_parts);
    free(c->stats_text);
    c->stats_parts = NULL;
    c->stats_text = NULL;
    c->stats_parts_cap = c->stats_text_cap = 0;
}
