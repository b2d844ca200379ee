/* SPDX-License-Identifier: BSD-2-Clause */
/* The fault matrix: an ordered consumer group on librdkafka's mock cluster (3 brokers, 6
 * partitions, keyed messages carrying a per-key sequence number) while the cluster has a bad
 * day. Two consumers of one group, one with an asynchronous handler (completed from another
 * thread) and one with a blocking handler; key 0 always fails and goes to the dead-letter
 * topic. One fault is injected once a third of the messages are handled, and an independent
 * checker proves from what the handlers saw, the dead-letter topic and the committed offsets
 * (sampled every 100 ms from a handle of its own, outside the group):
 *
 * - per-key order: a key's sequence never skips ahead, and two handlers never hold one key at
 *   once; a sequence that goes back is a duplicate;
 * - every duplicate is explained: its partition changed hands (a rebalance, a refused commit,
 *   a loss) after the first time it was handled; any other is a violation;
 * - nothing lost: every message was handled, or (key 0) is in the dead-letter topic;
 * - no commit passed an unfinished message: at each sample, every offset below the committed
 *   one had completed (handled, or its dead letter acknowledged);
 * - no handler was called for a partition its consumer did not hold (between its
 *   RL_CONSUMER_ASSIGNED and its revoke or loss);
 * - where the fault is the dead-letter topic's or producer's, on_error heard of it.
 *
 * One line per case: the fault, duplicates, lost, violations, how long the work took after the
 * fault, partitions lost, commits refused and on_error calls. Timing is printed, never judged.
 *
 * The short matrix runs in `make test`. RINGLANE_FAULT_SOAK_SECONDS=N runs faults picked at
 * random (RINGLANE_FAULT_SEED, printed) until N seconds have passed (tests/soak/fault_soak.sh).
 * RINGLANE_TEST_FILTER selects a test by name ("fault_matrix", "two_clean_closes*");
 * RINGLANE_FAULT_ONLY=text runs the faults of both lists whose name holds the text.
 */
#define _POSIX_C_SOURCE 200809L
#include "consumer_test_util.h"

/* The Kafka protocol's ApiKeys (librdkafka's rdkafka_protocol.h is not installed). */
enum {
    API_PRODUCE = 0,
    API_FETCH = 1,
    API_OFFSET_COMMIT = 8,
    API_FIND_COORDINATOR = 10,
    API_JOIN_GROUP = 11,
    API_HEARTBEAT = 12,
    API_SYNC_GROUP = 14
};

#define PARTITIONS 6
#define POISON_KEY 0
#define MAX_OFFSETS 16384                     /* per partition, above any case's share */
#define SESSION_MS (SLOW_BUILD ? 4000 : 2500) /* consumer_conf's session.timeout.ms */

/* --- the faults --- */

enum fault_kind {
    F_NONE,
    F_REQUEST_ERRORS, /* the next `count` requests of `api` answer `err` */
    F_LEADER_MOVE,    /* every partition's leader moves to the next broker */
    F_COORD_MOVE,     /* the group coordinator moves from broker 1 to broker 2 */
    F_BROKER_RTT,     /* broker 2 answers 500 ms late for 3 s */
    F_JOIN_ERRORS,    /* F_REQUEST_ERRORS pushed before the consumers start (their first join) */
    F_DLQ_MISSING,    /* the dead-letter topic answers UNKNOWN_TOPIC_OR_PART for `count` s */
    F_DLQ_ABSENT,     /* the same from before the consumers start (the producer never saw it)
                         until `count` s after the third; the topic then appears */
    F_COORD_SLOW,     /* the coordinator (broker 1) answers session.timeout.ms + 1 s late for
                         session.timeout.ms + 500 ms */
    F_HEARTBEAT_SLOW  /* the next `count` Heartbeats answered session.timeout.ms + 500 ms late */
};

typedef struct fault {
    const char *name;
    int kind;
    int api;
    rd_kafka_resp_err_t err;
    int count;
    bool reported; /* on_error must hear of the dead-letter topic's trouble */
    bool expires;  /* the members' sessions expire around the close: the group refuses their
                      last commits, so the soak does not judge what a close left uncommitted */
} fault;

