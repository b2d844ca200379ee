/* SPDX-License-Identifier: BSD-2-Clause */
/* The ring's API contract: argument checking, membership, replicas, zones, weights, stats. */
#include "test_util.h"

#include "ringlane/hash.h"
#include "ringlane/profile.h"

#include <math.h>

/* Each refusal with its code and its detail (docs/errors.md rows 1-9): the argument as written
 * in C, the value, the reason. */
static void build_errors(void **state)
{
    (void)state;
    rl_ring_t *r;
    rl_member ok = {.name = "a", .weight = 1};
    rl_ring_options o;
    rl_ring_options_init(&o);

    assert_refused(rl_ring_build(&ok, 1, NULL, NULL), RL_EINVAL, "out NULL", "");
    assert_refused(rl_ring_build(NULL, 2, NULL, &r), RL_EINVAL, "members NULL with count 2", "");
    assert_null(r);

    rl_member no_name[] = {{"a", 1, NULL}, {NULL, 1, NULL}};
    assert_refused(rl_ring_build(no_name, 2, NULL, &r), RL_EINVAL, "members[1].name NULL", "");
    rl_member empty = {.name = "", .weight = 1};
    assert_refused(rl_ring_build(&empty, 1, NULL, &r), RL_ENAME, "members[0].name \"\"",
                   "1..255 bytes");
    assert_null(r);

    char name[RL_NAME_MAX + 2];
    memset(name, 'x', sizeof name - 1);
    name[RL_NAME_MAX + 1] = 0; /* 256 bytes: one too many */
    rl_member long_name = {.name = name, .weight = 1};
    /* The name is quoted cut (64 bytes and "..."), so the detail stays a readable line. */
    assert_refused(
        rl_ring_build(&long_name, 1, NULL, &r), RL_ENAME,
        "members[0].name \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
        "...\" (too long)",
        "1..255 bytes");
    name[RL_NAME_MAX] = 0; /* 255 bytes: the limit itself is fine */
    assert_rl_ok(rl_ring_build(&long_name, 1, NULL, &r));
    assert_no_detail();
    assert_string_equal(rl_ring_node_name(r, 0), name);
    rl_ring_free(r);

    rl_member zero_weight[] = {{"a", 1, NULL}, {"b", 1, NULL}, {"c", 0, NULL}};
    assert_refused(rl_ring_build(zero_weight, 3, NULL, &r), RL_EWEIGHT, "members[2].weight 0",
                   "1..65536");
    rl_member heavy = {.name = "a", .weight = RL_WEIGHT_MAX + 1};
    assert_refused(rl_ring_build(&heavy, 1, NULL, &r), RL_EWEIGHT, "members[0].weight 65537",
                   "1..65536");

    memset(name, 'z', sizeof name - 1);
    name[RL_NAME_MAX + 1] = 0;
    rl_member long_zone = {.name = "a", .weight = 1, .zone = name};
    assert_refused(rl_ring_build(&long_zone, 1, NULL, &r), RL_ENAME, "members[0].zone \"zzz",
                   "at most 255 bytes");
    /* A name that is not printable stays one line: \xNN, and quotes escaped. */
    rl_member odd[] = {{"a\nb\"", 1, NULL}, {"a\nb\"", 1, NULL}};
    assert_refused(rl_ring_build(odd, 2, NULL, &r), RL_EDUPNAME, "members[1].name \"a\\x0ab\\\"\"",
                   "unique (also at index 0)");

    rl_member dup[] = {{"a", 1, NULL}, {"b", 1, NULL}, {"a", 2, NULL}};
    assert_refused(rl_ring_build(dup, 3, NULL, &r), RL_EDUPNAME, "members[2].name \"a\"",
                   "unique (also at index 0)");
    assert_null(r);

    o.profile = "no-such-profile";
    assert_refused(rl_ring_build(&ok, 1, &o, &r), RL_EPROFILE, "profile \"no-such-profile\"",
                   "unknown profile (one of: default, ds09, turnstone");

    /* Too many points: the limit is checked before anything is allocated. */
    rl_member big[] = {{"a", RL_WEIGHT_MAX, NULL}, {"b", RL_WEIGHT_MAX, NULL}};
    o.profile = NULL;
    o.vnodes = 200;
    assert_refused(rl_ring_build(big, 2, &o, &r), RL_ETOOBIG,
                   "vnodes 200 with 2 members of total weight 131072: 26214400 points",
                   "RL_POINTS_MAX (16777216)");
    assert_refused(rl_ring_build(&ok, RL_MEMBERS_MAX + 1, &o, &r), RL_ETOOBIG, "count 1048577",
                   "RL_MEMBERS_MAX (1048576)");

    /* A success clears what the refusal before it said. */
    assert_rl_ok(rl_ring_build(&ok, 1, NULL, &r));
    assert_no_detail();
    rl_ring_free(r);
}

