/* SPDX-License-Identifier: BSD-2-Clause */
/* maglev: Envoy's Maglev load balancer (Eisenbud et al., NSDI 2016, pseudocode listing 1, with
 * Envoy's weighting), so a key lands on the host Envoy's Maglev table gives it.
 *
 * The table has M entries, M prime (ringlane's vnodes; Envoy's default 65537). Hosts are taken
 * in name order; host h probes offset = XXH64(h, 0) % M, then steps by skip = XXH64(h, 1) %
 * (M - 1) + 1. Rounds go over the hosts until the table is full; in round t a host of normalized
 * weight w (w / sum of weights) takes its next free entry only if t * w reaches its running
 * target, which then grows by the largest normalized weight. A key goes to table[XXH64(key) %
 * M]: one division and one load, whatever the member count. */
#include "ring_internal.h"
#include "ringlane/error.h"
#include "ringlane/hash.h"

#include <stdlib.h>
#include <string.h>

#define MAGLEV_DEFAULT_TABLE 65537u
#define MAGLEV_MAX_TABLE 5000011u /* Envoy's upper bound for table_size */

static int is_prime(uint64_t m)
{
    if (m < 2)
        return 0;
    for (uint64_t d = 2; d * d <= m; d++)
        if (m % d == 0)
            return 0;
    return 1;
}

typedef struct build_entry {
    uint32_t node;
    uint64_t offset, skip, next;
    double weight, target;
} build_entry;

static int check_table_size(uint32_t m)
{
    return is_prime(m) ? 0 : RL_EVNODES;
}

static int build_maglev(rl_ring_t *r)
{
    const uint64_t m = r->vnodes;
    if (r->hash)
        return RL_ENOTSUP; /* offset and skip need XXH64 with two seeds */
    if (r->n_nodes == 0)
        return 0;
    build_entry *e = calloc(r->n_nodes, sizeof *e);
    r->table = malloc(m * sizeof *r->table);
    if (!e || !r->table) {
        free(e);
        return RL_ENOMEM; /* the snapshot frees r->table */
    }
    r->table_len = m;

    uint64_t sum = 0;
    for (size_t n = 0; n < r->n_nodes; n++)
        sum += r->nodes[n].weight;
    double max_weight = 0.0;
    for (size_t k = 0; k < r->n_nodes; k++) {
        const rl__node *node = &r->nodes[r->by_name[k]];
        e[k].node = r->by_name[k];
        e[k].offset = rl_xxh64(node->name, node->name_len, 0) % m;
        e[k].skip = rl_xxh64(node->name, node->name_len, 1) % (m - 1) + 1;
        e[k].weight = (double)node->weight / (double)sum;
        if (e[k].weight > max_weight)
            max_weight = e[k].weight;
    }

    for (uint64_t i = 0; i < m; i++)
        r->table[i] = UINT32_MAX; /* free */
    uint64_t filled = 0;
    for (uint32_t round = 1; filled < m; round++) {
        for (size_t k = 0; k < r->n_nodes && filled < m; k++) {
            if ((double)round * e[k].weight < e[k].target)
                continue;
            e[k].target += max_weight;
            uint64_t c = (e[k].offset + e[k].skip * e[k].next) % m;
            while (r->table[c] != UINT32_MAX) {
                e[k].next++;
                c = (e[k].offset + e[k].skip * e[k].next) % m;
            }
            r->table[c] = e[k].node;
            e[k].next++;
            filled++;
        }
    }
    free(e);
    return 0;
}

static uint32_t lookup_maglev(const rl_ring_t *r, uint64_t hash)
{
    return r->table[hash % r->table_len];
}

static uint64_t label_xxh64(const void *d, size_t n)
{
    return rl_xxh64(d, n, 0);
}

const rl__profile rl__profile_maglev = {
    .info = {.name = "maglev",
             .hash = "XXH64 (libxxhash): keys seed 0; hosts: offset seed 0, skip seed 1",
             .labels = "no points: a lookup table of vnodes entries (a prime, 65537), filled by "
                       "permutations of the host names in name order, weighted",
             .rule = "table[hash % M]; replicas and bounded loads not supported",
             .compatible = "Envoy Maglev load balancer (no locality weights); members are the "
                           "host addresses",
             .default_vnodes = MAGLEV_DEFAULT_TABLE,
             .bits = 64,
             .max_vnodes = MAGLEV_MAX_TABLE,
             .min_vnodes = 2, /* the smallest prime */
             .kind = "table"},
    .successor = RL__SUCC_GE,
    .tie = RL__TIE_NAME,
    .label_hash = label_xxh64,
    .build = build_maglev,
    .lookup_hash = lookup_maglev,
    .check_vnodes = check_table_size,
    .vnodes_means = "its table size",
    .vnodes_prime = 1,
};
