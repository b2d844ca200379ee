/* SPDX-License-Identifier: BSD-2-Clause */
/* Fuzz target: ring builds from arbitrary members, weights, zones, profiles and vnodes, then
 * lookups, replicas, zoned replicas, bounded placement with arbitrary loads, stats, add and
 * remove, and for a profile with a history (memento) a script of changes whose moves are
 * checked. Every result is checked against the API's promises; a broken promise aborts. */
#include "fuzz_input.h"
#include "ringlane/ringlane.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_MEMBERS 16

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_ring: broken promise: %s\n", what);
        abort();
    }
}

static void check_code(int rc)
{
    check(rc <= 0, "error codes are negative");
    check(rc == 0 || strcmp(rl_err_name(rc), "RL_UNKNOWN") != 0, "error codes are known");
}

/* Members that own at least one point: only they can be replicas (a ketama server whose
 * share rounds down to no labels has none, exactly as in libmemcached). */
static size_t members_with_points(const rl_ring_t *r, size_t n)
{
    int has[MAX_MEMBERS + 1] = {0};
    size_t count = 0;
    uint32_t owner;
    for (size_t i = 0; rl_ring_point(r, i, NULL, &owner) == 0; i++) {
        check(owner < n, "a point belongs to a member");
        count += !has[owner];
        has[owner] = 1;
    }
    return count;
}

/* Keys: the rest of the input cut into pieces of 0..15 bytes (the byte before each piece gives
 * its length). Returns the piece at `at` and sets *next past it; NULL when none is left. */
static const void *next_key(const uint8_t *keys, size_t key_len, size_t at, size_t *len,
                            size_t *next)
{
    if (at > key_len)
        return NULL;
    *len = keys && at < key_len ? keys[at] % 16 : 0;
    if (at + *len > key_len)
        *len = key_len - at;
    *next = at + *len + 1;
    return keys ? (const void *)(keys + at) : (const void *)"";
}

/* The owners' names of every key piece in r (NULL where the lookup fails). */
static size_t owners(const rl_ring_t *r, const uint8_t *keys, size_t key_len, const char **out,
                     size_t cap)
{
    size_t count = 0, len, at = 0;
    for (const void *key; count < cap && (key = next_key(keys, key_len, at, &len, &at));) {
        uint32_t node;
        out[count++] = rl_ring_lookup(r, key, len, &node) == 0 ? rl_ring_node_name(r, node) : NULL;
    }
    return count;
}

#define MAX_KEYS 4096

/* A profile with a history (memento): a script of up to 8 changes read from the key bytes (even:
 * remove the member it names, odd: add a new one), each checked against the promise that a
 * remove moves only the removed member's keys and an add moves keys only to the new member. */
static void changes_move_only_their_keys(const rl_ring_t *r, const uint8_t *keys, size_t key_len)
{
    static const char *was[MAX_KEYS], *now[MAX_KEYS];
    rl_ring_t *cur = NULL;
    for (size_t step = 0; step < 8 && step < key_len; step++) {
        const rl_ring_t *from = cur ? cur : r;
        size_t n = rl_ring_member_count(from);
        int add = (keys[step] & 1) || n == 0;
        char name[16];
        snprintf(name, sizeof name, "+%zu", step);
        const char *changed = add ? name : rl_ring_node_name(from, keys[step] / 2 % n);
        rl_ring_t *next = NULL;
        int rc = add ? rl_ring_add(from, &(rl_member){.name = name, .weight = 1}, &next)
                     : rl_ring_remove(from, changed, &next);
        check_code(rc);
        if (rc != 0)
            break;
        size_t count = owners(from, keys, key_len, was, MAX_KEYS);
        owners(next, keys, key_len, now, MAX_KEYS);
        for (size_t k = 0; k < count; k++) {
            if (!was[k] || !now[k] || strcmp(was[k], now[k]) == 0)
                continue;
            check(strcmp(add ? now[k] : was[k], changed) == 0,
                  add ? "an add moves keys only to the new member"
                      : "a remove moves only the removed member's keys");
        }
        rl_ring_free(cur);
        cur = next;
    }
    rl_ring_free(cur);
}