typedef struct big_build {
    const char *profile;
    const rl_member *m;
    size_t n;
    int rc;
} big_build;

static void build_at_max_vnodes(void *arg)
{
    big_build *b = arg;
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = b->profile;
    o.vnodes = RL_VNODES_MAX;
    rl_ring_t *r = NULL;
    b->rc = rl_ring_build(b->m, b->n, &o, &r);
    if (r)
        fail_msg("%s: a ring of %zu points was built", b->profile, rl_ring_point_count(r));
}

/* Every point profile refuses too many points before it makes them: 300 members of weight 65536
 * at 65536 vnodes are over RL_POINTS_MAX for each (ketama counts about vnodes per member, the
 * others weight x vnodes). Made first, 16 Mi points would raise the peak resident memory by at
 * least 256 MiB. Not here: envoy (at most 8 Mi points whatever the members), and the profiles
 * without points (maglev's table is at most 5,000,011 entries; jump has none). */
static void too_many_points_refused_before_allocating(void **state)
{
    (void)state;
    enum { N = 300 };
    static char names[N][24];
    rl_member m[N];
    for (size_t i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "h%zu", i);
        m[i] = (rl_member){names[i], RL_WEIGHT_MAX, NULL};
    }
    size_t checked = 0;
    for (size_t i = 0; i < rl_profile_count(); i++) {
        const rl_profile_info *p = rl_profile_at(i);
        if (strcmp(p->kind, "ring") != 0 || strcmp(p->name, "envoy") == 0)
            continue;
        big_build b = {p->name, m, N, 0};
        assert_cheap(p->name, build_at_max_vnodes, &b, 64);
        if (b.rc != RL_ETOOBIG)
            fail_msg("%s: %s, not RL_ETOOBIG", p->name, rl_err_name(b.rc));
        checked++;
    }
    assert_int_equal(checked,
                     7); /* default, ds09, turnstone, xmur3, ketama, groupcache, balanced */
}

static void change_errors(void **state)
{
    (void)state;
    const char *names[] = {"a", "b"};
    rl_ring_t *r = test_ring(NULL, 10, names, 2), *out = (rl_ring_t *)names;
    rl_member bad = {.name = "c", .weight = 0};
    assert_refused(rl_ring_add(r, &bad, &out), RL_EWEIGHT, "member.weight 0", "1..65536");
    assert_null(out);
    assert_refused(rl_ring_add(NULL, &bad, &out), RL_EINVAL, "ring NULL", "");
    assert_refused(rl_ring_add(r, NULL, &out), RL_EINVAL, "member NULL", "");
    assert_refused(rl_ring_add(r, &bad, NULL), RL_EINVAL, "out NULL", "");
    rl_member unnamed = {.name = "", .weight = 1};
    assert_refused(rl_ring_add(r, &unnamed, &out), RL_ENAME, "member.name \"\"", "1..255");
    rl_member nameless = {.name = NULL, .weight = 1};
    assert_refused(rl_ring_add(r, &nameless, &out), RL_EINVAL, "member.name NULL",
                   "every member needs a name");
    assert_refused(rl_ring_remove(r, NULL, &out), RL_EINVAL, "name NULL", "");
    assert_refused(rl_ring_remove(NULL, "a", &out), RL_EINVAL, "ring NULL", "");
    assert_refused(rl_ring_remove(r, "a", NULL), RL_EINVAL, "out NULL", "");
    /* Refusals that only the rebuilt ring finds name the added member too. */
    rl_ring_t *k = test_ring("ketama", 160, names, 2);
    rl_member no_port = {.name = "host:0", .weight = 1};
    assert_refused(rl_ring_add(k, &no_port, &out), RL_ENAME, "member.name \"host:0\"",
                   "HOST:PORT, with a port 1..65535");
    rl_ring_free(k);
    /* Successes, also right after a refusal, leave no detail. */
    rl_member c = {.name = "c", .weight = 1};
    assert_rl_ok(rl_ring_add(r, &c, &out));
    assert_no_detail();
    rl_ring_free(out);
    assert_refused(rl_ring_remove(r, NULL, &out), RL_EINVAL, "name NULL", "");
    assert_rl_ok(rl_ring_remove(r, "a", &out));
    assert_no_detail();
    rl_ring_free(out);
    rl_ring_free(r);
    rl_ring_free(NULL); /* a no-op */
}

