/* SPDX-License-Identifier: BSD-2-Clause */
/* bench_lookup: nanoseconds per lookup, ringlane's engine against the usual baselines, in one
 * run so the ratios hold on a noisy machine.
 *
 * Per configuration (10, 100, 1000 nodes x 160 vnodes; 1000 x 256 = 256,000 points), for a
 * pre-hashed position and for a 16-byte key (xxh3 included): ringlane (rl_ring_lookup_hash /
 * rl_ring_lookup, and through the snapshot holder), a plain lower_bound over the same points,
 * libmemcached's memcached_generate_hash (ketama, weighted; N <= 100, it aborts above 100
 * servers in this mode), jump hash and Maglev (ringlane's "jump" / "maglev" profiles when the
 * library has them, else local baselines, labelled). Ratios are each engine's time over
 * ringlane's. Also the build time and memory per point.
 *
 * Usage: bench_lookup [--reps R] [--runs N] [--only POINTS]
 *   --reps: passes over the 65,536 inputs per timed run (default 16); --runs: timed runs, the
 *   best is kept (default 3); --only: just the configuration with that many points.
 * Instruction counts: valgrind --tool=callgrind bench_lookup --reps 1 --runs 1, then each
 * loop_* function's inclusive count / (65,536 x reps) is instructions per lookup. */
#define _POSIX_C_SOURCE 200809L
#include "bench_common.h"
#include "ring_internal.h" /* the engine's table size, for memory per point */

#include <libmemcached/memcached.h>
#include <xxhash.h>

#define NIN (1u << 16) /* inputs per pass: 512 KiB of hashes, 1 MiB of keys */

static uint64_t in_hash[NIN];
static unsigned char in_key[NIN][16];

/* --- jump hash and Maglev, local baselines for when the library has no such profile --- */

/* Lamping & Veach, "A Fast, Minimal Memory, Consistent Hash Algorithm" (2014). */
static uint32_t jump_hash(uint64_t key, uint32_t buckets)
{
    int64_t b = -1, j = 0;
    while (j < (int64_t)buckets) {
        b = j;
        key = key * 2862933555777941757ULL + 1;
        j = (int64_t)((double)(b + 1) * ((double)(1LL << 31) / (double)((key >> 33) + 1)));
    }
    return (uint32_t)b;
}

/* Maglev (Eisenbud et al., NSDI 2016): each backend fills the table by its own permutation. */
#define MAGLEV_M 65537u
typedef struct maglev {
    uint32_t table[MAGLEV_M];
} maglev;

static maglev *maglev_build(size_t n)
{
    maglev *m = malloc(sizeof *m);
    uint64_t *offset = malloc(n * sizeof *offset), *skip = malloc(n * sizeof *skip);
    uint64_t *next = calloc(n, sizeof *next);
    if (!m || !offset || !skip || !next)
        abort();
    for (size_t i = 0; i < n; i++) {
        char name[16];
        int len = snprintf(name, sizeof name, "node-%zu", i);
        offset[i] = XXH64(name, (size_t)len, 0) % MAGLEV_M;
        skip[i] = XXH64(name, (size_t)len, 1) % (MAGLEV_M - 1) + 1;
    }
    memset(m->table, 0xFF, sizeof m->table);
    for (size_t filled = 0;;) {
        for (size_t i = 0; i < n; i++) {
            uint64_t c;
            do
                c = (offset[i] + next[i]++ * skip[i]) % MAGLEV_M;
            while (m->table[c] != UINT32_MAX);
            m->table[c] = (uint32_t)i;
            if (++filled == MAGLEV_M)
                goto done;
        }
    }
done:
    free(offset);
    free(skip);
    free(next);
    return m;
}

/* --- the timed loops, one function each so callgrind can count them --- */

typedef struct ctx {
    const rl_ring_t *ring;
    rl_snapshot_t *snap;
    bench_points pts;
    const memcached_st *mc;
    uint32_t nodes;
    const maglev *mg;
    rl_ring_view view;
} ctx;

#define LOOP(name, body)                                                                           \
    static __attribute__((noinline)) uint64_t name(const void *arg, size_t reps)                   \
    {                                                                                              \
        const ctx *c = arg;                                                                        \
        uint64_t acc = 0;                                                                          \
        for (size_t rep = 0; rep < reps; rep++)                                                    \
            for (size_t i = 0; i < NIN; i++) {                                                     \
                uint32_t node = 0;                                                                 \
                body;                                                                              \
                acc += node;                                                                       \
            }                                                                                      \
        (void)c;                                                                                   \
        return acc;                                                                                \
    }

