/* SPDX-License-Identifier: BSD-2-Clause */
/* The way of one message: polled, checked against the bad-input policy, submitted to its lane
 * (or kept while its partition is paused), handled, and completed in the offset window. */
#include "consumer_internal.h"

#include <stdio.h>
#include <stdlib.h>

/* HOLDERS. A partition links the jobs it takes, in offset order (offsets only increase), and
 * unlinks each when it is freed. A job is freed when its offset completes (or when it is
 * handed back or stale, in a revoke), so the first job linked is the message at the oldest
 * unfinished offset: the one every commit waits for. The list is per epoch: the first job taken
 * in a new epoch starts a new list, and the jobs of the old one unlink among themselves. 16
 * bytes per message in flight, O(1) a message. */
static void holder_link(rl__part *p, rl__cjob *j)
{
    if (p->held_epoch != p->epoch) {
        p->held_first = p->held_last = NULL;
        p->held_epoch = p->epoch;
    }
    j->hprev = p->held_last;
    j->hnext = NULL;
    if (p->held_last)
        p->held_last->hnext = j;
    else
        p->held_first = j;
    p->held_last = j;
    j->held = true;
}

static void holder_unlink(rl__cjob *j)
{
    if (!j->held)
        return;
    j->held = false;
    rl__part *p = j->part;
    bool current = j->epoch == p->held_epoch; /* else p no longer points into its list */
    if (j->hprev)
        j->hprev->hnext = j->hnext;
    else if (current)
        p->held_first = j->hnext;
    if (j->hnext)
        j->hnext->hprev = j->hprev;
    else if (current)
        p->held_last = j->hprev;
    j->hprev = j->hnext = NULL;
}

const rl__cjob *rl__holder(const rl__part *p)
{
    const rl__cjob *j = p->held_epoch == p->epoch ? p->held_first : NULL;
    return j && j->offset == rl__offsets_oldest(&p->win) ? j : NULL;
}

void rl__cjob_free(rl__cjob *j)
{
    holder_unlink(j);
    if (j->msg)
        rd_kafka_message_destroy(j->msg);
    free(j);
}

static rl__cjob *job_new(rl_consumer_t *c, rl__part *p, rd_kafka_message_t *m)
{
    rl__cjob *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->c = c;
    j->part = p;
    j->epoch = p->epoch;
    j->offset = m->offset;
    j->msg = m;
    j->taken_ms = uv_now(c->loop);
    return j;
}

int rl__dispatch_held(rl_consumer_t *c, rl__part *p, rl__cjob *j)
{
    if (!rl__intake_take(c)) {
        p->rate_held = true;
        return RL_EAGAIN;
    }
    int rc = rl_dispatch_try_submit(c->d, j->msg->key, j->msg->key_len, j, p->tag);
    if (rc == 0) {
        c->stats.dispatched++;
        j->live = true;
        p->live++;
        return 0;
    }
    rl__intake_give_back(c);
    if (rc != RL_EBADKEY)
        return RL_EAGAIN;
    c->stats.bad_keys++; /* the lanes' ring cannot hash what the producers' ring did */
    snprintf(j->reason, sizeof j->reason, "key cannot be hashed by the ring profile");
    rl__dead_letter(c, j);
    return 0;
}

/* Offers one message to the dispatcher (or the dead-letter topic), or skips it when the offset
 * map read at the assignment says it completed. 0: taken; RL_EAGAIN: keep it and try again
 * later (lanes full, window full, the offset map's span full, no lane, out of memory). */