static const fault short_matrix[] = {
    {"none", F_NONE, 0, 0, 0, false, false},
    {"OffsetCommit REBALANCE_IN_PROGRESS x3", F_REQUEST_ERRORS, API_OFFSET_COMMIT,
     RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS, 3, false, false},
    {"OffsetCommit NOT_COORDINATOR x3", F_REQUEST_ERRORS, API_OFFSET_COMMIT,
     RD_KAFKA_RESP_ERR_NOT_COORDINATOR, 3, false, false},
    {"OffsetCommit UNKNOWN_MEMBER_ID x3", F_REQUEST_ERRORS, API_OFFSET_COMMIT,
     RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID, 3, false, false},
    {"Fetch NOT_LEADER_OR_FOLLOWER x5", F_REQUEST_ERRORS, API_FETCH,
     RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION, /* NOT_LEADER_OR_FOLLOWER */ 5, false, false},
    {"leader moved", F_LEADER_MOVE, 0, 0, 0, false, false},
    {"coordinator moved", F_COORD_MOVE, 0, 0, 0, false, false},
    {"Heartbeat UNKNOWN_MEMBER_ID x3", F_REQUEST_ERRORS, API_HEARTBEAT,
     RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID, 3, false, false},
    {"broker 2 RTT 500 ms for 3 s", F_BROKER_RTT, 0, 0, 0, false, false},
    {"dead-letter Produce NOT_ENOUGH_REPLICAS x5", F_REQUEST_ERRORS, API_PRODUCE,
     RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS, 5, false, false},
    {"dead-letter Produce MSG_SIZE_TOO_LARGE x3", F_REQUEST_ERRORS, API_PRODUCE,
     RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, 3, true, false},
    /* The dead-letter topic missing while dead letters are produced (must be reported), a
     * fatal error of the idempotent dead-letter producer, an error of the first join; more
     * of each kind in soak_extra. */
    {"dead-letter topic missing for 3 s, propagation 1 s", F_DLQ_MISSING, 0, 0, 3, true, false},
    {"dead-letter Produce OUT_OF_ORDER_SEQUENCE_NUMBER x1 (fatal)", F_REQUEST_ERRORS, API_PRODUCE,
     RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, 1, true, false},
    {"first join: FindCoordinator COORDINATOR_NOT_AVAILABLE x3", F_JOIN_ERRORS,
     API_FIND_COORDINATOR, RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE, 3, false, false},
};

/* The soak draws from these as well. */
static const fault soak_extra[] = {
    {"OffsetCommit COORDINATOR_LOAD_IN_PROGRESS x3", F_REQUEST_ERRORS, API_OFFSET_COMMIT,
     RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS, 3, false, false},
    {"OffsetCommit REQUEST_TIMED_OUT x3", F_REQUEST_ERRORS, API_OFFSET_COMMIT,
     RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, 3, false, false},
    {"OffsetCommit ILLEGAL_GENERATION x3", F_REQUEST_ERRORS, API_OFFSET_COMMIT,
     RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION, 3, false, false},
    {"Fetch UNKNOWN_TOPIC_OR_PART x5", F_REQUEST_ERRORS, API_FETCH,
     RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART, 5, false, false},
    {"Fetch OFFSET_OUT_OF_RANGE x1", F_REQUEST_ERRORS, API_FETCH,
     RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE, 1, false, false},
    {"JoinGroup COORDINATOR_NOT_AVAILABLE x3", F_REQUEST_ERRORS, API_JOIN_GROUP,
     RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE, 3, false, false},
    {"SyncGroup REBALANCE_IN_PROGRESS x3", F_REQUEST_ERRORS, API_SYNC_GROUP,
     RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS, 3, false, false},
    {"Heartbeat REBALANCE_IN_PROGRESS x3", F_REQUEST_ERRORS, API_HEARTBEAT,
     RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS, 3, false, false},
    {"dead-letter Produce REQUEST_TIMED_OUT x3", F_REQUEST_ERRORS, API_PRODUCE,
     RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, 3, false, false},
    /* The dead-letter topic missing: for 3 s while dead letters are produced, and from before
     * the start until 3 s after the third. librdkafka 2.0.2 holds the messages of a topic its
     * metadata calls unknown, without a report, until topic.metadata.propagation.max.ms
     * (30 s by default) has passed since the producer first used the topic; a topic it knew
     * fails them at the next metadata answer. The case with the default is not required to
     * report (its dead letters may all fall in a held spell). */
    {"dead-letter topic missing for 3 s", F_DLQ_MISSING, 0, 0, 3, false, false},
    {"dead-letter topic missing from the start, propagation 1 s", F_DLQ_ABSENT, 0, 0, 3, true,
     false},
    /* Fatal to the idempotent dead-letter producer, and refused for good. */
    {"dead-letter Produce INVALID_PRODUCER_EPOCH x1 (fatal)", F_REQUEST_ERRORS, API_PRODUCE,
     RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH, 1, true, false},
    {"dead-letter Produce TOPIC_AUTHORIZATION_FAILED x1", F_REQUEST_ERRORS, API_PRODUCE,
     RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, 1, true, false},
    /* A session timeout: the coordinator too slow for session.timeout.ms. */
    {"coordinator RTT above session.timeout.ms", F_COORD_SLOW, 0, 0, 0, false, true},
    {"Heartbeat answered after session.timeout.ms x2", F_HEARTBEAT_SLOW, 0, 0, 2, false, true},
    /* Errors of the group's first join (pushed before the consumers start). */
    {"first join: JoinGroup COORDINATOR_NOT_AVAILABLE x3", F_JOIN_ERRORS, API_JOIN_GROUP,
     RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE, 3, false, false},
    {"first join: JoinGroup NOT_COORDINATOR x3", F_JOIN_ERRORS, API_JOIN_GROUP,
     RD_KAFKA_RESP_ERR_NOT_COORDINATOR, 3, false, false},
    {"first join: SyncGroup NOT_COORDINATOR x3", F_JOIN_ERRORS, API_SYNC_GROUP,
     RD_KAFKA_RESP_ERR_NOT_COORDINATOR, 3, false, false},
    {"first join: SyncGroup REBALANCE_IN_PROGRESS x3", F_JOIN_ERRORS, API_SYNC_GROUP,
     RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS, 3, false, false},
};

/* --- what the run saw --- */

