/* SPDX-License-Identifier: BSD-2-Clause */
/* Balance statistics: how much of the ring each member owns. */
#include "ring_internal.h"
#include "ringlane/error.h"

#include <math.h>
#include <stdlib.h>

/* The positions point i answers for: (pos[i-1], pos[i]] under ">=", [pos[i-1], pos[i]) under
 * ">", the same length either way; point 0 takes the wrap-around arc. */
static double arc_of(const rl_ring_t *r, size_t i)
{
    double width = (double)r->mask + 1.0;
    if (r->pos[0] == r->pos[r->n_points - 1])
        return i == 0 ? width : 0.0; /* every point at one position: the first owns it all */
    if (i > 0)
        return (double)(r->pos[i] - r->pos[i - 1]);
    return (double)((r->pos[0] - r->pos[r->n_points - 1]) & r->mask);
}

/* members, min/max share and max/mean from the shares. */
static void summarize(const rl_ring_t *r, rl_ring_stats *out, const double *share)
{
    out->members = r->n_nodes;
    out->min_share = out->max_share = share[0];
    for (size_t i = 1; i < r->n_nodes; i++) {
        if (share[i] < out->min_share)
            out->min_share = share[i];
        if (share[i] > out->max_share)
            out->max_share = share[i];
    }
    out->max_mean_share = out->max_share * (double)r->n_nodes;
}

/* A point ring: each point owns the arc up to it. */
static void arc_stats(const rl_ring_t *r, rl_ring_stats *out, double *share)
{
    for (size_t i = 0; i < r->n_nodes; i++)
        share[i] = 0.0;
    double width = (double)r->mask + 1.0;
    double mean_gap = width / (double)r->n_points, sq = 0.0;
    for (size_t i = 0; i < r->n_points; i++) {
        double arc = arc_of(r, i);
        share[r->owner[i]] += arc / width;
        sq += (arc - mean_gap) * (arc - mean_gap);
    }
    out->points = r->n_points;
    out->gap_cv = sqrt(sq / (double)r->n_points) / mean_gap;
}

/* A lookup table (maglev): each entry answers 1 / table_len of the hashes. Its "points" are the
 * entries, all one apart, so the gaps do not vary. */
static void table_stats(const rl_ring_t *r, rl_ring_stats *out, double *share)
{
    for (size_t i = 0; i < r->n_nodes; i++)
        share[i] = 0.0;
    for (size_t i = 0; i < r->table_len; i++)
        share[r->table[i]] += 1.0 / (double)r->table_len;
    out->points = r->table_len;
    out->gap_cv = 0.0;
}

int rl_ring_stats_get(const rl_ring_t *r, rl_ring_stats *out, double *shares)
{
    if (!r || !out)
        return RL_EINVAL;
    if (r->profile->lookup_hash && r->n_nodes && !r->table)
        return RL_ENOTSUP; /* computed (jump): no arcs or entries to measure */
    if (r->n_points == 0 && !r->table)
        return RL_EEMPTY;
    double *share = shares ? shares : calloc(r->n_nodes, sizeof *share);
    if (!share)
        return RL_ENOMEM;
    if (r->table)
        table_stats(r, out, share);
    else
        arc_stats(r, out, share);
    summarize(r, out, share);
    if (!shares)
        free(share);
    return 0;
}
