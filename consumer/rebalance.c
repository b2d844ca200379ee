/* SPDX-License-Identifier: BSD-2-Clause */
/* Rebalances and commits.
 *
 * A revoked partition is released in this order: its queued jobs are taken back from the lanes
 * (the next owner reads them again from the committed offset), its in-flight jobs and dead
 * letters are waited for (revoke_timeout_ms), its watermark is committed synchronously (again
 * up to revoke_timeout_ms), its epoch moves on so that late completions count for nothing, and
 * only then is it handed back to librdkafka. A lost partition skips the wait and the commit: the
 * group has already given it to someone else, and a commit now could only be refused or, worse,
 * move that owner's offset back. Eager and cooperative assignment take the same path; only the
 * librdkafka call that applies the change differs. */
#include "consumer_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* How long periodic commits wait after the group said it is rebalancing, unless a rebalance
 * callback comes first: a commit that crosses the group's next generation would come back
 * ILLEGAL_GENERATION, and librdkafka then declares the whole assignment lost. */
#define COMMIT_HOLD_MS 10000

/* librdkafka 2.0.2 answers no call to its group once the group has terminated (a close that
 * ended): rd_kafka_rebalance_protocol, rd_kafka_assign and the incremental calls then wait
 * forever. A rebalance queued before and served after that (a close whose commit waited for
 * the group's next generation, which brought an assignment: librdkafka takes the assign call
 * for it as the close's unassign and leaves, and the close's revoke comes after) uses the
 * protocol known last and tells librdkafka nothing. */
static bool group_gone(rl_consumer_t *c)
{
    return c->leaving && rd_kafka_consumer_closed(c->rk);
}

/* librdkafka 2.0.2 sends a closing consumer's LeaveGroup only once it needs no more from the
 * application: after the unassign call of the close's own revoke, or at once when a rebalance
 * callback was still queued as the close began (an eager group rebalancing: the close then
 * unassigns by itself, and the queued revoke, served after, is stale). From that LeaveGroup's
 * answer on, the group may end at any moment: a commit that reaches it in between aborts
 * librdkafka (rdkafka_cgrp.c: rd_kafka_cgrp_terminated: assert: !rd_kafka_assignment_in_progress)
 * and an assign call may wait forever (its request is dropped unanswered). So once the
 * LeaveGroup is out, a revoke neither commits nor calls librdkafka: its partitions are
 * released here alone, and what completed since the last accepted commit is read again by
 * the next owner (the close's own commit, refused as the group rebalanced, was reported). */
static bool left_group(rl_consumer_t *c)
{
    return c->leaving && rl__group_leaves(c) > c->leave_mark;
}

/* Asked only until the consumer starts leaving (rl__drained_for_leaving asks once before): a
 * close's rebalances may be served while librdkafka's group is terminating, when the query
 * may never be answered (seen once in test_consumer_order under load). */
static bool cooperative_of(rl_consumer_t *c)
{
    if (!c->leaving) {
        const char *p = rd_kafka_rebalance_protocol(c->rk);
        c->cooperative = p && strcmp(p, "COOPERATIVE") == 0;
    }
    return c->cooperative;
}

static void apply(rl_consumer_t *c, rd_kafka_topic_partition_list_t *parts, bool assign)
{
    rd_kafka_error_t *error = NULL;
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    if (group_gone(c) || left_group(c))
        return;
    if (cooperative_of(c))
        error = assign ? rd_kafka_incremental_assign(c->rk, parts)
                       : rd_kafka_incremental_unassign(c->rk, parts);
    else
        err = rd_kafka_assign(c->rk, assign ? parts : NULL);
    if (error) {
        rl__consumer_error(c, rd_kafka_error_code(error), "%s: %s", assign ? "assign" : "unassign",
                           rd_kafka_error_string(error));
        rd_kafka_error_destroy(error);
    } else if (err) {
        rl__consumer_error(c, err, "%s", assign ? "assign" : "unassign");
    }
}

/* Reads the committed offsets and offset maps of newly assigned partitions (`fresh`), keeps
 * the maps, and starts the partitions at those offsets (set in `parts`, so librdkafka does not
 * ask for them again: one request to the group coordinator either way). It blocks the loop
 * for that request, at most revoke_timeout_ms, as a revoke's commit does. */
