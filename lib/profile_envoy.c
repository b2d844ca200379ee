/* SPDX-License-Identifier: BSD-2-Clause */
/* envoy: Envoy's ring_hash load balancer (xxHash, no locality weighting), so a cluster routed by
 * Envoy and a ringlane client pick the same host for the same hash.
 *
 * Envoy normalizes weights (w / sum), scales them so the lightest host gets a whole number of
 * points on a ring of at least minimum_ring_size (ringlane's vnodes; Envoy's default 1024) and
 * at most maximum_ring_size (Envoy's default, 8 Mi), then walks the hosts in order with running
 * sums: host k adds points "<address>_0", "<address>_1", ... while the points so far are below
 * the sum of scale * weight over hosts 0..k. Point positions are XXH64(label, seed 0). */
#include "ring_internal.h"
#include "ringlane/error.h"
#include "ringlane/hash.h"

#include <math.h>
#include <stdio.h>

#define ENVOY_MAX_RING_SIZE 8388608u /* Envoy's default maximum_ring_size */

/* The ring's scale (points per unit of normalized weight) and the sum of the weights. */
static double scale_of(const rl_ring_t *r, uint64_t *sum_out)
{
    uint64_t sum = 0;
    for (size_t n = 0; n < r->n_nodes; n++)
        sum += r->nodes[n].weight;
    double min_weight = 1.0;
    for (size_t n = 0; n < r->n_nodes; n++)
        min_weight = fmin(min_weight, (double)r->nodes[n].weight / (double)sum);
    *sum_out = sum;
    return fmin(ceil(min_weight * (double)r->vnodes) / min_weight, (double)ENVOY_MAX_RING_SIZE);
}

/* emit_envoy's count without its labels: host n ends at the first whole number of points at
 * or above its running target (current and the counts are whole numbers, exact in a double).
 * At most about ENVOY_MAX_RING_SIZE, whatever the weights. */
static int count_envoy(const rl_ring_t *r, uint64_t *points)
{
    *points = 0;
    if (r->n_nodes == 0)
        return 0;
    uint64_t sum;
    const double scale = scale_of(r, &sum);
    double current = 0.0, target = 0.0;
    for (uint32_t n = 0; n < r->n_nodes; n++) {
        target += scale * ((double)r->nodes[n].weight / (double)sum);
        current = fmax(current, ceil(target));
    }
    *points = (uint64_t)current;
    return 0;
}

static int emit_envoy(const rl_ring_t *r, rl__points *out)
{
    if (r->n_nodes == 0)
        return 0;
    uint64_t sum;
    const double scale = scale_of(r, &sum);

    char label[RL_NAME_MAX + 32];
    double current = 0.0, target = 0.0;
    for (uint32_t n = 0; n < r->n_nodes; n++) {
        target += scale * ((double)r->nodes[n].weight / (double)sum);
        for (uint32_t i = 0; current < target; i++, current += 1.0) {
            int len = snprintf(label, sizeof label, "%s_%u", r->nodes[n].name, i);
            int rc = rl__points_push(out, rl__label_hash(r, label, (size_t)len), n, i);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static uint64_t label_xxh64(const void *d, size_t n)
{
    return rl_xxh64(d, n, 0);
}

const rl__profile rl__profile_envoy = {
    .info = {.name = "envoy",
             .hash = "XXH64 seed 0 (libxxhash), labels and keys",
             .labels = "<address>_<i>; vnodes = minimum_ring_size (1024), maximum 8 Mi; "
                       "weights normalized and scaled, points by running sums in member order",
             .rule = "first point >= hash, wrap",
             .compatible = "Envoy ring_hash load balancer (xxHash, no locality weights); "
                           "members are the host addresses",
             .default_vnodes = 1024,
             .bits = 64,
             .max_vnodes = ENVOY_MAX_RING_SIZE,
             .min_vnodes = 1,
             .kind = "ring"},
    .successor = RL__SUCC_GE,
    .tie = RL__TIE_NAME,
    .label_hash = label_xxh64,
    .emit = emit_envoy,
    .count = count_envoy,
    .vnodes_means = "its minimum_ring_size",
};
