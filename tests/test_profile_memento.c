/* SPDX-License-Identifier: BSD-2-Clause */
/* The memento profile: jump's placement while nothing was removed (tests/vectors/jump.txt), and
 * MementoHash's promises across rl_ring_remove and rl_ring_add: a remove moves only the removed
 * member's keys, spread evenly over the others; an add moves keys only to the new member; adding
 * back what was removed, in reverse order, restores the placement exactly. Keys: 100,000 fixed
 * strings "key-<i>", hashed once; random changes from a fixed seed. */
#define _POSIX_C_SOURCE 200809L
#include "test_vectors.h"

#include "ring_internal.h" /* r->memento: no state while the placement is jump's */
#include "ringlane/ring_view.h"

#include <math.h>

#define KEYS 100000
#define NAMES 65536

static uint64_t hashes[KEYS];
static int nkeys = KEYS; /* the keys the checks below look at: the first nkeys */
static char names[NAMES][12];

static int setup(void **state)
{
    (void)state;
    for (int k = 0; k < KEYS; k++) {
        char key[32];
        int len = snprintf(key, sizeof key, "key-%d", k);
        hashes[k] = rl_xxh3(key, (size_t)len);
    }
    for (int i = 0; i < NAMES; i++)
        snprintf(names[i], sizeof names[i], "m%d", i);
    return 0;
}

/* Members m0 .. m<n-1> (the vectors go up to 1,048,576 buckets; names are copied). */
static rl_ring_t *build(const char *profile, size_t n)
{
    rl_member *m = calloc(n ? n : 1, sizeof *m);
    char(*more)[24] = n > NAMES ? calloc(n, sizeof *more) : NULL;
    assert_true(m && (n <= NAMES || more));
    for (size_t i = 0; i < n; i++) {
        if (i >= NAMES)
            snprintf(more[i], sizeof more[i], "m%zu", i);
        m[i] = (rl_member){i < NAMES ? names[i] : more[i], 1, NULL};
    }
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = profile;
    rl_ring_t *r = NULL;
    assert_rl_ok(rl_ring_build(m, n, &o, &r));
    free(more);
    free(m);
    return r;
}

static rl_ring_t *removed(rl_ring_t *r, const char *name)
{
    rl_ring_t *out;
    assert_rl_ok(rl_ring_remove(r, name, &out));
    return out;
}

static rl_ring_t *added(rl_ring_t *r, const char *name)
{
    rl_ring_t *out;
    assert_rl_ok(rl_ring_add(r, &(rl_member){name, 1, NULL}, &out));
    return out;
}

/* owner[k] = the name of key k's owner (pointing into r: valid while r lives). */
static void owners(const rl_ring_t *r, const char **owner)
{
    for (int k = 0; k < nkeys; k++) {
        uint32_t node;
        assert_rl_ok(rl_ring_lookup_hash(r, hashes[k], &node));
        assert_true(node < rl_ring_member_count(r));
        owner[k] = rl_ring_node_name(r, node);
    }
}

static const char *before[KEYS], *after[KEYS];

/* Every key that changed owner between a and b went from `from` (when not NULL) and to `to`
 * (when not NULL). Returns how many moved. */
static size_t moves_only(const rl_ring_t *a, const rl_ring_t *b, const char *from, const char *to)
{
    owners(a, before);
    owners(b, after);
    size_t moved = 0;
    for (int k = 0; k < nkeys; k++) {
        if (strcmp(before[k], after[k]) == 0)
            continue;
        moved++;
        if (from && strcmp(before[k], from) != 0)
            fail_msg("key %d moved %s -> %s, not from %s", k, before[k], after[k], from);
        if (to && strcmp(after[k], to) != 0)
            fail_msg("key %d moved %s -> %s, not to %s", k, before[k], after[k], to);
    }
    return moved;
}

static size_t same_placement(const rl_ring_t *a, const rl_ring_t *b)
{
    owners(a, before);
    owners(b, after);
    size_t differ = 0;
    for (int k = 0; k < nkeys; k++)
        differ += strcmp(before[k], after[k]) != 0;
    return differ;
}

/* While nothing is removed the placement is jump's: the paper's vectors, and rings grown one
 * rl_ring_add at a time, which carry no state at all. */
