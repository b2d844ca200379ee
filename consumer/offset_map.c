/* SPDX-License-Identifier: BSD-2-Clause */
/* The offset map's encoding (docs/consumer.md, "The offset map's format"):
 *
 *   text   = "ringlane1:" base64url(body), without padding
 *   body   = form (1 byte) | base (varint) | span (varint) | runs or bitmap | CRC-32 (4 bytes LE)
 *
 * The span counts the offsets from the base to the last complete one. The runs are the
 * lengths of its alternating stretches, not complete first (the base never is), complete last;
 * the bitmap has one bit per offset of the span, least significant bit first. A map is written
 * in the shorter of the two forms; the bitmap's length depends on the span alone, which is what
 * bounds every map of a span (rl__offset_map_bitmap_len). */
#include "offset_map.h"
#include "ringlane/error.h"
#include "ringlane/hash.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define HEAD_LEN (sizeof RL__OFFSET_MAP_HEAD - 1)
#define CRC_LEN 4u
#define VARINT_MAX 9u /* 63 bits: an offset, or a span within INT64_MAX */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

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

/* Reads a canonical varint of at most VARINT_MAX bytes whose value fits in 63 bits. */
static bool get_varint(const uint8_t *p, size_t len, size_t *at, uint64_t *out)
{
    uint64_t v = 0;
    for (size_t i = 0; i < VARINT_MAX; i++) {
        if (*at >= len)
            return false;
        uint8_t b = p[(*at)++];
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            if (b == 0 && i > 0)
                return false; /* overlong */
            *out = v;
            return v <= (uint64_t)INT64_MAX;
        }
    }
    return false;
}

static size_t b64_len(size_t n)
{
    return 4 * (n / 3) + (n % 3 ? n % 3 + 1 : 0);
}

static size_t text_len(size_t body_len)
{
    return HEAD_LEN + b64_len(body_len);
}

/* The body's length around a payload of `payload` bytes. */
static size_t body_len(int64_t base, uint64_t span, size_t payload)
{
    return 1 + varint_len((uint64_t)base) + varint_len(span) + payload + CRC_LEN;
}

size_t rl__offset_map_bitmap_len(int64_t base, uint64_t span)
{
    if (base < 0)
        base = 0;
    return text_len(body_len(base, span, (size_t)((span + 7) / 8)));
}

uint64_t rl__offset_map_span_cap(size_t max_bytes, int64_t base_hi)
{
    if (max_bytes < text_len(1))
        return 0;
    /* The length grows with the span: the largest span that fits, by bisection. */
    uint64_t lo = 0, hi = (uint64_t)max_bytes * 8 + 8;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo + 1) / 2;
        if (rl__offset_map_bitmap_len(base_hi, mid) <= max_bytes)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo >= 2 ? lo : 0;
}

bool rl__offset_map_fits(int64_t from, int64_t end, size_t max_bytes)
{
    if (from < 0)
        from = 0;
    if (end - from < 2)
        return true; /* no map: its base is never complete */
    if (rl__offset_map_bitmap_len(from, (uint64_t)(end - from)) > max_bytes)
        return false;
    for (int bits = 7; bits <= 56; bits += 7) { /* 2^7 .. 2^56: a varint byte more */
        int64_t b = (int64_t)1 << bits;
        if (b >= end)
            break;
        if (b > from && end - b >= 2 &&
            rl__offset_map_bitmap_len(b, (uint64_t)(end - b)) > max_bytes)
            return false;
    }
    return true;
}

/* --- writing --- */

/* Visits the runs of the spans (merging adjacent ones): not complete, complete, ... */
typedef struct runs {
    const rl__offset_span *s;
    size_t n, i;
    int64_t at; /* where the next run starts */
} runs;

static bool next_run(runs *r, uint64_t *len, bool *complete)
{
    if (r->i >= r->n)
        return false;
    if (r->at < r->s[r->i].start) {
        *len = (uint64_t)(r->s[r->i].start - r->at);
        *complete = false;
        r->at = r->s[r->i].start;
        return true;
    }
    int64_t end = r->s[r->i].end;
    while (r->i + 1 < r->n && r->s[r->i + 1].start == end)
        end = r->s[++r->i].end;
    r->i++;
    *len = (uint64_t)(end - r->at);
    *complete = true;
    r->at = end;
    return true;
}

static int check_spans(int64_t base, const rl__offset_span *s, size_t n)
{
    if (base < 0 || (n && base == INT64_MAX)) /* no offset above the largest */
        return RL_EINVAL;
    if (n == 0)
        return 0;
    int64_t prev = base + 1; /* the base itself is never complete */
    for (size_t i = 0; i < n; i++) {
        if (s[i].start < prev || s[i].end <= s[i].start)
            return RL_EINVAL;
        prev = s[i].end;
    }
    return 0;
}

