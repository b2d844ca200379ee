/* SPDX-License-Identifier: BSD-2-Clause */
/* --json: strings written as JSON, and what to do with bytes that are not UTF-8. Keys are any
 * bytes, and JSON text is UTF-8: a key that is not valid UTF-8 is written as "key_hex" (its
 * bytes in hex, lossless) instead of "key". Node names come from the command line and must be
 * UTF-8 under --json (cli_json_names refuses the others). */
#include "cli.h"

#include <string.h>

/* The length of the UTF-8 sequence at s (at most n bytes), or 0 when it is not one: overlong
 * forms, surrogates and code points past U+10FFFF are not UTF-8 (RFC 3629). */
static size_t utf8_sequence(const unsigned char *s, size_t n)
{
    if (s[0] < 0x80)
        return 1;
    size_t len;
    unsigned cp, min;
    if ((s[0] & 0xe0) == 0xc0)
        len = 2, cp = s[0] & 0x1fu, min = 0x80;
    else if ((s[0] & 0xf0) == 0xe0)
        len = 3, cp = s[0] & 0x0fu, min = 0x800;
    else if ((s[0] & 0xf8) == 0xf0)
        len = 4, cp = s[0] & 0x07u, min = 0x10000;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

int cli_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_sequence(p + i, len - i);
        if (n == 0)
            return 0;
        i += n;
    }
    return 1;
}

void cli_json_string(const char *s, size_t len)
{
    putchar('"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        size_t n = utf8_sequence((const unsigned char *)s + i, len - i);
        if (n == 0) { /* not UTF-8 (callers check first): still valid JSON */
            fputs("\\ufffd", stdout);
            continue;
        }
        if (n > 1) {
            fwrite(s + i, 1, n, stdout);
            i += n - 1;
            continue;
        }
        switch (c) {
        case '"':
            fputs("\\\"", stdout);
            break;
        case '\\':
            fputs("\\\\", stdout);
            break;
        case '\n':
            fputs("\\n", stdout);
            break;
        case '\r':
            fputs("\\r", stdout);
            break;
        case '\t':
            fputs("\\t", stdout);
            break;
        default:
            if (c < 0x20 || c == 0x7f)
                printf("\\u%04x", c);
            else
                putchar(c);
        }
    }
    putchar('"');
}

void cli_json_key(const char *key, size_t len)
{
    if (cli_utf8_valid(key, len)) {
        fputs("\"key\":", stdout);
        cli_json_string(key, len);
        return;
    }
    fputs("\"key_hex\":\"", stdout);
    for (size_t i = 0; i < len; i++)
        printf("%02x", (unsigned char)key[i]);
    putchar('"');
}

void cli_json_name(const char *name)
{
    cli_json_string(name, strlen(name));
}

int cli_json_names(const char *cmd, const char *option, const cli_spec *spec)
{
    for (size_t i = 0; i < spec->count; i++)
        if (!cli_utf8_valid(spec->members[i].name, strlen(spec->members[i].name)))
            return cli_usage_error(cmd,
                                   "%s: node %zu: a name must be UTF-8 with --json (JSON text "
                                   "is UTF-8)",
                                   option, i + 1);
    return 0;
}
