/* SPDX-License-Identifier: BSD-2-Clause */
/* The offset window: a ring buffer of dispatched offsets in order, with a done flag each.
 * Completions arrive in any order (lanes run in parallel); the watermark moves only across a
 * run of completed offsets at the head, so a commit never skips an unfinished message. */
#include "offsets.h"
#include "ringlane/error.h"

#include <stdlib.h>

int rl__offsets_init(rl__offsets *o, uint32_t cap)
{
    if (!o || cap < 1 || cap > (1u << 24))
        return RL_EINVAL;
    o->offset = malloc(cap * sizeof *o->offset);
    o->done = malloc(cap);
    if (!o->offset || !o->done) {
        free(o->offset);
        free(o->done);
        return RL_ENOMEM;
    }
    o->cap = cap;
    rl__offsets_reset(o);
    return 0;
}

void rl__offsets_free(rl__offsets *o)
{
    if (!o)
        return;
    free(o->offset);
    free(o->done);
    o->offset = NULL;
    o->done = NULL;
}

void rl__offsets_reset(rl__offsets *o)
{
    o->head = o->count = 0;
    o->watermark = -1;
    o->last_pushed = -1;
}

int rl__offsets_push(rl__offsets *o, int64_t offset)
{
    if (offset < 0 || offset <= o->last_pushed)
        return RL_EINVAL;
    if (o->count == o->cap)
        return RL_EAGAIN;
    uint32_t slot = (o->head + o->count) % o->cap;
    o->offset[slot] = offset;
    o->done[slot] = 0;
    o->count++;
    o->last_pushed = offset;
    return 0;
}

/* The position (0..count-1 from head) of offset, or -1: offsets increase along the buffer. */
static int64_t find(const rl__offsets *o, int64_t offset)
{
    uint32_t lo = 0, hi = o->count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (o->offset[(o->head + mid) % o->cap] < offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < o->count && o->offset[(o->head + lo) % o->cap] == offset)
        return lo;
    return -1;
}

int rl__offsets_complete(rl__offsets *o, int64_t offset)
{
    int64_t at = find(o, offset);
    if (at < 0)
        return RL_ENOENT;
    uint32_t slot = (o->head + (uint32_t)at) % o->cap;
    if (o->done[slot])
        return RL_ENOENT;
    o->done[slot] = 1;
    while (o->count > 0 && o->done[o->head]) {
        o->watermark = o->offset[o->head] + 1;
        o->head = (o->head + 1) % o->cap;
        o->count--;
    }
    return 0;
}

int64_t rl__offsets_watermark(const rl__offsets *o)
{
    return o->watermark;
}

int64_t rl__offsets_oldest(const rl__offsets *o)
{
    return o->count ? o->offset[o->head] : -1;
}

uint32_t rl__offsets_in_flight(const rl__offsets *o)
{
    return o->count;
}

int64_t rl__offsets_at(const rl__offsets *o, uint32_t i, int *done)
{
    uint32_t slot = (o->head + i) % o->cap;
    *done = o->done[slot];
    return o->offset[slot];
}
