/* SPDX-License-Identifier: BSD-2-Clause */
/* The lookup engine against a plain successor over the ring's points, for every profile that
 * has points, on random rings: hashed positions, clustered positions, many equal positions. */
#include "test_util.h"

#include "ring_internal.h"

/* The ring's points, read through the public API, and its rule. */
typedef struct ref_ring {
    size_t n;
    uint64_t *pos;
    uint32_t *owner;
    uint64_t mask;
    int gt; /* "first point > hash" */
} ref_ring;

static int ref_load(const rl_ring_t *r, ref_ring *ref)
{
    ref->n = rl_ring_point_count(r);
    uint64_t p0;
    int rc = rl_ring_point(r, 0, &p0, NULL);
    if (rc == RL_ENOTSUP)
        return rc;
    ref->pos = malloc((ref->n ? ref->n : 1) * sizeof *ref->pos);
    ref->owner = malloc((ref->n ? ref->n : 1) * sizeof *ref->owner);
    assert_non_null(ref->pos);
    assert_non_null(ref->owner);
    for (size_t i = 0; i < ref->n; i++)
        assert_rl_ok(rl_ring_point(r, i, &ref->pos[i], &ref->owner[i]));
    unsigned bits = rl_ring_hash_bits(r);
    ref->mask = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
    const rl__profile *p = rl__profile_find(rl_ring_profile(r));
    assert_non_null(p);
    ref->gt = p->successor == RL__SUCC_GT;
    return 0;
}

static void ref_free(ref_ring *ref)
{
    free(ref->pos);
    free(ref->owner);
}

/* The successor rule written out plainly: a linear scan for the first point >= (or >) h. */
static size_t ref_successor(const ref_ring *ref, uint64_t hash)
{
    uint64_t h = hash & ref->mask;
    for (size_t i = 0; i < ref->n; i++)
        if (ref->gt ? ref->pos[i] > h : ref->pos[i] >= h)
            return i;
    return 0;
}

/* The same with a binary search, for the many-hash sweeps (checked against the scan above). */
static size_t ref_successor_fast(const ref_ring *ref, uint64_t hash)
{
    uint64_t h = hash & ref->mask;
    size_t lo = 0, hi = ref->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ref->gt ? ref->pos[mid] <= h : ref->pos[mid] < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == ref->n ? 0 : lo;
}

static const uint64_t zero_loads[128]; /* >= every test ring's member count */

static void check_hash(const rl_ring_t *r, const ref_ring *ref, uint64_t h)
{
    size_t want = ref_successor_fast(ref, h);
    size_t got = rl__successor(r, h);
    if (got != want)
        fail_msg("%s: successor of %llu is point %zu, want %zu", rl_ring_profile(r),
                 (unsigned long long)h, got, want);
    uint32_t node, via_view = UINT32_MAX;
    assert_rl_ok(rl_ring_lookup_hash(r, h, &node));
    if (node != ref->owner[want])
        fail_msg("%s: owner of %llu is %u, want %u", rl_ring_profile(r), (unsigned long long)h,
                 node, ref->owner[want]);
    rl_ring_view view;
    assert_rl_ok(rl_ring_view_init(r, &view));
    assert_rl_ok(rl_ring_view_lookup_hash(&view, h, &via_view));
    assert_int_equal(via_view, node);
    if ((h & 7) == 0) { /* bounded placement walks from the same point (a sample: it is O(n)) */
        assert_rl_ok(rl_ring_lookup_bounded_hash(r, h, zero_loads, 1.25, &node));
        assert_int_equal(node, ref->owner[want]);
    }
}

