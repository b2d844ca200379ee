/* SPDX-License-Identifier: BSD-2-Clause */
/* What a membership change costs under every profile, through the public API as the dispatcher
 * makes its changes (rl_ring_add, rl_ring_remove): for N = 4, 8 and 32 members "lane-<i>" of
 * weight 1 (32: a partition count; 4 and 8: small lane sets), the keys that move when a member
 * is added and when the first, the middle (lane-<N/2>) or the last member is removed, of which
 * those that move between members present before and after ("between survivors"), and the
 * balance of the ring before the change (max/mean: of the arcs or table entries where the
 * profile has them, and of the keys). Keys: 100,000 fixed strings "<4 hex digits>-key-<i>",
 * which every profile can hash (turnstone reads the hex digits).
 *
 * It asserts what each profile promises (see docs/ring.md):
 *  - default, ds09, turnstone, xmur3, groupcache, memento: a remove moves only the removed
 *    member's keys and an add moves keys only to the new member, at every position (ketama
 *    too at these sizes); envoy and maglev move some keys between survivors on every remove;
 *  - jump and balanced: an add moves keys only to the new member, removing the last member
 *    moves only its keys; removing member j of N shifts, exactly: in balanced every key of the
 *    member at position i (j <= i < N - 1) moves to the member at i + 1 and the keys of the
 *    members before j stay, so (N - j)/N - 1/(N(N - 1)) of the keys move at N <= 65;
 *  - balance: balanced's arcs within 1 + 1/vnodes (exactly 1/N each up to N = 65); jump and
 *    memento's keys within 6 binomial sd of 1/N each.
 * With RINGLANE_MOVES_TABLE set it prints the tables of docs/ring.md (Markdown rows):
 *     RINGLANE_MOVES_TABLE=1 build/tests/test_profile_moves | grep '^|'
 */
#include "test_util.h"

#include <math.h>

#define KEYS 100000
#define MAX_N 33

static char keys[KEYS][24];
static size_t key_len[KEYS];
static char lane[MAX_N][16];
static const char *before[KEYS], *after[KEYS];

static int setup(void **state)
{
    (void)state;
    for (int k = 0; k < KEYS; k++)
        key_len[k] = (size_t)snprintf(keys[k], sizeof keys[k], "%04x-key-%d",
                                      (unsigned)((uint32_t)k * 40503u % 65536u), k);
    for (int i = 0; i < MAX_N; i++)
        snprintf(lane[i], sizeof lane[i], "lane-%d", i);
    return 0;
}

static void owners(const rl_ring_t *r, const char **owner)
{
    for (int k = 0; k < KEYS; k++) {
        uint32_t node;
        assert_rl_ok(rl_ring_lookup(r, keys[k], key_len[k], &node));
        owner[k] = rl_ring_node_name(r, node);
    }
}

/* The cost of one change: fractions of the keys. */
typedef struct cost {
    double moved, between; /* between: from a member that stays to another that was there */
} cost;

typedef struct row {
    double arcs;  /* max/mean share of arcs or table entries; < 0 where the profile has none */
    double keyed; /* max/mean of the keys per member */
    cost add, first, middle, last;
} row;

/* Keys that change owner from a to b; `gone` is the removed member, `new_member` the added one
 * (NULL when none). */
static cost measure(const rl_ring_t *a, const rl_ring_t *b, const char *gone,
                    const char *new_member)
{
    owners(a, before);
    owners(b, after);
    size_t moved = 0, between = 0;
    for (int k = 0; k < KEYS; k++) {
        if (strcmp(before[k], after[k]) == 0)
            continue;
        moved++;
        between += (!gone || strcmp(before[k], gone) != 0) &&
                   (!new_member || strcmp(after[k], new_member) != 0);
    }
    return (cost){(double)moved / KEYS, (double)between / KEYS};
}

static double keys_max_mean(const rl_ring_t *r, size_t n)
{
    size_t count[MAX_N] = {0}, max = 0;
    for (int k = 0; k < KEYS; k++) {
        uint32_t node;
        assert_rl_ok(rl_ring_lookup(r, keys[k], key_len[k], &node));
        count[node]++;
    }
    for (size_t i = 0; i < n; i++)
        max = count[i] > max ? count[i] : max;
    return (double)max * (double)n / KEYS;
}

