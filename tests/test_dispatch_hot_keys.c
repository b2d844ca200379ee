/* SPDX-License-Identifier: BSD-2-Clause */
/* The dispatcher's hot-key sketch: a key flooding a lane among many light keys, submitted from
 * two threads, is named first (with its lane) by the next statistics tick and the Prometheus
 * text; the sketch follows at most its entries whatever the number of distinct keys (100,000
 * here), still naming the one hot key among them, and forgets every key once its jobs end;
 * keys are shown safely (hex for bytes that are not printable, cut long keys, JSON and label
 * escapes), and the Prometheus text passes the strict parser; the option's refusal. Waits wait
 * for events (a tick, the jobs' ends), never for time. */
#define _POSIX_C_SOURCE 200809L
#include "dispatch_util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* An asynchronous dispatcher whose jobs stay in flight (tickets kept) until the test ends
 * them: every job submitted is held. */
typedef struct world {
    uv_loop_t loop;
    rl_dispatcher_t *d;
    uint64_t *tickets;
    size_t ntickets, tickets_cap;
    bool complete_inline;
    uint64_t ended;
    int ticks;
    char *last; /* the last tick's text */
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
    assert_int_equal(outcome, RL_DISPATCH_DONE);
    world *w = rl_dispatch_get_data(d);
    w->ended++;
}

static void on_stats(rl_dispatcher_t *d, const char *json, size_t len)
{
    world *w = rl_dispatch_get_data(d);
    free(w->last);
    w->last = malloc(len + 1);
    assert_non_null(w->last);
    memcpy(w->last, json, len + 1);
    w->ticks++;
}

static world *world_new(size_t lanes, uint32_t hot_keys, int64_t interval_ms)
{
    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    assert_int_equal(uv_loop_init(&w->loop), 0);
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    assert_int_equal(o.hot_keys, RL_DISPATCH_HOT_KEYS);
    o.lane_count = lanes;
    o.async_handler = async_handler;
    o.on_done = on_done;
    o.data = w;
    o.hot_keys = hot_keys;
    o.lane_capacity = 1u << 20;
    o.max_jobs = 1u << 20;
    o.stats_interval_ms = interval_ms;
    o.on_stats = interval_ms ? on_stats : NULL;
    assert_rl_ok(rl_dispatch_init(&w->loop, &o, &w->d));
    return w;
}

/* Ends every job (the pending ones, and the rest as they start), until `total` have ended. */
static void world_drain(world *w, uint64_t total)
{
    w->complete_inline = true;
    while (w->ended < total) {
        for (size_t i = 0; i < w->ntickets; i++)
            assert_rl_ok(rl_dispatch_complete(w->d, w->tickets[i], 0));
        w->ntickets = 0;
        uv_run(&w->loop, UV_RUN_ONCE);
    }
}

static void world_end(world *w)
{
    world_drain(w, w->ended);
    assert_rl_ok(rl_dispatch_close(w->d, RL_DISPATCH_DRAIN, NULL));
    assert_int_equal(uv_run(&w->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&w->loop), 0);
    free(w->tickets);
    free(w->last);
    free(w);
}

/* The unsigned number after `field` in text (after `from`), or UINT64_MAX. */
static uint64_t json_u64(const char *text, const char *field)
{
    const char *p = strstr(text, field);
    return p ? strtoull(p + strlen(field), NULL, 10) : UINT64_MAX;
}

