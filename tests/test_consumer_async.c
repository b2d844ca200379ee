/* SPDX-License-Identifier: BSD-2-Clause */
/* The ordered consumer with an asynchronous handler, on librdkafka's mock cluster (3 brokers on
 * 127.0.0.1 in this process): messages that finish later, from a timer on the consumer's loop
 * or from another thread; order per key; commits that never pass an unfinished message; the
 * deferred revoke (it lets the loop run, waits up to revoke_timeout_ms, then abandons what is
 * still in flight: those tickets answer RL_ESTALE and are never committed); dead letters after
 * max_attempts asynchronous failures and after job_timeout_ms. Every wait here waits for an
 * event; the time limits only stop a run that hangs. */
#define _POSIX_C_SOURCE 200809L
#include "consumer_test_util.h"

/* --- order, from a timer on the loop or from another thread --- */

enum { FROM_TIMER = 0, FROM_THREAD = 1 };

typedef struct finish {
    uv_timer_t timer;
    rl_consumer_t *c;
    uint64_t ticket;
    int key, status;
    int64_t seq;
    struct finish *next;
} finish;

typedef struct order_ctx {
    checker ck;
    int mode;
    atomic_long failures, bad_completions;
    /* FROM_THREAD: the completer's queue */
    uv_mutex_t mu;
    uv_cond_t cv;
    finish *head, *tail;
    bool quit;
    uv_thread_t completer;
} order_ctx;

/* The end of an attempt: the key is free again; a success must be the key's next sequence
 * number (a redelivery may repeat an earlier one). */
static void order_finish(order_ctx *x, finish *f)
{
    atomic_store(&x->ck.busy[f->key], 0);
    if (f->status == 0) {
        int64_t next = atomic_load(&x->ck.next[f->key]);
        if (f->seq < next) {
            atomic_fetch_add(&x->ck.duplicates, 1);
        } else {
            if (f->seq > next)
                atomic_fetch_add(&x->ck.violations, 1);
            atomic_store(&x->ck.next[f->key], f->seq + 1);
        }
        atomic_fetch_add(&x->ck.handled, 1);
    }
    if (rl_consumer_complete(f->c, f->ticket, f->status) != 0)
        atomic_fetch_add(&x->bad_completions, 1);
}

static void on_finish_closed(uv_handle_t *h)
{
    free(h->data);
}

static void on_finish_timer(uv_timer_t *t)
{
    finish *f = t->data;
    order_ctx *x = ((cthread *)rl_consumer_get_data(f->c))->user;
    order_finish(x, f);
    uv_close((uv_handle_t *)t, on_finish_closed);
}

static void completer_main(void *arg)
{
    order_ctx *x = arg;
    uv_mutex_lock(&x->mu);
    for (;;) {
        while (!x->head && !x->quit)
            uv_cond_wait(&x->cv, &x->mu);
        if (!x->head)
            break;
        finish *f = x->head;
        x->head = f->next;
        if (!x->head)
            x->tail = NULL;
        uv_mutex_unlock(&x->mu);
        order_finish(x, f);
        free(f);
        uv_mutex_lock(&x->mu);
    }
    uv_mutex_unlock(&x->mu);
}

/* Starts a message: one attempt in flight per key (an overlap is a violation); every 7th
 * sequence number fails its first attempt (retried, in order). It finishes 1 ms later from a
 * timer on this loop, or on the completer thread. */
