/* SPDX-License-Identifier: BSD-2-Clause */
/* The lookup engine's hot path, inlined into the lookups. Not installed. */
#ifndef RINGLANE_LOOKUP_INDEX_H
#define RINGLANE_LOOKUP_INDEX_H

#include "ring_internal.h"

#include "ringlane/ring_view.h"

/* Marks a fine-table entry that holds the owner itself rather than a point index (public as
 * RL_RING_VIEW_OWNER: ring views read the table too). */
#define RL__IX_OWNER RL_RING_VIEW_OWNER

/* Points scanned from a fine bucket's first point before the exact coarse search takes over;
 * a bucket that is not settled by one owner holds about one point on hashed rings. */
#define RL__IX_SCAN 4u

/* The owner when the fine entry e is a point index (out of line, so the hot path below is a
 * leaf function's few instructions). */
uint32_t rl__owner_scan(const struct rl_ring *r, uint64_t hash, uint32_t e);

/* The owner of `hash` (n_points must be > 0): owner[rl__successor(r, hash)], in one table read
 * for most hashes. */
static inline uint32_t rl__owner_of(const struct rl_ring *r, uint64_t hash)
{
    uint64_t h = ((hash & r->mask) + r->ix_gt) & r->mask;
    uint32_t e = r->ix_fast[h >> r->ix_fast_shift];
    if (e & RL__IX_OWNER)
        return e & ~RL__IX_OWNER;
    return rl__owner_scan(r, hash, e);
}

#endif
