/* SPDX-License-Identifier: BSD-2-Clause */
/* The seed rings, number for number: seed 003 (xmur3) and the turnstone reference design. */
#include "test_util.h"

static const char *const abc[] = {"A", "B", "C"};

static void xmur3_first_example(void **state)
{
    (void)state;
    rl_ring_t *r = test_ring("xmur3", 3, abc, 3);
    assert_int_equal(rl_ring_point_count(r), 9);
    assert_string_equal(test_owner(r, "k1"), "C");
    assert_string_equal(test_owner(r, "k2"), "A");
    assert_string_equal(test_owner(r, "k3"), "C");
    rl_ring_free(r);
}

static void xmur3_k207_wraps(void **state)
{
    (void)state;
    rl_ring_t *r = test_ring("xmur3", 3, abc, 3);
    uint64_t top, first, kh;
    uint32_t first_owner;
    assert_rl_ok(rl_ring_point(r, 8, &top, NULL));
    assert_rl_ok(rl_ring_point(r, 0, &first, &first_owner));
    assert_true(top == 4184374926u);
    assert_rl_ok(rl_ring_hash_key(r, "k207", 4, &kh));
    assert_true(kh == 4285853574u && kh > top); /* past the top point */
    assert_string_equal(test_owner(r, "k207"), "B");
    assert_string_equal(rl_ring_node_name(r, first_owner), "B");
    rl_ring_free(r);
}

static int count_owner(const rl_ring_t *r, const char *name)
{
    char key[32];
    int n = 0;
    for (int i = 0; i < 10000; i++) {
        snprintf(key, sizeof key, "user%d", i);
        n += strcmp(test_owner(r, key), name) == 0;
    }
    return n;
}

static void xmur3_one_vnode_is_lumpy(void **state)
{
    (void)state;
    rl_ring_t *r = test_ring("xmur3", 1, abc, 3);
    assert_string_equal(test_owner(r, "k1"), "C");
    assert_string_equal(test_owner(r, "k2"), "C");
    assert_string_equal(test_owner(r, "k3"), "C");
    assert_int_equal(count_owner(r, "C"), 7997);
    rl_ring_free(r);
}

static void xmur3_modulo_churn(void **state)
{
    (void)state;
    char key[32];
    int changed = 0;
    for (int i = 0; i < 10000; i++) {
        int len = snprintf(key, sizeof key, "user%d", i);
        uint32_t h = rl_xmur3(key, (size_t)len);
        changed += h % 3 != h % 4;
    }
    assert_int_equal(changed, 7502);
}

static void xmur3_single_node_and_duplicates(void **state)
{
    (void)state;
    const char *a[] = {"A"};
    rl_ring_t *r = test_ring("xmur3", 3, a, 1);
    assert_string_equal(test_owner(r, "k1"), "A");
    assert_string_equal(test_owner(r, "k2"), "A");
    assert_string_equal(test_owner(r, "k3"), "A");
    rl_ring_free(r);
    r = test_ring("xmur3", 3, abc, 3);
    assert_string_equal(test_owner(r, "dup"), test_owner(r, "dup"));
    rl_ring_free(r);
}

static void xmur3_join_and_leave_with_50_vnodes(void **state)
{
    (void)state;
    const char *abcd[] = {"A", "B", "C", "D"};
    rl_ring_t *r3 = test_ring("xmur3", 50, abc, 3), *r4, *r2;
    rl_member d = {.name = "D", .weight = 1};
    assert_rl_ok(rl_ring_add(r3, &d, &r4));
    assert_rl_ok(rl_ring_remove(r3, "B", &r2));
    rl_ring_t *direct = test_ring("xmur3", 50, abcd, 4);
    char key[32];
    int to_d = 0, moved_on_remove = 0;
    for (int i = 0; i < 10000; i++) {
        snprintf(key, sizeof key, "user%d", i);
        const char *o3 = test_owner(r3, key), *o4 = test_owner(r4, key), *o2 = test_owner(r2, key);
        assert_string_equal(o4, test_owner(direct, key)); /* add == build from scratch */
        if (strcmp(o3, o4) != 0) {
            assert_string_equal(o4, "D");
            to_d++;
        }
        if (strcmp(o3, o2) != 0) {
            assert_string_equal(o3, "B");
            moved_on_remove++;
        }
    }
    assert_int_equal(to_d, 2513);
    assert_int_equal(moved_on_remove, 2913);
    assert_int_equal(count_owner(r3, "B"), 2913);
    rl_ring_free(r3);
    rl_ring_free(r4);
    rl_ring_free(r2);
    rl_ring_free(direct);
}

static void turnstone_bucket_of(void **state)
{
    (void)state;
    uint32_t b;
    assert_rl_ok(rl_turnstone_bucket_of("a3f100000000000000000000000000000", 33, &b));
    assert_int_equal(b, 41969);
    assert_rl_ok(rl_turnstone_bucket_of("00000000000000000000000000000000", 32, &b));
    assert_int_equal(b, 0);
    assert_rl_ok(rl_turnstone_bucket_of("ffff0000000000000000000000000000", 32, &b));
    assert_int_equal(b, 65535);
    assert_rl_ok(rl_turnstone_bucket_of("A3F1", 4, &b)); /* upper case, as int(x, 16) */
    assert_int_equal(b, 41969);
    assert_int_equal(rl_turnstone_bucket_of("a3f", 3, &b), RL_EBADKEY);
    assert_int_equal(rl_turnstone_bucket_of("a3g1", 4, &b), RL_EBADKEY);
    assert_int_equal(rl_turnstone_bucket_of(NULL, 4, &b), RL_EINVAL);
}