static void build_and_growth_are_jump(void **state)
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
            r = build("memento", n);
            have = n;
        }
        uint32_t node;
        assert_rl_ok(rl_ring_lookup_hash(r, key, &node));
        if (node != want)
            fail_msg("memento(%llu, %zu) = %u, jump says %u", key, n, node, want);
        rows++;
    }
    rl_ring_free(r);
    fclose(f);
    assert_true(rows > 300);

    rl_ring_t *grown = build("memento", 0);
    for (size_t n = 1; n <= 40; n++) {
        rl_ring_t *next = added(grown, names[n - 1]), *jump = build("jump", n);
        assert_null(next->memento);
        assert_int_equal(same_placement(next, jump), 0);
        rl_ring_free(jump);
        rl_ring_free(grown);
        grown = next;
    }
    rl_ring_free(grown);
}

/* Removing the first, a middle or the last of 16 members moves only its keys, and each of the 15
 * others takes an equal part of them. The removed member holds about 100,000 / 16 = 6,250 keys;
 * each survivor's part is binomial(6,250, 1/15): mean 417, sd 19.7; the bound is 6 sd, so a
 * survivor that took a part twice or half its due fails (fixed keys: the outcome never varies). */
static void remove_moves_only_its_keys(void **state)
{
    (void)state;
    rl_ring_t *r = build("memento", 16);
    const size_t which[] = {0, 5, 15};
    for (size_t w = 0; w < 3; w++) {
        const char *gone = names[which[w]];
        rl_ring_t *s = removed(r, gone);
        size_t moved = moves_only(r, s, gone, NULL);
        size_t share[16] = {0}, held = 0;
        for (int k = 0; k < KEYS; k++) {
            held += strcmp(before[k], gone) == 0;
            if (strcmp(before[k], after[k]) != 0) {
                uint32_t node;
                assert_rl_ok(rl_ring_find(s, after[k], &node));
                share[node]++;
            }
        }
        assert_int_equal(moved, held); /* all of the removed member's keys, and no other */
        assert_true(held > 6250 - 6 * 77 && held < 6250 + 6 * 77); /* binomial sd 77 */
        double due = (double)held / 15, sd = sqrt((double)held * (1.0 / 15) * (14.0 / 15));
        for (size_t i = 0; i < 15; i++)
            if (fabs((double)share[i] - due) > 6 * sd)
                fail_msg("removing %s: %s took %zu keys, due %.0f", gone,
                         rl_ring_node_name(s, (uint32_t)i), share[i], due);
        /* Removing the last bucket is jump's shrink: no state. Any other leaves a record. */
        if (which[w] == 15)
            assert_null(s->memento);
        else
            assert_non_null(s->memento);
        rl_ring_free(s);
    }
    rl_ring_free(r);
}

/* An add undoes the last remove: the same member comes back to the same keys; another member
 * takes exactly the keys the removed one had. Members added back in the reverse order of their
 * removal restore the whole placement. */
static void add_restores_the_last_removed(void **state)
{
    (void)state;
    rl_ring_t *r = build("memento", 12);
    rl_ring_t *s = removed(r, "m5"), *back = added(s, "m5");
    assert_int_equal(same_placement(r, back), 0);
    rl_ring_free(back);

    back = added(s, "x");
    size_t moved = moves_only(s, back, NULL, "x");
    owners(r, before);
    owners(back, after);
    size_t had = 0;
    for (int k = 0; k < KEYS; k++) {
        assert_true((strcmp(before[k], "m5") == 0) == (strcmp(after[k], "x") == 0));
        had += strcmp(before[k], "m5") == 0;
    }
    assert_int_equal(moved, had);
    rl_ring_free(back);
    rl_ring_free(s);

    /* m3, m9, m1 out, then m1, m9, m3 back: the placement of r. Each step moves only its
     * member's keys. */
    const char *order[] = {"m3", "m9", "m1"};
    rl_ring_t *cur = r, *next;
    for (int i = 0; i < 3; i++) {
        next = removed(cur, order[i]);
        moves_only(cur, next, order[i], NULL);
        if (cur != r)
            rl_ring_free(cur);
        cur = next;
    }
    for (int i = 2; i >= 0; i--) {
        next = added(cur, order[i]);
        moves_only(cur, next, NULL, order[i]);
        rl_ring_free(cur);
        cur = next;
    }
    assert_int_equal(same_placement(r, cur), 0);
    rl_ring_free(cur);
    rl_ring_free(r);
}

