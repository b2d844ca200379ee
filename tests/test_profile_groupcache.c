/* SPDX-License-Identifier: BSD-2-Clause */
/* The groupcache profile against vectors derived from Go groupcache's consistenthash algorithm
 * (tests/vectors/gen_groupcache.py re-states Map.Add and Map.Get line by line, with zlib's
 * CRC-32 for crc32.ChecksumIEEE, and writes groupcache.txt). */
#define _POSIX_C_SOURCE 200809L
#include "test_vectors.h"

static rl_ring_t *groupcache_ring(const vec_members *v, uint32_t replicas)
{
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = "groupcache";
    o.vnodes = replicas;
    rl_ring_t *r = NULL;
    assert_rl_ok(rl_ring_build(v->m, v->n, &o, &r));
    return r;
}

static void derived_vectors(void **state)
{
    (void)state;
    FILE *f = vec_open("groupcache.txt");
    char line[4096], names[2048];
    rl_ring_t *r = NULL;
    vec_members v;
    unsigned replicas, maps = 0, keys = 0;
    while (vec_next(f, line, sizeof line)) {
        if (sscanf(line, "map %u %2047s", &replicas, names) == 2) {
            rl_ring_free(r);
            vec_parse_members(names, &v);
            r = groupcache_ring(&v, replicas);
            assert_int_equal(rl_ring_point_count(r), replicas * v.n);
            maps++;
            continue;
        }
        char *tab = strchr(line, '\t');
        assert_non_null(tab);
        *tab = 0;
        uint32_t node;
        assert_rl_ok(rl_ring_lookup(r, line, strlen(line), &node));
        if (strcmp(rl_ring_node_name(r, node), tab + 1) != 0)
            fail_msg("key '%s': ringlane %s, groupcache %s", line, rl_ring_node_name(r, node),
                     tab + 1);
        keys++;
    }
    rl_ring_free(r);
    fclose(f);
    assert_int_equal(maps, 6);
    print_message("groupcache: %u maps, %u keys\n", maps, keys);
}

/* No Remove upstream: ringlane's remove rebuilds from the remaining members in their order,
 * which is the Map that Add(remaining...) makes. Weight w gives w * replicas points. */
static void remove_is_a_rebuild(void **state)
{
    (void)state;
    vec_members all, rest;
    vec_parse_members("p1,p2,p3,p4", &all);
    vec_parse_members("p1,p3,p4", &rest);
    rl_ring_t *r = groupcache_ring(&all, 50), *fresh = groupcache_ring(&rest, 50), *removed;
    assert_rl_ok(rl_ring_remove(r, "p2", &removed));
    assert_int_equal(rl_ring_point_count(removed), rl_ring_point_count(fresh));
    for (size_t i = 0; i < rl_ring_point_count(fresh); i++) {
        uint64_t pa, pb;
        uint32_t na, nb;
        assert_rl_ok(rl_ring_point(removed, i, &pa, &na));
        assert_rl_ok(rl_ring_point(fresh, i, &pb, &nb));
        assert_true(pa == pb && na == nb);
    }
    rl_ring_free(removed);
    rl_ring_free(fresh);
    rl_ring_free(r);

    vec_parse_members("a=3,b", &all);
    r = groupcache_ring(&all, 50);
    assert_int_equal(rl_ring_point_count(r), 200);
    rl_ring_free(r);
    assert_int_equal(rl_crc32("123456789", 9), 0xCBF43926u); /* the CRC-32 check value */
}

typedef struct big_build {
    const rl_member *m;
    size_t n;
    int rc;
} big_build;

static void build_at_max_vnodes(void *arg)
{
    big_build *b = arg;
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = "groupcache";
    o.vnodes = RL_VNODES_MAX;
    rl_ring_t *r = NULL;
    b->rc = rl_ring_build(b->m, b->n, &o, &r);
    if (r)
        fail_msg("a ring of %zu points was built", rl_ring_point_count(r));
}

/* Weight x replicas points per member: RL_POINTS_MAX is known from the members alone and is
 * checked before any point is made. It was checked when the 16,777,217th point was pushed, after
 * 256 MiB and 1.4-2.2 s of CRC-32; with that, the peak resident memory grows by 256 MiB here. */
static void too_many_points_refused_before_allocating(void **state)
{
    (void)state;
    rl_member m[] = {{"a", RL_WEIGHT_MAX, NULL}, {"b", 1, NULL}};
    big_build one = {m, 1, 0}, two = {m, 2, 0};
    assert_cheap("groupcache, 65536 x 65536 points", build_at_max_vnodes, &one, 64);
    assert_int_equal(one.rc, RL_ETOOBIG);
    m[0].weight = 256; /* exactly RL_POINTS_MAX, and one member of weight 1 more */
    assert_cheap("groupcache, 256 x 65536 + 65536 points", build_at_max_vnodes, &two, 64);
    assert_int_equal(two.rc, RL_ETOOBIG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(too_many_points_refused_before_allocating),
        cmocka_unit_test(derived_vectors),
        cmocka_unit_test(remove_is_a_rebuild),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
