/* SPDX-License-Identifier: BSD-2-Clause */
/* The ordered consumer with batches (dispatch.batch_max), on librdkafka's mock cluster: a
 * blocking batch_handler and an async_batch_handler completed from another thread, both with
 * failures inside batches (retried, the messages after them given again), checked per key (one
 * batch of a key at a time, successes in sequence order) and for commits (everything committed
 * at the end); and the refusals of the handler options. */
#define _POSIX_C_SOURCE 200809L
#include "consumer_test_util.h"

enum { PARTS = 4, KEYS = 12, PER_KEY = 60, BATCH_MAX = 16 };

typedef struct batch_ctx {
    checker ck;
    atomic_long batches, batched, failures, bad_completions, mixed;
    atomic_bool failed_once[KEYS][PER_KEY]; /* the first attempt of every 7th failed already */
    /* asynchronous: batches waiting for the completer thread */
    uv_mutex_t mu;
    uv_cond_t cv;
    struct pend *head, *tail;
    bool quit;
    uv_thread_t completer;
} batch_ctx;

typedef struct pend {
    rl_consumer_t *c;
    uint64_t ticket;
    size_t n, ran; /* messages in the batch; started (up to and with a failed one) */
    int key, status[BATCH_MAX];
    int64_t seq[BATCH_MAX];
    struct pend *next;
} pend;

/* Runs the batch's messages in order up to the first failure (every 7th sequence number fails
 * its first attempt); a success must be its key's next sequence number (a redelivery after
 * the retry may repeat one: counted as a duplicate). Returns how many it ran. */
static size_t run_batch(batch_ctx *x, const rd_kafka_message_t *const *msgs, size_t n, int *key,
                        int64_t *seqs, int *status)
{
    int k0 = -1;
    atomic_fetch_add(&x->batches, n > 1);
    atomic_fetch_add(&x->batched, n > 1 ? (long)n : 0);
    for (size_t i = 0; i < n; i++) {
        int kk;
        int64_t seq;
        if (!msg_parse(msgs[i], &kk, &seq) || kk < 0 || kk >= KEYS || seq < 0 || seq >= PER_KEY) {
            atomic_fetch_add(&x->ck.foreign, 1);
            continue;
        }
        if (k0 < 0) {
            k0 = kk;
            if (atomic_exchange(&x->ck.busy[kk], 1))
                atomic_fetch_add(&x->ck.overlaps, 1);
        } else if (kk != k0) {
            atomic_fetch_add(&x->mixed, 1); /* a batch holds one key */
        }
        seqs[i] = seq;
        if (seq % 7 == 3 && !atomic_exchange(&x->failed_once[kk][seq], true)) {
            atomic_fetch_add(&x->failures, 1);
            status[i] = -1;
            *key = k0;
            return i + 1;
        }
        int64_t next = atomic_load(&x->ck.next[kk]);
        if (seq < next) {
            atomic_fetch_add(&x->ck.duplicates, 1);
        } else {
            if (seq > next)
                atomic_fetch_add(&x->ck.violations, 1);
            atomic_store(&x->ck.next[kk], seq + 1);
        }
        atomic_fetch_add(&x->ck.handled, 1);
    }
    *key = k0;
    return n;
}

static int blocking_batch(rl_consumer_t *c, const rd_kafka_message_t *const *msgs, size_t n,
                          int *status)
{
    batch_ctx *x = ((cthread *)rl_consumer_get_data(c))->user;
    int key;
    int64_t seqs[RL_DISPATCH_BATCH_MAX];
    if (n > BATCH_MAX)
        atomic_fetch_add(&x->mixed, 1);
    run_batch(x, msgs, n, &key, seqs, status);
    if (key >= 0)
        atomic_store(&x->ck.busy[key], 0);
    return 0;
}

static void async_batch(rl_consumer_t *c, const rd_kafka_message_t *const *msgs, size_t n,
                        uint64_t ticket)
{
    batch_ctx *x = ((cthread *)rl_consumer_get_data(c))->user;
    pend *p = calloc(1, sizeof *p);
    assert_non_null(p);
    assert_true(n <= BATCH_MAX);
    p->c = c;
    p->ticket = ticket;
    p->n = n;
    p->ran = run_batch(x, msgs, n, &p->key, p->seq, p->status);
    uv_mutex_lock(&x->mu);
    if (x->tail)
        x->tail->next = p;
    else
        x->head = p;
    x->tail = p;
    uv_cond_signal(&x->cv);
    uv_mutex_unlock(&x->mu);
}

/* Completes the batches in the order they started: one status for a batch that did not fail
 * (rl_consumer_complete, for odd tickets), else one per message. */