/* A build knows no history: after a remove from the middle, rl_ring_build of the remaining
 * members is jump's placement, which renumbers the members after the removed one. */
static void history_is_not_in_a_build(void **state)
{
    (void)state;
    rl_ring_t *r = build("memento", 8), *s = removed(r, "m0");
    rl_member m[7];
    for (int i = 0; i < 7; i++)
        m[i] = (rl_member){names[i + 1], 1, NULL};
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = "memento";
    rl_ring_t *fresh;
    assert_rl_ok(rl_ring_build(m, 7, &o, &fresh));
    size_t moved = moves_only(r, s, "m0", NULL), rebuilt = same_placement(r, fresh);
    assert_true(moved < KEYS / 8 + 600); /* 1/8: 12,500, binomial sd 105 */
    assert_true(rebuilt > KEYS / 2);     /* jump renumbered the seven */
    assert_true(same_placement(s, fresh) > KEYS / 2);
    rl_ring_free(fresh);
    rl_ring_free(s);
    rl_ring_free(r);
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* 240 random adds and removes (seed 26) over 1..64 members from a pool of 96 names: every change
 * moves only the changed member's keys (checked on 20,000 keys), the inline view and the
 * snapshot holder answer as rl_ring_lookup_hash does, and every 40 changes the 100,000 keys are
 * balanced: max/mean of the keys per member at most 1 + 6 sqrt(n / 100,000) (6 sd of a binomial
 * share: 1.15 at 64 members). */
static void random_changes_keep_the_promises(void **state)
{
    (void)state;
    uint64_t seed = 26;
    rl_ring_t *r = build("memento", 20);
    int in[96] = {0};
    for (int i = 0; i < 20; i++)
        in[i] = 1;
    size_t removes = 0, adds = 0, worst_members = 0;
    double worst = 0;
    for (int step = 1; step <= 240; step++) {
        size_t n = rl_ring_member_count(r);
        int add = n <= 1 || (n < 64 && splitmix(&seed) % 2);
        int pick = (int)(splitmix(&seed) % 96);
        while (in[pick] != !add)
            pick = (pick + 1) % 96;
        in[pick] = add;
        rl_ring_t *next = add ? added(r, names[pick]) : removed(r, names[pick]);
        nkeys = 20000;
        size_t moved =
            add ? moves_only(r, next, NULL, names[pick]) : moves_only(r, next, names[pick], NULL);
        nkeys = KEYS;
        assert_true(moved > 0);
        add ? adds++ : removes++;

        rl_ring_view v;
        rl_snapshot_t *snap;
        rl_ring_t *copy = add ? added(r, names[pick]) : removed(r, names[pick]);
        assert_rl_ok(rl_snapshot_create(copy, &snap));
        assert_rl_ok(rl_ring_view_init(next, &v));
        for (int k = 0; k < KEYS; k += 97) {
            uint32_t a, b, c;
            assert_rl_ok(rl_ring_lookup_hash(next, hashes[k], &a));
            assert_rl_ok(rl_ring_view_lookup_hash(&v, hashes[k], &b));
            assert_rl_ok(rl_snapshot_lookup_hash(snap, hashes[k], &c));
            assert_int_equal(a, b);
            assert_int_equal(a, c);
        }
        rl_snapshot_free(snap);
        rl_ring_free(r);
        r = next;
        if (step % 40)
            continue;
        size_t m = rl_ring_member_count(r), *count = calloc(m, sizeof *count), max = 0;
        for (int k = 0; k < KEYS; k++) {
            uint32_t a;
            assert_rl_ok(rl_ring_lookup_hash(r, hashes[k], &a));
            count[a]++;
        }
        for (size_t i = 0; i < m; i++)
            max = count[i] > max ? count[i] : max;
        double ratio = (double)max * (double)m / KEYS;
        if (ratio > 1 + 6 * sqrt((double)m / KEYS))
            fail_msg("step %d, %zu members: max/mean %.3f", step, m, ratio);
        if (ratio > worst) {
            worst = ratio;
            worst_members = m;
        }
        free(count);
    }
    assert_true(adds > 80 && removes > 80);
    print_message("240 changes (%zu adds, %zu removes): worst max/mean %.3f (%zu members)\n", adds,
                  removes, worst, worst_members);
    rl_ring_free(r);
}

/* 65,536 members: the build is jump's (no state); removing one from the middle moves only its
 * keys and records 8 bytes per bucket; adding it back restores the placement. */
static void sixty_five_thousand_members(void **state)
{
    (void)state;
    rl_ring_t *r = build("memento", NAMES);
    assert_null(r->memento);
    rl_ring_t *s = removed(r, names[30000]), *back = added(s, names[30000]);
    size_t moved = moves_only(r, s, names[30000], NULL);
    assert_true(moved < 20); /* 100,000 / 65,536: about 1.5 keys */
    assert_non_null(s->memento);
    assert_int_equal(same_placement(r, back), 0);
    rl_ring_free(back);
    rl_ring_free(s);
    rl_ring_free(r);
}

static void what_memento_answers(void **state)
{
    (void)state;
    rl_ring_t *r = build("memento", 4), *s = removed(r, "m1");
    uint64_t h, loads[4] = {0};
    uint32_t node, list[4];
    size_t got;
    rl_ring_stats st;
    assert_rl_ok(rl_ring_hash_key(s, "k", 1, &h));
    assert_true(h == rl_xxh3("k", 1));
    assert_int_equal(rl_ring_point_count(s), 0);
    assert_int_equal(rl_ring_point(s, 0, NULL, NULL), RL_ENOTSUP);
    assert_int_equal(rl_ring_replicas(s, "k", 1, list, 2, &got), RL_ENOTSUP);
    assert_int_equal(rl_ring_lookup_bounded(s, "k", 1, loads, 1.0, &node), RL_ENOTSUP);
    assert_int_equal(rl_ring_stats_get(s, &st, NULL), RL_ENOTSUP);
    const rl_profile_info *info = rl_profile_find("memento");
    assert_non_null(info);
    assert_string_equal(info->kind, "computed");
    assert_int_equal(info->history, 1);
    assert_int_equal(rl_profile_find("jump")->history, 0);

    /* Adding a name already there, or removing one that is not, keeps the history. */
    rl_ring_t *same;
    assert_rl_ok(rl_ring_add(s, &(rl_member){"m2", 1, NULL}, &same));
    assert_int_equal(same_placement(s, same), 0);
    assert_non_null(same->memento);
    rl_ring_free(same);
    assert_rl_ok(rl_ring_remove(s, "nobody", &same));
    assert_int_equal(same_placement(s, same), 0);
    rl_ring_free(same);

    /* Down to no member and back: empty rings say RL_EEMPTY; the adds restore, in reverse. */
    rl_ring_t *cur = removed(s, "m3"), *next;
    next = removed(cur, "m0");
    rl_ring_free(cur);
    cur = removed(next, "m2");
    rl_ring_free(next);
    assert_int_equal(rl_ring_member_count(cur), 0);
    assert_int_equal(rl_ring_lookup(cur, "k", 1, &node), RL_EEMPTY);
    const char *back[] = {"m2", "m0", "m3", "m1"};
    for (int i = 0; i < 4; i++) {
        next = added(cur, back[i]);
        rl_ring_free(cur);
        cur = next;
    }
    assert_int_equal(same_placement(r, cur), 0);
    rl_ring_free(cur);

    rl_member weighted[] = {{"a", 2, NULL}};
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = "memento";
    rl_ring_t *w = (rl_ring_t *)&o;
    assert_int_equal(rl_ring_build(weighted, 1, &o, &w), RL_EWEIGHT);
    assert_null(w);
    assert_int_equal(rl_ring_add(s, &weighted[0], &w), RL_EWEIGHT);
    assert_null(w);
    rl_ring_free(s);
    rl_ring_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(build_and_growth_are_jump),
        cmocka_unit_test(remove_moves_only_its_keys),
        cmocka_unit_test(add_restores_the_last_removed),
        cmocka_unit_test(history_is_not_in_a_build),
        cmocka_unit_test(random_changes_keep_the_promises),
        cmocka_unit_test(sixty_five_thousand_members),
        cmocka_unit_test(what_memento_answers),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
