/* SPDX-License-Identifier: BSD-2-Clause */
/* Key to node: the successor rule, replica preference lists and bounded-loads placement.
 * Nothing here allocates or takes a lock: a snapshot is immutable. */
#include "lookup_index.h"
#include "ringlane/error.h"

#include <math.h>

/* The key's position on the ring (arguments already checked). */
static inline int key_position(const rl_ring_t *r, const void *key, size_t len, uint64_t *hash)
{
    if (r->ix_key_hash) {
        *hash = r->ix_key_hash(key, len) & r->mask;
        return 0;
    }
    if (r->hash || !r->profile->key_hash) {
        *hash = rl__label_hash(r, key, len);
        return 0;
    }
    return r->profile->key_hash(key, len, hash);
}

int rl_ring_hash_key(const rl_ring_t *r, const void *key, size_t len, uint64_t *hash)
{
    if (!r || !hash || (!key && len))
        return RL_EINVAL;
    return key_position(r, key, len, hash);
}

/* The owner of a position (arguments already checked). A ring with points has the engine's
 * fine table (ix_fast), so one test picks the hot path; the rest is the table profiles and
 * empty rings. */
static inline int owner_of_position(const rl_ring_t *r, uint64_t hash, uint32_t *node)
{
    if (r->ix_fast) {
        *node = rl__owner_of(r, hash);
        return 0;
    }
    if (r->profile->lookup_hash) { /* maglev, jump: a table or a computation, not points */
        if (r->n_nodes == 0)
            return RL_EEMPTY;
        *node = r->profile->lookup_hash(r, hash & r->mask);
        return 0;
    }
    return RL_EEMPTY; /* no points: no members, or all of ketama's below 4 vnodes */
}

int rl_ring_lookup_hash(const rl_ring_t *r, uint64_t hash, uint32_t *node)
{
    if (!r || !node)
        return RL_EINVAL;
    return owner_of_position(r, hash, node);
}

/* The public functions call one another through the symbol table; this one is written out so
 * a keyed lookup is one call. Checks in the same order as hash_key, then lookup_hash. */
int rl_ring_lookup(const rl_ring_t *r, const void *key, size_t len, uint32_t *node)
{
    if (!r || (!key && len))
        return RL_EINVAL;
    uint64_t h;
    int rc = key_position(r, key, len, &h);
    if (rc)
        return rc;
    if (!node)
        return RL_EINVAL;
    return owner_of_position(r, h, node);
}

static int contains(const uint32_t *v, size_t n, uint32_t x)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

/* Checks arguments and finds the first point for a replica walk. */
static int replica_start(const rl_ring_t *r, const void *key, size_t len, const uint32_t *nodes,
                         size_t want, size_t *got, size_t *start)
{
    if (!r || !got || (!nodes && want))
        return RL_EINVAL;
    *got = 0;
    if (r->profile->lookup_hash)
        return RL_ENOTSUP; /* no clockwise order to walk */
    uint64_t h;
    int rc = rl_ring_hash_key(r, key, len, &h);
    if (rc)
        return rc;
    if (r->n_points == 0)
        return RL_EEMPTY;
    *start = rl__successor(r, h);
    return 0;
}

int rl_ring_replicas(const rl_ring_t *r, const void *key, size_t len, uint32_t *nodes, size_t want,
                     size_t *got)
{
    size_t start;
    int rc = replica_start(r, key, len, nodes, want, got, &start);
    if (rc)
        return rc;
    if (want > r->n_nodes)
        want = r->n_nodes;
    size_t n = 0;
    for (size_t k = 0; k < r->n_points && n < want; k++) {
        uint32_t node = r->owner[(start + k) % r->n_points];
        if (!contains(nodes, n, node))
            nodes[n++] = node;
    }
    *got = n;
    return 0;
}

int rl_ring_replicas_zoned(const rl_ring_t *r, const void *key, size_t len, uint32_t *nodes,
                           size_t want, size_t *got)
{
    size_t start;
    int rc = replica_start(r, key, len, nodes, want, got, &start);
    if (rc)
        return rc;
    if (want > r->n_nodes)
        want = r->n_nodes;
    size_t n = 0;
    /* First pass: one node per zone not yet used. Zones are compared by id; the chosen nodes'
     * zones are the zones used, so no extra memory is needed. */
    for (size_t k = 0; k < r->n_points && n < want; k++) {
        uint32_t node = r->owner[(start + k) % r->n_points];
        uint32_t zone = r->nodes[node].zone_id;
        int used = 0;
        for (size_t i = 0; i < n && !used; i++)
            used = r->nodes[nodes[i]].zone_id == zone;
        if (!used)
            nodes[n++] = node;
    }
    /* Second pass: the remaining distinct nodes, clockwise. */
    for (size_t k = 0; k < r->n_points && n < want; k++) {
        uint32_t node = r->owner[(start + k) % r->n_points];
        if (!contains(nodes, n, node))
            nodes[n++] = node;
    }
    *got = n;
    return 0;
}

uint64_t rl_capacity(uint64_t placed, size_t n, double c)
{
    if (n == 0)
        return 0;
    if (!(c >= 1.0)) /* also catches NaN */
        c = 1.0;
    double cap = ceil(c * (double)(placed + 1) / (double)n);
    if (!(cap < 18446744073709551616.0)) /* 2^64: +inf or too large saturates */
        return UINT64_MAX;
    return (uint64_t)cap;
}

int rl_ring_lookup_bounded_hash(const rl_ring_t *r, uint64_t hash, const uint64_t *loads, double c,
                                uint32_t *node)
{
    if (!r || !loads || !node)
        return RL_EINVAL;
    if (r->profile->lookup_hash)
        return RL_ENOTSUP; /* no clockwise order to walk */
    if (r->n_points == 0)
        return RL_EEMPTY;
    uint64_t placed = 0;
    for (size_t i = 0; i < r->n_nodes; i++) {
        if (placed + loads[i] < placed)
            return RL_ERANGE; /* loads overflow 64 bits */
        placed += loads[i];
    }
    uint64_t cap = rl_capacity(placed, r->n_nodes, c);
    size_t start = rl__successor(r, hash);
    for (size_t k = 0; k < r->n_points; k++) {
        uint32_t owner = r->owner[(start + k) % r->n_points];
        if (loads[owner] < cap) {
            *node = owner;
            return 0;
        }
    }
    /* Unreachable in exact arithmetic (n * cap > placed); double rounding at 2^53 and above
     * could get here, and then no node is below the cap. */
    return RL_ERANGE;
}

int rl_ring_lookup_bounded(const rl_ring_t *r, const void *key, size_t len, const uint64_t *loads,
                           double c, uint32_t *node)
{
    uint64_t h;
    int rc = rl_ring_hash_key(r, key, len, &h);
    if (rc)
        return rc;
    return rl_ring_lookup_bounded_hash(r, h, loads, c, node);
}
