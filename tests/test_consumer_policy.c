/* SPDX-License-Identifier: BSD-2-Clause */
/* The ordered consumer's rules on librdkafka's mock cluster (3 brokers on 127.0.0.1 in this
 * process): dead letters, the bad-input policy, and what a revoke waits for and commits. Every
 * wait here waits for an event (a rebalance, a commit); the time limits only stop a run that
 * hangs. */
#define _POSIX_C_SOURCE 200809L
#include "consumer_test_util.h"
#include "dispatch_util.h"

/* --- dead letters --- */

#define API_PRODUCE 0 /* the Kafka protocol's ApiKey of Produce */

typedef struct dlq_ctx {
    checker ck;
    atomic_int poison_calls;
} dlq_ctx;

static bool value_is(const rd_kafka_message_t *m, const char *text)
{
    return m->payload && m->len == strlen(text) && memcmp(m->payload, text, m->len) == 0;
}

static int poison_handler(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)attempt;
    dlq_ctx *x = ((cthread *)rl_consumer_get_data(c))->user;
    if (value_is(m, "poison")) {
        atomic_fetch_add(&x->poison_calls, 1);
        return -7;
    }
    checker_see(&x->ck, m);
    return 0;
}

typedef struct dlq_seen {
    int n;
    char key[32], value[32], topic[64], partition[16], offset[32], error[160], attempts[16];
    char trace[32];
} dlq_seen;

static void note_dead(const rd_kafka_message_t *m, void *arg)
{
    dlq_seen *d = arg;
    d->n++;
    snprintf(d->key, sizeof d->key, "%.*s", (int)m->key_len, (const char *)m->key);
    snprintf(d->value, sizeof d->value, "%.*s", (int)m->len, (const char *)m->payload);
    header_str(m, "ringlane.topic", d->topic, sizeof d->topic);
    header_str(m, "ringlane.partition", d->partition, sizeof d->partition);
    header_str(m, "ringlane.offset", d->offset, sizeof d->offset);
    header_str(m, "ringlane.error", d->error, sizeof d->error);
    header_str(m, "ringlane.attempts", d->attempts, sizeof d->attempts);
    header_str(m, "trace-id", d->trace, sizeof d->trace);
}

typedef struct find_offset {
    int64_t offset;
    bool poison_there;
} find_offset;

static void check_source(const rd_kafka_message_t *m, void *arg)
{
    find_offset *f = arg;
    if (m->offset == f->offset && value_is(m, "poison"))
        f->poison_there = true;
}

/* A message the handler always fails is retried max_attempts times, then produced to the
 * dead-letter topic with its key, value and headers plus where it came from and why; its key's
 * later messages run after it, and its offset is committed once the dead letter is delivered. */
