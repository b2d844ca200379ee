/* SPDX-License-Identifier: BSD-2-Clause */
/* Internals shared by the ring's source files. Not installed. */
#ifndef RINGLANE_RING_INTERNAL_H
#define RINGLANE_RING_INTERNAL_H

#include "ringlane/profile.h"
#include "ringlane/ring.h"

#include <stdatomic.h>
#include <stdbool.h>

struct rl_ring;

/* Which point answers a position. */
enum rl__successor {
    RL__SUCC_GE, /* first point >= hash (lower_bound), wrap */
    RL__SUCC_GT, /* first point >  hash (upper_bound / bisect_right), wrap */
};

/* The order of points at the same position; the first one owns the position. */
enum rl__tie {
    RL__TIE_NAME,       /* smaller member name first, then smaller vnode index */
    RL__TIE_ORDER,      /* earlier-added member first (ketama) */
    RL__TIE_LATER_WINS, /* later-added member first (groupcache's map overwrite) */
};

/* A point while the ring is being built. */
typedef struct rl__point {
    uint64_t pos;
    uint32_t node;
    uint32_t vnode;
} rl__point;

typedef struct rl__points {
    rl__point *v;
    size_t len, cap;
} rl__points;

/* Appends one point; RL_ETOOBIG past RL_POINTS_MAX, RL_ENOMEM. */
int rl__points_push(rl__points *pts, uint64_t pos, uint32_t node, uint32_t vnode);

/* Sorts points by (position, tie[node], vnode): the ring's order. RL_ENOMEM. */
int rl__sort_points(rl__point *v, size_t n, const uint32_t *tie);

/* Hashes a vnode label or key: the caller's override if set, else the profile's label hash,
 * masked to the ring width. */
uint64_t rl__label_hash(const struct rl_ring *r, const void *data, size_t len);

/* A membership change that makes a new snapshot from an old one (rl_ring_add, rl_ring_remove). */
typedef struct rl__change {
    enum { RL__CHANGE_NONE, RL__CHANGE_ADD, RL__CHANGE_REMOVE } kind; /* NONE: the same members */
    uint32_t node; /* ADD: the new member's index in the new ring; REMOVE: the removed member's
                      index in the old ring */
} rl__change;

typedef struct rl__profile {
    rl_profile_info info;
    enum rl__successor successor;
    enum rl__tie tie;
    const char *label_sep; /* generic labels are "<name><sep><i>" */
    uint64_t (*label_hash)(const void *data, size_t len);
    /* Key to position; NULL means label_hash. May fail with RL_EBADKEY. */
    int (*key_hash)(const void *key, size_t len, uint64_t *out);
    /* Emits all points; NULL means the generic labels, weight * vnodes per member. */
    int (*emit)(const struct rl_ring *r, rl__points *out);
    /* How many points emit will make, for a profile whose count is not weight * vnodes per
     * member (NULL). Called before anything is allocated for the points, so that RL_POINTS_MAX
     * is checked first; refuses what emit would refuse (RL_ENAME, RL_ENOTSUP), and first. */
    int (*count)(const struct rl_ring *r, uint64_t *points);
    /* Profiles that are not point rings (maglev, jump) set lookup_hash: it answers a hash that
     * is already masked, on a ring with at least one member. Such a ring has no points (emit is
     * not called); build, when set, runs once per snapshot to fill r->table or to reject the
     * members. Replicas, bounded lookups and rl_ring_point say RL_ENOTSUP for them. */
    int (*build)(struct rl_ring *r);
    uint32_t (*lookup_hash)(const struct rl_ring *r, uint64_t hash);
    /* Refuses vnodes the profile cannot build with beyond min/max_vnodes (maglev: not a prime);
     * NULL when the range is all. */
    int (*check_vnodes)(uint32_t vnodes);
    /* What vnodes means for the profile when it is not points per unit of weight, said in
     * rl_profile_explain_vnodes' words (maglev: "its table size"); NULL otherwise. */
    const char *vnodes_means;
    int vnodes_prime; /* vnodes must be a prime (check_vnodes checks it): said in the rule */
    /* Profiles whose placement depends on the history of changes (memento) set follow: after
     * rl_ring_add or rl_ring_remove has built `next` from the new member list, it carries
     * `prev`'s state over and applies the change. NULL: a ring is its member list alone. */
    int (*follow)(struct rl_ring *next, const struct rl_ring *prev, const rl__change *change);
} rl__profile;

const rl__profile *rl__profile_find(const char *name);

/* The compatibility profiles, one file each (profile_<name>.c), listed in profile.c. */
extern const rl__profile rl__profile_ketama;
extern const rl__profile rl__profile_envoy;
extern const rl__profile rl__profile_groupcache;
extern const rl__profile rl__profile_maglev;
extern const rl__profile rl__profile_jump;
extern const rl__profile rl__profile_balanced;
extern const rl__profile rl__profile_memento;