static void lookup_errors(void **state)
{
    (void)state;
    const char *names[] = {"a"};
    rl_ring_t *r = test_ring(NULL, 10, names, 1);
    uint32_t n, nodes[4];
    uint64_t h, loads[1] = {0};
    size_t got;
    assert_int_equal(rl_ring_lookup(NULL, "k", 1, &n), RL_EINVAL);
    assert_int_equal(rl_ring_lookup(r, NULL, 1, &n), RL_EINVAL);
    assert_int_equal(rl_ring_lookup(r, "k", 1, NULL), RL_EINVAL);
    assert_rl_ok(rl_ring_lookup(r, NULL, 0, &n)); /* the empty key is a key */
    assert_int_equal(rl_ring_hash_key(r, "k", 1, NULL), RL_EINVAL);
    assert_int_equal(rl_ring_lookup_hash(r, 1, NULL), RL_EINVAL);
    assert_int_equal(rl_ring_replicas(r, "k", 1, NULL, 2, &got), RL_EINVAL);
    assert_int_equal(rl_ring_replicas(r, "k", 1, nodes, 2, NULL), RL_EINVAL);
    assert_int_equal(rl_ring_lookup_bounded(r, "k", 1, NULL, 1.0, &n), RL_EINVAL);
    assert_int_equal(rl_ring_lookup_bounded(r, "k", 1, loads, 1.0, NULL), RL_EINVAL);
    loads[0] = UINT64_MAX; /* no room below any capacity */
    assert_int_equal(rl_ring_lookup_bounded(r, "k", 1, loads, 1.0, &n), RL_ERANGE);
    assert_int_equal(rl_ring_find(r, "zz", &n), RL_ENOENT);
    assert_int_equal(rl_ring_find(r, NULL, &n), RL_EINVAL);
    rl_member m;
    assert_int_equal(rl_ring_member(r, 1, &m), RL_ERANGE);
    assert_null(rl_ring_node_name(r, 1));
    assert_int_equal(rl_ring_point(r, 10, &h, &n), RL_ERANGE);
    assert_int_equal(rl_ring_stats_get(r, NULL, NULL), RL_EINVAL);
    assert_int_equal(rl_ring_member_count(NULL), 0);
    assert_null(rl_ring_profile(NULL));
    rl_ring_free(r);
}

static void inspection(void **state)
{
    (void)state;
    rl_member m[] = {{"b", 2, "z1"}, {"a", 1, NULL}};
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = "ds09";
    o.vnodes = 7;
    rl_ring_t *r;
    assert_rl_ok(rl_ring_build(m, 2, &o, &r));
    assert_string_equal(rl_ring_profile(r), "ds09");
    assert_int_equal(rl_ring_vnodes(r), 7);
    assert_int_equal(rl_ring_hash_bits(r), 64);
    assert_int_equal(rl_ring_member_count(r), 2);
    assert_int_equal(rl_ring_point_count(r), 21); /* (2 + 1) * 7 */
    rl_member got;
    assert_rl_ok(rl_ring_member(r, 0, &got));
    assert_string_equal(got.name, "b"); /* node indices keep the given order */
    assert_int_equal(got.weight, 2);
    assert_string_equal(got.zone, "z1");
    assert_rl_ok(rl_ring_member(r, 1, &got));
    assert_null(got.zone);
    uint64_t prev = 0, pos;
    for (size_t i = 0; i < rl_ring_point_count(r); i++) {
        assert_rl_ok(rl_ring_point(r, i, &pos, NULL));
        assert_true(i == 0 || pos >= prev);
        prev = pos;
    }
    rl_ring_free(r);

    rl_ring_options_init(&o);
    assert_rl_ok(rl_ring_build(m, 2, &o, &r));
    assert_string_equal(rl_ring_profile(r), "default");
    assert_int_equal(rl_ring_vnodes(r), 160);
    rl_ring_free(r);
    assert_non_null(rl_version_string());
}

