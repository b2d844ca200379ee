/* SPDX-License-Identifier: BSD-2-Clause */
/* The offset map's encoding: round trips, the choice of form, the size bound that makes the
 * consumer's backpressure exact, the examples of docs/consumer.md, and every kind of bad text
 * (another tool's, another version, damaged, cut short). */
#include "test_util.h"

#include "offset_map.h"

#include <stdbool.h>

/* --- an independent writer of bodies, for texts the encoder would never make --- */

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* "ringlane1:" + base64url(body + CRC-32 LE of body) into text. */
static size_t wrap(const uint8_t *body, size_t n, char *text)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint8_t b[512];
    assert_true(n + 4 <= sizeof b);
    memcpy(b, body, n);
    uint32_t crc = rl_crc32(body, n);
    for (int i = 0; i < 4; i++)
        b[n + (size_t)i] = (uint8_t)(crc >> (8 * i));
    n += 4;
    size_t o = (size_t)sprintf(text, "ringlane1:");
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        acc = acc << 8 | b[i];
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            text[o++] = a[(acc >> bits) & 63];
        }
    }
    if (bits)
        text[o++] = a[(acc << (6 - bits)) & 63];
    text[o] = '\0';
    return o;
}

static int decode_str(const char *text, rl__offset_map *m, const char **why)
{
    return rl__offset_map_decode(text, strlen(text), m, why);
}

/* A body "form base span payload..." as bytes. */
static size_t body_of(uint8_t *b, int form, uint64_t base, uint64_t span, const uint8_t *payload,
                      size_t n)
{
    size_t at = 0;
    b[at++] = (uint8_t)form;
    at += put_varint(b + at, base);
    at += put_varint(b + at, span);
    memcpy(b + at, payload, n);
    return at + n;
}

/* --- the examples of docs/consumer.md --- */

static void docs_examples(void **state)
{
    (void)state;
    char text[256];
    size_t len;
    /* Base 1000; 1002, 1003 and 1005..1009 complete: a bitmap (2 bytes against 4 of runs). */
    rl__offset_span a[] = {{1002, 1004}, {1005, 1010}};
    assert_rl_ok(rl__offset_map_encode(1000, a, 2, text, sizeof text, &len));
    assert_string_equal(text, "ringlane1:AegHCuwDLa64mQ");
    assert_int_equal(len, strlen(text));
    /* Base 1000; 1001..2000 complete but 1500: runs 1, 499, 1, 500 (6 bytes against 126). */
    rl__offset_span b[] = {{1001, 1500}, {1501, 2001}};
    assert_rl_ok(rl__offset_map_encode(1000, b, 2, text, sizeof text, &len));
    assert_string_equal(text, "ringlane1:AOgH6QcB8wMB9AOW2I1M");
    rl__offset_map m;
    assert_int_equal(decode_str(text, &m, NULL), RL__OFFSET_MAP_OK);
    assert_int_equal(m.form, RL__OFFSET_MAP_RUNS);
    assert_true(m.base == 1000 && m.end == 2001 && m.n == 2);
    assert_true(m.spans[0].start == 1001 && m.spans[0].end == 1500);
    assert_true(m.spans[1].start == 1501 && m.spans[1].end == 2001);
    assert_true(rl__offset_map_count(&m) == 999);
    rl__offset_map_free(&m);
}

/* --- round trips and the choice of form --- */

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Random maps (fixed seed), dense and sparse, short and long runs: each decodes to itself, in
 * the shorter form (runs on a tie), and its text has exactly the length that form predicts. */