static void poison_goes_to_dlq(void **state)
{
    (void)state;
    const char *topic = "poison", *group = "g-poison";
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, 2, 1), 0);
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, "poison.dlq", 1, 1), 0);
    enum { KEYS = 10, PER_KEY = 20, POISON_KEY = 3 };
    producer p;
    producer_start(&p, &k);
    for (int s = 0; s < PER_KEY; s++) {
        for (int key = 0; key < KEYS; key++) {
            produce_seq(&p, topic, key, s);
            if (key == POISON_KEY && s == PER_KEY / 2 - 1) {
                char kk[16];
                int kl = msg_key(key, kk, sizeof kk);
                rd_kafka_headers_t *h = rd_kafka_headers_new(1);
                rd_kafka_header_add(h, "trace-id", -1, "abc-123", -1);
                assert_int_equal(
                    rd_kafka_producev(p.rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(kk, (size_t)kl),
                                      RD_KAFKA_V_VALUE("poison", 6), RD_KAFKA_V_HEADERS(h),
                                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
                    0);
            }
        }
    }
    producer_flush(&p);

    dlq_ctx x;
    checker_init(&x.ck, KEYS);
    atomic_init(&x.poison_calls, 0);
    const char *topics[] = {topic};
    cthread t;
    ct_init(&t, consumer_conf(&k, group, "cooperative-sticky"), topics, 1, poison_handler, &x);
    t.opts.dispatch.max_attempts = 3;
    assert_rl_ok(ct_start(&t));
    WAIT_FOR(checker_complete(&x.ck, PER_KEY) == KEYS * PER_KEY && ct_dead_letters(&t) == 1, 60);
    ct_stop(&t);
    assert_int_equal(checker_complete(&x.ck, PER_KEY), KEYS * PER_KEY);
    assert_int_equal(atomic_load(&x.ck.violations), 0);
    assert_int_equal(atomic_load(&x.poison_calls), 3);
    assert_int_equal(t.dead_letters, 1);
    assert_int_equal(t.last.dead_lettered, 1);

    dlq_seen d = {0};
    assert_int_equal(read_topic(&k, "poison.dlq", 1, note_dead, &d), 1);
    assert_string_equal(d.key, "k3");
    assert_string_equal(d.value, "poison");
    assert_string_equal(d.topic, topic);
    assert_string_equal(d.attempts, "3");
    assert_string_equal(d.trace, "abc-123"); /* the original headers travel along */
    assert_non_null(strstr(d.error, "handler failed 3 times, last result -7"));
    int32_t part = (int32_t)atoi(d.partition);
    rl_kafka_partitioner_t *rp;
    assert_rl_ok(rl_kafka_partitioner_new(NULL, &rp));
    int32_t want;
    assert_rl_ok(rl_kafka_partitioner_partition(rp, "k3", 2, 2, &want));
    rl_kafka_partitioner_destroy(rp);
    assert_int_equal(part, want);
    find_offset f = {.offset = strtoll(d.offset, NULL, 10), .poison_there = false};
    read_topic(&k, topic, 2, check_source, &f);
    assert_true(f.poison_there); /* the headers point at the message itself */

    /* Everything, the poison included, is committed. */
    int64_t committed[2], low, high;
    committed_offsets(&k, group, topic, 2, committed);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(rd_kafka_query_watermark_offsets(p.rk, topic, i, &low, &high, 10000), 0);
        assert_int_equal(committed[i], high);
    }
    producer_stop(&p);
    ct_free(&t);
    checker_free(&x.ck);
}

/* When each dead-letter producer was replaced (on_error says so), in seconds (now_s). */
static double restarts_at[8];
static atomic_int restarts_seen;

static void note_restart(rl_consumer_t *c, rd_kafka_resp_err_t err, const char *reason)
{
    (void)c;
    (void)err;
    if (strstr(reason, "dead-letter producer: fatal error") && strstr(reason, "replaced")) {
        int i = atomic_fetch_add(&restarts_seen, 1);
        if (i < 8)
            restarts_at[i] = now_s();
    }
}

/* The default dead-letter producer is idempotent: a Produce answered OUT_OF_ORDER_SEQUENCE_NUMBER
 * is a fatal error for it, and it fails every produce from then on. The consumer replaces it by
 * a new one made from the same configuration and produces the waiting dead letter again, at
 * most once per dlq_retry_ms. Here the first three producers each meet one such answer (one
 * Produce each: one dead letter): three restarts, each at least dlq_retry_ms after the one
 * before (less 5 ms for the clocks' rounding; without the bound they follow as fast as a new
 * producer meets its answer, 10 ms to 1.2 s measured), then the dead letter is delivered and
 * counted once, and everything is committed. The old consumer retried on the dead producer
 * forever: no dead letter, commits stuck below the poison. */
/* Values of the dead-letter topic in order: its only partition, read from the start. */
typedef struct dlq_order {
    int n;
    char values[16][32];
} dlq_order;

static void note_order(const rd_kafka_message_t *m, void *arg)
{
    dlq_order *o = arg;
    if (o->n < 16)
        snprintf(o->values[o->n], sizeof o->values[0], "%.*s", (int)m->len,
                 (const char *)m->payload);
    o->n++;
}

