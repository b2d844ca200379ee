/* SPDX-License-Identifier: BSD-2-Clause */
/* The offset map on librdkafka's mock cluster (3 brokers on 127.0.0.1 in this process): commits
 * carry the offsets completed above the committed one, and a partition's next owner skips
 * them; what never completed (a message held, abandoned by a revoke or a loss, a dead letter
 * not yet acknowledged) is never in a map and is handled again; a map is never longer than
 * offset_map_max_bytes (intake stops exactly where it could be); metadata that is not a usable
 * map is reported once and ignored; offset_map_max_bytes 0 turns it all off. Every wait here
 * waits for an event; the time limits only stop a run that hangs. */
#define _POSIX_C_SOURCE 200809L
#include "consumer_test_util.h"
#include "offset_map.h"

#define PARTS_MAX 6
#define OFFSETS_MAX 2048

/* --- what happened to every offset --- */

typedef struct hold {
    int key;
    int64_t seq;
    atomic_bool taken;   /* its first call came (and was held) */
    atomic_bool release; /* the test lets it finish */
    atomic_int rc;       /* rl_consumer_complete's answer for the held ticket, 1 before */
    uint64_t ticket;     /* the consumer's loop thread */
    rl_consumer_t *c;
    uv_timer_t poll; /* on that loop: looks at `release` every 10 ms */
    bool poll_open;
    const rd_kafka_message_t *m; /* the consumer keeps it while the ticket is valid */
    int64_t offset;
    int partition;
} hold;

typedef struct om_ctx {
    checker ck;
    atomic_int state[PARTS_MAX][OFFSETS_MAX]; /* 0 never, 1 handed to a handler, 2 completed */
    atomic_int calls_after[PARTS_MAX][OFFSETS_MAX]; /* handler calls once `after` is set */
    atomic_bool after;
    atomic_long calls;
    hold holds[2];
    int nholds;
    int fail_key; /* its messages fail every attempt (dead letters); -1: none */
} om_ctx;

static void om_init(om_ctx *x, int keys)
{
    memset(x, 0, sizeof *x);
    checker_init(&x->ck, keys);
    for (int p = 0; p < PARTS_MAX; p++)
        for (int o = 0; o < OFFSETS_MAX; o++) {
            atomic_init(&x->state[p][o], 0);
            atomic_init(&x->calls_after[p][o], 0);
        }
    atomic_init(&x->after, false);
    atomic_init(&x->calls, 0);
    x->fail_key = -1;
}

static hold *om_hold(om_ctx *x, int key, int64_t seq)
{
    hold *h = &x->holds[x->nholds++];
    h->key = key;
    h->seq = seq;
    h->offset = -1;
    atomic_init(&h->taken, false);
    atomic_init(&h->release, false);
    atomic_init(&h->rc, 1);
    return h;
}

static void hold_closed(uv_handle_t *h)
{
    (void)h;
}

/* Ends a held message: released by the test (it completes), or its partition went (its ticket
 * is stale by then). */
static void hold_end(hold *h)
{
    if (!h->poll_open)
        return;
    atomic_store(&h->rc, rl_consumer_complete(h->c, h->ticket, 0));
    uv_close((uv_handle_t *)&h->poll, hold_closed);
    h->poll_open = false;
}

static void hold_poll(uv_timer_t *t)
{
    hold *h = t->data;
    om_ctx *x = ((cthread *)rl_consumer_get_data(h->c))->user;
    if (!atomic_load(&h->release))
        return;
    checker_see(&x->ck, h->m);
    atomic_store(&x->state[h->partition][h->offset], 2);
    hold_end(h);
}

static void om_complete(om_ctx *x, rl_consumer_t *c, const rd_kafka_message_t *m, uint64_t ticket,
                        int status)
{
    if (status == 0) {
        checker_see(&x->ck, m);
        if (m->partition < PARTS_MAX && m->offset < OFFSETS_MAX)
            atomic_store(&x->state[m->partition][m->offset], 2);
    }
    assert_int_equal(rl_consumer_complete(c, ticket, status), 0);
}

/* Records the call, holds a message at its first call, fails the fail_key's, completes the
 * others at once. */
static void om_async(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt,
                     uint64_t ticket)
{
    (void)attempt;
    cthread *t = rl_consumer_get_data(c);
    om_ctx *x = t->user;
    atomic_fetch_add(&x->calls, 1);
    int key = -1;
    int64_t seq = -1;
    assert_true(msg_parse(m, &key, &seq));
    assert_true(m->partition < PARTS_MAX && m->offset < OFFSETS_MAX);
    atomic_store(&x->state[m->partition][m->offset], 1);
    if (atomic_load(&x->after))
        atomic_fetch_add(&x->calls_after[m->partition][m->offset], 1);
    for (int i = 0; i < x->nholds; i++) {
        hold *h = &x->holds[i];
        if (h->key != key || h->seq != seq || atomic_exchange(&h->taken, true))
            continue;
        h->c = c;
        h->ticket = ticket;
        h->m = m;
        h->offset = m->offset;
        h->partition = m->partition;
        assert_int_equal(uv_timer_init(&t->loop, &h->poll), 0);
        h->poll.data = h;
        h->poll_open = true;
        assert_int_equal(uv_timer_start(&h->poll, hold_poll, 10, 10), 0);
        return;
    }
    if (key == x->fail_key) {
        assert_int_equal(rl_consumer_complete(c, ticket, -1), 0);
        return;
    }
    om_complete(x, c, m, ticket, 0);
}