static void completer_main(void *arg)
{
    batch_ctx *x = arg;
    uv_mutex_lock(&x->mu);
    for (;;) {
        while (!x->head && !x->quit)
            uv_cond_wait(&x->cv, &x->mu);
        if (!x->head)
            break;
        pend *p = x->head;
        x->head = p->next;
        if (!x->head)
            x->tail = NULL;
        uv_mutex_unlock(&x->mu);
        if (p->key >= 0)
            atomic_store(&x->ck.busy[p->key], 0);
        bool failed = p->ran && p->status[p->ran - 1];
        int rc = !failed && p->ticket % 2
                     ? rl_consumer_complete(p->c, p->ticket, 0)
                     : rl_consumer_complete_batch(p->c, p->ticket, p->status, p->n);
        if (rc)
            atomic_fetch_add(&x->bad_completions, 1);
        free(p);
        uv_mutex_lock(&x->mu);
    }
    uv_mutex_unlock(&x->mu);
}

static void batch_run(bool async, const char *topic, const char *group)
{
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, PARTS, 1), 0);
    producer p;
    producer_start(&p, &k);
    for (int s = 0; s < PER_KEY; s++)
        for (int key = 0; key < KEYS; key++)
            produce_seq(&p, topic, key, s);
    producer_flush(&p);

    batch_ctx *x = calloc(1, sizeof *x);
    assert_non_null(x);
    checker_init(&x->ck, KEYS);
    assert_int_equal(uv_mutex_init(&x->mu), 0);
    assert_int_equal(uv_cond_init(&x->cv), 0);
    if (async)
        assert_int_equal(uv_thread_create(&x->completer, completer_main, x), 0);
    const char *topics[] = {topic};
    cthread t;
    ct_init(&t, consumer_conf(&k, group, "cooperative-sticky"), topics, 1, NULL, x);
    t.opts.handler = NULL;
    if (async) {
        t.opts.async_batch_handler = async_batch;
        t.opts.dispatch.lanes = NULL; /* the default: many lanes */
        t.opts.dispatch.lane_count = 0;
    } else {
        t.opts.batch_handler = blocking_batch;
    }
    t.opts.dispatch.batch_max = BATCH_MAX;
    assert_rl_ok(ct_start(&t));
    WAIT_FOR(checker_complete(&x->ck, PER_KEY) == KEYS * PER_KEY, 120);
    ct_stop(&t);
    if (async) {
        uv_mutex_lock(&x->mu);
        x->quit = true;
        uv_cond_signal(&x->cv);
        uv_mutex_unlock(&x->mu);
        uv_thread_join(&x->completer);
    }
    print_message("%s batches: %ld batches of %ld messages, %ld failures, %ld duplicates\n",
                  async ? "asynchronous" : "blocking", atomic_load(&x->batches),
                  atomic_load(&x->batched), atomic_load(&x->failures),
                  atomic_load(&x->ck.duplicates));
    assert_int_equal(checker_complete(&x->ck, PER_KEY), KEYS * PER_KEY);
    assert_int_equal(atomic_load(&x->ck.violations), 0);
    assert_int_equal(atomic_load(&x->ck.overlaps), 0);
    assert_int_equal(atomic_load(&x->ck.foreign), 0);
    assert_int_equal(atomic_load(&x->mixed), 0);
    assert_int_equal(atomic_load(&x->bad_completions), 0);
    assert_true(atomic_load(&x->batches) > 0);
    assert_int_equal(atomic_load(&x->failures), KEYS * ((PER_KEY + 3) / 7));
    assert_int_equal(t.last.dead_lettered, 0);
    assert_int_equal(t.last.abandoned, 0);

    /* Everything is committed, as with one message per call. */
    int64_t committed[PARTS], low, high;
    committed_offsets(&k, group, topic, PARTS, committed);
    for (int i = 0; i < PARTS; i++) {
        assert_int_equal(rd_kafka_query_watermark_offsets(p.rk, topic, i, &low, &high, 10000), 0);
        if (high > 0) /* 12 keys may leave a partition empty: nothing to commit there */
            assert_int_equal(committed[i], high);
    }
    producer_stop(&p);
    ct_free(&t);
    checker_free(&x->ck);
    uv_cond_destroy(&x->cv);
    uv_mutex_destroy(&x->mu);
    free(x);
}

static void blocking_batches_keep_order_and_commit(void **state)
{
    (void)state;
    batch_run(false, "batch-blocking", "g-batch-blocking");
}

static void async_batches_keep_order_and_commit(void **state)
{
    (void)state;
    batch_run(true, "batch-async", "g-batch-async");
}

/* --- a revoke that abandons a batch in flight --- */

typedef struct held_batch {
    atomic_size_t n;         /* messages in the held batch, 0 until it starts */
    _Atomic uint64_t ticket; /* its ticket */
    atomic_int other_calls;  /* batches started after it (none may be) */
} held_batch;

static void hold_batch(rl_consumer_t *c, const rd_kafka_message_t *const *msgs, size_t n,
                       uint64_t ticket)
{
    (void)msgs;
    held_batch *h = ((cthread *)rl_consumer_get_data(c))->user;
    if (atomic_load(&h->n)) {
        atomic_fetch_add(&h->other_calls, 1);
        return;
    }
    atomic_store(&h->ticket, ticket);
    atomic_store(&h->n, n);
}

/* One key's 10 messages on one partition: a batch starts and is never completed. The close's
 * revoke waits revoke_timeout_ms, then abandons it: every message of the batch counts as
 * abandoned and stale, none as done (on the code that abandoned one job per ticket, the rest of
 * the batch ended done with the first one's completion), nothing is committed past it, and the
 * ticket answers RL_ESTALE afterwards. */
