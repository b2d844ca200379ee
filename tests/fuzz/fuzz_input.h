/* SPDX-License-Identifier: BSD-2-Clause */
/* A reader over a fuzzer's bytes: each target turns them into API calls. */
#ifndef RINGLANE_FUZZ_INPUT_H
#define RINGLANE_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct fuzz_input {
    const uint8_t *data;
    size_t size, at;
} fuzz_input;

/* The next byte, 0 once the input is used up. */
static inline uint8_t fuzz_byte(fuzz_input *in)
{
    return in->at < in->size ? in->data[in->at++] : 0;
}

static inline uint32_t fuzz_u32(fuzz_input *in)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 8 | fuzz_byte(in);
    return v;
}

static inline uint64_t fuzz_u64(fuzz_input *in)
{
    return (uint64_t)fuzz_u32(in) << 32 | fuzz_u32(in);
}

/* Up to `max` bytes (length from the input) copied into buf as a NUL-terminated string; the
 * bytes may contain NULs, which end the string early, as they would for a C caller. */
static inline size_t fuzz_string(fuzz_input *in, char *buf, size_t max)
{
    size_t want = fuzz_byte(in);
    if (want > max)
        want = max;
    size_t have = in->size - in->at < want ? in->size - in->at : want;
    memcpy(buf, in->data + in->at, have);
    buf[have] = 0;
    in->at += have;
    return have;
}

/* The rest of the input. */
static inline const uint8_t *fuzz_rest(fuzz_input *in, size_t *len)
{
    *len = in->size - in->at;
    const uint8_t *p = in->data + in->at;
    in->at = in->size;
    return p;
}

#endif