/* balanced, removing position j of n: every key of position i (j <= i < n - 1) moves to i + 1,
 * the keys of positions before j stay. Checked key by key (positions in the old ring). */
static void balanced_shifts(const rl_ring_t *a, const rl_ring_t *b, size_t j, size_t n)
{
    for (int k = 0; k < KEYS; k++) {
        uint32_t i, now, was;
        assert_rl_ok(rl_ring_lookup(a, keys[k], key_len[k], &i));
        assert_rl_ok(rl_ring_lookup(b, keys[k], key_len[k], &now));
        assert_rl_ok(rl_ring_find(a, rl_ring_node_name(b, now), &was));
        if (i < j && was != i)
            fail_msg("balanced, %zu of %zu removed: key %s left position %u", j, n, keys[k], i);
        if (i >= j && i + 1 < n && was != i + 1)
            fail_msg("balanced, %zu of %zu removed: key %s went %u -> %u, not to %u", j, n, keys[k],
                     i, was, i + 1);
    }
}

static int one_of(const char *name, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(name, *list) == 0)
            return 1;
    return 0;
}

/* Profiles whose every add and remove moves only the changed member's keys. */
static const char *const only_own[] = {"default",    "ds09",    "turnstone", "xmur3",
                                       "groupcache", "memento", NULL};
/* Profiles that number their members: only growth and removing the last are that cheap. */
static const char *const numbered[] = {"jump", "balanced", NULL};

/* 6 binomial standard deviations of a fraction p of the keys. */
static double six_sd(double p)
{
    return 6 * sqrt(p * (1 - p) / KEYS);
}

static void check_promises(const char *profile, size_t n, const row *w)
{
    const cost *removes[] = {&w->first, &w->middle, &w->last};
    if (one_of(profile, only_own) || one_of(profile, numbered)) {
        if (w->add.between != 0)
            fail_msg("%s, %zu -> %zu: %.4f of the keys moved between survivors", profile, n, n + 1,
                     w->add.between);
        if (w->last.between != 0)
            fail_msg("%s, %zu: removing the last moved %.4f between survivors", profile, n,
                     w->last.between);
    }
    /* The dispatcher trusts rl_profile_info.local_remove (its remove_lane looks at the removed
     * lane alone) and local_add (its add_lane makes room at the new lane without counting):
     * each must be set for exactly the profiles that promise it. */
    if (rl_profile_find(profile)->local_remove != one_of(profile, only_own))
        fail_msg("%s: local_remove is %d", profile, rl_profile_find(profile)->local_remove);
    if (rl_profile_find(profile)->local_add !=
        (one_of(profile, only_own) || one_of(profile, numbered)))
        fail_msg("%s: local_add is %d", profile, rl_profile_find(profile)->local_add);
    /* ketama too, at these sizes: its points per server change only at 25, 47, 50, 55, 61,
     * 71, 94 and 100 servers (docs/ring.md), none of which is N or N + 1 here. */
    if (one_of(profile, only_own) || strcmp(profile, "ketama") == 0)
        for (int i = 0; i < 3; i++)
            if (removes[i]->between != 0)
                fail_msg("%s, %zu: a remove moved %.4f between survivors", profile, n,
                         removes[i]->between);
    /* envoy rescales its ring to the lightest host and maglev refills its table: both move
     * some keys between members that stay, on every remove. */
    if (strcmp(profile, "envoy") == 0 || strcmp(profile, "maglev") == 0)
        for (int i = 0; i < 3; i++)
            if (removes[i]->between == 0)
                fail_msg("%s, %zu: a remove moved nothing between survivors", profile, n);
    if (strcmp(profile, "balanced") == 0) {
        const size_t at[] = {0, n / 2};
        for (int i = 0; i < 2; i++) {
            double want = (double)(n - at[i]) / (double)n - 1.0 / ((double)n * (double)(n - 1));
            if (fabs(removes[i]->moved - want) > six_sd(want))
                fail_msg("balanced, %zu of %zu removed: %.4f moved, want %.4f", at[i], n,
                         removes[i]->moved, want);
        }
        assert_true(w->arcs >= 1.0 && w->arcs < 1.0001); /* 1/n each, to the last unit */
    }
    if (strcmp(profile, "memento") == 0 || strcmp(profile, "jump") == 0) {
        if (w->keyed > 1 + 6 * sqrt((double)n / KEYS))
            fail_msg("%s, %zu: keys max/mean %.4f", profile, n, w->keyed);
        double share = 1.0 / (double)n;
        if (fabs(w->add.moved - 1.0 / (double)(n + 1)) > six_sd(1.0 / (double)(n + 1)))
            fail_msg("%s, %zu: an add moved %.4f", profile, n, w->add.moved);
        for (int i = 0; i < 3; i++)
            if (strcmp(profile, "memento") == 0 && fabs(removes[i]->moved - share) > six_sd(share))
                fail_msg("memento, %zu: a remove moved %.4f", n, removes[i]->moved);
    }
}

