/* SPDX-License-Identifier: BSD-2-Clause */
/* The profile registry: ringlane's own profiles and the seed rings, reproduced exactly. */
#include "ring_internal.h"
#include "ringlane/error.h"
#include "ringlane/hash.h"

#include <stdio.h>
#include <string.h>

static uint64_t label_xxh3(const void *d, size_t n)
{
    return rl_xxh3(d, n);
}

static uint64_t label_hash64(const void *d, size_t n)
{
    return rl_hash64(d, n);
}

static uint64_t label_xmur3(const void *d, size_t n)
{
    return rl_xmur3(d, n);
}

/* turnstone: position = fnv1a_32("<node_id>:<i>") % 65536; the width mask does the modulo. */
static uint64_t label_fnv1a32(const void *d, size_t n)
{
    return rl_fnv1a32(d, n);
}

/* turnstone routes buckets, and a key's bucket is bucket_of(workspace id). */
static int key_turnstone(const void *key, size_t len, uint64_t *out)
{
    uint32_t bucket;
    int rc = rl_turnstone_bucket_of(key, len, &bucket);
    if (rc == 0)
        *out = bucket;
    return rc;
}

static const rl__profile profile_default = {
    .info = {.name = "default",
             .hash = "xxh3-64 (libxxhash)",
             .labels = "<name>#<i>, i from 0, weight x vnodes per member",
             .rule = "first point >= hash, wrap; ties by (position, name, i)",
             .compatible = "ringlane's own",
             .default_vnodes = 160,
             .bits = 64,
             .max_vnodes = RL_VNODES_MAX,
             .min_vnodes = 1,
             .kind = "ring",
             .local_remove = 1,
             .local_add = 1},
    .successor = RL__SUCC_GE,
    .tie = RL__TIE_NAME,
    .label_sep = "#",
    .label_hash = label_xxh3,
};

static const rl__profile profile_ds09 = {
    .info = {.name = "ds09",
             .hash = "hash64 = SplitMix64(FNV-1a 64)",
             .labels = "<name>#<i>, i from 0, weight x vnodes per member",
             .rule = "first point >= hash, wrap; ties by (position, name, i)",
             .compatible = "the ring of a Go design with bounded loads (its hash64 = SplitMix64 "
                           "of FNV-1a 64, labels <name>#<i>, 160 points per member; bounded "
                           "loads as Mirrokni, Thorup and Zadimoghaddam)",
             .default_vnodes = 160,
             .bits = 64,
             .max_vnodes = RL_VNODES_MAX,
             .min_vnodes = 1,
             .kind = "ring",
             .local_remove = 1,
             .local_add = 1},
    .successor = RL__SUCC_GE,
    .tie = RL__TIE_NAME,
    .label_sep = "#",
    .label_hash = label_hash64,
};

static const rl__profile profile_turnstone = {
    .info = {.name = "turnstone",
             .hash = "FNV-1a 32 mod 65536; keys: bucket_of (first 4 hex digits)",
             .labels = "<name>:<i>, i from 0, weight x 150 per member",
             .rule = "first point > bucket (bisect_right), wrap; ties by (position, name, i)",
             .compatible = "16-bit bucket ring for hex-prefixed ids (turnstone's design: an "
                           "id's first 4 hex digits are its bucket 0..65535, owned by the first "
                           "point after it; 150 FNV-1a 32 points per unit of weight)",
             .default_vnodes = 150,
             .bits = 16,
             .max_vnodes = RL_VNODES_MAX,
             .min_vnodes = 1,
             .kind = "ring",
             .local_remove = 1,
             .local_add = 1},
    .successor = RL__SUCC_GT,
    .tie = RL__TIE_NAME,
    .label_sep = ":",
    .label_hash = label_fnv1a32,
    .key_hash = key_turnstone,
};

