/* SPDX-License-Identifier: BSD-2-Clause */
/* The growth fence (growth_fence) on librdkafka's mock cluster, which cannot add partitions:
 * a topic made with 6 partitions, producers on 4 of them (ringlane.partitions.used=4), a growth
 * record written to __ringlane_growth with the codec (announced), producers switched to 6, the
 * record sealed at the old partitions' high watermarks of the switch. Two consumers of one
 * group (range: one holds old partitions 0-2, the other 3 and the new 4-5). The old partitions'
 * messages are handled asynchronously and end only when the test opens a gate: the gate opens
 * once a message of a new partition was handled, or 4 s after the seal, whichever comes first,
 * so without the fence moved keys' new messages run before their old ones. An independent
 * checker (every sequence number of every key seen, in order) counts violations and losses.
 * Fence on: 0 violations, nothing lost; fence off: violations (counted and printed). Also: an
 * unusable record holds its growth's partitions whole (reported) until it is replaced; a new
 * partition without a committed offset starts at its beginning under auto.offset.reset=latest;
 * the fence's throughput when nothing grew, on and off (printed, not asserted). */
#define _POSIX_C_SOURCE 200809L
#include "consumer_test_util.h"
#include "growth_record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PARTS 6
#define OLD 4
#define KEYS 300
#define N1 20 /* per key, routed over OLD */
#define N2 20 /* per key, routed over PARTS */

/* --- producers and the record --- */

static void producer_start_used(producer *p, const cluster *kc, int used)
{
    rl_kafka_partitioner_options o;
    rl_kafka_partitioner_options_init(&o);
    char v[16];
    snprintf(v, sizeof v, "%d", used);
    assert_rl_ok(rl_kafka_partitioner_option_set(&o, "partitions.used", v, NULL, 0));
    producer_start_with(p, kc, &o);
}

/* Writes key = value (NULL: a tombstone) to __ringlane_growth, as `ringlane grow` would (it
 * writes in a transaction; read_committed reads a plain write the same). */
static void record_write(const cluster *kc, const char *key, const char *value)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    conf_set_ok(conf, "bootstrap.servers", kc->bootstraps);
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    assert_non_null(rk);
    assert_int_equal(rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(RL__GROWTH_TOPIC),
                                       RD_KAFKA_V_PARTITION(0), RD_KAFKA_V_KEY(key, strlen(key)),
                                       RD_KAFKA_V_VALUE((void *)value, value ? strlen(value) : 0),
                                       RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
                     0);
    assert_int_equal(rd_kafka_flush(rk, 10000), 0);
    rd_kafka_destroy(rk);
}

/* The record of topic's growth from -> to in `state` (points: from offsets when sealed). */
static void record_growth(const cluster *kc, const char *topic, uint32_t from, uint32_t to,
                          rl__growth_state state, const int64_t *points)
{
    rl__growth_record r;
    memset(&r, 0, sizeof r);
    snprintf(r.topic, sizeof r.topic, "%s", topic);
    r.from = from;
    r.to = to;
    r.profile = "balanced";
    r.vnodes = rl__growth_record_vnodes("balanced", RL_VNODES_PROFILE);
    assert_rl_ok(rl__growth_ring_fingerprint(r.profile, r.vnodes, from, &r.ring_from));
    assert_rl_ok(rl__growth_ring_fingerprint(r.profile, r.vnodes, to, &r.ring_to));
    r.nonce = 0x5f0c1e9a77b2d403u;
    r.state = state;
    int64_t copy[PARTS];
    if (state == RL__GROWTH_SEALED) {
        memcpy(copy, points, from * sizeof *copy);
        r.points = copy;
    }
    const char *why = "";
    char *value = rl__growth_value_format(&r, &why);
    if (!value)
        fail_msg("record: %s", why);
    char key[RL__GROWTH_KEY_MAX + 1];
    assert_true(rl__growth_key_format(topic, from, to, key, sizeof key) > 0);
    record_write(kc, key, value);
    free(value);
}

/* The messages in partitions [first, last) of topic: their high watermarks, summed. */
static int64_t messages_in(const char *topic, int first, int last)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    conf_set_ok(conf, "bootstrap.servers", k.bootstraps);
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    assert_non_null(rk);
    int64_t sum = 0, lo, hi;
    for (int p = first; p < last; p++) {
        assert_int_equal(rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi, 5000), 0);
        sum += hi;
    }
    rd_kafka_destroy(rk);
    return sum;
}

/* --- the checker: every sequence number of every key, in the order handlers ran --- */

typedef struct seqcheck {
    uv_mutex_t mu;
    unsigned char seen[KEYS][N1 + N2];
    int64_t max[KEYS];
    long violations, duplicates, handled, foreign, new_handled;
    double first_new_s, gate_s;
} seqcheck;