static size_t count_of(const char *text, const char *what)
{
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

/* --- a hot key among light ones --- */

enum { LIGHT_KEYS = 2000, HOT_JOBS = 600 };

static void submit_light(void *arg)
{
    rl_dispatcher_t *d = arg;
    for (int i = 0; i < LIGHT_KEYS; i++) {
        char key[32];
        int n = snprintf(key, sizeof key, "light-%d", i);
        assert_rl_ok(rl_dispatch_try_submit(d, key, (size_t)n, NULL, 0));
    }
}

/* One key floods its lane (600 jobs) while another thread submits 2,000 light keys of one job
 * each. The sketch has 64 entries, so it is full most of the time and makes rounds: the hot
 * key's count falls short by at most the rounds, 2,600 / 65 = 40 at most. The next tick (every
 * 200 ms, so within a second) names it first, with its lane, the lane the statistics list as
 * the busiest; so does the Prometheus text. Once every job has ended, no key is followed. */
static void test_hot_key_named_first(void **state)
{
    (void)state;
    world *w = world_new(32, 64, 200);
    uv_thread_t t;
    assert_int_equal(uv_thread_create(&t, submit_light, w->d), 0);
    for (int i = 0; i < HOT_JOBS; i++)
        assert_rl_ok(rl_dispatch_try_submit(w->d, "hot-key", 7, NULL, 0));
    assert_int_equal(uv_thread_join(&t), 0);

    int ticks = w->ticks;
    while (w->ticks == ticks) /* the next tick: an event, not a time */
        uv_run(&w->loop, UV_RUN_ONCE);
    const char *hot = strstr(w->last, "\"hot_keys\":{");
    assert_non_null(hot);
    assert_int_equal(json_u64(hot, "\"capacity\":"), 64);
    assert_true(json_u64(hot, "\"followed\":") <= 64);
    const char *first = strstr(hot, "\"list\":[{\"key\":\"hot-key\",\"key_encoding\":\"text\","
                                    "\"key_len\":7,\"jobs\":");
    assert_non_null(first);
    uint64_t jobs = json_u64(first, "\"jobs\":");
    uint64_t rounds = json_u64(hot, "\"rounds\":");
    assert_true(rounds <= (LIGHT_KEYS + HOT_JOBS) / 65);
    assert_true(jobs <= HOT_JOBS && jobs >= HOT_JOBS - rounds);
    /* Its lane: the busiest, listed first in the lanes. */
    const char *lane = strstr(first, "\"lane\":\"");
    assert_non_null(lane);
    lane += 8;
    size_t lane_len = strcspn(lane, "\"");
    const char *busiest = strstr(w->last, "\"lane\":[{\"name\":\"");
    assert_non_null(busiest);
    busiest += strlen("\"lane\":[{\"name\":\"");
    assert_int_equal(strcspn(busiest, "\""), lane_len);
    assert_memory_equal(busiest, lane, lane_len);
    /* The compact text lists at most RL_DISPATCH_STATS_HOT_KEYS of them. */
    assert_true(count_of(hot, "\"key_encoding\"") <= RL_DISPATCH_STATS_HOT_KEYS);

    /* The same through the API and the Prometheus text. */
    rl_dispatch_hot_key top[4];
    size_t n = 0;
    assert_rl_ok(rl_dispatch_hot_keys(w->d, top, 4, &n));
    assert_true(n >= 1 && n <= 64);
    assert_int_equal(top[0].key_len, 7);
    assert_int_equal(top[0].stored, 7);
    assert_memory_equal(top[0].key, "hot-key", 7);
    assert_true(top[0].jobs >= HOT_JOBS - rounds);
    assert_int_equal(strlen(top[0].lane), lane_len);
    assert_memory_equal(top[0].lane, lane, lane_len);
    char *prom = malloc(65536);
    assert_non_null(prom);
    assert_rl_ok(rl_dispatch_stats_prometheus(w->d, 16, prom, 65536, NULL));
    const char *sample = strstr(prom, "\nringlane_dispatch_hot_key_jobs{");
    assert_non_null(sample);
    assert_int_equal(strncmp(sample, "\nringlane_dispatch_hot_key_jobs{key=\"hot-key\",", 46), 0);
    assert_true(count_of(prom, "\nringlane_dispatch_hot_key_jobs{") <= RL_DISPATCH_STATS_HOT_KEYS);
    assert_prometheus_strict(prom);

    /* Every job ends: the sketch forgets every key (no count left behind). */
    world_drain(w, LIGHT_KEYS + HOT_JOBS);
    assert_rl_ok(rl_dispatch_hot_keys(w->d, top, 4, &n));
    assert_int_equal(n, 0);
    assert_rl_ok(rl_dispatch_stats_prometheus(w->d, 16, prom, 65536, NULL));
    assert_non_null(strstr(prom, "\nringlane_dispatch_hot_keys_followed 0\n"));
    assert_null(strstr(prom, "ringlane_dispatch_hot_key_jobs"));
    free(prom);
    world_end(w);
}

/* --- the bound --- */

/* 100,000 distinct keys of one job each, a tenth of them through rl_dispatch_submit_many, and
 * one key with 5,000 jobs among them: the sketch never follows more than its 64 entries (the
 * API and the full JSON say so), and names the hot key first, as the sketch promises for a key
 * holding more than 1 / 65 of the jobs (105,000 / 65 = 1,616 < 5,000). */
static void test_bound_100000_keys(void **state)
{
    (void)state;
    enum { KEYS = 100000, HOT = 5000 };
    world *w = world_new(64, 64, 0);
    rl_dispatch_item items[10];
    char names[10][32];
    int hot_sent = 0;
    for (int i = 0; i < KEYS; i += 10) {
        for (int k = 0; k < 10; k++) {
            int len = snprintf(names[k], sizeof names[k], "key-%d", i + k);
            items[k] = (rl_dispatch_item){names[k], (size_t)len, NULL, 0};
        }
        if (i % 100 == 0) {
            size_t queued = 0;
            assert_rl_ok(rl_dispatch_submit_many(w->d, items, 10, NULL, &queued));
            assert_int_equal(queued, 10);
        } else {
            for (int k = 0; k < 10; k++)
                assert_rl_ok(rl_dispatch_try_submit(w->d, items[k].key, items[k].key_len, NULL, 0));
        }
        if (i % 200 == 0)
            for (int k = 0; k < 10; k++, hot_sent++)
                assert_rl_ok(rl_dispatch_try_submit(w->d, "the-hot-one", 11, NULL, 0));
        size_t n = 0;
        if (i % 10000 == 0) {
            assert_rl_ok(rl_dispatch_hot_keys(w->d, NULL, 0, &n));
            assert_true(n <= 64);
        }
    }
    assert_int_equal(hot_sent, HOT);
    rl_dispatch_hot_key *all = calloc(RL_DISPATCH_HOT_KEYS_MAX, sizeof *all);
    assert_non_null(all);
    size_t n = 0;
    assert_rl_ok(rl_dispatch_hot_keys(w->d, all, RL_DISPATCH_HOT_KEYS_MAX, &n));
    assert_true(n >= 1 && n <= 64);
    assert_int_equal(all[0].key_len, 11);
    assert_memory_equal(all[0].key, "the-hot-one", 11);
    assert_true(all[0].jobs >= HOT - (KEYS + HOT) / 65 && all[0].jobs <= HOT);
    for (size_t i = 1; i < n; i++)
        assert_true(all[i].jobs <= all[i - 1].jobs); /* hottest first */
    size_t need = 0;
    assert_int_equal(rl_dispatch_stats_json(w->d, NULL, 0, &need), RL_ERANGE);
    char *json = malloc(need + 1);
    assert_non_null(json);
    assert_rl_ok(rl_dispatch_stats_json(w->d, json, need + 1, NULL));
    const char *hot = strstr(json, "\"hot_keys\":{");
    assert_non_null(hot);
    assert_true(json_u64(hot, "\"followed\":") <= 64);
    assert_int_equal(count_of(hot, "\"key_encoding\""), n); /* the full text lists them all */
    printf("# %d distinct keys and one of %d jobs: %zu followed, the hot one at %" PRIu64
           " jobs, %" PRIu64 " rounds\n",
           KEYS, HOT, n, all[0].jobs, json_u64(hot, "\"rounds\":"));
    free(json);
    world_drain(w, KEYS + HOT);
    assert_rl_ok(rl_dispatch_hot_keys(w->d, all, RL_DISPATCH_HOT_KEYS_MAX, &n));
    assert_int_equal(n, 0);
    free(all);
    world_end(w);
}

/* --- keys shown safely --- */

static void test_keys_shown_safely(void **state)
{
    (void)state;
    world *w = world_new(4, 16, 0);
    const unsigned char binary[] = {0x00, 0xff, 'a', '\n'};
    char long_text[200], long_binary[100];
    memset(long_text, 'x', sizeof long_text);
    for (size_t i = 0; i < sizeof long_binary; i++)
        long_binary[i] = (char)(0x80 + i % 16);
    const char quoted[] = "a\"b\\c";
    /* Different job counts, so the order is known: binary 5, long text 4, long binary 3,
     * quoted 2. */
    for (int i = 0; i < 5; i++)
        assert_rl_ok(rl_dispatch_try_submit(w->d, binary, sizeof binary, NULL, 0));
    for (int i = 0; i < 4; i++)
        assert_rl_ok(rl_dispatch_try_submit(w->d, long_text, sizeof long_text, NULL, 0));
    for (int i = 0; i < 3; i++)
        assert_rl_ok(rl_dispatch_try_submit(w->d, long_binary, sizeof long_binary, NULL, 0));
    for (int i = 0; i < 2; i++)
        assert_rl_ok(rl_dispatch_try_submit(w->d, quoted, 5, NULL, 0));

    rl_dispatch_hot_key top[8];
    size_t n = 0;
    assert_rl_ok(rl_dispatch_hot_keys(w->d, top, 8, &n));
    assert_int_equal(n, 4);
    assert_int_equal(top[1].key_len, 200);
    assert_int_equal(top[1].stored, RL_DISPATCH_HOT_KEY_BYTES); /* only the first bytes kept */
    assert_int_equal(top[2].stored, RL_DISPATCH_HOT_KEY_BYTES);

    char json[8192];
    assert_rl_ok(rl_dispatch_stats_json(w->d, json, sizeof json, NULL));
    assert_non_null(strstr(json, "{\"key\":\"00ff610a\",\"key_encoding\":\"hex\",\"key_len\":4,"
                                 "\"jobs\":5,"));
    char want[256];
    snprintf(want, sizeof want,
             "{\"key\":\"%.64s...\",\"key_encoding\":\"text\",\"key_len\":200,\"jobs\":4,",
             long_text);
    assert_non_null(strstr(json, want));
    /* 32 bytes in hex, then the mark. */
    char hex[65];
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)long_binary[i]);
    snprintf(want, sizeof want,
             "{\"key\":\"%s...\",\"key_encoding\":\"hex\",\"key_len\":100,\"jobs\":3,", hex);
    assert_non_null(strstr(json, want));
    assert_non_null(strstr(json, "{\"key\":\"a\\\"b\\\\c\",\"key_encoding\":\"text\",\"key_len\":5,"
                                 "\"jobs\":2,"));

    char prom[16384];
    assert_rl_ok(rl_dispatch_stats_prometheus(w->d, 4, prom, sizeof prom, NULL));
    assert_non_null(strstr(prom, "ringlane_dispatch_hot_key_jobs{key=\"00ff610a\","
                                 "key_encoding=\"hex\",lane=\""));
    assert_non_null(strstr(prom, "ringlane_dispatch_hot_key_jobs{key=\"a\\\"b\\\\c\","
                                 "key_encoding=\"text\",lane=\""));
    snprintf(want, sizeof want, "ringlane_dispatch_hot_key_jobs{key=\"%.64s...\",", long_text);
    assert_non_null(strstr(prom, want));
    assert_prometheus_strict(prom);
    world_drain(w, 14);
    world_end(w);
}

