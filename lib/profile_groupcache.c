/* SPDX-License-Identifier: BSD-2-Clause */
/* groupcache: Go groupcache's consistenthash.Map with its default hash, so peers picked by a
 * groupcache pool and by ringlane agree.
 *
 * Map.Add(names...) puts `replicas` points per name at crc32.ChecksumIEEE(strconv.Itoa(i) +
 * name) and records hashMap[point] = name, so on equal points the name added later wins. Get
 * takes the first point >= crc32(key), wrapping. Upstream has no weights and no Remove: here a
 * member of weight w gets w * replicas points (weight 1 is groupcache exactly), and a removal
 * rebuilds the ring from the remaining members, which is what a new Map given the same Add calls
 * would hold. */
#include "ring_internal.h"
#include "ringlane/error.h"
#include "ringlane/hash.h"

#include <stdio.h>

static int emit_groupcache(const rl_ring_t *r, rl__points *out)
{
    char label[RL_NAME_MAX + 32];
    for (uint32_t n = 0; n < r->n_nodes; n++) {
        uint64_t count = (uint64_t)r->nodes[n].weight * r->vnodes;
        for (uint64_t i = 0; i < count; i++) {
            int len =
                snprintf(label, sizeof label, "%llu%s", (unsigned long long)i, r->nodes[n].name);
            int rc = rl__points_push(out, rl__label_hash(r, label, (size_t)len), n, (uint32_t)i);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static uint64_t label_crc32(const void *d, size_t n)
{
    return rl_crc32(d, n);
}

const rl__profile rl__profile_groupcache = {
    .info = {.name = "groupcache",
             .hash = "CRC-32 IEEE (zlib), labels and keys",
             .labels = "<i><name>, i from 0, weight x vnodes (replicas, 50) per member",
             .rule = "first point >= hash, wrap; ties to the member added later",
             .compatible = "Go groupcache consistenthash.Map (crc32.ChecksumIEEE); no weights "
                           "or Remove upstream",
             .default_vnodes = 50,
             .bits = 32,
             .max_vnodes = RL_VNODES_MAX,
             .min_vnodes = 1,
             .kind = "ring",
             .local_remove = 1,
             .local_add = 1},
    .successor = RL__SUCC_GE,
    .tie = RL__TIE_LATER_WINS,
    .label_hash = label_crc32,
    .emit = emit_groupcache,
};