static void seqcheck_init(seqcheck *s)
{
    memset(s, 0, sizeof *s);
    assert_int_equal(uv_mutex_init(&s->mu), 0);
    for (int i = 0; i < KEYS; i++)
        s->max[i] = -1;
}

/* A message handled now: a new sequence number below one seen before is a violation. */
static void seqcheck_see(seqcheck *s, const rd_kafka_message_t *m)
{
    int key;
    int64_t seq;
    uv_mutex_lock(&s->mu);
    if (!msg_parse(m, &key, &seq) || key < 0 || key >= KEYS || seq < 0 || seq >= N1 + N2) {
        s->foreign++;
    } else if (s->seen[key][seq]) {
        s->duplicates++;
    } else {
        s->seen[key][seq] = 1;
        if (seq < s->max[key])
            s->violations++;
        else
            s->max[key] = seq;
        s->handled++;
        if (m->partition >= OLD && s->new_handled++ == 0)
            s->first_new_s = now_s();
    }
    uv_mutex_unlock(&s->mu);
}

static long seqcheck_lost(seqcheck *s, int per_key)
{
    long lost = 0;
    uv_mutex_lock(&s->mu);
    for (int i = 0; i < KEYS; i++)
        for (int q = 0; q < per_key; q++)
            lost += !s->seen[i][q];
    uv_mutex_unlock(&s->mu);
    return lost;
}

static long seqcheck_get(seqcheck *s, long *field)
{
    uv_mutex_lock(&s->mu);
    long v = *field;
    uv_mutex_unlock(&s->mu);
    return v;
}

/* --- the gate: old partitions' messages end when it opens --- */

typedef struct gated {
    rl_consumer_t *c;
    rd_kafka_message_t *msg;
    uint64_t ticket;
} gated;

typedef struct run {
    seqcheck ck;
    atomic_long errors_stalled; /* on_error calls that said a wait stalled */
    atomic_long errors_late;    /* on_error calls that named a late producer */
    atomic_long errors_read;    /* on_error calls that said a read of the records failed */
    uv_mutex_t mu;
    bool open;
    gated *waiting;
    size_t n, cap;
    atomic_long errors_refused;
} run;

static void gated_async(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt,
                        uint64_t ticket)
{
    (void)attempt;
    cthread *t = rl_consumer_get_data(c);
    run *r = t->user;
    if (m->partition < OLD) {
        uv_mutex_lock(&r->mu);
        if (!r->open) {
            if (r->n == r->cap) {
                r->cap = r->cap ? r->cap * 2 : 1024;
                r->waiting = realloc(r->waiting, r->cap * sizeof *r->waiting);
                assert_non_null(r->waiting);
            }
            /* The consumer keeps m while the ticket is valid: enough to parse it later. */
            r->waiting[r->n++] = (gated){c, (rd_kafka_message_t *)m, ticket};
            uv_mutex_unlock(&r->mu);
            return;
        }
        uv_mutex_unlock(&r->mu);
    }
    seqcheck_see(&r->ck, m);
    rl_consumer_complete(c, ticket, 0);
}

static void gate_open(run *r)
{
    uv_mutex_lock(&r->mu);
    r->open = true;
    gated *w = r->waiting;
    size_t n = r->n;
    r->waiting = NULL;
    r->n = r->cap = 0;
    r->ck.gate_s = now_s();
    /* Seen before their completion is sent: the messages stay the consumer's until then. */
    for (size_t i = 0; i < n; i++)
        seqcheck_see(&r->ck, w[i].msg);
    uv_mutex_unlock(&r->mu);
    for (size_t i = 0; i < n; i++)
        rl_consumer_complete(w[i].c, w[i].ticket, 0);
    free(w);
}

static void count_refused(rl_consumer_t *c, rd_kafka_resp_err_t err, const char *reason)
{
    (void)err;
    cthread *t = rl_consumer_get_data(c);
    run *r = t->user;
    if (strstr(reason, "growth fence") && strstr(reason, "refused"))
        atomic_fetch_add(&r->errors_refused, 1);
    if (strstr(reason, "growth fence") && strstr(reason, "has stayed below the growth point"))
        atomic_fetch_add(&r->errors_stalled, 1);
    if (strstr(reason, "growth fence") && strstr(reason, "a producer still routes over"))
        atomic_fetch_add(&r->errors_late, 1);
    if (strstr(reason, "growth fence") && strstr(reason, "retried every second"))
        atomic_fetch_add(&r->errors_read, 1);
}

/* The mock cluster with the topic (PARTS partitions) and the records' topic, and a run with its
 * gate open (old partitions' messages end at once) or closed. */
