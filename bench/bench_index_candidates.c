/* SPDX-License-Identifier: BSD-2-Clause */
/* bench_index_candidates: the lookup structures measured before choosing ringlane's engine,
 * each over the same sorted points of a default-profile ring, pre-hashed positions, owner
 * included.
 *
 *   lower_bound       plain binary search (the engine before this one)
 *   branchless        binary search with a conditional move instead of a branch
 *   eytzinger         the points in BFS order, branchless, prefetching 4 levels ahead
 *   coarse            a table on the top ceil(log2 n) bits + a search between two entries
 *   coarse+fine/F     coarse, plus a fine table of F x 2^ceil(log2 n) buckets whose entry is
 *                     the owner itself when one owner answers the whole bucket
 *   ringlane          the shipped engine through rl_ring_lookup_hash (coarse+fine/4)
 *
 * Usage: bench_index_candidates [--reps R] [--runs N] */
#define _POSIX_C_SOURCE 200809L
#include "bench_common.h"

#define NIN (1u << 16)
static uint64_t in_hash[NIN];

typedef struct cand {
    bench_points p;
    const rl_ring_t *ring;
    /* eytzinger: e[1..n] positions in BFS order, eo[] their owners */
    uint64_t *e;
    uint32_t *eo;
    uint32_t e_first_owner;
    /* coarse / fine tables */
    unsigned cshift, fshift;
    uint32_t *start, *fine;
} cand;

static size_t eytz_fill(cand *c, size_t i, size_t k)
{
    if (k <= c->p.n) {
        i = eytz_fill(c, i, 2 * k);
        c->e[k] = c->p.pos[i];
        c->eo[k] = c->p.owner[i];
        i++;
        i = eytz_fill(c, i, 2 * k + 1);
    }
    return i;
}

static unsigned ceil_log2(size_t n)
{
    unsigned b = 0;
    while (((size_t)1 << b) < n)
        b++;
    return b;
}

/* The same tables as lib/lookup_index.c, with the fine table's size as a parameter. */
static double build_tables(cand *c, unsigned extra)
{
    size_t n = c->p.n;
    unsigned j = ceil_log2(n), k = j + extra;
    size_t nc = (size_t)1 << j, nf = (size_t)1 << k;
    c->cshift = 64 - j;
    c->fshift = 64 - k;
    free(c->start);
    free(c->fine);
    c->start = malloc((nc + 1) * sizeof *c->start);
    c->fine = malloc(nf * sizeof *c->fine);
    size_t b = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t bi = c->p.pos[i] >> c->cshift; b <= bi; b++)
            c->start[b] = (uint32_t)i;
    for (; b <= nc; b++)
        c->start[b] = (uint32_t)n;
    size_t uniform = 0;
    b = 0;
    uint64_t span = (UINT64_C(1) << c->fshift) - 1;
    for (size_t first = 0; first < n;) {
        size_t bi = c->p.pos[first] >> c->fshift;
        for (; b < bi; b++, uniform++)
            c->fine[b] = 0x80000000u | c->p.owner[first];
        uint64_t hi = ((uint64_t)bi << c->fshift) + span;
        size_t last = first, next;
        while (last < n && c->p.pos[last] < hi)
            last++;
        next = last;
        while (next < n && (c->p.pos[next] >> c->fshift) == bi)
            next++;
        int same = 1;
        for (size_t i = first + 1; i <= last && same; i++)
            same = c->p.owner[i == n ? 0 : i] == c->p.owner[first];
        c->fine[b++] = same ? 0x80000000u | c->p.owner[first] : (uint32_t)first;
        uniform += same;
        first = next;
    }
    for (; b < nf; b++, uniform++)
        c->fine[b] = 0x80000000u | c->p.owner[0];
    return (double)uniform / (double)nf;
}

static inline uint32_t coarse_owner(const cand *c, uint64_t h)
{
    size_t b = h >> c->cshift, lo = c->start[b], hi = c->start[b + 1];
    while (hi - lo > 8) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->p.pos[mid] < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    while (lo < hi && c->p.pos[lo] < h)
        lo++;
    return c->p.owner[lo == c->p.n ? 0 : lo];
}

static inline uint32_t fine_owner(const cand *c, uint64_t h)
{
    uint32_t e = c->fine[h >> c->fshift];
    if (e & 0x80000000u)
        return e & 0x7FFFFFFFu;
    size_t n = c->p.n, end = e + 4 < n ? e + 4 : n;
    for (size_t i = e; i < end; i++)
        if (c->p.pos[i] >= h)
            return c->p.owner[i];
    if (end == n)
        return c->p.owner[0];
    return coarse_owner(c, h);
}

static inline uint32_t branchless_owner(const cand *c, uint64_t h)
{
    const uint64_t *base = c->p.pos;
    size_t n = c->p.n;
    while (n > 1) {
        size_t half = n / 2;
        base = base[half - 1] < h ? base + half : base;
        n -= half;
    }
    size_t i = (size_t)(base - c->p.pos) + (*base < h);
    return c->p.owner[i == c->p.n ? 0 : i];
}