typedef struct run {
    const char *topic;
    int keys, per_key;
    int64_t ends[PARTITIONS]; /* each partition's high watermark after producing */
    /* Per partition and offset: the key (-1: no message), its sequence, done (handled
     * successfully or its dead letter acknowledged, set before the consumer hears of it). */
    int (*key_at)[MAX_OFFSETS];
    int64_t (*seq_at)[MAX_OFFSETS];
    atomic_uchar (*done)[MAX_OFFSETS];
    checker ck; /* the non-poison keys */
    atomic_long dup_explained, dup_unexplained, dup_after_loss;
    /* Partition changes seen by the rebalance hooks, and the handover count at which each
     * (partition, offset) was first handled: a duplicate is explained when its partition
     * changed hands since. */
    atomic_int handovers[PARTITIONS];
    atomic_int losses[PARTITIONS];
    atomic_int (*first_handover)[MAX_OFFSETS];
    atomic_long dead_letters_acked;
    atomic_int owned[2][PARTITIONS]; /* per consumer (0: asynchronous), set between its
                                        RL_CONSUMER_ASSIGNED and its revoke or loss */
    atomic_long handled_unowned;     /* handler calls for a partition its consumer did not hold */
    atomic_long lost_events, commit_refused, errors, dlq_errors, poison_calls;
    atomic_long commit_samples, commit_passed_unfinished;
    atomic_bool stop_sampler;
    _Atomic int64_t sampled[PARTITIONS]; /* the last committed offsets sampled (-1: none) */
    const char *group, *dlq;
    double t_start;
    _Atomic double t_first_assigned; /* the first RL_CONSUMER_ASSIGNED of a partition (0: none) */
} run;

static run *R; /* the run in progress: the consumers' callbacks reach it through here */

static void note_handled(run *r, const rd_kafka_message_t *m)
{
    int p = m->partition;
    int64_t o = m->offset;
    if (p < 0 || p >= PARTITIONS || o < 0 || o >= MAX_OFFSETS)
        return;
    int now = atomic_load(&r->handovers[p]);
    int first = -1;
    if (atomic_compare_exchange_strong(&r->first_handover[p][o], &first, now))
        return; /* the first time */
}

/* A duplicate is explained when its partition changed hands after it was first handled. */
static void note_duplicate(run *r, const rd_kafka_message_t *m)
{
    int p = m->partition;
    int64_t o = m->offset;
    if (p < 0 || p >= PARTITIONS || o < 0 || o >= MAX_OFFSETS) {
        atomic_fetch_add(&r->dup_unexplained, 1);
        return;
    }
    int first = atomic_load(&r->first_handover[p][o]);
    if (first >= 0 && atomic_load(&r->handovers[p]) > first) {
        atomic_fetch_add(&r->dup_explained, 1);
        if (atomic_load(&r->losses[p]))
            atomic_fetch_add(&r->dup_after_loss, 1);
    } else {
        atomic_fetch_add(&r->dup_unexplained, 1);
    }
}

static void mark_done(run *r, const rd_kafka_message_t *m)
{
    if (m->partition >= 0 && m->partition < PARTITIONS && m->offset >= 0 && m->offset < MAX_OFFSETS)
        atomic_store(&r->done[m->partition][m->offset], 1);
}

/* The handler's part, the same for both kinds: returns 0 (success) or -1 (the poison key). */
static int consumer_index(rl_consumer_t *c);

static int handle(run *r, rl_consumer_t *c, const rd_kafka_message_t *m)
{
    int key;
    int64_t seq;
    int ci = consumer_index(c);
    if (ci >= 0 && m->partition >= 0 && m->partition < PARTITIONS &&
        !atomic_load(&r->owned[ci][m->partition])) {
        atomic_fetch_add(&r->handled_unowned, 1);
        if (getenv("RINGLANE_TEST_VERBOSE"))
            printf("  %.2f s: consumer %d handles [%d] offset %" PRId64 " without holding it\n",
                   now_s() - r->t_start, ci, (int)m->partition, m->offset);
    }
    if (msg_parse(m, &key, &seq) && key == POISON_KEY) {
        atomic_fetch_add(&r->poison_calls, 1);
        return -1;
    }
    int64_t before = -1;
    if (msg_parse(m, &key, &seq) && key >= 0 && key < r->keys)
        before = atomic_load(&r->ck.next[key]);
    note_handled(r, m);
    checker_see(&r->ck, m);
    if (before >= 0 && seq < before)
        note_duplicate(r, m);
    mark_done(r, m);
    return 0;
}

static int blocking_handler(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)c;
    (void)attempt;
    int rc = handle(R, c, m);
    sleep_ms(1); /* work */
    return rc;
}

/* The asynchronous consumer's work: tickets completed by a thread of their own, in order,
 * about 0.3 ms each. */
typedef struct completer {
    uv_thread_t thread;
    uv_mutex_t mu;
    uv_cond_t cv;
    uint64_t tickets[65536];
    int status[65536];
    size_t head, tail;
    bool stop;
    rl_consumer_t *c;
} completer;

static completer C;

static cthread *consumers[2]; /* the run's: 0 asynchronous, 1 blocking */

static int consumer_index(rl_consumer_t *c)
{
    void *t = rl_consumer_get_data(c);
    return t == consumers[0] ? 0 : t == consumers[1] ? 1 : -1;
}