static int poisons_handler(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)attempt;
    dlq_ctx *x = ((cthread *)rl_consumer_get_data(c))->user;
    if (m->len >= 6 && memcmp(m->payload, "poison", 6) == 0)
        return -7; /* "poison-0" .. "poison-4": every one dead-lettered */
    checker_see(&x->ck, m);
    return 0;
}

/* A key's dead letters waiting for a replaced producer go to the new one in the order they
 * died. Five poisons of one key; the first producer meets a fatal error at its first Produce,
 * so the five wait for its replacement (dlq_retry_ms 1 s later). They were kept newest first
 * and reached the topic reversed (an outside stress round: offsets 1189, 1088, ... 486). */
static void dead_letters_keep_their_order_across_a_replacement(void **state)
{
    (void)state;
    const char *topic = "poison-order", *group = "g-poison-order";
    enum { POISONS = 5 };
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, 1, 1), 0);
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, "poison-order.dlq", 1, 1), 0);
    producer p;
    producer_start(&p, &k);
    char kk[16];
    int kl = msg_key(1, kk, sizeof kk);
    for (int i = 0; i < POISONS; i++) {
        char v[16];
        int vl = snprintf(v, sizeof v, "poison-%d", i);
        produce_raw(&p, topic, kk, (size_t)kl, v, (size_t)vl);
    }
    producer_flush(&p);
    rd_kafka_resp_err_t fatal = RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER;
    rd_kafka_mock_push_request_errors_array(k.mock, API_PRODUCE, 1, &fatal);
    dlq_ctx x;
    checker_init(&x.ck, 2);
    atomic_init(&x.poison_calls, 0);
    const char *topics[] = {topic};
    cthread t;
    ct_init(&t, consumer_conf(&k, group, "cooperative-sticky"), topics, 1, poisons_handler, &x);
    t.opts.dispatch.max_attempts = 1;
    t.opts.dlq_retry_ms = 1000;
    assert_rl_ok(ct_start(&t));
    WAIT_FOR(ct_dead_letters(&t) == POISONS, 60);
    assert_rl_ok(ct_command(&t, CMD_STATS, NULL));
    ct_stop(&t);
    assert_int_equal(t.dead_letters, POISONS);
    assert_int_equal(t.last.dlq_producer_restarts, 1);
    dlq_order o = {0};
    assert_int_equal(read_topic(&k, "poison-order.dlq", 1, note_order, &o), POISONS);
    for (int i = 0; i < POISONS; i++) {
        char want[16];
        snprintf(want, sizeof want, "poison-%d", i);
        assert_string_equal(o.values[i], want);
    }
    producer_stop(&p);
    ct_free(&t);
    checker_free(&x.ck);
}

