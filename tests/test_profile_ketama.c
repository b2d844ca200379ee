/* SPDX-License-Identifier: BSD-2-Clause */
/* The ketama profile against the real libmemcached (Debian's libmemcached-dev, 1.1.x): for many
 * random server sets and keys, memcached_generate_hash in weighted ketama mode and
 * rl_ring_lookup must name the same server, with no exception.
 *
 * Server sets stay at or below 100 servers: libmemcached's continuum asserts
 * server_count * MEMCACHED_POINTS_PER_SERVER <= MEMCACHED_CONTINUUM_SIZE (100 * 100) and so
 * aborts above 100 servers in this mode. ringlane itself has no such limit. */
#include "test_util.h"

#include <libmemcached/memcached.h>

#define MAX_SERVERS 100
#define KEYS_PER_SET 2000

typedef struct fleet {
    size_t n;
    char names[MAX_SERVERS][64]; /* ringlane member names: host:port */
    char hosts[MAX_SERVERS][48];
    unsigned ports[MAX_SERVERS];
    uint32_t weights[MAX_SERVERS];
} fleet;

/* n servers; hosts are IPv4 addresses or host names, ports 11211 or another; weights all 1
 * when equal, else 1..max_weight. */
static void make_fleet(fleet *f, size_t n, int equal, uint32_t max_weight, uint64_t *seed)
{
    f->n = n;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = test_rand(seed);
        if (r & 1)
            snprintf(f->hosts[i], sizeof f->hosts[i], "10.%u.%u.%u", (unsigned)(r >> 8) & 255,
                     (unsigned)(r >> 16) & 255, (unsigned)i);
        else
            snprintf(f->hosts[i], sizeof f->hosts[i], "cache-%zu.dc%u.example.net", i,
                     (unsigned)(r >> 24) % 7);
        f->ports[i] = (r >> 32) % 3 == 0 ? 11000 + (unsigned)((r >> 40) % 2000) : 11211;
        f->weights[i] = equal ? 1 : 1 + (uint32_t)((r >> 48) % max_weight);
        snprintf(f->names[i], sizeof f->names[i], "%s:%u", f->hosts[i], f->ports[i]);
    }
}

static memcached_st *memcached_of(const fleet *f)
{
    memcached_st *memc = memcached_create(NULL);
    assert_non_null(memc);
    assert_int_equal(memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1),
                     MEMCACHED_SUCCESS);
    memcached_server_list_st list = NULL;
    memcached_return_t rc = MEMCACHED_SUCCESS;
    for (size_t i = 0; i < f->n; i++) {
        list = memcached_server_list_append_with_weight(list, f->hosts[i], (in_port_t)f->ports[i],
                                                        f->weights[i], &rc);
        assert_int_equal(rc, MEMCACHED_SUCCESS);
    }
    assert_int_equal(memcached_server_push(memc, list), MEMCACHED_SUCCESS);
    memcached_server_list_free(list);
    return memc;
}

static rl_ring_t *ring_of(const fleet *f)
{
    rl_member m[MAX_SERVERS];
    for (size_t i = 0; i < f->n; i++)
        m[i] = (rl_member){.name = f->names[i], .weight = f->weights[i]};
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = "ketama";
    rl_ring_t *r = NULL;
    assert_rl_ok(rl_ring_build(m, f->n, &o, &r));
    return r;
}

/* Keys of 0..40 arbitrary bytes. Returns the number of keys routed differently. */
static size_t compare(const fleet *f, uint64_t *seed)
{
    memcached_st *memc = memcached_of(f);
    rl_ring_t *ring = ring_of(f);
    if (f->n > 1) /* with one server libmemcached skips the continuum */
        assert_int_equal(rl_ring_point_count(ring), memc->ketama.continuum_points_counter);
    size_t mismatches = 0;
    for (int k = 0; k < KEYS_PER_SET; k++) {
        unsigned char key[40];
        size_t len = test_rand(seed) % (sizeof key + 1);
        for (size_t i = 0; i < len; i++)
            key[i] = (unsigned char)test_rand(seed);
        uint32_t node;
        assert_rl_ok(rl_ring_lookup(ring, key, len, &node));
        uint32_t want = memcached_generate_hash(memc, (const char *)key, len);
        if (node != want && mismatches++ < 5)
            print_message("n=%zu key %d: ringlane %u, libmemcached %u\n", f->n, k, node, want);
    }
    rl_ring_free(ring);
    memcached_free(memc);
    return mismatches;
}

