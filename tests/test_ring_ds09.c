/* SPDX-License-Identifier: BSD-2-Clause */
/* The ds.09 test catalog (its section 4), in C, on the ds09 profile and on ringlane's default. */
#include "test_util.h"

#include <math.h>

/* --- a table hash, so rings can be built and checked by hand (ds.09 section 3) --- */
typedef struct table_entry {
    const char *label;
    uint64_t pos;
} table_entry;

static const table_entry hand_table[] = {
    {"a#0", 10}, {"b#0", 30}, {"c#0", 50}, {"a#1", 60}, {"b#1", 80}, {"c#1", 95},
    {"k1", 5},   {"k2", 55},  {"k3", 85},  {"k4", 97},  {"k5", 30},  {NULL, 0},
};

static uint64_t table_hash(void *ctx, const void *data, size_t len)
{
    const table_entry *t = ctx;
    for (; t->label; t++)
        if (strlen(t->label) == len && memcmp(t->label, data, len) == 0)
            return t->pos;
    fail_msg("table hash has no entry for '%.*s'", (int)len, (const char *)data);
    return 0;
}

static rl_ring_t *table_ring(const table_entry *table, const char *const *names, size_t n,
                             uint32_t vnodes)
{
    rl_member m[8];
    for (size_t i = 0; i < n; i++)
        m[i] = (rl_member){.name = names[i], .weight = 1};
    rl_ring_options o = {
        .profile = "ds09", .vnodes = vnodes, .hash = table_hash, .hash_ctx = (void *)table};
    rl_ring_t *r;
    assert_rl_ok(rl_ring_build(m, n, &o, &r));
    return r;
}

static void hand_example(void **state)
{
    (void)state;
    const char *names[] = {"a", "b", "c"};
    rl_ring_t *r = table_ring(hand_table, names, 3, 2);
    assert_int_equal(rl_ring_point_count(r), 6);
    assert_string_equal(test_owner(r, "k1"), "a"); /* 5 -> a#0 at 10 */
    assert_string_equal(test_owner(r, "k2"), "a"); /* 55 -> a#1 at 60 */
    assert_string_equal(test_owner(r, "k3"), "c"); /* 85 -> c#1 at 95 */
    assert_string_equal(test_owner(r, "k4"), "a"); /* 97 -> past the top, wraps to a#0 */
    assert_string_equal(test_owner(r, "k5"), "b"); /* 30 -> b#0 at 30: equal counts */
    rl_ring_free(r);
}

static uint32_t node_of(const rl_ring_t *r, const char *name)
{
    uint32_t n;
    assert_rl_ok(rl_ring_find(r, name, &n));
    return n;
}

static void bounded_skips_full_node_hand(void **state)
{
    (void)state;
    const char *names[] = {"a", "b", "c"};
    rl_ring_t *r = table_ring(hand_table, names, 3, 2);
    uint64_t loads[3];
    loads[node_of(r, "a")] = 2;
    loads[node_of(r, "b")] = 0;
    loads[node_of(r, "c")] = 1;
    assert_int_equal(rl_capacity(3, 3, 1.25), 2);
    uint32_t n;
    assert_rl_ok(rl_ring_lookup_bounded(r, "k1", 2, loads, 1.25, &n));
    assert_string_equal(rl_ring_node_name(r, n), "b"); /* a is full (2 of cap 2) */
    assert_rl_ok(rl_ring_lookup_bounded(r, "k3", 2, loads, 1.25, &n));
    assert_string_equal(rl_ring_node_name(r, n), "c"); /* c has 1 < 2: keeps it */
    rl_ring_free(r);
}