static row measure_profile(const char *profile, size_t n)
{
    rl_member m[MAX_N];
    for (size_t i = 0; i < n; i++)
        m[i] = (rl_member){lane[i], 1, NULL};
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = profile;
    rl_ring_t *r, *c;
    assert_rl_ok(rl_ring_build(m, n, &o, &r));
    row w;
    rl_ring_stats st;
    int rc = rl_ring_stats_get(r, &st, NULL);
    assert_true(rc == 0 || rc == RL_ENOTSUP);
    w.arcs = rc == 0 ? st.max_mean_share : -1;
    w.keyed = keys_max_mean(r, n);

    assert_rl_ok(rl_ring_add(r, &(rl_member){lane[n], 1, NULL}, &c));
    w.add = measure(r, c, NULL, lane[n]);
    rl_ring_free(c);
    const size_t at[] = {0, n / 2, n - 1};
    cost *out[] = {&w.first, &w.middle, &w.last};
    for (int i = 0; i < 3; i++) {
        assert_rl_ok(rl_ring_remove(r, lane[at[i]], &c));
        *out[i] = measure(r, c, lane[at[i]], NULL);
        if (strcmp(profile, "balanced") == 0)
            balanced_shifts(r, c, at[i], n);
        rl_ring_free(c);
    }
    rl_ring_free(r);
    return w;
}

static void print_pct(double v)
{
    if (v == 0)
        printf(" 0 |");
    else
        printf(" %.2f%% |", 100 * v);
}

static void print_table(size_t n, const row *rows)
{
    printf("\n| %zu members | arcs max/mean | keys max/mean | add: moved | between survivors "
           "| remove first: moved | between | remove middle: moved | between | remove last: "
           "moved | between |\n",
           n);
    printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    printf("| ideal | 1.000 | 1.000 |");
    print_pct(1.0 / (double)(n + 1));
    printf(" 0 |");
    for (int i = 0; i < 3; i++) {
        print_pct(1.0 / (double)n);
        printf(" 0 |");
    }
    printf("\n");
    for (size_t p = 0; p < rl_profile_count(); p++) {
        const row *w = &rows[p];
        printf("| `%s` |", rl_profile_at(p)->name);
        if (w->arcs < 0)
            printf(" - |");
        else
            printf(" %.3f |", w->arcs);
        printf(" %.3f |", w->keyed);
        const cost *c[] = {&w->add, &w->first, &w->middle, &w->last};
        for (int i = 0; i < 4; i++) {
            print_pct(c[i]->moved);
            print_pct(c[i]->between);
        }
        printf("\n");
    }
}

static void every_profile(void **state)
{
    (void)state;
    const size_t sizes[] = {4, 8, 32};
    int table = getenv("RINGLANE_MOVES_TABLE") != NULL;
    if (table)
        printf("\n%d keys; rings of lane-0 .. lane-<N-1>, weight 1, each profile's default "
               "vnodes; added: lane-<N>; middle: lane-<N/2>\n",
               KEYS);
    for (size_t s = 0; s < 3; s++) {
        row *rows = calloc(rl_profile_count(), sizeof *rows);
        assert_non_null(rows);
        for (size_t p = 0; p < rl_profile_count(); p++) {
            const char *profile = rl_profile_at(p)->name;
            rows[p] = measure_profile(profile, sizes[s]);
            check_promises(profile, sizes[s], &rows[p]);
        }
        if (table)
            print_table(sizes[s], rows);
        free(rows);
    }
    /* The profiles the promises name are all there (memento is new with this suite). */
    for (const char *const *p = only_own; *p; p++)
        assert_non_null(rl_profile_find(*p));
    for (const char *const *p = numbered; *p; p++)
        assert_non_null(rl_profile_find(*p));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_profile),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
