/* SPDX-License-Identifier: BSD-2-Clause */
/* ringlane: ring profiles.
 *
 * A profile fixes everything that decides where a key goes: the hash of vnode labels and keys,
 * the label format, the number of points per member, the order of equal points and the
 * successor rule. Compatibility profiles reproduce another implementation key for key.
 */
#ifndef RINGLANE_PROFILE_H
#define RINGLANE_PROFILE_H

#include "ringlane/common.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_profile_info {
    const char *name;        /* "default", "ds09", ... */
    const char *hash;        /* the hash, e.g. "xxh3-64" */
    const char *labels;      /* the vnode label format, e.g. "<name>#<i>" */
    const char *rule;        /* successor rule and tie order */
    const char *compatible;  /* what it reproduces */
    uint32_t default_vnodes; /* per unit of weight (see `labels` where it means more) */
    unsigned bits;           /* ring width: 16, 32 or 64 */
    uint32_t max_vnodes;     /* the largest vnodes the profile accepts (RL_VNODES_MAX but for
                                maglev, whose vnodes is its prime table size) */
    const char *kind;        /* "ring" (points on a circle), "table" (maglev's lookup table) or
                                "computed" (jump, memento: buckets computed from the hash) */
    uint32_t min_vnodes;     /* the smallest vnodes the profile accepts (1 but for ketama, whose
                                servers get vnodes / 4 labels: at least 5 for one each) */
    int history;             /* 1 when a ring made by rl_ring_add / rl_ring_remove depends on the
                                changes that led to it, not on its members alone (memento: a
                                build of the same members may place keys otherwise); else 0 */
} rl_profile_info;

RL_EXTERN size_t rl_profile_count(void);
RL_EXTERN const rl_profile_info *rl_profile_at(size_t i);           /* NULL if out of range */
RL_EXTERN const rl_profile_info *rl_profile_find(const char *name); /* NULL if unknown */

/* Whether the profile `name` (NULL: "default") builds rings with `vnodes` per unit of weight
 * (RL_VNODES_PROFILE: its default): 0, RL_EPROFILE, or RL_EVNODES when vnodes is outside
 * min_vnodes..max_vnodes or, for maglev, not a prime. rl_ring_build checks the same. */
RL_EXTERN int rl_profile_check_vnodes(const char *name, uint32_t vnodes);

#ifdef __cplusplus
}
#endif
#endif