/* A partition held by this consumer went: its held messages' tickets are stale now. */
static void om_rebalance(rl_consumer_t *c, int event, const rd_kafka_topic_partition_list_t *l)
{
    om_ctx *x = ((cthread *)rl_consumer_get_data(c))->user;
    if (event == RL_CONSUMER_ASSIGNED)
        return;
    for (int i = 0; i < x->nholds; i++) {
        hold *h = &x->holds[i];
        if (h->c != c || !h->poll_open)
            continue;
        for (int i2 = 0; i2 < l->cnt; i2++)
            if (l->elems[i2].partition == h->partition)
                hold_end(h);
    }
}

static void om_thread(cthread *t, om_ctx *x, const char *group, const char *strategy,
                      const char *const *topics)
{
    ct_init(t, consumer_conf(&k, group, strategy), topics, 1, NULL, x);
    t->opts.handler = NULL;
    t->opts.async_handler = om_async;
    t->opts.dispatch.lanes = NULL; /* the default: 65,536 lanes, keys rarely share one */
    t->opts.dispatch.lane_count = 0;
    t->opts.revoke_timeout_ms = 500;
    t->rebalance_hook = om_rebalance;
}

/* The log: which key and sequence number each offset of each partition holds. */
typedef struct logmap {
    int key[PARTS_MAX][OFFSETS_MAX];
    int64_t seq[PARTS_MAX][OFFSETS_MAX];
    int64_t high[PARTS_MAX];
} logmap;

static void note_log(const rd_kafka_message_t *m, void *arg)
{
    logmap *lm = arg;
    int key = -1;
    int64_t seq = -1;
    assert_true(msg_parse(m, &key, &seq));
    lm->key[m->partition][m->offset] = key;
    lm->seq[m->partition][m->offset] = seq;
    if (m->offset + 1 > lm->high[m->partition])
        lm->high[m->partition] = m->offset + 1;
}

static void produce_keys(const char *topic, int parts, int keys, int per_key, logmap *lm)
{
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, parts, 1), 0);
    producer p;
    producer_start(&p, &k);
    for (int s = 0; s < per_key; s++)
        for (int key = 0; key < keys; key++)
            produce_seq(&p, topic, key, s);
    producer_flush(&p);
    producer_stop(&p);
    memset(lm, 0, sizeof *lm);
    read_topic(&k, topic, parts, note_log, lm);
}

/* A key of 0..keys-1 that the ring partitioner puts on partition `part` of `parts` and that
 * shares its lane with no other key, on the default asynchronous lanes (the dispatcher's ring
 * over "lane-0" .. "lane-65535", profile RL_CONSUMER_ASYNC_PROFILE): holding it holds no other
 * key. */
static void key_lanes(int keys, uint32_t *lane)
{
    enum { LANES = RL_CONSUMER_ASYNC_LANES };
    static char names[LANES][16];
    static rl_member members[LANES];
    for (int i = 0; i < LANES; i++) {
        snprintf(names[i], sizeof names[i], RL_DISPATCH_LANE_PREFIX "%d", i);
        members[i] = (rl_member){.name = names[i], .weight = 1};
    }
    rl_ring_t *lanes;
    rl_ring_options ro;
    rl_ring_options_init(&ro);
    ro.profile = RL_CONSUMER_ASYNC_PROFILE;
    assert_rl_ok(rl_ring_build(members, LANES, &ro, &lanes));
    for (int key = 0; key < keys; key++) {
        char kk[16];
        int kl = msg_key(key, kk, sizeof kk);
        assert_rl_ok(rl_ring_lookup(lanes, kk, (size_t)kl, &lane[key]));
    }
    rl_ring_free(lanes);
}

static int lonely_key_on(int part, int parts, int keys)
{
    rl_kafka_partitioner_t *rp;
    assert_rl_ok(rl_kafka_partitioner_new(NULL, &rp));
    uint32_t *lane = calloc((size_t)keys, sizeof *lane);
    assert_non_null(lane);
    key_lanes(keys, lane);
    int found = -1;
    for (int key = 0; key < keys && found < 0; key++) {
        char kk[16];
        int kl = msg_key(key, kk, sizeof kk);
        int32_t got;
        assert_rl_ok(rl_kafka_partitioner_partition(rp, kk, (size_t)kl, parts, &got));
        bool alone = got == part;
        for (int other = 0; other < keys && alone; other++)
            alone = other == key || lane[other] != lane[key];
        if (alone)
            found = key;
    }
    free(lane);
    rl_kafka_partitioner_destroy(rp);
    assert_true(found >= 0);
    return found;
}

/* The committed map of a partition, decoded (n 0 when none). */
static int64_t committed_map(const char *group, const char *topic, int part, rl__offset_map *m)
{
    char meta[RL__OFFSET_MAP_MAX_BYTES + 1];
    int64_t off = committed_meta(&k, group, topic, part, meta, sizeof meta);
    memset(m, 0, sizeof *m);
    if (meta[0])
        assert_int_equal(rl__offset_map_decode(meta, strlen(meta), m, NULL), RL__OFFSET_MAP_OK);
    return off;
}

static bool in_map(const rl__offset_map *m, int64_t o)
{
    for (size_t i = 0; i < m->n; i++)
        if (o >= m->spans[i].start && o < m->spans[i].end)
            return true;
    return false;
}