/* Hashes around every point, the ends of the ring, and random ones (some wider than the ring). */
static void check_ring(const rl_ring_t *r, const ref_ring *ref, uint64_t *seed)
{
    for (size_t i = 0; i < ref->n; i++) {
        check_hash(r, ref, ref->pos[i]);
        check_hash(r, ref, (ref->pos[i] - 1) & ref->mask);
        check_hash(r, ref, (ref->pos[i] + 1) & ref->mask);
    }
    const uint64_t ends[] = {0, 1, ref->mask, ref->mask - 1, ref->mask / 2, ref->mask / 2 + 1};
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        check_hash(r, ref, ends[i]);
        assert_int_equal(ref_successor(ref, ends[i]), ref_successor_fast(ref, ends[i]));
    }
    for (int i = 0; i < 2000; i++) {
        uint64_t h = test_rand(seed);
        check_hash(r, ref, h);
        check_hash(r, ref, h & ref->mask);
        if (i < 50)
            assert_int_equal(ref_successor(ref, h), ref_successor_fast(ref, h));
    }
    if (ref->mask == 0xFFFF && ref->n % 4 == 0) /* some 16-bit rings: every position */
        for (uint64_t h = 0; h <= 0xFFFF; h++)
            check_hash(r, ref, h);
}

/* Caller hashes that crowd points: into a narrow band, at the top of the ring, or onto a few
 * positions (so many points share one). */
typedef struct crowd {
    int kind;
    uint64_t mask;
} crowd;

static uint64_t crowd_hash(void *ctx, const void *data, size_t len)
{
    const crowd *c = ctx;
    uint64_t h = rl_xxh3(data, len);
    switch (c->kind) {
    case 0:
        return h % 1000; /* a band at the bottom */
    case 1:
        return c->mask - h % 5000; /* a band at the top */
    case 2:
        return (h % 7) * (c->mask / 7); /* seven positions */
    default:
        return (h & 0xFF) << 20; /* a comb */
    }
}

/* Random rings of one profile: sizes from one point to thousands; plain and crowded hashes. */
static void check_profile(const rl_profile_info *info, uint64_t *seed)
{
    char names[64][32];
    rl_member m[64];
    int checked = 0;
    for (int round = 0; round < 24; round++) {
        size_t n = 1 + test_rand(seed) % (round < 8 ? 4 : 64);
        for (size_t i = 0; i < n; i++) {
            snprintf(names[i], sizeof names[i], "m%llu-%zu",
                     (unsigned long long)(test_rand(seed) % 1000), i);
            m[i] = (rl_member){.name = names[i], .weight = 1 + (uint32_t)(test_rand(seed) % 3)};
        }
        rl_ring_options o;
        rl_ring_options_init(&o);
        o.profile = info->name;
        o.vnodes = 1 + (uint32_t)(test_rand(seed) % (round < 8 ? 3 : 80));
        if (info->max_vnodes == 0) /* a profile without vnodes (jump) takes none given */
            o.vnodes = RL_VNODES_PROFILE;
        crowd c = {.kind = round % 5 - 1,
                   .mask = info->bits == 64 ? UINT64_MAX : (UINT64_C(1) << info->bits) - 1};
        if (c.kind >= 0) {
            o.hash = crowd_hash;
            o.hash_ctx = &c;
        }
        rl_ring_t *r;
        int rc = rl_ring_build(m, n, &o, &r);
        if (rc == RL_ENOTSUP && o.hash) { /* no caller hashes (ketama): its own, uncrowded */
            o.hash = NULL;
            rc = rl_ring_build(m, n, &o, &r);
        }
        if (rc == RL_EWEIGHT) { /* profiles of equal members (jump, balanced): weight 1 */
            for (size_t i = 0; i < n; i++)
                m[i].weight = 1;
            rc = rl_ring_build(m, n, &o, &r);
        }
        /* Duplicate random names; and what a profile refuses by design: sizes (maglev's prime
         * tables, ketama's vnodes below 5). */
        if (rc == RL_EDUPNAME || rc == RL_EVNODES)
            continue;
        assert_rl_ok(rc);
        ref_ring ref;
        if (ref_load(r, &ref) == RL_ENOTSUP) { /* a profile without points */
            rl_ring_free(r);
            return;
        }
        if (ref.n == 0) { /* ketama with vnodes < 4 gives no labels: an empty ring */
            uint32_t node;
            assert_int_equal(rl_ring_lookup_hash(r, 1, &node), RL_EEMPTY);
        } else {
            check_ring(r, &ref, seed);
            checked++;
        }
        ref_free(&ref);
        rl_ring_free(r);
    }
    if (checked < 12)
        fail_msg("%s: only %d rings checked", info->name, checked);
}

