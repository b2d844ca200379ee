/* SPDX-License-Identifier: BSD-2-Clause */
/* The growth fence's reader: a thread of its own with a librdkafka handle of its own (no group,
 * read_committed, partition EOF), never the consumer's loop. It reads __ringlane_growth from its
 * beginning to its end at the start, whenever the loop asks (each assignment) and every
 * growth_reread_ms, and hands the loop each complete read as a whole (rl__growth_view). While
 * the loop names old partitions that messages wait for, it reads their committed offsets in the
 * consumer's group every OFFSETS_MS with the admin API (ListConsumerGroupOffsets,
 * asynchronous: the result comes on the thread's queue).
 *
 * Fail closed: a read that fails or does not reach the end in growth_read_timeout_ms publishes
 * nothing (the loop keeps what it knew, and holds everything until a first read succeeded); it
 * is retried after RETRY_MS. A record topic that does not exist is a definite "no
 * records" (the broker says so in a metadata answer that succeeded): `ringlane grow` creates it
 * before it announces anything, so a cluster where it is missing has recorded no growth. */
#include "consumer_internal.h"
#include "error_detail_internal.h"
#include "growth_fence.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The committed offsets, while something waits for them; a failed read, again; the thread's
 * turn (admin results, the stop flag). */
#define OFFSETS_MS 250
#define RETRY_MS 1000
#define STEP_MS 20

void rl__wake_cb(rd_kafka_t *rk, void *opaque); /* consumer.c: wakes the loop */

void rl__growth_view_free(rl__growth_view *view)
{
    if (!view)
        return;
    for (size_t i = 0; i < view->n; i++) {
        free(view->v[i].points);
        rl_ring_free(view->v[i].ring_from);
        rl_ring_free(view->v[i].ring_to);
    }
    free(view->v);
    free(view);
}

/* --- one read of the records --- */

/* The last value of each key read so far (NULL value: none, or removed by a tombstone). */
typedef struct raw_entry {
    char *key;
    char *value;
    size_t len;
} raw_entry;

typedef struct raw_log {
    raw_entry *v;
    size_t n, cap;
} raw_log;

static void raw_free(raw_log *log)
{
    for (size_t i = 0; i < log->n; i++) {
        free(log->v[i].key);
        free(log->v[i].value);
    }
    free(log->v);
    memset(log, 0, sizeof *log);
}

/* The last record of a key wins; a tombstone (no value) removes it. -1: out of memory. */
static int raw_take(raw_log *log, const rd_kafka_message_t *m)
{
    if (!m->key || !m->key_len)
        return 0; /* no key: not a growth record (compaction would refuse it anyway) */
    raw_entry *e = NULL;
    for (size_t i = 0; i < log->n && !e; i++)
        if (strlen(log->v[i].key) == m->key_len && memcmp(log->v[i].key, m->key, m->key_len) == 0)
            e = &log->v[i];
    if (!e) {
        if (log->n == log->cap) {
            size_t cap = log->cap ? log->cap * 2 : 16;
            raw_entry *v = realloc(log->v, cap * sizeof *v);
            if (!v)
                return -1;
            log->v = v;
            log->cap = cap;
        }
        e = &log->v[log->n];
        memset(e, 0, sizeof *e);
        if (!(e->key = malloc(m->key_len + 1)))
            return -1;
        memcpy(e->key, m->key, m->key_len);
        e->key[m->key_len] = '\0';
        log->n++;
    }
    free(e->value);
    e->value = NULL;
    e->len = 0;
    if (!m->payload)
        return 0;
    if (!(e->value = malloc(m->len + 1)))
        return -1;
    memcpy(e->value, m->payload, m->len);
    e->value[m->len] = '\0';
    e->len = m->len;
    return 0;
}

