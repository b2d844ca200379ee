/* SPDX-License-Identifier: BSD-2-Clause */
/* What a membership change costs under each profile: keys that move, and in particular keys
 * that move between nodes that were there before and after (churn no change asked for).
 *
 * Fleets: 10 nodes "10.0.0.<i>:11211" of weights 1,2,3,4,1,2,3,4,1,2 (or all 1), joined by an
 * 11th of weight 2 (or 1); 200,000 keys "key:<i>". The ideal is the new node's share moving to
 * it and nothing else. Also Maglev's balance (max/avg table entries) and the fraction of the
 * survivors' keys that move when one of 20 or 100 equal hosts is removed.
 *
 * Usage: bench_profile_moves [keys]. Counts only: no timing, the output is deterministic. */
#include "ringlane/ringlane.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NODES 128

static char names[MAX_NODES][32];

static rl_ring_t *ring_of(const char *profile, size_t n, const uint32_t *weights)
{
    rl_member m[MAX_NODES];
    for (size_t i = 0; i < n; i++)
        m[i] = (rl_member){names[i], weights ? weights[i] : 1, NULL};
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = profile;
    rl_ring_t *r = NULL;
    int rc = rl_ring_build(m, n, &o, &r);
    return rc ? NULL : r;
}

typedef struct moves {
    unsigned long moved, between_survivors, to_new;
} moves;

/* Routes `keys` keys on both rings; a key is "between survivors" when its old and new owners
 * are both members of both rings. */
static moves count_moves(const rl_ring_t *a, const rl_ring_t *b, unsigned long keys)
{
    moves mv = {0, 0, 0};
    char key[32];
    for (unsigned long i = 0; i < keys; i++) {
        int len = snprintf(key, sizeof key, "key:%lu", i);
        uint32_t na, nb, tmp;
        rl_ring_lookup(a, key, (size_t)len, &na);
        rl_ring_lookup(b, key, (size_t)len, &nb);
        const char *from = rl_ring_node_name(a, na), *to = rl_ring_node_name(b, nb);
        if (strcmp(from, to) == 0)
            continue;
        mv.moved++;
        if (rl_ring_find(a, to, &tmp) == 0 && rl_ring_find(b, from, &tmp) == 0)
            mv.between_survivors++;
        else if (rl_ring_find(a, to, &tmp) != 0)
            mv.to_new++;
    }
    return mv;
}

static void join(const char *title, const uint32_t *weights, unsigned long keys)
{
    printf("\n%s: 10 -> 11 nodes, %lu keys\n", title, keys);
    printf("%-11s %10s %10s %18s\n", "profile", "moved", "to new", "between survivors");
    for (size_t p = 0; p < rl_profile_count(); p++) {
        const char *name = rl_profile_at(p)->name;
        rl_ring_t *a = ring_of(name, 10, weights), *b = ring_of(name, 11, weights);
        if (!a || !b || strcmp(name, "turnstone") == 0) {
            printf("%-11s %s\n", name,
                   strcmp(name, "turnstone") == 0 ? "(keys are workspace ids: not measured)"
                                                  : "(no weights: not built)");
        } else {
            moves mv = count_moves(a, b, keys);
            printf("%-11s %9.3f%% %9.3f%% %9lu = %.3f%%\n", name, 100.0 * mv.moved / keys,
                   100.0 * mv.to_new / keys, mv.between_survivors,
                   100.0 * mv.between_survivors / keys);
        }
        rl_ring_free(a);
        rl_ring_free(b);
    }
}

static void maglev(size_t n, unsigned long keys)
{
    rl_ring_t *r = ring_of("maglev", n, NULL), *smaller;
    rl_ring_stats st;
    rl_ring_stats_get(r, &st, NULL);
    rl_ring_remove(r, names[n / 2], &smaller);
    unsigned long survivors = 0, moved = 0;
    char key[32];
    for (unsigned long i = 0; i < keys; i++) {
        int len = snprintf(key, sizeof key, "key:%lu", i);
        uint32_t a, b;
        rl_ring_lookup(r, key, (size_t)len, &a);
        rl_ring_lookup(smaller, key, (size_t)len, &b);
        if (strcmp(rl_ring_node_name(r, a), names[n / 2]) == 0)
            continue;
        survivors++;
        moved += strcmp(rl_ring_node_name(r, a), rl_ring_node_name(smaller, b)) != 0;
    }
    printf("maglev M=65537, %3zu hosts: max/avg entries %.5f; remove one: %.3f%% of the "
           "survivors' keys move\n",
           n, st.max_mean_share, 100.0 * moved / survivors);
    rl_ring_free(smaller);
    rl_ring_free(r);
}

int main(int argc, char **argv)
{
    unsigned long keys = argc > 1 ? strtoul(argv[1], NULL, 10) : 200000;
    if (keys == 0)
        keys = 200000;
    for (int i = 0; i < MAX_NODES; i++)
        snprintf(names[i], sizeof names[i], "10.0.%d.%d:11211", i / 200, i % 200 + 1);
    const uint32_t weights[] = {1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 2};
    join("weighted (1,2,3,4,1,2,3,4,1,2 + 2)", weights, keys);
    join("equal weights", NULL, keys);
    printf("\n");
    maglev(20, keys);
    maglev(100, keys);
    return 0;
}