static void growth_setup(const char *topic, run *r, bool open)
{
    cluster_start(&k, 1);
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, PARTS, 1), 0);
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, RL__GROWTH_TOPIC, 1, 1), 0);
    memset(r, 0, sizeof *r);
    seqcheck_init(&r->ck);
    assert_int_equal(uv_mutex_init(&r->mu), 0);
    atomic_init(&r->errors_refused, 0);
    atomic_init(&r->errors_stalled, 0);
    atomic_init(&r->errors_late, 0);
    atomic_init(&r->errors_read, 0);
    r->open = open;
}

static void growth_teardown(run *r)
{
    uv_mutex_destroy(&r->mu);
    uv_mutex_destroy(&r->ck.mu);
    cluster_stop(&k);
}

/* A producer on the OLD partitions writes sequence number `seq` of every key; points gets the
 * old partitions' high watermarks after it (the growth points of a seal made then). */
static void produce_before_growth(producer *a, const char *topic, int seq, int64_t *points)
{
    producer_start_used(a, &k, OLD);
    for (int key = 0; key < KEYS; key++)
        produce_seq(a, topic, key, seq);
    producer_flush(a);
    int64_t lo;
    for (int p = 0; p < OLD; p++)
        assert_int_equal(rd_kafka_query_watermark_offsets(a->rk, topic, p, &lo, &points[p], 5000),
                         0);
}

static uint32_t stall_ms = 600000; /* the consumers' growth_stall_ms in the next run */

static void fence_consumer(cthread *t, const cluster *kc, const char *group, const char *topic,
                           const char *const *topics, run *r, int fence)
{
    (void)topic;
    rd_kafka_conf_t *conf = consumer_conf(kc, group, "range");
    ct_init(t, conf, topics, 1, NULL, r);
    t->opts.handler = NULL;
    t->opts.async_handler = gated_async;
    t->opts.dispatch.lanes = NULL;
    t->opts.dispatch.lane_count = 0;
    t->opts.growth_fence = fence;
    t->opts.growth_reread_ms = 300;
    t->opts.growth_stall_ms = stall_ms;
    t->error_hook = count_refused;
}

static uint64_t stat_of(cthread *t, size_t field_offset)
{
    /* The counters (rl_consumer_stats_get); the JSON beside them may be cut (RL_ERANGE) when
     * many of the 65,536 lanes are busy. */
    int rc = ct_command(t, CMD_STATS, NULL);
    assert_true(rc == 0 || rc == RL_ERANGE);
    return *(const uint64_t *)((const char *)&t->last + field_offset);
}
#define STAT(t, field) stat_of(t, offsetof(rl_consumer_stats, field))