static void random_fleets_match_libmemcached(void **state)
{
    (void)state;
    uint64_t seed = 0x6b6574616d61ull; /* fixed: the same fleets every run */
    size_t mismatches = 0, sets = 0;
    for (int t = 0; t < 240; t++) {
        fleet f;
        size_t n = 1 + test_rand(&seed) % MAX_SERVERS;
        int equal = t % 4 == 0;
        uint32_t max_weight = t % 3 == 0 ? 3 : t % 3 == 1 ? 100 : 65536;
        make_fleet(&f, n, equal, max_weight, &seed);
        mismatches += compare(&f, &seed);
        sets++;
    }
    print_message("ketama: %zu server sets x %d keys, %zu mismatches\n", sets, KEYS_PER_SET,
                  mismatches);
    assert_int_equal(mismatches, 0);
}

/* The sizes where single-precision rounding gives 39 labels (156 points) per server, not 40,
 * at equal weights; and the neighbours where it does not. */
static void float_point_counts_match(void **state)
{
    (void)state;
    const size_t short_sizes[] = {25, 47, 50, 55, 61, 71, 94, 100};
    uint64_t seed = 42;
    for (size_t i = 0; i < sizeof short_sizes / sizeof short_sizes[0]; i++) {
        fleet f;
        make_fleet(&f, short_sizes[i], 1, 1, &seed);
        rl_ring_t *ring = ring_of(&f);
        assert_int_equal(rl_ring_point_count(ring), short_sizes[i] * 156);
        rl_ring_free(ring);
        assert_int_equal(compare(&f, &seed), 0);
    }
    const size_t full_sizes[] = {2, 24, 26, 48, 99};
    for (size_t i = 0; i < sizeof full_sizes / sizeof full_sizes[0]; i++) {
        fleet f;
        make_fleet(&f, full_sizes[i], 1, 1, &seed);
        rl_ring_t *ring = ring_of(&f);
        assert_int_equal(rl_ring_point_count(ring), full_sizes[i] * 160);
        rl_ring_free(ring);
        assert_int_equal(compare(&f, &seed), 0);
    }
}

/* Every size from 1 to 100, equal weights, plus one weighted set per size. */
static void every_size_matches(void **state)
{
    (void)state;
    uint64_t seed = 7;
    for (size_t n = 1; n <= MAX_SERVERS; n++) {
        fleet f;
        make_fleet(&f, n, 1, 1, &seed);
        assert_int_equal(compare(&f, &seed), 0);
        make_fleet(&f, n, 0, 10, &seed);
        assert_int_equal(compare(&f, &seed), 0);
    }
}

static uint64_t constant_hash(void *ctx, const void *data, size_t len)
{
    (void)ctx, (void)data, (void)len;
    return 7;
}

static void names_and_ports(void **state)
{
    (void)state;
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = "ketama";
    rl_ring_t *a, *b;
    /* No port means 11211: the same labels, so the same ring. */
    rl_member m1[] = {{"alpha", 1, NULL}, {"beta:11211", 2, NULL}};
    rl_member m2[] = {{"alpha:11211", 1, NULL}, {"beta", 2, NULL}};
    assert_rl_ok(rl_ring_build(m1, 2, &o, &a));
    assert_rl_ok(rl_ring_build(m2, 2, &o, &b));
    assert_int_equal(rl_ring_point_count(a), rl_ring_point_count(b));
    for (size_t i = 0; i < rl_ring_point_count(a); i++) {
        uint64_t pa, pb;
        uint32_t na, nb;
        assert_rl_ok(rl_ring_point(a, i, &pa, &na));
        assert_rl_ok(rl_ring_point(b, i, &pb, &nb));
        assert_true(pa == pb && na == nb);
    }
    rl_ring_free(a);
    rl_ring_free(b);
    /* An IPv6 address is given with its port: the port is after the last ':'. */
    rl_member v6[] = {{"::1:11211", 1, NULL}, {"fe80::2:11212", 1, NULL}};
    assert_rl_ok(rl_ring_build(v6, 2, &o, &a));
    rl_ring_free(a);

    const char *bad[] = {"host:",   ":11211",      "host:0", "host:65536",
                         "host:x1", "host:123456", "host:-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rl_member m[] = {{"h:1", 1, NULL}, {bad[i], 1, NULL}};
        char start[64];
        snprintf(start, sizeof start, "members[1].name \"%s\": profile ketama", bad[i]);
        assert_refused(rl_ring_build(m, 2, &o, &a), RL_ENAME, start,
                       bad[i][0] == ':' ? "the host is empty" : "a port 1..65535");
        assert_null(a);
    }
    /* A name without ':' is a host, whatever its characters (libmemcached checks none). */
    rl_member odd = {"not a host!", 1, NULL};
    assert_rl_ok(rl_ring_build(&odd, 1, &o, &a));
    rl_ring_free(a);
    /* A caller's hash cannot give four points per label. */
    rl_member one = {"h:1", 1, NULL};
    o.hash = constant_hash;
    assert_refused(rl_ring_build(&one, 1, &o, &a), RL_ENOTSUP, "hash set",
                   "profile ketama takes no caller hash");
}