static void completer_main(void *arg)
{
    completer *q = arg;
    uv_mutex_lock(&q->mu);
    for (;;) {
        while (q->head == q->tail && !q->stop)
            uv_cond_wait(&q->cv, &q->mu);
        if (q->head == q->tail && q->stop)
            break;
        uint64_t t = q->tickets[q->head % 65536];
        int st = q->status[q->head % 65536];
        q->head++;
        rl_consumer_t *c = q->c;
        uv_mutex_unlock(&q->mu);
        struct timespec ts = {0, 300000};
        nanosleep(&ts, NULL);
        rl_consumer_complete(c, t, st); /* RL_ESTALE after a revoke gave up on it: fine */
        uv_mutex_lock(&q->mu);
    }
    uv_mutex_unlock(&q->mu);
}

static void async_handler(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt,
                          uint64_t ticket)
{
    (void)attempt;
    int st = handle(R, c, m);
    uv_mutex_lock(&C.mu);
    C.c = c;
    if (C.tail - C.head < 65536) {
        C.tickets[C.tail % 65536] = ticket;
        C.status[C.tail % 65536] = st;
        C.tail++;
        uv_cond_signal(&C.cv);
        uv_mutex_unlock(&C.mu);
    } else {
        uv_mutex_unlock(&C.mu);
        rl_consumer_complete(c, ticket, st); /* a lane holds one at a time: not reached */
    }
}

static void on_rebalance(rl_consumer_t *c, int event, const rd_kafka_topic_partition_list_t *l)
{
    (void)c;
    if (getenv("RINGLANE_TEST_VERBOSE"))
        printf("  %.2f s: %s %d partitions (%p)\n", now_s() - R->t_start,
               event == RL_CONSUMER_ASSIGNED  ? "assigned"
               : event == RL_CONSUMER_REVOKED ? "revoked"
                                              : "lost",
               l->cnt, (void *)c);
    for (int i = 0; i < l->cnt; i++) {
        int p = l->elems[i].partition;
        if (p < 0 || p >= PARTITIONS)
            continue;
        /* A partition released or lost ends its owner's run: what the next owner handles
         * again is explained by it. */
        if (event != RL_CONSUMER_ASSIGNED)
            atomic_fetch_add(&R->handovers[p], 1);
        int ci = consumer_index(c);
        if (ci >= 0)
            atomic_store(&R->owned[ci][p], event == RL_CONSUMER_ASSIGNED);
        double none = 0;
        if (event == RL_CONSUMER_ASSIGNED)
            atomic_compare_exchange_strong(&R->t_first_assigned, &none, now_s());
        if (event == RL_CONSUMER_LOST) {
            atomic_fetch_add(&R->losses[p], 1);
            atomic_fetch_add(&R->lost_events, 1);
        }
    }
}

static void on_dead_letter_seen(rl_consumer_t *c, const rd_kafka_message_t *m, const char *reason)
{
    (void)c;
    (void)reason;
    mark_done(R, m); /* called before the consumer completes the offset */
    atomic_fetch_add(&R->dead_letters_acked, 1);
}

static void on_error_seen(rl_consumer_t *c, rd_kafka_resp_err_t err, const char *reason)
{
    (void)c;
    (void)err;
    if (getenv("RINGLANE_TEST_VERBOSE"))
        printf("  %.2f s: on_error %s: %s (%p)\n", now_s() - R->t_start, rd_kafka_err2name(err),
               reason, (void *)c);
    atomic_fetch_add(&R->errors, 1);
    if (strstr(reason, "commit"))
        atomic_fetch_add(&R->commit_refused, 1);
    if (strstr(reason, "dead letter") || strstr(reason, "dead-letter"))
        atomic_fetch_add(&R->dlq_errors, 1);
}

/* --- the committed offsets, sampled from outside the group --- */

static rd_kafka_t *outside_handle(const char *group)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    conf_set_ok(conf, "bootstrap.servers", k.bootstraps);
    conf_set_ok(conf, "group.id", group);
    conf_set_ok(conf, "enable.auto.commit", "false");
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    assert_non_null(rk);
    return rk;
}

/* Reads the committed offsets (-1 where none); false when the coordinator did not answer. */
static bool read_committed(rd_kafka_t *rk, const char *topic, int64_t *out)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(PARTITIONS);
    for (int p = 0; p < PARTITIONS; p++)
        rd_kafka_topic_partition_list_add(l, topic, p);
    bool ok = rd_kafka_committed(rk, l, 2000) == RD_KAFKA_RESP_ERR_NO_ERROR;
    for (int p = 0; ok && p < PARTITIONS; p++)
        out[p] = l->elems[p].err ? -1 : l->elems[p].offset;
    rd_kafka_topic_partition_list_destroy(l);
    return ok;
}

static void sampler_main(void *arg)
{
    run *r = arg;
    rd_kafka_t *rk = outside_handle(r->group);
    while (!atomic_load(&r->stop_sampler)) {
        int64_t off[PARTITIONS];
        if (read_committed(rk, r->topic, off)) {
            atomic_fetch_add(&r->commit_samples, 1);
            for (int p = 0; p < PARTITIONS; p++)
                atomic_store(&r->sampled[p], off[p]);
            /* Read after the commit was: whatever completed before the commit is seen. */
            for (int p = 0; p < PARTITIONS; p++)
                for (int64_t o = 0; o < off[p] && o < MAX_OFFSETS; o++)
                    if (r->key_at[p][o] >= 0 && !atomic_load(&r->done[p][o])) {
                        atomic_fetch_add(&r->commit_passed_unfinished, 1);
                        printf("  committed %s [%d] at %" PRId64 " past unfinished offset %" PRId64
                               "\n",
                               r->topic, p, off[p], o);
                        break;
                    }
        }
        sleep_ms(100);
    }
    rd_kafka_destroy(rk);
}

