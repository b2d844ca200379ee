/* SPDX-License-Identifier: BSD-2-Clause */
/* The watermark's holder named, on librdkafka's mock cluster: a poison key (a handler that
 * fails for it every time, its retries parked) at offset 10 of a partition holds the watermark
 * while the 30 messages around it finish; the statistics on a timer name it (key, offset,
 * failures, parked) with an age that grows from one tick to a later one, in the JSON and the
 * Prometheus text (which passes the strict parser), and the dispatcher's hot keys name it too.
 * Once it heals, every message finishes and no partition has a holder. Waits wait for ticks
 * and counts (with a generous limit), never decide by time. */
#define _POSIX_C_SOURCE 200809L
#include "consumer_test_util.h"

#include <stdlib.h>

#define TOPIC "holder-poison"
#define MESSAGES 31 /* k0..k9, poison at offset 10, k10..k29 */

typedef struct watch {
    atomic_bool healed;
    atomic_int done;
    uv_mutex_t mu;
    uv_cond_t cv;
    int ticks;        /* under mu */
    char json[16384]; /* the last tick's text, under mu */
    char prom[65536]; /* the Prometheus text made at that tick, under mu */
} watch;

static int poison_handler(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)attempt;
    cthread *t = rl_consumer_get_data(c);
    watch *w = t->user;
    if (m->key_len == 6 && memcmp(m->key, "poison", 6) == 0 && !atomic_load(&w->healed))
        return 1;
    atomic_fetch_add(&w->done, 1);
    return 0;
}

/* On the loop thread, every tick: keeps the text, and the Prometheus text of the moment. */
static void on_stats(rl_consumer_t *c, const char *json, size_t len)
{
    cthread *t = rl_consumer_get_data(c);
    watch *w = t->user;
    uv_mutex_lock(&w->mu);
    snprintf(w->json, sizeof w->json, "%s", json);
    assert_true(len < sizeof w->json);
    assert_rl_ok(rl_consumer_stats_prometheus(c, 16, w->prom, sizeof w->prom, NULL));
    w->ticks++;
    uv_cond_broadcast(&w->cv);
    uv_mutex_unlock(&w->mu);
}

/* Waits for the next tick (at most 30 s: the test's limit, never reached when it works). */
static void next_tick(watch *w)
{
    uv_mutex_lock(&w->mu);
    int at = w->ticks;
    uint64_t end = uv_hrtime() + 30ull * 1000000000;
    while (w->ticks == at && uv_hrtime() < end)
        uv_cond_timedwait(&w->cv, &w->mu, 100 * 1000000);
    assert_true(w->ticks > at);
    uv_mutex_unlock(&w->mu);
}

#define POISON_HOLDER                                                                              \
    "\"holder\":{\"offset\":10,\"key\":\"poison\",\"key_encoding\":\"text\",\"key_len\":6,"        \
    "\"age_ms\":"

/* The tick's holder of partition 0, when it is the poison key parked for its retry: its age
 * and failures (true); else false. */
static bool poison_parked(watch *w, int64_t *age, unsigned *failures)
{
    uv_mutex_lock(&w->mu);
    const char *h = strstr(w->json, POISON_HOLDER);
    bool parked = false;
    if (h) {
        char *end, word[6] = "";
        *age = strtoll(h + strlen(POISON_HOLDER), &end, 10);
        parked = sscanf(end, ",\"failures\":%u,\"parked\":%5[a-z]", failures, word) == 2 &&
                 strcmp(word, "true") == 0;
    }
    uv_mutex_unlock(&w->mu);
    return parked;
}