/* One run of the growth: fence on or off. Returns the violations. */
static long growth_run(int fence)
{
    /* The keys the growth moved, by the producers' rings. */
    rl_ring_t *r4 = ref_partition_ring("balanced", RL_VNODES_PROFILE, OLD);
    rl_ring_t *r6 = ref_partition_ring("balanced", RL_VNODES_PROFILE, PARTS);
    int moved = 0;
    for (int key = 0; key < KEYS; key++) {
        char kb[16];
        int kl = msg_key(key, kb, sizeof kb);
        moved += ref_partition(r4, kb, (size_t)kl) != ref_partition(r6, kb, (size_t)kl);
    }
    rl_ring_free(r4);
    rl_ring_free(r6);

    const char *topic = "grow";
    run r;
    growth_setup(topic, &r, false);

    /* The consumers join before anything is written: an eager rebalance while old
     * messages wait for the gate would wait revoke_timeout_ms for them. */
    const char *topics[] = {topic};
    cthread c1, c2;
    char group[32];
    snprintf(group, sizeof group, "g-fence-%d-%u", fence, (unsigned)stall_ms);
    fence_consumer(&c1, &k, group, topic, topics, &r, fence);
    fence_consumer(&c2, &k, group, topic, topics, &r, fence);
    assert_rl_ok(ct_start(&c1));
    assert_rl_ok(ct_start(&c2));
    /* Range gives each 3 (one holds old partitions only); under load a member may drop out
     * of the group and rejoin first, so only that both hold some is waited for. */
    WAIT_FOR(ct_assigned(&c1) > 0 && ct_assigned(&c2) > 0 &&
                 ct_assigned(&c1) + ct_assigned(&c2) == PARTS,
             120);
    assert_true(ct_assigned(&c1) > 0 && ct_assigned(&c2) > 0);
    assert_int_equal(ct_assigned(&c1) + ct_assigned(&c2), PARTS);

    /* Before the growth: every key over the 4 old partitions. */
    producer a;
    producer_start_used(&a, &k, OLD);
    for (int s = 0; s < N1; s++)
        for (int key = 0; key < KEYS; key++)
            produce_seq(&a, topic, key, s);
    producer_flush(&a);
    int64_t points[OLD], lo;
    for (int p = 0; p < OLD; p++)
        assert_int_equal(rd_kafka_query_watermark_offsets(a.rk, topic, p, &lo, &points[p], 5000),
                         0);
    producer_stop(&a);
    record_growth(&k, topic, OLD, PARTS, RL__GROWTH_ANNOUNCED, NULL);
    if (fence) /* every consumer has read the announcement before producers route over 6 */
        WAIT_FOR(STAT(&c1, growth_records) == 1 && STAT(&c2, growth_records) == 1, 30);

    /* The switch: every key over the 6 partitions. */
    producer b;
    producer_start_used(&b, &k, PARTS);
    for (int s = N1; s < N1 + N2; s++)
        for (int key = 0; key < KEYS; key++)
            produce_seq(&b, topic, key, s);
    producer_flush(&b);
    producer_stop(&b);
    record_growth(&k, topic, OLD, PARTS, RL__GROWTH_SEALED, points);

    /* The gate: open once a moved key's new message ran, or after 4 s. With a short
     * growth_stall_ms the old partitions' commits stay put behind the closed gate: the held
     * messages go on once they stalled, and the gate opens when every one of them went (some
     * then wait in lanes behind a gated old message of a key that shares the lane). */
    if (stall_ms < 600000)
        WAIT_FOR(STAT(&c1, growth_released_by_stall) + STAT(&c2, growth_released_by_stall) >=
                     (uint64_t)moved * N2,
                 60);
    else
        WAIT_FOR(seqcheck_get(&r.ck, &r.ck.new_handled) > 0, 4);
    long new_before_gate = seqcheck_get(&r.ck, &r.ck.new_handled);
    gate_open(&r);
    WAIT_FOR(seqcheck_get(&r.ck, &r.ck.handled) == KEYS * (N1 + N2), 120);
    uint64_t held = STAT(&c1, growth_held) + STAT(&c2, growth_held);
    uint64_t released = STAT(&c1, growth_released) + STAT(&c2, growth_released);
    uint64_t hold_ms = STAT(&c1, growth_hold_ms) + STAT(&c2, growth_hold_ms);
    uint64_t unrouted = STAT(&c1, growth_unrouted) + STAT(&c2, growth_unrouted);
    uint64_t by_stall = STAT(&c1, growth_released_by_stall) + STAT(&c2, growth_released_by_stall);
    ct_stop(&c1);
    ct_stop(&c2);

    long violations = r.ck.violations, lost = seqcheck_lost(&r.ck, N1 + N2);
    print_message("fence %s: %d of %d keys moved; %ld handled, %ld violations, %ld lost, %ld "
                  "duplicates; new partitions' messages handled before the gate: %ld; held %" PRIu64
                  ", released %" PRIu64 " (%.0f ms held on average), unrouted %" PRIu64
                  "; first new message %.0f ms after the old partitions' gate opened\n",
                  fence ? "on" : "off", moved, KEYS, r.ck.handled, violations, lost,
                  r.ck.duplicates, new_before_gate, held, released,
                  released ? (double)hold_ms / (double)released : 0.0, unrouted,
                  (r.ck.first_new_s - r.ck.gate_s) * 1000.0);
    assert_true(moved > KEYS / 5 && moved < KEYS / 2); /* (6-4)/6 = 1/3 of the keys */
    assert_int_equal(lost, 0);
    assert_int_equal(r.ck.foreign, 0);
    long stalled_reports = atomic_load(&r.errors_stalled);
    if (fence && stall_ms < 600000) {
        /* Every moved key's new message went on because its old partition stalled (none
         * passed its growth point: the gate held them all), reported once per old partition
         * waited on; the order across the growth was given up, as documented. */
        print_message("stalled: %" PRIu64 " released by stall, %ld reports, %ld violations\n",
                      by_stall, stalled_reports, violations);
        assert_int_equal(by_stall, (uint64_t)moved * N2);
        assert_true(released >= by_stall);
        assert_true(stalled_reports >= 1 && stalled_reports <= OLD);
        assert_true(violations > 0);
        assert_true(new_before_gate > 0);
    } else if (fence) {
        assert_int_equal(by_stall, 0);
        assert_int_equal(stalled_reports, 0);
        assert_int_equal(violations, 0);
        assert_int_equal(new_before_gate, 0);
        /* Every moved key's new message waited (held also counts the messages kept whole
         * while an assignment's read of the records was under way). */
        assert_true(held >= (uint64_t)moved * N2);
        assert_true(released > 0 && released <= held);
        assert_int_equal(unrouted, 0);
    } else {
        assert_int_equal(held + released, 0);
    }
    ct_free(&c1);
    ct_free(&c2);
    growth_teardown(&r);
    return violations;
}

static void fence_keeps_order_across_growth(void **state)
{
    (void)state;
    assert_int_equal(growth_run(1), 0);
}

/* growth_stall_ms bounds the wait: old partitions whose commits do not move (the gate stays
 * closed) let their moved keys go after it, counted and reported. */