static void capacity(void **state)
{
    (void)state;
    assert_int_equal(rl_capacity(3, 3, 1.25), 2);  /* ceil(1.25 * 4 / 3) = ceil(1.67) */
    assert_int_equal(rl_capacity(0, 1, 1.0), 1);   /* the +1: an empty ring can place */
    assert_int_equal(rl_capacity(0, 0, 1.25), 0);  /* no nodes */
    assert_int_equal(rl_capacity(9, 3, 1.0), 4);   /* ceil(10 / 3) */
    assert_int_equal(rl_capacity(10, 4, 1.25), 4); /* ceil(3.4375) */
    assert_int_equal(rl_capacity(5, 3, 0.5), 2);   /* c < 1 acts as 1: ceil(6 / 3) */
    assert_int_equal(rl_capacity(99, 10, 2.0), 20);
    assert_int_equal(rl_capacity(5, 3, NAN), 2);                      /* NaN acts as 1 too */
    assert_true(rl_capacity(UINT64_MAX - 1, 1, 1e300) == UINT64_MAX); /* saturates */
}

static void vnode_labels_and_hash(void **state)
{
    (void)state;
    const char *names[] = {"a"};
    rl_ring_t *r = test_ring("ds09", 2, names, 1);
    uint64_t h0 = rl_hash64("a#0", 3), h1 = rl_hash64("a#1", 3), p0, p1;
    assert_rl_ok(rl_ring_point(r, 0, &p0, NULL));
    assert_rl_ok(rl_ring_point(r, 1, &p1, NULL));
    assert_true(p0 == (h0 < h1 ? h0 : h1));
    assert_true(p1 == (h0 < h1 ? h1 : h0));
    uint64_t kh;
    assert_rl_ok(rl_ring_hash_key(r, "foobar", 6, &kh));
    assert_true(kh == 0x404da9e3b74078c2ull); /* keys hash with Hash64 too */
    rl_ring_free(r);
}

static void empty_ring(void **state)
{
    (void)state;
    rl_ring_t *r, *one, *none;
    assert_rl_ok(rl_ring_build(NULL, 0, NULL, &r));
    uint32_t n;
    uint64_t loads[1] = {0};
    assert_int_equal(rl_ring_lookup(r, "k", 1, &n), RL_EEMPTY);
    assert_int_equal(rl_ring_lookup_bounded(r, "k", 1, loads, 1.25, &n), RL_EEMPTY);
    rl_member a = {.name = "a", .weight = 1};
    assert_rl_ok(rl_ring_add(r, &a, &one));
    assert_rl_ok(rl_ring_lookup(one, "k", 1, &n));
    assert_rl_ok(rl_ring_remove(one, "a", &none)); /* after the last remove */
    assert_int_equal(rl_ring_member_count(none), 0);
    assert_int_equal(rl_ring_lookup(none, "k", 1, &n), RL_EEMPTY);
    assert_int_equal(rl_ring_lookup_bounded(none, "k", 1, loads, 1.25, &n), RL_EEMPTY);
    rl_ring_free(r);
    rl_ring_free(one);
    rl_ring_free(none);
}

static void rejects_zero_vnodes(void **state)
{
    (void)state;
    rl_member a = {.name = "a", .weight = 1};
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.vnodes = 0;
    rl_ring_t *r = (rl_ring_t *)&o; /* must be reset to NULL on error */
    assert_refused(rl_ring_build(&a, 1, &o, &r), RL_EVNODES, "vnodes 0",
                   "profile default takes 1..65536");
    assert_null(r);
    o.vnodes = RL_VNODES_MAX + 1;
    assert_refused(rl_ring_build(&a, 1, &o, &r), RL_EVNODES, "vnodes 65537", "1..65536");
    o.profile = "ketama"; /* vnodes / 4 labels per server: at least 5 */
    o.vnodes = 4;
    assert_refused(rl_ring_build(&a, 1, &o, &r), RL_EVNODES, "vnodes 4",
                   "profile ketama takes 5..65536");
}

/* Owners of keys "key-0" .. "key-<k-1>", as names. */
static const char **owners(const rl_ring_t *r, int k)
{
    const char **v = calloc((size_t)k, sizeof *v);
    char key[32];
    for (int i = 0; i < k; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        v[i] = test_owner(r, key);
    }
    return v;
}