static void b64_put(const uint8_t *in, size_t n, char *out)
{
    size_t o = 0, i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = b64[v >> 18];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = b64[(v >> 6) & 63];
        out[o++] = b64[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        out[o++] = b64[v >> 18];
        out[o++] = b64[(v >> 12) & 63];
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
        out[o++] = b64[v >> 18];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = b64[(v >> 6) & 63];
    }
}

int rl__offset_map_encode(int64_t base, const rl__offset_span *spans, size_t n, char *out,
                          size_t cap, size_t *len)
{
    if (!len || (n && !spans) || (!out && cap))
        return RL_EINVAL;
    *len = 0;
    int rc = check_spans(base, spans, n);
    if (rc || n == 0)
        return rc;
    uint64_t span = (uint64_t)(spans[n - 1].end - base);
    size_t runs_bytes = 0;
    runs r = {spans, n, 0, base};
    uint64_t run;
    bool complete;
    while (next_run(&r, &run, &complete))
        runs_bytes += varint_len(run);
    size_t bitmap_bytes = (size_t)((span + 7) / 8);
    bool bitmap = bitmap_bytes < runs_bytes;
    size_t blen = body_len(base, span, bitmap ? bitmap_bytes : runs_bytes);
    size_t tlen = text_len(blen);
    if (tlen > cap)
        return RL_ERANGE;
    uint8_t *body = calloc(1, blen);
    if (!body)
        return RL_ENOMEM;
    size_t at = 0;
    body[at++] = bitmap ? RL__OFFSET_MAP_BITMAP : RL__OFFSET_MAP_RUNS;
    at += put_varint(body + at, (uint64_t)base);
    at += put_varint(body + at, span);
    if (bitmap) {
        for (size_t i = 0; i < n; i++)
            for (int64_t o = spans[i].start; o < spans[i].end; o++) {
                uint64_t bit = (uint64_t)(o - base);
                body[at + bit / 8] |= (uint8_t)(1u << (bit % 8));
            }
        at += bitmap_bytes;
    } else {
        r = (runs){spans, n, 0, base};
        while (next_run(&r, &run, &complete))
            at += put_varint(body + at, run);
    }
    uint32_t crc = rl_crc32(body, at);
    for (unsigned i = 0; i < CRC_LEN; i++)
        body[at++] = (uint8_t)(crc >> (8 * i));
    memcpy(out, RL__OFFSET_MAP_HEAD, HEAD_LEN);
    b64_put(body, blen, out + HEAD_LEN);
    if (tlen < cap)
        out[tlen] = '\0';
    free(body);
    *len = tlen;
    return 0;
}

/* --- reading --- */

static int b64_value(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '-')
        return 62;
    if (ch == '_')
        return 63;
    return -1;
}

/* Decodes canonical unpadded base64url into out (room for len * 3 / 4 bytes). */
static bool b64_get(const char *in, size_t len, uint8_t *out, size_t *n)
{
    if (len % 4 == 1)
        return false;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64_value((unsigned char)in[i]);
        if (v < 0)
            return false;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (acc != 0)
        return false; /* the last character's unused bits must be zero */
    *n = o;
    return true;
}

static int fail(rl__offset_map *out, const char **why, int verdict, const char *text)
{
    free(out->spans);
    memset(out, 0, sizeof *out);
    if (why)
        *why = text;
    return verdict;
}

static bool add_span(rl__offset_map *m, size_t cap, int64_t start, int64_t end)
{
    if (m->n == cap)
        return false;
    m->spans[m->n++] = (rl__offset_span){start, end};
    return true;
}

