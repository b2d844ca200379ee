/* The order checker under load: submitter threads, many keys with one hot key, random handler
 * failures (retried), and random lane additions and removals on the loop thread meanwhile.
 *
 * Every job carries (key, sequence). The handlers assert that each key's sequences arrive
 * consecutively and that no key is ever in two handlers at once (an atomic flag per key; the
 * per-key counter next to it is a plain int, so a missing hand-over between lanes is also a
 * ThreadSanitizer report). on_done asserts the same order for completions. At the end, handled
 * == submitted for every key, which with consecutive sequences makes them equal as multisets.
 *
 * Default: the short run. `--long`: at least 1,000 lane changes (CTest: test_dispatch_stress).
 * Built with ThreadSanitizer the job counts shrink, the number of lane changes does not. */
#define _POSIX_C_SOURCE 200809L
#include "dispatch_util.h"

#include <sched.h>

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLOW_BUILD 1
#else
#define SLOW_BUILD 0
#endif

#define KEYS 500
#define HOT_KEY 0
#define SUBMITTERS 3
#define LANE_POOL 8
#define MAX_ATTEMPTS 4

typedef struct job_rec {
    int key;
    int seq;
} job_rec;

typedef struct world {
    uv_loop_t loop;
    uv_idle_t idle;
    rl_dispatcher_t *d;
    int target_changes;
    uint64_t target_jobs;

    atomic_int inside[KEYS];
    int next_handled[KEYS]; /* touched only by the handler that holds the key */
    int next_done[KEYS];    /* loop thread */
    int submitted[KEYS];    /* by the key's submitter; read after it stopped */
    atomic_int violations;
    atomic_uint_fast64_t failures;
    int done_violations;
    uint64_t ended;

    atomic_uint_fast64_t submitted_total;
    atomic_bool stop;
    atomic_int running;

    uint64_t rng;
    bool lane_in[LANE_POOL];
    int lanes_in;
    int changes, adds, removes;
    uint64_t max_change_ns;
    bool closing;
    int closed;
} world;

static const char *lane_name(int i)
{
    static const char *names[LANE_POOL] = {"lane-0", "lane-1", "lane-2", "lane-3",
                                           "lane-4", "lane-5", "lane-6", "lane-7"};
    return names[i];
}

static int handler(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    world *w = rl_dispatch_get_data(d);
    job_rec *r = job->data;
    if (atomic_exchange(&w->inside[r->key], 1) != 0)
        atomic_fetch_add(&w->violations, 1);
    if (w->next_handled[r->key] != r->seq)
        atomic_fetch_add(&w->violations, 1);
    uint64_t h =
        rl_mix64(((uint64_t)r->key << 32) ^ (uint64_t)r->seq ^ ((uint64_t)job->attempts << 56));
    /* About 1 call in 64 fails; never the last attempt, so every job ends done. */
    bool fail = h % 64 == 0 && job->attempts + 1 < MAX_ATTEMPTS;
    if (h % 97 == 1)
        sched_yield(); /* let other lanes interleave */
    if (fail)
        atomic_fetch_add(&w->failures, 1);
    else
        w->next_handled[r->key]++;
    atomic_store(&w->inside[r->key], 0);
    return fail ? -1 : 0;
}

static void on_done(rl_dispatcher_t *d, rl_dispatch_job *job, int outcome)
{
    world *w = rl_dispatch_get_data(d);
    job_rec *r = job->data;
    if (outcome != RL_DISPATCH_DONE || w->next_done[r->key] != r->seq)
        w->done_violations++;
    w->next_done[r->key]++;
    w->ended++;
    free(r);
}

static void on_closed(rl_dispatcher_t *d)
{
    world *w = rl_dispatch_get_data(d);
    w->closed++;
}

typedef struct submitter {
    world *w;
    int id;
} submitter;

static void submit_thread(void *arg)
{
    submitter *s = arg;
    world *w = s->w;
    uint64_t rng = 0x5eed0000u + (uint64_t)s->id;
    /* The keys this thread owns: k % SUBMITTERS == id; thread 0 owns the hot key. */
    int own = (KEYS - s->id + SUBMITTERS - 1) / SUBMITTERS;
    uint64_t n = 0;
    while (!atomic_load(&w->stop)) {
        int key;
        if (s->id == 0 && test_rand(&rng) % 4 == 0)
            key = HOT_KEY;
        else
            key = s->id + SUBMITTERS * (int)(test_rand(&rng) % (uint64_t)own);
        job_rec *r = malloc(sizeof *r);
        assert_non_null(r);
        r->key = key;
        r->seq = w->submitted[key];
        char name[32];
        int len = snprintf(name, sizeof name, "key-%d", key);
        int rc;
        if (n % 5 == 0) {
            while ((rc = rl_dispatch_try_submit(w->d, name, (size_t)len, r, key % 16)) == RL_EAGAIN)
                sched_yield();
        } else {
            rc = rl_dispatch_submit(w->d, name, (size_t)len, r, key % 16, -1);
        }
        if (rc != 0)
            fail_msg("submit: %s", rl_err_name(rc));
        w->submitted[key]++;
        atomic_fetch_add(&w->submitted_total, 1);
        if (++n % 4096 == 0 && s->id == 1) { /* statistics from any thread */
            char buf[2048];
            size_t need;
            int src = rl_dispatch_stats_json(w->d, buf, sizeof buf, &need);
            assert_true(src == 0 || src == RL_ERANGE);
        }
    }
    atomic_fetch_sub(&w->running, 1);
}

