/* SPDX-License-Identifier: BSD-2-Clause */
/* The dispatcher's statistics on a timer and in the Prometheus text: the options refused, the
 * timer's ticks (compact and full text, unreferenced, silent once closing), the removed lanes'
 * counters that make the sums add up after lane changes under load, the compact text's size
 * at 1,024 and 65,536 lanes with the busiest lane first, and the Prometheus text's escaping,
 * families and RL_ERANGE. Waits wait for events, never for time. */
#define _POSIX_C_SOURCE 200809L
#include "dispatch_util.h"

#include <inttypes.h>
#include <sched.h>
#include <time.h>

/* --- an asynchronous dispatcher on a loop of its own --- */

typedef struct world {
    uv_loop_t loop;
    rl_dispatcher_t *d;
    uint64_t *tickets; /* attempts pending, when not completed inline */
    size_t ntickets, tickets_cap;
    bool complete_inline;
    uint64_t ended;
    int closed;
    int ticks;
    char last[16384]; /* the last tick's text (cut) */
    size_t last_len;
    int ticks_at_close;
} world;

static void async_handler(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    world *w = rl_dispatch_get_data(d);
    if (w->complete_inline) {
        assert_rl_ok(rl_dispatch_complete(d, job->ticket, 0));
        return;
    }
    if (w->ntickets == w->tickets_cap) {
        w->tickets_cap = w->tickets_cap ? 2 * w->tickets_cap : 1024;
        w->tickets = realloc(w->tickets, w->tickets_cap * sizeof *w->tickets);
        assert_non_null(w->tickets);
    }
    w->tickets[w->ntickets++] = job->ticket;
}

static void on_done(rl_dispatcher_t *d, rl_dispatch_job *job, int outcome)
{
    (void)job;
    (void)outcome;
    world *w = rl_dispatch_get_data(d);
    w->ended++;
}

static void on_stats(rl_dispatcher_t *d, const char *json, size_t len)
{
    world *w = rl_dispatch_get_data(d);
    assert_int_equal(strlen(json), len);
    snprintf(w->last, sizeof w->last, "%s", json);
    w->last_len = len;
    w->ticks++;
}

static void on_closed(rl_dispatcher_t *d)
{
    world *w = rl_dispatch_get_data(d);
    w->closed++;
}

static world *world_new(void)
{
    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    assert_int_equal(uv_loop_init(&w->loop), 0);
    return w;
}

static void async_opts(world *w, rl_dispatch_options *o, size_t lanes)
{
    rl_dispatch_options_init(o);
    o->lane_count = lanes;
    o->async_handler = async_handler;
    o->on_done = on_done;
    o->data = w;
}

/* Completes what is pending (and, from then on, every job at once), closes, runs the loop to
 * its end: the loop must have no handle left. */