/* Reads the record topic to its end into *log. 0, or -1 with the reason in err. */
static int read_records(rl__growth_fence *f, raw_log *log, char *err, size_t size)
{
    int timeout = f->read_timeout_ms > 60000 ? 60000 : (int)f->read_timeout_ms;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(f->rk, RL__GROWTH_TOPIC, NULL);
    if (!rkt) {
        snprintf(err, size, "cannot read %s: %s", RL__GROWTH_TOPIC,
                 rd_kafka_err2str(rd_kafka_last_error()));
        return -1;
    }
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t me = rd_kafka_metadata(f->rk, 0, rkt, &md, timeout);
    int rc = -1;
    if (me) {
        snprintf(err, size, "the metadata of %s: %s", RL__GROWTH_TOPIC, rd_kafka_err2str(me));
    } else if (md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
        rc = 0; /* no record topic: no growth was ever recorded */
    } else if (md->topic_cnt != 1 || md->topics[0].err || md->topics[0].partition_cnt < 1) {
        snprintf(err, size, "the metadata of %s: %s", RL__GROWTH_TOPIC,
                 md->topic_cnt == 1 && md->topics[0].err ? rd_kafka_err2str(md->topics[0].err)
                                                         : "no partition 0");
    } else if (rd_kafka_consume_start(rkt, 0, RD_KAFKA_OFFSET_BEGINNING) != 0) {
        /* librdkafka's simple consumer: a partition read without a group (rd_kafka_assign
         * needs one in librdkafka 2.0.2). */
        snprintf(err, size, "cannot read %s: %s", RL__GROWTH_TOPIC,
                 rd_kafka_err2str(rd_kafka_last_error()));
    } else {
        uint64_t deadline = rl__now_ms() + f->read_timeout_ms;
        snprintf(err, size, "reading %s: its end not reached within %u ms", RL__GROWTH_TOPIC,
                 (unsigned)f->read_timeout_ms);
        bool stop = false;
        while (!stop && rl__now_ms() < deadline) {
            rd_kafka_message_t *m = rd_kafka_consume(rkt, 0, 100);
            uv_mutex_lock(&f->mu);
            stop = f->stop;
            uv_mutex_unlock(&f->mu);
            if (!m)
                continue;
            rd_kafka_resp_err_t e = m->err;
            if (e == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                rc = 0;
                stop = true;
            } else if (e) {
                snprintf(err, size, "reading %s: %s", RL__GROWTH_TOPIC, rd_kafka_message_errstr(m));
                stop = e != RD_KAFKA_RESP_ERR__TRANSPORT; /* a broken connection comes back */
            } else if (raw_take(log, m) != 0) {
                snprintf(err, size, "reading %s: out of memory", RL__GROWTH_TOPIC);
                stop = true;
            }
            rd_kafka_message_destroy(m);
        }
        rd_kafka_consume_stop(rkt, 0);
    }
    if (md)
        rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
    return rc;
}

/* --- from records to growths --- */

/* The consumer's ring over n partitions, as the partitioner builds it (members "0".."n-1"). */
static rl_ring_t *ring_over(const rl__growth_fence *f, uint32_t n)
{
    rl_member *members = calloc(n, sizeof *members);
    char *names = malloc((size_t)n * 12);
    rl_ring_t *ring = NULL;
    if (members && names) {
        for (uint32_t i = 0; i < n; i++) {
            snprintf(names + (size_t)i * 12, 12, "%" PRIu32, i);
            members[i] = (rl_member){names + (size_t)i * 12, 1, NULL};
        }
        rl_ring_options o;
        rl_ring_options_init(&o);
        o.profile = f->profile;
        o.vnodes = f->vnodes == 0 ? RL_VNODES_PROFILE : f->vnodes;
        if (rl_ring_build(members, n, &o, &ring) != 0)
            ring = NULL;
    }
    free(members);
    free(names);
    return ring;
}

/* Checks a record against the consumer's routing and fills g; a problem leaves it unusable. */
static void growth_of(const rl__growth_fence *f, const raw_entry *e, rl__growth *g)
{
    memset(g, 0, sizeof *g);
    g->state = RL__GROWTH_UNUSABLE;
    snprintf(g->key, sizeof g->key, "%s", e->key);
    const char *why = "";
    if (rl__growth_key_parse(e->key, strlen(e->key), g->topic, &g->from, &g->to, &why) !=
        RL__GROWTH_OK) {
        /* A key that names a topic ("<topic>/...") but not a growth: every partition of that
         * topic is held (fail closed); anything else is not ours. */
        const char *slash = strchr(e->key, '/');
        size_t tl = slash ? (size_t)(slash - e->key) : 0;
        if (!tl || !rl__growth_topic_valid(e->key, tl)) {
            g->topic[0] = '\0';
        } else {
            memcpy(g->topic, e->key, tl);
            g->topic[tl] = '\0';
            g->from = 0;
            g->to = RL__GROWTH_PARTITIONS_MAX;
        }
        snprintf(g->problem, sizeof g->problem, "key \"%.60s\" is no growth key: %s", e->key, why);
        return;
    }
    rl__growth_record r;
    int verdict = rl__growth_value_parse(e->value, e->len, &r, &why);
    if (verdict != RL__GROWTH_OK) {
        snprintf(g->problem, sizeof g->problem, "record %s refused: %s", e->key, why);
        return;
    }
    uint64_t fp_from = 0, fp_to = 0;
    if (!rl__growth_record_matches_key(&r, e->key, strlen(e->key))) {
        snprintf(g->problem, sizeof g->problem, "record %s: its value names topic=%s from=%u to=%u",
                 e->key, r.topic, (unsigned)r.from, (unsigned)r.to);
    } else if (strcmp(r.profile, f->profile) != 0 || r.vnodes != f->vnodes) {
        snprintf(g->problem, sizeof g->problem,
                 "record %s: its producers route with profile=%s vnodes=%u, this consumer with "
                 "profile=%s vnodes=%u (growth_profile, growth_vnodes)",
                 e->key, r.profile, (unsigned)r.vnodes, f->profile, (unsigned)f->vnodes);
    } else if (rl__growth_ring_fingerprint(f->profile, f->vnodes, r.from, &fp_from) != 0 ||
               rl__growth_ring_fingerprint(f->profile, f->vnodes, r.to, &fp_to) != 0 ||
               fp_from != r.ring_from || fp_to != r.ring_to) {
        snprintf(g->problem, sizeof g->problem,
                 "record %s: its ring fingerprints %016" PRIx64 ",%016" PRIx64
                 " are not this consumer's %016" PRIx64 ",%016" PRIx64
                 " (another ringlane builds these rings otherwise)",
                 e->key, r.ring_from, r.ring_to, fp_from, fp_to);
    } else if (!(g->ring_from = ring_over(f, r.from)) || !(g->ring_to = ring_over(f, r.to))) {
        snprintf(g->problem, sizeof g->problem, "record %s: its rings could not be built", e->key);
    } else {
        g->state = (int)r.state;
        g->points = r.points; /* taken over */
        r.points = NULL;
    }
    if (g->state == RL__GROWTH_UNUSABLE) {
        rl_ring_free(g->ring_from);
        rl_ring_free(g->ring_to);
        g->ring_from = g->ring_to = NULL;
    }
    rl__growth_record_free(&r);
}