/* One random membership change (and now and then a wrong one, which must change nothing). */
static void change_lanes(world *w)
{
    uint64_t x = test_rand(&w->rng);
    bool add = w->lanes_in <= 1 || (w->lanes_in < 6 && x % 2 == 0);
    int pick = (int)((x >> 8) % LANE_POOL);
    while (w->lane_in[pick] == add)
        pick = (pick + 1) % LANE_POOL;
    if (x % 17 == 0) {
        for (int i = 0; i < LANE_POOL; i++) {
            if (w->lane_in[i]) {
                assert_int_equal(rl_dispatch_add_lane(w->d, lane_name(i)), RL_EDUPNAME);
                break;
            }
        }
        for (int i = 0; i < LANE_POOL; i++) {
            if (!w->lane_in[i]) {
                assert_int_equal(rl_dispatch_remove_lane(w->d, lane_name(i)), RL_ENOENT);
                break;
            }
        }
    }
    if (add) {
        assert_rl_ok(rl_dispatch_add_lane(w->d, lane_name(pick)));
        w->lanes_in++;
        w->adds++;
    } else {
        assert_rl_ok(rl_dispatch_remove_lane(w->d, lane_name(pick)));
        w->lanes_in--;
        w->removes++;
    }
    w->lane_in[pick] = add;
    w->changes++;
    if (x % 29 == 0) /* a revoke's wait, for a tag: delivers completions on the spot */
        (void)rl_dispatch_wait_tag(w->d, (int64_t)(x % 16), 0);
}

static void on_idle(uv_idle_t *h)
{
    world *w = h->data;
    uint64_t done = atomic_load(&w->submitted_total);
    /* Spread the changes over the run: one per target_jobs / target_changes submissions. */
    if (w->changes < w->target_changes &&
        done >= (uint64_t)w->changes * (w->target_jobs / (uint64_t)w->target_changes))
        change_lanes(w);
    if (w->changes >= w->target_changes && done >= w->target_jobs)
        atomic_store(&w->stop, true);
    if (atomic_load(&w->stop) && atomic_load(&w->running) == 0 && !w->closing) {
        rl_dispatch_stats s;
        assert_rl_ok(rl_dispatch_stats_get(w->d, &s, NULL, 0, NULL));
        w->max_change_ns = s.max_change_ns;
        assert_int_equal(s.lane_changes, (uint64_t)w->changes);
        w->closing = true;
        assert_rl_ok(rl_dispatch_close(w->d, RL_DISPATCH_DRAIN, on_closed));
        uv_idle_stop(h);
        uv_close((uv_handle_t *)h, NULL);
    }
}

static void run(int changes, uint64_t jobs)
{
    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->target_changes = changes;
    w->target_jobs = jobs;
    w->rng = 42;
    assert_int_equal(uv_loop_init(&w->loop), 0);
    const char *initial[] = {lane_name(0), lane_name(1), lane_name(2)};
    for (int i = 0; i < 3; i++)
        w->lane_in[i] = true;
    w->lanes_in = 3;
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lanes = initial;
    o.lane_count = 3;
    o.handler = handler;
    o.on_done = on_done;
    o.data = w;
    o.lane_capacity = 256;
    o.max_jobs = 2048;
    o.max_attempts = MAX_ATTEMPTS;
    o.backoff_ms = 0;
    o.backoff_max_ms = 1;
    assert_rl_ok(rl_dispatch_init(&w->loop, &o, &w->d));

    submitter subs[SUBMITTERS];
    uv_thread_t threads[SUBMITTERS];
    atomic_store(&w->running, SUBMITTERS);
    for (int i = 0; i < SUBMITTERS; i++) {
        subs[i] = (submitter){w, i};
        assert_int_equal(uv_thread_create(&threads[i], submit_thread, &subs[i]), 0);
    }
    assert_int_equal(uv_idle_init(&w->loop, &w->idle), 0);
    w->idle.data = w;
    assert_int_equal(uv_idle_start(&w->idle, on_idle), 0);
    assert_int_equal(uv_run(&w->loop, UV_RUN_DEFAULT), 0);
    for (int i = 0; i < SUBMITTERS; i++)
        uv_thread_join(&threads[i]);
    assert_int_equal(uv_loop_close(&w->loop), 0);

    uint64_t total = 0;
    int mismatched = 0;
    for (int k = 0; k < KEYS; k++) {
        total += (uint64_t)w->submitted[k];
        if (w->next_handled[k] != w->submitted[k] || w->next_done[k] != w->submitted[k])
            mismatched++;
    }
    print_message("order check: %llu jobs over %d keys (hot key: %d), %d lane changes "
                  "(%d adds, %d removes), %llu injected failures, longest change %.3f ms: "
                  "%d violations, %d completion-order violations, %d keys with losses or "
                  "duplicates\n",
                  (unsigned long long)total, KEYS, w->submitted[HOT_KEY], w->changes, w->adds,
                  w->removes, (unsigned long long)atomic_load(&w->failures),
                  (double)w->max_change_ns / 1e6, atomic_load(&w->violations), w->done_violations,
                  mismatched);
    assert_int_equal(w->closed, 1);
    assert_int_equal(atomic_load(&w->violations), 0);
    assert_int_equal(w->done_violations, 0);
    assert_int_equal(mismatched, 0);
    assert_int_equal(w->ended, total);
    assert_true(total >= jobs);
    assert_true(w->changes >= changes);
    assert_true(atomic_load(&w->failures) > 0);
    free(w);
}

static bool long_run;

static void test_order_under_lane_changes(void **state)
{
    (void)state;
    if (long_run)
        run(SLOW_BUILD ? 1200 : 3000, SLOW_BUILD ? 100000 : 3000000);
    else
        run(100, SLOW_BUILD ? 10000 : 40000);
}

int main(int argc, char **argv)
{
    long_run = argc > 1 && strcmp(argv[1], "--long") == 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_under_lane_changes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