/* The committed map of partition `part` says exactly: the base is the held message's offset,
 * and every offset above it is complete but those of the held key. */
static bool map_is_all_but(const char *group, const char *topic, int part, const logmap *lm,
                           int key, int64_t base)
{
    rl__offset_map m;
    int64_t off = committed_map(group, topic, part, &m);
    bool ok = off == base;
    for (int64_t o = base + 1; ok && o < lm->high[part]; o++)
        ok = in_map(&m, o) == (lm->key[part][o] != key);
    rl__offset_map_free(&m);
    return ok;
}

/* One partition of `keys` keys x `per_key` messages; consumer `a` (cooperative-sticky, the
 * offset map on or off) holds the third message (seq 2) of a key alone on the partition, and
 * the call returns once every other message has completed: the key's first two and all the
 * other keys'. */
static hold *start_one_held(const char *topic, const char *group, int keys, int per_key,
                            bool map_on, logmap *lm, om_ctx *x, cthread *a, const char **topics)
{
    produce_keys(topic, 1, keys, per_key, lm);
    om_init(x, keys);
    hold *h = om_hold(x, lonely_key_on(0, 1, keys), 2);
    om_thread(a, x, group, "cooperative-sticky", topics);
    if (!map_on)
        a->opts.offset_map_max_bytes = 0;
    assert_rl_ok(ct_start(a));
    long want = (long)(keys - 1) * per_key + 2;
    WAIT_FOR(checker_complete(&x->ck, per_key) == want, 60);
    return h;
}

/* --- skipping after a rebalance --- */

/* Two partitions, 50 keys x 20 messages; one message of a key on each partition is held at its
 * first call. Once every other message has completed and consumer A's periodic commit carries
 * maps saying so, consumer B joins. Each partition that moves is revoked with its held message
 * still in flight: the revoke abandons it after revoke_timeout_ms and commits the map; the
 * next owner handles the held key's messages and skips every other one. No message that a
 * committed map called complete is handed to a handler again. A partition that stays with A
 * (cooperative-sticky moves one) gets its held message released. */
static void skip_after_rebalance(const char *strategy, const char *topic, const char *group)
{
    enum { PARTS = 2, KEYS = 50, PER_KEY = 20 };
    static logmap lm;
    produce_keys(topic, PARTS, KEYS, PER_KEY, &lm);
    static om_ctx x;
    om_init(&x, KEYS);
    hold *h0 = om_hold(&x, lonely_key_on(0, PARTS, KEYS), 3);
    hold *h1 = om_hold(&x, lonely_key_on(1, PARTS, KEYS), 3);
    const char *topics[] = {topic};
    cthread a, b;
    om_thread(&a, &x, group, strategy, topics);
    assert_rl_ok(ct_start(&a));
    /* Everything but the held keys' messages from seq 3 on completes... */
    long want = (KEYS - 2) * PER_KEY + 2 * 3;
    WAIT_FOR(checker_complete(&x.ck, PER_KEY) == want, 60);
    assert_int_equal(checker_complete(&x.ck, PER_KEY), want);
    /* ... and the periodic commit carries it. */
    bool maps = false;
    for (double end = now_s() + 30; !maps && now_s() < end; sleep_ms(20))
        maps = map_is_all_but(group, topic, 0, &lm, h0->key, h0->offset) &&
               map_is_all_but(group, topic, 1, &lm, h1->key, h1->offset);
    assert_true(maps);
    ct_command(&a, CMD_STATS, NULL); /* its JSON is cut (1,024 lanes): t.parts is enough */
    assert_int_equal(a.nparts, 2);
    for (size_t i = 0; i < a.nparts; i++)
        assert_true(a.parts[i].offset_map_bytes > 0); /* both partitions carry a map */

    atomic_store(&x.after, true);
    om_thread(&b, &x, group, strategy, topics);
    assert_rl_ok(ct_start(&b));
    WAIT_FOR(ct_assigned(&b) > 0, 60);
    assert_true(ct_assigned(&b) > 0);
    /* A partition A keeps: its held message may finish now. */
    WAIT_FOR(ct_assigned(&a) + ct_assigned(&b) == PARTS, 60);
    atomic_store(&h0->release, true);
    atomic_store(&h1->release, true);
    WAIT_FOR(checker_complete(&x.ck, PER_KEY) == KEYS * PER_KEY, 60);
    int64_t committed[PARTS] = {-1, -1};
    for (double end = now_s() + 30; now_s() < end; sleep_ms(20)) {
        committed_offsets(&k, group, topic, PARTS, committed);
        if (committed[0] == lm.high[0] && committed[1] == lm.high[1])
            break;
    }
    ct_stop(&b);
    ct_stop(&a);
    assert_int_equal(checker_complete(&x.ck, PER_KEY), KEYS * PER_KEY);
    assert_int_equal(atomic_load(&x.ck.violations), 0);
    assert_int_equal(atomic_load(&x.ck.overlaps), 0);
    assert_true(committed[0] == lm.high[0] && committed[1] == lm.high[1]);
    /* What the maps called complete was never handled again; what moved was skipped. */
    long moved_skips = 0;
    for (int p = 0; p < PARTS; p++) {
        hold *h = p == 0 ? h0 : h1;
        for (int64_t o = h->offset + 1; o < lm.high[p]; o++) {
            if (lm.key[p][o] == h->key)
                continue;
            if (atomic_load(&x.calls_after[p][o]))
                fail_msg("partition %d offset %lld: in the committed map, handled again", p,
                         (long long)o);
            moved_skips++;
        }
    }
    uint64_t skipped = a.last.skipped + b.last.skipped;
    print_message("  %s: skipped %llu (A %llu, B %llu), handler calls %ld for %d messages\n",
                  strategy, (unsigned long long)skipped, (unsigned long long)a.last.skipped,
                  (unsigned long long)b.last.skipped, atomic_load(&x.calls), KEYS * PER_KEY);
    assert_true(b.last.skipped > 0);
    if (strcmp(strategy, "range") == 0)
        assert_true(skipped >= (uint64_t)moved_skips); /* both partitions moved */
    assert_int_equal(a.last.offset_map_rejected + b.last.offset_map_rejected, 0);
    ct_free(&a);
    ct_free(&b);
    checker_free(&x.ck);
}

