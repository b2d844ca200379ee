/* SPDX-License-Identifier: BSD-2-Clause */
/* The version macros and their run-time twins: RL_VERSION_NUM encodes MAJOR.MINOR.PATCH,
 * RL_VERSION_AT_LEAST compares in #if and in code, and the library reports what the headers
 * say (they come from one build here). */
#include "test_util.h"

/* The compile-time check works in the preprocessor, both ways. */
#if !RL_VERSION_AT_LEAST(RL_VERSION_MAJOR, RL_VERSION_MINOR, RL_VERSION_PATCH)
#error "RL_VERSION_AT_LEAST refuses the headers' own version"
#endif
#if RL_VERSION_AT_LEAST(RL_VERSION_MAJOR, RL_VERSION_MINOR, RL_VERSION_PATCH + 1)
#error "RL_VERSION_AT_LEAST accepts a later patch"
#endif
#if !RL_VERSION_AT_LEAST(0, 1, 0)
#error "RL_VERSION_AT_LEAST refuses 0.1.0, the first release"
#endif

static void the_number_encodes_the_three_parts(void **state)
{
    (void)state;
    assert_int_equal(RL_VERSION_ENCODE(1, 2, 3), 10203);
    assert_int_equal(RL_VERSION_ENCODE(0, 1, 0), 100);
    assert_true(RL_VERSION_ENCODE(0, 99, 99) < RL_VERSION_ENCODE(1, 0, 0));
    assert_int_equal(RL_VERSION_NUM,
                     RL_VERSION_MAJOR * 10000 + RL_VERSION_MINOR * 100 + RL_VERSION_PATCH);
    /* The encoding holds while MINOR and PATCH stay below 100. */
    assert_true(RL_VERSION_MINOR < 100 && RL_VERSION_PATCH < 100);
}

static void the_string_says_the_same_version(void **state)
{
    (void)state;
    int major = -1, minor = -1, patch = -1, end = 0;
    assert_int_equal(sscanf(RL_VERSION_STRING, "%d.%d.%d%n", &major, &minor, &patch, &end), 3);
    assert_int_equal((size_t)end, strlen(RL_VERSION_STRING));
    assert_int_equal(major, RL_VERSION_MAJOR);
    assert_int_equal(minor, RL_VERSION_MINOR);
    assert_int_equal(patch, RL_VERSION_PATCH);
}

static void at_least_compares_every_part(void **state)
{
    (void)state;
    assert_true(RL_VERSION_AT_LEAST(RL_VERSION_MAJOR, RL_VERSION_MINOR, RL_VERSION_PATCH));
    assert_true(RL_VERSION_AT_LEAST(0, 0, 0));
    assert_false(RL_VERSION_AT_LEAST(RL_VERSION_MAJOR, RL_VERSION_MINOR, RL_VERSION_PATCH + 1));
    assert_false(RL_VERSION_AT_LEAST(RL_VERSION_MAJOR, RL_VERSION_MINOR + 1, 0));
    assert_false(RL_VERSION_AT_LEAST(RL_VERSION_MAJOR + 1, 0, 0));
    if (RL_VERSION_MINOR > 0)
        assert_true(RL_VERSION_AT_LEAST(RL_VERSION_MAJOR, RL_VERSION_MINOR - 1, 99));
}

static void the_library_reports_its_version(void **state)
{
    (void)state;
    assert_int_equal(rl_version_num(), RL_VERSION_NUM);
    assert_string_equal(rl_version_string(), RL_VERSION_STRING);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_number_encodes_the_three_parts),
        cmocka_unit_test(the_string_says_the_same_version),
        cmocka_unit_test(at_least_compares_every_part),
        cmocka_unit_test(the_library_reports_its_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