/* The compact text's stated bound (dispatcher.h) with its worst keys: 8 hot keys of 100 bytes
 * whose first 64 are '"' (each escaped to two characters), on 16 lanes named "lane-<n>":
 * 1,000 + 16 x (330 + 12) + 8 x (225 + 12) bytes. */
static void test_compact_bound_worst_keys(void **state)
{
    (void)state;
    world *w = world_new(16, 64, 0);
    for (int k = 0; k < 10; k++) {
        char key[100];
        memset(key, '"', sizeof key);
        key[99] = (char)('a' + k);
        for (int i = 0; i <= k; i++)
            assert_rl_ok(rl_dispatch_try_submit(w->d, key, sizeof key, NULL, 0));
    }
    char *json = malloc(65536);
    assert_non_null(json);
    size_t len = 0;
    assert_rl_ok(rl_dispatch_stats_json_bounded(w->d, RL_DISPATCH_STATS_LANES, json, 65536, &len));
    assert_int_equal(count_of(json, "\"key_encoding\":\"text\",\"key_len\":100,"),
                     RL_DISPATCH_STATS_HOT_KEYS);
    size_t bound =
        1000 + RL_DISPATCH_STATS_LANES * (330 + 12) + RL_DISPATCH_STATS_HOT_KEYS * (225 + 12);
    printf("# compact text with 8 worst hot keys: %zu bytes (bound %zu)\n", len, bound);
    assert_true(len <= bound);
    free(json);
    world_drain(w, 55);
    world_end(w);
}