static void read_maps(rl_consumer_t *c, rd_kafka_topic_partition_list_t *parts,
                      rd_kafka_topic_partition_list_t *fresh)
{
    uint32_t ms = c->opts.revoke_timeout_ms;
    rd_kafka_resp_err_t err = rd_kafka_committed(c->rk, fresh, ms > INT_MAX ? INT_MAX : (int)ms);
    if (err) {
        if (c->map_read)
            c->stats.offset_map_rejected += (uint64_t)fresh->cnt;
        rl__consumer_error(c, err,
                           "offset maps of %d assigned partitions: the committed offsets could "
                           "not be read (%s): their messages from the committed offset on are "
                           "handled again",
                           fresh->cnt, rd_kafka_err2str(err));
        return;
    }
    for (int i = 0; i < fresh->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &fresh->elems[i];
        rl__part *p = rl__part_get(c, e->topic, e->partition, false);
        if (!p)
            continue;
        if (e->err) {
            if (c->map_read)
                c->stats.offset_map_rejected++;
            rl__consumer_error(c, e->err,
                               "offset map of %s [%d]: the committed offset could not be read: "
                               "its messages from the committed offset on are handled again",
                               e->topic, (int)e->partition);
            continue;
        }
        if (c->map_read)
            rl__map_adopt(c, p, e);
        /* The growth fence: a new partition without a commit starts at its beginning. */
        int64_t start = c->fence ? rl__growth_fence_start(c, p, e->offset) : e->offset;
        rd_kafka_topic_partition_t *a =
            rd_kafka_topic_partition_list_find(parts, e->topic, e->partition);
        if (a && (start >= 0 || start == RD_KAFKA_OFFSET_BEGINNING))
            a->offset = start;
    }
}

static void assign(rl_consumer_t *c, rd_kafka_topic_partition_list_t *parts)
{
    /* A consumer that began leaving releases an assignment at once (assign_late) and can no
     * longer ask its group for the committed offsets: it reads no maps. */
    rd_kafka_topic_partition_list_t *fresh = (c->map_read || c->fence) && !c->leaving
                                                 ? rd_kafka_topic_partition_list_new(parts->cnt)
                                                 : NULL;
    for (int i = 0; i < parts->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &parts->elems[i];
        rl__part *p = rl__part_get(c, e->topic, e->partition, true);
        if (!p) {
            /* Its messages will be dropped unprocessed and uncommitted: stuck, not lost. */
            rl__consumer_error(c, RD_KAFKA_RESP_ERR__FAIL, "no memory for %s [%d]", e->topic,
                               (int)e->partition);
            continue;
        }
        if (p->assigned)
            continue;
        p->epoch++;
        atomic_store_explicit(&p->start_epoch, p->epoch, memory_order_release);
        p->assigned = true;
        p->window_full = false;
        rl__offsets_reset(&p->win);
        p->next_offset = p->committed = p->stored = -1;
        p->progress = p->committed_progress = p->sent_progress = 0;
        p->map_bytes = 0;
        rl__map_forget(p);
        if (c->fence)
            rl__growth_fence_assigned(c, p);
        if (fresh)
            rd_kafka_topic_partition_list_add(fresh, e->topic, e->partition);
        c->stats.assigned++;
        c->stats.partitions++;
        c->next_commit_ms = 0; /* its first completed work is committed at the next tick */
    }
    if (fresh && fresh->cnt)
        read_maps(c, parts, fresh);
    if (fresh)
        rd_kafka_topic_partition_list_destroy(fresh);
    apply(c, parts, true);
    /* A partition paused in an earlier assignment would stay paused in librdkafka. */
    for (int i = 0; i < parts->cnt; i++) {
        rl__part *p = rl__part_get(c, parts->elems[i].topic, parts->elems[i].partition, false);
        if (p && p->assigned && p->paused && !p->pending.len)
            rl__part_resume(c, p);
    }
    if (c->opts.on_rebalance)
        c->opts.on_rebalance(c, RL_CONSUMER_ASSIGNED, parts);
}

/* The result of a synchronous commit, filled by its callback. */
typedef struct sync_commit {
    bool done;
    bool quiet; /* a failure will be retried: not reported (note_committed_quiet) */
    rd_kafka_resp_err_t err;
    rl_consumer_t *c;
} sync_commit;

/* The group is rebalancing, or has moved on without us. */
static bool rebalancing(rd_kafka_resp_err_t err)
{
    return err == RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS ||
           err == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION ||
           err == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID;
}

/* What a commit achieved. `kind`: the periodic commit of the offset maps (its partitions'
 * progress was noted when it was sent), the synchronous one of a revoke (nothing completes
 * while it waits), or librdkafka's auto-committer. */
enum { COMMIT_AUTO, COMMIT_PERIODIC, COMMIT_SYNC };

/* `quiet`: a failure is neither counted nor reported (a close's commit that will be retried;
 * its caller reports the last one). Returns the error that stopped the commit or one of its
 * partitions (0 when all were committed). */
