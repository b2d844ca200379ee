/* SPDX-License-Identifier: BSD-2-Clause */
/* ringlane: the consistent hash ring.
 *
 * A ring is an immutable snapshot built from members (name, weight, optional zone) and a profile
 * (hash, vnode label format, successor rule). Membership changes make a new snapshot, so a
 * snapshot can be read by any number of threads without a lock; lookups allocate nothing.
 *
 * Members are numbered ("node index") in the order they were given: build order, then each
 * add appended at the end; a remove shifts the later ones down. The ring itself never depends on
 * that order except where a profile says so (ketama, envoy, groupcache, jump, balanced,
 * memento).
 *
 * One profile has a history: a memento ring made by rl_ring_add or rl_ring_remove depends on the
 * changes that led to it, not on its members alone (rl_profile_info.history). A remove replaces
 * the removed member's bucket and an add restores the bucket removed last, so a remove moves
 * only the removed member's keys and an add only keys to the new member; rl_ring_build of the
 * same members gives jump's placement instead.
 *
 * Three profiles are not point rings: maglev answers from a lookup table (table[hash % M]),
 * jump computes the bucket (node index) from the hash and the member count, and memento
 * computes it as jump does, replacing removed buckets. For them rl_ring_point_count() is 0 and
 * rl_ring_point, rl_ring_replicas, rl_ring_replicas_zoned, rl_ring_lookup_bounded(_hash) and
 * rl_ring_bucket_table return RL_ENOTSUP; rl_ring_stats_get measures maglev's table and returns
 * RL_ENOTSUP for jump and memento. ketama and maglev take no caller hash
 * (rl_ring_options.hash: RL_ENOTSUP from rl_ring_build).
 */
#ifndef RINGLANE_RING_H
#define RINGLANE_RING_H

#include "ringlane/common.h"
#include "ringlane/error.h" /* the RL_E* codes its functions return */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_NAME_MAX 255u             /* bytes in a member name (and a zone name), NUL excluded */
#define RL_VNODES_MAX 65536u         /* vnodes per unit of weight */
#define RL_WEIGHT_MAX 65536u         /* a member's weight */
#define RL_MEMBERS_MAX 1048576u      /* members in one ring */
#define RL_POINTS_MAX 16777216u      /* points in one ring (16 Mi, 12 bytes each) */
#define RL_VNODES_PROFILE UINT32_MAX /* rl_ring_options.vnodes: use the profile's default */

typedef struct rl_ring rl_ring_t;

typedef struct rl_member {
    const char *name; /* 1..RL_NAME_MAX bytes, unique in the ring */
    uint32_t weight;  /* 1..RL_WEIGHT_MAX; a member gets weight * vnodes points */
    const char *zone; /* failure domain for rl_ring_replicas_zoned; NULL or "" = none */
} rl_member;

/* A caller-supplied hash that replaces the profile's for both vnode labels and keys (tests use a
 * table hash to build rings by hand). Results are masked to the profile's ring width. */
typedef uint64_t (*rl_hash_fn)(void *ctx, const void *data, size_t len);

typedef struct rl_ring_options {
    const char *profile; /* NULL = "default"; see rl_profile_find() */
    uint32_t vnodes;     /* per unit of weight, 1..RL_VNODES_MAX, or RL_VNODES_PROFILE. Some
                            profiles read it otherwise: ketama, points per server at equal
                            weights (160); envoy, minimum_ring_size (1024, up to 8 Mi); maglev,
                            the prime table size (65537, up to 5000011); jump and memento have none
                            and take only RL_VNODES_PROFILE. rl_profile_explain_vnodes says the rule */
    rl_hash_fn hash;     /* NULL = the profile's hash */
    void *hash_ctx;
} rl_ring_options;

/* Fills opts with: profile "default", the profile's vnodes, the profile's hash. */
RL_EXTERN void rl_ring_options_init(rl_ring_options *opts);