static void world_end(world *w)
{
    w->complete_inline = true;
    for (size_t i = 0; i < w->ntickets; i++)
        assert_rl_ok(rl_dispatch_complete(w->d, w->tickets[i], 0));
    w->ntickets = 0;
    assert_rl_ok(rl_dispatch_close(w->d, RL_DISPATCH_DRAIN, on_closed));
    w->ticks_at_close = w->ticks;
    assert_int_equal(uv_run(&w->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(w->closed, 1);
    assert_int_equal(w->ticks, w->ticks_at_close); /* no tick once closing */
    assert_int_equal(uv_loop_close(&w->loop), 0);
    free(w->tickets);
    free(w);
}

/* --- the options --- */

static int noop_handler(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    (void)d;
    (void)job;
    return 0;
}

static void test_options_refused(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    rl_dispatch_options o;
    rl_dispatcher_t *d = NULL;
    rl_dispatch_options_init(&o);
    assert_int_equal(o.stats_interval_ms, 0);
    assert_int_equal(o.stats_lanes, RL_DISPATCH_STATS_LANES);
    assert_int_equal(o.stats_full, 0);
    assert_null(o.on_stats);
    o.lane_count = 2;
    o.handler = noop_handler;
    o.stats_interval_ms = -1;
    o.on_stats = (rl_dispatch_stats_cb)on_stats;
    assert_refused(rl_dispatch_init(&loop, &o, &d), RL_EINVAL, "stats_interval_ms -1: negative",
                   "0 = off");
    assert_null(d);
    o.stats_interval_ms = (int64_t)RL_DISPATCH_STATS_INTERVAL_MAX_MS + 1;
    assert_refused(rl_dispatch_init(&loop, &o, &d), RL_EINVAL, "stats_interval_ms 86400001",
                   "over a day");
    o.stats_interval_ms = INT64_MAX;
    assert_refused(rl_dispatch_init(&loop, &o, &d), RL_EINVAL,
                   "stats_interval_ms 9223372036854775807", "over a day");
    o.stats_interval_ms = 1000;
    o.on_stats = NULL;
    assert_refused(rl_dispatch_init(&loop, &o, &d), RL_EINVAL, "stats_interval_ms 1000",
                   "on_stats NULL");
    o.on_stats = (rl_dispatch_stats_cb)on_stats;
    o.stats_lanes = RL_DISPATCH_STATS_LANES_MAX + 1;
    assert_refused(rl_dispatch_init(&loop, &o, &d), RL_EINVAL, "stats_lanes 1025",
                   "RL_DISPATCH_STATS_LANES_MAX");
    assert_null(d);
    assert_int_equal(uv_loop_close(&loop), 0); /* nothing was left on it */
}

/* --- the timer --- */

static void find_unref_timer(uv_handle_t *h, void *arg)
{
    if (h->type == UV_TIMER && uv_is_active(h) && !uv_has_ref(h))
        (*(int *)arg)++;
}

/* Ticks every few ms on the loop with the compact text (64 lanes: the 16 busiest, here the one
 * holding jobs), from an unreferenced timer; none after the close; the loop ends clean. */
static void test_timer_compact(void **state)
{
    (void)state;
    world *w = world_new();
    rl_dispatch_options o;
    async_opts(w, &o, 64);
    o.stats_interval_ms = 2;
    o.on_stats = on_stats;
    assert_rl_ok(rl_dispatch_init(&w->loop, &o, &w->d));
    int unref = 0;
    uv_walk(&w->loop, find_unref_timer, &unref);
    assert_int_equal(unref, 1); /* the stats timer: active, and it keeps no loop alive */
    for (int i = 0; i < 3; i++)
        assert_rl_ok(rl_dispatch_try_submit(w->d, "k", 1, NULL, 0));
    while (w->ticks < 3)
        uv_run(&w->loop, UV_RUN_ONCE);
    assert_memory_equal(w->last, "{\"lanes\":64,", 12);
    assert_non_null(strstr(w->last, "\"submitted\":3,"));
    assert_non_null(strstr(w->last, "\"removed_lanes\":{\"lanes\":0,\"processed\":0,"));
    assert_non_null(strstr(w->last, "\"lane_list\":\"busy\",\"lanes_busy\":1,\"lane\":[{"));
    assert_non_null(strstr(w->last, "\"depth\":2,\"parked\":0,\"in_flight\":1,"));
    world_end(w);
}

static size_t count_of(const char *text, const char *what)
{
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, what)) != NULL; p += strlen(what))
        n++;
    return n;
}

/* stats_full: every lane, as rl_dispatch_stats_json gives it. */
static void test_timer_full(void **state)
{
    (void)state;
    world *w = world_new();
    rl_dispatch_options o;
    async_opts(w, &o, 40);
    o.stats_interval_ms = 1;
    o.on_stats = on_stats;
    o.stats_full = 1;
    assert_rl_ok(rl_dispatch_init(&w->loop, &o, &w->d));
    while (w->ticks < 2)
        uv_run(&w->loop, UV_RUN_ONCE);
    assert_null(strstr(w->last, "lane_list"));
    assert_int_equal(count_of(w->last, "\"name\":"), 40);
    char buf[sizeof w->last];
    size_t len = 0;
    assert_rl_ok(rl_dispatch_stats_json(w->d, buf, sizeof buf, &len));
    assert_int_equal(len, w->last_len);
    assert_string_equal(buf, w->last);
    world_end(w);
}

/* --- the sums after lane changes under load --- */

static atomic_uint_fast64_t failures;

/* Fails the first attempt of one job in seven: retries and failures in every lane. */
static int flaky_handler(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    (void)d;
    if (job->seq % 7 == 0 && job->attempts == 0) {
        atomic_fetch_add(&failures, 1);
        return -1;
    }
    return 0;
}

