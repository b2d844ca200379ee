/* SPDX-License-Identifier: BSD-2-Clause */
/* balanced: a ring whose arcs are cut, not hashed, so that every member owns about 1/n of it
 * and adding member n moves keys only to it.
 *
 * Members are taken in node-index order (the order they were given). Member 0 owns the whole
 * ring: one point at the top position. Member k (k = 1, 2, ...) is added by cutting: its target
 * share is 1/(k+1); the (at most) `vnodes` members with the largest shares, largest first, give
 * it the slices that bring them down to one common level L, where L is chosen so that the
 * slices add up to the target (water-filling: a member already below L is left alone). A slice
 * is the start of one of the giver's arcs (a, b]: a new point of member k at a + c takes (a,
 * a + c], and the giver keeps (a + c, b]. Nothing but the new member's points is added, so the
 * ring of members 0..k-1 is the ring of 0..k with member k's points removed: growing from n to
 * n' members moves (n'-n)/n' of the keys, all of them to the new members, as adding points of a
 * hashed ring does.
 *
 * Balance: while k < vnodes every member gives, so the shares are equal to the last unit. Past
 * that, each member gives about once every k/vnodes additions, so the shares spread over a
 * factor of about 1 + 1/vnodes: with the default 64, the largest share is at most 1.016 times
 * the mean for any member count (1.006 at 256 members). Each member adds about `vnodes` points.
 *
 * All of it is integer arithmetic on 64-bit positions (the ring's measure taken as 2^64 - 1),
 * so every platform builds the same ring. Keys are hashed with xxh3-64, as in "default".
 * Weights other than 1 are refused (RL_EWEIGHT). Cuts depend on positions and shares, never on
 * names, so removing the member at position j (not the last) shifts the ones after it: each
 * then makes the cuts of the position before its own. The members before j keep every key;
 * every key of the member at position i, j <= i < n - 1, moves to the member at i + 1; the last
 * member's keys return to the member each slice was cut from (shifted likewise). That moves
 * (n - j)/n - 1/(n(n - 1)) of the keys while n <= vnodes + 1 (91.7% for the first of 4), most
 * of them between members that stay; tests/test_profile_moves.c checks it key by key. The
 * ring must stay a function of the member list (the partitioner's producers agree by it), so
 * it cannot do better (docs/ring.md); for members that come and go, memento does. */
#include "ring_internal.h"
#include "ringlane/error.h"
#include "ringlane/hash.h"

#include <stdint.h>
#include <stdlib.h>

typedef struct cut_state {
    uint64_t *start, *end; /* arc i is (start[i], end[i]] */
    size_t arcs, cap;
    uint64_t *share;   /* per member: the sum of its arcs' lengths */
    size_t *first_arc; /* member j's arcs are first_arc[j] .. first_arc[j+1]-1 */
    uint32_t *heap;    /* members by (share desc, index asc) */
    size_t heap_len;
} cut_state;

static int before(const cut_state *s, uint32_t a, uint32_t b)
{
    return s->share[a] > s->share[b] || (s->share[a] == s->share[b] && a < b);
}

static void heap_push(cut_state *s, uint32_t node)
{
    size_t i = s->heap_len++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(s, node, s->heap[parent]))
            break;
        s->heap[i] = s->heap[parent];
        i = parent;
    }
    s->heap[i] = node;
}

static uint32_t heap_pop(cut_state *s)
{
    uint32_t top = s->heap[0], last = s->heap[--s->heap_len];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->heap_len)
            break;
        if (c + 1 < s->heap_len && before(s, s->heap[c + 1], s->heap[c]))
            c++;
        if (!before(s, s->heap[c], last))
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->heap_len)
        s->heap[i] = last;
    return top;
}

static int add_arc(cut_state *s, uint64_t start, uint64_t end)
{
    if (s->arcs == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        if (cap > RL_POINTS_MAX)
            cap = RL_POINTS_MAX;
        if (s->arcs >= cap)
            return RL_ETOOBIG;
        uint64_t *st = realloc(s->start, cap * sizeof *st);
        if (!st)
            return RL_ENOMEM;
        s->start = st;
        uint64_t *en = realloc(s->end, cap * sizeof *en);
        if (!en)
            return RL_ENOMEM;
        s->end = en;
        s->cap = cap;
    }
    s->start[s->arcs] = start;
    s->end[s->arcs] = end;
    s->arcs++;
    return 0;
}

/* Moves c units from member j's arcs to new arcs (of the member being added): from the first
 * arc longer than c when there is one (one new point), else from the longest arcs in turn. Each
 * arc keeps at least one unit, so no two points share a position. Returns what moved. */