static void skip_after_rebalance_eager(void **state)
{
    (void)state;
    skip_after_rebalance("range", "om-eager", "g-om-eager");
}

static void skip_after_rebalance_cooperative(void **state)
{
    (void)state;
    skip_after_rebalance("cooperative-sticky", "om-coop", "g-om-coop");
}

/* --- a lost partition commits nothing; its abandoned messages are handled again --- */

/* One partition, one message held. Once the map is committed, the group coordinator answers a
 * heartbeat ILLEGAL_GENERATION: librdkafka declares the assignment lost. The consumer commits
 * nothing and the held message's ticket turns stale (it never enters a map); when the
 * partition comes back the consumer skips what the committed map says and handles the held
 * message again, and its key's later messages. */
static void lost_partition_commits_nothing(void **state)
{
    (void)state;
    const char *topic = "om-lost", *group = "g-om-lost";
    enum { KEYS = 20, PER_KEY = 10 };
    static logmap lm;
    static om_ctx x;
    const char *topics[] = {topic};
    cthread a;
    hold *h = start_one_held(topic, group, KEYS, PER_KEY, true, &lm, &x, &a, topics);
    bool map = false;
    for (double end = now_s() + 30; !map && now_s() < end; sleep_ms(20))
        map = map_is_all_but(group, topic, 0, &lm, h->key, h->offset);
    assert_true(map);
    atomic_store(&x.after, true);
    /* Heartbeat (API key 12): the group moved on without us. */
    rd_kafka_mock_push_request_errors(k.mock, 12, 1, RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION);
    WAIT_FOR(checker_complete(&x.ck, PER_KEY) == KEYS * PER_KEY, 60);
    ct_command(&a, CMD_STATS, NULL);
    ct_stop(&a);
    assert_int_equal(checker_complete(&x.ck, PER_KEY), KEYS * PER_KEY);
    assert_int_equal(atomic_load(&x.ck.violations), 0);
    assert_true(a.last.lost >= 1);
    assert_int_equal(atomic_load(&h->rc), RL_ESTALE); /* abandoned by the loss */
    assert_true(a.last.abandoned >= 1);
    for (int64_t o = 0; o < lm.high[0]; o++)
        if (lm.key[0][o] != h->key && o > h->offset && atomic_load(&x.calls_after[0][o]))
            fail_msg("offset %lld: in the committed map, handled again", (long long)o);
    assert_int_equal(atomic_load(&x.calls_after[0][h->offset]), 1); /* handled again */
    assert_true(a.last.skipped > 0);
    ct_free(&a);
    checker_free(&x.ck);
}

/* --- dead letters enter the map only once acknowledged --- */

static int fail_handler(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)attempt;
    om_ctx *x = ((cthread *)rl_consumer_get_data(c))->user;
    int key = -1;
    int64_t seq = -1;
    assert_true(msg_parse(m, &key, &seq));
    atomic_fetch_add(&x->calls, 1);
    if (atomic_load(&x->after))
        atomic_fetch_add(&x->calls_after[m->partition][m->offset], 1);
    if (key == x->fail_key && seq == 0)
        return -1;
    checker_see(&x->ck, m);
    return 0;
}

/* Key 5's first message fails every attempt; the dead-letter topic has no leader, so its
 * produce waits. Everything else completes, and the committed map says so, with the dead
 * letter's offset as its base. Closing commits the same (the revoke waits revoke_timeout_ms for
 * the dead letter, then lets go). The dead-letter topic gets its leader back; the next
 * consumer handles that one message again, dead-letters it, and skips every other one. */