static const char *const eight[] = {"engine-0", "engine-1", "engine-2", "engine-3",
                                    "engine-4", "engine-5", "engine-6", "engine-7"};
static const char *const profiles_64[] = {"ds09", "default"};

static void add_remove_idempotent(void **state)
{
    (void)state;
    for (int p = 0; p < 2; p++) {
        rl_ring_t *r = test_ring(profiles_64[p], 160, eight, 8), *again, *stranger;
        rl_member dup = {.name = "engine-3", .weight = 7}; /* weight ignored: already a member */
        assert_rl_ok(rl_ring_add(r, &dup, &again));
        assert_rl_ok(rl_ring_remove(again, "engine-99", &stranger));
        assert_int_equal(rl_ring_member_count(stranger), 8);
        assert_int_equal(rl_ring_point_count(stranger), rl_ring_point_count(r));
        const char **a = owners(r, 2000), **b = owners(stranger, 2000);
        for (int i = 0; i < 2000; i++)
            assert_string_equal(a[i], b[i]);
        /* Members are found by name, and in name order they are the sorted list. */
        for (int i = 0; i < 8; i++)
            assert_int_equal(node_of(stranger, eight[i]), i);
        free(a);
        free(b);
        rl_ring_free(r);
        rl_ring_free(again);
        rl_ring_free(stranger);
    }
}

static void collisions_break_ties_by_name(void **state)
{
    (void)state;
    /* Every label at one of two positions: ties everywhere. */
    static const table_entry t[] = {{"b#0", 50}, {"a#0", 50}, {"c#0", 50}, {"b#1", 90}, {"a#1", 90},
                                    {"c#1", 90}, {"k", 50},   {"j", 70},   {NULL, 0}};
    const char *abc[] = {"a", "b", "c"}, *cba[] = {"c", "b", "a"}, *bca[] = {"b", "c", "a"};
    const char *const *orders[] = {abc, cba, bca};
    for (int i = 0; i < 3; i++) {
        rl_ring_t *r = table_ring(t, orders[i], 3, 2);
        assert_string_equal(test_owner(r, "k"), "a"); /* at 50: a < b < c */
        assert_string_equal(test_owner(r, "j"), "a"); /* at 90 */
        uint32_t first, second;
        assert_rl_ok(rl_ring_point(r, 0, NULL, &first));
        assert_rl_ok(rl_ring_point(r, 1, NULL, &second));
        assert_string_equal(rl_ring_node_name(r, first), "a");
        assert_string_equal(rl_ring_node_name(r, second), "b");
        rl_ring_free(r);
    }
}

static void insertion_order_irrelevant(void **state)
{
    (void)state;
    const char *rev[8];
    for (int i = 0; i < 8; i++)
        rev[i] = eight[7 - i];
    for (int p = 0; p < 2; p++) {
        rl_ring_t *a = test_ring(profiles_64[p], 160, eight, 8);
        rl_ring_t *b = test_ring(profiles_64[p], 160, rev, 8);
        const char **oa = owners(a, 2000), **ob = owners(b, 2000);
        for (int i = 0; i < 2000; i++)
            assert_string_equal(oa[i], ob[i]);
        free(oa);
        free(ob);
        rl_ring_free(a);
        rl_ring_free(b);
    }
}

#define MOVE_KEYS 20000

/* Adding a 9th node: every moved key goes to it, and their number is within 4 standard
 * deviations of K * p_new (binomial: a false alarm about once in 15,000 runs, and the keys are
 * fixed, so the outcome is too). p_new is checked against 1/9 within a factor of 2: with 160
 * vnodes an arc share's relative spread is about 1/sqrt(160) = 8%, so this only catches gross
 * errors such as a node getting no points. */
