/* SPDX-License-Identifier: BSD-2-Clause */
/* rl_last_error_detail: set, cut, cleared, and kept per thread. */
#include <pthread.h>
#include <string.h>

#include "test_util.h"

static void set_returns_the_code_and_keeps_the_text(void **state)
{
    (void)state;
    rl_error_detail_clear();
    assert_string_equal(rl_last_error_detail(), "");
    assert_int_equal(rl_error_detail_set(RL_EINVAL, "lane_capacity %u: %s", 0u, "too small"),
                     RL_EINVAL);
    assert_string_equal(rl_last_error_detail(), "lane_capacity 0: too small");
    rl_error_detail_clear();
    assert_string_equal(rl_last_error_detail(), "");
}

static void a_long_detail_is_cut_and_terminated(void **state)
{
    (void)state;
    char big[3 * RL_ERROR_DETAIL_MAX];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(rl_error_detail_set(RL_ENAME, "name %s", big), RL_ENAME);
    const char *d = rl_last_error_detail();
    assert_int_equal(strlen(d), RL_ERROR_DETAIL_MAX - 1);
    assert_memory_equal(d, "name xxx", 8);
}

static void *set_on_another_thread(void *arg)
{
    (void)arg;
    /* A fresh thread starts with no detail, and what it sets stays its own. */
    if (rl_last_error_detail()[0] != '\0')
        return (void *)"a new thread saw a detail";
    rl_error_detail_set(RL_EPROFILE, "profile nope: unknown");
    return strcmp(rl_last_error_detail(), "profile nope: unknown") ? (void *)"lost" : NULL;
}

static void each_thread_has_its_own(void **state)
{
    (void)state;
    rl_error_detail_set(RL_EINVAL, "mine");
    pthread_t t;
    void *result = (void *)"not run";
    assert_int_equal(pthread_create(&t, NULL, set_on_another_thread, NULL), 0);
    assert_int_equal(pthread_join(t, &result), 0);
    assert_null(result);
    assert_string_equal(rl_last_error_detail(), "mine");
}

static void ring_build_clears_it(void **state)
{
    (void)state;
    rl_error_detail_set(RL_EINVAL, "stale");
    rl_member m = {"a", 1, NULL};
    rl_ring_t *ring = NULL;
    assert_int_equal(rl_ring_build(&m, 1, NULL, &ring), 0);
    assert_string_equal(rl_last_error_detail(), "");
    rl_ring_free(ring);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(set_returns_the_code_and_keeps_the_text),
        cmocka_unit_test(a_long_detail_is_cut_and_terminated),
        cmocka_unit_test(each_thread_has_its_own),
        cmocka_unit_test(ring_build_clears_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
