/* SPDX-License-Identifier: BSD-2-Clause */
/* Shared by the benchmarks: timing, random inputs, the members of a test ring. */
#ifndef RINGLANE_BENCH_COMMON_H
#define RINGLANE_BENCH_COMMON_H

#include "ringlane/ringlane.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* One timed loop: runs `reps` passes over the inputs and returns a value that depends on every
 * answer (so nothing is optimised away). */
typedef uint64_t (*bench_loop)(const void *ctx, size_t reps);

/* Nanoseconds per call, the best of `runs` runs of `reps` passes over `per_pass` inputs. */
static inline double bench_ns(bench_loop fn, const void *ctx, size_t reps, size_t per_pass,
                              int runs, uint64_t *sink)
{
    double best = 1e30;
    for (int i = 0; i < runs; i++) {
        double t = bench_now();
        *sink += fn(ctx, reps);
        t = bench_now() - t;
        if (t < best)
            best = t;
    }
    return best * 1e9 / ((double)reps * (double)per_pass);
}

/* Members "node-0" .. "node-<n-1>", weight 1 (names live in one static block). */
static inline rl_member *bench_members(size_t n)
{
    static char names[4096][16];
    rl_member *m = calloc(n, sizeof *m);
    if (!m || n > 4096)
        abort();
    for (size_t i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "node-%zu", i);
        m[i] = (rl_member){.name = names[i], .weight = 1};
    }
    return m;
}

static inline rl_ring_t *bench_ring(const char *profile, size_t nodes, uint32_t vnodes)
{
    rl_member *m = bench_members(nodes);
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = profile;
    o.vnodes = vnodes;
    rl_ring_t *r = NULL;
    int rc = rl_ring_build(m, nodes, &o, &r);
    free(m);
    if (rc) {
        fprintf(stderr, "build %s %zu x %u: %s\n", profile ? profile : "default", nodes, vnodes,
                rl_strerror(rc));
        exit(1);
    }
    return r;
}

/* A ring's points as plain arrays, for the baselines. */
typedef struct bench_points {
    size_t n;
    uint64_t *pos;
    uint32_t *owner;
} bench_points;

static inline bench_points bench_points_of(const rl_ring_t *r)
{
    bench_points p = {.n = rl_ring_point_count(r)};
    p.pos = malloc(p.n * sizeof *p.pos);
    p.owner = malloc(p.n * sizeof *p.owner);
    if (!p.pos || !p.owner)
        abort();
    for (size_t i = 0; i < p.n; i++)
        rl_ring_point(r, i, &p.pos[i], &p.owner[i]);
    return p;
}

/* The plain successor: std::lower_bound over the sorted positions, wrapping to point 0. */
static inline uint32_t bench_lower_bound(const bench_points *p, uint64_t h)
{
    size_t lo = 0, n = p->n;
    while (n > 0) {
        size_t half = n / 2;
        if (p->pos[lo + half] < h) {
            lo += half + 1;
            n -= half + 1;
        } else {
            n = half;
        }
    }
    return p->owner[lo == p->n ? 0 : lo];
}

#endif