static void stalled_old_partitions_release_after_the_bound(void **state)
{
    (void)state;
    stall_ms = 1500;
    growth_run(1);
    stall_ms = 600000;
}

static void without_fence_order_breaks(void **state)
{
    (void)state;
    long v = growth_run(0);
    print_message("without the fence: %ld order violations\n", v);
    assert_true(v > 0);
}

/* --- the records cannot be read: fail closed --- */

static void record_read_failures_hold_everything(void **state)
{
    (void)state;
    const char *topic = "grow";
    run r;
    growth_setup(topic, &r, true);
    /* The records' topic refused (an ACL, say): a failure, never "no records". */
    rd_kafka_mock_topic_set_error(k.mock, RL__GROWTH_TOPIC,
                                  RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
    producer a;
    producer_start_used(&a, &k, OLD);
    for (int key = 0; key < KEYS; key++)
        produce_seq(&a, topic, key, 0);
    producer_flush(&a);
    const char *topics[] = {topic};
    cthread c;
    fence_consumer(&c, &k, "g-unreadable", topic, topics, &r, 1);
    assert_rl_ok(ct_start(&c));
    /* Every partition held (even the old ones: nothing says the topic never grew), the failure
     * reported once for the run of failures, the reads retried. */
    WAIT_FOR(STAT(&c, growth_read_errors) >= 3 && STAT(&c, growth_held) >= (uint64_t)KEYS, 60);
    uint64_t errors = STAT(&c, growth_read_errors), held = STAT(&c, growth_held);
    long handled = seqcheck_get(&r.ck, &r.ck.handled), reports = atomic_load(&r.errors_read);
    print_message("records unreadable: %" PRIu64 " failed reads, %ld reports, %" PRIu64
                  " messages held, %ld handled\n",
                  errors, reports, held, handled);
    assert_true(errors >= 3);
    assert_int_equal(reports, 1);
    assert_int_equal(handled, 0);
    assert_int_equal(held, (uint64_t)KEYS);
    /* Readable again: everything goes. */
    rd_kafka_mock_topic_set_error(k.mock, RL__GROWTH_TOPIC, RD_KAFKA_RESP_ERR_NO_ERROR);
    WAIT_FOR(seqcheck_get(&r.ck, &r.ck.handled) == KEYS, 60);
    assert_int_equal(seqcheck_get(&r.ck, &r.ck.handled), KEYS);
    /* Unreadable after a good read: the last good records stay in force, and the topic never
     * grew, so its messages go on. Reported again (a new run of failures). */
    uint64_t before = STAT(&c, growth_read_errors);
    rd_kafka_mock_topic_set_error(k.mock, RL__GROWTH_TOPIC,
                                  RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
    WAIT_FOR(STAT(&c, growth_read_errors) > before && atomic_load(&r.errors_read) == 2, 60);
    for (int key = 0; key < KEYS; key++)
        produce_seq(&a, topic, key, 1);
    producer_flush(&a);
    producer_stop(&a);
    WAIT_FOR(seqcheck_get(&r.ck, &r.ck.handled) == 2 * KEYS, 60);
    assert_int_equal(seqcheck_get(&r.ck, &r.ck.handled), 2 * KEYS);
    assert_true(STAT(&c, growth_read_errors) > before);
    assert_int_equal(atomic_load(&r.errors_read), 2);
    assert_int_equal(r.ck.violations, 0);
    ct_stop(&c);
    ct_free(&c);
    growth_teardown(&r);
}

/* --- a message held whole, then as a moved key's: counted once --- */

static void held_twice_counts_once(void **state)
{
    (void)state;
    const char *topic = "grow";
    run r;
    growth_setup(topic, &r, false); /* the old partitions' messages wait at the gate */
    producer a;
    int64_t points[OLD];
    produce_before_growth(&a, topic, 0, points);
    producer_stop(&a);
    record_growth(&k, topic, OLD, PARTS, RL__GROWTH_SEALED, points);
    producer b;
    producer_start_used(&b, &k, PARTS);
    for (int key = 0; key < KEYS; key++)
        produce_seq(&b, topic, key, 1);
    producer_flush(&b);
    producer_stop(&b);
    int64_t in_new = messages_in(topic, OLD, PARTS);
    /* Everything is there before the consumer, and the records cannot be read at first:
     * every partition is held whole; once they can, the new partitions' messages wait on as
     * moved keys' (the old ones' at the gate). */
    rd_kafka_mock_topic_set_error(k.mock, RL__GROWTH_TOPIC,
                                  RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
    const char *topics[] = {topic};
    cthread c;
    fence_consumer(&c, &k, "g-twice", topic, topics, &r, 1);
    assert_rl_ok(ct_start(&c));
    WAIT_FOR(STAT(&c, growth_held) == 2 * KEYS, 60);
    assert_int_equal(STAT(&c, growth_held), 2 * KEYS);
    rd_kafka_mock_topic_set_error(k.mock, RL__GROWTH_TOPIC, RD_KAFKA_RESP_ERR_NO_ERROR);
    WAIT_FOR(STAT(&c, growth_waiting) == (uint64_t)in_new, 60);
    uint64_t held = STAT(&c, growth_held);
    print_message("held whole, then as moved keys': %" PRIu64 " counted held of %d messages, "
                  "%" PRIu64 " waiting\n",
                  held, 2 * KEYS, STAT(&c, growth_waiting));
    assert_int_equal(STAT(&c, growth_waiting), (uint64_t)in_new);
    /* Each message once: the moved ones were counted twice. (consumed counts the new
     * partitions' messages twice, rightly: assigned without a commit before the records said
     * they are new, they are read again from their beginning.) */
    assert_int_equal(held, 2 * KEYS);
    gate_open(&r);
    WAIT_FOR(seqcheck_get(&r.ck, &r.ck.handled) == 2 * KEYS, 60);
    assert_int_equal(seqcheck_get(&r.ck, &r.ck.handled), 2 * KEYS);
    assert_int_equal(r.ck.violations, 0);
    assert_int_equal(STAT(&c, growth_held), 2 * KEYS);
    ct_stop(&c);
    ct_free(&c);
    growth_teardown(&r);
}

/* --- a late producer: one that still routes over the old count after the seal --- */

static void late_producer_is_counted(void **state)
{
    (void)state;
    const char *topic = "grow";
    run r;
    growth_setup(topic, &r, true);
    /* Before the growth, then sealed at the old partitions' ends. */
    producer a;
    int64_t points[OLD];
    produce_before_growth(&a, topic, 0, points);
    record_growth(&k, topic, OLD, PARTS, RL__GROWTH_SEALED, points);
    const char *topics[] = {topic};
    cthread c;
    fence_consumer(&c, &k, "g-late", topic, topics, &r, 1);
    assert_rl_ok(ct_start(&c));
    WAIT_FOR(seqcheck_get(&r.ck, &r.ck.handled) == KEYS, 60);
    assert_int_equal(STAT(&c, growth_late), 0); /* below the growth points: not late */
    /* The late producer: every key once more over the 4 old partitions, after the seal. */
    for (int key = 0; key < KEYS; key++)
        produce_seq(&a, topic, key, 1);
    producer_flush(&a);
    producer_stop(&a);
    /* And a producer that switched: nothing late from it. */
    producer b;
    producer_start_used(&b, &k, PARTS);
    for (int key = 0; key < KEYS; key++)
        produce_seq(&b, topic, key, 2);
    producer_flush(&b);
    producer_stop(&b);
    WAIT_FOR(seqcheck_get(&r.ck, &r.ck.handled) == 3 * KEYS, 60);
    rl_ring_t *r4 = ref_partition_ring("balanced", RL_VNODES_PROFILE, OLD);
    rl_ring_t *r6 = ref_partition_ring("balanced", RL_VNODES_PROFILE, PARTS);
    int moved = 0, sources = 0;
    bool source[OLD] = {0};
    for (int key = 0; key < KEYS; key++) {
        char kb[16];
        int kl = msg_key(key, kb, sizeof kb);
        int32_t from = ref_partition(r4, kb, (size_t)kl);
        if (from != ref_partition(r6, kb, (size_t)kl)) {
            moved++;
            sources += !source[from];
            source[from] = true;
        }
    }
    rl_ring_free(r4);
    rl_ring_free(r6);
    uint64_t late = STAT(&c, growth_late);
    long reports = atomic_load(&r.errors_late);
    print_message("late producer: %" PRIu64 " late messages of %d moved keys, %ld reports (%d old "
                  "partitions had moved keys)\n",
                  late, moved, reports, sources);
    assert_int_equal(seqcheck_get(&r.ck, &r.ck.handled), 3 * KEYS); /* handled as any */
    assert_int_equal(late, (uint64_t)moved);
    assert_int_equal(reports, sources); /* once per old partition (one assignment each) */
    ct_stop(&c);
    ct_free(&c);
    growth_teardown(&r);
}

/* --- an unusable record: its growth's partitions are held whole, and reported --- */

static void unusable_record_holds_its_partitions(void **state)
{
    (void)state;
    const char *topic = "grow";
    run r;
    growth_setup(topic, &r, true);
    /* Cut in its ring field: the codec refuses it. */
    record_write(&k, "grow/4->6",
                 "ringlane-growth 1 topic=grow from=4 to=6 profile=balanced vnodes=64 ring=9c0e");
    producer b;
    producer_start_used(&b, &k, PARTS);
    for (int s = 0; s < N1; s++)
        for (int key = 0; key < KEYS; key++)
            produce_seq(&b, topic, key, s);
    producer_flush(&b);
    producer_stop(&b);
    int64_t in_old = messages_in(topic, 0, OLD), in_new = messages_in(topic, OLD, PARTS);
    const char *topics[] = {topic};
    cthread c;
    fence_consumer(&c, &k, "g-bad", topic, topics, &r, 1);
    assert_rl_ok(ct_start(&c));
    /* The old partitions go on; the new ones wait, whole (every message of theirs taken). */
    WAIT_FOR(seqcheck_get(&r.ck, &r.ck.handled) >= in_old && atomic_load(&r.errors_refused) > 0 &&
                 STAT(&c, growth_held) >= (uint64_t)in_new,
             60);
    long handled = seqcheck_get(&r.ck, &r.ck.handled);
    long handled_new = seqcheck_get(&r.ck, &r.ck.new_handled);
    uint64_t held = STAT(&c, growth_held);
    print_message("unusable record: %ld of %" PRId64 " old messages handled, %ld of %" PRId64
                  " new ones, %" PRIu64 " held, %ld reported\n",
                  handled, in_old, handled_new, in_new, held, (long)atomic_load(&r.errors_refused));
    assert_int_equal(handled, in_old);
    assert_int_equal(handled_new, 0);
    assert_true(atomic_load(&r.errors_refused) >= 1);
    assert_true(held >= (uint64_t)in_new);
    /* An aborted record in its place: the growth did not happen, nothing is held. */
    record_growth(&k, topic, OLD, PARTS, RL__GROWTH_ABORTED, NULL);
    WAIT_FOR(seqcheck_get(&r.ck, &r.ck.handled) == in_old + in_new, 60);
    assert_int_equal(seqcheck_get(&r.ck, &r.ck.handled), in_old + in_new);
    assert_int_equal(r.ck.violations, 0);
    assert_int_equal(atomic_load(&r.errors_refused), 1); /* reported once, not at every read */
    ct_stop(&c);
    ct_free(&c);
    growth_teardown(&r);
}

/* --- a new partition without a commit starts at its beginning --- */

static long latest_run(int fence, int64_t *in_new)
{
    const char *topic = "grow";
    run r;
    growth_setup(topic, &r, true);
    int64_t points[OLD] = {0, 0, 0, 0}; /* nothing was written before the growth */
    record_growth(&k, topic, OLD, PARTS, RL__GROWTH_SEALED, points);
    producer b;
    producer_start_used(&b, &k, PARTS);
    for (int key = 0; key < KEYS; key++)
        produce_seq(&b, topic, key, 0);
    producer_flush(&b);
    producer_stop(&b);
    *in_new = messages_in(topic, OLD, PARTS);
    const char *topics[] = {topic};
    cthread c;
    fence_consumer(&c, &k, "g-latest", topic, topics, &r, fence);
    conf_set_ok(c.opts.conf, "auto.offset.reset", "latest");
    assert_rl_ok(ct_start(&c));
    WAIT_FOR(ct_assigned(&c) == PARTS, 60);
    /* Fence on: an event (every new partition's message); off: a bound (nothing comes). */
    WAIT_FOR(seqcheck_get(&r.ck, &r.ck.new_handled) == *in_new, fence ? 60 : 3);
    long got = seqcheck_get(&r.ck, &r.ck.new_handled);
    ct_stop(&c);
    ct_free(&c);
    growth_teardown(&r);
    return got;
}

static void new_partitions_start_at_their_beginning(void **state)
{
    (void)state;
    int64_t in_new;
    long on = latest_run(1, &in_new);
    long off = latest_run(0, &in_new);
    print_message("auto.offset.reset=latest: of %" PRId64 " messages in the new partitions, "
                  "%ld handled with the fence, %ld without\n",
                  in_new, on, off);
    assert_true(in_new > 0);
    assert_int_equal(on, in_new);
    assert_int_equal(off, 0);
}

/* --- nothing grew: the fence's cost (printed; timing decides nothing) --- */

static atomic_long flat_handled;
static _Atomic double flat_first, flat_last;

static int flat_handler(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)c;
    (void)m;
    (void)attempt;
    double now = now_s();
    if (atomic_fetch_add(&flat_handled, 1) == 0)
        atomic_store(&flat_first, now);
    atomic_store(&flat_last, now);
    return 0;
}

static void nothing_grew_throughput(void **state)
{
    (void)state;
    enum { MESSAGES = SLOW_BUILD ? 20000 : 200000 };
    cluster_start(&k, 1);
    const char *topic = "flat";
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, PARTS, 1), 0);
    producer p;
    producer_start(&p, &k);
    for (int i = 0; i < MESSAGES; i++)
        produce_seq(&p, topic, i % 1000, i / 1000);
    producer_flush(&p);
    producer_stop(&p);
    double rate[2];
    uint64_t records[2];
    for (int fence = 0; fence < 2; fence++) {
        atomic_store(&flat_handled, 0);
        const char *topics[] = {topic};
        cthread c;
        char group[32];
        snprintf(group, sizeof group, "g-flat-%d", fence);
        ct_init(&c, consumer_conf(&k, group, "range"), topics, 1, flat_handler, NULL);
        c.opts.growth_fence = fence;
        assert_rl_ok(ct_start(&c));
        WAIT_FOR(atomic_load(&flat_handled) >= MESSAGES, 120);
        records[fence] = STAT(&c, growth_records) + STAT(&c, growth_read_errors);
        ct_stop(&c);
        ct_free(&c);
        assert_int_equal(atomic_load(&flat_handled), MESSAGES);
        double span = atomic_load(&flat_last) - atomic_load(&flat_first);
        rate[fence] = span > 0 ? MESSAGES / span : 0;
    }
    print_message("nothing grew (no record topic): %.0f msg/s without the fence, %.0f with it "
                  "(ratio %.2f)\n",
                  rate[0], rate[1], rate[0] > 0 ? rate[1] / rate[0] : 0.0);
    assert_int_equal(records[1], 0); /* no topic: no records, and no failed read */
    cluster_stop(&k);
}