static void round_trips_in_the_shorter_form(void **state)
{
    (void)state;
    uint64_t seed = 27;
    static rl__offset_span spans[4096];
    static char text[RL__OFFSET_MAP_MAX_BYTES + 1];
    int forms[2] = {0, 0};
    for (int round = 0; round < 3000; round++) {
        int64_t base = (int64_t)(test_rand(&seed) >> (1 + test_rand(&seed) % 63));
        uint64_t scale = 1 + test_rand(&seed) % (round % 3 == 0 ? 3 : round % 3 == 1 ? 40 : 4000);
        size_t n = 1 + (size_t)(test_rand(&seed) % (round % 5 == 0 ? 2000 : 30));
        int64_t at = base + 1;
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            int64_t gap = (int64_t)(test_rand(&seed) % scale);
            int64_t run = 1 + (int64_t)(test_rand(&seed) % scale);
            if (at > INT64_MAX - gap - run - 1)
                break;
            if (k && gap == 0) { /* adjacent: the encoder merges them */
                spans[k - 1].end = at + run;
            } else {
                spans[k++] = (rl__offset_span){at + gap, at + gap + run};
            }
            at = spans[k - 1].end + 1;
        }
        if (!k)
            continue;
        /* The forms' lengths, computed here from the definition. */
        uint64_t span = (uint64_t)(spans[k - 1].end - base);
        size_t runs = 0;
        int64_t prev = base;
        for (size_t i = 0; i < k; i++) {
            runs += varint_len((uint64_t)(spans[i].start - prev));
            runs += varint_len((uint64_t)(spans[i].end - spans[i].start));
            prev = spans[i].end;
        }
        size_t bitmap = (size_t)((span + 7) / 8);
        bool want_bitmap = bitmap < runs;
        size_t body =
            1 + varint_len((uint64_t)base) + varint_len(span) + (want_bitmap ? bitmap : runs) + 4;
        size_t want_len = 10 + 4 * (body / 3) + (body % 3 ? body % 3 + 1 : 0);
        size_t len = 0;
        int rc = rl__offset_map_encode(base, spans, k, text, sizeof text - 1, &len);
        if (want_len > sizeof text - 1) {
            assert_int_equal(rc, RL_ERANGE);
            continue;
        }
        assert_rl_ok(rc);
        assert_int_equal(len, want_len);
        if (want_bitmap)
            assert_true(len == rl__offset_map_bitmap_len(base, span));
        else
            assert_true(len <= rl__offset_map_bitmap_len(base, span));
        rl__offset_map m;
        const char *why = NULL;
        if (rl__offset_map_decode(text, len, &m, &why) != RL__OFFSET_MAP_OK)
            fail_msg("round %d: %s", round, why);
        assert_int_equal(m.form, want_bitmap ? RL__OFFSET_MAP_BITMAP : RL__OFFSET_MAP_RUNS);
        forms[m.form]++;
        assert_true(m.base == base && m.end == spans[k - 1].end);
        assert_int_equal(m.n, k);
        for (size_t i = 0; i < k; i++)
            assert_true(m.spans[i].start == spans[i].start && m.spans[i].end == spans[i].end);
        rl__offset_map_free(&m);
    }
    assert_true(forms[0] > 100 && forms[1] > 100); /* both forms were exercised */
}

/* --- the size bound --- */

/* The worst map of a span: every other offset complete, the last one too. */
static size_t worst(int64_t base, uint64_t span, rl__offset_span *s)
{
    size_t n = 0;
    for (uint64_t i = 1; i < span; i += 2)
        s[n++] = (rl__offset_span){base + (int64_t)i, base + (int64_t)i + 1};
    if (span % 2 == 0)
        ; /* ends on a complete offset already */
    else
        s[n++] = (rl__offset_span){base + (int64_t)span - 1, base + (int64_t)span};
    /* merge the last two if they touch */
    if (n >= 2 && s[n - 2].end == s[n - 1].start) {
        s[n - 2].end = s[n - 1].end;
        n--;
    }
    return n;
}

/* At the span cap every map fits, the worst one included, with the encoder's real length; one
 * offset more and the bitmap is longer than the limit, and the encoder refuses the worst map
 * rather than cut it. For Kafka's default limit, the smallest, a few between, and the largest,
 * and for bases of every varint length. */