/* Lamping and Veach's jump consistent hash, the paper's loop: the bucket 0..buckets-1 of a
 * 64-bit key (buckets >= 1); a 64-bit LCG decides, for each jump, how far the key's bucket
 * moves. Shared by jump and memento, inline in both lookups. */
static inline uint32_t rl__jump_bucket(uint64_t key, uint32_t buckets)
{
    int64_t b = -1, j = 0;
    while (j < (int64_t)buckets) {
        b = j;
        key = key * 2862933555777941757ull + 1;
        j = (int64_t)((double)(b + 1) * ((double)(1ll << 31) / (double)((key >> 33) + 1)));
    }
    return (uint32_t)b;
}

struct rl__memento;

typedef struct rl__node {
    char *name;
    char *zone; /* NULL when none */
    uint32_t name_len;
    uint32_t weight;
    uint32_t zone_id; /* dense id of the zone; members without a zone share id 0 */
} rl__node;

struct rl_ring {
    const rl__profile *profile;
    uint32_t vnodes;
    size_t added;    /* the member rl_ring_add appended, while it builds (for the words of a
                        refusal: "member", not "members[i]"); SIZE_MAX otherwise */
    rl_hash_fn hash; /* caller override, or NULL */
    void *hash_ctx;
    uint64_t mask; /* ring width: 2^bits - 1 */

    size_t n_nodes;
    rl__node *nodes;
    uint32_t *by_name; /* node indices sorted by name, for rl_ring_find */
    uint32_t n_zones;

    size_t n_points;
    uint64_t *pos;   /* sorted positions */
    uint32_t *owner; /* owner[i] is the node of pos[i] */

    /* --- profiles without points (rl__profile.lookup_hash): maglev's lookup table. Filled by
     * rl__profile.build, freed with the snapshot; NULL and 0 for every other profile. --- */
    uint32_t *table;  /* table[i] is a node index */
    size_t table_len; /* entries in table */
    /* --- the history of changes (memento): which bucket each member holds and the buckets
     * removed, carried from snapshot to snapshot by rl__profile.follow. NULL while the placement
     * is the member list's own (jump's). Freed with the snapshot. --- */
    struct rl__memento *memento;
    /* --- lookup engine (lib/lookup_index.c), built with the snapshot, never changed ---
     * Positions are looked up as "first point >= h" after h = (h + ix_gt) & mask, since
     * "first point > h" is "first point >= h + 1" and the top position wraps to point 0. */
    uint64_t ix_gt;          /* 1 under RL__SUCC_GT, else 0 */
    unsigned ix_start_shift; /* a position's coarse bucket is pos >> ix_start_shift */
    unsigned ix_fast_shift;  /* a position's fine bucket is pos >> ix_fast_shift */
    uint32_t *ix_start;      /* per coarse bucket (+1 sentinel): its first point index */
    uint32_t *ix_fast;       /* per fine bucket: RL__IX_OWNER | owner when every position in
                                the bucket has that owner, else the bucket's first point */
    size_t ix_bytes;         /* memory of the two tables */
    /* The key hash when it is the profile's label hash with no caller override (the common
     * case, called directly by the lookups), else NULL. */
    uint64_t (*ix_key_hash)(const void *data, size_t len);

    /* --- snapshot holder (lib/snapshot.c) --- */
    atomic_size_t snap_refs; /* 0 outside a holder; else the holder's reference + readers' */
};

/* Index of the point that owns `hash` (n_points must be > 0): exactly the profile's successor
 * rule over pos[] (lower_bound or upper_bound, wrapping to point 0), for hash masked to the
 * ring's width. */
size_t rl__successor(const struct rl_ring *r, uint64_t hash);

/* MD5 of data (libmd), and a 4-byte little-endian read: ketama's pieces. */
void rl__md5(const void *data, size_t len, unsigned char digest[16]);
uint32_t rl__le32(const unsigned char *p);
/* Builds the lookup engine's tables from pos[] and owner[]; RL_ENOMEM. */
int rl__index_build(struct rl_ring *r);

/* Frees the lookup engine's tables. */
void rl__index_free(struct rl_ring *r);

/* Validates member i as rl_ring_build does, setting the refusal's detail (it names the member
 * "members[i]", or "member" when i == added: the one rl_ring_add appends). */
int rl__check_member(const rl_member *m, size_t i, size_t added);

/* How a refusal names node n of r while it is built: "members[n]", or "member" for the one
 * rl_ring_add appends. Profiles use it in their details. */
void rl__member_label(const struct rl_ring *r, size_t node, char *buf, size_t size);

#endif
