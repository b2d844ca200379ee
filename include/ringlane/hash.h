/* SPDX-License-Identifier: BSD-2-Clause */
/* ringlane: the hash functions rings are built from.
 *
 * All functions are pure, thread-safe and allocate nothing. `data` may be NULL only when `len`
 * is 0. Results are identical on every platform (byte order does not matter).
 */
#ifndef RINGLANE_HASH_H
#define RINGLANE_HASH_H

#include "ringlane/common.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* FNV-1a, 32-bit: basis 0x811C9DC5, prime 0x01000193. rl_fnv1a32("foobar", 6) == 0xBF9CF968. */
RL_EXTERN uint32_t rl_fnv1a32(const void *data, size_t len);

/* FNV-1a, 64-bit: basis 14695981039346656037, prime 1099511628211. */
RL_EXTERN uint64_t rl_fnv1a64(const void *data, size_t len);

/* The SplitMix64 finalizer (Stafford variant 13). */
RL_EXTERN uint64_t rl_mix64(uint64_t z);

/* rl_mix64(rl_fnv1a64(data)): the hash of the ds09 profile. */
RL_EXTERN uint64_t rl_hash64(const void *data, size_t len);

/* xmur3 32-bit string hash, computed over the Unicode code points of UTF-8 input so that it
 * equals the Python reference `hash32(s)` for every str s (including characters outside the
 * BMP). Invalid UTF-8 is decoded like Python's `bytes.decode("utf-8", "surrogateescape")`: each
 * byte that is not part of a valid sequence counts as one code point U+DC00 + byte. Strict
 * UTF-8 rules apply (no overlong forms, no encoded surrogates, nothing above U+10FFFF). */
RL_EXTERN uint32_t rl_xmur3(const void *utf8, size_t len);

/* XXH3 64-bit, seed 0, from libxxhash: the default profile's hash. */
RL_EXTERN uint64_t rl_xxh3(const void *data, size_t len);

/* XXH64 with a seed, from libxxhash (Envoy's ring_hash and Maglev use it). */
RL_EXTERN uint64_t rl_xxh64(const void *data, size_t len, uint64_t seed);

/* The first 4 bytes of MD5(data) read little-endian: libmemcached's MD5 key hash (the ketama
 * profile's). MD5 comes from libmd. */
RL_EXTERN uint32_t rl_md5_32(const void *data, size_t len);

/* CRC-32 IEEE (zlib's crc32, Go's crc32.ChecksumIEEE): the groupcache profile's hash. */
RL_EXTERN uint32_t rl_crc32(const void *data, size_t len);

/* A hash selected by name: "fnv1a32", "fnv1a64", "hash64", "xmur3", "xxh3", "xxh64" (seed 0),
 * "md5" (rl_md5_32), "crc32". 32-bit hashes are returned widened. Returns 0 or RL_EINVAL
 * (unknown name, NULL argument). */
RL_EXTERN int rl_hash_by_name(const char *name, const void *data, size_t len, uint64_t *out);

#ifdef __cplusplus
}
#endif
#endif