static void span_cap_is_exact(void **state)
{
    (void)state;
    static rl__offset_span s[200000];
    static char text[RL__OFFSET_MAP_MAX_BYTES + 2];
    size_t limits[] = {4096, RL__OFFSET_MAP_MIN_BYTES, 33, 64, 100, 1000, 1001,
                       1002, RL__OFFSET_MAP_MAX_BYTES};
    int64_t bases[] = {0, 127, 1000, 1 << 20, (int64_t)1 << 40, INT64_MAX / 4};
    for (size_t li = 0; li < sizeof limits / sizeof *limits; li++) {
        for (size_t bi = 0; bi < sizeof bases / sizeof *bases; bi++) {
            size_t limit = limits[li];
            int64_t base = bases[bi];
            uint64_t cap = rl__offset_map_span_cap(limit, base);
            assert_true(cap >= 2);
            assert_true(rl__offset_map_bitmap_len(base, cap) <= limit);
            assert_true(rl__offset_map_bitmap_len(base, cap + 1) > limit);
            for (uint64_t span = cap - 1; span <= cap + 1; span++) {
                size_t n = worst(base, span, s);
                size_t len = 0;
                int rc = rl__offset_map_encode(base, s, n, text, limit, &len);
                if (span <= cap) {
                    assert_rl_ok(rc);
                    assert_true(len <= limit);
                    assert_true(len == rl__offset_map_bitmap_len(base, span));
                } else {
                    assert_int_equal(rc, RL_ERANGE);
                    assert_int_equal(len, 0);
                }
            }
        }
    }
    /* The figure docs/operations.md and consumer.h give: 4096 bytes, offsets below 2^28. */
    assert_int_equal(rl__offset_map_span_cap(4096, ((int64_t)1 << 28) - 1), 24416);
    assert_int_equal(rl__offset_map_span_cap(RL__OFFSET_MAP_MIN_BYTES - 1, INT64_MAX), 0);
    assert_int_equal(rl__offset_map_span_cap(RL__OFFSET_MAP_MIN_BYTES, INT64_MAX), 8);
    print_message("span caps at 4096 bytes by base: < 2^7 %llu, < 2^28 %llu, < 2^35 %llu, "
                  "< 2^63 %llu\n",
                  (unsigned long long)rl__offset_map_span_cap(4096, 127),
                  (unsigned long long)rl__offset_map_span_cap(4096, ((int64_t)1 << 28) - 1),
                  (unsigned long long)rl__offset_map_span_cap(4096, ((int64_t)1 << 35) - 1),
                  (unsigned long long)rl__offset_map_span_cap(4096, INT64_MAX));
}

/* Brute force: whether every map with a base in [from, end) and a span ending at end fits. */
static bool every_base_fits(int64_t from, int64_t end, size_t limit)
{
    for (int64_t b = from; end - b >= 2; b++)
        if (rl__offset_map_bitmap_len(b, (uint64_t)(end - b)) > limit)
            return false;
    return true;
}

/* rl__offset_map_fits, the test a partition makes before it takes an offset, against brute
 * force: at the largest end it admits every map from every later base fits, and one offset
 * more makes some map too long; so intake stops exactly there. Around the bases where the
 * varint grows a byte (128, 16384, 2^21, 2^35) and far from them. Below 128 the exact end is
 * past the conservative cap counted with the end's varint length (the check before: 248
 * offsets instead of 256 at 64 bytes). */
static void fits_is_exact(void **state)
{
    (void)state;
    size_t limits[] = {RL__OFFSET_MAP_MIN_BYTES, 40, 64, 100, 1001, 4096};
    int64_t froms[] = {0,
                       1,
                       71,
                       100,
                       120,
                       127,
                       128,
                       16300,
                       16383,
                       16384,
                       1000000,
                       ((int64_t)1 << 21) - 60,
                       ((int64_t)1 << 35) - 3,
                       ((int64_t)1 << 56) - 5};
    for (size_t li = 0; li < sizeof limits / sizeof *limits; li++) {
        for (size_t fi = 0; fi < sizeof froms / sizeof *froms; fi++) {
            size_t limit = limits[li];
            int64_t from = froms[fi], end = from + 2;
            assert_true(rl__offset_map_fits(from, end, limit));
            while (rl__offset_map_fits(from, end + 1, limit))
                end++;
            assert_true(every_base_fits(from, end, limit));
            assert_false(every_base_fits(from, end + 1, limit));
            assert_false(rl__offset_map_fits(from, end + 2, limit));
        }
    }
    /* 64 bytes, the oldest unfinished offset 0: 256 offsets, where the cap counted with the
     * end's varint length stopped at 248. */
    int64_t end = 2;
    while (rl__offset_map_fits(0, end + 1, 64))
        end++;
    assert_int_equal(end, 256);
    assert_int_equal(rl__offset_map_span_cap(64, end), 248);
    /* Spans of one offset or none need no map. */
    assert_true(rl__offset_map_fits(5, 6, RL__OFFSET_MAP_MIN_BYTES));
    assert_true(rl__offset_map_fits(5, 5, RL__OFFSET_MAP_MIN_BYTES));
}