static void order_async(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt,
                        uint64_t ticket)
{
    cthread *t = rl_consumer_get_data(c);
    order_ctx *x = t->user;
    int key;
    int64_t seq;
    if (!msg_parse(m, &key, &seq) || key < 0 || key >= x->ck.keys) {
        atomic_fetch_add(&x->ck.foreign, 1);
        rl_consumer_complete(c, ticket, 0);
        return;
    }
    if (atomic_exchange(&x->ck.busy[key], 1))
        atomic_fetch_add(&x->ck.overlaps, 1);
    finish *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->c = c;
    f->ticket = ticket;
    f->key = key;
    f->seq = seq;
    f->status = seq % 7 == 3 && attempt == 1 ? -1 : 0;
    if (f->status)
        atomic_fetch_add(&x->failures, 1);
    if (x->mode == FROM_TIMER) {
        assert_int_equal(uv_timer_init(&t->loop, &f->timer), 0);
        f->timer.data = f;
        assert_int_equal(uv_timer_start(&f->timer, on_finish_timer, 1, 0), 0);
        return;
    }
    uv_mutex_lock(&x->mu);
    if (x->tail)
        x->tail->next = f;
    else
        x->head = f;
    x->tail = f;
    uv_cond_signal(&x->cv);
    uv_mutex_unlock(&x->mu);
}

/* tight: librdkafka stops fetching at 100 queued messages (queued.min.messages) and the
 * consumer keeps at most 8 refused messages a partition before it pauses it, so fetching stops
 * and restarts many times: the consumer's restarts (a seek to where the partition is, see
 * consumer/fetch_restart.c) must lose and repeat nothing. */
static void order_run(int mode, const char *topic, const char *group, bool tight)
{
    enum { PARTS = 4, KEYS = 50, PER_KEY = 40 };
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, PARTS, 1), 0);
    producer p;
    producer_start(&p, &k);
    for (int s = 0; s < PER_KEY; s++)
        for (int key = 0; key < KEYS; key++)
            produce_seq(&p, topic, key, s);
    producer_flush(&p);

    order_ctx x = {.mode = mode};
    checker_init(&x.ck, KEYS);
    atomic_init(&x.failures, 0);
    atomic_init(&x.bad_completions, 0);
    assert_int_equal(uv_mutex_init(&x.mu), 0);
    assert_int_equal(uv_cond_init(&x.cv), 0);
    if (mode == FROM_THREAD)
        assert_int_equal(uv_thread_create(&x.completer, completer_main, &x), 0);
    const char *topics[] = {topic};
    cthread t;
    rd_kafka_conf_t *conf = consumer_conf(&k, group, "cooperative-sticky");
    char err[256];
    if (tight)
        assert_int_equal(rd_kafka_conf_set(conf, "queued.min.messages", "100", err, sizeof err),
                         RD_KAFKA_CONF_OK);
    ct_init(&t, conf, topics, 1, NULL, &x);
    t.opts.handler = NULL;
    t.opts.async_handler = order_async;
    t.opts.dispatch.lanes = NULL; /* the default: many lanes */
    t.opts.dispatch.lane_count = 0;
    if (tight) {
        t.opts.pending_max = 8;
        t.opts.dispatch.lane_capacity = 2;
    }
    assert_rl_ok(ct_start(&t));
    WAIT_FOR(checker_complete(&x.ck, PER_KEY) == KEYS * PER_KEY, 120);
    ct_stop(&t);
    if (mode == FROM_THREAD) {
        uv_mutex_lock(&x.mu);
        x.quit = true;
        uv_cond_signal(&x.cv);
        uv_mutex_unlock(&x.mu);
        uv_thread_join(&x.completer);
    }
    assert_int_equal(checker_complete(&x.ck, PER_KEY), KEYS * PER_KEY);
    assert_int_equal(atomic_load(&x.ck.violations), 0);
    assert_int_equal(atomic_load(&x.ck.overlaps), 0);
    assert_int_equal(atomic_load(&x.ck.foreign), 0);
    assert_int_equal(atomic_load(&x.bad_completions), 0);
    assert_true(atomic_load(&x.failures) >= KEYS * (PER_KEY / 7));
    assert_int_equal(t.last.abandoned, 0);
    assert_int_equal(t.last.stale, 0);
    assert_int_equal(t.last.dead_lettered, 0);
    if (tight) {
        print_message("fetch restarts %" PRIu64 ", pauses %" PRIu64 ", refetched %" PRIu64 "\n",
                      t.last.fetch_restarts, t.last.pauses, t.last.refetched);
        assert_true(t.last.fetch_restarts > 0);
        assert_true(t.last.resumes > 0);
    }

    /* Everything is committed. */
    int64_t committed[PARTS], low, high;
    committed_offsets(&k, group, topic, PARTS, committed);
    for (int i = 0; i < PARTS; i++) {
        assert_int_equal(rd_kafka_query_watermark_offsets(p.rk, topic, i, &low, &high, 10000), 0);
        assert_int_equal(committed[i], high);
    }
    producer_stop(&p);
    ct_free(&t);
    checker_free(&x.ck);
    uv_cond_destroy(&x.cv);
    uv_mutex_destroy(&x.mu);
}