static void profiles_listed(void **state)
{
    (void)state;
    const char *want[] = {"default", "ds09", "turnstone", "xmur3"};
    for (size_t i = 0; i < 4; i++) {
        const rl_profile_info *p = rl_profile_find(want[i]);
        assert_non_null(p);
        assert_string_equal(p->name, want[i]);
        assert_non_null(p->hash);
        assert_non_null(p->rule);
    }
    assert_int_equal(rl_profile_find("ds09")->default_vnodes, 160);
    assert_int_equal(rl_profile_find("xmur3")->default_vnodes, 3);
    assert_int_equal(rl_profile_find("turnstone")->default_vnodes, 150);
    assert_int_equal(rl_profile_find("turnstone")->bits, 16);
    assert_null(rl_profile_find("nope"));
    assert_null(rl_profile_find(NULL));
    assert_true(rl_profile_count() >= 4);
    assert_null(rl_profile_at(rl_profile_count()));
}

static const char *const six[] = {"n0", "n1", "n2", "n3", "n4", "n5"};

static void replicas_distinct_and_capped(void **state)
{
    (void)state;
    rl_ring_t *r = test_ring(NULL, 50, six, 6);
    uint32_t nodes[10];
    size_t got;
    char key[16];
    for (int i = 0; i < 500; i++) {
        int len = snprintf(key, sizeof key, "k%d", i);
        assert_rl_ok(rl_ring_replicas(r, key, (size_t)len, nodes, 3, &got));
        assert_int_equal(got, 3);
        uint32_t owner;
        assert_rl_ok(rl_ring_lookup(r, key, (size_t)len, &owner));
        assert_int_equal(nodes[0], owner); /* the preference list starts with the owner */
        assert_true(nodes[0] != nodes[1] && nodes[1] != nodes[2] && nodes[0] != nodes[2]);
        /* The list is a walk: asking for more extends it and keeps the prefix. */
        uint32_t more[10];
        assert_rl_ok(rl_ring_replicas(r, key, (size_t)len, more, 10, &got));
        assert_int_equal(got, 6); /* capped at the member count */
        assert_memory_equal(more, nodes, 3 * sizeof *nodes);
    }
    assert_rl_ok(rl_ring_replicas(r, "k", 1, NULL, 0, &got));
    assert_int_equal(got, 0);
    rl_ring_free(r);
}

/* Second replicas by hand: a, b, c at 10/20/30 and 60/70/80 with a table hash. */
static uint64_t tiny_hash(void *ctx, const void *data, size_t len)
{
    (void)ctx;
    static const char *labels[] = {"a#0", "b#0", "c#0", "a#1", "b#1", "c#1", "k"};
    static const uint64_t pos[] = {10, 20, 30, 60, 70, 80, 15};
    for (int i = 0; i < 7; i++)
        if (strlen(labels[i]) == len && memcmp(labels[i], data, len) == 0)
            return pos[i];
    return 0;
}

