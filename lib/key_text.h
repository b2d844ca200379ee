/* SPDX-License-Identifier: BSD-2-Clause */
/* Internal: a message key or job key shown in the statistics, safely. Keys are bytes, any
 * bytes; statistics are JSON text and Prometheus label values. A key whose shown bytes are all
 * printable ASCII (0x20..0x7e) is shown as it is ("text": the writers escape quotes and
 * backslashes); any other is shown in lowercase hex ("hex"). At most RL__KEY_TEXT_BYTES bytes
 * of text, RL__KEY_TEXT_HEX_BYTES bytes in hex (64 characters either way); a key cut there, or
 * cut before (only its first bytes were kept), ends with "...". Header-only, like
 * json_writer.h. */
#ifndef RINGLANE_KEY_TEXT_H
#define RINGLANE_KEY_TEXT_H

#include <stdbool.h>
#include <stddef.h>

#define RL__KEY_TEXT_BYTES 64
#define RL__KEY_TEXT_HEX_BYTES 32
#define RL__KEY_TEXT_MAX (2 * RL__KEY_TEXT_HEX_BYTES + 3 + 1) /* 64 characters, "...", NUL */

/* Writes the key's text into out (RL__KEY_TEXT_MAX bytes, NUL-terminated). key holds `stored`
 * bytes of a key key_len long (stored <= key_len). Returns true when the text is hex. */
static inline bool rl__key_text(const void *key, size_t stored, size_t key_len,
                                char out[RL__KEY_TEXT_MAX])
{
    const unsigned char *k = key;
    bool hex = false;
    for (size_t i = 0; i < stored && i < RL__KEY_TEXT_BYTES; i++)
        if (k[i] < 0x20 || k[i] > 0x7e)
            hex = true;
    size_t limit = hex ? RL__KEY_TEXT_HEX_BYTES : RL__KEY_TEXT_BYTES;
    size_t shown = stored < limit ? stored : limit;
    size_t o = 0;
    for (size_t i = 0; i < shown; i++) {
        if (hex) {
            static const char digits[] = "0123456789abcdef";
            out[o++] = digits[k[i] >> 4];
            out[o++] = digits[k[i] & 15];
        } else {
            out[o++] = (char)k[i];
        }
    }
    if (shown < key_len) {
        out[o++] = '.';
        out[o++] = '.';
        out[o++] = '.';
    }
    out[o] = '\0';
    return hex;
}

#endif
