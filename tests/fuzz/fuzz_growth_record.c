/* SPDX-License-Identifier: BSD-2-Clause */
/* Fuzz target: the growth record's codec (partitioner/growth_record.c). The first byte picks
 * what the rest is:
 *   even: a record's value, read as a consumer would. Whatever it is, the parser must not
 *         crash and must say why it refuses; a value it accepts is a valid record, and written
 *         again it is the very same text (one text per record).
 *   odd:  a record's key, with the same promises. */
#include "fuzz_input.h"
#include "growth_record.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_growth_record: broken promise: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size, 0};
    uint8_t mode = fuzz_byte(&in);
    size_t len;
    const char *t = (const char *)fuzz_rest(&in, &len);
    const char *why = NULL;
    if (mode % 2 == 1) {
        char topic[RL__GROWTH_TOPIC_MAX + 1], key[RL__GROWTH_KEY_MAX + 1];
        uint32_t from = 0, to = 0;
        int v = rl__growth_key_parse(t, len, topic, &from, &to, &why);
        check(why != NULL, "a reason is always given");
        if (v != RL__GROWTH_OK)
            return 0;
        check(from >= 1 && from < to && to <= RL__GROWTH_PARTITIONS_MAX, "counts in range");
        int n = rl__growth_key_format(topic, from, to, key, sizeof key);
        check(n >= 0 && (size_t)n == len && memcmp(key, t, len) == 0, "a key is written back");
        return 0;
    }
    rl__growth_record r;
    int v = rl__growth_value_parse(t, len, &r, &why);
    check(why != NULL, "a reason is always given");
    if (v != RL__GROWTH_OK) {
        check(r.points == NULL && r.profile == NULL, "a refused value gives no record");
        return 0;
    }
    check(*why == 0, "no reason for a record");
    check((r.state == RL__GROWTH_SEALED) == (r.points != NULL), "points exactly when sealed");
    char *text = rl__growth_value_format(&r, &why);
    check(text != NULL, "an accepted record can be written");
    check(strlen(text) == len && memcmp(text, t, len) == 0, "written back as the same text");
    char key[RL__GROWTH_KEY_MAX + 1];
    int n = rl__growth_key_format(r.topic, r.from, r.to, key, sizeof key);
    check(n > 0 && rl__growth_record_matches_key(&r, key, (size_t)n), "its key matches it");
    free(text);
    rl__growth_record_free(&r);
    return 0;
}