static rd_kafka_resp_err_t note_committed_quiet(rl_consumer_t *c, rd_kafka_resp_err_t err,
                                                const rd_kafka_topic_partition_list_t *offsets,
                                                int kind, bool quiet)
{
    rd_kafka_resp_err_t first = err;
    bool failed = err != RD_KAFKA_RESP_ERR_NO_ERROR, hold = rebalancing(err);
    for (int i = 0; offsets && i < offsets->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &offsets->elems[i];
        rl__part *p = rl__part_get(c, e->topic, e->partition, false);
        if (!p)
            continue;
        bool ok = !err && !e->err;
        if (ok && e->offset > p->committed)
            p->committed = e->offset;
        if (ok && kind == COMMIT_PERIODIC && p->sent_epoch == p->epoch) {
            p->committed_progress = p->sent_progress;
            p->map_bytes = e->metadata_size;
        } else if (ok && kind == COMMIT_SYNC) {
            p->committed_progress = p->progress;
            p->map_bytes = e->metadata_size;
        }
        if (e->err == RD_KAFKA_RESP_ERR_OFFSET_METADATA_TOO_LARGE && c->map_write) {
            /* The broker's offset.metadata.max.bytes is below offset_map_max_bytes. */
            c->map_write = false;
            rl__consumer_error(c, e->err,
                               "the group coordinator refused an offset map of %zu bytes: "
                               "commits carry none from now on (set offset_map_max_bytes to "
                               "at most the broker's offset.metadata.max.bytes)",
                               e->metadata_size);
        }
        if (err || e->err)
            failed = true;
        if (!first && e->err)
            first = e->err;
        if (rebalancing(e->err))
            hold = true;
    }
    if (hold)
        c->commit_hold_until_ms = rl__now_ms() + COMMIT_HOLD_MS;
    if (failed && !quiet) {
        c->stats.commit_failures++;
        rl__consumer_error(c, first ? first : RD_KAFKA_RESP_ERR__FAIL, "commit failed");
    } else if (!failed) {
        c->stats.commits++;
    }
    return failed && !first ? RD_KAFKA_RESP_ERR__FAIL : first;
}

static void note_committed(rl_consumer_t *c, rd_kafka_resp_err_t err,
                           const rd_kafka_topic_partition_list_t *offsets, int kind)
{
    note_committed_quiet(c, err, offsets, kind, false);
}

static void sync_commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                           rd_kafka_topic_partition_list_t *offsets, void *opaque)
{
    (void)rk;
    sync_commit *r = opaque;
    r->done = true;
    r->err = note_committed_quiet(r->c, err, offsets, COMMIT_SYNC, r->quiet);
}

void rl__commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                   rd_kafka_topic_partition_list_t *offsets, void *opaque)
{
    (void)rk;
    rl_consumer_t *c = opaque;
    /* With the offset map, librdkafka's auto-committer is off: this is our periodic commit. */
    int kind = c->map_read ? COMMIT_PERIODIC : COMMIT_AUTO;
    if (c->map_read)
        c->commit_in_flight = false;
    if (err == RD_KAFKA_RESP_ERR__NO_OFFSET)
        return; /* nothing to commit */
    note_committed(c, err, offsets, kind);
}

/* Adds p's next commit to *l (made when needed): its offset and map. False when there is
 * nothing new to commit. */
static bool add_commit(rl_consumer_t *c, rl__part *p, rd_kafka_topic_partition_list_t **l, int size)
{
    if (p->progress == p->committed_progress)
        return false;
    size_t len;
    int64_t w = rl__map_build(c, p, &len);
    if (w < 0)
        return false;
    char *meta = NULL;
    if (len && !(meta = malloc(len))) {
        rl__consumer_error(c, RD_KAFKA_RESP_ERR__FAIL,
                           "offset map of %s [%d]: out of memory, committed without it",
                           p->topic->name, (int)p->partition);
        len = 0;
    }
    if (!*l)
        *l = rd_kafka_topic_partition_list_new(size);
    rd_kafka_topic_partition_t *e =
        rd_kafka_topic_partition_list_add(*l, p->topic->name, p->partition);
    e->offset = w;
    if (meta) {
        memcpy(meta, c->map_text, len);
        e->metadata = meta; /* freed with the list */
        e->metadata_size = len;
    }
    return true;
}

/* Commits the offsets and maps that changed, at most once every commit_interval_ms: one
 * request at a time, none while the group rebalances (see COMMIT_HOLD_MS) and none for
 * partitions being revoked (their revoke commits them). The interval counts from the last
 * commit sent, not from the last look: the first work completed after an assignment (or
 * after a quiet spell) is committed at the next tick, so a partition lost soon after it came
 * is read again from there and not from where its previous owner stood. */
void rl__commit_maps(rl_consumer_t *c)
{
    uint64_t now = rl__now_ms();
    if (c->join_expected && (rl__group_joins(c) > c->join_mark || now >= c->join_wait_until_ms))
        c->join_expected = false;
    if (now < c->next_commit_ms || c->commit_in_flight || now < c->commit_hold_until_ms ||
        c->join_expected || rl__group_joining(c))
        return;
    rd_kafka_topic_partition_list_t *l = NULL;
    for (uint32_t i = 0; i < c->ntopics; i++) {
        rl__topic *t = c->topics[i];
        for (int32_t k = 0; k < t->nparts; k++) {
            rl__part *p = t->parts[k];
            if (!p || !p->assigned || p->revoking || !add_commit(c, p, &l, 8))
                continue;
            p->sent_progress = p->progress;
            p->sent_epoch = p->epoch;
        }
    }
    if (!l)
        return;
    c->next_commit_ms = now + c->opts.commit_interval_ms;
    rd_kafka_resp_err_t err = rd_kafka_commit(c->rk, l, 1); /* the answer: rl__commit_cb */
    if (err)
        note_committed(c, err, l, COMMIT_PERIODIC);
    else
        c->commit_in_flight = true;
    rd_kafka_topic_partition_list_destroy(l);
}

