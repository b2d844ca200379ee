/* SPDX-License-Identifier: BSD-2-Clause */
/* Internal: the JSON text writer of the statistics functions, with snprintf's contract: it counts
 * the whole length, writes what fits, and rl__json_end terminates the text where the buffer
 * ends. Header-only (static functions), so each library layer compiles its own copy and no
 * internal symbol crosses a shared library's boundary. */
#ifndef RINGLANE_JSON_WRITER_H
#define RINGLANE_JSON_WRITER_H

#include "ringlane/error.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

typedef struct rl__json {
    char *buf;
    size_t cap, len; /* len counts everything, written or not */
} rl__json;

static inline void rl__json_put(rl__json *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static inline void rl__json_put(rl__json *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->cap ? o->cap - o->len : 0;
    int n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

/* A JSON string; bytes >= 0x80 pass through (names are expected to be UTF-8). */
static inline void rl__json_string(rl__json *o, const char *s)
{
    rl__json_put(o, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            rl__json_put(o, "\\%c", *p);
        else if (*p < 0x20)
            rl__json_put(o, "\\u%04x", *p);
        else
            rl__json_put(o, "%c", *p);
    }
    rl__json_put(o, "\"");
}

/* Terminates the text (cut where the buffer ends); *len (may be NULL) gets the whole length.
 * RL_ERANGE when it did not fit. */
static inline int rl__json_end(rl__json *o, size_t *len)
{
    if (o->cap)
        o->buf[o->len < o->cap ? o->len : o->cap - 1] = '\0';
    if (len)
        *len = o->len;
    return o->len >= o->cap ? RL_ERANGE : 0;
}

#endif