/* --- the source and the dead-letter topics, read back --- */

static void note_source(const rd_kafka_message_t *m, void *arg)
{
    run *r = arg;
    int key;
    int64_t seq;
    if (m->partition < PARTITIONS && m->offset < MAX_OFFSETS && msg_parse(m, &key, &seq)) {
        r->key_at[m->partition][m->offset] = key;
        r->seq_at[m->partition][m->offset] = seq;
    }
}

typedef struct dlq_tally {
    run *r;
    long poison, other;
    bool (*seen)[MAX_OFFSETS];
} dlq_tally;

static void note_dead_letter(const rd_kafka_message_t *m, void *arg)
{
    dlq_tally *t = arg;
    char part[16], off[32];
    header_str(m, "ringlane.partition", part, sizeof part);
    header_str(m, "ringlane.offset", off, sizeof off);
    int p = atoi(part);
    long long o = atoll(off);
    if (p >= 0 && p < PARTITIONS && o >= 0 && o < MAX_OFFSETS && t->r->key_at[p][o] == POISON_KEY) {
        t->seen[p][o] = true;
        t->poison++;
    } else {
        t->other++;
    }
}

/* --- one case --- */

typedef struct outcome {
    long duplicates, dup_after_loss, unexplained, lost, violations, lost_events, commit_refused,
        errors, dlq_errors, samples;
    long dlq_errors_held; /* dead-letter errors reported before the fault was taken away */
    long handled_unowned; /* handler calls for a partition its consumer did not hold */
    double finish_s, first_assigned_s;
    int64_t behind; /* messages after the last committed offsets at the end (a clean close) */
} outcome;

static void inject(const fault *f, const char *group, bool on)
{
    switch (f->kind) {
    case F_REQUEST_ERRORS:
    case F_JOIN_ERRORS:
        if (on) {
            rd_kafka_resp_err_t errs[16];
            for (int i = 0; i < f->count && i < 16; i++)
                errs[i] = f->err;
            rd_kafka_mock_push_request_errors_array(k.mock, (int16_t)f->api, (size_t)f->count,
                                                    errs);
        } else {
            rd_kafka_mock_clear_request_errors(k.mock, (int16_t)f->api);
        }
        break;
    case F_LEADER_MOVE:
        for (int p = 0; on && p < PARTITIONS; p++)
            assert_int_equal(
                rd_kafka_mock_partition_set_leader(k.mock, R->topic, p, (int32_t)(p + 1) % 3 + 1),
                0);
        break;
    case F_COORD_MOVE:
        if (on)
            assert_int_equal(rd_kafka_mock_coordinator_set(k.mock, "group", group, 2), 0);
        break;
    case F_BROKER_RTT:
        assert_int_equal(rd_kafka_mock_broker_set_rtt(k.mock, 2, on ? 500 : 0), 0);
        break;
    case F_DLQ_MISSING:
    case F_DLQ_ABSENT:
        /* The mock answers the topic's metadata with the error (the topic is made if it was
         * not); its Produce handler does not look at it, so a producer that knows the leader
         * writes on until its next metadata refresh. */
        rd_kafka_mock_topic_set_error(k.mock, R->dlq,
                                      on ? RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART : 0);
        break;
    case F_COORD_SLOW:
        assert_int_equal(rd_kafka_mock_broker_set_rtt(k.mock, 1, on ? SESSION_MS + 1000 : 0), 0);
        break;
    case F_HEARTBEAT_SLOW:
        if (on)
            for (int i = 0; i < f->count; i++)
                assert_int_equal(
                    rd_kafka_mock_broker_push_request_error_rtts(
                        k.mock, 1, API_HEARTBEAT, 1, RD_KAFKA_RESP_ERR_NO_ERROR, SESSION_MS + 500),
                    0);
        break;
    default:
        break;
    }
}

/* Faults in place before the consumers start. */
static bool before_start(const fault *f)
{
    return f->kind == F_JOIN_ERRORS || f->kind == F_DLQ_ABSENT;
}

/* How long a fault lasts once the third is done before it is taken away (0: it ends by
 * itself, or at the end of the work). */
static int hold_ms(const fault *f)
{
    switch (f->kind) {
    case F_BROKER_RTT:
        return 3000;
    case F_DLQ_MISSING:
    case F_DLQ_ABSENT:
        return f->count * 1000;
    case F_COORD_SLOW:
        return SESSION_MS + 500;
    default:
        return 0;
    }
}

static int case_no;

static long done_count(run *r)
{
    long n = 0;
    for (int p = 0; p < PARTITIONS; p++)
        for (int64_t o = 0; o < r->ends[p]; o++)
            n += atomic_load(&r->done[p][o]) != 0;
    return n;
}

/* The completed watermark of each partition: its first offset not done. */
static int64_t first_unfinished(run *r, int p)
{
    int64_t o = 0;
    while (o < r->ends[p] && (r->key_at[p][o] < 0 || atomic_load(&r->done[p][o])))
        o++;
    return o;
}

