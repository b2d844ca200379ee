/* SPDX-License-Identifier: BSD-2-Clause */
/* The offset map: which offsets above a partition's committed offset have completed, as the
 * text a commit carries in its metadata. Pure functions (no librdkafka, no libuv), shared by
 * the consumer, the ringlane tool (`ringlane offsets decode`) and the fuzz target. The format
 * is specified in docs/consumer.md ("The offset map's format"). Not installed. */
#ifndef RINGLANE_CONSUMER_OFFSET_MAP_H
#define RINGLANE_CONSUMER_OFFSET_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The text starts with this prefix and the version, then ':'. */
#define RL__OFFSET_MAP_PREFIX "ringlane"
#define RL__OFFSET_MAP_VERSION 1
#define RL__OFFSET_MAP_HEAD "ringlane1:" /* the prefix of version 1, as written */

/* The smallest limit that holds a map of two offsets whatever the base (32 bytes), and the
 * largest a commit's metadata can be: Kafka's OffsetCommit request (the versions librdkafka
 * sends) writes the string's length in 16 bits. */
#define RL__OFFSET_MAP_MIN_BYTES 32u
#define RL__OFFSET_MAP_MAX_BYTES 32767u

/* The two forms of the body. */
enum { RL__OFFSET_MAP_RUNS = 0, RL__OFFSET_MAP_BITMAP = 1 };

/* Complete offsets start .. end - 1. */
typedef struct rl__offset_span {
    int64_t start, end;
} rl__offset_span;

/* A decoded map: `base` (the committed offset it belongs to) is not complete; the offsets in
 * `spans` are, and every offset from base to `end` not in them is not. Spans ascend, are
 * neither empty nor adjacent, and lie within base + 1 .. end - 1; the last one ends at end. */
typedef struct rl__offset_map {
    int64_t base;
    int64_t end;
    int form; /* RL__OFFSET_MAP_RUNS or RL__OFFSET_MAP_BITMAP, as read */
    rl__offset_span *spans;
    size_t n;
} rl__offset_map;

/* Why a text was not read as a map. */
enum rl__offset_map_verdict {
    RL__OFFSET_MAP_OK = 0,
    RL__OFFSET_MAP_FOREIGN = 1,       /* not a ringlane offset map (another tool's metadata) */
    RL__OFFSET_MAP_OTHER_VERSION = 2, /* a ringlane offset map of another version */
    RL__OFFSET_MAP_CORRUPT = 3,       /* damaged: bad characters, cut short, checksum, layout */
    RL__OFFSET_MAP_NOMEM = 4
};

/* The length of the text of a bitmap map of `span` offsets (base included) from `base`: the
 * largest text any map of that base and span takes, since a map is written in the shorter of
 * its two forms. */
size_t rl__offset_map_bitmap_len(int64_t base, uint64_t span);

/* The largest span whose every map fits in max_bytes, for bases up to base_hi (its varint
 * length is the one counted): 0 when not even two offsets fit. */
uint64_t rl__offset_map_span_cap(size_t max_bytes, int64_t base_hi);

/* Whether every map whose base lies in [from, end) and whose span ends at `end` fits in
 * max_bytes: the test a partition makes before it takes offset end - 1, with `from` its
 * oldest unfinished offset. Exact: the bitmap's length grows with the span and with the
 * base's varint length, so the longest is at `from` or where the base's varint grows a byte
 * (128, 16384, ...) within the range. */
bool rl__offset_map_fits(int64_t from, int64_t end, size_t max_bytes);

/* Writes the map of the complete offsets `spans` (n of them, ascending, not overlapping,
 * adjacent ones allowed; all above base) as text into out (cap bytes; a NUL follows when there
 * is room), in the shorter form (runs on a tie). *len gets the text's length, 0 when n is 0
 * (no map: nothing to write). Never cut: RL_ERANGE when the text would be longer than cap,
 * RL_EINVAL for spans that break the rules, RL_ENOMEM. */
int rl__offset_map_encode(int64_t base, const rl__offset_span *spans, size_t n, char *out,
                          size_t cap, size_t *len);

/* Reads a map from len bytes of text (no NUL needed). RL__OFFSET_MAP_OK fills *out (free it
 * with rl__offset_map_free); otherwise *out is empty and *why (may be NULL) gets a static text
 * saying what is wrong ("checksum mismatch", ...). Every text is safe to give. */
int rl__offset_map_decode(const char *text, size_t len, rl__offset_map *out, const char **why);

void rl__offset_map_free(rl__offset_map *m);

/* The number of complete offsets in a map. */
uint64_t rl__offset_map_count(const rl__offset_map *m);

#endif
