/* SPDX-License-Identifier: BSD-2-Clause */
/* A partition's offset map: what its commits carry, what its assignment read, which messages
 * that lets it skip, and how far its window may grow.
 *
 * The map a commit carries says which offsets above the committed one (the base, never
 * complete itself) have completed: the window's completed offsets, the offsets between two
 * taken ones (no message is there: compaction, transaction markers), and, beyond the newest
 * offset taken, what the map read at the assignment said (its facts still hold). An offset
 * enters it only when it has completed for good: handled, or its dead letter acknowledged;
 * what a revoke or a loss let go never completes.
 *
 * Exactness: a map is written in the shorter of two forms, and one of them, the bitmap, has a
 * length that depends on the span alone (the offsets from the base to the last complete one).
 * A partition takes an offset only if every map it could then write (from its oldest
 * unfinished offset or any later base to that offset) fits as a bitmap within
 * offset_map_max_bytes, so whatever completes later, every map fits: none is ever cut; and
 * it refuses no offset whose maps would all fit. */
#include "consumer_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int rl__map_init(rl_consumer_t *c)
{
    uint32_t max = c->opts.offset_map_max_bytes;
    c->map_read = c->map_write = max != 0;
    if (!max)
        return 0;
    c->map_text = malloc((size_t)max + 1);
    return c->map_text ? 0 : RL_ENOMEM;
}

void rl__map_free(rl_consumer_t *c)
{
    free(c->map_text);
    free(c->map_spans);
    c->map_text = NULL;
    c->map_spans = NULL;
    c->map_spans_cap = 0;
}

void rl__map_forget(rl__part *p)
{
    rl__offset_map_free(&p->prior);
    p->prior_at = 0;
}

/* Taking `offset` lets the map span from the oldest unfinished offset (or `offset`, when none
 * is) to `offset`, or to the end of the map read at the assignment if that is further. Every
 * later base lies within that span, and rl__offset_map_fits checks every one of them, so the
 * check holds for every map until the next offset is taken; and it refuses an offset only
 * when some such map would not fit. */
bool rl__map_admits(rl_consumer_t *c, const rl__part *p, int64_t offset)
{
    if (!c->map_write)
        return true;
    int64_t oldest = rl__offsets_oldest(&p->win);
    int64_t from = oldest >= 0 ? oldest : offset;
    int64_t end = offset + 1;
    if (p->prior.n && p->prior.end > end)
        end = p->prior.end;
    return rl__offset_map_fits(from, end, c->opts.offset_map_max_bytes);
}

bool rl__map_skips(rl__part *p, int64_t offset)
{
    if (!p->prior.n)
        return false;
    if (offset < p->prior.base) {
        /* Fetching restarted below the map's base (an offset reset): it is not about these
         * messages any more. */
        rl__map_forget(p);
        return false;
    }
    while (p->prior_at < p->prior.n && p->prior.spans[p->prior_at].end <= offset)
        p->prior_at++;
    if (p->prior_at == p->prior.n) {
        rl__map_forget(p); /* every offset it covers has been taken */
        return false;
    }
    return p->prior.spans[p->prior_at].start <= offset;
}

static bool add_span(rl_consumer_t *c, size_t *n, int64_t start, int64_t end)
{
    if (*n == c->map_spans_cap) {
        size_t cap = c->map_spans_cap ? c->map_spans_cap * 2 : 64;
        rl__offset_span *v = realloc(c->map_spans, cap * sizeof *v);
        if (!v)
            return false;
        c->map_spans = v;
        c->map_spans_cap = cap;
    }
    c->map_spans[(*n)++] = (rl__offset_span){start, end};
    return true;
}