typedef struct lane_sums {
    uint64_t processed, failed, retried, dead;
} lane_sums;

static lane_sums sum_lanes(rl_dispatcher_t *d, rl_dispatch_stats *s)
{
    size_t n = 0;
    assert_rl_ok(rl_dispatch_stats_get(d, s, NULL, 0, &n));
    rl_dispatch_lane_stats *ls = calloc(n + 16, sizeof *ls);
    assert_non_null(ls);
    assert_rl_ok(rl_dispatch_stats_get(d, s, ls, n + 16, &n));
    assert_true(n <= n + 16);
    lane_sums t = {0};
    for (size_t i = 0; i < n; i++) {
        t.processed += ls[i].processed;
        t.failed += ls[i].failed;
        t.retried += ls[i].retried;
        t.dead += ls[i].dead_lettered;
    }
    free(ls);
    return t;
}

/* 400 lane changes (a lane added or a random one removed) while 40,000 jobs of 500 keys run on
 * 2 workers, a seventh of them failing once: once every job has ended, the lanes' counters and
 * the removed lanes' add up to the dispatcher's. Before removed lanes were counted, the jobs
 * that ended in a lane since removed vanished from the sum. */
static void test_sums_after_lane_changes(void **state)
{
    (void)state;
    enum { CHANGES = 400, PER_CHANGE = 100, KEYS = 500, MAXLANES = 64 };
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lane_count = 4;
    o.handler = flaky_handler;
    o.workers = 2;
    o.backoff_ms = 1;
    o.backoff_max_ms = 1;
    o.max_jobs = 1u << 20;
    o.lane_capacity = 1u << 16;
    rl_dispatcher_t *d = NULL;
    assert_rl_ok(rl_dispatch_init(&loop, &o, &d));
    char names[MAXLANES][16];
    int nlanes = 4;
    for (int i = 0; i < nlanes; i++)
        snprintf(names[i], sizeof names[i], "lane-%d", i);
    uint64_t seed = 29, submitted = 0;
    for (int change = 0; change < CHANGES; change++) {
        for (int j = 0; j < PER_CHANGE; j++) {
            char key[32];
            snprintf(key, sizeof key, "k%" PRIu64, test_rand(&seed) % KEYS);
            assert_rl_ok(rl_dispatch_try_submit(d, key, strlen(key), NULL, 0));
            submitted++;
        }
        if (nlanes > 2 && (nlanes == MAXLANES || test_rand(&seed) % 2)) {
            int victim = (int)(test_rand(&seed) % (uint64_t)nlanes);
            assert_rl_ok(rl_dispatch_remove_lane(d, names[victim]));
            memmove(names[victim], names[nlanes - 1], sizeof names[0]);
            nlanes--;
        } else {
            snprintf(names[nlanes], sizeof names[0], "x-%d", change);
            assert_rl_ok(rl_dispatch_add_lane(d, names[nlanes]));
            nlanes++;
        }
        uv_run(&loop, UV_RUN_NOWAIT);
    }
    rl_dispatch_stats s;
    for (;;) { /* every job ended: the loop has delivered them all */
        uv_run(&loop, UV_RUN_NOWAIT);
        assert_rl_ok(rl_dispatch_stats_get(d, &s, NULL, 0, NULL));
        if (s.done + s.dead_lettered == submitted)
            break;
        sched_yield();
    }
    lane_sums t = sum_lanes(d, &s);
    assert_int_equal(s.done, submitted);
    printf("# %" PRIu64 " jobs, %" PRIu64 " lane changes, %" PRIu64 " lanes removed and gone: "
           "lanes' processed %" PRIu64 " + removed %" PRIu64 " = %" PRIu64 " (done %" PRIu64 ")\n",
           submitted, s.lane_changes, s.removed.lanes, t.processed, s.removed.processed,
           t.processed + s.removed.processed, s.done);
    assert_int_equal(t.processed + s.removed.processed, s.done + s.dead_lettered);
    assert_int_equal(t.failed + s.removed.failed, atomic_load(&failures));
    assert_int_equal(t.retried + s.removed.retried, atomic_load(&failures));
    assert_int_equal(t.dead + s.removed.dead_lettered, s.dead_lettered);
    assert_true(s.removed.lanes > 0); /* the sums did take lanes that are gone */
    assert_true(s.removed.processed > 0);

    /* The JSON says the same. */
    size_t len = 0;
    assert_int_equal(rl_dispatch_stats_json(d, NULL, 0, &len), RL_ERANGE);
    char *json = malloc(len + 1);
    assert_non_null(json);
    assert_rl_ok(rl_dispatch_stats_json(d, json, len + 1, NULL));
    char want[160];
    snprintf(want, sizeof want,
             "\"removed_lanes\":{\"lanes\":%" PRIu64 ",\"processed\":%" PRIu64
             ",\"failed\":%" PRIu64 ",",
             s.removed.lanes, s.removed.processed, s.removed.failed);
    assert_non_null(strstr(json, want));
    free(json);

    assert_rl_ok(rl_dispatch_close(d, RL_DISPATCH_DRAIN, NULL));
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* --- the compact text's size at many lanes --- */

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The stated bound of the bounded text with lanes named "lane-<n>" (at most 10 bytes, 12 as a
 * JSON string): 1,000 + max_lanes x (330 + 12) + the hot keys' RL_DISPATCH_STATS_HOT_KEYS x
 * (225 + 12). */
#define COMPACT_BOUND(lanes) (1000 + (lanes) * (330 + 12) + RL_DISPATCH_STATS_HOT_KEYS * (225 + 12))

/* A hot key (64 jobs) and `keys` other keys, one job each, held in flight on `lanes` lanes
 * (memento): the compact text lists RL_DISPATCH_STATS_LANES lanes, the hot key's first, within
 * the stated bound; the Prometheus text lists the same lanes. */
static void compact_at(size_t lanes, size_t keys)
{
    world *w = world_new();
    rl_dispatch_options o;
    async_opts(w, &o, lanes);
    rl_ring_options ring;
    rl_ring_options_init(&ring);
    ring.profile = "memento";
    o.ring = &ring;
    o.max_jobs = 1u << 20;
    o.stats_interval_ms = 1;
    o.on_stats = on_stats;
    assert_rl_ok(rl_dispatch_init(&w->loop, &o, &w->d));
    for (int i = 0; i < 64; i++)
        assert_rl_ok(rl_dispatch_try_submit(w->d, "hot", 3, NULL, 0));
    for (size_t i = 0; i < keys; i++) {
        char key[32];
        snprintf(key, sizeof key, "key-%zu", i);
        int rc = rl_dispatch_try_submit(w->d, key, strlen(key), NULL, 0);
        assert_true(rc == 0 || rc == RL_EAGAIN);
    }
    uv_run(&w->loop, UV_RUN_NOWAIT); /* the loop starts the jobs */
    int ticks = w->ticks;
    while (w->ticks < ticks + 2)
        uv_run(&w->loop, UV_RUN_ONCE);
    assert_true(w->last_len <= COMPACT_BOUND(RL_DISPATCH_STATS_LANES));
    assert_int_equal(count_of(w->last, "\"name\":"), RL_DISPATCH_STATS_LANES);
    assert_non_null(strstr(w->last, "\"lane_list\":\"busy\""));
    /* The hot key's lane is the busiest: 63 queued and one in flight, listed first. */
    const char *first = strstr(w->last, "\"lane\":[{");
    assert_non_null(first);
    const char *depth = strstr(first, "\"depth\":");
    assert_non_null(depth);
    assert_true(strtoull(depth + 8, NULL, 10) >= 63);

    /* One tick's work, as the timer does it (the bounded text into a buffer that fits). */
    char *buf = malloc(65536);
    assert_non_null(buf);
    size_t len = 0;
    double t0 = now_us();
    enum { ROUNDS = 20 };
    for (int i = 0; i < ROUNDS; i++)
        assert_rl_ok(
            rl_dispatch_stats_json_bounded(w->d, RL_DISPATCH_STATS_LANES, buf, 65536, &len));
    double us = (now_us() - t0) / ROUNDS;
    size_t prom = 0;
    assert_rl_ok(rl_dispatch_stats_prometheus(w->d, RL_DISPATCH_STATS_LANES, buf, 65536, &prom));
    assert_int_equal(count_of(buf, "ringlane_dispatch_lane_queued{lane="), RL_DISPATCH_STATS_LANES);
    printf("# %zu lanes, %zu busy keys: compact JSON %zu B (bound %d), Prometheus %zu B, "
           "one compact text %.0f us\n",
           lanes, keys + 1, w->last_len, COMPACT_BOUND(RL_DISPATCH_STATS_LANES), prom, us);
    free(buf);
    world_end(w);
}

static void test_compact_1024_lanes(void **state)
{
    (void)state;
    compact_at(1024, 4096);
}

static void test_compact_65536_lanes(void **state)
{
    (void)state;
    compact_at(65536, 200000); /* 200,000 keys: about 95% of the lanes hold a job */
}

/* --- the Prometheus text --- */

/* Lane names with the three characters a label value escapes: each comes out escaped; every
 * family has its HELP and TYPE lines once; a short buffer gets RL_ERANGE, the length needed
 * and a terminated text. */
static void test_prometheus_text(void **state)
{
    (void)state;
    world *w = world_new();
    rl_dispatch_options o;
    async_opts(w, &o, 3);
    const char *lanes[] = {"quote\"d", "back\\slash", "new\nline"};
    o.lanes = lanes;
    assert_rl_ok(rl_dispatch_init(&w->loop, &o, &w->d));
    w->complete_inline = true;
    for (int i = 0; i < 10; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        assert_rl_ok(rl_dispatch_try_submit(w->d, key, strlen(key), NULL, 0));
    }
    while (w->ended < 10)
        uv_run(&w->loop, UV_RUN_ONCE);
    char buf[32768];
    size_t len = 0;
    assert_rl_ok(rl_dispatch_stats_prometheus(w->d, 16, buf, sizeof buf, &len));
    assert_int_equal(strlen(buf), len);
    assert_non_null(strstr(buf, "ringlane_dispatch_lane_queued{lane=\"quote\\\"d\"} 0\n"));
    assert_non_null(strstr(buf, "ringlane_dispatch_lane_queued{lane=\"back\\\\slash\"} 0\n"));
    assert_non_null(strstr(buf, "ringlane_dispatch_lane_queued{lane=\"new\\nline\"} 0\n"));
    assert_non_null(strstr(buf, "# HELP ringlane_dispatch_submitted_total "));
    assert_non_null(strstr(buf, "# TYPE ringlane_dispatch_submitted_total counter\n"
                                "ringlane_dispatch_submitted_total 10\n"));
    assert_non_null(strstr(buf, "ringlane_dispatch_jobs_ended_total{outcome=\"done\"} 10\n"));
    assert_int_equal(count_of(buf, "# TYPE ringlane_dispatch_lane_processed_total counter\n"), 1);
    assert_int_equal(count_of(buf, "# HELP "), count_of(buf, "# TYPE "));
    assert_int_equal(buf[len - 1], '\n');
    assert_prometheus_lines(buf);
    /* Cut: RL_ERANGE, the whole length, a terminated prefix. */
    char small[100];
    size_t need = 0;
    assert_int_equal(rl_dispatch_stats_prometheus(w->d, 16, small, sizeof small, &need), RL_ERANGE);
    assert_int_equal(need, len);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_memory_equal(small, buf, sizeof small - 1);
    assert_int_equal(rl_dispatch_stats_prometheus(w->d, 16, NULL, 0, &need), RL_ERANGE);
    assert_int_equal(need, len);
    assert_int_equal(rl_dispatch_stats_prometheus(NULL, 16, buf, sizeof buf, NULL), RL_EINVAL);
    assert_int_equal(rl_dispatch_stats_prometheus(w->d, 16, NULL, 5, NULL), RL_EINVAL);
    /* max_lanes 1 over 3 lanes: the busy ones only (none now), and no empty lane family. */
    assert_rl_ok(rl_dispatch_stats_prometheus(w->d, 1, buf, sizeof buf, &len));
    assert_null(strstr(buf, "ringlane_dispatch_lane_queued"));
    assert_non_null(strstr(buf, "ringlane_dispatch_lanes_busy 0\n"));
    world_end(w);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options_refused),    cmocka_unit_test(test_timer_compact),
        cmocka_unit_test(test_timer_full),         cmocka_unit_test(test_sums_after_lane_changes),
        cmocka_unit_test(test_compact_1024_lanes), cmocka_unit_test(test_compact_65536_lanes),
        cmocka_unit_test(test_prometheus_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