static void order_completed_from_a_loop_timer(void **state)
{
    (void)state;
    order_run(FROM_TIMER, "async-timer", "g-async-timer", false);
}

static void order_completed_from_another_thread(void **state)
{
    (void)state;
    order_run(FROM_THREAD, "async-thread", "g-async-thread", false);
}

static void order_through_fetch_restarts_and_pauses(void **state)
{
    (void)state;
    order_run(FROM_TIMER, "async-restart", "g-async-restart", true);
}

/* --- commits and the deferred revoke --- */

typedef struct hold_ctx {
    atomic_int done;
    atomic_bool done_at[10]; /* by offset */
    atomic_bool release;     /* the test lets the held message finish */
    atomic_int held;         /* offset 3 has started (and is held) */
    bool hold_once;          /* loop thread: offset 3 is held only the first time */
    uint64_t held_ticket;    /* loop thread */
    int held_rc;             /* rl_consumer_complete's answer for the held ticket (loop) */
    uv_timer_t poll;         /* looks at `release` every 10 ms, on the consumer's loop */
    rl_consumer_t *c;
} hold_ctx;

static void hold_closed(uv_handle_t *h)
{
    (void)h;
}

static void hold_poll(uv_timer_t *tm)
{
    hold_ctx *x = tm->data;
    if (!atomic_load(&x->release))
        return;
    x->held_rc = rl_consumer_complete(x->c, x->held_ticket, 0);
    if (x->held_rc == 0) {
        atomic_store(&x->done_at[3], true);
        atomic_fetch_add(&x->done, 1);
    }
    uv_close((uv_handle_t *)tm, hold_closed);
}

/* Offset 3 (key 3) is held the first time: it finishes only when the test sets `release`,
 * from a timer on the consumer's loop. The others finish inside the call. */
static void hold_async(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt,
                       uint64_t ticket)
{
    (void)attempt;
    cthread *t = rl_consumer_get_data(c);
    hold_ctx *x = t->user;
    if (m->offset == 3 && !x->hold_once) {
        x->hold_once = true;
        x->held_ticket = ticket;
        x->c = c;
        assert_int_equal(uv_timer_init(&t->loop, &x->poll), 0);
        x->poll.data = x;
        assert_int_equal(uv_timer_start(&x->poll, hold_poll, 10, 10), 0);
        atomic_store(&x->held, 1);
        return;
    }
    if (m->offset >= 0 && m->offset < 10)
        atomic_store(&x->done_at[m->offset], true);
    atomic_fetch_add(&x->done, 1);
    assert_int_equal(rl_consumer_complete(c, ticket, 0), 0);
}

/* The revoke gave up on the held message: its ticket is stale now. */
static void hold_revoked(rl_consumer_t *c, int event, const rd_kafka_topic_partition_list_t *l)
{
    (void)l;
    hold_ctx *x = ((cthread *)rl_consumer_get_data(c))->user;
    if (event != RL_CONSUMER_REVOKED || !x->c || uv_is_closing((uv_handle_t *)&x->poll))
        return;
    x->held_rc = rl_consumer_complete(c, x->held_ticket, 0);
    uv_close((uv_handle_t *)&x->poll, hold_closed);
}