/* Builds a ring. `members` may be NULL when count is 0 (an empty ring: lookups say RL_EEMPTY).
 * opts NULL means rl_ring_options_init() defaults. Errors: RL_EINVAL (NULL out, members NULL
 * with count > 0, a member whose name is NULL), RL_EPROFILE, RL_EVNODES, RL_EWEIGHT, RL_ENAME
 * (empty or over RL_NAME_MAX; also zones), RL_EDUPNAME, RL_ETOOBIG (over RL_MEMBERS_MAX or
 * RL_POINTS_MAX), RL_ENOMEM. Profiles add:
 * ketama RL_ENAME for a HOST:PORT name (split at its last ':') with an empty host or a port
 * that is not 1..65535 in decimal (a name without ':' is a host on port 11211, whatever its
 * characters, as libmemcached takes it: ketama checks no host name); maglev
 * RL_EVNODES for a table size that is not a prime; jump and memento RL_EVNODES for any
 * vnodes but RL_VNODES_PROFILE and RL_EWEIGHT for a weight other than 1;
 * ketama and maglev RL_ENOTSUP with a caller hash. On error *out is set to NULL, nothing stays
 * allocated, and rl_last_error_detail() says why, naming the argument as written in C and the
 * value ("members[2].weight 0: a weight must be 1..65536", "vnodes 1000: profile maglev takes a
 * prime 2..5000011 (its table size)"); on success it is "". Names and zones are copied. */
RL_EXTERN int rl_ring_build(const rl_member *members, size_t count, const rl_ring_options *opts,
                            rl_ring_t **out);

/* A new snapshot with `member` appended. A member whose name is already in the ring changes
 * nothing (the new snapshot equals the old one, even if weight or zone differ: remove, then add
 * to change them). Errors as rl_ring_build (RL_EINVAL also for a NULL ring or member), each with
 * its rl_last_error_detail(), which calls the new member "member" ("member.weight 0: ...").
 * memento: the new member takes the bucket removed last (keys move only to it), or a new bucket
 * when none is removed. */
RL_EXTERN int rl_ring_add(const rl_ring_t *ring, const rl_member *member, rl_ring_t **out);

/* A new snapshot without the member `name`; a name not in the ring changes nothing. Errors:
 * RL_EINVAL (NULL ring, name or out), RL_ENOMEM, with rl_last_error_detail(). memento: the
 * member's bucket is replaced, so only its keys move, spread evenly over the others. */
RL_EXTERN int rl_ring_remove(const rl_ring_t *ring, const char *name, rl_ring_t **out);

/* Frees a snapshot; NULL is a no-op. */
RL_EXTERN void rl_ring_free(rl_ring_t *ring);

/* --- inspection (all O(1) unless noted; NULL ring gives 0 / NULL) --- */
RL_EXTERN size_t rl_ring_member_count(const rl_ring_t *ring);
RL_EXTERN size_t rl_ring_point_count(const rl_ring_t *ring);
RL_EXTERN const char *rl_ring_profile(const rl_ring_t *ring); /* the profile's name */
RL_EXTERN uint32_t rl_ring_vnodes(const rl_ring_t *ring);     /* vnodes per unit of weight */
RL_EXTERN unsigned rl_ring_hash_bits(const rl_ring_t *ring);  /* 16, 32 or 64: the ring's width */

/* Member `node` (node index). Pointers stay valid while the snapshot lives. RL_ERANGE if out of
 * range. */
RL_EXTERN int rl_ring_member(const rl_ring_t *ring, uint32_t node, rl_member *out);
RL_EXTERN const char *rl_ring_node_name(const rl_ring_t *ring,
                                        uint32_t node); /* NULL if out of range */

/* The node index of `name`, O(log n); RL_ENOENT if absent. */
RL_EXTERN int rl_ring_find(const rl_ring_t *ring, const char *name, uint32_t *node);

/* Point i (0..point_count-1) in ring order: its position and owner. RL_ERANGE if out of range,
 * RL_ENOTSUP for profiles without points (maglev, jump, memento). */
RL_EXTERN int rl_ring_point(const rl_ring_t *ring, size_t i, uint64_t *position, uint32_t *node);

/* --- lookups: no allocation, no lock, safe from any number of threads --- */

/* The key's position on this ring (the profile's key hash). RL_EBADKEY if the profile cannot
 * hash this key (turnstone keys must start with 4 hex digits). */
RL_EXTERN int rl_ring_hash_key(const rl_ring_t *ring, const void *key, size_t len, uint64_t *hash);

