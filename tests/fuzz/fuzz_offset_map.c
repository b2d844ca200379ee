/* SPDX-License-Identifier: BSD-2-Clause */
/* Fuzz target: the offset map's decoder and encoder (consumer/offset_map.c). The first byte
 * picks what the rest is:
 *   even: a metadata text, decoded as a consumer would at an assignment. Whatever it is, the
 *         decoder must not crash, and a text it accepts must claim only offsets above its base,
 *         in ascending spans that end at its end; written again, it must read back the same.
 *   odd:  a map to write: a base (8 bytes), a limit (2 bytes), then (gap, run) byte pairs. The
 *         encoder must never write more than the limit, must refuse exactly when the shorter
 *         form does not fit, and what it writes must read back the same. */
#include "fuzz_input.h"
#include "offset_map.h"
#include "ringlane/error.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_offset_map: broken promise: %s\n", what);
        abort();
    }
}

/* The decoder's own promises about an accepted map. */
static void check_map(const rl__offset_map *m)
{
    check(m->base >= 0 && m->end - m->base >= 2, "a base and a span of at least 2");
    check(m->n >= 1 && m->spans, "at least one complete offset");
    for (size_t i = 0; i < m->n; i++) {
        int64_t below = i ? m->spans[i - 1].end : m->base; /* not complete */
        check(m->spans[i].start > below, "spans ascend, none touching the base or another");
        check(m->spans[i].end > m->spans[i].start, "spans are not empty");
    }
    check(m->spans[m->n - 1].end == m->end, "the last span ends at the end");
}

static void check_same(const rl__offset_map *a, const rl__offset_map *b)
{
    check(a->base == b->base && a->end == b->end && a->n == b->n, "read back the same");
    for (size_t i = 0; i < a->n; i++)
        check(a->spans[i].start == b->spans[i].start && a->spans[i].end == b->spans[i].end,
              "read back the same spans");
}

static char text[RL__OFFSET_MAP_MAX_BYTES + 64];

/* Writes m and reads it back: the same map, no longer than the bitmap bound. */
static void round_trip(const rl__offset_map *m, size_t cap)
{
    size_t len = 0;
    int rc = rl__offset_map_encode(m->base, m->spans, m->n, text, cap, &len);
    size_t bound = rl__offset_map_bitmap_len(m->base, (uint64_t)(m->end - m->base));
    if (rc == RL_ERANGE) {
        check(len == 0, "a refusal writes nothing");
        check(bound > cap, "refused only when not even its bitmap fits");
        return;
    }
    check(rc == 0, "a valid map is written");
    check(len > 0 && len <= cap, "never longer than the room given");
    check(len <= bound, "never longer than its bitmap");
    rl__offset_map back;
    const char *why = NULL;
    check(rl__offset_map_decode(text, len, &back, &why) == RL__OFFSET_MAP_OK, "reads back");
    check_map(&back);
    check_same(m, &back);
    rl__offset_map_free(&back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size, 0};
    uint8_t mode = fuzz_byte(&in);
    if (mode % 2 == 0) {
        size_t len;
        const char *t = (const char *)fuzz_rest(&in, &len);
        rl__offset_map m;
        const char *why = NULL;
        int v = rl__offset_map_decode(t, len, &m, &why);
        check(why != NULL, "a reason is always given");
        if (v != RL__OFFSET_MAP_OK) {
            check(m.n == 0 && m.spans == NULL, "a refused text gives no map");
            return 0;
        }
        check_map(&m);
        round_trip(&m, sizeof text);
        rl__offset_map_free(&m);
        return 0;
    }
    /* A map from (gap, run) pairs above a base. */
    int64_t base = (int64_t)(fuzz_u64(&in) >> (1 + fuzz_byte(&in) % 63));
    size_t cap = (size_t)(fuzz_byte(&in) << 8 | fuzz_byte(&in));
    if (cap > RL__OFFSET_MAP_MAX_BYTES)
        cap = RL__OFFSET_MAP_MAX_BYTES;
    size_t pairs = (size - in.at) / 2;
    rl__offset_map m = {.base = base};
    m.spans = malloc((pairs ? pairs : 1) * sizeof *m.spans);
    if (!m.spans)
        return 0;
    int64_t at = base < INT64_MAX ? base + 1 : base; /* at the largest base, no span fits */
    for (size_t i = 0; i < pairs; i++) {
        int64_t gap = fuzz_byte(&in), run = 1 + fuzz_byte(&in);
        if (m.n)
            gap++; /* spans do not touch: the decoder merges touching ones */
        if (at > INT64_MAX - gap - run)
            break;
        m.spans[m.n++] = (rl__offset_span){at + gap, at + gap + run};
        at += gap + run;
    }
    if (m.n) {
        m.end = m.spans[m.n - 1].end;
        round_trip(&m, cap);
    } else {
        size_t len = 99;
        check(rl__offset_map_encode(base, m.spans, 0, text, cap, &len) == 0 && len == 0,
              "no complete offsets: nothing written");
    }
    free(m.spans);
    return 0;
}