static rl__growth_view *view_of(const rl__growth_fence *f, const raw_log *log, uint64_t req)
{
    rl__growth_view *view = calloc(1, sizeof *view);
    if (!view)
        return NULL;
    view->read_req = req;
    size_t live = 0;
    for (size_t i = 0; i < log->n; i++)
        live += log->v[i].value != NULL;
    if (live && !(view->v = calloc(live, sizeof *view->v))) {
        free(view);
        return NULL;
    }
    for (size_t i = 0; i < log->n; i++) {
        if (!log->v[i].value)
            continue;
        growth_of(f, &log->v[i], &view->v[view->n]);
        if (view->v[view->n].topic[0])
            view->n++;
    }
    return view;
}

/* --- the thread --- */

static void wake(rl__growth_fence *f)
{
    rl__wake_cb(NULL, f->wake_arg);
}

static void read_once(rl__growth_fence *f, uint64_t req, bool *ok)
{
    raw_log log = {0};
    char err[256];
    int rc = read_records(f, &log, err, sizeof err);
    rl__growth_view *view = rc == 0 ? view_of(f, &log, req) : NULL;
    if (rc == 0 && !view)
        snprintf(err, sizeof err, "reading %s: out of memory", RL__GROWTH_TOPIC);
    raw_free(&log);
    uv_mutex_lock(&f->mu);
    if (view) {
        rl__growth_view_free(f->published); /* a read the loop did not take: this one is newer */
        f->published = view;
    } else {
        f->read_errors++;
        if (*ok)
            f->read_error_runs++;
        snprintf(f->read_error, sizeof f->read_error, "%s", err);
    }
    uv_mutex_unlock(&f->mu);
    *ok = view != NULL;
    wake(f);
}

static void ask_offsets(rl__growth_fence *f, rd_kafka_queue_t *q,
                        rd_kafka_topic_partition_list_t *want)
{
    rd_kafka_ListConsumerGroupOffsets_t *req =
        rd_kafka_ListConsumerGroupOffsets_new(f->group, want);
    rd_kafka_AdminOptions_t *o =
        rd_kafka_AdminOptions_new(f->rk, RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS);
    char err[256];
    if (o)
        rd_kafka_AdminOptions_set_request_timeout(o, (int)f->read_timeout_ms, err, sizeof err);
    rd_kafka_ListConsumerGroupOffsets(f->rk, &req, 1, o, q);
    rd_kafka_ListConsumerGroupOffsets_destroy(req);
    if (o)
        rd_kafka_AdminOptions_destroy(o);
}

/* An answer of ListConsumerGroupOffsets: handed to the loop (a failed one is dropped, and the
 * next is asked OFFSETS_MS later). */