LOOP(loop_ringlane_hash, rl_ring_lookup_hash(c->ring, in_hash[i], &node))
LOOP(loop_snapshot_hash, rl_snapshot_lookup_hash(c->snap, in_hash[i], &node))
LOOP(loop_view_hash, rl_ring_view_lookup_hash(&c->view, in_hash[i], &node))
LOOP(loop_lower_bound_hash, node = bench_lower_bound(&c->pts, in_hash[i]))
LOOP(loop_jump_local_hash, node = jump_hash(in_hash[i], c->nodes))
LOOP(loop_maglev_local_hash, node = c->mg->table[in_hash[i] % MAGLEV_M])

LOOP(loop_ringlane_key, rl_ring_lookup(c->ring, in_key[i], 16, &node))
LOOP(loop_snapshot_key, rl_snapshot_lookup(c->snap, in_key[i], 16, &node))
LOOP(loop_view_key, rl_ring_view_lookup_hash(&c->view, XXH3_64bits(in_key[i], 16), &node))
LOOP(loop_lower_bound_key, node = bench_lower_bound(&c->pts, XXH3_64bits(in_key[i], 16)))
LOOP(loop_memcached_key, node = memcached_generate_hash(c->mc, (const char *)in_key[i], 16))
LOOP(loop_jump_local_key, node = jump_hash(XXH3_64bits(in_key[i], 16), c->nodes))
LOOP(loop_maglev_local_key, node = c->mg->table[XXH3_64bits(in_key[i], 16) % MAGLEV_M])

/* --- one configuration --- */

static size_t g_reps = 16;
static int g_runs = 3;
static uint64_t g_sink;

static double time_loop(bench_loop fn, const ctx *c)
{
    return bench_ns(fn, c, g_reps, NIN, g_runs, &g_sink);
}

static void row(const char *name, double hashed, double keyed, double base_h, double base_k)
{
    char h[32] = "n/a", hr[32] = "", k[32] = "n/a", kr[32] = "";
    if (hashed > 0) {
        snprintf(h, sizeof h, "%.2f", hashed);
        snprintf(hr, sizeof hr, "%.2fx", hashed / base_h);
    }
    if (keyed > 0) {
        snprintf(k, sizeof k, "%.2f", keyed);
        snprintf(kr, sizeof kr, "%.2fx", keyed / base_k);
    }
    printf("  %-44s %10s %8s %12s %8s\n", name, h, hr, k, kr);
}

static memcached_st *memcached_ring(size_t nodes)
{
    memcached_st *mc = memcached_create(NULL);
    if (!mc)
        abort();
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                           MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA);
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1);
    for (size_t i = 0; i < nodes; i++) {
        char name[16];
        snprintf(name, sizeof name, "node-%zu", i);
        if (memcached_server_add_with_weight(mc, name, 11211, 1) != MEMCACHED_SUCCESS)
            abort();
    }
    return mc;
}

/* ns per lookup of a ringlane profile ("jump", "maglev") over the same members, or -1. */
static void profile_rows(const char *profile, size_t nodes, bench_loop local_h, bench_loop local_k,
                         const ctx *base, double rh, double rk)
{
    char label[64];
    if (rl_profile_find(profile)) {
        ctx c = *base;
        /* vnodes means the table size for maglev and nothing for jump: their defaults. */
        rl_ring_t *r = bench_ring(profile, nodes, RL_VNODES_PROFILE);
        c.ring = r;
        snprintf(label, sizeof label, "%s (ringlane profile%s)", profile,
                 strcmp(profile, "maglev") == 0 ? ", M = 65537" : "");
        row(label, time_loop(loop_ringlane_hash, &c), time_loop(loop_ringlane_key, &c), rh, rk);
        rl_ring_free(r);
        return;
    }
    snprintf(label, sizeof label, "%s (local baseline%s)", profile,
             strcmp(profile, "maglev") == 0 ? ", M = 65537" : "");
    row(label, time_loop(local_h, base), time_loop(local_k, base), rh, rk);
}