static void dlq_producer_replaced_after_a_fatal_error(void **state)
{
    (void)state;
    const char *topic = "poison-fatal", *group = "g-poison-fatal";
    enum { KEYS = 6, PER_KEY = 10, POISON_KEY = 2, FATAL = 3, RETRY_MS = 1500 };
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, 2, 1), 0);
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, "poison-fatal.dlq", 1, 1), 0);
    producer p;
    producer_start(&p, &k);
    for (int s = 0; s < PER_KEY; s++)
        for (int key = 0; key < KEYS; key++) {
            produce_seq(&p, topic, key, s);
            if (key == POISON_KEY && s == PER_KEY / 2) {
                char kk[16];
                int kl = msg_key(key, kk, sizeof kk);
                produce_raw(&p, topic, kk, (size_t)kl, "poison", 6);
            }
        }
    producer_flush(&p);
    /* From now on only the dead-letter producers produce. */
    rd_kafka_resp_err_t errs[FATAL];
    for (int i = 0; i < FATAL; i++)
        errs[i] = RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER;
    rd_kafka_mock_push_request_errors_array(k.mock, API_PRODUCE, FATAL, errs);

    dlq_ctx x;
    checker_init(&x.ck, KEYS);
    atomic_init(&x.poison_calls, 0);
    const char *topics[] = {topic};
    cthread t;
    ct_init(&t, consumer_conf(&k, group, "cooperative-sticky"), topics, 1, poison_handler, &x);
    t.opts.dispatch.max_attempts = 2;
    t.opts.dlq_retry_ms = RETRY_MS;
    t.error_hook = note_restart;
    atomic_store(&restarts_seen, 0);
    assert_rl_ok(ct_start(&t));
    WAIT_FOR(checker_complete(&x.ck, PER_KEY) == KEYS * PER_KEY && ct_dead_letters(&t) == 1, 60);
    assert_rl_ok(ct_command(&t, CMD_STATS, NULL));
    ct_stop(&t);
    assert_int_equal(checker_complete(&x.ck, PER_KEY), KEYS * PER_KEY);
    assert_int_equal(atomic_load(&x.ck.violations), 0);
    assert_int_equal(t.dead_letters, 1);
    assert_int_equal(t.last.dead_lettered, 1);
    assert_int_equal(t.last.dlq_producer_restarts, FATAL);
    assert_non_null(strstr(t.stats, ",\"dlq_producer_restarts\":3,"));
    assert_int_equal(atomic_load(&restarts_seen), FATAL);
    for (int i = 1; i < FATAL; i++)
        if (restarts_at[i] - restarts_at[i - 1] < (RETRY_MS - 5) / 1000.0)
            fail_msg("restart %d came %.3f s after the one before, under dlq_retry_ms", i + 1,
                     restarts_at[i] - restarts_at[i - 1]);

    dlq_seen d = {0};
    assert_true(read_topic(&k, "poison-fatal.dlq", 1, note_dead, &d) >= 1);
    assert_string_equal(d.value, "poison");
    int64_t committed[2], low, high;
    committed_offsets(&k, group, topic, 2, committed);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(rd_kafka_query_watermark_offsets(p.rk, topic, i, &low, &high, 10000), 0);
        assert_int_equal(committed[i], high);
    }
    producer_stop(&p);
    ct_free(&t);
    checker_free(&x.ck);
}

/* With no lane at all (each removed through rl_consumer_dispatcher), the consumer keeps the
 * messages it polls, in order, and hands none to a handler (the dispatcher answers RL_ESTATE);
 * once a lane is added they flow again, in order, and everything is committed. */
static void no_lane_keeps_messages_until_one_is_added(void **state)
{
    (void)state;
    const char *topic = "no-lane", *group = "g-no-lane";
    enum { KEYS = 8, PER_KEY = 25, ALL = KEYS * PER_KEY };
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, 2, 1), 0);
    dlq_ctx x;
    checker_init(&x.ck, KEYS);
    atomic_init(&x.poison_calls, 0);
    const char *topics[] = {topic};
    cthread t;
    ct_init(&t, consumer_conf(&k, group, "cooperative-sticky"), topics, 1, poison_handler, &x);
    t.opts.dispatch.lane_count = 1; /* "a" */
    assert_rl_ok(ct_start(&t));
    WAIT_FOR(ct_assigned(&t) == 2, 30);
    assert_int_equal(ct_assigned(&t), 2);
    assert_rl_ok(ct_command(&t, CMD_REMOVE_LANE, "a"));

    producer p;
    producer_start(&p, &k);
    for (int s = 0; s < PER_KEY; s++)
        for (int key = 0; key < KEYS; key++)
            produce_seq(&p, topic, key, s);
    producer_flush(&p);
    WAIT_FOR((ct_command(&t, CMD_STATS, NULL), t.last.consumed == ALL), 30);
    assert_int_equal(t.last.consumed, ALL);
    assert_int_equal(t.last.dispatched, 0);
    assert_int_equal(atomic_load(&x.ck.handled), 0);
    assert_non_null(strstr(t.stats, "\"lanes\":0,"));

    assert_rl_ok(ct_command(&t, CMD_ADD_LANE, "b"));
    WAIT_FOR(checker_complete(&x.ck, PER_KEY) == ALL, 30);
    ct_stop(&t);
    assert_int_equal(checker_complete(&x.ck, PER_KEY), ALL);
    assert_int_equal(atomic_load(&x.ck.violations), 0);
    assert_int_equal(atomic_load(&x.ck.duplicates), 0);
    int64_t committed[2], low, high;
    committed_offsets(&k, group, topic, 2, committed);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(rd_kafka_query_watermark_offsets(p.rk, topic, i, &low, &high, 10000), 0);
        assert_int_equal(committed[i], high);
    }
    producer_stop(&p);
    ct_free(&t);
    checker_free(&x.ck);
}