static void add_moves_only_to_new_node(void **state)
{
    (void)state;
    for (int p = 0; p < 2; p++) {
        rl_ring_t *r8 = test_ring(profiles_64[p], 160, eight, 8), *r9;
        rl_member n = {.name = "engine-8", .weight = 1};
        assert_rl_ok(rl_ring_add(r8, &n, &r9));
        double shares[9];
        rl_ring_stats st;
        assert_rl_ok(rl_ring_stats_get(r9, &st, shares));
        double p_new = shares[8];
        assert_true(p_new > 1.0 / 18 && p_new < 2.0 / 9);

        const char **a = owners(r8, MOVE_KEYS), **b = owners(r9, MOVE_KEYS);
        int moved = 0;
        for (int i = 0; i < MOVE_KEYS; i++) {
            if (strcmp(a[i], b[i]) != 0) {
                assert_string_equal(b[i], "engine-8");
                moved++;
            }
        }
        double expect = MOVE_KEYS * p_new, sd = sqrt(MOVE_KEYS * p_new * (1 - p_new));
        if (fabs(moved - expect) > 4 * sd)
            fail_msg("%s: moved %d, expected %.0f +- %.0f", profiles_64[p], moved, expect, 4 * sd);
        free(a);
        free(b);
        rl_ring_free(r8);
        rl_ring_free(r9);
    }
}

static void remove_moves_only_its_keys(void **state)
{
    (void)state;
    for (int p = 0; p < 2; p++) {
        rl_ring_t *r8 = test_ring(profiles_64[p], 160, eight, 8), *r7;
        assert_rl_ok(rl_ring_remove(r8, "engine-5", &r7));
        const char **a = owners(r8, MOVE_KEYS), **b = owners(r7, MOVE_KEYS);
        int moved = 0, had = 0;
        for (int i = 0; i < MOVE_KEYS; i++) {
            had += strcmp(a[i], "engine-5") == 0;
            if (strcmp(a[i], b[i]) != 0) {
                assert_string_equal(a[i], "engine-5");
                moved++;
            }
            assert_string_not_equal(b[i], "engine-5");
        }
        assert_int_equal(moved, had);
        assert_true(had > 0);
        free(a);
        free(b);
        rl_ring_free(r8);
        rl_ring_free(r7);
    }
}

/* Key counts fit the arc shares: chi-square with 7 degrees of freedom below 24.32, the
 * p = 0.001 critical value (ds.09's threshold). 80,000 fixed keys. */
static void keys_spread_by_arc_length(void **state)
{
    (void)state;
    enum { K = 80000 };
    for (int p = 0; p < 2; p++) {
        rl_ring_t *r = test_ring(profiles_64[p], 160, eight, 8);
        double shares[8];
        rl_ring_stats st;
        assert_rl_ok(rl_ring_stats_get(r, &st, shares));
        int count[8] = {0};
        char key[32];
        for (int i = 0; i < K; i++) {
            uint32_t n;
            int len = snprintf(key, sizeof key, "request-%d", i);
            assert_rl_ok(rl_ring_lookup(r, key, (size_t)len, &n));
            count[n]++;
        }
        double chi2 = 0;
        for (int i = 0; i < 8; i++) {
            double e = K * shares[i];
            chi2 += (count[i] - e) * (count[i] - e) / e;
        }
        if (chi2 >= 24.32)
            fail_msg("%s: chi-square %.2f >= 24.32", profiles_64[p], chi2);
        rl_ring_free(r);
    }
}

/* Places k keys one by one with load feedback; returns the largest final load. */
static uint64_t place_all(const rl_ring_t *r, const char *const *keys, int k, double c,
                          int check_each)
{
    uint64_t loads[16] = {0};
    size_t n = rl_ring_member_count(r);
    for (int i = 0; i < k; i++) {
        uint32_t node;
        assert_rl_ok(rl_ring_lookup_bounded(r, keys[i], strlen(keys[i]), loads, c, &node));
        if (check_each) /* the placed key never takes a node past the capacity it was given */
            assert_true(loads[node] + 1 <= rl_capacity((uint64_t)i, n, c));
        loads[node]++;
    }
    uint64_t max = 0;
    for (size_t i = 0; i < n; i++)
        max = loads[i] > max ? loads[i] : max;
    return max;
}