static void dead_letters_enter_the_map_once_acknowledged(void **state)
{
    (void)state;
    const char *topic = "om-dlq", *group = "g-om-dlq";
    enum { KEYS = 20, PER_KEY = 10 };
    static logmap lm;
    produce_keys(topic, 1, KEYS, PER_KEY, &lm);
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, "om-dlq.dlq", 1, 1), 0);
    assert_int_equal(rd_kafka_mock_partition_set_leader(k.mock, "om-dlq.dlq", 0, -1), 0);
    int64_t poison = -1;
    for (int64_t o = 0; o < lm.high[0] && poison < 0; o++)
        if (lm.key[0][o] == 5 && lm.seq[0][o] == 0)
            poison = o;
    static om_ctx x;
    om_init(&x, KEYS);
    x.fail_key = 5;
    const char *topics[] = {topic};
    cthread a;
    ct_init(&a, consumer_conf(&k, group, "cooperative-sticky"), topics, 1, fail_handler, &x);
    a.opts.dispatch.max_attempts = 2;
    a.opts.revoke_timeout_ms = 1000;
    assert_rl_ok(ct_start(&a));
    /* Every message but the poison one is handled (key 5's later ones too: a dead letter
     * frees its key). */
    WAIT_FOR(atomic_load(&x.ck.handled) == KEYS * PER_KEY - 1, 60);
    assert_int_equal(atomic_load(&x.ck.handled), KEYS * PER_KEY - 1);
    bool map = false;
    for (double end = now_s() + 30; !map && now_s() < end; sleep_ms(20))
        map = map_is_all_but(group, topic, 0, &lm, -1, poison);
    assert_true(map); /* the base is the dead letter: not complete while unacknowledged */
    assert_int_equal(ct_command(&a, CMD_STATS, NULL), 0);
    assert_non_null(strstr(a.stats, "\"dead_letters_in_flight\":1"));
    assert_non_null(strstr(a.stats, "\"offset_map_bytes\":"));
    ct_stop(&a);
    assert_true(map_is_all_but(group, topic, 0, &lm, -1, poison));
    assert_int_equal(ct_dead_letters(&a), 0);

    assert_int_equal(rd_kafka_mock_partition_set_leader(k.mock, "om-dlq.dlq", 0, 1), 0);
    atomic_store(&x.after, true);
    cthread b;
    ct_init(&b, consumer_conf(&k, group, "cooperative-sticky"), topics, 1, fail_handler, &x);
    b.opts.dispatch.max_attempts = 2;
    assert_rl_ok(ct_start(&b));
    WAIT_FOR(ct_dead_letters(&b) == 1, 60);
    int64_t off = -1;
    for (double end = now_s() + 30; off != lm.high[0] && now_s() < end; sleep_ms(20))
        committed_offsets(&k, group, topic, 1, &off);
    ct_stop(&b);
    assert_int_equal(ct_dead_letters(&b), 1);
    assert_true(off == lm.high[0]); /* acknowledged: complete, committed past */
    assert_int_equal(atomic_load(&x.calls_after[0][poison]), 2); /* its two attempts */
    for (int64_t o = 0; o < lm.high[0]; o++)
        if (o != poison)
            assert_int_equal(atomic_load(&x.calls_after[0][o]), 0);
    assert_int_equal(b.last.skipped, (uint64_t)(lm.high[0] - poison - 1));
    ct_free(&a);
    ct_free(&b);
    checker_free(&x.ck);
}

/* --- the bound: intake stops exactly where a map could outgrow offset_map_max_bytes --- */

/* With offset_map_max_bytes 64 and the first message held (offset 0), the partition takes
 * offsets up to the largest span whose every map fits, and not one more: its window holds
 * exactly that many while the rest wait, kept. Completions go on meanwhile, and the committed
 * map is at most 64 bytes. Released, the held message lets intake go on to the end. */
static void intake_stops_at_the_span_cap(void **state)
{
    (void)state;
    const char *topic = "om-cap", *group = "g-om-cap";
    enum { KEYS = 40, PER_KEY = 15, LIMIT = 64 };
    static logmap lm;
    produce_keys(topic, 1, KEYS, PER_KEY, &lm);
    assert_int_equal(lm.key[0][0], 0);
    /* The span cap when the oldest unfinished offset is 0: the largest n for which every
     * map from a base b in 0..n-1 to offset n - 1 fits (by brute force over the bitmap's
     * length, the longest form). */
    uint64_t cap = 2;
    for (bool fits = true; fits; cap += fits) {
        for (uint64_t b = 0; fits && cap + 1 - b >= 2; b++)
            fits = rl__offset_map_bitmap_len((int64_t)b, cap + 1 - b) <= LIMIT;
    }
    assert_true(cap > 100 && cap < (uint64_t)lm.high[0] - 50);
    static om_ctx x;
    om_init(&x, KEYS);
    hold *h = om_hold(&x, 0, 0);
    const char *topics[] = {topic};
    cthread a;
    om_thread(&a, &x, group, "cooperative-sticky", topics);
    a.opts.offset_map_max_bytes = LIMIT;
    assert_rl_ok(ct_start(&a));
    /* Everything taken completes but the messages of key 0 and of any key on its lane
     * (behind the held one). */
    uint32_t lane[KEYS];
    key_lanes(KEYS, lane);
    long behind = 0;
    for (uint64_t o = 0; o < cap; o++)
        behind += lane[lm.key[0][o]] == lane[0];
    long want = (long)cap - behind;
    WAIT_FOR(atomic_load(&x.ck.handled) == want, 60);
    sleep_ms(300); /* had intake not stopped, more would come now */
    assert_int_equal(atomic_load(&x.ck.handled), want);
    ct_command(&a, CMD_STATS, NULL);
    assert_int_equal(a.nparts, 1);
    assert_int_equal(a.parts[0].in_flight, cap); /* offsets 0 .. cap - 1, not one more */
    assert_true(a.parts[0].pending > 0);         /* the rest wait, kept */
    assert_int_equal(a.parts[0].paused, 0);
    /* The committed map fits, and says what completed. */
    char meta[RL__OFFSET_MAP_MAX_BYTES + 1];
    bool map = false;
    for (double end = now_s() + 30; !map && now_s() < end; sleep_ms(20)) {
        int64_t off = committed_meta(&k, group, topic, 0, meta, sizeof meta);
        rl__offset_map m;
        if (off == 0 && meta[0] &&
            rl__offset_map_decode(meta, strlen(meta), &m, NULL) == RL__OFFSET_MAP_OK) {
            map = rl__offset_map_count(&m) == (uint64_t)want;
            rl__offset_map_free(&m);
        }
    }
    assert_true(map);
    assert_true(strlen(meta) <= LIMIT);
    atomic_store(&h->release, true);
    WAIT_FOR(checker_complete(&x.ck, PER_KEY) == KEYS * PER_KEY, 60);
    int64_t off = -1;
    for (double end = now_s() + 30; off != lm.high[0] && now_s() < end; sleep_ms(20))
        committed_offsets(&k, group, topic, 1, &off);
    ct_stop(&a);
    assert_int_equal(checker_complete(&x.ck, PER_KEY), KEYS * PER_KEY);
    assert_int_equal(atomic_load(&x.ck.violations), 0);
    assert_int_equal(atomic_load(&x.ck.duplicates), 0);
    assert_true(off == lm.high[0]);
    ct_free(&a);
    checker_free(&x.ck);
}