/* The owner of a key: the first point at or after its hash, wrapping past the top (turnstone:
 * the first point strictly after it; maglev: table[hash % M]; jump: the jump consistent hash
 * bucket; memento: the same, with removed buckets replaced). RL_EEMPTY on an empty ring. */
RL_EXTERN int rl_ring_lookup(const rl_ring_t *ring, const void *key, size_t len, uint32_t *node);

/* The same for a position already hashed with rl_ring_hash_key(). */
RL_EXTERN int rl_ring_lookup_hash(const rl_ring_t *ring, uint64_t hash, uint32_t *node);

/* Replica preference list: the first `want` distinct nodes clockwise from the key (want is
 * capped at the member count). Writes *got entries to nodes[]. RL_EEMPTY on an empty ring;
 * RL_ENOTSUP for maglev, jump and memento (nothing is clockwise of a key). */
RL_EXTERN int rl_ring_replicas(const rl_ring_t *ring, const void *key, size_t len, uint32_t *nodes,
                               size_t want, size_t *got);

/* Zone-aware preference list: walking clockwise, first one node from each zone not yet used,
 * then (if want exceeds the number of zones) the remaining distinct nodes in clockwise order.
 * Members without a zone share one unnamed zone. */
RL_EXTERN int rl_ring_replicas_zoned(const rl_ring_t *ring, const void *key, size_t len,
                                     uint32_t *nodes, size_t want, size_t *got);

/* Bounded-loads capacity: ceil(c * (placed + 1) / n), computed in double (as the ds09
 * profile's Go design computes it); c < 1 acts as 1; 0 when n is 0. */
RL_EXTERN uint64_t rl_capacity(uint64_t placed, size_t n, double c);

/* Bounded-loads placement (Mirrokni, Thorup, Zadimoghaddam): with m = the sum of loads[] and
 * cap = rl_capacity(m, n, c), walk clockwise from the key and return the first node whose load
 * is below cap. loads[] has rl_ring_member_count() entries, indexed by node index, supplied by
 * the caller (the ring keeps none). With all loads 0 this equals rl_ring_lookup. RL_ENOTSUP for
 * maglev, jump and memento. */
RL_EXTERN int rl_ring_lookup_bounded(const rl_ring_t *ring, const void *key, size_t len,
                                     const uint64_t *loads, double c, uint32_t *node);
RL_EXTERN int rl_ring_lookup_bounded_hash(const rl_ring_t *ring, uint64_t hash,
                                          const uint64_t *loads, double c, uint32_t *node);

/* --- statistics --- */
typedef struct rl_ring_stats {
    size_t members;
    size_t points;
    double min_share;      /* smallest arc share of any member */
    double max_share;      /* largest arc share of any member */
    double max_mean_share; /* max_share / (1 / members): 1.0 is perfect balance */
    double gap_cv;         /* coefficient of variation (stddev / mean) of the arcs between
                              consecutive points, over all points (a duplicate point owns 0) */
} rl_ring_stats;

/* Fills *out and, when shares is not NULL, shares[node] = the fraction of the ring's positions
 * node owns (shares has rl_ring_member_count() entries; they sum to 1). RL_EEMPTY on an empty
 * ring; RL_ENOTSUP for jump and memento (nothing to measure: each bucket gets 1/n of the keys
 * in expectation). For maglev the shares are the fractions of table entries, points is the table
 * size and gap_cv is 0 (entries are one apart). */
RL_EXTERN int rl_ring_stats_get(const rl_ring_t *ring, rl_ring_stats *out, double *shares);

/* --- 16-bit rings (turnstone) --- */

/* The full assignment table: out[b] = owner of bucket b for all 65536 buckets.
 * RL_ENOTSUP unless the ring is 16 bits wide; RL_EEMPTY on an empty ring. */
RL_EXTERN int rl_ring_bucket_table(const rl_ring_t *ring, uint32_t *out, size_t out_len);

/* turnstone's bucket_of: the first 4 characters of a workspace id read as hex (0..65535).
 * RL_EBADKEY if the id does not start with 4 hex digits. */
RL_EXTERN int rl_turnstone_bucket_of(const void *ws_id, size_t len, uint32_t *bucket);

#ifdef __cplusplus
}
#endif
#endif