static void replicas_zoned(void **state)
{
    (void)state;
    /* Clockwise from 15: b(20), c(30), a(60). b and c share zone "east". */
    rl_member m[] = {{"a", 1, "west"}, {"b", 1, "east"}, {"c", 1, "east"}};
    rl_ring_options o = {.profile = "ds09", .vnodes = 2, .hash = tiny_hash};
    rl_ring_t *r;
    assert_rl_ok(rl_ring_build(m, 3, &o, &r));
    uint32_t nodes[3];
    size_t got;
    assert_rl_ok(rl_ring_replicas(r, "k", 1, nodes, 2, &got));
    assert_int_equal(got, 2);
    assert_string_equal(rl_ring_node_name(r, nodes[0]), "b");
    assert_string_equal(rl_ring_node_name(r, nodes[1]), "c");
    assert_rl_ok(rl_ring_replicas_zoned(r, "k", 1, nodes, 2, &got));
    assert_int_equal(got, 2);
    assert_string_equal(rl_ring_node_name(r, nodes[0]), "b");
    assert_string_equal(rl_ring_node_name(r, nodes[1]), "a"); /* c skipped: east is used */
    assert_rl_ok(rl_ring_replicas_zoned(r, "k", 1, nodes, 3, &got));
    assert_int_equal(got, 3); /* more than the zones: then the rest, clockwise */
    assert_string_equal(rl_ring_node_name(r, nodes[2]), "c");
    rl_ring_free(r);

    /* Without zones the zoned list is the plain list. */
    rl_member plain[] = {{"a", 1, NULL}, {"b", 1, NULL}, {"c", 1, ""}};
    assert_rl_ok(rl_ring_build(plain, 3, &o, &r));
    uint32_t z[3];
    assert_rl_ok(rl_ring_replicas(r, "k", 1, nodes, 3, &got));
    assert_rl_ok(rl_ring_replicas_zoned(r, "k", 1, z, 3, &got));
    assert_memory_equal(nodes, z, sizeof z);
    rl_ring_free(r);
}

static void weights_scale_points_and_shares(void **state)
{
    (void)state;
    rl_member m[] = {{"small", 1, NULL}, {"big", 3, NULL}};
    rl_ring_t *r;
    assert_rl_ok(rl_ring_build(m, 2, NULL, &r));
    assert_int_equal(rl_ring_point_count(r), 4 * 160);
    double shares[2];
    rl_ring_stats st;
    assert_rl_ok(rl_ring_stats_get(r, &st, shares));
    /* 480 vs 160 points: the big member's share is near 3/4. With 640 points the standard
     * deviation of a share is about sqrt(p(1-p)/640) ~ 1.7%; 6% is over 3 sd. */
    assert_true(shares[1] > 0.69 && shares[1] < 0.81);
    assert_true(shares[0] + shares[1] > 0.999999 && shares[0] + shares[1] < 1.000001);
    rl_ring_free(r);
}

static void stats_values(void **state)
{
    (void)state;
    const char *one[] = {"solo"};
    rl_ring_t *r = test_ring(NULL, 1, one, 1);
    rl_ring_stats st;
    double share;
    assert_rl_ok(rl_ring_stats_get(r, &st, &share));
    assert_true(share == 1.0 && st.max_mean_share == 1.0);
    assert_true(st.gap_cv == 0.0); /* one arc: no spread */
    rl_ring_free(r);

    /* Hand ring a 10, b 30, c 50, a 60, b 80, c 95 on a 64-bit ring: arcs are known. */
    r = test_ring(NULL, 100, six, 6);
    double shares[6], sum = 0;
    assert_rl_ok(rl_ring_stats_get(r, &st, shares));
    assert_int_equal(st.members, 6);
    assert_int_equal(st.points, 600);
    for (int i = 0; i < 6; i++) {
        sum += shares[i];
        assert_true(shares[i] >= st.min_share && shares[i] <= st.max_share);
    }
    assert_true(sum > 0.999999 && sum < 1.000001);
    assert_true(st.max_mean_share >= 1.0);
    /* Gaps between uniform random points are near-exponential: CV near 1. */
    assert_true(st.gap_cv > 0.8 && st.gap_cv < 1.2);
    rl_ring_free(r);

    rl_ring_t *empty;
    assert_rl_ok(rl_ring_build(NULL, 0, NULL, &empty));
    assert_int_equal(rl_ring_stats_get(empty, &st, NULL), RL_EEMPTY);
    rl_ring_free(empty);
}