/* Runs one fault; `close_together` closes both consumers at once (else one after the other),
 * `close_mid` does so when half the messages are done instead of after the last. Fills *out;
 * the checker's assertions are made by the caller. */
static void run_case(const fault *f, int keys, int per_key, bool close_together, bool close_mid,
                     outcome *out)
{
    char topic[64], group[64], dlq[80];
    int n = ++case_no;
    snprintf(topic, sizeof topic, "fm-%d", n);
    snprintf(group, sizeof group, "g-fm-%d", n);
    snprintf(dlq, sizeof dlq, "%s.dlq", topic);
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, PARTITIONS, 1), 0);
    /* A missing dead-letter topic is staged by its metadata (F_DLQ_ABSENT): the mock would make
     * it with its default partition count. */
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, dlq, 1, 1), 0);
    assert_int_equal(rd_kafka_mock_coordinator_set(k.mock, "group", group, 1), 0);

    run *r = calloc(1, sizeof *r);
    assert_non_null(r);
    r->topic = topic;
    r->group = group;
    r->dlq = dlq;
    r->keys = keys;
    r->per_key = per_key;
    r->key_at = malloc(PARTITIONS * sizeof *r->key_at);
    r->seq_at = malloc(PARTITIONS * sizeof *r->seq_at);
    r->done = calloc(PARTITIONS, sizeof *r->done);
    r->first_handover = malloc(PARTITIONS * sizeof *r->first_handover);
    assert_true(r->key_at && r->seq_at && r->done && r->first_handover);
    for (int p = 0; p < PARTITIONS; p++)
        for (int o = 0; o < MAX_OFFSETS; o++) {
            r->key_at[p][o] = -1;
            atomic_init(&r->first_handover[p][o], -1);
        }
    checker_init(&r->ck, keys);
    for (int p = 0; p < PARTITIONS; p++)
        atomic_init(&r->sampled[p], -1);
    R = r;

    /* Everything is produced first, so that the faults of Produce reach the dead-letter
     * producer alone. */
    producer prod;
    producer_start(&prod, &k);
    for (int s = 0; s < per_key; s++)
        for (int key = 0; key < keys; key++)
            produce_seq(&prod, topic, key, s);
    producer_flush(&prod);
    assert_int_equal(atomic_load(&prod.delivered), (long)keys * per_key);
    producer_stop(&prod);
    long total = read_topic(&k, topic, PARTITIONS, note_source, r);
    assert_int_equal(total, (long)keys * per_key);
    for (int p = 0; p < PARTITIONS; p++) {
        r->ends[p] = 0;
        for (int64_t o = 0; o < MAX_OFFSETS; o++)
            if (r->key_at[p][o] >= 0)
                r->ends[p] = o + 1;
    }

    memset(&C, 0, sizeof C);
    assert_int_equal(uv_mutex_init(&C.mu), 0);
    assert_int_equal(uv_cond_init(&C.cv), 0);
    assert_int_equal(uv_thread_create(&C.thread, completer_main, &C), 0);

    const char *topics[] = {topic};
    cthread a, b; /* a: asynchronous, b: blocking */
    cthread *ts[] = {&a, &b};
    consumers[0] = &a;
    consumers[1] = &b;
    for (int i = 0; i < 2; i++) {
        ct_init(ts[i], consumer_conf(&k, group, "cooperative-sticky"), topics, 1,
                i == 0 ? NULL : blocking_handler, r);
        if (i == 0) {
            ts[i]->opts.async_handler = async_handler;
            ts[i]->opts.dispatch.lanes = NULL;
            ts[i]->opts.dispatch.lane_count = 16;
        }
        if (strstr(f->name, "propagation 1 s"))
            conf_set_ok(ts[i]->opts.conf, "topic.metadata.propagation.max.ms", "1000");
        ts[i]->opts.dispatch.max_attempts = 2;
        if (f->kind == F_DLQ_MISSING) {
            /* The poison key's dead letters spread over several seconds (each waits 60 + 120
             * ms for its retries), so that the topic goes missing while they are produced. */
            ts[i]->opts.dispatch.max_attempts = 3;
            ts[i]->opts.dispatch.backoff_ms = 60;
            ts[i]->opts.dispatch.backoff_max_ms = 120;
        }
        ts[i]->opts.dlq_retry_ms = 300;
        ts[i]->opts.revoke_timeout_ms = 5000;
        ts[i]->rebalance_hook = on_rebalance;
        ts[i]->error_hook = on_error_seen;
        ts[i]->dead_letter_hook = on_dead_letter_seen;
    }
    if (before_start(f))
        inject(f, group, true);
    double t0 = now_s();
    r->t_start = t0;
    for (int i = 0; i < 2; i++)
        assert_rl_ok(ct_start(ts[i]));
    uv_thread_t sampler;
    assert_int_equal(uv_thread_create(&sampler, sampler_main, r), 0);

    /* The fault, once a third of the work is done; the dead-letter topic's, once a fifth of
     * the dead letters are (the poison key's messages fail fast: most are dead-lettered before
     * a third of the rest is done). */
    if (f->kind == F_DLQ_MISSING)
        WAIT_FOR(atomic_load(&r->dead_letters_acked) >= per_key / 5, 60);
    else
        WAIT_FOR(done_count(r) >= total / 3, 60);
    double t_fault = now_s();
    /* What a loss now would hand out again: the completed work above the committed offsets. */
    int64_t lag = 0;
    for (int p = 0; p < PARTITIONS; p++) {
        int64_t got = atomic_load(&r->sampled[p]);
        for (int64_t o = got < 0 ? 0 : got; o < r->ends[p]; o++)
            lag += atomic_load(&r->done[p][o]) != 0;
    }
    if (getenv("RINGLANE_TEST_VERBOSE"))
        for (int p = 0; p < PARTITIONS; p++)
            printf("  at the fault: %s [%d] committed %" PRId64 ", completed up to %" PRId64 "\n",
                   topic, p, atomic_load(&r->sampled[p]), first_unfinished(r, p));
    if (!before_start(f))
        inject(f, group, true);
    if (getenv("RINGLANE_TEST_VERBOSE"))
        printf("  %.2f s: the fault\n", now_s() - t0);
    if (hold_ms(f)) {
        sleep_ms(hold_ms(f));
        /* A case that must be reported stays missing until it is, while dead letters are still
         * to come (at most 30 s more): how soon the producer sees the topic gone is its next
         * metadata refresh, not this clock's. */
        if (f->kind == F_DLQ_MISSING && f->reported)
            WAIT_FOR(atomic_load(&r->dlq_errors) > 0 ||
                         atomic_load(&r->dead_letters_acked) >= per_key,
                     30);
        inject(f, group, false);
    }
    long dlq_errors_held = hold_ms(f) ? atomic_load(&r->dlq_errors) : -1;
    WAIT_FOR(done_count(r) >= (close_mid ? total / 2 : total),
             getenv("RINGLANE_FAULT_WAIT") ? atoi(getenv("RINGLANE_FAULT_WAIT")) : 120);
    double t_end = now_s();
    inject(f, group, false);
    if (!close_mid)
        sleep_ms(300); /* a last periodic commit (commit_interval_ms 100) */
    if (getenv("RINGLANE_TEST_VERBOSE"))
        printf("  %.2f s: the work done; closing\n", now_s() - t0);
    if (close_together) {
        ct_close_async(&a);
        ct_close_async(&b);
        ct_join(&a);
        ct_join(&b);
    } else {
        ct_stop(&a);
        ct_stop(&b);
    }
    atomic_store(&r->stop_sampler, true);
    uv_thread_join(&sampler);
    uv_mutex_lock(&C.mu);
    C.stop = true;
    uv_cond_signal(&C.cv);
    uv_mutex_unlock(&C.mu);
    uv_thread_join(&C.thread);

    /* The dead-letter topic holds every poison message. */
    dlq_tally dt = {r, 0, 0, calloc(PARTITIONS, sizeof(bool[MAX_OFFSETS]))};
    assert_non_null(dt.seen);
    read_topic(&k, dlq, 1, note_dead_letter, &dt);
    long lost = 0;
    for (int p = 0; p < PARTITIONS; p++)
        for (int64_t o = 0; o < r->ends[p]; o++) {
            if (r->key_at[p][o] < 0)
                continue;
            bool ok = r->key_at[p][o] == POISON_KEY ? dt.seen[p][o] : atomic_load(&r->done[p][o]);
            lost += !ok && !close_mid;
        }
    int64_t final[PARTITIONS];
    rd_kafka_t *rk = outside_handle(group);
    assert_true(read_committed(rk, topic, final));
    rd_kafka_destroy(rk);
    int64_t behind = 0;
    for (int p = 0; p < PARTITIONS; p++) {
        int64_t w = first_unfinished(r, p), got = final[p] < 0 ? 0 : final[p];
        behind += w - got;
        if (close_mid || getenv("RINGLANE_TEST_VERBOSE"))
            printf("  %s [%d]: completed up to %" PRId64 ", committed %" PRId64 "\n", topic, p, w,
                   final[p]);
    }

    memset(out, 0, sizeof *out);
    out->duplicates = atomic_load(&r->ck.duplicates);
    out->dup_after_loss = atomic_load(&r->dup_after_loss);
    out->unexplained = atomic_load(&r->dup_unexplained);
    out->lost = lost;
    out->violations = atomic_load(&r->ck.violations) + atomic_load(&r->ck.overlaps) +
                      atomic_load(&r->ck.foreign) + out->unexplained +
                      atomic_load(&r->commit_passed_unfinished);
    out->lost_events = atomic_load(&r->lost_events);
    out->commit_refused = atomic_load(&r->commit_refused);
    out->errors = atomic_load(&r->errors);
    out->dlq_errors = atomic_load(&r->dlq_errors);
    out->samples = atomic_load(&r->commit_samples);
    out->finish_s = t_end - t_fault;
    out->behind = behind;
    out->dlq_errors_held = dlq_errors_held >= 0 ? dlq_errors_held : out->dlq_errors;
    out->handled_unowned = atomic_load(&r->handled_unowned);
    out->violations += out->handled_unowned;
    double ta = atomic_load(&r->t_first_assigned);
    out->first_assigned_s = ta > 0 ? ta - t0 : -1;
    printf("fault | %s | duplicates %ld (after a loss %ld, unexplained %ld) | lost %ld | "
           "violations %ld | finish %.1f s after the fault (%.1f s run) | partitions lost %ld | "
           "commit errors %ld | dead-letter errors %ld | on_error %ld | dead letters %ld/%d | "
           "commit samples %ld | completed above the commit at the fault %" PRId64
           " | left uncommitted at close %" PRId64
           " | first assignment %.1f s after the start | dead-letter errors while it lasted %ld"
           " | handled without holding the partition %ld\n",
           f->name, out->duplicates, out->dup_after_loss, out->unexplained, out->lost,
           out->violations, out->finish_s, t_end - t0, out->lost_events, out->commit_refused,
           out->dlq_errors, out->errors, dt.poison, per_key, out->samples, lag, out->behind,
           out->first_assigned_s, out->dlq_errors_held, out->handled_unowned);
    fflush(stdout);

    ct_free(&a);
    ct_free(&b);
    uv_cond_destroy(&C.cv);
    uv_mutex_destroy(&C.mu);
    free(dt.seen);
    checker_free(&r->ck);
    free(r->key_at);
    free(r->seq_at);
    free(r->done);
    free(r->first_handover);
    free(r);
    R = NULL;
}

