/* SPDX-License-Identifier: BSD-2-Clause */
/* The published-snapshot holder: its contract, and readers racing a writer that publishes
 * thousands of rings (run under ThreadSanitizer; the ASan build's LeakSanitizer checks that
 * every replaced ring is freed). */
#define _POSIX_C_SOURCE 200809L
#include "test_util.h"

#include <pthread.h>
#include <stdatomic.h>

static rl_ring_t *names_ring(const char *const *names, size_t n)
{
    return test_ring(NULL, 20, names, n);
}

static void contract(void **state)
{
    (void)state;
    const char *ab[] = {"a", "b"};
    rl_snapshot_t *h;
    const rl_ring_t *got;
    uint32_t node;
    assert_refused(rl_snapshot_create(NULL, NULL), RL_EINVAL, "out NULL", "");
    assert_rl_ok(rl_snapshot_create(NULL, &h));
    assert_no_detail();
    assert_int_equal(rl_snapshot_acquire(h, &got), RL_EEMPTY);
    assert_null(got);
    assert_int_equal(rl_snapshot_lookup(h, "k", 1, &node), RL_EEMPTY);
    assert_int_equal(rl_snapshot_lookup_hash(h, 5, &node), RL_EEMPTY);
    assert_int_equal(rl_snapshot_acquire(NULL, &got), RL_EINVAL);
    assert_int_equal(rl_snapshot_acquire(h, NULL), RL_EINVAL);
    assert_int_equal(rl_snapshot_lookup(NULL, "k", 1, &node), RL_EINVAL);
    assert_int_equal(rl_snapshot_lookup(h, "k", 1, NULL), RL_EINVAL);
    assert_int_equal(rl_snapshot_publish(h, NULL), RL_EINVAL);
    assert_int_equal(rl_snapshot_publish(NULL, NULL), RL_EINVAL);

    rl_ring_t *r = names_ring(ab, 2);
    assert_rl_ok(rl_snapshot_publish(h, r));
    assert_int_equal(rl_snapshot_publish(h, r), RL_EBUSY); /* already held */
    rl_snapshot_t *other;
    assert_refused(rl_snapshot_create(r, &other), RL_EBUSY, "ring: already in a holder", "");
    assert_null(other);

    assert_rl_ok(rl_snapshot_lookup(h, "k", 1, &node));
    assert_string_equal(rl_ring_node_name(r, node), test_owner(r, "k"));
    uint64_t kh;
    assert_rl_ok(rl_ring_hash_key(r, "k", 1, &kh));
    uint32_t by_hash;
    assert_rl_ok(rl_snapshot_lookup_hash(h, kh, &by_hash));
    assert_int_equal(by_hash, node);
    assert_rl_ok(rl_snapshot_acquire(h, &got));
    assert_ptr_equal(got, r);
    rl_snapshot_release(got);
    rl_snapshot_release(NULL);
    rl_snapshot_free(h);
    rl_snapshot_free(NULL);
}

/* A ring acquired before a publish stays whole and answers as before until released, even
 * after the holder itself is freed. */
static void held_ring_outlives_publish(void **state)
{
    (void)state;
    const char *abc[] = {"a", "b", "c"}, *xyz[] = {"x", "y", "z"};
    rl_snapshot_t *h;
    assert_rl_ok(rl_snapshot_create(names_ring(abc, 3), &h));
    const rl_ring_t *old;
    assert_rl_ok(rl_snapshot_acquire(h, &old));
    char want[100][2];
    for (int i = 0; i < 100; i++) {
        char key[32];
        snprintf(key, sizeof key, "key%d", i);
        want[i][0] = test_owner(old, key)[0];
    }
    assert_rl_ok(rl_snapshot_publish(h, names_ring(xyz, 3)));
    assert_rl_ok(rl_snapshot_publish(h, names_ring(abc, 2)));
    uint32_t node;
    assert_rl_ok(rl_snapshot_lookup(h, "key1", 4, &node));
    assert_true(node < 2);
    rl_snapshot_free(h);
    for (int i = 0; i < 100; i++) {
        char key[32];
        snprintf(key, sizeof key, "key%d", i);
        assert_int_equal(test_owner(old, key)[0], want[i][0]);
    }
    assert_int_equal(rl_ring_member_count(old), 3);
    rl_snapshot_release(old); /* the last reference: frees it */
}

/* --- readers against a writer --- */

#define VARIANTS 3
#define KEYS 512
#define READERS 3

typedef struct race {
    rl_snapshot_t *h;
    atomic_ulong gen; /* the last generation whose publish returned */
    atomic_int ready; /* readers that have started */
    atomic_int done;  /* the writer has finished */
    unsigned long publishes;
    uint64_t hash[KEYS];
    uint32_t want[VARIANTS][KEYS]; /* node index of each key in each variant */
    unsigned long checked[READERS], seen_change[READERS];
} race;

typedef struct reader_arg {
    race *rc;
    int me;
} reader_arg;

/* Variant v's members: a marker "v<v>" first, then members that differ per variant, so the
 * variants answer many keys differently. */
static rl_ring_t *variant_ring(int v)
{
    static const char *const sets[VARIANTS][6] = {
        {"v0", "a", "b", "c", "d", "e"},
        {"v1", "a", "c", "e", "f", "g"},
        {"v2", "b", "d", "f", "h", "i"},
    };
    return test_ring(NULL, 16, sets[v], 4 + (size_t)v);
}