static void turnstone_stats_count_buckets(void **state)
{
    (void)state;
    /* Every point at one position: the first point in ring order owns the whole ring. */
    rl_member m[] = {{"x", 1, NULL}};
    rl_ring_options o = {.profile = "ds09", .vnodes = 3, .hash = tiny_hash};
    rl_ring_t *r;
    assert_rl_ok(rl_ring_build(m, 1, &o, &r)); /* x#0.. hash to 0 */
    rl_ring_stats st;
    double share;
    assert_rl_ok(rl_ring_stats_get(r, &st, &share));
    assert_true(share == 1.0);
    rl_ring_free(r);
}

/* Which vnodes each profile builds with (the CLI and the partitioner ask the same function),
 * and the balanced profile: equal shares, no weights, and an added member takes keys from the
 * others only. */
/* rl_profile_names: every name, comma-separated, cut and terminated like snprintf. */
static void profile_names_listed(void **state)
{
    (void)state;
    char want[512] = "", buf[512];
    for (size_t i = 0; i < rl_profile_count(); i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", i ? ", " : "",
                 rl_profile_at(i)->name);
    size_t need = strlen(want);
    assert_int_equal(rl_profile_names(buf, sizeof buf), need);
    assert_string_equal(buf, want);
    assert_int_equal(rl_profile_names(NULL, 0), need);
    char small[10];
    memset(small, 'x', sizeof small);
    assert_int_equal(rl_profile_names(small, sizeof small), need);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_memory_equal(small, want, sizeof small - 1);
    char exact[512];
    assert_int_equal(rl_profile_names(exact, need + 1), need);
    assert_string_equal(exact, want);
    assert_int_equal(rl_profile_names(exact, need), need); /* one short: the last byte is cut */
    assert_int_equal(strlen(exact), need - 1);
}