static void every_profile_matches_plain_successor(void **state)
{
    (void)state;
    uint64_t seed = 42;
    assert_true(rl_profile_count() >= 4);
    for (size_t i = 0; i < rl_profile_count(); i++)
        check_profile(rl_profile_at(i), &seed);
}

/* A big hashed ring, as routed in production: 100 members x 160 vnodes. */
static void big_ring_matches_plain_successor(void **state)
{
    (void)state;
    char names[100][16];
    rl_member m[100];
    for (int i = 0; i < 100; i++) {
        snprintf(names[i], sizeof names[i], "n%d", i);
        m[i] = (rl_member){.name = names[i], .weight = 1};
    }
    uint64_t seed = 7;
    for (size_t p = 0; p < rl_profile_count(); p++) {
        rl_ring_options o;
        rl_ring_options_init(&o);
        o.profile = rl_profile_at(p)->name;
        o.vnodes = 160;
        rl_ring_t *r;
        if (rl_ring_build(m, 100, &o, &r) == RL_EVNODES) { /* vnodes means something else */
            o.vnodes = RL_VNODES_PROFILE;
            assert_rl_ok(rl_ring_build(m, 100, &o, &r));
        }
        ref_ring ref;
        if (ref_load(r, &ref) == 0) {
            check_ring(r, &ref, &seed);
            for (int i = 0; i < 50000; i++)
                check_hash(r, &ref, test_rand(&seed));
            ref_free(&ref);
        }
        rl_ring_free(r);
    }
}

/* Replica lists start where the engine says: compare with a walk from the plain successor. */
static void replicas_start_at_plain_successor(void **state)
{
    (void)state;
    const char *names[] = {"a", "b", "c", "d", "e", "f", "g"};
    uint64_t seed = 9;
    for (size_t p = 0; p < rl_profile_count(); p++) {
        const rl_profile_info *info = rl_profile_at(p);
        rl_ring_t *r = test_ring(info->name, info->max_vnodes ? 5 : RL_VNODES_PROFILE, names, 7);
        ref_ring ref;
        if (ref_load(r, &ref) != 0) {
            rl_ring_free(r);
            continue;
        }
        for (int i = 0; i < 3000; i++) {
            char key[32];
            int len = snprintf(key, sizeof key, "%08llx", (unsigned long long)test_rand(&seed));
            uint64_t h;
            if (rl_ring_hash_key(r, key, (size_t)len, &h) != 0)
                continue;
            uint32_t got[7], want[7];
            size_t n_got, n_want = 0;
            assert_rl_ok(rl_ring_replicas(r, key, (size_t)len, got, 3, &n_got));
            size_t start = ref_successor(&ref, h);
            for (size_t k = 0; k < ref.n && n_want < 3; k++) {
                uint32_t o = ref.owner[(start + k) % ref.n];
                int seen = 0;
                for (size_t x = 0; x < n_want; x++)
                    seen |= want[x] == o;
                if (!seen)
                    want[n_want++] = o;
            }
            assert_int_equal(n_got, n_want);
            assert_memory_equal(got, want, n_want * sizeof *want);
        }
        ref_free(&ref);
        rl_ring_free(r);
    }
}

/* The radix sort keeps the ring's order where many points share a position: within a run of
 * equal positions, owners follow the profile's tie order (names, or the order members were
 * added, or its reverse). */
