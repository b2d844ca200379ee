/* SPDX-License-Identifier: BSD-2-Clause */
/* memento: jump consistent hash whose removed buckets are replaced, as in MementoHash (Coluzzi,
 * Brocco, Antonucci, Leidi, "MementoHash: A Stateful, Minimal Memory, Best Performing Consistent
 * Hash Algorithm", arXiv:2306.09783, 2023), so that removing any member moves only that
 * member's keys.
 *
 * Buckets are members. rl_ring_build numbers them in the order given and answers exactly what
 * jump answers (no state at all). The history lives in the snapshots made by rl_ring_remove
 * and rl_ring_add (rl__profile.follow):
 *
 * - Picture the working buckets as the first w places of an array, place p holding bucket p at
 *   first. Removing bucket b puts the bucket of the last working place (w - 1) into b's place
 *   and leaves w - 1 places. Only (b, w - 1) is remembered, with the bucket removed before b.
 *   Removing the last bucket while nothing else is removed is jump's own shrink: no entry.
 * - A key takes jump's bucket over every bucket ever in use. If that bucket b was removed when
 *   w' places were left, the key takes one of those w' places by a second hash of (key, b); a
 *   place whose bucket had been removed earlier (w'' >= w' places left after its removal) held
 *   the bucket of place w'' then, so the lookup follows those replacements; a bucket removed
 *   later (w'' < w') is removed again, with fewer places; a working bucket is the answer.
 *   Each step keeps the key uniform over the buckets that worked at that time, so a remove
 *   moves only the removed bucket's keys, and every survivor takes an equal part of them.
 * - rl_ring_add restores the bucket removed last (the one removed before it becomes the last)
 *   and gives it to the new member; with nothing removed it opens bucket n (jump's growth).
 *   Keys move only to the new member: an add undoes the last remove, whoever is added. Adding
 *   back the members removed, in the reverse order of their removal, gives the placement from
 *   before the removals exactly.
 *
 * The state is one array over the buckets: a working bucket's member (its node index, which a
 * remove shifts down as for every profile) or a removed bucket's entry: 8 bytes per bucket
 * once a remove has made the placement differ from jump's, none before, nor once the adds
 * have made it jump's again. The key hash is xxh3-64 of the key's bytes; the second hash is
 * SplitMix64 at step b + 1 from the key's hash, mapped to 0..w'-1 by multiplication (exact
 * integer arithmetic: the same answer on every platform). No weights (every bucket is one),
 * no points, no replicas, no bounded loads. */
#include "ring_internal.h"
#include "ringlane/error.h"
#include "ringlane/hash.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

typedef struct memento_slot {
    uint32_t node;     /* working: the member's node index; removed: the bucket removed before
                          this one, NONE if none */
    uint32_t replacer; /* NONE while working; removed: the buckets left right after its removal,
                          which is also the place whose bucket took its place */
} memento_slot;

struct rl__memento {
    uint32_t buckets;      /* jump's range: members + removed */
    uint32_t removed;      /* buckets removed and not restored */
    uint32_t last_removed; /* the bucket removed last; NONE if none */
    memento_slot slot[];   /* per bucket */
};

static int build_memento(rl_ring_t *r)
{
    for (size_t n = 0; n < r->n_nodes; n++)
        if (r->nodes[n].weight != 1)
            return RL_EWEIGHT; /* buckets are equal; a weight would be silently ignored */
    return 0;
}

/* The key's second hash for removed bucket b: SplitMix64's output at step b + 1. */
static uint64_t rehash(uint64_t key, uint32_t b)
{
    return rl_mix64(key + ((uint64_t)b + 1) * UINT64_C(0x9E3779B97F4A7C15));
}

/* floor(x * n / 2^64), exactly, in 64-bit integer arithmetic: x mapped onto 0..n-1. */
static uint32_t scale(uint64_t x, uint32_t n)
{
    uint64_t hi = (x >> 32) * n, lo = (x & 0xFFFFFFFFu) * n;
    return (uint32_t)((hi + (lo >> 32)) >> 32);
}

static uint32_t lookup_memento(const rl_ring_t *r, uint64_t key)
{
    const struct rl__memento *m = r->memento;
    if (!m)
        return rl__jump_bucket(key, (uint32_t)r->n_nodes); /* jump's placement */
    uint32_t b = rl__jump_bucket(key, m->buckets);
    uint32_t left = m->slot[b].replacer;
    while (left != NONE) {
        /* b was removed with `left` places left: one of them, by the key's second hash. */
        b = scale(rehash(key, b), left);
        uint32_t r_b = m->slot[b].replacer;
        while (r_b != NONE && r_b >= left) { /* removed before: its place held bucket r_b */
            b = r_b;
            r_b = m->slot[b].replacer;
        }
        left = r_b; /* NONE: b works; else b was removed later, with fewer places left */
    }
    return m->slot[b].node;
}

