/* SPDX-License-Identifier: BSD-2-Clause */
/* ringlane: an inlinable lookup view of a ring, for the hottest loops.
 *
 * rl_ring_lookup_hash() is a library call: on a small ring the call itself is most of its cost.
 * A view copies the few fields of the ring's lookup engine into a struct of the caller's, so
 * rl_ring_view_lookup_hash() below compiles into the caller's loop: most positions are answered
 * by one read of the engine's fine table, and the rest by rl_ring_lookup_hash(). The answers
 * are exactly rl_ring_lookup_hash()'s, for every profile (profiles without points, and empty
 * rings, always take the call).
 *
 *     rl_ring_view v;
 *     rl_ring_view_init(ring, &v);           // once per snapshot
 *     for (...) rl_ring_view_lookup_hash(&v, hash[i], &node[i]);
 *
 * A view borrows the ring: it is valid while the ring lives, and needs no freeing. The layout
 * below is part of the ABI of this major version (the fine table's entry format included).
 */
#ifndef RINGLANE_RING_VIEW_H
#define RINGLANE_RING_VIEW_H

#include "ringlane/common.h"
#include "ringlane/ring.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A fine-table entry with this bit set holds the owner's node index itself. */
#define RL_RING_VIEW_OWNER 0x80000000u

typedef struct rl_ring_view {
    const rl_ring_t *ring;
    const uint32_t *fast; /* the fine table; NULL: every lookup takes rl_ring_lookup_hash */
    uint64_t mask;        /* the ring's width */
    uint64_t gt;          /* 1 when the rule is "first point > hash" (turnstone), else 0 */
    unsigned shift;       /* a position's fine bucket is position >> shift */
} rl_ring_view;

/* Fills *view for ring. RL_EINVAL if either is NULL. */
RL_EXTERN int rl_ring_view_init(const rl_ring_t *ring, rl_ring_view *view);

/* Exactly rl_ring_lookup_hash(view->ring, hash, node), mostly without a call. */
static inline int rl_ring_view_lookup_hash(const rl_ring_view *view, uint64_t hash, uint32_t *node)
{
    if (view->fast) {
        uint64_t h = ((hash & view->mask) + view->gt) & view->mask;
        uint32_t e = view->fast[h >> view->shift];
        if (e & RL_RING_VIEW_OWNER) {
            *node = e & ~RL_RING_VIEW_OWNER;
            return 0;
        }
    }
    return rl_ring_lookup_hash(view->ring, hash, node);
}

#ifdef __cplusplus
}
#endif
#endif