static int64_t committed_one(const char *group, const char *topic)
{
    int64_t off;
    committed_offsets(&k, group, topic, 1, &off);
    return off;
}

/* Offsets 0..9 of one partition, ten keys on four lanes; offset 3 is held. The commit stops at
 * 3. Closing revokes the partition, and the revoke is deferred: with a long revoke_timeout_ms
 * the loop runs on, the held message finishes from a timer on it, and the revoke commits past
 * it; with a short one the revoke abandons it (its ticket answers RL_ESTALE), commits 3, and
 * the next owner reads 3..9 again. */
static void revoke_run(const char *topic, const char *group, uint32_t revoke_timeout_ms)
{
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, 1, 1), 0);
    producer p;
    producer_start(&p, &k);
    for (int key = 0; key < 10; key++)
        produce_seq(&p, topic, key, 0);
    producer_flush(&p);
    producer_stop(&p);

    hold_ctx x = {.held_rc = 1};
    atomic_init(&x.done, 0);
    atomic_init(&x.release, false);
    atomic_init(&x.held, 0);
    for (int i = 0; i < 10; i++)
        atomic_init(&x.done_at[i], false);
    const char *topics[] = {topic};
    cthread t;
    ct_init(&t, consumer_conf(&k, group, "cooperative-sticky"), topics, 1, NULL, &x);
    t.opts.handler = NULL;
    t.opts.async_handler = hold_async;
    t.opts.revoke_timeout_ms = revoke_timeout_ms;
    t.opts.commit_interval_ms = 50;
    t.rebalance_hook = hold_revoked;
    assert_rl_ok(ct_start(&t));
    WAIT_FOR(atomic_load(&x.held), 60);
    assert_true(atomic_load(&x.held));
    /* 0..2 are done; of 4..9, those on other lanes finish too, those behind 3 on its lane
     * wait. The commit never passes the unfinished one. */
    WAIT_FOR(committed_one(group, topic) == 3, 30);
    assert_int_equal(committed_one(group, topic), 3);
    int done_before = atomic_load(&x.done);
    assert_true(done_before >= 3 && done_before <= 9);

    ct_close_async(&t);
    if (revoke_timeout_ms > 2000) {
        sleep_ms(300);
        assert_int_equal(committed_one(group, topic), 3); /* the revoke is still waiting */
        assert_int_equal(ct_assigned(&t), 1);
        atomic_store(&x.release, true); /* finished by a timer on the loop the revoke left free */
        ct_join(&t);
        assert_int_equal(x.held_rc, 0);
        int64_t c = committed_one(group, topic);
        assert_true(c >= 4);
        for (int64_t o = 0; o < c; o++)
            assert_true(atomic_load(&x.done_at[o]));
        if (c < 10)
            assert_false(atomic_load(&x.done_at[c]));
        assert_int_equal(t.last.revoke_timeouts, 0);
        assert_int_equal(t.last.abandoned, 0);
        assert_int_equal(t.last.stale, 0);
    } else {
        ct_join(&t);
        assert_int_equal(x.held_rc, RL_ESTALE); /* completed after the revoke: refused */
        assert_false(atomic_load(&x.done_at[3]));
        assert_int_equal(committed_one(group, topic), 3);
        assert_int_equal(t.last.revoke_timeouts, 1);
        assert_int_equal(t.last.abandoned, 1);
        assert_int_equal(t.last.stale, 1);

        /* The next owner starts at 3 and handles offset 3 again (abandoned: not in the
         * offset map), and of 4..9 those the first consumer had not completed (queued behind 3
         * on its lane, taken back by the revoke); the others the map lets it skip. */
        bool first[10];
        int again = 0;
        for (int o = 0; o < 10; o++) {
            first[o] = atomic_load(&x.done_at[o]);
            again += o >= 3 && !first[o];
            atomic_store(&x.done_at[o], false);
        }
        assert_true(again < 7); /* some of 4..9 had completed on other lanes */
        atomic_store(&x.done, 0);
        cthread t2;
        ct_init(&t2, consumer_conf(&k, group, "cooperative-sticky"), topics, 1, NULL, &x);
        t2.opts.handler = NULL;
        t2.opts.async_handler = hold_async;
        assert_rl_ok(ct_start(&t2));
        WAIT_FOR(atomic_load(&x.done) == again, 60);
        WAIT_FOR(committed_one(group, topic) == 10, 30);
        ct_stop(&t2);
        assert_int_equal(atomic_load(&x.done), again);
        for (int o = 3; o < 10; o++)
            assert_int_equal(atomic_load(&x.done_at[o]), !first[o]);
        assert_int_equal(t2.last.skipped, 7 - again);
        assert_int_equal(t2.last.offset_map_rejected, 0);
        assert_int_equal(committed_one(group, topic), 10);
        ct_free(&t2);
    }
    ct_free(&t);
}