/* --- bad input --- */

typedef struct bad_ctx {
    uv_mutex_t mu;
    char seen[64][32]; /* values of the keyless messages the handler saw, in order */
    int nseen;
    atomic_int keyed, oversized_seen;
} bad_ctx;

static int bad_handler(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)attempt;
    bad_ctx *x = ((cthread *)rl_consumer_get_data(c))->user;
    if (m->key_len > 64)
        atomic_fetch_add(&x->oversized_seen, 1);
    if (!m->key || !m->key_len) {
        uv_mutex_lock(&x->mu);
        if (x->nseen < 64)
            snprintf(x->seen[x->nseen++], sizeof x->seen[0], "%.*s", (int)m->len,
                     (const char *)m->payload);
        uv_mutex_unlock(&x->mu);
    } else {
        atomic_fetch_add(&x->keyed, 1);
    }
    return 0;
}

static int keyless_seen(bad_ctx *x)
{
    uv_mutex_lock(&x->mu);
    int n = x->nseen;
    uv_mutex_unlock(&x->mu);
    return n;
}

typedef struct reasons {
    int n, no_key, too_long;
} reasons;

static void count_reason(const rd_kafka_message_t *m, void *arg)
{
    reasons *r = arg;
    char e[160];
    header_str(m, "ringlane.error", e, sizeof e);
    r->n++;
    r->no_key += strstr(e, "no key") != NULL;
    r->too_long += strstr(e, "over max_key_len 64") != NULL;
}

/* The documented policy: keyless messages (NULL or empty key) run by partition, in partition
 * order (or go to the dead-letter topic with RL_CONSUMER_NULL_KEY_DEAD_LETTER); a key over
 * max_key_len goes to the dead-letter topic; the handler never sees such a key. */
static void malformed_messages_follow_the_policy(void **state)
{
    (void)state;
    const char *topic = "bad-input";
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, 1, 1), 0);
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, "bad-input.dlq", 1, 1), 0);
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, "bad-input-nokey", 1, 1), 0);
    producer p;
    producer_start(&p, &k);
    char big[200];
    memset(big, 'x', sizeof big);
    enum { NULLS = 12 };
    for (int i = 0; i < NULLS; i++) {
        char v[16];
        int vl = snprintf(v, sizeof v, "null %d", i);
        if (i == 5)
            produce_raw(&p, topic, "", 0, v, (size_t)vl); /* empty, not NULL */
        else
            produce_raw(&p, topic, NULL, 0, v, (size_t)vl);
        produce_seq(&p, topic, i, 0);
        if (i == 7)
            produce_raw(&p, topic, big, sizeof big, "oversized", 9);
    }
    producer_flush(&p);
    const long total = 2 * NULLS + 1;

    const char *topics[] = {topic};
    for (int policy = 0; policy < 2; policy++) {
        bad_ctx x = {.nseen = 0};
        assert_int_equal(uv_mutex_init(&x.mu), 0);
        atomic_init(&x.keyed, 0);
        atomic_init(&x.oversized_seen, 0);
        cthread t;
        ct_init(&t,
                consumer_conf(&k, policy ? "g-bad-dead" : "g-bad-partition", "cooperative-sticky"),
                topics, 1, bad_handler, &x);
        t.opts.max_key_len = 64;
        t.opts.null_key =
            policy ? RL_CONSUMER_NULL_KEY_DEAD_LETTER : RL_CONSUMER_NULL_KEY_PARTITION;
        if (policy)
            t.opts.dlq_topic = "bad-input-nokey";
        assert_rl_ok(ct_start(&t));
        long want_dead = policy ? NULLS + 1 : 1;
        WAIT_FOR(atomic_load(&x.keyed) == NULLS && ct_dead_letters(&t) == want_dead &&
                     (policy || keyless_seen(&x) == NULLS),
                 60);
        ct_stop(&t);
        assert_int_equal(atomic_load(&x.keyed), NULLS);
        assert_int_equal(atomic_load(&x.oversized_seen), 0);
        assert_int_equal(t.dead_letters, want_dead);
        assert_int_equal(t.last.null_keys, NULLS);
        assert_int_equal(t.last.bad_keys, 1);
        if (policy) {
            assert_int_equal(x.nseen, 0);
        } else {
            assert_int_equal(x.nseen, NULLS);
            for (int i = 0; i < NULLS; i++) { /* one partition: its order, exactly */
                char want[16];
                snprintf(want, sizeof want, "null %d", i);
                assert_string_equal(x.seen[i], want);
            }
        }
        int64_t committed;
        committed_offsets(&k, policy ? "g-bad-dead" : "g-bad-partition", topic, 1, &committed);
        assert_int_equal(committed, total);
        ct_free(&t);
        uv_mutex_destroy(&x.mu);
    }
    reasons r = {0};
    read_topic(&k, "bad-input.dlq", 1, count_reason, &r);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.too_long, 1);
    reasons r2 = {0};
    read_topic(&k, "bad-input-nokey", 1, count_reason, &r2);
    assert_int_equal(r2.n, NULLS + 1);
    assert_int_equal(r2.no_key, NULLS);
    assert_int_equal(r2.too_long, 1);
    producer_stop(&p);
}