/* Hands librdkafka the watermarks of these partitions that moved since the last time. Its
 * auto-committer commits them every commit_interval_ms, and only while the group is steady: a
 * commit sent while a rejoin is under way would come back ILLEGAL_GENERATION, which makes
 * librdkafka declare the whole assignment lost. */
static void store(rl_consumer_t *c, rl__part *const *parts, size_t n)
{
    rd_kafka_topic_partition_list_t *l = NULL;
    for (size_t i = 0; i < n; i++) {
        rl__part *p = parts[i];
        int64_t w = rl__offsets_watermark(&p->win);
        if (w < 0 || w <= p->stored)
            continue;
        if (!l)
            l = rd_kafka_topic_partition_list_new((int)n);
        rd_kafka_topic_partition_list_add(l, p->topic->name, p->partition)->offset = w;
    }
    if (!l)
        return;
    rd_kafka_resp_err_t err = rd_kafka_offsets_store(c->rk, l);
    for (int i = 0; i < l->cnt; i++) {
        rl__part *p = rl__part_get(c, l->elems[i].topic, l->elems[i].partition, false);
        if (p && !err && !l->elems[i].err)
            p->stored = l->elems[i].offset;
    }
    rd_kafka_topic_partition_list_destroy(l);
}

/* Commits the watermarks of these partitions and waits for the answer until deadline_ms.
 * Returns the error that stopped it or one of its partitions (0 for none, or nothing to
 * commit); with `quiet` a failure is not reported. */
static rd_kafka_resp_err_t commit_sync_once(rl_consumer_t *c, rl__part *const *parts, size_t n,
                                            uint64_t deadline_ms, bool quiet)
{
    rd_kafka_topic_partition_list_t *l = NULL;
    if (c->map_read) {
        for (size_t i = 0; i < n; i++)
            add_commit(c, parts[i], &l, (int)n);
    } else {
        store(c, parts, n); /* also what librdkafka commits itself when it unassigns them */
        for (size_t i = 0; i < n; i++) {
            int64_t w = rl__offsets_watermark(&parts[i]->win);
            if (w < 0 || w <= parts[i]->committed)
                continue;
            if (!l)
                l = rd_kafka_topic_partition_list_new((int)n);
            rd_kafka_topic_partition_list_add(l, parts[i]->topic->name, parts[i]->partition)
                ->offset = w;
        }
    }
    if (!l)
        return RD_KAFKA_RESP_ERR_NO_ERROR;
    rd_kafka_queue_t *q = rd_kafka_queue_new(c->rk);
    sync_commit r = {.done = false, .quiet = quiet, .c = c};
    rd_kafka_resp_err_t err = rd_kafka_commit_queue(c->rk, l, q, sync_commit_cb, &r);
    if (err) {
        r.err = note_committed_quiet(c, err, l, COMMIT_SYNC, quiet);
    } else {
        for (uint64_t now = rl__now_ms(); !r.done && now < deadline_ms; now = rl__now_ms()) {
            uint64_t left = deadline_ms - now;
            rd_kafka_queue_poll_callback(q, left < 100 ? (int)left : 100);
        }
        if (!r.done) {
            /* The answer may still come; nobody will read it (the queue is dropped). */
            c->stats.commit_failures++;
            rl__consumer_error(c, RD_KAFKA_RESP_ERR__TIMED_OUT, "commit on revoke timed out");
            r.err = RD_KAFKA_RESP_ERR_NO_ERROR; /* reported: not retried */
        }
    }
    rd_kafka_queue_destroy(q);
    rd_kafka_topic_partition_list_destroy(l);
    return r.err;
}

/* A revoke's commit: none once a closing consumer's LeaveGroup is out (see left_group). */
static void commit_sync(rl_consumer_t *c, rl__part *const *parts, size_t n, uint64_t deadline_ms)
{
    if (!left_group(c))
        commit_sync_once(c, parts, n, deadline_ms, false);
}

/* The coordinator moved, is loading or did not answer in time: librdkafka finds it again. */
static bool coordinator_error(rd_kafka_resp_err_t err)
{
    return err == RD_KAFKA_RESP_ERR_NOT_COORDINATOR ||
           err == RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE ||
           err == RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS ||
           err == RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT || err == RD_KAFKA_RESP_ERR__TRANSPORT ||
           err == RD_KAFKA_RESP_ERR__WAIT_COORD || err == RD_KAFKA_RESP_ERR__TIMED_OUT;
}

#define CLOSE_RETRY_MS 50 /* between a close's commit attempts */