static int offer(rl_consumer_t *c, rl__part *p, rd_kafka_message_t *m)
{
    /* The window's room, and the offset map's: a span that could outgrow the map waits. */
    if (rl__offsets_in_flight(&p->win) >= p->win.cap || !rl__map_admits(c, p, m->offset)) {
        p->window_full = true;
        return RL_EAGAIN;
    }
    if (rl__map_skips(p, m->offset)) {
        /* Completed before this assignment (the committed offset map says so): taken and
         * complete at once, so the watermark passes it as any completed offset. */
        rl__offsets_push(&p->win, m->offset);
        rl__offsets_complete(&p->win, m->offset);
        p->progress++;
        p->window_full = false;
        c->stats.skipped++;
        rd_kafka_message_destroy(m);
        return 0;
    }
    /* The growth fence: a message of a new partition may have to wait for its key's old
     * partition (growth_fence.c). A held one is taken (its offset unfinished in the window, so
     * no commit passes it) and parked in its queue instead of a lane. */
    if (c->fence && m->key_len <= c->opts.max_key_len) {
        uint32_t src = 0;
        int verdict = rl__growth_fence_admit(c, p, m, &src);
        if (verdict == RL__GROWTH_FENCE_BLOCK)
            return RL_EAGAIN;
        if (verdict == RL__GROWTH_FENCE_HOLD) {
            rl__cjob *j = job_new(c, p, m);
            if (!j || rl__growth_fence_hold(c, p, j, src) != 0) {
                free(j);
                return RL_EAGAIN;
            }
            rl__offsets_push(&p->win, m->offset);
            holder_link(p, j);
            p->window_full = false;
            return 0;
        }
    }
    /* The rate limit counts the messages handed to the lanes (not those dead-lettered for
     * their key): one that finds no token is kept, and handed over when one is due. */
    bool to_lanes = m->key && m->key_len ? m->key_len <= c->opts.max_key_len
                                         : c->opts.null_key == RL_CONSUMER_NULL_KEY_PARTITION;
    if (to_lanes && !rl__intake_take(c)) {
        p->rate_held = true;
        return RL_EAGAIN;
    }
    p->rate_held = false;
    rl__cjob *j = job_new(c, p, m); /* the message before the submission: a worker may start
                                       on it at once */
    if (!j) {
        if (to_lanes)
            rl__intake_give_back(c);
        return RL_EAGAIN;
    }

    const void *key = m->key;
    size_t key_len = m->key_len;
    if (!key || !key_len) {
        c->stats.null_keys++;
        if (c->opts.null_key == RL_CONSUMER_NULL_KEY_DEAD_LETTER) {
            snprintf(j->reason, sizeof j->reason, "no key (null-key policy: dead letter)");
            key = NULL;
        } else {
            key = p->null_key;
            key_len = p->null_key_len;
        }
    } else if (key_len > c->opts.max_key_len) {
        c->stats.bad_keys++;
        snprintf(j->reason, sizeof j->reason, "key of %zu bytes, over max_key_len %u", key_len,
                 (unsigned)c->opts.max_key_len);
        key = NULL;
    }
    if (key) {
        int rc = rl_dispatch_try_submit(c->d, key, key_len, j, p->tag);
        if (rc != 0)
            rl__intake_give_back(c);
        if (rc == RL_EBADKEY) {
            c->stats.bad_keys++;
            snprintf(j->reason, sizeof j->reason, "key cannot be hashed by the ring profile");
        } else if (rc != 0) {
            free(j); /* full, no lane, closing or out of memory: all pass (m stays ours) */
            return RL_EAGAIN;
        } else {
            c->stats.dispatched++;
            j->live = true;
            p->live++;
        }
    }
    /* The window has room (checked above) and offsets only increase: this cannot fail. */
    rl__offsets_push(&p->win, m->offset);
    holder_link(p, j);
    p->window_full = false;
    if (j->reason[0])
        rl__dead_letter(c, j);
    return 0;
}

void rl__on_message(rl_consumer_t *c, rd_kafka_message_t *m)
{
    if (m->err) {
        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
            rl__consumer_error(c, m->err, "%s", rd_kafka_message_errstr(m));
        rd_kafka_message_destroy(m);
        return;
    }
    rl__part *p = rl__part_of_message(c, m);
    if (!p || !p->assigned || p->revoking || c->closing) {
        /* Not ours (any more): never dispatched, never committed, read again by its owner. */
        rd_kafka_message_destroy(m);
        return;
    }
    if (p->next_offset >= 0 && m->offset < p->next_offset) {
        c->stats.refetched++;
        rd_kafka_message_destroy(m);
        return;
    }
    p->next_offset = m->offset + 1;
    c->stats.consumed++;
    if (p->pending.len == 0 && offer(c, p, m) == 0)
        return;
    /* Refused, or behind refused ones: kept in order. The partition pauses only when that
     * backlog is long: a pause makes librdkafka drop what it fetched beyond and fetch it again
     * on resume (rl__part_resume). */
    if (c->fence)
        rl__growth_fence_kept(c, p, m); /* counted when its partition is held whole */
    if (rl__msgq_push(&p->pending, m) != 0) {
        /* Out of memory: let librdkafka fetch it again from here once the partition resumes
         * (dropping it would let the watermark pass it). */
        int64_t offset = m->offset;
        rd_kafka_message_destroy(m);
        p->next_offset = offset;
        rl__part_pause(c, p);
        rl__part_seek(c, p, offset);
        return;
    }
    if (p->pending.len >= c->opts.pending_max && !p->paused) {
        rl__part_pause(c, p);
        if (p->rate_held)
            c->stats.rate_pauses++; /* its backlog waits for the rate limit */
    }
}

