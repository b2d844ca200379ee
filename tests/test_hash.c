/* SPDX-License-Identifier: BSD-2-Clause */
/* Hash vectors: the seeds' FNV-1a, SplitMix64, Hash64 and xmur3 values, and libxxhash's XXH3. */
#include "test_util.h"

#define S(str) (str), (sizeof(str) - 1)

static void fnv1a32_vectors(void **state)
{
    (void)state;
    assert_int_equal(rl_fnv1a32(S("")), 2166136261u); /* the basis */
    /* turnstone's hex 0xBF9CF968 is canonical; its JSON's decimal 3215766888 is a typo. */
    assert_int_equal(rl_fnv1a32(S("foobar")), 0xBF9CF968u);
    assert_int_equal(rl_fnv1a32(S("foobar")), 3214735720u);
    assert_int_not_equal(rl_fnv1a32(S("foobar")), 3215766888u);
}

static void fnv1a64_vectors(void **state)
{
    (void)state;
    assert_true(rl_fnv1a64(S("")) == 0xcbf29ce484222325ull);
    assert_true(rl_fnv1a64(S("a")) == 0xaf63dc4c8601ec8cull);
    assert_true(rl_fnv1a64(S("foobar")) == 0x85944171f73967e8ull);
    assert_true(rl_fnv1a64(NULL, 0) == 0xcbf29ce484222325ull);
}

static void mix64_vectors(void **state)
{
    (void)state;
    assert_true(rl_mix64(0) == 0);
    /* SplitMix64 seeded with 0: its first output is mix(0 + golden gamma). */
    assert_true(rl_mix64(0x9E3779B97F4A7C15ull) == 0xe220a8397b1dcdafull);
}

static void hash64_vectors(void **state)
{
    (void)state;
    assert_true(rl_hash64(S("")) == 0xf52a15e9a9b5e89bull);
    assert_true(rl_hash64(S("a")) == 0x02c0bdbf481420f8ull);
    assert_true(rl_hash64(S("foobar")) == 0x404da9e3b74078c2ull);
    assert_true(rl_hash64(S("a#0")) == 0xb9b5fec617b7e565ull); /* a ds09 vnode label */
    assert_true(rl_hash64(S("engine-0#7")) == rl_mix64(rl_fnv1a64(S("engine-0#7"))));
}

static void xxh3_vectors(void **state)
{
    (void)state;
    assert_true(rl_xxh3(S("")) == 0x2D06800538D394C2ull);
    assert_true(rl_xxh3(S("a")) == 0xE6C632B61E964E1Full);
    assert_true(rl_xxh3(NULL, 0) == 0x2D06800538D394C2ull);
    assert_true(rl_xxh64(S(""), 0) == 0xEF46DB3751D8E999ull);
    assert_true(rl_xxh64(S("a"), 0) == 0xD24EC4F1A98C6E5Bull);
}

static int unhex(const char *hex, unsigned char *out, size_t cap, size_t *len)
{
    *len = 0;
    if (strcmp(hex, "-") == 0)
        return 0;
    size_t n = strlen(hex);
    if (n % 2 || n / 2 > cap)
        return -1;
    for (size_t i = 0; i < n; i += 2) {
        unsigned v;
        if (sscanf(hex + i, "%2x", &v) != 1)
            return -1;
        out[(*len)++] = (unsigned char)v;
    }
    return 0;
}

/* Every line of vectors/xmur3.txt, made from seed 003's Python reference by gen_xmur3.py. */
static void xmur3_vectors(void **state)
{
    (void)state;
    FILE *f = fopen(RL_VECTORS_DIR "/xmur3.txt", "r");
    assert_non_null(f);
    char line[512];
    int checked = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        char *hex = strtok(line, "\t"), *want = strtok(NULL, "\t"), *comment = strtok(NULL, "\n");
        assert_non_null(want);
        unsigned char buf[128];
        size_t len;
        assert_int_equal(unhex(hex, buf, sizeof buf, &len), 0);
        uint32_t got = rl_xmur3(buf, len);
        if (got != strtoul(want, NULL, 10))
            fail_msg("xmur3(%s) [%s] = %u, want %s", hex, comment ? comment : "", got, want);
        checked++;
    }
    fclose(f);
    assert_true(checked >= 20);
}

static void xmur3_seed_facts(void **state)
{
    (void)state;
    assert_int_equal(rl_xmur3(S("k207")), 4285853574u);
    assert_int_equal(rl_xmur3(S("\xF0\x9F\x98\x80")), 2046440521u); /* U+1F600, as Python */
    /* TypeScript hashes UTF-16 code units: 3276203938. ringlane follows Python. */
    assert_int_not_equal(rl_xmur3(S("\xF0\x9F\x98\x80")), 3276203938u);
}

static void hash_by_name(void **state)
{
    (void)state;
    uint64_t h;
    assert_rl_ok(rl_hash_by_name("fnv1a32", S("foobar"), &h));
    assert_true(h == 3214735720u);
    assert_rl_ok(rl_hash_by_name("fnv1a64", S("a"), &h));
    assert_true(h == 0xaf63dc4c8601ec8cull);
    assert_rl_ok(rl_hash_by_name("hash64", S("foobar"), &h));
    assert_true(h == 0x404da9e3b74078c2ull);
    assert_rl_ok(rl_hash_by_name("xmur3", S("k207"), &h));
    assert_true(h == 4285853574u);
    assert_rl_ok(rl_hash_by_name("xxh3", S(""), &h));
    assert_true(h == 0x2D06800538D394C2ull);
    assert_int_equal(rl_hash_by_name("md4", S("x"), &h), RL_EINVAL);
    assert_int_equal(rl_hash_by_name(NULL, S("x"), &h), RL_EINVAL);
    assert_int_equal(rl_hash_by_name("xxh3", S("x"), NULL), RL_EINVAL);
    assert_int_equal(rl_hash_by_name("xxh3", NULL, 3, &h), RL_EINVAL);
}

static void error_names(void **state)
{
    (void)state;
    assert_string_equal(rl_err_name(RL_EINVAL), "RL_EINVAL");
    assert_string_equal(rl_err_name(0), "RL_OK");
    assert_string_equal(rl_err_name(12345), "RL_UNKNOWN");
    assert_string_equal(rl_strerror(RL_EEMPTY), "the ring has no members");
    assert_string_equal(rl_strerror(-9999), "unknown error");
    /* Every code has its own message. */
    for (int a = -1; a >= RL_ELOOP; a--)
        for (int b = a - 1; b >= RL_ELOOP; b--)
            assert_string_not_equal(rl_strerror(a), rl_strerror(b));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fnv1a32_vectors),  cmocka_unit_test(fnv1a64_vectors),
        cmocka_unit_test(mix64_vectors),    cmocka_unit_test(hash64_vectors),
        cmocka_unit_test(xxh3_vectors),     cmocka_unit_test(xmur3_vectors),
        cmocka_unit_test(xmur3_seed_facts), cmocka_unit_test(hash_by_name),
        cmocka_unit_test(error_names),
    };
    return cmocka_run_group_tests_name("hash", tests, NULL, NULL);
}