/* How long a close's commit refused with REBALANCE_IN_PROGRESS waits for librdkafka to join
 * the group's next generation before it is sent again all the same (the refusal may have been
 * the coordinator's alone, with no rebalance for this member to join; sent again while the
 * group still waits for members, it is refused again and harmlessly). */
#define CLOSE_REJOIN_WAIT_MS 1000

/* Waits, blocking, until no JoinGroup or SyncGroup of ours is in flight and, with `after`,
 * until a JoinGroup answered after `joins` answers, or none came for join_wait_ms; false at
 * deadline_ms. */
static bool wait_group_settled(rl_consumer_t *c, bool after, uint64_t joins, uint64_t join_wait_ms,
                               uint64_t deadline_ms)
{
    uint64_t no_join_at = rl__now_ms() + join_wait_ms;
    for (;;) {
        uint64_t now = rl__now_ms();
        if (!rl__group_joining(c) && (!after || rl__group_joins(c) > joins || now >= no_join_at))
            return true;
        if (now >= deadline_ms)
            return false;
        uint64_t left = deadline_ms - now;
        uv_sleep(left < CLOSE_RETRY_MS ? (unsigned)left : CLOSE_RETRY_MS);
    }
}

/* How long after a Heartbeat answer a close's commit waits for librdkafka's main thread to
 * act on it (a rejoin is written at once). */
#define BEAT_SETTLE_MS 20

/* Waits, blocking, for the next Heartbeat answer (at most until deadline_ms) and a moment
 * after it. librdkafka rejoins when a heartbeat is answered REBALANCE_IN_PROGRESS, and a
 * commit it handles after that join was written goes out behind it on the coordinator's
 * connection, comes back ILLEGAL_GENERATION and loses the assignment (librdkafka before 2.10).
 * Right after an answer the next one is heartbeat.interval.ms away: a commit sent then crosses
 * no join of librdkafka's making (a join already written shows in group_watch.c). */
static void wait_heartbeat(rl_consumer_t *c, uint64_t deadline_ms)
{
    if (!c->watch)
        return;
    uint64_t mark = rl__group_beats(c);
    while (rl__group_beats(c) == mark) {
        uint64_t now = rl__now_ms();
        if (now >= deadline_ms)
            return;
        uint64_t left = deadline_ms - now;
        uv_sleep(left < 5 ? (unsigned)left : 5);
    }
    uv_sleep(BEAT_SETTLE_MS);
}

/* A close's commit: retried until deadline_ms after a coordinator error, and after
 * REBALANCE_IN_PROGRESS once librdkafka has joined the group's next generation, or no join
 * came within CLOSE_REJOIN_WAIT_MS (cooperative only: an eager member rejoins only after its
 * revoke, which a close makes a leave). Refusals
 * that end the membership (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID: librdkafka declares the
 * assignment lost) are not retried: the partitions may be someone else's by now. */
static void commit_sync_retried(rl_consumer_t *c, rl__part *const *parts, size_t n,
                                uint64_t deadline_ms)
{
    bool cooperative = cooperative_of(c);
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    for (;;) {
        wait_heartbeat(c, deadline_ms);
        if (!wait_group_settled(c, false, 0, 0, deadline_ms))
            break; /* a join all along: the revoke commits (or reports) what is left */
        uint64_t joins = rl__group_joins(c);
        err = commit_sync_once(c, parts, n, deadline_ms, true);
        bool rejoin = cooperative && err == RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS;
        if (!err)
            return;
        if ((!rejoin && !coordinator_error(err)) || rl__now_ms() >= deadline_ms ||
            !wait_group_settled(c, rejoin, joins, CLOSE_REJOIN_WAIT_MS, deadline_ms))
            break;
        if (!rejoin)
            uv_sleep(CLOSE_RETRY_MS);
    }
    if (err) {
        c->stats.commit_failures++;
        rl__consumer_error(c, err, "commit failed");
    }
}

bool rl__drained_for_leaving(rl_consumer_t *c)
{
    bool first = !c->draining;
    if (first) {
        cooperative_of(c); /* known before leaving */
        c->draining = true;
        c->drain_until_ms = rl__now_ms() + c->opts.revoke_timeout_ms;
    }
    bool busy = false;
    for (uint32_t i = 0; i < c->ntopics; i++) {
        rl__topic *t = c->topics[i];
        for (int32_t k = 0; k < t->nparts; k++) {
            rl__part *p = t->parts[k];
            if (!p || !p->assigned || p->revoking)
                continue; /* a deferred revoke waits for its own */
            if (first) {
                rl_dispatch_take_tag(c->d, p->tag, NULL);
                rl__msgq_clear(&p->pending);
                rl__growth_fence_drop(c, p);
            }
            if (p->live || p->dlq_in_flight)
                busy = true;
        }
    }
    return !busy || rl__now_ms() >= c->drain_until_ms;
}