static void revoke_waits_for_async_completions(void **state)
{
    (void)state;
    revoke_run("async-revoke-wait", "g-async-revoke-wait", 30000);
}

static void revoke_timeout_abandons_async_messages(void **state)
{
    (void)state;
    revoke_run("async-revoke-timeout", "g-async-revoke-timeout", 300);
}

/* --- dead letters --- */

typedef struct dead_ctx {
    checker ck;
    atomic_int poison_calls, hang_calls;
    uint64_t first_hang_ticket; /* loop thread writes; read after a dead letter is counted */
    atomic_bool hang_ticket_set;
} dead_ctx;

static bool value_is(const rd_kafka_message_t *m, const char *text)
{
    return m->payload && m->len == strlen(text) && memcmp(m->payload, text, m->len) == 0;
}

/* "poison" fails (asynchronously, inside the call); "hang" never finishes (job_timeout_ms
 * fails it); the others succeed. */
static void dead_async(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt,
                       uint64_t ticket)
{
    (void)attempt;
    dead_ctx *x = ((cthread *)rl_consumer_get_data(c))->user;
    if (value_is(m, "poison")) {
        atomic_fetch_add(&x->poison_calls, 1);
        assert_int_equal(rl_consumer_complete(c, ticket, -7), 0);
        return;
    }
    if (value_is(m, "hang")) {
        if (atomic_fetch_add(&x->hang_calls, 1) == 0) {
            x->first_hang_ticket = ticket;
            atomic_store(&x->hang_ticket_set, true);
        }
        return;
    }
    checker_see(&x->ck, m);
    assert_int_equal(rl_consumer_complete(c, ticket, 0), 0);
}

typedef struct dead_seen {
    int n, poison, hang;
    char poison_error[160], hang_error[160], poison_attempts[16];
} dead_seen;

static void note_dead(const rd_kafka_message_t *m, void *arg)
{
    dead_seen *d = arg;
    d->n++;
    if (value_is(m, "poison")) {
        d->poison++;
        header_str(m, "ringlane.error", d->poison_error, sizeof d->poison_error);
        header_str(m, "ringlane.attempts", d->poison_attempts, sizeof d->poison_attempts);
    } else if (value_is(m, "hang")) {
        d->hang++;
        header_str(m, "ringlane.error", d->hang_error, sizeof d->hang_error);
    }
}

static void produce_value(producer *p, const char *topic, int key, const char *value)
{
    char kk[16];
    int kl = msg_key(key, kk, sizeof kk);
    produce_raw(p, topic, kk, (size_t)kl, value, strlen(value));
}