/* --- metadata that is not a usable map --- */

static atomic_int map_errors[8];

static void count_map_errors(rl_consumer_t *c, rd_kafka_resp_err_t err, const char *reason)
{
    (void)c;
    (void)err;
    int part;
    if (sscanf(reason, "offset map of om-bad [%d]", &part) == 1 && part >= 0 && part < 8)
        atomic_fetch_add(&map_errors[part], 1);
}

static int count_handler(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)attempt;
    om_ctx *x = ((cthread *)rl_consumer_get_data(c))->user;
    atomic_fetch_add(&x->calls_after[m->partition][m->offset], 1);
    return 0;
}

/* Six partitions of 30 messages, committed at offset 10 from outside the group with: another
 * tool's metadata, a damaged map, a map of version 2, a map whose base is not the committed
 * offset, no metadata, and a good map (offsets 12..19 and 25 complete). The consumer handles
 * every message from offset 10 on but the good map's, reports each bad one once (on_error,
 * offset_map_rejected 4), and skips 9. A consumer with offset_map_max_bytes 0 afterwards
 * reads no map at all. */
static void bad_metadata_is_reported_and_ignored(void **state)
{
    (void)state;
    const char *topic = "om-bad", *group = "g-om-bad";
    enum { PARTS = 6, N = 30 };
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, PARTS, 1), 0);
    producer p;
    producer_start(&p, &k);
    for (int part = 0; part < PARTS; part++)
        for (int i = 0; i < N; i++) {
            char v[32];
            int vl = snprintf(v, sizeof v, "%d %d", part, i);
            rd_kafka_producev(p.rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(part),
                              RD_KAFKA_V_KEY("k", 1), RD_KAFKA_V_VALUE(v, (size_t)vl),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        }
    producer_flush(&p);
    producer_stop(&p);
    char good[128], other_base[128], damaged[128], v2[128];
    size_t len;
    rl__offset_span spans[] = {{12, 20}, {25, 26}};
    assert_rl_ok(rl__offset_map_encode(10, spans, 2, good, sizeof good, &len));
    assert_rl_ok(rl__offset_map_encode(9, spans, 2, other_base, sizeof other_base, &len));
    snprintf(damaged, sizeof damaged, "%s", good);
    damaged[len - 3] = damaged[len - 3] == 'A' ? 'B' : 'A';
    snprintf(v2, sizeof v2, "ringlane2:%s", good + strlen(RL__OFFSET_MAP_HEAD));
    const char *metas[PARTS] = {"checkpoint 42", damaged, v2, other_base, "", good};
    int64_t offsets[PARTS] = {10, 10, 10, 10, 10, 10};
    commit_with_meta(&k, group, topic, PARTS, offsets, metas);

    static om_ctx x;
    om_init(&x, 1);
    for (int i = 0; i < 8; i++)
        atomic_init(&map_errors[i], 0);
    const char *topics[] = {topic};
    cthread a;
    ct_init(&a, consumer_conf(&k, group, "cooperative-sticky"), topics, 1, count_handler, &x);
    a.error_hook = count_map_errors;
    assert_rl_ok(ct_start(&a));
    int64_t committed[PARTS];
    bool done = false;
    for (double end = now_s() + 60; !done && now_s() < end; sleep_ms(20)) {
        committed_offsets(&k, group, topic, PARTS, committed);
        done = true;
        for (int part = 0; part < PARTS; part++)
            done = done && committed[part] == N;
    }
    ct_stop(&a);
    assert_true(done);
    for (int part = 0; part < PARTS; part++)
        for (int o = 0; o < N; o++) {
            bool skip = part == 5 && ((o >= 12 && o < 20) || o == 25);
            int want = o < 10 || skip ? 0 : 1;
            if (atomic_load(&x.calls_after[part][o]) != want)
                fail_msg("partition %d offset %d: %d calls, want %d", part, o,
                         atomic_load(&x.calls_after[part][o]), want);
        }
    for (int part = 0; part < PARTS; part++)
        assert_int_equal(atomic_load(&map_errors[part]), part < 4 ? 1 : 0);
    assert_int_equal(a.last.offset_map_rejected, 4);
    assert_int_equal(a.last.skipped, 9);
    ct_free(&a);

    /* The same maps, read by a consumer with the map off: nothing skipped, nothing reported. */
    const char *group2 = "g-om-bad-off";
    commit_with_meta(&k, group2, topic, PARTS, offsets, metas);
    for (int part = 0; part < PARTS; part++)
        for (int o = 0; o < N; o++)
            atomic_store(&x.calls_after[part][o], 0);
    for (int i = 0; i < 8; i++)
        atomic_store(&map_errors[i], 0);
    cthread off;
    ct_init(&off, consumer_conf(&k, group2, "cooperative-sticky"), topics, 1, count_handler, &x);
    off.opts.offset_map_max_bytes = 0;
    off.error_hook = count_map_errors;
    assert_rl_ok(ct_start(&off));
    done = false;
    for (double end = now_s() + 60; !done && now_s() < end; sleep_ms(20)) {
        committed_offsets(&k, group2, topic, PARTS, committed);
        done = true;
        for (int part = 0; part < PARTS; part++)
            done = done && committed[part] == N;
    }
    ct_stop(&off);
    assert_true(done);
    for (int part = 0; part < PARTS; part++) {
        for (int o = 0; o < N; o++)
            assert_int_equal(atomic_load(&x.calls_after[part][o]), o < 10 ? 0 : 1);
        assert_int_equal(atomic_load(&map_errors[part]), 0);
        char meta[64];
        committed_meta(&k, group2, topic, part, meta, sizeof meta);
        assert_string_equal(meta, ""); /* librdkafka's auto-committer: no metadata */
    }
    assert_int_equal(off.last.skipped, 0);
    assert_int_equal(off.last.offset_map_rejected, 0);
    ct_free(&off);
    checker_free(&x.ck);
}

