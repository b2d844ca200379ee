/* The route's bucket table: key position to lane without a binary search. */
#include "dispatch_internal.h"

#include <stdlib.h>

int rl__route_table(rl__route *r)
{
    r->table = NULL;
    unsigned bits = rl_ring_hash_bits(r->ring);
    size_t np = rl_ring_point_count(r->ring);
    r->mask = bits >= 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
    r->shift = bits > 16 ? bits - 16 : 0;
    if (np == 0 || bits < 16 || r->n > RL__ROUTE_SPLIT)
        return 0;
    uint64_t pos0;
    uint32_t node0;
    if (rl_ring_point(r->ring, 0, &pos0, &node0) != 0)
        return 0; /* a profile without points (maglev, jump) */
    uint16_t *t = malloc(65536 * sizeof *t);
    if (!t)
        return RL_ENOMEM;
    /* Walk buckets and points together. A bucket with no point inside has one owner: the first
     * point after it, for either successor rule (>= or >), wrapping to the first point. */
    size_t p = 0;
    uint64_t pos = pos0;
    uint32_t node = node0;
    for (uint32_t b = 0; b < 65536; b++) {
        uint64_t lo = (uint64_t)b << r->shift;
        uint64_t hi = lo + ((r->shift ? (uint64_t)1 << r->shift : 1) - 1);
        while (p < np && pos < lo) {
            if (++p < np)
                rl_ring_point(r->ring, p, &pos, &node);
        }
        if (p < np && pos <= hi)
            t[b] = RL__ROUTE_SPLIT;
        else
            t[b] = (uint16_t)(p < np ? node : node0);
    }
    r->table = t;
    return 0;
}