static void take_offsets(rl__growth_fence *f, rd_kafka_event_t *ev)
{
    const rd_kafka_ListConsumerGroupOffsets_result_t *res =
        rd_kafka_event_ListConsumerGroupOffsets_result(ev);
    if (!res || rd_kafka_event_error(ev))
        return;
    size_t n = 0;
    const rd_kafka_group_result_t **groups =
        rd_kafka_ListConsumerGroupOffsets_result_groups(res, &n);
    if (n != 1 || rd_kafka_group_result_error(groups[0]))
        return;
    const rd_kafka_topic_partition_list_t *l = rd_kafka_group_result_partitions(groups[0]);
    rd_kafka_topic_partition_list_t *copy = l ? rd_kafka_topic_partition_list_copy(l) : NULL;
    if (!copy)
        return;
    uv_mutex_lock(&f->mu);
    if (f->answer)
        rd_kafka_topic_partition_list_destroy(f->answer);
    f->answer = copy;
    uv_mutex_unlock(&f->mu);
    wake(f);
}

static void reader_main(void *arg)
{
    rl__growth_fence *f = arg;
    rd_kafka_queue_t *q = rd_kafka_queue_new(f->rk);
    uint64_t started_req = 0, next_read = 0, next_offsets = 0;
    bool ok = true, asking = false;
    for (;;) {
        uv_mutex_lock(&f->mu);
        bool stop = f->stop;
        uint64_t req = f->read_req;
        rd_kafka_topic_partition_list_t *want =
            f->want ? rd_kafka_topic_partition_list_copy(f->want) : NULL;
        uv_mutex_unlock(&f->mu);
        if (stop) {
            if (want)
                rd_kafka_topic_partition_list_destroy(want);
            break;
        }
        uint64_t now = rl__now_ms();
        if (req > started_req || now >= next_read) {
            started_req = req;
            read_once(f, req, &ok);
            next_read = rl__now_ms() + (ok ? f->reread_ms : RETRY_MS);
        }
        if (want && !asking && now >= next_offsets) {
            ask_offsets(f, q, want);
            asking = true;
            next_offsets = now + OFFSETS_MS;
        }
        if (want)
            rd_kafka_topic_partition_list_destroy(want);
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, STEP_MS);
        if (ev) {
            if (rd_kafka_event_type(ev) == RD_KAFKA_EVENT_LISTCONSUMERGROUPOFFSETS_RESULT) {
                asking = false;
                take_offsets(f, ev);
            }
            rd_kafka_event_destroy(ev);
        }
    }
    rd_kafka_queue_destroy(q);
}

/* The reader's configuration: the consumer's (brokers, security, client settings) without its
 * group and the properties that belong to the consumer's own reading. */
static const char *not_copied[] = {"group.",
                                   "partition.assignment.strategy",
                                   "enable.auto.",
                                   "auto.commit.",
                                   "auto.offset.reset",
                                   "isolation.level",
                                   "enable.partition.eof",
                                   "session.timeout.ms",
                                   "heartbeat.interval.ms",
                                   "max.poll.interval.ms",
                                   "statistics.interval.ms"};

int rl__growth_fence_reader_start(rl__growth_fence *f, const rd_kafka_conf_t *conf)
{
    rd_kafka_conf_t *rconf =
        rd_kafka_conf_dup_filter(conf, sizeof not_copied / sizeof *not_copied, not_copied);
    if (!rconf)
        return rl_error_detail_set(RL_ENOMEM, "out of memory: the growth reader's configuration");
    char err[512];
    const char *const settings[][2] = {{"isolation.level", "read_committed"},
                                       {"enable.partition.eof", "true"},
                                       {"enable.auto.commit", "false"},
                                       {"client.id", "ringlane-growth-reader"}};
    for (size_t i = 0; i < sizeof settings / sizeof *settings; i++) {
        if (rd_kafka_conf_set(rconf, settings[i][0], settings[i][1], err, sizeof err) !=
            RD_KAFKA_CONF_OK) {
            rd_kafka_conf_destroy(rconf);
            return rl_error_detail_set(RL_EKAFKA, "growth_fence: librdkafka refused %s=%s: %s",
                                       settings[i][0], settings[i][1], err);
        }
    }
    f->rk = rd_kafka_new(RD_KAFKA_CONSUMER, rconf, err, sizeof err);
    if (!f->rk) {
        rd_kafka_conf_destroy(rconf);
        return rl_error_detail_set(
            RL_EKAFKA, "growth_fence: librdkafka refused to make the growth reader: %s", err);
    }
    if (uv_thread_create(&f->thread, reader_main, f) != 0) {
        rd_kafka_destroy(f->rk);
        f->rk = NULL;
        return rl_error_detail_set(RL_ELOOP, "growth_fence: cannot start the growth reader's "
                                             "thread");
    }
    f->thread_started = true;
    return 0;
}

void rl__growth_fence_reader_stop(rl__growth_fence *f)
{
    if (f->thread_started) {
        uv_mutex_lock(&f->mu);
        f->stop = true;
        uv_mutex_unlock(&f->mu);
        uv_thread_join(&f->thread);
        f->thread_started = false;
    }
    if (f->rk)
        rd_kafka_destroy(f->rk);
    f->rk = NULL;
}