/* Parses "a=2,b=1" into members (names point into spec, which is modified). */
static size_t parse_members(char *spec, rl_member *m, size_t cap)
{
    size_t n = 0;
    for (char *tok = strtok(spec, ","); tok && n < cap; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        *eq = 0;
        m[n++] = (rl_member){.name = tok, .weight = (uint32_t)atoi(eq + 1)};
    }
    return n;
}

/* Every table in vectors/turnstone_tables.txt, made by gen_turnstone.py from the seed's text. */
static void turnstone_tables(void **state)
{
    (void)state;
    FILE *f = fopen(RL_VECTORS_DIR "/turnstone_tables.txt", "r");
    assert_non_null(f);
    static uint32_t table[65536];
    char line[512], spec[512];
    rl_ring_t *r = NULL;
    int rings = 0;
    long start = -1;
    char owner[64] = "";
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0] == '#')
            continue;
        if (strncmp(line, "ring ", 5) == 0) {
            snprintf(spec, sizeof spec, "%s", line + 5);
            rl_member m[16];
            size_t n = parse_members(spec, m, 16);
            rl_ring_options o;
            rl_ring_options_init(&o);
            o.profile = "turnstone";
            assert_rl_ok(rl_ring_build(m, n, &o, &r));
            assert_rl_ok(rl_ring_bucket_table(r, table, 65536));
            start = -1;
            continue;
        }
        long next = strcmp(line, "end") == 0 ? 65536 : atol(line);
        for (long b = start; start >= 0 && b < next; b++) {
            if (strcmp(rl_ring_node_name(r, table[b]), owner) != 0)
                fail_msg("ring %s bucket %ld: %s, want %s", spec, b, rl_ring_node_name(r, table[b]),
                         owner);
            uint32_t via_lookup;
            assert_rl_ok(rl_ring_lookup_hash(r, (uint64_t)b, &via_lookup));
            assert_int_equal(via_lookup, table[b]);
        }
        if (next == 65536) {
            rl_ring_free(r);
            r = NULL;
            rings++;
            continue;
        }
        start = next;
        snprintf(owner, sizeof owner, "%s", strchr(line, '\t') + 1);
    }
    fclose(f);
    assert_int_equal(rings, 4);
}

static void turnstone_seed_properties(void **state)
{
    (void)state;
    static uint32_t table[65536];
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = "turnstone";
    /* ring_single_node: n1 owns all 65536 buckets. */
    rl_member one = {.name = "n1", .weight = 1};
    rl_ring_t *r;
    assert_rl_ok(rl_ring_build(&one, 1, &o, &r));
    assert_int_equal(rl_ring_point_count(r), 150);
    assert_rl_ok(rl_ring_bucket_table(r, table, 65536));
    for (int b = 0; b < 65536; b++)
        assert_int_equal(table[b], 0);
    rl_ring_free(r);

    /* Weights 2:1:1 come out near 50/25/25, within the design's 10% tolerance (taken as 10
     * percentage points); the shares from statistics equal the table's counts. */
    rl_member w[] = {{"a", 2, NULL}, {"b", 1, NULL}, {"c", 1, NULL}};
    assert_rl_ok(rl_ring_build(w, 3, &o, &r));
    assert_rl_ok(rl_ring_bucket_table(r, table, 65536));
    int count[3] = {0};
    for (int b = 0; b < 65536; b++)
        count[table[b]]++;
    double shares[3], want[3] = {0.5, 0.25, 0.25};
    rl_ring_stats st;
    assert_rl_ok(rl_ring_stats_get(r, &st, shares));
    for (int i = 0; i < 3; i++) {
        assert_true(shares[i] * 65536 > count[i] - 0.5 && shares[i] * 65536 < count[i] + 0.5);
        assert_true(shares[i] > want[i] - 0.10 && shares[i] < want[i] + 0.10);
    }
    /* A turnstone key is a workspace id: its bucket decides. */
    uint32_t n, nb;
    assert_rl_ok(rl_ring_lookup(r, "a3f100000000000000000000000000000", 33, &n));
    assert_rl_ok(rl_ring_lookup_hash(r, 41969, &nb));
    assert_int_equal(n, nb);
    assert_int_equal(rl_ring_lookup(r, "not-hex", 7, &n), RL_EBADKEY);
    rl_ring_free(r);
}

static void bucket_table_needs_16_bits(void **state)
{
    (void)state;
    static uint32_t table[65536];
    rl_ring_t *r = test_ring("default", 10, abc, 3);
    assert_int_equal(rl_ring_bucket_table(r, table, 65536), RL_ENOTSUP);
    rl_ring_free(r);
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = "turnstone";
    assert_rl_ok(rl_ring_build(NULL, 0, &o, &r));
    assert_int_equal(rl_ring_bucket_table(r, table, 65536), RL_EEMPTY);
    assert_int_equal(rl_ring_bucket_table(r, table, 100), RL_ERANGE);
    assert_int_equal(rl_ring_bucket_table(r, NULL, 65536), RL_EINVAL);
    rl_ring_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(xmur3_first_example),
        cmocka_unit_test(xmur3_k207_wraps),
        cmocka_unit_test(xmur3_one_vnode_is_lumpy),
        cmocka_unit_test(xmur3_modulo_churn),
        cmocka_unit_test(xmur3_single_node_and_duplicates),
        cmocka_unit_test(xmur3_join_and_leave_with_50_vnodes),
        cmocka_unit_test(turnstone_bucket_of),
        cmocka_unit_test(turnstone_tables),
        cmocka_unit_test(turnstone_seed_properties),
        cmocka_unit_test(bucket_table_needs_16_bits),
    };
    return cmocka_run_group_tests_name("seed_rings", tests, NULL, NULL);
}