static const rl__profile profile_xmur3 = {
    .info = {.name = "xmur3",
             .hash = "xmur3 32-bit over code points",
             .labels = "<name>#<i>, i from 0, weight x vnodes per member",
             .rule = "first point >= hash (bisect_left), wrap; ties by (position, name, i)",
             .compatible = "32-bit xmur3 ring of a Python/TypeScript reference (an interview "
                           "exercise's reference solution: xmur3 over code points, 3 points per "
                           "member; its TypeScript twin agrees on text within the BMP)",
             .default_vnodes = 3,
             .bits = 32,
             .max_vnodes = RL_VNODES_MAX,
             .min_vnodes = 1,
             .kind = "ring",
             .local_remove = 1,
             .local_add = 1},
    .successor = RL__SUCC_GE,
    .tie = RL__TIE_NAME,
    .label_sep = "#",
    .label_hash = label_xmur3,
};

/* The registry, in the order `ringlane profiles` lists them; the first is the default. */
static const rl__profile *const profiles[] = {
    &profile_default,    &profile_ds09,         &profile_turnstone,      &profile_xmur3,
    &rl__profile_ketama, &rl__profile_envoy,    &rl__profile_groupcache, &rl__profile_maglev,
    &rl__profile_jump,   &rl__profile_balanced, &rl__profile_memento,
};

#define N_PROFILES (sizeof profiles / sizeof profiles[0])

const rl__profile *rl__profile_find(const char *name)
{
    if (!name)
        return profiles[0];
    for (size_t i = 0; i < N_PROFILES; i++)
        if (strcmp(profiles[i]->info.name, name) == 0)
            return profiles[i];
    return NULL;
}

size_t rl_profile_count(void)
{
    return N_PROFILES;
}

const rl_profile_info *rl_profile_at(size_t i)
{
    return i < N_PROFILES ? &profiles[i]->info : NULL;
}

size_t rl_profile_names(char *buf, size_t size)
{
    size_t need = 0;
    for (size_t i = 0; i < N_PROFILES; i++) {
        const char *name = profiles[i]->info.name;
        size_t len = strlen(name), sep = i ? 2 : 0;
        /* Copy what fits of ", name" after what is there, always leaving room for the NUL. */
        for (size_t k = 0; k < sep + len; k++, need++)
            if (need + 1 < size)
                buf[need] = k < sep ? ", "[k] : name[k - sep];
    }
    if (size)
        buf[need < size ? need : size - 1] = '\0';
    return need;
}

const rl_profile_info *rl_profile_find(const char *name)
{
    const rl__profile *p = name ? rl__profile_find(name) : NULL;
    return p ? &p->info : NULL;
}

/* The rule of profile p for vnodes, in the words every layer quotes. */
static void vnodes_rule(const rl__profile *p, char *why, size_t size)
{
    const rl_profile_info *i = &p->info;
    const char *means = p->vnodes_means;
    if (i->max_vnodes == 0)
        snprintf(why, size, "profile %s has no vnodes (%s)", i->name,
                 means ? means : "it takes none");
    else
        snprintf(why, size, "profile %s takes %s%u..%u%s%s%s%s", i->name,
                 p->vnodes_prime ? "a prime " : "", i->min_vnodes, i->max_vnodes,
                 p->vnodes_prime ? "" : " vnodes", means ? " (" : "", means ? means : "",
                 means ? ")" : "");
}

int rl_profile_explain_vnodes(const char *name, uint32_t vnodes, char *why, size_t size)
{
    if (!why)
        size = 0;
    const rl__profile *p = rl__profile_find(name);
    if (!p) {
        if (size)
            snprintf(why, size, "unknown profile \"%s\"", name);
        return RL_EPROFILE;
    }
    if (size)
        vnodes_rule(p, why, size);
    if (vnodes == RL_VNODES_PROFILE) /* not set: the profile's default, jump's none */
        return 0;
    if (p->info.max_vnodes == 0 || vnodes < p->info.min_vnodes || vnodes < 1 ||
        vnodes > p->info.max_vnodes)
        return RL_EVNODES;
    return p->check_vnodes ? p->check_vnodes(vnodes) : 0;
}

int rl_profile_check_vnodes(const char *name, uint32_t vnodes)
{
    return rl_profile_explain_vnodes(name, vnodes, NULL, 0);
}
