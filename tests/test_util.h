/* SPDX-License-Identifier: BSD-2-Clause */
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

/* Asserts that expr returns `code` and leaves rl_last_error_detail() starting with `start`
 * (the option or argument as written in C, and the value) and containing `why` (a word of the
 * reason; "" for none). */
#define assert_refused(expr, code, start, why)                                                     \
    do {                                                                                           \
        int rl__rc = (expr);                                                                       \
        const char *rl__d = rl_last_error_detail();                                                \
        if (rl__rc != (code))                                                                      \
            fail_msg("%s returned %s, want %s (detail \"%s\")", #expr, rl_err_name(rl__rc),        \
                     rl_err_name(code), rl__d);                                                    \
        if (strncmp(rl__d, (start), strlen(start)) != 0 || !strstr(rl__d, (why)))                  \
            fail_msg("%s: detail \"%s\", want \"%s...%s...\"", #expr, rl__d, (start), (why));      \
    } while (0)

/* Asserts that the last call that says why succeeded: no detail left. */
#define assert_no_detail()                                                                         \
    do {                                                                                           \
        if (rl_last_error_detail()[0])                                                             \
            fail_msg("a detail after success: \"%s\"", rl_last_error_detail());                    \
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

/* A "Name:   123 kB" line of /proc/self/status, in KiB; -1 when missing. */
static inline long test_status_kib(const char *name)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long v = -1;
    size_t n = strlen(name);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, name, n) == 0 && line[n] == ':')
            v = strtol(line + n + 1, NULL, 10);
    fclose(f);
    return v;
}

/* How much the process's peak resident memory grew (KiB) while fn(arg) ran: the kernel's peak
 * (VmHWM) is reset to the current size by writing 5 to /proc/self/clear_refs, and read after.
 * Memory that was allocated and written counts even if it was freed before fn returned. -1 when
 * the kernel offers neither. Unlike a lowered RLIMIT_AS it works under ASan, which reserves
 * terabytes of address space, and under valgrind; and it needs no clock. */
static inline long test_peak_growth_kib(void (*fn)(void *), void *arg)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return -1;
    int ok = fputs("5", f) >= 0;
    ok = fclose(f) == 0 && ok;
    long before = test_status_kib("VmHWM"), rss = test_status_kib("VmRSS");
    if (!ok || before < 0 || rss < 0 || before > rss + 1024)
        return -1; /* not reset: the peak is still an older one */
    fn(arg);
    long after = test_status_kib("VmHWM");
    return after < 0 ? -1 : after - before;
}

/* Asserts that fn(arg) raised the peak resident memory by less than limit_mib MiB (skipped, with
 * a message, where the kernel cannot reset the peak). */
static inline void assert_cheap(const char *what, void (*fn)(void *), void *arg, long limit_mib)
{
    long kib = test_peak_growth_kib(fn, arg);
    if (kib < 0) {
        print_message("%s: the peak resident memory cannot be reset here; memory not checked\n",
                      what);
        fn(arg);
        return;
    }
    if (kib >= limit_mib * 1024)
        fail_msg("%s: the peak resident memory grew by %ld MiB (limit %ld MiB)", what, kib / 1024,
                 limit_mib);
}

/* Asserts the shape of a Prometheus text: it ends with a line feed, every family has one
 * "# HELP" line then its "# TYPE" line, and every other line is a sample of the family declared
 * last, so each family's samples are contiguous (tests/check_prometheus.py checks the rest). */
static inline void assert_prometheus_lines(const char *text)
{
    char family[128] = "", help[128] = "";
    size_t len = strlen(text);
    assert_true(len > 0 && text[len - 1] == '\n');
    for (const char *line = text, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        /* A family name's length (a sample line may be shorter than 7 or long, with labels). */
        size_t n = line[0] == '#' ? strcspn(line + 7, " \n") : 0;
        assert_true(n < sizeof family);
        if (strncmp(line, "# HELP ", 7) == 0) {
            assert_string_equal(help, ""); /* the previous HELP had its TYPE */
            memcpy(help, line + 7, n);
            help[n] = '\0';
        } else if (strncmp(line, "# TYPE ", 7) == 0) {
            assert_int_equal(strncmp(line + 7, help, n), 0);
            assert_int_equal(strlen(help), n);
            memcpy(family, help, n + 1);
            help[0] = '\0';
        } else {
            assert_int_equal(line[0] == '#', 0);
            assert_true(family[0] != '\0');
            assert_int_equal(strncmp(line, family, strlen(family)), 0);
            char c = line[strlen(family)];
            assert_true(c == ' ' || c == '{');
        }
    }
}

#ifdef RL_CHECK_PROMETHEUS
#include <unistd.h>

/* The Prometheus text passes tests/check_prometheus.py (the strict parser of the metrics
 * example's test, its path in RL_CHECK_PROMETHEUS) and assert_prometheus_lines. */
static inline void assert_prometheus_strict(const char *text)
{
    assert_prometheus_lines(text);
    char path[1024]; /* in $TMPDIR, else the working directory (the test's build directory) */
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/rl-prometheus-XXXXXX", dir && *dir ? dir : ".");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t len = strlen(text);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
    char cmd[sizeof RL_CHECK_PROMETHEUS + sizeof path + 16];
    snprintf(cmd, sizeof cmd, "python3 %s %s", RL_CHECK_PROMETHEUS, path);
    int rc = system(cmd);
    unlink(path);
    assert_int_equal(rc, 0);
}
#endif

/* Deterministic pseudo-random numbers for statistical tests (SplitMix64 stream). */
static inline uint64_t test_rand(uint64_t *state)
{
    *state += 0x9E3779B97F4A7C15ull;
    return rl_mix64(*state);
}

#endif