/* --- the option --- */

static int noop_handler(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    (void)d;
    (void)job;
    return 0;
}

static void test_option(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lane_count = 2;
    o.handler = noop_handler;
    rl_dispatcher_t *d = NULL;
    o.hot_keys = RL_DISPATCH_HOT_KEYS_MAX + 1;
    assert_refused(rl_dispatch_init(&loop, &o, &d), RL_EINVAL, "hot_keys 4097",
                   "over RL_DISPATCH_HOT_KEYS_MAX");
    assert_null(d);
    o.hot_keys = UINT32_MAX;
    assert_refused(rl_dispatch_init(&loop, &o, &d), RL_EINVAL, "hot_keys 4294967295",
                   "over RL_DISPATCH_HOT_KEYS_MAX");
    /* 0: off. Nothing followed, no hot key family, an empty list. */
    o.hot_keys = 0;
    assert_rl_ok(rl_dispatch_init(&loop, &o, &d));
    assert_rl_ok(rl_dispatch_try_submit(d, "k", 1, NULL, 0));
    size_t n = 7;
    rl_dispatch_hot_key one;
    assert_rl_ok(rl_dispatch_hot_keys(d, &one, 1, &n));
    assert_int_equal(n, 0);
    assert_int_equal(rl_dispatch_hot_keys(NULL, &one, 1, &n), RL_EINVAL);
    assert_int_equal(rl_dispatch_hot_keys(d, NULL, 1, &n), RL_EINVAL);
    char json[4096];
    assert_rl_ok(rl_dispatch_stats_json(d, json, sizeof json, NULL));
    assert_non_null(strstr(json, "\"hot_keys\":{\"capacity\":0,\"followed\":0,\"rounds\":0,"
                                 "\"list\":[]}"));
    char prom[16384];
    assert_rl_ok(rl_dispatch_stats_prometheus(d, 4, prom, sizeof prom, NULL));
    assert_null(strstr(prom, "hot_key"));
    assert_rl_ok(rl_dispatch_close(d, RL_DISPATCH_DRAIN, NULL));
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hot_key_named_first),
        cmocka_unit_test(test_bound_100000_keys),
        cmocka_unit_test(test_keys_shown_safely),
        cmocka_unit_test(test_compact_bound_worst_keys),
        cmocka_unit_test(test_option),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
