/* SPDX-License-Identifier: BSD-2-Clause */
/* The envoy profile against the ring positions and lookups of Envoy's own ring_hash tests
 * (tests/vectors/envoy_ring_hash.txt says where they come from). */
#define _POSIX_C_SOURCE 200809L
#include "test_vectors.h"

static rl_ring_t *envoy_ring(const vec_members *v, uint32_t min_ring_size)
{
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = "envoy";
    o.vnodes = min_ring_size;
    rl_ring_t *r = NULL;
    assert_rl_ok(rl_ring_build(v->m, v->n, &o, &r));
    return r;
}

/* Is (pos, node) one of the ring's points? */
static int has_point(const rl_ring_t *r, uint64_t pos, uint32_t node)
{
    for (size_t i = 0; i < rl_ring_point_count(r); i++) {
        uint64_t p;
        uint32_t n;
        assert_rl_ok(rl_ring_point(r, i, &p, &n));
        if (p == pos && n == node)
            return 1;
    }
    return 0;
}

static void spread(const rl_ring_t *r, char *args)
{
    char *save = NULL;
    unsigned long n = strtoul(strtok_r(args, " ", &save), NULL, 10);
    unsigned long counts[VEC_MAX_MEMBERS] = {0};
    for (unsigned long i = 0; i < n; i++) {
        uint32_t node;
        assert_rl_ok(rl_ring_lookup_hash(r, i * (UINT64_MAX / n), &node));
        counts[node]++;
    }
    vec_members want;
    vec_parse_members(strtok_r(NULL, " ", &save), &want); /* address=count reads as a weight */
    for (size_t i = 0; i < want.n; i++)
        assert_int_equal(counts[vec_node(r, want.m[i].name)], want.m[i].weight);
}

static void envoy_test_vectors(void **state)
{
    (void)state;
    FILE *f = vec_open("envoy_ring_hash.txt");
    char line[4096], name[64], hosts[2048], who[64];
    rl_ring_t *r = NULL;
    vec_members v;
    unsigned long long a;
    unsigned rings = 0, checks = 0;
    while (vec_next(f, line, sizeof line)) {
        unsigned long size;
        if (sscanf(line, "ring %63s %llu %2047s", name, &a, hosts) == 3) {
            rl_ring_free(r);
            vec_parse_members(hosts, &v);
            r = envoy_ring(&v, (uint32_t)a);
            rings++;
        } else if (sscanf(line, "size %lu", &size) == 1) {
            assert_int_equal(rl_ring_point_count(r), size);
        } else if (sscanf(line, "point %llu %63s", &a, who) == 2) {
            if (!has_point(r, a, vec_node(r, who)))
                fail_msg("%s: no point %llu of %s", name, a, who);
        } else if (sscanf(line, "lookup %llu %63s", &a, who) == 2) {
            uint32_t node;
            assert_rl_ok(rl_ring_lookup_hash(r, a, &node));
            if (node != vec_node(r, who))
                fail_msg("%s: hash %llu went to %s, Envoy says %s", name, a,
                         rl_ring_node_name(r, node), who);
        } else if (strncmp(line, "spread ", 7) == 0) {
            spread(r, line + 7);
        } else {
            fail_msg("bad vector line '%s'", line);
        }
        checks++;
    }
    rl_ring_free(r);
    fclose(f);
    assert_int_equal(rings, 6);
    print_message("envoy: %u rings, %u checks\n", rings, checks);
}

/* Keys are hashed as Envoy's hash policies hash a header value: XXH64 with seed 0. */
static void keys_hash_with_xxh64(void **state)
{
    (void)state;
    vec_members v;
    vec_parse_members("a:1,b:2", &v);
    rl_ring_t *r = envoy_ring(&v, 1024);
    uint64_t h;
    assert_rl_ok(rl_ring_hash_key(r, "user42", 6, &h));
    assert_true(h == rl_xxh64("user42", 6, 0));
    assert_int_equal(rl_ring_point_count(r), 1024);
    assert_int_equal(rl_ring_vnodes(r), 1024);
    rl_ring_free(r);
}

/* Weights 1 and 3 at minimum size 10: the lighter host gets ceil(0.25 * 10) = 3 points and the
 * scale is 12, so the heavier one gets 9 (running sums end exactly on 12). */
static void weighted_scale(void **state)
{
    (void)state;
    vec_members v;
    vec_parse_members("x=1,y=3", &v);
    rl_ring_t *r = envoy_ring(&v, 10);
    assert_int_equal(rl_ring_point_count(r), 12);
    size_t of_x = 0;
    for (size_t i = 0; i < 12; i++) {
        uint32_t n;
        assert_rl_ok(rl_ring_point(r, i, NULL, &n));
        of_x += n == 0;
    }
    assert_int_equal(of_x, 3);
    rl_ring_free(r);
    /* vnodes is minimum_ring_size: up to Envoy's maximum_ring_size, 8 Mi */
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = "envoy";
    o.vnodes = 8388609;
    assert_int_equal(rl_ring_build(v.m, v.n, &o, &r), RL_EVNODES);

    /* The point count is the scale's, not weight x vnodes (65536 x 1024 would be over
     * RL_POINTS_MAX): checked against RL_POINTS_MAX before the points are made, so it must
     * be the real one. */
    vec_parse_members("x=65536", &v);
    r = envoy_ring(&v, 1024);
    assert_int_equal(rl_ring_point_count(r), 1024);
    rl_ring_free(r);
    vec_parse_members("x=65536,y=1", &v); /* the lightest gets 1 point: 65537 in all */
    r = envoy_ring(&v, 1024);
    assert_int_equal(rl_ring_point_count(r), 65537);
    rl_ring_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(envoy_test_vectors),
        cmocka_unit_test(keys_hash_with_xxh64),
        cmocka_unit_test(weighted_scale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