void rl__commit_before_leaving(rl_consumer_t *c)
{
    if (!c->map_read)
        return;
    uint64_t deadline = rl__now_ms() + c->opts.revoke_timeout_ms;
    size_t n = 0, cap = 0;
    rl__part **parts = NULL;
    for (uint32_t i = 0; i < c->ntopics; i++) {
        rl__topic *t = c->topics[i];
        for (int32_t k = 0; k < t->nparts; k++) {
            rl__part *p = t->parts[k];
            if (!p || !p->assigned || p->revoking || p->progress == p->committed_progress)
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 16;
                rl__part **v = realloc(parts, cap * sizeof *v);
                if (!v) {
                    free(parts);
                    return; /* the revoke commits them */
                }
                parts = v;
            }
            parts[n++] = p;
        }
    }
    /* Nothing to commit: no wait (a close during a join, before the first assignment, must
     * not wait for that join). A commit behind our own join would lose the assignment: wait
     * for the join to end (the one a cooperative revoke makes librdkafka send, see
     * join_expected, at most until its wait ends). */
    if (n && c->join_expected && rl__group_joins(c) == c->join_mark)
        wait_group_settled(c, true, c->join_mark, UINT64_MAX,
                           c->join_wait_until_ms < deadline ? c->join_wait_until_ms : deadline);
    if (n && wait_group_settled(c, false, 0, 0, deadline))
        commit_sync_retried(c, parts, n, deadline);
    free(parts); /* not committed: the revoke commits them */
}

void rl__store_watermarks(rl_consumer_t *c)
{
    rl__part *batch[64];
    size_t n = 0;
    for (uint32_t i = 0; i < c->ntopics; i++) {
        rl__topic *t = c->topics[i];
        for (int32_t k = 0; k < t->nparts; k++) {
            rl__part *p = t->parts[k];
            if (!p || !p->assigned || rl__offsets_watermark(&p->win) <= p->stored)
                continue;
            batch[n++] = p;
            if (n == sizeof batch / sizeof *batch) {
                store(c, batch, n);
                n = 0;
            }
        }
    }
    if (n)
        store(c, batch, n);
}

/* Our partitions among `parts` (NULL without memory); *n gets how many. */
static rl__part **ours(rl_consumer_t *c, const rd_kafka_topic_partition_list_t *parts, size_t *n)
{
    rl__part **mine = calloc((size_t)parts->cnt + 1, sizeof *mine);
    *n = 0;
    for (int i = 0; mine && i < parts->cnt; i++) {
        rl__part *p = rl__part_get(c, parts->elems[i].topic, parts->elems[i].partition, false);
        if (p && p->assigned)
            mine[(*n)++] = p;
    }
    if (!mine)
        rl__consumer_error(c, RD_KAFKA_RESP_ERR__FAIL, "revoke without memory: no wait");
    return mine;
}

/* The end of a revoke, once its waiting is over: the rebalance callback, then the partitions
 * are no longer ours (their epoch moves on) and, with `unassign`, librdkafka is told. */
static void let_go(rl_consumer_t *c, rd_kafka_topic_partition_list_t *parts, rl__part **mine,
                   size_t n, bool lost, bool unassign)
{
    if (c->opts.on_rebalance)
        c->opts.on_rebalance(c, lost ? RL_CONSUMER_LOST : RL_CONSUMER_REVOKED, parts);
    for (size_t i = 0; i < n; i++) {
        rl__part *p = mine[i];
        p->assigned = false;
        p->revoking = false;
        p->epoch++;
        p->live = 0;
        rl__dlq_forget(c, p);
        rl__offsets_reset(&p->win);
        rl__map_forget(p);
        if (lost)
            c->stats.lost++;
        else
            c->stats.revoked++;
        c->stats.partitions--;
    }
    if (unassign)
        apply(c, parts, false);
}

/* Blocking handlers: releases our partitions among `parts` inside the rebalance callback,
 * waiting there for the jobs in flight (they end on the lane workers); with `unassign`, tells
 * librdkafka too. */
static void release(rl_consumer_t *c, rd_kafka_topic_partition_list_t *parts, bool lost,
                    bool unassign)
{
    size_t n;
    rl__part **mine = ours(c, parts, &n);
    /* Marked revoking, their kept messages dropped, before the queued jobs are taken back:
     * taking them makes room in the lanes, and the dispatcher's on_capacity
     * (rl__drain_all_pending) would otherwise offer a revoked partition's kept messages at
     * once, behind its jobs just taken back (a key's later message ran, its earlier one never
     * did). Queued jobs go before the wait, so that it is for the ones already running. */
    for (size_t i = 0; i < n; i++) {
        mine[i]->revoking = true;
        rl__stop_starts(mine[i]);
        rl__msgq_clear(&mine[i]->pending);
        rl__growth_fence_drop(c, mine[i]);
    }
    for (size_t i = 0; i < n; i++)
        rl_dispatch_take_tag(c->d, mine[i]->tag, NULL);
    if (!lost) {
        uint64_t deadline = rl__now_ms() + c->opts.revoke_timeout_ms;
        for (size_t i = 0; i < n; i++) {
            uint64_t now = rl__now_ms();
            uint64_t left = deadline > now ? deadline - now : 0;
            if (rl_dispatch_wait_tag(c->d, mine[i]->tag, left) == RL_ETIMEDOUT)
                c->stats.revoke_timeouts++;
        }
        rl__dlq_wait(c, mine, n, deadline);
        commit_sync(c, mine, n, rl__now_ms() + c->opts.revoke_timeout_ms);
    }
    let_go(c, parts, mine, n, lost, unassign);
    free(mine);
}