/* Asynchronous failures are retried max_attempts times and dead-lettered, like a blocking
 * handler's; an attempt that is never completed fails after job_timeout_ms (its ticket then
 * answers RL_ESTALE). Both offsets are committed once the dead letters are delivered. */
static void async_failures_go_to_dlq(void **state)
{
    (void)state;
    const char *topic = "async-poison", *group = "g-async-poison";
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, 2, 1), 0);
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, "async-poison.dlq", 1, 1), 0);
    enum { KEYS = 10, PER_KEY = 20 };
    producer p;
    producer_start(&p, &k);
    for (int s = 0; s < PER_KEY; s++) {
        for (int key = 0; key < KEYS; key++) {
            produce_seq(&p, topic, key, s);
            if (s == PER_KEY / 2 && key == 3)
                produce_value(&p, topic, key, "poison");
            if (s == PER_KEY / 2 && key == 5)
                produce_value(&p, topic, key, "hang");
        }
    }
    producer_flush(&p);

    dead_ctx x = {.first_hang_ticket = 0};
    checker_init(&x.ck, KEYS);
    atomic_init(&x.poison_calls, 0);
    atomic_init(&x.hang_calls, 0);
    atomic_init(&x.hang_ticket_set, false);
    const char *topics[] = {topic};
    cthread t;
    ct_init(&t, consumer_conf(&k, group, "cooperative-sticky"), topics, 1, NULL, &x);
    t.opts.handler = NULL;
    t.opts.async_handler = dead_async;
    t.opts.dispatch.max_attempts = 3;
    t.opts.dispatch.job_timeout_ms = 100;
    assert_rl_ok(ct_start(&t));
    WAIT_FOR(checker_complete(&x.ck, PER_KEY) == KEYS * PER_KEY && ct_dead_letters(&t) == 2, 60);
    /* The first hang attempt timed out long ago: its ticket is void. */
    assert_true(atomic_load(&x.hang_ticket_set));
    assert_int_equal(rl_consumer_complete(t.c, x.first_hang_ticket, 0), RL_ESTALE);
    ct_stop(&t);
    assert_int_equal(checker_complete(&x.ck, PER_KEY), KEYS * PER_KEY);
    assert_int_equal(atomic_load(&x.ck.violations), 0);
    assert_int_equal(atomic_load(&x.poison_calls), 3);
    assert_int_equal(atomic_load(&x.hang_calls), 3);
    assert_int_equal(t.dead_letters, 2);
    assert_int_equal(t.last.dead_lettered, 2);

    dead_seen d = {0};
    assert_int_equal(read_topic(&k, "async-poison.dlq", 1, note_dead, &d), 2);
    assert_int_equal(d.poison, 1);
    assert_int_equal(d.hang, 1);
    assert_non_null(strstr(d.poison_error, "handler failed 3 times, last result -7"));
    assert_string_equal(d.poison_attempts, "3");
    char want[64];
    snprintf(want, sizeof want, "handler failed 3 times, last result %d", RL_ETIMEDOUT);
    assert_non_null(strstr(d.hang_error, want));

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

/* --- defaults --- */

static void complete_at_once(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt,
                             uint64_t ticket)
{
    (void)m;
    (void)attempt;
    rl_consumer_complete(c, ticket, 0);
}

static void on_closed(rl_consumer_t *c)
{
    *(int *)rl_consumer_get_data(c) += 1;
}

static int stats_ticks;
static size_t stats_len, stats_parts;
static char stats_head[64];
static bool stats_has_dispatcher;

static void stats_seen(rl_consumer_t *c, const char *json, size_t len)
{
    rl_consumer_stats s;
    assert_int_equal(rl_consumer_stats_get(c, &s, NULL, 0, &stats_parts), 0);
    stats_len = len;
    snprintf(stats_head, sizeof stats_head, "%s", json);
    stats_has_dispatcher = strstr(json, "\"dispatcher\":{\"lanes\":65536,") != NULL;
    stats_ticks++;
}