/* The checker's verdict; with `clean_close`, also a clean close's: it leaves no completed work
 * uncommitted. The matrix prints that figure and does not judge it: after a lost assignment a
 * close still left completed work uncommitted in 1 of about 10 runs (docs/operations.md). */
static void assert_checked(const fault *f, const outcome *o, bool clean_close)
{
    if (o->lost || o->violations || (clean_close && o->behind))
        fail_msg("%s: lost %ld, violations %ld, left uncommitted at close %" PRId64, f->name,
                 o->lost, o->violations, o->behind);
    if (f->reported && !o->dlq_errors_held)
        fail_msg("%s: the dead-letter producer's trouble was never reported (on_error)", f->name);
}

/* --- the cases --- */

static int case_keys(void)
{
    return SLOW_BUILD ? 40 : 100;
}

static int case_per_key(void)
{
    return SLOW_BUILD ? 25 : 50;
}

/* The short matrix; RINGLANE_FAULT_ONLY=text runs instead the faults of both lists whose name
 * holds that text. */
static void fault_matrix(void **state)
{
    (void)state;
    const char *only = getenv("RINGLANE_FAULT_ONLY");
    size_t n1 = sizeof short_matrix / sizeof *short_matrix;
    size_t n2 = only ? sizeof soak_extra / sizeof *soak_extra : 0;
    for (size_t i = 0; i < n1 + n2; i++) {
        const fault *f = i < n1 ? &short_matrix[i] : &soak_extra[i - n1];
        if (only && !strstr(f->name, only))
            continue;
        outcome o;
        run_case(f, case_keys(), case_per_key(), false, false, &o);
        assert_checked(f, &o, false);
    }
}