static int variant_of(const rl_ring_t *r)
{
    return rl_ring_node_name(r, 0)[1] - '0';
}

/* Generation g publishes variant g % VARIANTS. An answer read between generations g0 and g1
 * comes from a ring published at generation g0 .. g1 + 1 (g1 + 1 may be swapped in but not
 * yet counted). */
static int answer_allowed(const race *rc, unsigned long g0, unsigned long g1, int key,
                          uint32_t node)
{
    for (unsigned long g = g0; g <= g1 + 1 && g <= rc->publishes && g < g0 + VARIANTS; g++)
        if (rc->want[g % VARIANTS][key] == node)
            return 1;
    return 0;
}

static void *reader(void *arg)
{
    race *rc = ((reader_arg *)arg)->rc;
    int me = ((reader_arg *)arg)->me;
    uint64_t seed = (uint64_t)me + 1;
    unsigned long last_gen = 0;
    atomic_fetch_add(&rc->ready, 1);
    while (!atomic_load(&rc->done) || rc->checked[me] == 0) {
        int key = (int)(test_rand(&seed) % KEYS);
        unsigned long g0 = atomic_load(&rc->gen);
        if (test_rand(&seed) & 1) { /* one lookup without a reference */
            uint32_t node;
            int e = rl_snapshot_lookup_hash(rc->h, rc->hash[key], &node);
            unsigned long g1 = atomic_load(&rc->gen);
            if (e != 0 || !answer_allowed(rc, g0, g1, key, node))
                return "lookup answered from neither the old nor the new ring";
        } else { /* hold a ring for a batch, checking it does not change under us */
            const rl_ring_t *r;
            if (rl_snapshot_acquire(rc->h, &r) != 0)
                return "acquire failed";
            unsigned long g1 = atomic_load(&rc->gen);
            int v = variant_of(r);
            int in_window = 0;
            for (unsigned long g = g0; g <= g1 + 1 && g < g0 + VARIANTS; g++)
                in_window |= (int)(g % VARIANTS) == v;
            if (!in_window)
                return "acquired a ring from neither the old nor the new generation";
            for (int k = 0; k < 16; k++) {
                int kk = (key + k * 31) % KEYS;
                uint32_t node;
                if (rl_ring_lookup_hash(r, rc->hash[kk], &node) != 0 || node != rc->want[v][kk])
                    return "a held ring changed its answer";
            }
            rl_snapshot_release(r);
        }
        rc->checked[me]++;
        if (g0 != last_gen)
            rc->seen_change[me]++;
        last_gen = g0;
    }
    return NULL;
}

static void run_race(unsigned long publishes)
{
    race *rc = calloc(1, sizeof *rc);
    assert_non_null(rc);
    rc->publishes = publishes;
    for (int v = 0; v < VARIANTS; v++) {
        rl_ring_t *r = variant_ring(v);
        for (int k = 0; k < KEYS; k++) {
            char key[32];
            int len = snprintf(key, sizeof key, "user:%d", k);
            assert_rl_ok(rl_ring_hash_key(r, key, (size_t)len, &rc->hash[k]));
            assert_rl_ok(rl_ring_lookup_hash(r, rc->hash[k], &rc->want[v][k]));
        }
        rl_ring_free(r);
    }
    int differ = 0;
    for (int k = 0; k < KEYS; k++)
        differ += rc->want[0][k] != rc->want[1][k] && rc->want[1][k] != rc->want[2][k];
    assert_true(differ > KEYS / 4); /* the check below can tell the variants apart */

    assert_rl_ok(rl_snapshot_create(variant_ring(0), &rc->h));
    pthread_t t[READERS];
    reader_arg args[READERS];
    for (int i = 0; i < READERS; i++) {
        args[i] = (reader_arg){rc, i};
        assert_int_equal(pthread_create(&t[i], NULL, reader, &args[i]), 0);
    }
    while (atomic_load(&rc->ready) < READERS)
        ;
    for (unsigned long g = 1; g <= publishes; g++) {
        assert_rl_ok(rl_snapshot_publish(rc->h, variant_ring((int)(g % VARIANTS))));
        atomic_store(&rc->gen, g);
    }
    atomic_store(&rc->done, 1);
    unsigned long checked = 0, changes = 0;
    for (int i = 0; i < READERS; i++) {
        void *err;
        assert_int_equal(pthread_join(t[i], &err), 0);
        if (err)
            fail_msg("reader %d: %s", i, (const char *)err);
        checked += rc->checked[i];
        changes += rc->seen_change[i];
    }
    print_message("%lu publishes, %lu reads checked, %lu across a publish\n", publishes, checked,
                  changes);
    rl_snapshot_free(rc->h);
    free(rc);
}

/* CI: a few thousand publishes (RINGLANE_STRESS_PUBLISHES overrides: the stress label runs
 * many more). */
static void readers_race_writer(void **state)
{
    (void)state;
    const char *env = getenv("RINGLANE_STRESS_PUBLISHES");
    unsigned long publishes = env ? strtoul(env, NULL, 10) : 3000;
    run_race(publishes ? publishes : 3000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(contract),
        cmocka_unit_test(held_ring_outlives_publish),
        cmocka_unit_test(readers_race_writer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
