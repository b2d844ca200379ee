/* SPDX-License-Identifier: BSD-2-Clause */
/* The maglev profile: Envoy's own Maglev tables (tests/vectors/envoy_maglev.txt), the answers
 * the profile gives where a point ring has more (replicas, bounded loads, points), and balance
 * and disruption on Envoy's default table of 65537 entries. */
#define _POSIX_C_SOURCE 200809L
#include "test_vectors.h"

static uint64_t constant_hash(void *ctx, const void *data, size_t len)
{
    (void)ctx, (void)data, (void)len;
    return 7;
}

static rl_ring_t *maglev_ring(const rl_member *m, size_t n, uint32_t table_size)
{
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = "maglev";
    o.vnodes = table_size;
    rl_ring_t *r = NULL;
    assert_rl_ok(rl_ring_build(m, n, &o, &r));
    return r;
}

static void envoy_test_vectors(void **state)
{
    (void)state;
    FILE *f = vec_open("envoy_maglev.txt");
    char line[4096], name[64], hosts[2048];
    rl_ring_t *r = NULL;
    vec_members v;
    unsigned size = 0, tables = 0;
    while (vec_next(f, line, sizeof line)) {
        unsigned lo, hi;
        if (sscanf(line, "table %63s %u %2047s", name, &size, hosts) == 3) {
            rl_ring_free(r);
            vec_parse_members(hosts, &v);
            r = maglev_ring(v.m, v.n, size);
            tables++;
        } else if (strncmp(line, "entries ", 8) == 0) {
            char *p = line + 8, *end;
            for (unsigned k = 0; k < size; k++, p = end) {
                unsigned long want = strtoul(p, &end, 10);
                assert_true(end != p);
                /* Envoy checks hashes 0 .. 3 * size - 1; so does this */
                for (uint64_t h = k; h < 3 * (uint64_t)size; h += size) {
                    uint32_t node;
                    assert_rl_ok(rl_ring_lookup_hash(r, h, &node));
                    if (node != want)
                        fail_msg("%s: hash %llu went to %s, Envoy says %s", name,
                                 (unsigned long long)h, rl_ring_node_name(r, node), v.m[want].name);
                }
            }
        } else if (sscanf(line, "counts %u %u", &lo, &hi) == 2) {
            double shares[VEC_MAX_MEMBERS];
            rl_ring_stats st;
            assert_rl_ok(rl_ring_stats_get(r, &st, shares));
            assert_int_equal(st.points, size);
            assert_int_equal((unsigned)(st.min_share * size + 0.5), lo);
            assert_int_equal((unsigned)(st.max_share * size + 0.5), hi);
        } else {
            fail_msg("bad vector line '%s'", line);
        }
    }
    rl_ring_free(r);
    fclose(f);
    assert_int_equal(tables, 5);
}

