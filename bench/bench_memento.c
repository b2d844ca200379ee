/* SPDX-License-Identifier: BSD-2-Clause */
/* bench_memento: the profiles a dispatcher's lanes can take, at lane scale (1,024 and 65,536
 * members "lane-<i>"): build time, heap per member, ns per lookup of a pre-hashed key (through
 * rl_ring_lookup_hash and the inline view), and for memento the same after removing members at
 * random positions (seed 26) one rl_ring_remove at a time, as a dispatcher does, with the time
 * of one remove and one add.
 *
 * Usage: bench_memento [--reps R] [--runs N] [--only MEMBERS]
 *   --reps: passes over the 65,536 hashes per timed run (default 16); --runs: timed runs, the
 *   best is kept (default 3); --only: just that member count (1024 or 65536).
 * Heap: glibc's mallinfo2 (in-use bytes, large blocks included) before and after the build,
 * the members' names passed in not counted; after removes, the whole new snapshot per member
 * (its members, names and memento's record of the removed buckets). */
#define _GNU_SOURCE
#include "bench_common.h"
#include "ringlane/ring_view.h"

#include <malloc.h>

#define NIN (1u << 16)

static uint64_t in_hash[NIN];
static size_t g_reps = 16;
static int g_runs = 3;

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static size_t heap_bytes(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static char (*names)[16];

static rl_member *lanes(size_t n)
{
    rl_member *m = calloc(n, sizeof *m);
    if (!m)
        abort();
    for (size_t i = 0; i < n; i++)
        m[i] = (rl_member){names[i], 1, NULL};
    return m;
}

/* Builds the ring (best of 5 for the time) and measures its heap. */
static rl_ring_t *build(const char *profile, size_t n, double *ms, double *bytes_per_member)
{
    rl_member *m = lanes(n);
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = profile;
    rl_ring_t *r = NULL;
    *ms = 1e30;
    for (int i = 0; i < 5; i++) {
        rl_ring_free(r);
        r = NULL;
        size_t heap = heap_bytes();
        double t = bench_now();
        if (rl_ring_build(m, n, &o, &r) != 0)
            abort();
        t = (bench_now() - t) * 1e3;
        *bytes_per_member = (double)(heap_bytes() - heap) / (double)n;
        if (t < *ms)
            *ms = t;
    }
    free(m);
    return r;
}

static uint64_t loop_lookup(const void *ctx, size_t reps)
{
    const rl_ring_t *r = ctx;
    uint64_t sum = 0;
    for (size_t k = 0; k < reps; k++)
        for (size_t i = 0; i < NIN; i++) {
            uint32_t node;
            rl_ring_lookup_hash(r, in_hash[i], &node);
            sum += node;
        }
    return sum;
}

static uint64_t loop_view(const void *ctx, size_t reps)
{
    rl_ring_view v;
    if (rl_ring_view_init(ctx, &v) != 0)
        abort();
    uint64_t sum = 0;
    for (size_t k = 0; k < reps; k++)
        for (size_t i = 0; i < NIN; i++) {
            uint32_t node;
            rl_ring_view_lookup_hash(&v, in_hash[i], &node);
            sum += node;
        }
    return sum;
}

static uint64_t sink;

static void row(const char *label, const rl_ring_t *r, double build_ms, double bytes)
{
    double ns = bench_ns(loop_lookup, r, g_reps, NIN, g_runs, &sink);
    double view = bench_ns(loop_view, r, g_reps, NIN, g_runs, &sink);
    if (build_ms >= 0)
        printf("  %-34s %9.2f %11.1f %9.1f %9.1f\n", label, build_ms, bytes, ns, view);
    else
        printf("  %-34s %9s %11.1f %9.1f %9.1f\n", label, "-", bytes, ns, view);
}

/* memento after `removes` members left at random positions, one rl_ring_remove each; then the
 * time of one more remove and of the add that restores it. */
static void memento_after_removes(rl_ring_t *start, size_t n, size_t removes)
{
    uint64_t seed = 26;
    rl_ring_t *r = start, *next;
    size_t heap = heap_bytes();
    for (size_t i = 0; i < removes; i++) {
        uint32_t gone = (uint32_t)(splitmix(&seed) % rl_ring_member_count(r));
        if (rl_ring_remove(r, rl_ring_node_name(r, gone), &next) != 0)
            abort();
        if (r != start)
            rl_ring_free(r);
        r = next;
    }
    double bytes = ((double)heap_bytes() - (double)heap) / (double)rl_ring_member_count(r);
    double t = bench_now();
    if (rl_ring_remove(r, rl_ring_node_name(r, (uint32_t)(n / 3 % rl_ring_member_count(r))),
                       &next) != 0)
        abort();
    double remove_ms = (bench_now() - t) * 1e3;
    rl_ring_t *back;
    t = bench_now();
    if (rl_ring_add(next, &(rl_member){"lane-new", 1, NULL}, &back) != 0)
        abort();
    double add_ms = (bench_now() - t) * 1e3;
    char label[64];
    snprintf(label, sizeof label, "memento, %zu removed (%.1f%%)", removes,
             100.0 * (double)removes / (double)n);
    row(label, r, -1, bytes);
    printf("  %-34s remove %.2f ms, add %.2f ms (each a new snapshot of all members)\n", "",
           remove_ms, add_ms);
    rl_ring_free(back);
    rl_ring_free(next);
    if (r != start)
        rl_ring_free(r);
}

static void run(size_t n)
{
    printf("\n%zu members\n", n);
    printf("  %-34s %9s %11s %9s %9s\n", "profile", "build ms", "heap B/mbr", "ns/lookup",
           "view ns");
    const char *profiles[] = {"default", "balanced", "jump", "memento"};
    rl_ring_t *memento = NULL;
    for (size_t p = 0; p < 4; p++) {
        if (n > 4096 && strcmp(profiles[p], "default") == 0) {
            printf("  %-34s (160 points per member: 10.5 M points, not measured)\n", "default");
            continue;
        }
        double ms, bytes;
        rl_ring_t *r = build(profiles[p], n, &ms, &bytes);
        row(profiles[p], r, ms, bytes);
        if (strcmp(profiles[p], "memento") == 0)
            memento = r;
        else
            rl_ring_free(r);
    }
    const size_t fractions[] = {1000, 100, 10, 2}; /* 0.1%, 1%, 10%, 50% */
    for (size_t f = 0; f < 4; f++) {
        size_t removes = n / fractions[f];
        if (removes * 10000 > 40000000) /* each remove rebuilds n members: bound the run */
            continue;
        memento_after_removes(memento, n, removes);
    }
    rl_ring_free(memento);
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
    }
    uint64_t seed = 1;
    for (size_t i = 0; i < NIN; i++)
        in_hash[i] = splitmix(&seed);
    names = calloc(65536, sizeof *names);
    if (!names)
        abort();
    for (size_t i = 0; i < 65536; i++)
        snprintf(names[i], sizeof names[i], "lane-%zu", i);
    printf("bench_memento: %zu passes over %u pre-hashed keys, best of %d runs\n", g_reps, NIN,
           g_runs);
    if (!only || only == 1024)
        run(1024);
    if (!only || only == 65536)
        run(65536);
    printf("(sink %llu)\n", (unsigned long long)sink);
    free(names);
    return 0;
}