static inline uint32_t eytz_owner(const cand *c, uint64_t h)
{
    size_t k = 1, n = c->p.n;
    while (k <= n) {
        __builtin_prefetch(c->e + 16 * k);
        k = 2 * k + (c->e[k] < h);
    }
    k >>= __builtin_ffsll((long long)~k);
    return k ? c->eo[k] : c->e_first_owner;
}

#define LOOP(name, expr)                                                                           \
    static __attribute__((noinline)) uint64_t name(const void *arg, size_t reps)                   \
    {                                                                                              \
        const cand *c = arg;                                                                       \
        uint64_t acc = 0;                                                                          \
        for (size_t rep = 0; rep < reps; rep++)                                                    \
            for (size_t i = 0; i < NIN; i++)                                                       \
                acc += (expr);                                                                     \
        return acc;                                                                                \
    }

LOOP(loop_lower_bound, bench_lower_bound(&c->p, in_hash[i]))
LOOP(loop_branchless, branchless_owner(c, in_hash[i]))
LOOP(loop_eytzinger, eytz_owner(c, in_hash[i]))
LOOP(loop_coarse, coarse_owner(c, in_hash[i]))
LOOP(loop_fine, fine_owner(c, in_hash[i]))
LOOP(loop_ringlane, ({
         uint32_t node;
         rl_ring_lookup_hash(c->ring, in_hash[i], &node);
         node;
     }))

int main(int argc, char **argv)
{
    size_t reps = 16;
    int runs = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--reps") == 0)
            reps = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--runs") == 0)
            runs = atoi(argv[i + 1]);
    }
    if (reps < 1 || runs < 1)
        return 2;
    uint64_t seed = 5, sink = 0;
    for (size_t i = 0; i < NIN; i++)
        in_hash[i] = rl_mix64(seed += 0x9E3779B97F4A7C15ull);
    static const struct {
        size_t nodes;
        uint32_t vnodes;
    } configs[] = {{10, 160}, {100, 160}, {1000, 160}, {1000, 256}};
    printf("bench_index_candidates: ns per pre-hashed lookup (owner included), best of %d runs "
           "of %zu x %u lookups; ratio = lower_bound time / candidate time\n",
           runs, reps, NIN);
    for (size_t ci = 0; ci < sizeof configs / sizeof configs[0]; ci++) {
        rl_ring_t *r = bench_ring(NULL, configs[ci].nodes, configs[ci].vnodes);
        cand c = {.p = bench_points_of(r), .ring = r};
        size_t n = c.p.n;
        c.e = malloc((n + 1 + 16 * (n + 1)) * sizeof *c.e); /* room for prefetches past the end */
        c.eo = malloc((n + 1) * sizeof *c.eo);
        eytz_fill(&c, 0, 1);
        c.e_first_owner = c.p.owner[0];
        printf("\n%zu points (%zu nodes x %u vnodes)\n", n, configs[ci].nodes, configs[ci].vnodes);
        printf("  %-22s %9s %9s %13s %10s\n", "candidate", "ns", "vs lb", "table B/pt", "one read");
        double lb = bench_ns(loop_lower_bound, &c, reps, NIN, runs, &sink);
        printf("  %-22s %9.2f %8.2fx %13s %10s\n", "lower_bound", lb, 1.0, "0", "");
        double t = bench_ns(loop_branchless, &c, reps, NIN, runs, &sink);
        printf("  %-22s %9.2f %8.2fx %13s %10s\n", "branchless", t, lb / t, "0", "");
        t = bench_ns(loop_eytzinger, &c, reps, NIN, runs, &sink);
        printf("  %-22s %9.2f %8.2fx %13.1f %10s\n", "eytzinger", t, lb / t, 12.0, "");
        build_tables(&c, 0);
        t = bench_ns(loop_coarse, &c, reps, NIN, runs, &sink);
        double cbytes = (double)(((size_t)1 << ceil_log2(n)) + 1) * 4 / (double)n;
        printf("  %-22s %9.2f %8.2fx %13.1f %10s\n", "coarse", t, lb / t, cbytes, "");
        for (unsigned extra = 0; extra <= 3; extra++) {
            double hit = build_tables(&c, extra);
            t = bench_ns(loop_fine, &c, reps, NIN, runs, &sink);
            char name[32], hits[16];
            snprintf(name, sizeof name, "coarse+fine/%u", 1u << extra);
            snprintf(hits, sizeof hits, "%.0f%%", hit * 100);
            double fbytes = (double)((size_t)1 << (ceil_log2(n) + extra)) * 4 / (double)n;
            printf("  %-22s %9.2f %8.2fx %13.1f %10s\n", name, t, lb / t, cbytes + fbytes, hits);
        }
        t = bench_ns(loop_ringlane, &c, reps, NIN, runs, &sink);
        printf("  %-22s %9.2f %8.2fx %13s %10s\n", "ringlane (shipped)", t, lb / t, "", "");
        free(c.e);
        free(c.eo);
        free(c.start);
        free(c.fine);
        free(c.p.pos);
        free(c.p.owner);
        rl_ring_free(r);
    }
    return sink == 42;
}