/* --- the options: refusals name the option, the value and why --- */

static int refused_new(void (*set)(rl_consumer_options *))
{
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    const char *topics[] = {"grow"};
    rl_consumer_options o;
    rl_consumer_options_init(&o);
    o.conf = rd_kafka_conf_new();
    conf_set_ok(o.conf, "group.id", "g");
    o.topics = topics;
    o.topic_count = 1;
    o.handler = flat_handler;
    o.dispatch.lane_count = 2;
    o.growth_fence = 1;
    set(&o);
    rl_consumer_t *c = (rl_consumer_t *)&loop; /* set to NULL by a refusal */
    int rc = rl_consumer_new(&loop, &o, &c);
    assert_null(c);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    return rc;
}

static void set_reread_0(rl_consumer_options *o)
{
    o->growth_reread_ms = 0;
}
static void set_reread_big(rl_consumer_options *o)
{
    o->growth_reread_ms = 30001;
}
static void set_read_timeout_small(rl_consumer_options *o)
{
    o->growth_read_timeout_ms = 999;
}
static void set_read_timeout_big(rl_consumer_options *o)
{
    o->growth_read_timeout_ms = 600001;
}
static void set_stall_short(rl_consumer_options *o)
{
    o->growth_stall_ms = 999;
}
static void set_stall_long(rl_consumer_options *o)
{
    o->growth_stall_ms = 86400001;
}
static void set_profile_unknown(rl_consumer_options *o)
{
    o->growth_profile = "nope";
}
static void set_profile_ketama(rl_consumer_options *o)
{
    o->growth_profile = "ketama";
}
static void set_vnodes_jump(rl_consumer_options *o)
{
    o->growth_profile = "jump";
    o->growth_vnodes = 64;
}