/* --- the encoder's refusals --- */

static void encoder_refuses_bad_spans(void **state)
{
    (void)state;
    char text[128];
    size_t len = 99;
    rl__offset_span touching_base[] = {{10, 12}};
    assert_int_equal(rl__offset_map_encode(10, touching_base, 1, text, sizeof text, &len),
                     RL_EINVAL); /* the base itself is never complete */
    rl__offset_span below[] = {{5, 7}};
    assert_int_equal(rl__offset_map_encode(10, below, 1, text, sizeof text, &len), RL_EINVAL);
    rl__offset_span empty[] = {{12, 12}};
    assert_int_equal(rl__offset_map_encode(10, empty, 1, text, sizeof text, &len), RL_EINVAL);
    rl__offset_span overlap[] = {{12, 15}, {14, 16}};
    assert_int_equal(rl__offset_map_encode(10, overlap, 2, text, sizeof text, &len), RL_EINVAL);
    rl__offset_span descending[] = {{20, 21}, {12, 13}};
    assert_int_equal(rl__offset_map_encode(10, descending, 2, text, sizeof text, &len), RL_EINVAL);
    rl__offset_span ok[] = {{12, 13}};
    assert_int_equal(rl__offset_map_encode(-1, ok, 1, text, sizeof text, &len), RL_EINVAL);
    assert_int_equal(rl__offset_map_encode(10, NULL, 1, text, sizeof text, &len), RL_EINVAL);
    assert_int_equal(rl__offset_map_encode(10, ok, 1, text, sizeof text, NULL), RL_EINVAL);
    /* Nothing complete: no map, nothing written. */
    assert_rl_ok(rl__offset_map_encode(10, ok, 0, text, sizeof text, &len));
    assert_int_equal(len, 0);
    /* Adjacent spans are merged. */
    rl__offset_span adjacent[] = {{12, 13}, {13, 15}};
    assert_rl_ok(rl__offset_map_encode(10, adjacent, 2, text, sizeof text, &len));
    rl__offset_map m;
    assert_int_equal(rl__offset_map_decode(text, len, &m, NULL), RL__OFFSET_MAP_OK);
    assert_true(m.n == 1 && m.spans[0].start == 12 && m.spans[0].end == 15);
    rl__offset_map_free(&m);
    /* Too long for the room given: refused, not cut. */
    assert_int_equal(rl__offset_map_encode(10, adjacent, 2, text, 12, &len), RL_ERANGE);
    assert_int_equal(len, 0);
}

/* --- bad texts --- */

static void expect(const char *text, int verdict, const char *why_part)
{
    rl__offset_map m;
    const char *why = NULL;
    int v = decode_str(text, &m, &why);
    if (v != verdict)
        fail_msg("\"%s\": verdict %d (%s), want %d", text, v, why ? why : "", verdict);
    assert_non_null(why);
    if (why_part && !strstr(why, why_part))
        fail_msg("\"%s\": why \"%s\", want \"%s\"", text, why, why_part);
    assert_null(m.spans);
    assert_int_equal(m.n, 0);
}

static void other_tools_and_versions(void **state)
{
    (void)state;
    expect("", RL__OFFSET_MAP_FOREIGN, "not a ringlane");
    expect("checkpoint 42", RL__OFFSET_MAP_FOREIGN, "not a ringlane");
    expect("ringlane", RL__OFFSET_MAP_FOREIGN, NULL);
    expect("ringlane:AAAA", RL__OFFSET_MAP_FOREIGN, NULL);
    expect("ringlane-demo was here", RL__OFFSET_MAP_FOREIGN, NULL);
    expect("ringlane1", RL__OFFSET_MAP_FOREIGN, NULL);
    expect("RINGLANE1:AegHCuwDFLL-4ws", RL__OFFSET_MAP_FOREIGN, NULL);
    expect("ringlane2:AegHCuwDFLL-4ws", RL__OFFSET_MAP_OTHER_VERSION, "version");
    expect("ringlane10:AegHCuwDFLL-4ws", RL__OFFSET_MAP_OTHER_VERSION, "version");
    expect("ringlane0:AegHCuwDFLL-4ws", RL__OFFSET_MAP_OTHER_VERSION, "version");
    expect("ringlane01:AegHCuwDFLL-4ws", RL__OFFSET_MAP_OTHER_VERSION, "version");
    expect("ringlane1234567890123:x", RL__OFFSET_MAP_FOREIGN, NULL);
    /* NUL bytes inside: not text at all. */
    rl__offset_map m;
    assert_int_equal(rl__offset_map_decode("ringlane1:\0AAA", 14, &m, NULL),
                     RL__OFFSET_MAP_CORRUPT);
    assert_int_equal(rl__offset_map_decode(NULL, 0, &m, NULL), RL__OFFSET_MAP_FOREIGN);
}