static void exercise(const rl_ring_t *r, fuzz_input *in, size_t n, const uint8_t **keys_out,
                     size_t *key_len_out)
{
    uint64_t loads[MAX_MEMBERS + 1];
    uint32_t nodes[MAX_MEMBERS + 1];
    size_t reachable = members_with_points(r, n);
    for (size_t i = 0; i < n; i++)
        loads[i] = fuzz_byte(in) < 200 ? fuzz_byte(in) : fuzz_u64(in);
    double c = (double)fuzz_byte(in) / 50.0; /* 0 .. 5.1: below 1 acts as 1 */
    size_t key_len;
    const uint8_t *keys = fuzz_rest(in, &key_len);
    *keys_out = keys;
    *key_len_out = key_len;
    size_t len, at = 0;
    for (const void *key; (key = next_key(keys, key_len, at, &len, &at));) {
        uint32_t node;
        int rc = rl_ring_lookup(r, key, len, &node);
        check_code(rc);
        if (rc == 0)
            check(node < n, "lookup returns a member");
        else
            check(rc == RL_EEMPTY || rc == RL_EBADKEY, "lookup fails only for empty or bad key");

        size_t want = (len * 7) % (n + 2), got = 99;
        rc = rl_ring_replicas(r, key, len, nodes, want, &got);
        check_code(rc);
        if (rc == 0) {
            check(got == (want < reachable ? want : reachable),
                  "replicas: min(want, members that own points)");
            for (size_t i = 0; i < got; i++) {
                check(nodes[i] < n, "replica is a member");
                for (size_t j = 0; j < i; j++)
                    check(nodes[i] != nodes[j], "replicas are distinct");
            }
            uint32_t owner;
            if (got > 0 && rl_ring_lookup(r, key, len, &owner) == 0)
                check(nodes[0] == owner, "the first replica is the owner");
        }
        rc = rl_ring_replicas_zoned(r, key, len, nodes, want, &got);
        check_code(rc);
        if (rc == 0)
            for (size_t i = 0; i < got; i++)
                for (size_t j = 0; j < i; j++)
                    check(nodes[i] != nodes[j], "zoned replicas are distinct");

        rc = rl_ring_lookup_bounded(r, key, len, loads, c, &node);
        check_code(rc);
        if (rc == 0) {
            uint64_t placed = 0;
            for (size_t i = 0; i < n; i++)
                placed += loads[i];
            check(node < n, "bounded returns a member");
            check(loads[node] < rl_capacity(placed, n, c), "bounded stays below capacity");
        }
    }

    rl_ring_stats st;
    double shares[MAX_MEMBERS + 1];
    int rc = rl_ring_stats_get(r, &st, shares);
    check_code(rc);
    if (rc == 0 && st.points > 0) {
        double sum = 0;
        for (size_t i = 0; i < n; i++) {
            check(shares[i] >= 0 && shares[i] <= 1.0000001, "a share is a fraction");
            sum += shares[i];
        }
        check(fabs(sum - 1.0) < 1e-6, "shares sum to 1");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size, 0};
    const rl_profile_info *p = rl_profile_at(fuzz_byte(&in) % (rl_profile_count() + 1));
    rl_ring_options opts;
    rl_ring_options_init(&opts);
    opts.profile = p ? p->name : "no-such-profile";
    uint8_t v = fuzz_byte(&in);
    /* Small rings keep executions fast; 0 must be refused; 255 asks for the profile's own. */
    opts.vnodes = v == 255 ? RL_VNODES_PROFILE : v % 64;

    static char names[MAX_MEMBERS][300], zones[MAX_MEMBERS][300];
    rl_member m[MAX_MEMBERS];
    size_t n = fuzz_byte(&in) % (MAX_MEMBERS + 1);
    for (size_t i = 0; i < n; i++) {
        fuzz_string(&in, names[i], 299);
        uint8_t w = fuzz_byte(&in);
        m[i] = (rl_member){.name = names[i], .weight = w % 16 == 0 ? w / 16 : 1 + w % 3};
        if (fuzz_byte(&in) & 1) {
            fuzz_string(&in, zones[i], 299);
            m[i].zone = zones[i];
        }
    }
    rl_ring_t *r = (rl_ring_t *)&in;
    int rc = rl_ring_build(m, n, &opts, &r);
    check_code(rc);
    if (rc != 0) {
        check(r == NULL, "a failed build leaves *out NULL");
        return 0;
    }
    check(rl_ring_member_count(r) == n, "every member is in the ring");
    for (size_t i = 0; i < n; i++) {
        uint32_t node;
        check(rl_ring_find(r, names[i], &node) == 0 && node == i, "members keep their index");
    }

    char extra[300];
    fuzz_string(&in, extra, 299);
    rl_ring_t *added = NULL, *removed = NULL;
    rc = rl_ring_add(r, &(rl_member){.name = extra, .weight = 1}, &added);
    check_code(rc);
    if (rc == 0) {
        uint32_t node;
        size_t want = rl_ring_find(r, extra, &node) == 0 ? n : n + 1;
        check(rl_ring_member_count(added) == want, "add appends a new name only");
        rc = rl_ring_remove(added, extra, &removed);
        check_code(rc);
        if (rc == 0)
            check(rl_ring_member_count(removed) == want - 1, "remove drops the name");
    }
    const uint8_t *keys;
    size_t key_len;
    exercise(r, &in, n, &keys, &key_len);
    if (p && p->history)
        changes_move_only_their_keys(r, keys, key_len);
    rl_ring_free(removed);
    rl_ring_free(added);
    rl_ring_free(r);
    return 0;
}