/* --- asynchronous handlers: the deferred revoke ---
 *
 * The completions of asynchronous jobs may come from callbacks of the very loop the rebalance
 * callback runs on, so the revoke cannot wait there. The rebalance callback takes the queued
 * jobs back, marks the partitions revoking (their messages are dropped from then on) and
 * returns without releasing them. librdkafka (rdkafka_cgrp.c) has put its group in the
 * wait-unassign-call state and paused the assignment's fetching when it queued the rebalance;
 * it stays there, heartbeating, until the application calls rd_kafka_assign /
 * rd_kafka_incremental_unassign, and a close meanwhile waits for that call too. The loop runs
 * on; when the partitions' jobs have ended (or revoke_timeout_ms has passed: the rest are
 * abandoned) the watermarks are committed and the partitions released. One revoke is deferred
 * at a time: librdkafka queues no other rebalance while it waits for the call, and should one
 * come all the same, the deferred revoke is finished first (abandoning what is in flight). */

void rl__revoke_free(rl_consumer_t *c)
{
    rl__revoke *r = &c->revoke;
    if (r->parts)
        rd_kafka_topic_partition_list_destroy(r->parts);
    free(r->mine);
    memset(r, 0, sizeof *r);
}

static bool revoke_waiting(const rl__revoke *r)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->mine[i]->live)
            return true;
    return false;
}

/* Ends the deferred revoke: what is still in flight is abandoned (a timeout), the watermarks
 * committed (not for a loss), the partitions released. */
static void revoke_finish(rl_consumer_t *c)
{
    rl__revoke *r = &c->revoke;
    uv_timer_stop(&c->revoke_timer);
    if (revoke_waiting(r) && !r->lost)
        c->stats.revoke_timeouts++;
    for (size_t i = 0; i < r->n; i++) {
        /* Retries that fell due since the revoke began went back at once (rl__job_async);
         * those still waiting for their delay go back here. */
        rl_dispatch_take_tag(c->d, r->mine[i]->tag, NULL);
        rl__abandon(c, r->mine[i]);
    }
    /* Delivers the ends of jobs the application completed just before they were abandoned
     * (they count), and of the abandoned ones (they do not). */
    for (size_t i = 0; i < r->n; i++)
        rl_dispatch_wait_tag(c->d, r->mine[i]->tag, 0);
    if (!r->lost) {
        rl__dlq_wait(c, r->mine, r->n, r->deadline_ms);
        commit_sync(c, r->mine, r->n, rl__now_ms() + c->opts.revoke_timeout_ms);
    }
    rd_kafka_topic_partition_list_t *parts = r->parts;
    rl__part **mine = r->mine;
    size_t n = r->n;
    bool lost = r->lost, unassign = r->unassign;
    r->parts = NULL;
    r->mine = NULL;
    rl__revoke_free(c);
    let_go(c, parts, mine, n, lost, unassign);
    rd_kafka_topic_partition_list_destroy(parts);
    free(mine);
    uv_async_send(&c->wake); /* a close may be waiting for this */
}

static void revoke_look(rl_consumer_t *c)
{
    rl__revoke *r = &c->revoke;
    if (!r->active)
        return;
    uint64_t now = rl__now_ms();
    if (!revoke_waiting(r) || now >= r->deadline_ms)
        revoke_finish(c);
    else
        uv_timer_start(&c->revoke_timer, rl__revoke_timer_cb, r->deadline_ms - now, 0);
}

void rl__revoke_timer_cb(uv_timer_t *t)
{
    revoke_look(t->data);
}

void rl__revoke_kick(rl_consumer_t *c)
{
    /* From inside the dispatcher's on_done: the look happens on the next loop turn. */
    if (c->revoke.active && !revoke_waiting(&c->revoke))
        uv_timer_start(&c->revoke_timer, rl__revoke_timer_cb, 0, 0);
}

