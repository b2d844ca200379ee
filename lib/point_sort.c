/* SPDX-License-Identifier: BSD-2-Clause */
/* Sorting a ring's points by (position, tie key of the node, vnode index): the ring's order.
 *
 * A most-significant-digit radix sort: hashed positions spread evenly, so one pass on the top
 * bits leaves buckets of a few points, each finished by a short insertion sort. Crowded
 * positions (a caller's hash, a 16-bit ring) take further passes on the next bits, and a long
 * run of one position is ordered by heapsort, so no input makes it quadratic. The result is
 * the order a comparison sort gives, at a fraction of its cost. */
#include "ring_internal.h"
#include "ringlane/error.h"

#include <stdlib.h>
#include <string.h>

#define SMALL 24u      /* buckets this small are insertion-sorted */
#define DIGIT_MAX 12u  /* widest digit: 4096 buckets */
#define LEVELS_MAX 24u /* a level takes >= 3 bits of a 64-bit position (see digit_bits) */

typedef struct sorter {
    rl__point *base, *tmp; /* tmp mirrors base: a range of base scatters to the same range */
    uint32_t *counts;      /* LEVELS_MAX rows of 2^DIGIT_MAX entries */
    const uint32_t *tie;   /* tie key per node */
} sorter;

static int point_less(const rl__point *a, const rl__point *b, const uint32_t *tie)
{
    if (a->pos != b->pos)
        return a->pos < b->pos;
    uint32_t ta = tie[a->node], tb = tie[b->node];
    return ta != tb ? ta < tb : a->vnode < b->vnode;
}

static void sift_down(rl__point *v, size_t root, size_t n, const uint32_t *tie)
{
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n)
            return;
        if (child + 1 < n && point_less(&v[child], &v[child + 1], tie))
            child++;
        if (!point_less(&v[root], &v[child], tie))
            return;
        rl__point t = v[root];
        v[root] = v[child];
        v[child] = t;
        root = child;
    }
}

/* Insertion sort for the small buckets, heapsort for long runs of equal positions. */
static void finish(rl__point *v, size_t n, const uint32_t *tie)
{
    if (n > SMALL) {
        for (size_t i = n / 2; i-- > 0;)
            sift_down(v, i, n, tie);
        for (size_t end = n - 1; end > 0; end--) {
            rl__point t = v[0];
            v[0] = v[end];
            v[end] = t;
            sift_down(v, 0, end, tie);
        }
        return;
    }
    for (size_t i = 1; i < n; i++) {
        rl__point p = v[i];
        size_t j = i;
        for (; j > 0 && point_less(&p, &v[j - 1], tie); j--)
            v[j] = v[j - 1];
        v[j] = p;
    }
}

/* About four points per bucket, so the buckets are left for insertion sort. n > SMALL gives
 * at least 3 bits. */
static unsigned digit_bits(size_t n, unsigned top)
{
    unsigned b = 0;
    while (((size_t)1 << b) < n)
        b++;
    b = b > 5 ? b - 2 : 3;
    if (b > DIGIT_MAX)
        b = DIGIT_MAX;
    return b < top ? b : top;
}

/* Sorts v[0..n) whose positions agree above bit `top`. */
static void msd(sorter *s, rl__point *v, size_t n, unsigned top, unsigned level)
{
    if (n <= SMALL || top == 0 || level >= LEVELS_MAX) {
        finish(v, n, s->tie);
        return;
    }
    unsigned bits = digit_bits(n, top), shift = top - bits;
    size_t nb = (size_t)1 << bits, mask = nb - 1;
    uint32_t *count = s->counts + (size_t)level * ((size_t)1 << DIGIT_MAX);
    memset(count, 0, nb * sizeof *count);
    for (size_t i = 0; i < n; i++)
        count[(v[i].pos >> shift) & mask]++;
    if (count[(v[0].pos >> shift) & mask] == n) { /* one bucket: go to the next bits */
        msd(s, v, n, shift, level + 1);
        return;
    }
    uint32_t at = 0;
    for (size_t b = 0; b < nb; b++) {
        uint32_t c = count[b];
        count[b] = at;
        at += c;
    }
    rl__point *tmp = s->tmp + (v - s->base);
    for (size_t i = 0; i < n; i++) /* afterwards count[b] is the end of bucket b */
        tmp[count[(v[i].pos >> shift) & mask]++] = v[i];
    memcpy(v, tmp, n * sizeof *v);
    for (size_t b = 0, start = 0; b < nb; b++) {
        size_t end = count[b];
        if (end - start > 1)
            msd(s, v + start, end - start, shift, level + 1);
        start = end;
    }
}

int rl__sort_points(rl__point *v, size_t n, const uint32_t *tie)
{
    if (n <= SMALL) {
        finish(v, n, tie);
        return 0;
    }
    uint64_t any = 0;
    for (size_t i = 0; i < n; i++)
        any |= v[i].pos;
    unsigned top = 0;
    while (top < 64 && (any >> top) != 0)
        top++;
    sorter s = {.base = v, .tie = tie};
    s.tmp = malloc(n * sizeof *s.tmp);
    s.counts = malloc(LEVELS_MAX * ((size_t)1 << DIGIT_MAX) * sizeof *s.counts);
    if (!s.tmp || !s.counts) {
        free(s.tmp);
        free(s.counts);
        return RL_ENOMEM;
    }
    msd(&s, v, n, top, 0);
    free(s.tmp);
    free(s.counts);
    return 0;
}
