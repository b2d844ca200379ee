/* Shared by the cmocka suites: cmocka's includes and small helpers. */
#ifndef RINGLANE_TEST_UTIL_H
#define RINGLANE_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ringlane/ringlane.h"

/* Asserts that an expression returns 0, printing the ringlane error otherwise. */
#define assert_rl_ok(expr)                                                                         \
    do {                                                                                           \
        int rl__rc = (expr);                                                                       \
        if (rl__rc != 0)                                                                           \
            fail_msg("%s returned %s (%s)", #expr, rl_err_name(rl__rc), rl_strerror(rl__rc));      \
    } while (0)

/* A ring from names (weight 1 each) with a profile and vnodes; fails the test on error. */
static inline rl_ring_t *test_ring(const char *profile, uint32_t vnodes, const char *const *names,
                                   size_t n)
{
    rl_member *m = calloc(n ? n : 1, sizeof *m);
    assert_non_null(m);
    for (size_t i = 0; i < n; i++)
        m[i] = (rl_member){.name = names[i], .weight = 1};
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = profile;
    o.vnodes = vnodes;
    rl_ring_t *r = NULL;
    assert_rl_ok(rl_ring_build(m, n, &o, &r));
    free(m);
    return r;
}

/* The owner's name of a NUL-terminated key. */
static inline const char *test_owner(const rl_ring_t *r, const char *key)
{
    uint32_t node;
    assert_rl_ok(rl_ring_lookup(r, key, strlen(key), &node));
    return rl_ring_node_name(r, node);
}

/* Deterministic pseudo-random numbers for statistical tests (SplitMix64 stream). */
static inline uint64_t test_rand(uint64_t *state)
{
    *state += 0x9E3779B97F4A7C15ull;
    return rl_mix64(*state);
}

#endif