static void run_config(size_t nodes, uint32_t vnodes)
{
    /* Build time: the best of five builds. */
    double build = 1e30;
    rl_ring_t *ring = NULL;
    for (int i = 0; i < 5; i++) {
        rl_member *m = bench_members(nodes);
        rl_ring_options o;
        rl_ring_options_init(&o);
        o.vnodes = vnodes;
        rl_ring_t *r;
        double t = bench_now();
        if (rl_ring_build(m, nodes, &o, &r) != 0)
            abort();
        t = bench_now() - t;
        free(m);
        if (t < build)
            build = t;
        if (ring)
            rl_ring_free(ring);
        ring = r;
    }
    size_t n = rl_ring_point_count(ring);
    double engine_bpp = (double)ring->ix_bytes / (double)n;
    printf("\n%zu nodes x %u vnodes = %zu points (profile default)\n", nodes, vnodes, n);
    printf("  build %.2f ms (best of 5); memory per point: %.1f B points + %.1f B lookup "
           "tables = %.1f B\n",
           build * 1e3, 12.0, engine_bpp, 12.0 + engine_bpp);

    ctx c = {.ring = ring, .pts = bench_points_of(ring), .nodes = (uint32_t)nodes};
    rl_ring_t *copy = bench_ring(NULL, nodes, vnodes); /* the holder owns its own ring */
    if (rl_snapshot_create(copy, &c.snap) != 0)
        abort();
    c.mg = maglev_build(nodes);

    printf("  %-44s %10s %8s %12s %8s\n", "engine", "hashed ns", "ratio", "16-B key ns", "ratio");
    double rh = time_loop(loop_ringlane_hash, &c), rk = time_loop(loop_ringlane_key, &c);
    row("ringlane (rl_ring_lookup_hash / _lookup)", rh, rk, rh, rk);
    if (rl_ring_view_init(ring, &c.view) != 0)
        abort();
    row("ringlane view, inlined (+ xxh3 inlined)", time_loop(loop_view_hash, &c),
        time_loop(loop_view_key, &c), rh, rk);
    row("ringlane via rl_snapshot_lookup[_hash]", time_loop(loop_snapshot_hash, &c),
        time_loop(loop_snapshot_key, &c), rh, rk);
    row("plain lower_bound, same points (+ xxh3)", time_loop(loop_lower_bound_hash, &c),
        time_loop(loop_lower_bound_key, &c), rh, rk);
    if (nodes <= 100) {
        memcached_st *mc = memcached_ring(nodes);
        c.mc = mc;
        row("libmemcached memcached_generate_hash", -1, time_loop(loop_memcached_key, &c), rh, rk);
        memcached_free(mc);
    } else {
        row("libmemcached (n/a above 100 servers)", -1, -1, rh, rk);
    }
    profile_rows("jump", nodes, loop_jump_local_hash, loop_jump_local_key, &c, rh, rk);
    profile_rows("maglev", nodes, loop_maglev_local_hash, loop_maglev_local_key, &c, rh, rk);

    free((void *)c.mg);
    free(c.pts.pos);
    free(c.pts.owner);
    rl_snapshot_free(c.snap);
    rl_ring_free(ring);
}

int main(int argc, char **argv)
{
    size_t only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            g_reps = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            g_runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: bench_lookup [--reps R] [--runs N] [--only POINTS]\n");
            return 2;
        }
    }
    if (g_reps < 1 || g_runs < 1)
        return 2;
    uint64_t seed = 1;
    for (size_t i = 0; i < NIN; i++) {
        seed += 0x9E3779B97F4A7C15ull;
        in_hash[i] = rl_mix64(seed);
        uint64_t a = rl_mix64(seed ^ 0xABCDEF), b = rl_mix64(seed + 17);
        memcpy(in_key[i], &a, 8);
        memcpy(in_key[i] + 8, &b, 8);
    }
    printf("bench_lookup: %u inputs per pass, %zu passes per run, best of %d runs; ratio = "
           "engine time / ringlane time\n",
           NIN, g_reps, g_runs);
    static const struct {
        size_t nodes;
        uint32_t vnodes;
    } configs[] = {{10, 160}, {100, 160}, {1000, 160}, {1000, 256}};
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
        if (!only || only == configs[i].nodes * configs[i].vnodes)
            run_config(configs[i].nodes, configs[i].vnodes);
    return g_sink == 42; /* keeps the answers alive */
}