/* --- offset_map_max_bytes 0: the watermark alone, as before --- */

/* One partition, a message held; the map is off: the commit carries no metadata, and the next
 * owner handles every message from the watermark on again, the completed ones too. */
static void map_off_handles_everything_above_the_watermark_again(void **state)
{
    (void)state;
    const char *topic = "om-off", *group = "g-om-off";
    enum { KEYS = 20, PER_KEY = 10 };
    static logmap lm;
    static om_ctx x;
    const char *topics[] = {topic};
    cthread a;
    hold *h = start_one_held(topic, group, KEYS, PER_KEY, false, &lm, &x, &a, topics);
    int64_t off = -1;
    for (double end = now_s() + 30; off != h->offset && now_s() < end; sleep_ms(20))
        committed_offsets(&k, group, topic, 1, &off);
    assert_true(off == h->offset);
    ct_stop(&a); /* abandons the held message after revoke_timeout_ms */
    char meta[64];
    assert_true(committed_meta(&k, group, topic, 0, meta, sizeof meta) == h->offset);
    assert_string_equal(meta, "");
    atomic_store(&x.after, true);
    cthread b;
    om_thread(&b, &x, group, "cooperative-sticky", topics);
    b.opts.offset_map_max_bytes = 0;
    assert_rl_ok(ct_start(&b));
    WAIT_FOR(checker_complete(&x.ck, PER_KEY) == KEYS * PER_KEY, 60);
    ct_stop(&b);
    assert_int_equal(checker_complete(&x.ck, PER_KEY), KEYS * PER_KEY);
    for (int64_t o = h->offset; o < lm.high[0]; o++)
        assert_int_equal(atomic_load(&x.calls_after[0][o]), 1); /* all of them again */
    assert_int_equal(b.last.skipped, 0);
    ct_free(&a);
    ct_free(&b);
    checker_free(&x.ck);
}

/* --- a broker that refuses maps --- */

/* The group coordinator answers a commit OFFSET_METADATA_TOO_LARGE (its
 * offset.metadata.max.bytes is lower): the consumer says so once and commits without maps. */
static void refused_maps_are_dropped(void **state)
{
    (void)state;
    const char *topic = "om-refused", *group = "g-om-refused";
    enum { KEYS = 20, PER_KEY = 10 };
    static logmap lm;
    static om_ctx x;
    const char *topics[] = {topic};
    cthread a;
    hold *h = start_one_held(topic, group, KEYS, PER_KEY, true, &lm, &x, &a, topics);
    bool map = false;
    for (double end = now_s() + 30; !map && now_s() < end; sleep_ms(20))
        map = map_is_all_but(group, topic, 0, &lm, h->key, h->offset);
    assert_true(map);
    /* OffsetCommit (API key 8), refused once; the held message then finishes. */
    rd_kafka_mock_push_request_errors(k.mock, 8, 1, RD_KAFKA_RESP_ERR_OFFSET_METADATA_TOO_LARGE);
    atomic_store(&h->release, true);
    int64_t off = -1;
    for (double end = now_s() + 30; off != lm.high[0] && now_s() < end; sleep_ms(20))
        committed_offsets(&k, group, topic, 1, &off);
    ct_stop(&a);
    assert_true(off == lm.high[0]);
    char meta[64];
    committed_meta(&k, group, topic, 0, meta, sizeof meta);
    assert_string_equal(meta, "");
    assert_true(a.last.commit_failures >= 1);
    ct_free(&a);
    checker_free(&x.ck);
}

/* --- periodic commits and the group's joins --- */

