/* SPDX-License-Identifier: BSD-2-Clause */
/* The byte hashes: FNV-1a, SplitMix64, and the library ones: the xxHash family (libxxhash), MD5
 * (libmd) and CRC-32 (zlib), used as they are, not copied. */
#include "ring_internal.h"
#include "ringlane/error.h"
#include "ringlane/hash.h"

#include <md5.h>
#include <string.h>
/* libxxhash's own implementation, compiled inline from its header: the same function, without
 * a call through the shared library on every key. */
#define XXH_INLINE_ALL
#include <xxhash.h>
#include <zlib.h>

uint32_t rl_fnv1a32(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint32_t h = 0x811C9DC5u;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x01000193u;
    }
    return h;
}

uint64_t rl_fnv1a64(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

uint64_t rl_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t rl_hash64(const void *data, size_t len)
{
    return rl_mix64(rl_fnv1a64(data, len));
}

uint64_t rl_xxh3(const void *data, size_t len)
{
    /* XXH3 reads nothing when len is 0, but give it a valid pointer anyway. */
    return XXH3_64bits(len ? data : "", len);
}

uint64_t rl_xxh64(const void *data, size_t len, uint64_t seed)
{
    return XXH64(len ? data : "", len, seed);
}

void rl__md5(const void *data, size_t len, unsigned char digest[16])
{
    MD5_CTX ctx;
    MD5Init(&ctx);
    MD5Update(&ctx, len ? data : (const void *)"", len);
    MD5Final(digest, &ctx);
}

uint32_t rl__le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint32_t rl_md5_32(const void *data, size_t len)
{
    unsigned char digest[16];
    rl__md5(data, len, digest);
    return rl__le32(digest);
}

uint32_t rl_crc32(const void *data, size_t len)
{
    return (uint32_t)crc32_z(0, len ? data : (const void *)"", len);
}

int rl_hash_by_name(const char *name, const void *data, size_t len, uint64_t *out)
{
    if (!name || !out || (!data && len))
        return RL_EINVAL;
    if (strcmp(name, "fnv1a32") == 0)
        *out = rl_fnv1a32(data, len);
    else if (strcmp(name, "fnv1a64") == 0)
        *out = rl_fnv1a64(data, len);
    else if (strcmp(name, "hash64") == 0)
        *out = rl_hash64(data, len);
    else if (strcmp(name, "xmur3") == 0)
        *out = rl_xmur3(data, len);
    else if (strcmp(name, "xxh3") == 0)
        *out = rl_xxh3(data, len);
    else if (strcmp(name, "xxh64") == 0)
        *out = rl_xxh64(data, len, 0);
    else if (strcmp(name, "md5") == 0)
        *out = rl_md5_32(data, len);
    else if (strcmp(name, "crc32") == 0)
        *out = rl_crc32(data, len);
    else
        return RL_EINVAL;
    return 0;
}