int64_t rl__map_build(rl_consumer_t *c, rl__part *p, size_t *len)
{
    *len = 0;
    const rl__offsets *w = &p->win;
    uint32_t count = rl__offsets_in_flight(w);
    int64_t base = count ? rl__offsets_oldest(w) : rl__offsets_watermark(w);
    if (base < 0)
        return -1; /* nothing taken and finished yet: the committed offset stands */
    if (!c->map_write)
        return base;
    size_t n = 0;
    bool ok = true;
    /* The window: between two unfinished offsets everything is complete (finished, or no
     * message there); after the last unfinished one, up to the last finished one. */
    int64_t open = base, last_done = -1;
    for (uint32_t i = 1; i < count && ok; i++) {
        int done;
        int64_t o = rl__offsets_at(w, i, &done);
        if (done) {
            last_done = o;
            continue;
        }
        if (last_done > open)
            ok = add_span(c, &n, open + 1, o);
        open = o;
    }
    if (ok && last_done > open)
        ok = add_span(c, &n, open + 1, last_done + 1);
    /* Beyond the newest offset taken: what the assignment's map said. */
    int64_t taken = w->last_pushed;
    for (size_t i = p->prior_at; ok && i < p->prior.n; i++) {
        rl__offset_span s = p->prior.spans[i];
        if (s.end <= taken + 1)
            continue;
        if (s.start <= taken)
            s.start = taken + 1;
        if (!count && n == 0 && s.start <= base) {
            base = s.end; /* complete from the base on: the committed offset moves past it */
            continue;
        }
        ok = add_span(c, &n, s.start, s.end);
    }
    if (!ok) {
        rl__consumer_error(c, RD_KAFKA_RESP_ERR__FAIL,
                           "offset map of %s [%d]: out of memory, committed without it",
                           p->topic->name, (int)p->partition);
        return base;
    }
    int rc = rl__offset_map_encode(base, c->map_spans, n, c->map_text,
                                   (size_t)c->opts.offset_map_max_bytes, len);
    if (rc) {
        /* Not reached: the window's span was checked when each offset was taken. */
        *len = 0;
        rl__consumer_error(c, RD_KAFKA_RESP_ERR__FAIL,
                           "offset map of %s [%d] at %" PRId64 ": %s, committed without it",
                           p->topic->name, (int)p->partition, base, rl_strerror(rc));
    }
    return base;
}

static void reject(rl_consumer_t *c, const rl__part *p, int64_t offset, const char *why)
{
    c->stats.offset_map_rejected++;
    rl__consumer_error(c, RD_KAFKA_RESP_ERR__BAD_MSG,
                       "offset map of %s [%d] at offset %" PRId64
                       ": %s: ignored, its messages from there on are handled again",
                       p->topic->name, (int)p->partition, offset, why);
}

void rl__map_adopt(rl_consumer_t *c, rl__part *p, const rd_kafka_topic_partition_t *committed)
{
    rl__map_forget(p);
    if (!committed->metadata || !committed->metadata_size)
        return; /* no map: everything from the committed offset on is handled */
    const char *why = NULL;
    rl__offset_map m;
    int verdict = rl__offset_map_decode(committed->metadata, committed->metadata_size, &m, &why);
    if (verdict != RL__OFFSET_MAP_OK) {
        reject(c, p, committed->offset, why);
        return;
    }
    char text[160];
    if (committed->offset < 0) {
        reject(c, p, committed->offset, "metadata without a committed offset");
    } else if (m.base != committed->offset) {
        snprintf(text, sizeof text, "its base %" PRId64 " is not the committed offset", m.base);
        reject(c, p, committed->offset, text);
    } else if (c->map_write && !rl__offset_map_fits(m.base, m.end, c->opts.offset_map_max_bytes)) {
        snprintf(text, sizeof text,
                 "it spans %" PRId64 " offsets, more than offset_map_max_bytes %u allows",
                 m.end - m.base, (unsigned)c->opts.offset_map_max_bytes);
        reject(c, p, committed->offset, text);
    } else {
        p->prior = m;
        p->prior_at = 0;
        return;
    }
    rl__offset_map_free(&m);
}