int rl__offset_map_decode(const char *text, size_t len, rl__offset_map *out, const char **why)
{
    const size_t plen = sizeof RL__OFFSET_MAP_PREFIX - 1;
    if (why)
        *why = "";
    if (!out)
        return RL__OFFSET_MAP_CORRUPT;
    memset(out, 0, sizeof *out);
    if (!text || len < plen || memcmp(text, RL__OFFSET_MAP_PREFIX, plen) != 0)
        return fail(out, why, RL__OFFSET_MAP_FOREIGN, "not a ringlane offset map");
    /* "ringlane" <version> ":" */
    size_t at = plen;
    uint64_t version = 0;
    while (at < len && at - plen < 9 && text[at] >= '0' && text[at] <= '9')
        version = version * 10 + (uint64_t)(text[at++] - '0');
    if (at == plen || at >= len || text[at] != ':')
        return fail(out, why, RL__OFFSET_MAP_FOREIGN, "not a ringlane offset map");
    if (version != RL__OFFSET_MAP_VERSION || text[plen] == '0')
        return fail(out, why, RL__OFFSET_MAP_OTHER_VERSION,
                    "an offset map of a version other than 1");
    at++;
    size_t tlen = len - at;
    uint8_t *body = malloc(tlen * 3 / 4 + 1);
    if (!body)
        return fail(out, why, RL__OFFSET_MAP_NOMEM, "out of memory");
    size_t blen = 0;
    int verdict = RL__OFFSET_MAP_CORRUPT;
    const char *reason = NULL;
    uint64_t base = 0, span = 0;
    size_t p = 0, cap = 0;
    if (!b64_get(text + at, tlen, body, &blen)) {
        reason = "not base64url (or padded, or with stray bits)";
        goto done;
    }
    if (blen < 1 + 1 + 1 + 1 + CRC_LEN) {
        reason = "too short";
        goto done;
    }
    uint32_t crc = 0;
    for (unsigned i = 0; i < CRC_LEN; i++)
        crc |= (uint32_t)body[blen - CRC_LEN + i] << (8 * i);
    blen -= CRC_LEN;
    if (rl_crc32(body, blen) != crc) {
        reason = "checksum mismatch";
        goto done;
    }
    int form = body[p++];
    if (form != RL__OFFSET_MAP_RUNS && form != RL__OFFSET_MAP_BITMAP) {
        reason = "unknown form";
        goto done;
    }
    if (!get_varint(body, blen, &p, &base) || !get_varint(body, blen, &p, &span)) {
        reason = "bad base or span";
        goto done;
    }
    if (span < 2 || span > (uint64_t)INT64_MAX - base) {
        reason = "span out of range";
        goto done;
    }
    out->base = (int64_t)base;
    out->end = (int64_t)(base + span);
    out->form = form;
    /* Each span of complete offsets takes at least one byte of runs, or two bits of bitmap. */
    cap = form == RL__OFFSET_MAP_RUNS ? (blen - p) / 2 + 1 : (blen - p) * 4 + 1;
    out->spans = malloc(cap * sizeof *out->spans);
    if (!out->spans) {
        verdict = RL__OFFSET_MAP_NOMEM;
        reason = "out of memory";
        goto done;
    }
    if (form == RL__OFFSET_MAP_RUNS) {
        uint64_t sum = 0, run;
        bool complete = false;
        while (sum < span) {
            if (!get_varint(body, blen, &p, &run) || run == 0 || run > span - sum) {
                reason = "bad runs";
                goto done;
            }
            if (complete &&
                !add_span(out, cap, (int64_t)(base + sum), (int64_t)(base + sum + run))) {
                reason = "bad runs";
                goto done;
            }
            sum += run;
            complete = !complete;
        }
        if (complete || p != blen) { /* must end with a complete run, and nothing after */
            reason = "bad runs";
            goto done;
        }
    } else {
        if (blen - p != (span + 7) / 8) {
            reason = "bitmap length does not match the span";
            goto done;
        }
        const uint8_t *bits = body + p;
        for (uint64_t i = span; i < (blen - p) * 8; i++)
            if (bits[i / 8] & (1u << (i % 8))) {
                reason = "bits set beyond the span";
                goto done;
            }
        if ((bits[0] & 1u) || !(bits[(span - 1) / 8] & (1u << ((span - 1) % 8)))) {
            reason = "the base is complete, or the span does not end with a complete offset";
            goto done;
        }
        for (uint64_t i = 1; i < span;) {
            if (!(bits[i / 8] & (1u << (i % 8)))) {
                i++;
                continue;
            }
            uint64_t j = i;
            while (j < span && (bits[j / 8] & (1u << (j % 8))))
                j++;
            add_span(out, cap, (int64_t)(base + i), (int64_t)(base + j));
            i = j;
        }
    }
    verdict = RL__OFFSET_MAP_OK;
done:
    free(body);
    if (verdict != RL__OFFSET_MAP_OK)
        return fail(out, why, verdict, reason ? reason : "damaged");
    return RL__OFFSET_MAP_OK;
}

void rl__offset_map_free(rl__offset_map *m)
{
    if (!m)
        return;
    free(m->spans);
    memset(m, 0, sizeof *m);
}

uint64_t rl__offset_map_count(const rl__offset_map *m)
{
    uint64_t n = 0;
    for (size_t i = 0; m && i < m->n; i++)
        n += (uint64_t)(m->spans[i].end - m->spans[i].start);
    return n;
}
