/* SPDX-License-Identifier: BSD-2-Clause */
/* The turnstone reference design: bucket_of and the full 65536-bucket assignment table. */
#include "ring_internal.h"
#include "ringlane/error.h"

static int hex_digit(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int rl_turnstone_bucket_of(const void *ws_id, size_t len, uint32_t *bucket)
{
    if (!bucket || (!ws_id && len))
        return RL_EINVAL;
    if (len < 4)
        return RL_EBADKEY;
    const unsigned char *p = ws_id;
    uint32_t b = 0;
    for (int i = 0; i < 4; i++) {
        int d = hex_digit(p[i]);
        if (d < 0)
            return RL_EBADKEY;
        b = (b << 4) | (uint32_t)d;
    }
    *bucket = b;
    return 0;
}

int rl_ring_bucket_table(const rl_ring_t *r, uint32_t *out, size_t out_len)
{
    if (!r || !out)
        return RL_EINVAL;
    if (r->profile->info.bits != 16)
        return RL_ENOTSUP;
    if (out_len < 65536)
        return RL_ERANGE;
    if (r->n_points == 0)
        return RL_EEMPTY;
    /* One sweep instead of 65536 searches: the owner changes only at point positions. */
    size_t next = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        while (next < r->n_points &&
               (r->profile->successor == RL__SUCC_GT ? r->pos[next] <= b : r->pos[next] < b))
            next++;
        out[b] = r->owner[next == r->n_points ? 0 : next];
    }
    return 0;
}