void rl__drain_pending(rl_consumer_t *c, rl__part *p)
{
    if (!p->assigned || p->revoking || c->closing)
        return;
    rd_kafka_message_t *m;
    while ((m = rl__msgq_front(&p->pending))) {
        if (offer(c, p, m) != 0)
            break;
        rl__msgq_pop(&p->pending);
    }
    /* Resumed at half, so that fetching restarts while the rest of the backlog drains. */
    if (p->paused && p->pending.len <= c->opts.pending_max / 2)
        rl__part_resume(c, p);
}

void rl__drain_all_pending(rl_consumer_t *c)
{
    /* With a rate limit the first partition drained takes the tokens there are: each call
     * starts one partition further on (over every partition slot), so the tokens go round and
     * no partition's backlog waits behind another's. Without one, from the first. */
    rl__growth_fence_release(c); /* held messages released but refused by full lanes first */
    size_t slots = 0;
    for (uint32_t i = 0; c->rate_on && i < c->ntopics; i++)
        slots += (size_t)c->topics[i]->nparts;
    size_t from = slots ? (size_t)(c->drain_turn++ % slots) : 0;
    for (int pass = 0; pass < 2; pass++) { /* the slots from `from` on, then those before it */
        size_t at = 0;
        for (uint32_t i = 0; i < c->ntopics; i++) {
            rl__topic *t = c->topics[i];
            for (int32_t k = 0; k < t->nparts; k++, at++) {
                if ((at >= from) != (pass == 0))
                    continue;
                rl__part *p = t->parts[k];
                if (p && p->assigned && (p->paused || p->pending.len))
                    rl__drain_pending(c, p);
            }
        }
    }
}

void rl__complete(rl_consumer_t *c, rl__part *p, int64_t offset)
{
    if (rl__offsets_complete(&p->win, offset) == 0)
        p->progress++;
    if (p->window_full && p->pending.len)
        rl__drain_pending(c, p);
}

/* --- the dispatcher's callbacks --- */

/* A worker may have taken a job from its lane a moment before the loop began the partition's
 * revoke or loss: rl_dispatch_take_tag cannot take it back, and a lost partition's jobs in
 * flight are not waited for. Without this look its handler would begin after on_rebalance said
 * REVOKED or LOST, when the partition may be someone else's. The loop stores before it takes
 * the jobs back; the worker loads after it took the job. */
void rl__stop_starts(rl__part *p)
{
    atomic_store_explicit(&p->start_epoch, 0, memory_order_seq_cst);
}

static bool may_start(const rl__cjob *j)
{
    return atomic_load_explicit(&j->part->start_epoch, memory_order_seq_cst) == j->epoch;
}

int rl__job_handler(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    rl_consumer_t *c = rl_dispatch_get_data(d);
    rl__cjob *j = job->data;
    if (!may_start(j)) {
        j->not_started = true; /* rl__job_done counts it stale: the next owner reads it */
        return 0;
    }
    atomic_store_explicit(&j->running, true, memory_order_relaxed);
    int rc = c->opts.handler(c, j->msg, job->attempts + 1);
    if (rc)
        atomic_fetch_add_explicit(&j->failures, 1, memory_order_relaxed);
    atomic_store_explicit(&j->running, false, memory_order_relaxed);
    return rc;
}

int rl__job_batch_handler(rl_dispatcher_t *d, rl_dispatch_job *const *jobs, size_t n, int *status)
{
    rl_consumer_t *c = rl_dispatch_get_data(d);
    bool start = true; /* a batch's jobs are of one tag (one partition): all or none */
    for (size_t i = 0; i < n && start; i++)
        start = may_start(jobs[i]->data);
    if (!start) {
        for (size_t i = 0; i < n; i++)
            ((rl__cjob *)jobs[i]->data)->not_started = true;
        return 0;
    }
    const rd_kafka_message_t *msgs[RL_DISPATCH_BATCH_MAX];
    for (size_t i = 0; i < n; i++)
        msgs[i] = ((rl__cjob *)jobs[i]->data)->msg;
    return c->opts.batch_handler(c, msgs, n, status);
}

static void unlink_started(rl__cjob *j)
{
    if (!j->in_started)
        return;
    if (j->sprev)
        j->sprev->snext = j->snext;
    else
        j->part->started = j->snext;
    if (j->snext)
        j->snext->sprev = j->sprev;
    j->sprev = j->snext = NULL;
    j->in_started = false;
}

/* On the loop thread: starts an attempt of an asynchronous job. A job of a partition that is
 * being revoked (a retry that fell due after the revoke took the queued jobs back) or that is
 * no longer ours is not started: it ends at once and counts for nothing. */
/* A started job waits in its partition's started list (rl__abandon looks there), put first:
 * the jobs of a batch, linked last to first, then lie together in their order, so rl__abandon
 * meets a batch's first job before the others. */