static void revoke_begin(rl_consumer_t *c, rd_kafka_topic_partition_list_t *parts, bool lost,
                         bool unassign)
{
    if (c->revoke.active)
        revoke_finish(c);
    rl__revoke *r = &c->revoke;
    r->parts = rd_kafka_topic_partition_list_copy(parts);
    r->mine = ours(c, parts, &r->n);
    if (!r->parts || !r->mine) {
        rl__revoke_free(c);
        release(c, parts, lost, unassign); /* no memory: the blocking way, without waiting */
        return;
    }
    r->lost = lost;
    r->unassign = unassign;
    r->deadline_ms = rl__now_ms() + (lost ? 0 : c->opts.revoke_timeout_ms);
    r->active = true;
    for (size_t i = 0; i < r->n; i++) {
        r->mine[i]->revoking = true;
        rl__stop_starts(r->mine[i]);
        rl_dispatch_take_tag(c->d, r->mine[i]->tag, NULL);
        rl__msgq_clear(&r->mine[i]->pending);
        rl__growth_fence_drop(c, r->mine[i]);
    }
    if (lost)
        revoke_finish(c);
    else
        revoke_look(c); /* at once when nothing is in flight, else when it ends or times out */
}

/* Every partition we hold, as a list. */
static rd_kafka_topic_partition_list_t *held(rl_consumer_t *c)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(8);
    for (uint32_t i = 0; i < c->ntopics; i++)
        for (int32_t k = 0; k < c->topics[i]->nparts; k++)
            if (c->topics[i]->parts[k] && c->topics[i]->parts[k]->assigned)
                rd_kafka_topic_partition_list_add(l, c->topics[i]->name, k);
    return l;
}

/* librdkafka's version that finishes a close begun while its group waited for the assign call
 * (librdkafka issue 4527, fixed in 2.4.0). */
#define KAFKA_LATE_ASSIGN_FIXED 0x020400ff

/* An assignment served after the close began leaving: librdkafka queued it before the close
 * request reached its group thread (serve polls before it leaves, so this is that race), and
 * takes the assign call that assign() made for an unassign of everything
 * (rd_kafka_cgrp_handle_assign_op). Under cooperative-sticky, the close request queued the
 * revoke of the whole new assignment, which releases it as usual; if that assignment is empty
 * there is nothing to revoke, and librdkafka before 2.4.0 then waits forever for an assign
 * call it no longer takes (librdkafka issue 4527): its close never finishes, so the consumer
 * ends its own close without it (serve in consumer.c) and leaves the handle undestroyed
 * (rd_kafka_destroy would wait for the same close); the group drops the member when its session
 * times out. Under the eager protocol the close request left the group at once and nothing
 * more comes: the partitions are released here (none of their messages was taken: a closing
 * consumer takes none, and nothing is committed). tests/test_consumer_close.c serves a first
 * assignment after the close request, under both. */
static void assign_late(rl_consumer_t *c)
{
    rd_kafka_topic_partition_list_t *l = held(c);
    if (!cooperative_of(c)) {
        if (c->async)
            revoke_begin(c, l, false, false);
        else
            release(c, l, false, false);
    } else if (l->cnt == 0 && rd_kafka_version() < KAFKA_LATE_ASSIGN_FIXED) {
        c->kafka_stuck = true;
        c->keep_kafka = true;
        rl__consumer_error(c, RD_KAFKA_RESP_ERR__STATE,
                           "close: an empty assignment came as the consumer began leaving the "
                           "group; librdkafka %s then never finishes closing (librdkafka issue "
                           "4527, fixed in 2.4.0), so the close ends without it and its consumer "
                           "handle is left undestroyed",
                           rd_kafka_version_str());
    }
    rd_kafka_topic_partition_list_destroy(l);
}

void rl__rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                      rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    rl_consumer_t *c = opaque;
    c->commit_hold_until_ms = 0; /* the rebalance that held periodic commits back has come */
    /* After a cooperative revoke librdkafka joins again as soon as the follow-on assign call
     * returns (its join may be written after a commit is checked and before it goes out):
     * periodic commits wait for that join's answer, COMMIT_HOLD_MS at most from the last
     * callback. */
    if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS && cooperative_of(c) &&
        !rd_kafka_assignment_lost(rk) && !c->join_expected) {
        c->join_expected = true;
        c->join_mark = rl__group_joins(c);
    }
    if (c->join_expected)
        c->join_wait_until_ms = rl__now_ms() + COMMIT_HOLD_MS;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        c->assigned_once = true; /* librdkafka has made its assignor's state by now */
        if (c->revoke.active)
            revoke_finish(c); /* not expected while librdkafka waits for the unassign */
        assign(c, parts);
        if (c->leaving)
            assign_late(c);
    } else if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
        if (c->async)
            revoke_begin(c, parts, rd_kafka_assignment_lost(rk) != 0, true);
        else
            release(c, parts, rd_kafka_assignment_lost(rk) != 0, true);
    } else {
        /* librdkafka's advice: drop the whole assignment. Nothing is committed. */
        rl__consumer_error(c, err, "rebalance");
        if (c->revoke.active)
            revoke_finish(c);
        rd_kafka_topic_partition_list_t *l = held(c);
        if (c->async)
            revoke_begin(c, l, true, false);
        else
            release(c, l, true, false);
        rd_kafka_topic_partition_list_destroy(l);
        if (!group_gone(c) && !left_group(c))
            rd_kafka_assign(rk, NULL);
    }
}