/* Every cut of a valid text, and every one-character change, is refused: none decodes to a
 * map (the checksum, the layout, or the characters say so). */
static void cut_and_changed_texts(void **state)
{
    (void)state;
    const char *good[] = {"ringlane1:AegHCuwDLa64mQ", "ringlane1:AOgH6QcB8wMB9AOW2I1M"};
    const char alphabet[] = "AZaz09-_=+/ .:\x01\xff";
    for (size_t g = 0; g < 2; g++) {
        size_t n = strlen(good[g]);
        char t[64];
        for (size_t cut = 0; cut < n; cut++) {
            rl__offset_map m;
            int v = rl__offset_map_decode(good[g], cut, &m, NULL);
            assert_int_not_equal(v, RL__OFFSET_MAP_OK);
        }
        for (size_t i = 0; i < n; i++) {
            for (size_t a = 0; a < sizeof alphabet - 1; a++) {
                if (good[g][i] == alphabet[a])
                    continue;
                memcpy(t, good[g], n + 1);
                t[i] = alphabet[a];
                rl__offset_map m;
                int v = rl__offset_map_decode(t, n, &m, NULL);
                if (v == RL__OFFSET_MAP_OK)
                    fail_msg("\"%s\" (changed at %zu) decoded", t, i);
            }
        }
        /* Longer: a character more, or padding. */
        snprintf(t, sizeof t, "%sA", good[g]);
        expect(t, RL__OFFSET_MAP_CORRUPT, NULL);
        snprintf(t, sizeof t, "%s=", good[g]);
        expect(t, RL__OFFSET_MAP_CORRUPT, "base64url");
    }
}