static void crowded_positions_keep_tie_order(void **state)
{
    (void)state;
    char names[40][16];
    rl_member m[40];
    for (int i = 0; i < 40; i++) { /* added in an order unlike name order */
        snprintf(names[i], sizeof names[i], "z%02d", (i * 17) % 40);
        m[i] = (rl_member){.name = names[i], .weight = 1};
    }
    for (size_t p = 0; p < rl_profile_count(); p++) {
        const rl__profile *prof = rl__profile_find(rl_profile_at(p)->name);
        crowd c = {.kind = 2,
                   .mask =
                       prof->info.bits == 64 ? UINT64_MAX : (UINT64_C(1) << prof->info.bits) - 1};
        rl_ring_options o = {
            .profile = prof->info.name, .vnodes = 50, .hash = crowd_hash, .hash_ctx = &c};
        rl_ring_t *r;
        int rc = rl_ring_build(m, 40, &o, &r);
        if (rc == RL_ENOTSUP || rc == RL_EVNODES) /* no caller hash, or other sizes */
            continue;
        assert_rl_ok(rc);
        ref_ring ref;
        if (ref_load(r, &ref) != 0) {
            rl_ring_free(r);
            continue;
        }
        if (!prof->emit) /* generic labels: 40 x 50 points on seven positions */
            assert_int_equal(ref.n, 2000);
        size_t runs = 0;
        for (size_t i = 1; i < ref.n; i++) {
            assert_true(ref.pos[i - 1] <= ref.pos[i]);
            if (ref.pos[i - 1] != ref.pos[i]) {
                runs++;
                continue;
            }
            uint32_t a = ref.owner[i - 1], b = ref.owner[i];
            if (prof->tie == RL__TIE_NAME)
                assert_true(strcmp(names[a], names[b]) <= 0);
            else if (prof->tie == RL__TIE_ORDER)
                assert_true(a <= b);
            else
                assert_true(a >= b);
        }
        if (!prof->emit)
            assert_true(runs < 7);
        ref_free(&ref);
        rl_ring_free(r);
    }
}

/* A view answers what the ring answers where it has no fine table too: profiles without
 * points, and empty rings. */
static void views_of_every_kind_of_ring(void **state)
{
    (void)state;
    const char *names[] = {"a", "b", "c", "d"};
    for (size_t p = 0; p < rl_profile_count(); p++) {
        rl_ring_t *r = test_ring(rl_profile_at(p)->name, RL_VNODES_PROFILE, names, 4);
        rl_ring_view v;
        assert_rl_ok(rl_ring_view_init(r, &v));
        uint64_t seed = 3;
        for (int i = 0; i < 20000; i++) {
            uint64_t h = test_rand(&seed);
            uint32_t want, got;
            assert_rl_ok(rl_ring_lookup_hash(r, h, &want));
            assert_rl_ok(rl_ring_view_lookup_hash(&v, h, &got));
            assert_int_equal(got, want);
        }
        rl_ring_free(r);
    }
    rl_ring_t *empty;
    assert_rl_ok(rl_ring_build(NULL, 0, NULL, &empty));
    rl_ring_view v;
    uint32_t node;
    assert_rl_ok(rl_ring_view_init(empty, &v));
    assert_null(v.fast);
    assert_int_equal(rl_ring_view_lookup_hash(&v, 5, &node), RL_EEMPTY);
    assert_int_equal(rl_ring_view_init(NULL, &v), RL_EINVAL);
    assert_int_equal(rl_ring_view_init(empty, NULL), RL_EINVAL);
    rl_ring_free(empty);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_profile_matches_plain_successor),
        cmocka_unit_test(big_ring_matches_plain_successor),
        cmocka_unit_test(replicas_start_at_plain_successor),
        cmocka_unit_test(crowded_positions_keep_tie_order),
        cmocka_unit_test(views_of_every_kind_of_ring),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