static void growth_options_refused(void **state)
{
    (void)state;
    assert_refused(refused_new(set_reread_0), RL_EINVAL, "growth_reread_ms 0: must be 100..30000",
                   "announce");
    assert_refused(refused_new(set_reread_big), RL_EINVAL,
                   "growth_reread_ms 30001: must be 100..30000", "every consumer must have read");
    assert_refused(refused_new(set_read_timeout_small), RL_EINVAL,
                   "growth_read_timeout_ms 999: must be 1000..600000", "");
    assert_refused(refused_new(set_read_timeout_big), RL_EINVAL,
                   "growth_read_timeout_ms 600001: must be 1000..600000", "");
    assert_refused(refused_new(set_stall_short), RL_EINVAL,
                   "growth_stall_ms 999: must be 0 (never) or 1000..86400000", "");
    assert_refused(refused_new(set_stall_long), RL_EINVAL, "growth_stall_ms 86400001", "");
    assert_refused(refused_new(set_profile_unknown), RL_EPROFILE,
                   "growth_profile \"nope\": no such profile", "");
    assert_refused(refused_new(set_profile_ketama), RL_ENOTSUP, "growth_profile \"ketama\"",
                   "no local_add");
    assert_refused(refused_new(set_vnodes_jump), RL_EVNODES, "growth_vnodes 64: profile \"jump\"",
                   "builds no ring");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(growth_options_refused),
        cmocka_unit_test(fence_keeps_order_across_growth),
        cmocka_unit_test(without_fence_order_breaks),
        cmocka_unit_test(stalled_old_partitions_release_after_the_bound),
        cmocka_unit_test(late_producer_is_counted),
        cmocka_unit_test(held_twice_counts_once),
        cmocka_unit_test(record_read_failures_hold_everything),
        cmocka_unit_test(unusable_record_holds_its_partitions),
        cmocka_unit_test(new_partitions_start_at_their_beginning),
        cmocka_unit_test(nothing_grew_throughput),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
