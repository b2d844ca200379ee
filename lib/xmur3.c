/* SPDX-License-Identifier: BSD-2-Clause */
/* xmur3 over Unicode code points, so that C agrees with the Python reference of seed 003:
 * its hash32(s) mixes len(s) (code points) and ord(ch) for each code point. */
#include "ringlane/hash.h"

/* Decodes one code point at p[0..n), n >= 1. Strict UTF-8 as Python's decoder has it; a byte
 * that does not start a valid sequence becomes U+DC00 + byte and consumes one byte, which is
 * what errors="surrogateescape" yields (continuation bytes never start a sequence, so escaping
 * byte by byte gives the same code points as escaping the maximal invalid subpart). */
static uint32_t next_code_point(const unsigned char *p, size_t n, size_t *used)
{
    unsigned char b0 = p[0];
    *used = 1;
    if (b0 < 0x80)
        return b0;

    size_t need;
    uint32_t cp;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 1;
        cp = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 2;
        cp = b0 & 0x0F;
        if (b0 == 0xE0)
            lo = 0xA0; /* no overlong forms */
        else if (b0 == 0xED)
            hi = 0x9F; /* no encoded surrogates */
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 3;
        cp = b0 & 0x07;
        if (b0 == 0xF0)
            lo = 0x90;
        else if (b0 == 0xF4)
            hi = 0x8F; /* nothing above U+10FFFF */
    } else {
        return 0xDC00u + b0;
    }
    if (n < need + 1)
        return 0xDC00u + b0;
    for (size_t i = 1; i <= need; i++) {
        unsigned char b = p[i];
        unsigned char min = i == 1 ? lo : 0x80, max = i == 1 ? hi : 0xBF;
        if (b < min || b > max)
            return 0xDC00u + b0;
        cp = (cp << 6) | (b & 0x3F);
    }
    *used = need + 1;
    return cp;
}

uint32_t rl_xmur3(const void *utf8, size_t len)
{
    const unsigned char *p = utf8;
    uint32_t count = 0;
    for (size_t i = 0, used; i < len; i += used) {
        (void)next_code_point(p + i, len - i, &used);
        count++;
    }

    uint32_t h = 1779033703u ^ count;
    for (size_t i = 0, used; i < len; i += used) {
        uint32_t cp = next_code_point(p + i, len - i, &used);
        h = (h ^ cp) * 3432918353u;
        h = (h << 13) | (h >> 19);
    }
    h = (h ^ (h >> 16)) * 2246822507u;
    h = (h ^ (h >> 13)) * 3266489909u;
    return h ^ (h >> 16);
}