static void what_a_table_answers(void **state)
{
    (void)state;
    rl_member m[] = {{"a", 1, NULL}, {"b", 2, NULL}, {"c", 1, NULL}};
    rl_ring_t *r = maglev_ring(m, 3, 65537);
    uint32_t nodes[3], node;
    size_t got = 99;
    uint64_t loads[3] = {0};
    assert_int_equal(rl_ring_point_count(r), 0);
    assert_int_equal(rl_ring_point(r, 0, NULL, NULL), RL_ENOTSUP);
    assert_int_equal(rl_ring_replicas(r, "k", 1, nodes, 2, &got), RL_ENOTSUP);
    assert_int_equal(got, 0);
    assert_int_equal(rl_ring_replicas_zoned(r, "k", 1, nodes, 2, &got), RL_ENOTSUP);
    assert_int_equal(rl_ring_lookup_bounded(r, "k", 1, loads, 1.25, &node), RL_ENOTSUP);
    assert_int_equal(rl_ring_bucket_table(r, nodes, 3), RL_ENOTSUP);
    /* the key hash is XXH64 seed 0, then table[hash % M] */
    uint64_t h;
    assert_rl_ok(rl_ring_hash_key(r, "user7", 5, &h));
    assert_true(h == rl_xxh64("user7", 5, 0));
    assert_rl_ok(rl_ring_lookup(r, "user7", 5, &node));
    uint32_t again;
    assert_rl_ok(rl_ring_lookup_hash(r, h % 65537, &again));
    assert_int_equal(node, again);
    /* b has twice the weight: close to half the table */
    double shares[3];
    rl_ring_stats st;
    assert_rl_ok(rl_ring_stats_get(r, &st, shares));
    assert_true(shares[1] > 0.49 && shares[1] < 0.51);
    rl_ring_free(r);

    /* the table size must be a prime, up to Envoy's 5000011; no caller hash; empty is empty */
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = "maglev";
    o.vnodes = 65536;
    assert_refused(rl_ring_build(m, 3, &o, &r), RL_EVNODES, "vnodes 65536",
                   "profile maglev takes a prime 2..5000011 (its table size)");
    o.vnodes = 5000017; /* prime, above the limit */
    assert_refused(rl_ring_build(m, 3, &o, &r), RL_EVNODES, "vnodes 5000017", "prime 2..5000011");
    o.vnodes = 65537;
    o.hash = constant_hash;
    assert_refused(rl_ring_build(m, 3, &o, &r), RL_ENOTSUP, "hash set",
                   "profile maglev takes no caller hash");
    assert_null(r);
    o.hash = NULL;
    o.vnodes = RL_VNODES_PROFILE;
    assert_rl_ok(rl_ring_build(NULL, 0, &o, &r));
    assert_int_equal(rl_ring_lookup(r, "k", 1, &node), RL_EEMPTY);
    assert_int_equal(rl_ring_stats_get(r, &st, NULL), RL_EEMPTY);
    assert_int_equal(rl_ring_vnodes(r), 65537);
    rl_ring_free(r);
}

/* Balance and disruption with 20 equal hosts on the default table. Maglev's guarantee (paper,
 * section 3.4) is that entries differ by at most one between hosts with equal weights at
 * M >> n: max/avg below 1.001 here. On removing a host, a few of the survivors' entries are
 * reassigned too (Maglev trades a little disruption for balance; 0.34% with these names). The
 * threshold of 2% fails if the table were refilled without the permutations, which would
 * reassign about 95% of them. */
static void balance_and_disruption(void **state)
{
    (void)state;
    enum { N = 20 };
    char names[N][16];
    rl_member m[N];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "10.0.0.%d:80", i + 1);
        m[i] = (rl_member){names[i], 1, NULL};
    }
    rl_ring_t *r = maglev_ring(m, N, 65537);
    rl_ring_stats st;
    assert_rl_ok(rl_ring_stats_get(r, &st, NULL));
    print_message("maglev 20 hosts, M=65537: max/avg %.5f\n", st.max_mean_share);
    assert_true(st.max_mean_share < 1.001);

    rl_ring_t *smaller;
    assert_rl_ok(rl_ring_remove(r, names[7], &smaller));
    size_t survivors = 0, moved = 0;
    for (uint64_t h = 0; h < 65537; h++) {
        uint32_t a, b;
        assert_rl_ok(rl_ring_lookup_hash(r, h, &a));
        assert_rl_ok(rl_ring_lookup_hash(smaller, h, &b));
        if (a == 7)
            continue;
        survivors++;
        moved += strcmp(rl_ring_node_name(r, a), rl_ring_node_name(smaller, b)) != 0;
    }
    double frac = (double)moved / (double)survivors;
    print_message("maglev remove 1 of 20: %.4f of the survivors' entries move\n", frac);
    assert_true(frac < 0.02);
    rl_ring_free(smaller);
    rl_ring_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(envoy_test_vectors),
        cmocka_unit_test(what_a_table_answers),
        cmocka_unit_test(balance_and_disruption),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
