/* SPDX-License-Identifier: BSD-2-Clause */
/* Helpers for writing refusal details (rl_last_error_detail), shared by the ring and the layers
 * above it. Header-only and built on the public API alone, so every layer can include it. Not
 * installed.
 *
 * A detail is one line: the option or argument as the caller writes it in C, the value given,
 * then the reason. A layer that passes a lower layer's refusal on keeps the lower layer's text
 * and puts its own option path in front ("dispatch." + "lane_capacity 0: ..."); details about
 * resources (out of memory, libuv, librdkafka) name what could not be made and are passed on
 * as they are. */
#ifndef RINGLANE_ERROR_DETAIL_INTERNAL_H
#define RINGLANE_ERROR_DETAIL_INTERNAL_H

#include "ringlane/error.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Whether err is about a resource rather than an argument: its detail names no option. */
static inline bool rl__detail_is_resource(int err)
{
    return err == RL_ENOMEM || err == RL_ELOOP || err == RL_EKAFKA;
}

/* Puts `path` in front of this thread's detail when err is about an argument; returns err. */
static inline int rl__detail_prefix(int err, const char *path)
{
    if (rl__detail_is_resource(err))
        return err;
    char lower[RL_ERROR_DETAIL_MAX];
    snprintf(lower, sizeof lower, "%s", rl_last_error_detail());
    return rl_error_detail_set(err, "%s%s", path, lower);
}

/* When this thread's detail starts with `from`, replaces that start with `to` and returns
 * true: a lower layer's name for an argument becomes the caller's ("member.name" -> "name"). */
static inline bool rl__detail_reword(const char *from, const char *to)
{
    const char *d = rl_last_error_detail();
    size_t n = strlen(from);
    if (strncmp(d, from, n) != 0)
        return false;
    char rest[RL_ERROR_DETAIL_MAX];
    snprintf(rest, sizeof rest, "%s", d + n);
    rl_error_detail_set(0, "%s%s", to, rest);
    return true;
}

/* The longest part of a name a detail quotes; a longer name is cut and ends in "...". */
#define RL__QUOTE_MAX 64

/* The room rl__quote needs: every byte escaped, the quotes, "..." and the NUL. */
#define RL__QUOTE_SIZE (4 * RL__QUOTE_MAX + 8)

/* s in double quotes, into buf: at most RL__QUOTE_MAX bytes of it, quotes and backslashes
 * escaped, bytes that are not printable ASCII as \xNN, so the detail stays one readable line;
 * NULL for NULL. Returns buf. */
static inline const char *rl__quote(char buf[RL__QUOTE_SIZE], const char *s)
{
    if (!s) {
        snprintf(buf, RL__QUOTE_SIZE, "NULL");
        return buf;
    }
    size_t o = 0;
    buf[o++] = '"';
    size_t i = 0;
    for (; s[i] && i < RL__QUOTE_MAX; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)c;
        } else if (c >= 0x20 && c < 0x7f) {
            buf[o++] = (char)c;
        } else {
            snprintf(buf + o, 5, "\\x%02x", c);
            o += 4;
        }
    }
    if (s[i]) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

#endif