/* Two cooperative-sticky consumers; messages keep coming and completing, so consumer A's maps
 * change at every periodic commit (every 50 ms). When B joins, A rejoins the group while it
 * keeps its partitions; a commit sent then waits behind A's JoinGroup at the coordinator and
 * comes back ILLEGAL_GENERATION, which makes librdkafka 2.0 declare A's whole assignment lost.
 * The consumer holds its periodic commits while a join of its own is in flight: no partition
 * is lost, and every message is handled in order. */
static void periodic_commits_wait_for_the_group_join(void **state)
{
    (void)state;
    const char *topic = "om-join", *group = "g-om-join";
    enum { PARTS = 4, KEYS = 40, ROUNDS = 60 };
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, PARTS, 1), 0);
    static om_ctx x;
    om_init(&x, KEYS);
    const char *topics[] = {topic};
    cthread a, b;
    om_thread(&a, &x, group, "cooperative-sticky", topics);
    a.opts.commit_interval_ms = 50;
    assert_rl_ok(ct_start(&a));
    WAIT_FOR(ct_assigned(&a) == PARTS, 60);
    producer p;
    producer_start(&p, &k);
    for (int s = 0; s < ROUNDS; s++) {
        for (int key = 0; key < KEYS; key++)
            produce_seq(&p, topic, key, s);
        rd_kafka_flush(p.rk, 10000);
        if (s == ROUNDS / 3) {
            om_thread(&b, &x, group, "cooperative-sticky", topics);
            b.opts.commit_interval_ms = 50;
            assert_rl_ok(ct_start(&b));
        }
        sleep_ms(50); /* about 3 s in all: commits go on through the rebalance */
    }
    producer_flush(&p);
    producer_stop(&p);
    WAIT_FOR(checker_complete(&x.ck, ROUNDS) == KEYS * ROUNDS && ct_assigned(&b) > 0, 60);
    ct_stop(&b);
    ct_stop(&a);
    assert_int_equal(checker_complete(&x.ck, ROUNDS), KEYS * ROUNDS);
    assert_int_equal(atomic_load(&x.ck.violations), 0);
    assert_true(b.last.assigned > 0); /* the rebalance happened */
    print_message("  A: %llu commits, %llu refused, lost %llu; B: %llu commits, lost %llu\n",
                  (unsigned long long)a.last.commits, (unsigned long long)a.last.commit_failures,
                  (unsigned long long)a.last.lost, (unsigned long long)b.last.commits,
                  (unsigned long long)b.last.lost);
    assert_int_equal(a.last.lost, 0);
    assert_int_equal(b.last.lost, 0);
    ct_free(&a);
    ct_free(&b);
    checker_free(&x.ck);
}

/* The first work completed after an assignment is committed at the next tick, not a whole
 * commit_interval_ms later: a partition lost soon after it came is then read again from
 * there. commit_interval_ms is 10 minutes here; the commit must come within 30 s (before,
 * the first look at an empty assignment pushed it 10 minutes away). A second batch completed
 * after that commit waits for the interval (at most one commit per interval). */
static void first_work_is_committed_at_the_next_tick(void **state)
{
    (void)state;
    const char *topic = "om-first", *group = "g-om-first";
    enum { N = 20 };
    static logmap lm;
    produce_keys(topic, 1, 4, N / 4, &lm);
    static om_ctx x;
    om_init(&x, 4);
    const char *topics[] = {topic};
    cthread a;
    ct_init(&a, consumer_conf(&k, group, "cooperative-sticky"), topics, 1, count_handler, &x);
    a.opts.commit_interval_ms = 600000;
    assert_rl_ok(ct_start(&a));
    int64_t off = -1;
    for (double end = now_s() + 30; off != N && now_s() < end; sleep_ms(50))
        committed_offsets(&k, group, topic, 1, &off);
    assert_int_equal(off, N);
    /* More work: handled, and left for the next interval (or the close's commit). */
    producer p;
    producer_start(&p, &k);
    for (int i = 0; i < N; i++)
        produce_seq(&p, topic, i % 4, N / 4 + i / 4);
    producer_flush(&p);
    producer_stop(&p);
    for (int o = N; o < 2 * N; o++)
        WAIT_FOR(atomic_load(&x.calls_after[0][o]) == 1, 30);
    sleep_ms(500); /* five ticks */
    committed_offsets(&k, group, topic, 1, &off);
    assert_int_equal(off, N);
    ct_stop(&a);
    committed_offsets(&k, group, topic, 1, &off);
    assert_int_equal(off, 2 * N); /* the close commits it */
    assert_int_equal(a.last.commit_failures, 0);
    ct_free(&a);
    checker_free(&x.ck);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(skip_after_rebalance_eager),
        cmocka_unit_test(skip_after_rebalance_cooperative),
        cmocka_unit_test(lost_partition_commits_nothing),
        cmocka_unit_test(dead_letters_enter_the_map_once_acknowledged),
        cmocka_unit_test(intake_stops_at_the_span_cap),
        cmocka_unit_test(bad_metadata_is_reported_and_ignored),
        cmocka_unit_test(map_off_handles_everything_above_the_watermark_again),
        cmocka_unit_test(refused_maps_are_dropped),
        cmocka_unit_test(periodic_commits_wait_for_the_group_join),
        cmocka_unit_test(first_work_is_committed_at_the_next_tick),
    };
    if (getenv("RINGLANE_TEST_FILTER"))
        cmocka_set_test_filter(getenv("RINGLANE_TEST_FILTER"));
    return cmocka_run_group_tests(tests, suite_setup, suite_teardown);
}