/* Bodies with a right checksum and a wrong layout: each is named. */
static void layouts_that_break_the_rules(void **state)
{
    (void)state;
    uint8_t b[256], p[64];
    char t[512];
    /* A form that does not exist. */
    p[0] = 0x02;
    wrap(b, body_of(b, 7, 1000, 2, p, 1), t);
    expect(t, RL__OFFSET_MAP_CORRUPT, "form");
    /* A span of one offset (the base alone cannot be complete), and of zero. */
    p[0] = 1;
    wrap(b, body_of(b, RL__OFFSET_MAP_RUNS, 1000, 1, p, 1), t);
    expect(t, RL__OFFSET_MAP_CORRUPT, "span");
    wrap(b, body_of(b, RL__OFFSET_MAP_RUNS, 1000, 0, p, 0), t);
    expect(t, RL__OFFSET_MAP_CORRUPT, NULL);
    /* A span past the largest offset. */
    p[0] = 1;
    p[1] = 1;
    wrap(b, body_of(b, RL__OFFSET_MAP_RUNS, (uint64_t)INT64_MAX, 2, p, 2), t);
    expect(t, RL__OFFSET_MAP_CORRUPT, "span");
    /* Runs: a zero run; runs summing past the span; short of it; ending not complete; bytes
     * after the last run; a run of the base (the first) complete is impossible by layout. */
    p[0] = 1, p[1] = 0, p[2] = 1;
    wrap(b, body_of(b, RL__OFFSET_MAP_RUNS, 1000, 2, p, 3), t);
    expect(t, RL__OFFSET_MAP_CORRUPT, "runs");
    p[0] = 1, p[1] = 5;
    wrap(b, body_of(b, RL__OFFSET_MAP_RUNS, 1000, 4, p, 2), t);
    expect(t, RL__OFFSET_MAP_CORRUPT, "runs");
    p[0] = 1, p[1] = 1;
    wrap(b, body_of(b, RL__OFFSET_MAP_RUNS, 1000, 4, p, 2), t);
    expect(t, RL__OFFSET_MAP_CORRUPT, "runs");
    p[0] = 1, p[1] = 1, p[2] = 2;
    wrap(b, body_of(b, RL__OFFSET_MAP_RUNS, 1000, 4, p, 3), t);
    expect(t, RL__OFFSET_MAP_CORRUPT, "runs");
    p[0] = 1, p[1] = 1, p[2] = 9;
    wrap(b, body_of(b, RL__OFFSET_MAP_RUNS, 1000, 2, p, 3), t);
    expect(t, RL__OFFSET_MAP_CORRUPT, "runs");
    /* Varints: overlong (0x81 0x00 is 1 in two bytes), longer than 9 bytes. */
    size_t at = 0;
    b[at++] = RL__OFFSET_MAP_RUNS;
    b[at++] = 0x81, b[at++] = 0x00; /* base 1, overlong */
    b[at++] = 2, b[at++] = 1, b[at++] = 1;
    wrap(b, at, t);
    expect(t, RL__OFFSET_MAP_CORRUPT, "base");
    at = 0;
    b[at++] = RL__OFFSET_MAP_RUNS;
    for (int i = 0; i < 9; i++)
        b[at++] = 0xff;
    b[at++] = 0x01;
    b[at++] = 2, b[at++] = 1, b[at++] = 1;
    wrap(b, at, t);
    expect(t, RL__OFFSET_MAP_CORRUPT, "base");
    /* Bitmaps: base complete; last offset not complete; bits beyond the span; the wrong
     * length. */
    p[0] = 0x03; /* offsets 0 and 1 of a span of 2 */
    wrap(b, body_of(b, RL__OFFSET_MAP_BITMAP, 1000, 2, p, 1), t);
    expect(t, RL__OFFSET_MAP_CORRUPT, "base is complete");
    p[0] = 0x02; /* span 3: offset 2 is not complete */
    wrap(b, body_of(b, RL__OFFSET_MAP_BITMAP, 1000, 3, p, 1), t);
    expect(t, RL__OFFSET_MAP_CORRUPT, "base is complete");
    p[0] = 0x12; /* span 3: bit 4 set beyond it */
    wrap(b, body_of(b, RL__OFFSET_MAP_BITMAP, 1000, 2, p, 1), t);
    expect(t, RL__OFFSET_MAP_CORRUPT, "beyond");
    p[0] = 0x02, p[1] = 0;
    wrap(b, body_of(b, RL__OFFSET_MAP_BITMAP, 1000, 2, p, 2), t);
    expect(t, RL__OFFSET_MAP_CORRUPT, "length");
    /* A right bitmap decodes: offsets 1001 and 1003..1004 of base 1000. */
    p[0] = 0x1a;
    wrap(b, body_of(b, RL__OFFSET_MAP_BITMAP, 1000, 5, p, 1), t);
    rl__offset_map m;
    assert_int_equal(decode_str(t, &m, NULL), RL__OFFSET_MAP_OK);
    assert_true(m.n == 2 && m.spans[0].start == 1001 && m.spans[0].end == 1002 &&
                m.spans[1].start == 1003 && m.spans[1].end == 1005);
    rl__offset_map_free(&m);
    /* Too short to hold a map; a checksum that does not match. */
    wrap(b, body_of(b, RL__OFFSET_MAP_RUNS, 1, 2, p, 0), t);
    expect(t, RL__OFFSET_MAP_CORRUPT, NULL);
    expect("ringlane1:AAAAAAAAAAA", RL__OFFSET_MAP_CORRUPT, "checksum");
    expect("ringlane1:A", RL__OFFSET_MAP_CORRUPT, "base64url");
    expect("ringlane1:", RL__OFFSET_MAP_CORRUPT, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(docs_examples),
        cmocka_unit_test(round_trips_in_the_shorter_form),
        cmocka_unit_test(span_cap_is_exact),
        cmocka_unit_test(fits_is_exact),
        cmocka_unit_test(encoder_refuses_bad_spans),
        cmocka_unit_test(other_tools_and_versions),
        cmocka_unit_test(cut_and_changed_texts),
        cmocka_unit_test(layouts_that_break_the_rules),
    };
    return cmocka_run_group_tests_name("offset_map", tests, NULL, NULL);
}