static void poison_named(void **state)
{
    (void)state;
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, TOPIC, 1, 1), 0);
    producer p;
    producer_start(&p, &k);
    for (int i = 0; i < MESSAGES; i++) {
        char key[16];
        int n = i == 10 ? snprintf(key, sizeof key, "poison")
                        : snprintf(key, sizeof key, "k%d", i < 10 ? i : i - 1);
        produce_raw(&p, TOPIC, key, (size_t)n, "v", 1);
    }
    producer_flush(&p);
    producer_stop(&p);

    watch *w = calloc(1, sizeof *w);
    assert_non_null(w);
    atomic_init(&w->healed, false);
    atomic_init(&w->done, 0);
    assert_int_equal(uv_mutex_init(&w->mu), 0);
    assert_int_equal(uv_cond_init(&w->cv), 0);
    const char *topics[] = {TOPIC};
    cthread t;
    ct_init(&t, consumer_conf(&k, "g-holder", "cooperative-sticky"), topics, 1, poison_handler, w);
    t.opts.dispatch.max_attempts = 1000000; /* never dead-lettered: it holds the watermark */
    t.opts.dispatch.backoff_ms = 20;
    t.opts.dispatch.backoff_max_ms = 50;
    t.opts.stats_interval_ms = 200;
    t.opts.on_stats = on_stats;
    assert_rl_ok(ct_start(&t));

    /* Every other message finishes; the poison one is then the holder, parked between tries. */
    WAIT_FOR(atomic_load(&w->done) == MESSAGES - 1, 60);
    assert_int_equal(atomic_load(&w->done), MESSAGES - 1);
    int64_t age1 = -1, age2 = -1;
    unsigned f1 = 0, f2 = 0;
    for (int i = 0; i < 100 && !poison_parked(w, &age1, &f1); i++)
        next_tick(w);
    assert_true(poison_parked(w, &age1, &f1));
    assert_true(f1 >= 1);
    /* The same tick's Prometheus text names it, and so do the dispatcher's hot keys. */
    uv_mutex_lock(&w->mu);
    const char *labels =
        "{topic=\"" TOPIC "\",partition=\"0\",key=\"poison\",key_encoding=\"text\"}";
    char want[256];
    snprintf(want, sizeof want, "\nringlane_consumer_partition_holder_age_seconds%s ", labels);
    assert_non_null(strstr(w->prom, want));
    snprintf(want, sizeof want, "\nringlane_consumer_partition_holder_parked%s 1\n", labels);
    assert_non_null(strstr(w->prom, want));
    assert_non_null(strstr(w->prom, "\nringlane_dispatch_hot_key_jobs{key=\"poison\","));
    assert_non_null(strstr(w->json, "\"hot_keys\":{\"capacity\":64,\"followed\":1,"));
    assert_prometheus_strict(w->prom);
    uv_mutex_unlock(&w->mu);

    /* A later tick: still the holder, older, with more failures. */
    for (int i = 0; i < 100 && !(poison_parked(w, &age2, &f2) && age2 > age1); i++)
        next_tick(w);
    assert_true(poison_parked(w, &age2, &f2));
    assert_true(age2 > age1);
    assert_true(f2 >= f1);
    printf("# the poison key held the watermark at offset 10: %" PRId64 " ms then %" PRId64
           " ms, %u then %u failures\n",
           age1, age2, f1, f2);

    /* Healed: it finishes, and no partition has a holder any more. */
    atomic_store(&w->healed, true);
    WAIT_FOR(atomic_load(&w->done) == MESSAGES, 60);
    assert_int_equal(atomic_load(&w->done), MESSAGES);
    /* Its end reaches the window on the loop a moment after the handler returned. */
    for (int i = 0; i < 3000; i++) {
        assert_rl_ok(ct_command(&t, CMD_STATS, NULL));
        if (t.nparts == 1 && t.parts[0].holder_offset == -1)
            break;
        sleep_ms(10);
    }
    assert_int_equal(t.nparts, 1);
    assert_int_equal(t.parts[0].holder_offset, -1);
    assert_int_equal(t.parts[0].holder_age_ms, -1);
    assert_non_null(strstr(t.stats, "\"holder\":null"));
    ct_stop(&t);
    ct_free(&t);
    uv_cond_destroy(&w->cv);
    uv_mutex_destroy(&w->mu);
    free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(poison_named),
    };
    return cmocka_run_group_tests(tests, suite_setup, suite_teardown);
}
