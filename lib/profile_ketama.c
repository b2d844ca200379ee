/* SPDX-License-Identifier: BSD-2-Clause */
/* ketama: libmemcached 1.1's weighted ketama continuum (MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED),
 * reproduced point for point so a memcached fleet can be routed by ringlane with no extra miss.
 *
 * Members are named "host:port" (a name without ':' is the host on port 11211). Server i of n,
 * of weight w in a total W, gets floor(w/W * vnodes/4 * n + 1e-10) labels, computed in single
 * precision exactly as libmemcached does (with vnodes = 160 this gives 39, not 40, labels per
 * server at n = 25, 47, 50, ...). Label j is "host-j" on port 11211, else "host:port-j"; its MD5
 * digest gives four points, bytes 4a..4a+3 read little-endian. Equal points go to the server
 * added first, as libmemcached's qsort by (value, server index) does. */
#include "error_detail_internal.h"
#include "ring_internal.h"
#include "ringlane/error.h"
#include "ringlane/hash.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define KETAMA_DEFAULT_PORT 11211u

/* Splits member n's name at its last ':' into host and port. A name with no ':' is a host on
 * the default port; a port must be 1..65535 in decimal, and the host may not be empty. */
static int split_host_port(const rl_ring_t *r, size_t node, size_t *host_len, unsigned *port)
{
    const rl__node *n = &r->nodes[node];
    const char *colon = strrchr(n->name, ':');
    if (!colon) {
        *host_len = n->name_len;
        *port = KETAMA_DEFAULT_PORT;
        return 0;
    }
    const char *digits = colon + 1;
    size_t nd = strlen(digits);
    unsigned v = 0;
    for (size_t i = 0; i < nd && nd <= 5; i++) {
        if (digits[i] < '0' || digits[i] > '9') {
            nd = 0; /* not a number */
            break;
        }
        v = v * 10 + (unsigned)(digits[i] - '0');
    }
    if (colon == n->name || nd == 0 || nd > 5 || v < 1 || v > 65535) {
        char label[48], q[RL__QUOTE_SIZE];
        rl__member_label(r, node, label, sizeof label);
        return rl_error_detail_set(
            RL_ENAME, "%s.name %s: profile ketama takes HOST or HOST:PORT, %s", label,
            rl__quote(q, n->name),
            colon == n->name ? "and the host is empty" : "with a port 1..65535 in decimal");
    }
    *host_len = (size_t)(colon - n->name);
    *port = v;
    return 0;
}

/* Labels (each worth four points) of a server: single-precision float, one operation at a time
 * in libmemcached's order, so that the rounding is the same. */
static uint32_t labels_of(uint32_t weight, uint64_t total_weight, size_t servers, uint32_t vnodes)
{
    float pct = (float)weight / (float)total_weight;
    float x = pct * (float)vnodes;
    x = x / 4.0f;
    x = x * (float)servers;
    x = x + 0.0000000001f;
    return (uint32_t)floorf(x);
}

static uint64_t total_weight_of(const rl_ring_t *r)
{
    uint64_t total = 0;
    for (size_t n = 0; n < r->n_nodes; n++)
        total += r->nodes[n].weight;
    return total;
}

/* Four points per label; the labels depend on the member count and the weights' shares, not
 * on weight * vnodes (one member of weight 65536 at 65536 vnodes has 65,536 points, and 300
 * members of weight 1 have 19,660,800). Refuses what emit_ketama refuses. */
static int count_ketama(const rl_ring_t *r, uint64_t *points)
{
    if (r->hash)
        return RL_ENOTSUP;
    uint64_t total_weight = total_weight_of(r), count = 0;
    for (size_t n = 0; n < r->n_nodes; n++) {
        size_t host_len;
        unsigned port;
        int rc = split_host_port(r, n, &host_len, &port);
        if (rc)
            return rc;
        count += 4 * (uint64_t)labels_of(r->nodes[n].weight, total_weight, r->n_nodes, r->vnodes);
    }
    *points = count;
    return 0;
}

static int emit_ketama(const rl_ring_t *r, rl__points *out)
{
    if (r->hash)
        return RL_ENOTSUP; /* four points per MD5 digest: a caller's hash cannot stand in */
    uint64_t total_weight = total_weight_of(r);

    char label[RL_NAME_MAX + 32];
    for (uint32_t n = 0; n < r->n_nodes; n++) {
        size_t host_len;
        unsigned port;
        int rc = split_host_port(r, n, &host_len, &port);
        if (rc)
            return rc;
        uint32_t labels = labels_of(r->nodes[n].weight, total_weight, r->n_nodes, r->vnodes);
        for (uint32_t j = 0; j < labels; j++) {
            int len =
                port == KETAMA_DEFAULT_PORT
                    ? snprintf(label, sizeof label, "%.*s-%u", (int)host_len, r->nodes[n].name, j)
                    : snprintf(label, sizeof label, "%.*s:%u-%u", (int)host_len, r->nodes[n].name,
                               port, j);
            unsigned char digest[16];
            rl__md5(label, (size_t)len, digest);
            for (uint32_t a = 0; a < 4; a++)
                if ((rc = rl__points_push(out, rl__le32(digest + 4 * a), n, j * 4 + a)))
                    return rc;
        }
    }
    return 0;
}

static uint64_t label_md5(const void *d, size_t n)
{
    return rl_md5_32(d, n);
}

const rl__profile rl__profile_ketama = {
    .info = {.name = "ketama",
             .hash = "MD5 (libmd): keys by the first 4 digest bytes, little-endian",
             .labels = "host-<j> on port 11211, else host:port-<j>; 4 points per label MD5; "
                       "floor(w/W * vnodes/4 * n + 1e-10f) labels (float); vnodes 160",
             .rule = "first point >= hash, wrap; ties to the server added first",
             .compatible = "libmemcached 1.1 weighted ketama (MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED); "
                           "members are host:port, no port = 11211",
             .default_vnodes = 160,
             .bits = 32,
             .max_vnodes = RL_VNODES_MAX,
             .min_vnodes = 5, /* vnodes / 4 labels per server at equal weights: 5 gives one */
             .kind = "ring"},
    .successor = RL__SUCC_GE,
    .tie = RL__TIE_ORDER,
    .label_hash = label_md5,
    .emit = emit_ketama,
    .count = count_ketama,
    .vnodes_means = "points per server at equal weights: vnodes / 4 labels, none below 5",
};