/* Two consumers closing at once, half-way through the work: the first one's LeaveGroup starts
 * a rebalance, and the second one's final commit meets it (the mock coordinator answers
 * REBALANCE_IN_PROGRESS while it waits for the members to rejoin). A clean close leaves
 * nothing completed uncommitted: each partition's committed offset is its completed watermark
 * (the first offset neither handled nor dead-lettered). */
static void two_clean_closes_commit_the_watermarks(void **state)
{
    (void)state;
    const fault none = {"none, two consumers closed together", F_NONE, 0, 0, 0, false, false};
    outcome o;
    run_case(&none, case_keys(), case_per_key(), true, true, &o);
    assert_checked(&none, &o, true);
}

/* The soak: faults drawn at random until RINGLANE_FAULT_SOAK_SECONDS have passed. */
static void fault_soak(void **state)
{
    (void)state;
    const char *secs = getenv("RINGLANE_FAULT_SOAK_SECONDS");
    if (!secs || atoi(secs) <= 0)
        skip();
    const char *seed_s = getenv("RINGLANE_FAULT_SEED");
    unsigned seed = seed_s ? (unsigned)strtoul(seed_s, NULL, 10) : (unsigned)time(NULL);
    printf("fault soak: %s s, seed %u (RINGLANE_FAULT_SEED=%u repeats it)\n", secs, seed, seed);
    fflush(stdout);
    srand(seed);
    size_t n1 = sizeof short_matrix / sizeof *short_matrix;
    size_t n2 = sizeof soak_extra / sizeof *soak_extra;
    double end = now_s() + atoi(secs);
    long cases = 0, failed = 0;
    while (now_s() < end) {
        size_t pick = (size_t)rand() % (n1 + n2);
        const fault *f = pick < n1 ? &short_matrix[pick] : &soak_extra[pick - n1];
        outcome o;
        run_case(f, case_keys(), case_per_key() * (1 + rand() % 3), rand() % 2 == 0, false, &o);
        cases++;
        if (o.lost || o.violations || (o.behind && !f->expires) ||
            (f->reported && !o.dlq_errors_held)) {
            failed++;
            printf("  FAILED: %s: lost %ld, violations %ld, left uncommitted %" PRId64 "\n",
                   f->name, o.lost, o.violations, o.behind);
        }
    }
    printf("fault soak: %ld cases, %ld failed, seed %u\n", cases, failed, seed);
    assert_int_equal(failed, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fault_matrix),
        cmocka_unit_test(two_clean_closes_commit_the_watermarks),
        cmocka_unit_test(fault_soak),
    };
    if (getenv("RINGLANE_TEST_FILTER"))
        cmocka_set_test_filter(getenv("RINGLANE_TEST_FILTER"));
    return cmocka_run_group_tests(tests, suite_setup, suite_teardown);
}