/* --- revoke --- */

typedef struct revoke_ctx {
    gate g;
    atomic_int done;
    atomic_bool done_at[10]; /* by offset */
} revoke_ctx;

static int gated_handler(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)attempt;
    revoke_ctx *x = ((cthread *)rl_consumer_get_data(c))->user;
    int key;
    int64_t seq;
    if (msg_parse(m, &key, &seq) && key == 3)
        gate_pass(&x->g);
    atomic_fetch_add(&x->done, 1);
    if (m->offset >= 0 && m->offset < 10)
        atomic_store(&x->done_at[m->offset], true);
    return 0;
}

static int64_t committed_one(const char *group, const char *topic)
{
    int64_t off;
    committed_offsets(&k, group, topic, 1, &off);
    return off;
}

/* Offsets 0..9 of one partition, ten keys on four lanes; the handler of offset 3 waits at a
 * gate. The commit stops at 3 while the others on other lanes finish. Closing revokes the
 * partition: with a long revoke_timeout_ms the revoke waits for offset 3 and commits past it;
 * with a short one it commits 3 and lets go, the late completion counts for nothing, and the
 * next owner reads 3..9 again. */
static void revoke_run(const char *topic, const char *group, uint32_t revoke_timeout_ms)
{
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, 1, 1), 0);
    producer p;
    producer_start(&p, &k);
    for (int key = 0; key < 10; key++)
        produce_seq(&p, topic, key, 0);
    producer_flush(&p);
    producer_stop(&p);

    revoke_ctx x;
    gate_init(&x.g, false);
    atomic_init(&x.done, 0);
    for (int i = 0; i < 10; i++)
        atomic_init(&x.done_at[i], false);
    const char *topics[] = {topic};
    cthread t;
    ct_init(&t, consumer_conf(&k, group, "cooperative-sticky"), topics, 1, gated_handler, &x);
    t.opts.revoke_timeout_ms = revoke_timeout_ms;
    t.opts.commit_interval_ms = 50;
    assert_rl_ok(ct_start(&t));
    gate_wait_arrived(&x.g, 1);
    /* 0..2 are done (they were queued before 3 on every lane); of 4..9, those on other lanes
     * finish too, those queued behind 3 on its lane wait. */
    WAIT_FOR(committed_one(group, topic) == 3, 30);
    assert_int_equal(committed_one(group, topic), 3); /* never past the unfinished one */
    int done_before = atomic_load(&x.done);
    assert_true(done_before >= 3 && done_before <= 9);

    ct_close_async(&t);
    if (revoke_timeout_ms > 2000) {
        sleep_ms(300);
        assert_int_equal(committed_one(group, topic), 3); /* the revoke is still waiting */
        gate_set(&x.g, true);
        ct_join(&t);
        /* The revoke waited for offset 3 and committed past it, up to the first event it took
         * back from the lanes unstarted (queued behind 3 on its lane), if any. */
        int64_t c = committed_one(group, topic);
        assert_true(c >= 4);
        for (int64_t o = 0; o < c; o++)
            assert_true(atomic_load(&x.done_at[o]));
        if (c < 10)
            assert_false(atomic_load(&x.done_at[c]));
        assert_int_equal(t.last.revoke_timeouts, 0);
        assert_int_equal(t.last.stale, 0);
    } else {
        /* The revoke gives up waiting; the consumer's close then waits for the handler. */
        WAIT_FOR(ct_assigned(&t) == 0, 30);
        assert_int_equal(ct_assigned(&t), 0);
        assert_int_equal(committed_one(group, topic), 3);
        gate_set(&x.g, true);
        ct_join(&t);
        assert_int_equal(committed_one(group, topic), 3);
        assert_int_equal(t.last.revoke_timeouts, 1);
        assert_int_equal(t.last.stale, 1);

        /* The next owner starts at 3 and handles offset 3 again (its late completion counts
         * for nothing: not in the offset map), and of 4..9 those the first consumer had not
         * completed when it committed (queued behind 3 on its lane, taken back by the revoke);
         * the others the map lets it skip. done_at[3] is set by the late completion: offset
         * 3 is counted as not completed. */
        bool first[10];
        int again = 0;
        for (int o = 0; o < 10; o++) {
            first[o] = o != 3 && atomic_load(&x.done_at[o]);
            again += o >= 3 && !first[o];
            atomic_store(&x.done_at[o], false);
        }
        assert_true(again < 7); /* some of 4..9 had completed on other lanes */
        atomic_store(&x.done, 0);
        cthread t2;
        ct_init(&t2, consumer_conf(&k, group, "cooperative-sticky"), topics, 1, gated_handler, &x);
        assert_rl_ok(ct_start(&t2));
        WAIT_FOR(atomic_load(&x.done) == again, 60);
        WAIT_FOR(committed_one(group, topic) == 10, 30);
        ct_stop(&t2);
        assert_int_equal(atomic_load(&x.done), again);
        for (int o = 3; o < 10; o++)
            assert_int_equal(atomic_load(&x.done_at[o]), !first[o]);
        assert_int_equal(t2.last.skipped, 7 - again);
        assert_int_equal(committed_one(group, topic), 10);
        ct_free(&t2);
    }
    ct_free(&t);
    gate_destroy(&x.g);
}

static void revoke_waits_for_in_flight(void **state)
{
    (void)state;
    revoke_run("revoke-wait", "g-revoke-wait", 30000);
}

static void revoke_timeout_commits_the_watermark_only(void **state)
{
    (void)state;
    revoke_run("revoke-timeout", "g-revoke-timeout", 300);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(poison_goes_to_dlq),
        cmocka_unit_test(dlq_producer_replaced_after_a_fatal_error),
        cmocka_unit_test(dead_letters_keep_their_order_across_a_replacement),
        cmocka_unit_test(no_lane_keeps_messages_until_one_is_added),
        cmocka_unit_test(malformed_messages_follow_the_policy),
        cmocka_unit_test(revoke_waits_for_in_flight),
        cmocka_unit_test(revoke_timeout_commits_the_watermark_only),
    };
    if (getenv("RINGLANE_TEST_FILTER"))
        cmocka_set_test_filter(getenv("RINGLANE_TEST_FILTER"));
    return cmocka_run_group_tests(tests, suite_setup, suite_teardown);
}