static void revoke_abandons_a_whole_batch(void **state)
{
    (void)state;
    const char *topic = "batch-abandon", *group = "g-batch-abandon";
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, 1, 1), 0);
    producer p;
    producer_start(&p, &k);
    for (int s = 0; s < 10; s++)
        produce_seq(&p, topic, 0, s);
    producer_flush(&p);
    producer_stop(&p);
    held_batch h;
    atomic_init(&h.n, 0);
    atomic_init(&h.ticket, 0);
    atomic_init(&h.other_calls, 0);
    const char *topics[] = {topic};
    cthread t;
    ct_init(&t, consumer_conf(&k, group, "cooperative-sticky"), topics, 1, NULL, &h);
    t.opts.handler = NULL;
    t.opts.async_batch_handler = hold_batch;
    t.opts.dispatch.lanes = NULL;
    t.opts.dispatch.lane_count = 0;
    t.opts.dispatch.batch_max = BATCH_MAX;
    t.opts.revoke_timeout_ms = 300;
    assert_rl_ok(ct_start(&t));
    WAIT_FOR(atomic_load(&h.n) > 0, 60);
    size_t n = atomic_load(&h.n);
    assert_true(n >= 1 && n <= 10);
    ct_stop(&t);
    print_message("held a batch of %zu: abandoned %" PRIu64 ", stale %" PRIu64 ", returned %" PRIu64
                  ", done %" PRIu64 "\n",
                  n, t.last.abandoned, t.last.stale, t.last.returned, t.last.done);
    assert_int_equal(t.last.abandoned, n);
    assert_int_equal(t.last.stale, n);
    assert_int_equal(t.last.done, 0);
    assert_int_equal(atomic_load(&h.other_calls), 0);
    assert_int_equal(rl_consumer_complete_batch(NULL, atomic_load(&h.ticket), (int[]){0}, 1),
                     RL_EINVAL);
    int64_t committed = 0;
    committed_offsets(&k, group, topic, 1, &committed);
    assert_true(committed <= 0); /* nothing past the abandoned batch's first offset */
    ct_free(&t);
}

static int never_called(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)c;
    (void)m;
    (void)attempt;
    return 0;
}

static int never_called_batch(rl_dispatcher_t *d, rl_dispatch_job *const *jobs, size_t n,
                              int *status)
{
    (void)d;
    (void)jobs;
    (void)n;
    (void)status;
    return 0;
}

static void batch_options_refused(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    const char *topics[] = {"t"};
    rl_consumer_options o;
    rl_consumer_t *c = NULL;

    rl_consumer_options_init(&o);
    o.conf = consumer_conf(&k, "g-refused", "range");
    o.topics = topics;
    o.topic_count = 1;
    o.handler = never_called;
    o.batch_handler = blocking_batch;
    assert_refused(rl_consumer_new(&loop, &o, &c), RL_EINVAL, "handler and batch_handler both set",
                   "exactly one");

    rl_consumer_options_init(&o);
    o.conf = consumer_conf(&k, "g-refused", "range");
    o.topics = topics;
    o.topic_count = 1;
    o.batch_handler = blocking_batch;
    o.dispatch.lane_count = 2;
    o.dispatch.batch_handler = never_called_batch;
    assert_refused(rl_consumer_new(&loop, &o, &c), RL_EINVAL, "dispatch.batch_handler set",
                   "the consumer's own");

    rl_consumer_options_init(&o);
    o.conf = consumer_conf(&k, "g-refused", "range");
    o.topics = topics;
    o.topic_count = 1;
    o.handler = never_called;
    o.dispatch.lane_count = 2;
    o.dispatch.batch_max = 8;
    assert_refused(rl_consumer_new(&loop, &o, &c), RL_EINVAL, "dispatch.batch_max 8 with handler",
                   "batch_handler");

    rl_consumer_options_init(&o);
    o.conf = consumer_conf(&k, "g-refused", "range");
    o.topics = topics;
    o.topic_count = 1;
    o.batch_handler = blocking_batch;
    o.dispatch.lane_count = 2;
    o.dispatch.batch_max = RL_DISPATCH_BATCH_MAX + 1;
    assert_refused(rl_consumer_new(&loop, &o, &c), RL_ERANGE, "dispatch.batch_max 1025",
                   "RL_DISPATCH_BATCH_MAX");
    assert_null(c);
    assert_int_equal(rl_consumer_complete_batch(NULL, 1, (int[]){0}, 1), RL_EINVAL);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(batch_options_refused),
        cmocka_unit_test(blocking_batches_keep_order_and_commit),
        cmocka_unit_test(async_batches_keep_order_and_commit),
        cmocka_unit_test(revoke_abandons_a_whole_batch),
    };
    if (getenv("RINGLANE_TEST_FILTER"))
        cmocka_set_test_filter(getenv("RINGLANE_TEST_FILTER"));
    return cmocka_run_group_tests(tests, suite_setup, suite_teardown);
}