/* The key hash is the first four MD5 bytes, little-endian: MD5("") = d41d8cd9... */
static void key_hash_is_md5_le(void **state)
{
    (void)state;
    assert_int_equal(rl_md5_32("", 0), 0xd98c1dd4u);
    assert_int_equal(rl_md5_32("abc", 3), 0x98500190u); /* 900150983cd24fb0... */
}

/* Keys that move between nodes present before and after a join, on weighted fleets: ketama
 * recomputes every server's share of 40 * n labels, so survivors trade keys (about 1%: 1.00%
 * measured here); ringlane's default profile gives each member weight * vnodes fixed points, so
 * none move between survivors. Deterministic (fixed names and keys); the band 0.5%..2% states
 * ketama's known behaviour. */
static double survivor_churn(const char *profile)
{
    static const uint32_t weights[] = {1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 2};
    char names[11][32];
    rl_member m[11];
    for (int i = 0; i < 11; i++) {
        snprintf(names[i], sizeof names[i], "10.0.0.%d:11211", i + 1);
        m[i] = (rl_member){names[i], weights[i], NULL};
    }
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = profile;
    rl_ring_t *before, *after;
    assert_rl_ok(rl_ring_build(m, 10, &o, &before));
    assert_rl_ok(rl_ring_build(m, 11, &o, &after));
    int keys = 50000, churn = 0;
    for (int k = 0; k < keys; k++) {
        char key[32];
        int len = snprintf(key, sizeof key, "key:%d", k);
        uint32_t a, b;
        assert_rl_ok(rl_ring_lookup(before, key, (size_t)len, &a));
        assert_rl_ok(rl_ring_lookup(after, key, (size_t)len, &b));
        churn += a != b && b != 10; /* node indices agree: the joiner is appended */
    }
    rl_ring_free(before);
    rl_ring_free(after);
    return (double)churn / keys;
}

static void weighted_join_churn(void **state)
{
    (void)state;
    double ketama = survivor_churn("ketama"), def = survivor_churn("default");
    print_message("weighted join: ketama %.4f, default %.4f of keys move between survivors\n",
                  ketama, def);
    assert_true(ketama > 0.005 && ketama < 0.02);
    assert_true(def == 0.0);
}

typedef struct big_build {
    size_t n;
    uint32_t weight;
    int rc;
    size_t points;
} big_build;

/* n members "h0".."h<n-1>" of one weight at RL_VNODES_MAX. */
static void build_at_max_vnodes(void *arg)
{
    big_build *b = arg;
    rl_member *m = calloc(b->n, sizeof *m);
    char(*names)[24] = calloc(b->n, sizeof *names);
    assert_non_null(m);
    assert_non_null(names);
    for (size_t i = 0; i < b->n; i++) {
        snprintf(names[i], sizeof names[i], "h%zu", i);
        m[i] = (rl_member){names[i], b->weight, NULL};
    }
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = "ketama";
    o.vnodes = RL_VNODES_MAX;
    rl_ring_t *r = NULL;
    b->rc = rl_ring_build(m, b->n, &o, &r);
    b->points = rl_ring_point_count(r);
    rl_ring_free(r);
    free(names);
    free(m);
}

/* ketama's points are about vnodes per server whatever the weights (labels by weight share), so
 * its count is its own: 300 servers at 65536 vnodes are 19,660,800 points, refused before any
 * is made (they were refused at the 16,777,217th, after 256 MiB of points and 4 Mi MD5s: the
 * peak resident memory grew by 256 MiB here). And weight x vnodes is not its count: one server
 * of weight 65536 at 65536 vnodes is 65,536 points, not too many. */
static void too_many_points_refused_before_allocating(void **state)
{
    (void)state;
    big_build many = {.n = 300, .weight = 1};
    assert_cheap("ketama, 300 servers x 65536 vnodes", build_at_max_vnodes, &many, 64);
    assert_int_equal(many.rc, RL_ETOOBIG);
    assert_int_equal(many.points, 0);

    big_build heavy = {.n = 1, .weight = RL_WEIGHT_MAX};
    build_at_max_vnodes(&heavy);
    assert_rl_ok(heavy.rc);
    assert_int_equal(heavy.points, RL_VNODES_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(too_many_points_refused_before_allocating),
        cmocka_unit_test(key_hash_is_md5_le),
        cmocka_unit_test(names_and_ports),
        cmocka_unit_test(float_point_counts_match),
        cmocka_unit_test(every_size_matches),
        cmocka_unit_test(random_fleets_match_libmemcached),
        cmocka_unit_test(weighted_join_churn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
