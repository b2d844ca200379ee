/* SPDX-License-Identifier: BSD-2-Clause */
/* The jump profile: the paper's function on vectors (tests/vectors/jump.txt, with ClickHouse's
 * published values), its key hash, and what it answers where a point ring has more. */
#define _POSIX_C_SOURCE 200809L
#include "test_vectors.h"

static rl_ring_t *buckets(size_t n)
{
    rl_member *m = calloc(n, sizeof *m);
    char(*names)[24] = calloc(n, sizeof *names);
    assert_true(m && names);
    for (size_t i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "%zu", i);
        m[i] = (rl_member){names[i], 1, NULL};
    }
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = "jump";
    rl_ring_t *r = NULL;
    assert_rl_ok(rl_ring_build(m, n, &o, &r));
    free(m);
    free(names);
    return r;
}

static void paper_vectors(void **state)
{
    (void)state;
    FILE *f = vec_open("jump.txt");
    char line[256];
    rl_ring_t *r = NULL;
    size_t have = 0, rows = 0;
    while (vec_next(f, line, sizeof line)) {
        unsigned long long key;
        size_t n;
        unsigned want;
        assert_int_equal(sscanf(line, "%llu\t%zu\t%u", &key, &n, &want), 3);
        if (n != have) {
            rl_ring_free(r);
            r = buckets(n);
            have = n;
        }
        uint32_t node;
        assert_rl_ok(rl_ring_lookup_hash(r, key, &node));
        if (node != want)
            fail_msg("jump(%llu, %zu) = %u, want %u", key, n, node, want);
        rows++;
    }
    rl_ring_free(r);
    fclose(f);
    assert_true(rows > 300);
}

/* Growing from n to n + 1 buckets moves keys only to the new bucket, about 1/(n + 1) of them;
 * removing bucket 0 renumbers the others, and most keys change bucket index. */
static void growth_moves_only_to_the_new_bucket(void **state)
{
    (void)state;
    rl_ring_t *r10 = buckets(10), *r11 = buckets(11), *shrunk;
    assert_rl_ok(rl_ring_remove(r10, "0", &shrunk));
    size_t moved = 0, renamed = 0;
    for (int i = 0; i < 20000; i++) {
        char key[32];
        int len = snprintf(key, sizeof key, "order-%d", i);
        uint32_t a, b, c;
        assert_rl_ok(rl_ring_lookup(r10, key, (size_t)len, &a));
        assert_rl_ok(rl_ring_lookup(r11, key, (size_t)len, &b));
        assert_rl_ok(rl_ring_lookup(shrunk, key, (size_t)len, &c));
        if (a != b) {
            assert_int_equal(b, 10);
            moved++;
        }
        renamed += strcmp(rl_ring_node_name(r10, a), rl_ring_node_name(shrunk, c)) != 0;
    }
    /* 1/11 of 20000 is 1818; binomial sd ~41: 5 sd either side */
    assert_true(moved > 1610 && moved < 2030);
    assert_true(renamed > 10000); /* not consistent under removal from the middle */
    rl_ring_free(shrunk);
    rl_ring_free(r10);
    rl_ring_free(r11);
}

static void what_jump_answers(void **state)
{
    (void)state;
    rl_ring_t *r = buckets(4);
    uint64_t h, loads[4] = {0};
    uint32_t node, list[4];
    size_t got;
    rl_ring_stats st;
    assert_rl_ok(rl_ring_hash_key(r, "k", 1, &h));
    assert_true(h == rl_xxh3("k", 1));
    assert_int_equal(rl_ring_point_count(r), 0);
    assert_int_equal(rl_ring_point(r, 0, NULL, NULL), RL_ENOTSUP);
    assert_int_equal(rl_ring_replicas(r, "k", 1, list, 2, &got), RL_ENOTSUP);
    assert_int_equal(rl_ring_lookup_bounded(r, "k", 1, loads, 1.0, &node), RL_ENOTSUP);
    assert_int_equal(rl_ring_stats_get(r, &st, NULL), RL_ENOTSUP);
    rl_ring_free(r);

    rl_member weighted[] = {{"a", 1, NULL}, {"b", 2, NULL}};
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = "jump";
    assert_refused(rl_ring_build(weighted, 2, &o, &r), RL_EWEIGHT, "members[1].weight 2",
                   "profile jump takes weight 1 only");
    assert_null(r);

    /* No vnodes: any value given is refused, as the plugin and the CLI refuse it; the default
     * options (vnodes not set) build, and so do add and remove on the ring they made. */
    rl_member one[] = {{"a", 1, NULL}}, two = {"b", 1, NULL};
    for (uint32_t v = 0; v < 3; v++) {
        o.vnodes = v == 2 ? RL_VNODES_MAX : v;
        assert_int_equal(rl_ring_build(one, 1, &o, &r), RL_EVNODES);
        assert_null(r);
        char want[160];
        snprintf(want, sizeof want,
                 "vnodes %u: profile jump has no vnodes (it computes each key's bucket from the "
                 "member count)",
                 o.vnodes);
        assert_string_equal(rl_last_error_detail(), want);
    }
    o.vnodes = RL_VNODES_PROFILE;
    assert_rl_ok(rl_ring_build(one, 1, &o, &r));
    assert_int_equal(rl_ring_vnodes(r), 0);
    rl_ring_t *grown, *back;
    assert_rl_ok(rl_ring_add(r, &two, &grown));
    assert_int_equal(rl_ring_member_count(grown), 2);
    assert_rl_ok(rl_ring_remove(grown, "b", &back));
    assert_int_equal(rl_ring_member_count(back), 1);
    rl_ring_free(grown);
    rl_ring_free(back);
    rl_ring_free(r);
    assert_rl_ok(rl_ring_build(NULL, 0, &o, &r));
    assert_no_detail();
    assert_int_equal(rl_ring_lookup(r, "k", 1, &node), RL_EEMPTY);
    rl_ring_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(paper_vectors),
        cmocka_unit_test(growth_moves_only_to_the_new_bucket),
        cmocka_unit_test(what_jump_answers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