static void profile_vnodes_and_balanced(void **state)
{
    (void)state;
    assert_int_equal(rl_profile_check_vnodes("ketama", 4), RL_EVNODES); /* 0 labels a server */
    assert_rl_ok(rl_profile_check_vnodes("ketama", 5));
    assert_int_equal(rl_profile_check_vnodes("maglev", 65536), RL_EVNODES);
    assert_rl_ok(rl_profile_check_vnodes("maglev", 65537));
    assert_rl_ok(rl_profile_check_vnodes("maglev", 5000011));
    assert_int_equal(rl_profile_check_vnodes("maglev", 5000012), RL_EVNODES);
    assert_int_equal(rl_profile_check_vnodes("default", 0), RL_EVNODES);
    assert_int_equal(rl_profile_check_vnodes("default", RL_VNODES_MAX + 1), RL_EVNODES);
    assert_rl_ok(rl_profile_check_vnodes(NULL, RL_VNODES_PROFILE));
    assert_int_equal(rl_profile_check_vnodes("nope", 5), RL_EPROFILE);
    assert_int_equal(rl_profile_check_vnodes("jump", 1), RL_EVNODES); /* it has none */
    assert_rl_ok(rl_profile_check_vnodes("jump", RL_VNODES_PROFILE));
    assert_int_equal(rl_profile_check_vnodes("maglev", 1), RL_EVNODES);
    assert_rl_ok(rl_profile_check_vnodes("maglev", 2));

    /* The words every layer quotes: the rule, whether or not the value is taken. */
    const struct {
        const char *profile;
        uint32_t vnodes;
        int rc;
        const char *why;
    } rules[] = {
        {"maglev", 1000, RL_EVNODES, "profile maglev takes a prime 2..5000011 (its table size)"},
        {"maglev", 65537, 0, "profile maglev takes a prime 2..5000011 (its table size)"},
        {"ketama", 4, RL_EVNODES,
         "profile ketama takes 5..65536 vnodes (points per server at equal weights: vnodes / 4 "
         "labels, none below 5)"},
        {NULL, 0, RL_EVNODES, "profile default takes 1..65536 vnodes"},
        {"envoy", 8388609, RL_EVNODES,
         "profile envoy takes 1..8388608 vnodes (its minimum_ring_size)"},
        {"jump", 50, RL_EVNODES,
         "profile jump has no vnodes (it computes each key's bucket from the member count)"},
        {"jump", RL_VNODES_PROFILE, 0,
         "profile jump has no vnodes (it computes each key's bucket from the member count)"},
        {"nope", 5, RL_EPROFILE, "unknown profile \"nope\""},
    };
    for (size_t i = 0; i < sizeof rules / sizeof *rules; i++) {
        char why[160] = "stale";
        assert_int_equal(
            rl_profile_explain_vnodes(rules[i].profile, rules[i].vnodes, why, sizeof why),
            rules[i].rc);
        assert_string_equal(why, rules[i].why);
    }
    char small[8];
    assert_int_equal(rl_profile_explain_vnodes("maglev", 1000, small, sizeof small), RL_EVNODES);
    assert_string_equal(small, "profile"); /* cut, terminated */
    assert_int_equal(rl_profile_explain_vnodes("maglev", 1000, NULL, 100), RL_EVNODES);

    /* rl_ring_build says the same, after the option's name and its value. */
    rl_member one = {"a", 1, NULL};
    rl_ring_options bad;
    rl_ring_options_init(&bad);
    bad.profile = "maglev";
    bad.vnodes = 1000;
    rl_ring_t *none = NULL;
    assert_int_equal(rl_ring_build(&one, 1, &bad, &none), RL_EVNODES);
    assert_string_equal(rl_last_error_detail(), "vnodes 1000: profile maglev takes a prime "
                                                "2..5000011 (its table size)");
    rl_member m[6] = {{"a", 1, NULL}, {"b", 1, NULL}, {"c", 1, NULL},
                      {"d", 1, NULL}, {"e", 1, NULL}, {"f", 1, NULL}};
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = "ketama";
    o.vnodes = 4;
    rl_ring_t *r = (rl_ring_t *)&o;
    assert_int_equal(rl_ring_build(m, 3, &o, &r), RL_EVNODES);
    assert_null(r);

    o.profile = "balanced";
    o.vnodes = RL_VNODES_PROFILE;
    m[1].weight = 2;
    assert_int_equal(rl_ring_build(m, 3, &o, &r), RL_EWEIGHT);
    m[1].weight = 1;
    assert_rl_ok(rl_ring_build(m, 5, &o, &r));
    rl_ring_stats st;
    assert_rl_ok(rl_ring_stats_get(r, &st, NULL));
    assert_true(fabs(st.max_mean_share - 1.0) < 1e-9); /* 5 members <= 64 vnodes: exact */
    rl_ring_t *grown;
    assert_rl_ok(rl_ring_add(r, &m[5], &grown));
    uint64_t moved = 0;
    for (uint64_t i = 0; i < 20000; i++) {
        uint64_t h = rl_mix64(i); /* spread over the ring, fixed */
        uint32_t x, y;
        assert_rl_ok(rl_ring_lookup_hash(r, h, &x));
        assert_rl_ok(rl_ring_lookup_hash(grown, h, &y));
        if (x != y) {
            assert_int_equal(y, 5);
            moved++;
        }
    }
    /* 1/6 of 20,000 is 3,333, sd sqrt(20000 * 1/6 * 5/6) = 52.7: within 4 sd. */
    assert_true(fabs((double)moved - 20000.0 / 6) <= 4 * 52.7);
    rl_ring_free(grown);
    rl_ring_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(build_errors),
        cmocka_unit_test(too_many_points_refused_before_allocating),
        cmocka_unit_test(profile_names_listed),
        cmocka_unit_test(profile_vnodes_and_balanced),
        cmocka_unit_test(change_errors),
        cmocka_unit_test(lookup_errors),
        cmocka_unit_test(inspection),
        cmocka_unit_test(profiles_listed),
        cmocka_unit_test(replicas_distinct_and_capped),
        cmocka_unit_test(replicas_zoned),
        cmocka_unit_test(weights_scale_points_and_shares),
        cmocka_unit_test(stats_values),
        cmocka_unit_test(turnstone_stats_count_buckets),
    };
    return cmocka_run_group_tests_name("ring_api", tests, NULL, NULL);
}
