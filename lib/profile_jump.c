/* SPDX-License-Identifier: BSD-2-Clause */
/* jump: Lamping and Veach's jump consistent hash ("A Fast, Minimal Memory, Consistent Hash
 * Algorithm", 2014) over numbered buckets: node index = bucket. For partition-like targets that
 * only grow or shrink at the end: going from n to n + 1 buckets moves 1/(n + 1) of the keys, all
 * to the new bucket. Removing any member but the last renumbers the ones after it and so
 * reshuffles their keys. The key hash is xxh3-64 of the key's bytes. There are no points, no
 * weights (every bucket is one) and no state beyond the member count. */
#include "ring_internal.h"
#include "ringlane/error.h"
#include "ringlane/hash.h"

static int build_jump(rl_ring_t *r)
{
    for (size_t n = 0; n < r->n_nodes; n++)
        if (r->nodes[n].weight != 1)
            return RL_EWEIGHT; /* buckets are equal; a weight would be silently ignored */
    return 0;
}

static uint32_t lookup_jump(const rl_ring_t *r, uint64_t key)
{
    return rl__jump_bucket(key, (uint32_t)r->n_nodes);
}

static uint64_t label_xxh3(const void *d, size_t n)
{
    return rl_xxh3(d, n);
}

const rl__profile rl__profile_jump = {
    .info = {.name = "jump",
             .hash = "xxh3-64 (libxxhash) of the key",
             .labels = "no points: buckets 0..n-1 are the members in order; weights must be 1; "
                       "no vnodes",
             .rule = "jump consistent hash (Lamping & Veach); replicas and bounded loads not "
                     "supported",
             .compatible = "the paper's JumpConsistentHash (as ClickHouse's jumpConsistentHash) "
                           "applied to the key's xxh3-64",
             .default_vnodes = 0, /* none: min and max 0 say it takes none */
             .bits = 64,
             .max_vnodes = 0,
             .min_vnodes = 0,
             .kind = "computed",
             .local_add = 1},
    .successor = RL__SUCC_GE,
    .tie = RL__TIE_NAME,
    .label_hash = label_xxh3,
    .build = build_jump,
    .lookup_hash = lookup_jump,
    .vnodes_means = "it computes each key's bucket from the member count",
};