static int cut(cut_state *s, uint32_t j, uint64_t c, uint64_t *moved)
{
    *moved = 0;
    while (c > 0) {
        size_t best = SIZE_MAX;
        for (size_t a = s->first_arc[j]; a < s->first_arc[j + 1]; a++) {
            uint64_t len = s->end[a] - s->start[a];
            if (len > c) {
                best = a;
                break;
            }
            if (len > 1 && (best == SIZE_MAX || len > s->end[best] - s->start[best]))
                best = a;
        }
        if (best == SIZE_MAX)
            return 0; /* nothing left to give: j keeps the rest */
        uint64_t len = s->end[best] - s->start[best];
        uint64_t take = c < len - 1 ? c : len - 1;
        uint64_t at = s->start[best];
        int rc = add_arc(s, at, at + take);
        if (rc)
            return rc;
        s->start[best] = at + take;
        c -= take;
        *moved += take;
    }
    return 0;
}

static int cut_ring(const rl_ring_t *r, cut_state *s)
{
    const size_t n = r->n_nodes;
    const uint64_t total = UINT64_MAX;
    uint32_t *top = malloc((r->vnodes < n ? r->vnodes : n) * sizeof *top + 1);
    if (!top)
        return RL_ENOMEM;
    int rc = add_arc(s, 0, total);
    s->share[0] = total;
    s->first_arc[0] = 0;
    s->first_arc[1] = s->arcs;
    heap_push(s, 0);
    for (uint32_t k = 1; k < n && rc == 0; k++) {
        const uint64_t target = total / ((uint64_t)k + 1);
        size_t want = r->vnodes < k ? r->vnodes : k, r_used = 0;
        for (size_t i = 0; i < want; i++)
            top[i] = heap_pop(s);
        /* The largest r members whose common level L = (S_r - target) / r is not above the
         * smallest of them: S_r - r * s_r <= target (no overflow: S_r <= total). */
        uint64_t sum = 0;
        for (size_t i = 0; i < want; i++)
            sum += s->share[top[i]];
        r_used = want;
        while (r_used > 1 && sum - (uint64_t)r_used * s->share[top[r_used - 1]] > target) {
            r_used--;
            sum -= s->share[top[r_used]];
        }
        uint64_t level = (sum - target) / r_used, got = 0;
        for (size_t i = 0; i < r_used && rc == 0; i++) {
            uint32_t j = top[i];
            uint64_t moved;
            rc = cut(s, j, s->share[j] - level, &moved);
            s->share[j] -= moved;
            got += moved;
        }
        s->share[k] = got;
        s->first_arc[k + 1] = s->arcs;
        for (size_t i = 0; i < want; i++)
            heap_push(s, top[i]);
        heap_push(s, k);
    }
    free(top);
    return rc;
}

static int emit_balanced(const rl_ring_t *r, rl__points *out)
{
    for (size_t n = 0; n < r->n_nodes; n++)
        if (r->nodes[n].weight != 1)
            return RL_EWEIGHT; /* the cuts give equal shares; a weight would be ignored */
    if (r->n_nodes == 0)
        return 0;
    cut_state s = {0};
    s.share = calloc(r->n_nodes, sizeof *s.share);
    s.first_arc = calloc(r->n_nodes + 1, sizeof *s.first_arc);
    s.heap = calloc(r->n_nodes, sizeof *s.heap);
    int rc = s.share && s.first_arc && s.heap ? cut_ring(r, &s) : RL_ENOMEM;
    for (uint32_t k = 0; k < r->n_nodes && rc == 0; k++)
        for (size_t a = s.first_arc[k]; a < s.first_arc[k + 1] && rc == 0; a++)
            rc = rl__points_push(out, s.end[a], k, (uint32_t)(a - s.first_arc[k]));
    free(s.start);
    free(s.end);
    free(s.share);
    free(s.first_arc);
    free(s.heap);
    return rc;
}

static uint64_t label_xxh3(const void *d, size_t n)
{
    return rl_xxh3(d, n);
}

const rl__profile rl__profile_balanced = {
    .info = {.name = "balanced",
             .hash = "xxh3-64 (libxxhash) of the key",
             .labels = "no labels: member k (in the order given) cuts its points out of the "
                       "arcs of the (at most) vnodes largest members (64); weights must be 1",
             .rule = "first point >= hash, wrap; shares equal to within 1 + 1/vnodes",
             .compatible = "ringlane's own; the Kafka partitioner's default",
             .default_vnodes = 64,
             .bits = 64,
             .max_vnodes = RL_VNODES_MAX,
             .kind = "ring",
             .min_vnodes = 1,
             .local_add = 1},
    .successor = RL__SUCC_GE,
    .tie = RL__TIE_NAME,
    .label_hash = label_xxh3,
    .emit = emit_balanced,
};