static void link_started(rl__part *p, rl__cjob *j, uint64_t ticket)
{
    unlink_started(j);
    j->ticket = ticket;
    j->batch_next = NULL;
    j->sprev = NULL;
    j->snext = p->started;
    if (p->started)
        p->started->sprev = j;
    p->started = j;
    j->in_started = true;
}

void rl__job_async(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    rl_consumer_t *c = rl_dispatch_get_data(d);
    rl__cjob *j = job->data;
    rl__part *p = j->part;
    if (!p->assigned || p->epoch != j->epoch || p->revoking) {
        j->abandoned = true;
        rl_dispatch_complete(d, job->ticket, 0);
        return;
    }
    atomic_store_explicit(&j->failures, job->attempts, memory_order_relaxed);
    link_started(p, j, job->ticket);
    c->opts.async_handler(c, j->msg, job->attempts + 1, job->ticket);
}

/* As rl__job_async for a batch: its jobs are of one tag, so of one partition; they are linked
 * (batch_next) so that an abandon ends them together (they share the ticket). */
void rl__job_async_batch(rl_dispatcher_t *d, rl_dispatch_job *const *jobs, size_t n)
{
    rl_consumer_t *c = rl_dispatch_get_data(d);
    rl__cjob *first = jobs[0]->data;
    rl__part *p = first->part;
    bool gone = !p->assigned || p->revoking;
    for (size_t i = 0; i < n && !gone; i++)
        gone = ((rl__cjob *)jobs[i]->data)->epoch != p->epoch;
    if (gone) {
        for (size_t i = 0; i < n; i++)
            ((rl__cjob *)jobs[i]->data)->abandoned = true;
        rl_dispatch_complete(d, jobs[0]->ticket, 0);
        return;
    }
    const rd_kafka_message_t *msgs[RL_DISPATCH_BATCH_MAX];
    for (size_t i = n; i-- > 0;) {
        rl__cjob *j = jobs[i]->data;
        link_started(p, j, jobs[i]->ticket);
        j->batch_next = i + 1 < n ? jobs[i + 1]->data : NULL;
        msgs[i] = j->msg;
    }
    c->opts.async_batch_handler(c, msgs, n, jobs[0]->ticket);
}

/* Ends the partition's asynchronous jobs in flight now (a revoke that waited long enough, or a
 * lost partition): their tickets turn stale, so the application's completions answer
 * RL_ESTALE, and their results count for nothing. A job the application completed a moment
 * before keeps its result (its end is delivered by the wait_tag after this). */
void rl__abandon(rl_consumer_t *c, rl__part *p)
{
    for (rl__cjob *j = p->started, *next; j; j = next) {
        next = j->snext;
        if (!j->ticket || j->abandoned)
            continue;
        /* A job and the rest of its batch, if any: one ticket ends them all. The first job of
         * a batch comes first in the list; a later one met first has a void ticket (its batch
         * ended, the first with it) and ends on its own. */
        uint64_t ticket = j->ticket;
        for (rl__cjob *b = j; b; b = b->batch_next)
            b->abandoned = true;
        bool ended = rl_dispatch_complete(c->d, ticket, 0) == 0;
        for (rl__cjob *b = j; b; b = b->batch_next) {
            if (ended) {
                c->stats.abandoned++;
                if (b->live && p->live)
                    p->live--;
                b->live = false;
            } else {
                b->abandoned = false; /* completed or timed out meanwhile: it ends on its own */
            }
            b->ticket = 0;
        }
    }
}

void rl__job_done(rl_dispatcher_t *d, rl_dispatch_job *job, int outcome)
{
    rl_consumer_t *c = rl_dispatch_get_data(d);
    rl__cjob *j = job->data;
    rl__part *p = j->part;
    unlink_started(j);
    j->ticket = 0;
    if (j->live && p->epoch == j->epoch && p->live)
        p->live--;
    j->live = false;
    if (p->revoking)
        rl__revoke_kick(c);
    bool current = p->assigned && p->epoch == j->epoch && !j->abandoned && !j->not_started;
    if (outcome == RL_DISPATCH_RETURNED) {
        c->stats.returned++;
    } else if (!current) {
        c->stats.stale++; /* revoked meanwhile: the next owner reads it again */
    } else if (outcome == RL_DISPATCH_DONE) {
        c->stats.done++;
        rl__complete(c, p, j->offset);
    } else {
        j->attempts = job->attempts;
        snprintf(j->reason, sizeof j->reason, "handler failed %u times, last result %d",
                 (unsigned)job->attempts, job->status);
        rl__dead_letter(c, j);
        return;
    }
    rl__cjob_free(j);
}

void rl__on_capacity(rl_dispatcher_t *d)
{
    rl__drain_all_pending(rl_dispatch_get_data(d));
}