/* Member `node` leaves: its bucket is remembered (or, as in jump, the range shrinks), and the
 * node indices after it shift down, as the ring's members do. */
static void remove_bucket(struct rl__memento *m, uint32_t node)
{
    uint32_t b = 0;
    for (uint32_t i = 0; i < m->buckets; i++) {
        memento_slot *s = &m->slot[i];
        if (s->replacer != NONE)
            continue;
        if (s->node == node)
            b = i;
        else if (s->node > node)
            s->node--;
    }
    if (m->removed == 0 && b == m->buckets - 1) {
        m->buckets--;
        return;
    }
    uint32_t working = m->buckets - m->removed;
    m->slot[b] = (memento_slot){.node = m->last_removed, .replacer = working - 1};
    m->last_removed = b;
    m->removed++;
}

/* Member `node` (the newest index) arrives: in the bucket removed last, else a new bucket. The
 * caller has room for one more slot. */
static void add_bucket(struct rl__memento *m, uint32_t node)
{
    if (m->removed == 0) {
        m->slot[m->buckets++] = (memento_slot){.node = node, .replacer = NONE};
        return;
    }
    uint32_t b = m->last_removed;
    m->last_removed = m->slot[b].node;
    m->slot[b] = (memento_slot){.node = node, .replacer = NONE};
    m->removed--;
}

/* Whether m places every key as jump over the ring's members does: nothing removed and bucket
 * i held by node i. */
static int is_jump(const struct rl__memento *m, size_t members)
{
    if (m->removed != 0 || m->buckets != members)
        return 0;
    for (uint32_t i = 0; i < m->buckets; i++)
        if (m->slot[i].node != i)
            return 0;
    return 1;
}

static int follow_memento(rl_ring_t *next, const rl_ring_t *prev, const rl__change *change)
{
    const struct rl__memento *old = prev->memento;
    /* From jump's placement, growing and shrinking at the end are jump's own. */
    if (!old && (change->kind != RL__CHANGE_REMOVE || change->node + 1 == prev->n_nodes))
        return 0;
    uint32_t buckets = old ? old->buckets : (uint32_t)prev->n_nodes;
    size_t size = sizeof(struct rl__memento) + ((size_t)buckets + 1) * sizeof(memento_slot);
    struct rl__memento *m = malloc(size);
    if (!m)
        return RL_ENOMEM;
    if (old) {
        memcpy(m, old, size - sizeof(memento_slot));
    } else {
        *m = (struct rl__memento){.buckets = buckets, .removed = 0, .last_removed = NONE};
        for (uint32_t i = 0; i < buckets; i++)
            m->slot[i] = (memento_slot){.node = i, .replacer = NONE};
    }
    if (change->kind == RL__CHANGE_REMOVE)
        remove_bucket(m, change->node);
    else if (change->kind == RL__CHANGE_ADD)
        add_bucket(m, change->node);
    if (is_jump(m, next->n_nodes)) {
        free(m);
        m = NULL;
    }
    next->memento = m;
    return 0;
}

static uint64_t label_xxh3(const void *d, size_t n)
{
    return rl_xxh3(d, n);
}

const rl__profile rl__profile_memento = {
    .info = {.name = "memento",
             .hash = "xxh3-64 (libxxhash) of the key; SplitMix64 of it past a removed bucket",
             .labels = "no points: buckets are members; a build numbers them in order (jump); "
                       "remove replaces a bucket, add restores the last removed; weights must "
                       "be 1; no vnodes",
             .rule = "jump over all buckets, removed ones replaced (MementoHash); a remove "
                     "moves only the removed member's keys; replicas and bounded loads not "
                     "supported",
             .compatible = "jump while nothing was removed; after removes, ringlane's own "
                           "(the snapshots' history)",
             .default_vnodes = 0, /* none: min and max 0 say it takes none, as jump */
             .bits = 64,
             .max_vnodes = 0,
             .min_vnodes = 0,
             .kind = "computed",
             .history = 1,
             .local_remove = 1,
             .local_add = 1},
    .successor = RL__SUCC_GE,
    .tie = RL__TIE_NAME,
    .label_hash = label_xxh3,
    .build = build_memento,
    .lookup_hash = lookup_memento,
    .follow = follow_memento,
    .vnodes_means = "it computes each key's bucket from the member count",
};