static void bounded_never_exceeds_capacity(void **state)
{
    (void)state;
    enum { K = 3000 };
    static char buf[K][24];
    const char *keys[K];
    const double cs[] = {1.0, 1.25, 2.0};
    for (int p = 0; p < 2; p++) {
        rl_ring_t *r = test_ring(profiles_64[p], 160, eight, 8);
        for (int workload = 0; workload < 3; workload++) {
            for (int i = 0; i < K; i++) {
                if (workload == 0) /* distinct keys */
                    snprintf(buf[i], sizeof buf[i], "distinct-%d", i);
                else if (workload == 1) /* one hot key, every other request */
                    snprintf(buf[i], sizeof buf[i], i % 2 ? "hot" : "cold-%d", i);
                else /* three hot keys, 3 requests in 4 */
                    snprintf(buf[i], sizeof buf[i], i % 4 ? "hot-%d" : "cold-%d",
                             i % 4 ? i % 3 : i);
                keys[i] = buf[i];
            }
            for (int ci = 0; ci < 3; ci++) {
                uint64_t max = place_all(r, keys, K, cs[ci], 1);
                uint64_t bound = (uint64_t)ceil(cs[ci] * K / 8.0);
                if (max > bound)
                    fail_msg("%s workload %d c=%.2f: max load %llu > %llu", profiles_64[p],
                             workload, cs[ci], (unsigned long long)max, (unsigned long long)bound);
            }
        }
        rl_ring_free(r);
    }
}

static void bounded_equals_get_when_unloaded(void **state)
{
    (void)state;
    for (int p = 0; p < 2; p++) {
        rl_ring_t *r = test_ring(profiles_64[p], 160, eight, 8);
        uint64_t loads[8] = {0};
        char key[32];
        for (int i = 0; i < 5000; i++) {
            int len = snprintf(key, sizeof key, "k%d", i);
            uint32_t a, b;
            assert_rl_ok(rl_ring_lookup(r, key, (size_t)len, &a));
            assert_rl_ok(rl_ring_lookup_bounded(r, key, (size_t)len, loads, 1.25, &b));
            assert_int_equal(a, b);
        }
        rl_ring_free(r);
    }
}

static void bounded_clamps_c_below_one(void **state)
{
    (void)state;
    rl_ring_t *r = test_ring("ds09", 160, eight, 8);
    uint64_t la[8] = {0}, lb[8] = {0};
    char key[32];
    for (int i = 0; i < 4000; i++) {
        int len = snprintf(key, sizeof key, i % 3 ? "hot" : "k%d", i);
        uint32_t a, b;
        assert_rl_ok(rl_ring_lookup_bounded(r, key, (size_t)len, la, 0.5, &a));
        assert_rl_ok(rl_ring_lookup_bounded(r, key, (size_t)len, lb, 1.0, &b));
        assert_int_equal(a, b);
        la[a]++;
        lb[b]++;
    }
    rl_ring_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hand_example),
        cmocka_unit_test(bounded_skips_full_node_hand),
        cmocka_unit_test(capacity),
        cmocka_unit_test(vnode_labels_and_hash),
        cmocka_unit_test(empty_ring),
        cmocka_unit_test(rejects_zero_vnodes),
        cmocka_unit_test(add_remove_idempotent),
        cmocka_unit_test(collisions_break_ties_by_name),
        cmocka_unit_test(insertion_order_irrelevant),
        cmocka_unit_test(add_moves_only_to_new_node),
        cmocka_unit_test(remove_moves_only_its_keys),
        cmocka_unit_test(keys_spread_by_arc_length),
        cmocka_unit_test(bounded_never_exceeds_capacity),
        cmocka_unit_test(bounded_equals_get_when_unloaded),
        cmocka_unit_test(bounded_clamps_c_below_one),
    };
    return cmocka_run_group_tests_name("ring_ds09", tests, NULL, NULL);
}