/* An asynchronous consumer given no lanes gets RL_CONSUMER_ASYNC_LANES of them; a ticket it
 * never gave answers RL_ESTALE. (Its rl_dispatch_take_tag holds every lane's mutex at once:
 * more than ThreadSanitizer's deadlock detector can track, hence detect_deadlocks=0 for this
 * suite in tests/CMakeLists.txt.) */
static void async_consumer_defaults(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    static const char *const topics[] = {"async.defaults"};
    int closed = 0;
    rl_consumer_options o;
    rl_consumer_options_init(&o);
    o.conf = consumer_conf(&k, "g-async-defaults", "cooperative-sticky");
    o.topics = topics;
    o.topic_count = 1;
    o.async_handler = complete_at_once;
    o.dispatch.job_timeout_ms = 1000;
    o.data = &closed;
    o.stats_interval_ms = 5;
    o.on_stats = stats_seen;
    rl_consumer_t *c = NULL;
    assert_int_equal(rl_consumer_new(&loop, &o, &c), 0);
    /* The compact text on the timer stays within its stated bound at 65,536 lanes: the
     * consumer's 1.1 KB, 340 bytes and the topic per partition, the dispatcher's 8.4 KB. */
    stats_ticks = 0;
    while (stats_ticks < 2)
        uv_run(&loop, UV_RUN_ONCE);
    assert_true(stats_has_dispatcher);
    assert_memory_equal(stats_head, "{\"partitions\":", 14);
    assert_true(stats_len <= 1100 + stats_parts * (340 + strlen(topics[0]) + 2) + 8368);
    printf("# compact statistics at %u lanes: %zu bytes, %zu partitions\n", RL_CONSUMER_ASYNC_LANES,
           stats_len, stats_parts);
    rl_dispatch_stats ds;
    assert_int_equal(rl_dispatch_stats_get(rl_consumer_dispatcher(c), &ds, NULL, 0, NULL), 0);
    assert_int_equal(ds.lanes, RL_CONSUMER_ASYNC_LANES);
    /* Its statistics list the lanes holding a message (none yet), not all 65,536: the whole
     * list would be about 15 MB (rl_dispatch_stats_json's). */
    size_t need = 0;
    assert_int_equal(rl_consumer_stats_json(c, NULL, 0, &need), RL_ERANGE);
    char *json = malloc(need + 1);
    assert_non_null(json);
    assert_int_equal(rl_consumer_stats_json(c, json, need + 1, NULL), 0);
    assert_non_null(strstr(json, "\"lane_list\":\"busy\",\"lanes_busy\":0,\"lane\":[]"));
    assert_true(need < 4096);
    free(json);
    size_t whole = 0;
    assert_int_equal(rl_dispatch_stats_json(rl_consumer_dispatcher(c), NULL, 0, &whole), RL_ERANGE);
    assert_true(whole > (size_t)RL_CONSUMER_ASYNC_LANES * 100);
    assert_int_equal(rl_consumer_complete(c, 0, 0), RL_EINVAL);
    assert_int_equal(rl_consumer_complete(c, 12345, 0), RL_ESTALE);
    assert_int_equal(rl_consumer_close(c, on_closed), 0);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(closed, 1);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(async_consumer_defaults),
        cmocka_unit_test(order_completed_from_a_loop_timer),
        cmocka_unit_test(order_completed_from_another_thread),
        cmocka_unit_test(order_through_fetch_restarts_and_pauses),
        cmocka_unit_test(revoke_waits_for_async_completions),
        cmocka_unit_test(revoke_timeout_abandons_async_messages),
        cmocka_unit_test(async_failures_go_to_dlq),
    };
    if (getenv("RINGLANE_TEST_FILTER"))
        cmocka_set_test_filter(getenv("RINGLANE_TEST_FILTER"));
    return cmocka_run_group_tests(tests, suite_setup, suite_teardown);
}
