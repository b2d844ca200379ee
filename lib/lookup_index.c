/* SPDX-License-Identifier: BSD-2-Clause */
/* The lookup engine: two tables on the top bits of a position, built with each snapshot.
 *
 * - The coarse table has one entry per bucket of positions, 2^j buckets with 2^j >= points:
 *   the first point of each bucket. rl__successor reads two neighbouring entries and searches
 *   the few points between them, so it is exact for either successor rule and any layout of
 *   points, and still O(log n) when every point falls in one bucket.
 * - The fine table has four times as many buckets. Where every position of a bucket has the
 *   same owner (most buckets hold no point at all), the entry is that owner and a lookup is a
 *   single memory read; elsewhere it is the bucket's first point and a short scan finishes.
 *
 * bench/bench_index_candidates.c compares this with binary search, a branchless search, an
 * Eytzinger layout and a coarse table alone; bench/RESULTS.md has the numbers. */
#include "lookup_index.h"
#include "ringlane/error.h"
#include "ringlane/ring_view.h"

#include <stdlib.h>

/* Fine buckets per coarse bucket (as a power of two), and the fine table's largest size. */
#define FAST_EXTRA_BITS 2u
#define FAST_MAX_BITS 22u

static unsigned ceil_log2(size_t n)
{
    unsigned b = 0;
    while (b < 63 && ((size_t)1 << b) < n)
        b++;
    return b;
}

size_t rl__successor(const rl_ring_t *r, uint64_t hash)
{
    uint64_t h = ((hash & r->mask) + r->ix_gt) & r->mask;
    size_t b = (size_t)(h >> r->ix_start_shift);
    size_t lo = r->ix_start[b], hi = r->ix_start[b + 1];
    /* Every point in [lo, hi) is in h's bucket; point hi, if there is one, is above h. */
    while (hi - lo > 8) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->pos[mid] < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    while (lo < hi && r->pos[lo] < h)
        lo++;
    return lo == r->n_points ? 0 : lo; /* past the top: wrap to the first point */
}

uint32_t rl__owner_scan(const rl_ring_t *r, uint64_t hash, uint32_t e)
{
    /* e is the first point at or above the bucket's lowest position, so it is at or before
     * the answer: scan forward a few points. */
    uint64_t h = ((hash & r->mask) + r->ix_gt) & r->mask;
    size_t n = r->n_points, end = e + RL__IX_SCAN < n ? e + RL__IX_SCAN : n;
    for (size_t i = e; i < end; i++)
        if (r->pos[i] >= h)
            return r->owner[i];
    if (end == n)
        return r->owner[0]; /* past the top point: wrap */
    return r->owner[rl__successor(r, hash)];
}

/* start[b] = the first point whose position >> shift is >= b, for b in 0 .. count. One pass
 * over the points: each point ends the run of buckets up to its own. */
static void fill_starts(const rl_ring_t *r, unsigned shift, uint32_t *start, size_t count)
{
    size_t b = 0;
    for (size_t i = 0; i < r->n_points; i++)
        for (size_t bi = (size_t)(r->pos[i] >> shift); b <= bi; b++)
            start[b] = (uint32_t)i;
    for (; b <= count; b++)
        start[b] = (uint32_t)r->n_points;
}

/* Bucket b covers positions [lo, hi]; its answers are the points first .. last, where first
 * answers lo and last answers hi (point n meaning the wrap to point 0). A bucket without
 * points is answered by the next point alone. One pass over the points. */
static void fill_fast(const rl_ring_t *r, unsigned shift, uint32_t *fast, size_t count)
{
    size_t n = r->n_points, b = 0;
    uint64_t span = (UINT64_C(1) << shift) - 1;
    for (size_t first = 0; first < n;) {
        size_t bi = (size_t)(r->pos[first] >> shift);
        for (uint32_t e = RL__IX_OWNER | r->owner[first]; b < bi; b++)
            fast[b] = e; /* empty buckets below this point */
        uint64_t hi = ((uint64_t)bi << shift) + span;
        size_t last = first;
        while (last < n && r->pos[last] < hi)
            last++;
        size_t next = last;
        while (next < n && (size_t)(r->pos[next] >> shift) == bi)
            next++;
        uint32_t owner = r->owner[first];
        int uniform = 1;
        for (size_t i = first + 1; i <= last && uniform; i++)
            uniform = r->owner[i == n ? 0 : i] == owner;
        fast[b++] = uniform ? RL__IX_OWNER | owner : (uint32_t)first;
        first = next;
    }
    for (uint32_t e = RL__IX_OWNER | r->owner[0]; b < count; b++)
        fast[b] = e; /* above the top point: the wrap */
}

int rl__index_build(rl_ring_t *r)
{
    r->ix_gt = r->profile->successor == RL__SUCC_GT;
    r->ix_key_hash = !r->hash && !r->profile->key_hash ? r->profile->label_hash : NULL;
    if (r->n_points == 0)
        return 0;
    unsigned bits = r->profile->info.bits;
    unsigned j = ceil_log2(r->n_points);
    if (j < 1)
        j = 1;
    if (j > bits)
        j = bits;
    unsigned k = j + FAST_EXTRA_BITS;
    if (k > FAST_MAX_BITS)
        k = FAST_MAX_BITS;
    if (k > bits)
        k = bits;
    if (k < j)
        k = j;
    size_t n_start = (size_t)1 << j, n_fast = (size_t)1 << k;
    r->ix_start_shift = bits - j;
    r->ix_fast_shift = bits - k;
    r->ix_start = malloc((n_start + 1) * sizeof *r->ix_start);
    r->ix_fast = malloc(n_fast * sizeof *r->ix_fast);
    if (!r->ix_start || !r->ix_fast)
        return RL_ENOMEM;
    r->ix_bytes = (n_start + 1 + n_fast) * sizeof(uint32_t);
    fill_starts(r, r->ix_start_shift, r->ix_start, n_start);
    fill_fast(r, r->ix_fast_shift, r->ix_fast, n_fast);
    return 0;
}

void rl__index_free(rl_ring_t *r)
{
    free(r->ix_start);
    free(r->ix_fast);
    r->ix_start = NULL;
    r->ix_fast = NULL;
}

int rl_ring_view_init(const rl_ring_t *r, rl_ring_view *view)
{
    if (!r || !view)
        return RL_EINVAL;
    *view = (rl_ring_view){
        .ring = r, .fast = r->ix_fast, .mask = r->mask, .gt = r->ix_gt, .shift = r->ix_fast_shift};
    return 0;
}
