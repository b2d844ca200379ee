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
    uint32_t default_vnodes; /* per unit of weight (see `labels` where it means more); 0 for a
                                profile that has no vnodes (jump, memento) */
    unsigned bits;           /* ring width: 16, 32 or 64 */
    uint32_t max_vnodes;     /* the largest vnodes the profile accepts (RL_VNODES_MAX but for
                                envoy and maglev, whose vnodes is a ring or table size; 0: it
                                takes none, rl_profile_explain_vnodes says why) */
    const char *kind;        /* "ring" (points on a circle), "table" (maglev's lookup table) or
                                "computed" (jump, memento: buckets computed from the hash) */
    uint32_t min_vnodes;     /* the smallest vnodes the profile accepts (1 but for ketama, whose
                                servers get vnodes / 4 labels: at least 5 for one each; maglev 2,
                                the smallest prime; 0 with max_vnodes 0) */
    int history;             /* 1 when a ring made by rl_ring_add / rl_ring_remove depends on the
                                changes that led to it, not on its members alone (memento: a
                                build of the same members may place keys otherwise); else 0 */
    int local_remove;        /* 1 when rl_ring_remove moves only the removed member's keys, none
                                between the members that stay, whatever the weights (default,
                                ds09, turnstone, xmur3, groupcache, memento: each member's place
                                depends on it alone); 0 when a remove may move keys between
                                survivors (ketama, envoy, maglev, jump, balanced). The
                                dispatcher's remove_lane then looks at the removed lane alone */
    int local_add;           /* 1 when rl_ring_add moves keys only to the added member (those
                                of local_remove, and jump and balanced, which number members
                                and append the new one); 0 for ketama (its points per server
                                change at some member counts), envoy and maglev. The
                                dispatcher's add_lane then counts no moves before making room */
} rl_profile_info;

RL_EXTERN size_t rl_profile_count(void);
RL_EXTERN const rl_profile_info *rl_profile_at(size_t i);           /* NULL if out of range */
RL_EXTERN const rl_profile_info *rl_profile_find(const char *name); /* NULL if unknown */

/* Every profile's name, comma-separated ("default, ds09, ..."), into buf: cut and terminated
 * when it does not fit (nothing is written when size is 0). Returns the length of the whole
 * list, as snprintf does, so a return >= size says it was cut. For messages such as "unknown
 * profile (one of: ...)". */
RL_EXTERN size_t rl_profile_names(char *buf, size_t size);

/* The one rule for a profile and a vnodes value, which rl_ring_build, the Kafka partitioner
 * and its plugin, and the ringlane CLI all ask. Whether the profile `name` (NULL: "default")
 * builds rings with `vnodes` per unit of weight: 0, RL_EPROFILE (unknown profile), or
 * RL_EVNODES (outside min_vnodes..max_vnodes, not a prime for maglev, any value for jump,
 * which has none). RL_VNODES_PROFILE (the profile's default, "not set") is taken by every
 * profile. When why is not NULL it receives, in `size` bytes (cut, still terminated), the rule
 * the value was checked against, whatever the answer, for the caller to put after the name of
 * its option and before the value given, e.g. "ringlane.vnodes: <why>, got 1000":
 *   profile maglev takes a prime 2..5000011 (its table size)
 *   profile ketama takes 5..65536 vnodes (points per server at equal weights: vnodes / 4
 *     labels, none below 5)
 *   profile default takes 1..65536 vnodes
 *   profile jump has no vnodes (it computes each key's bucket from the member count)
 *   unknown profile "nope"
 * docs/errors.md lists the same words. */
RL_EXTERN int rl_profile_explain_vnodes(const char *name, uint32_t vnodes, char *why, size_t size);

/* rl_profile_explain_vnodes(name, vnodes, NULL, 0): the answer without the words. */
RL_EXTERN int rl_profile_check_vnodes(const char *name, uint32_t vnodes);

#ifdef __cplusplus
}
#endif
#endif
