/* SPDX-License-Identifier: BSD-2-Clause */
/* Batches: a lane's unit in flight made of up to batch_max jobs of one key and one tag, the
 * key's next ones in the lane, given to the handler at once.
 *
 * A batch is the lane's job in flight, widened: cur_job is its first job, l->batch the others
 * (in order, on no list), and cur_hash and cur_tag are the batch's as they were the job's. So
 * the lane-change protocol (lane_change.c) holds unchanged: a change that takes the batch's key
 * from the lane arms the lane's one fence for that key, and the key's later jobs wait behind it
 * until the whole batch has ended; take_tag and wait_tag see one tag in flight. This is why a
 * batch holds one key: a batch of several keys would need a fence per key of it (I2, one fence
 * per lane, would not hold), and a key leaving the lane would wait for the other keys' jobs.
 * It takes the key's next jobs from the queue, looking at up to 8 x batch_max entries: jobs of
 * other keys between them stay queued, in their order (each key's order is all the lane
 * promises), so keys that share a lane with their jobs interleaved still make batches. A job
 * of the key with another tag ends the batch (the key's jobs are never taken out of order).
 *
 * Ending a batch goes through its jobs in order: a success ends DONE (published at once, so the
 * key's on_done calls keep their order); the first failure ends the walk. The failed job is
 * retried with its key parked, and the batch's jobs after it are parked first behind it
 * (retry_park.c), so none of them ends before it; a job dead-lettered instead ends, and the jobs
 * after it stay the lane's unit in flight and run again at once (retry_due: no other job of
 * the key could start in between, and no room is needed to put them back); a STOP close hands
 * the job and those after it back. The statuses after the first failure are not read: a job
 * after it may have been run on the strength of a state the failure left out.
 */
#include "dispatch_internal.h"

#include <string.h>

/* How far into the queue a batch looks for its key's jobs: SCAN_FACTOR x batch_max entries, so
 * that keys sharing a lane with their jobs interleaved still make batches, at a bounded cost
 * per batch (the entries' key positions are read, the jobs only for the key's). */
#define SCAN_FACTOR 8

/* Under l->mu: takes up to `max` of the queued jobs of key `hash` and tag `tag` (in order: the
 * key's first jobs, up to one of another tag) among the first `scan` entries, appending them
 * to out; the other entries keep their order. Returns how many. */
static size_t take_key_jobs(rl__lq *q, uint64_t hash, int64_t tag, size_t max, size_t scan,
                            rl__jobq *out)
{
    size_t taken = 0, end = 0;
    while (end < q->len && end < scan && taken < max) {
        rl__qent *e = rl__lq_at(q, end);
        if (e->hash == hash) {
            if (e->job->pub.tag != tag)
                break; /* the key's next job is of another tag: the batch ends before it */
            rl__jobq_push(out, e->job);
            e->job = NULL;
            taken++;
        }
        end++;
    }
    if (!taken)
        return 0;
    /* Close the holes: the entries kept move towards the end of the looked-at part, in order,
     * and the queue starts `taken` later. */
    size_t w = end;
    for (size_t i = end; i-- > 0;) {
        rl__qent e = *rl__lq_at(q, i);
        if (e.job)
            *rl__lq_at(q, --w) = e;
    }
    q->head = (q->head + taken) & (q->cap - 1);
    q->len -= taken;
    return taken;
}

size_t rl__batch_take(rl__lane *l, rl__job *j, rl_dispatch_job **jobs, size_t max)
{
    rl_dispatcher_t *d = l->d;
    size_t n = 0;
    jobs[n++] = &j->pub;
    /* The rest of a batch run again (after a dead letter, or a retry that waited in place). */
    for (rl__job *b = l->batch.head; b && n < max; b = b->next)
        jobs[n++] = &b->pub;
    if (n >= max || !l->queue.len)
        return n;
    /* The key's next jobs: all of the key's jobs not started are in this queue (its owner's),
     * in order, unless a fence took the key elsewhere, and then none is here. */
    rl__jobq more = {0};
    size_t taken =
        take_key_jobs(&l->queue, j->pub.hash, j->pub.tag, max - n, SCAN_FACTOR * max, &more);
    if (!taken)
        return n;
    for (rl__job *b = more.head; b; b = b->next)
        jobs[n++] = &b->pub;
    rl__jobq_append(&l->batch, &more);
    rl__lane_set_depth(l);
    if (l->blocked && l->queue.len + l->parked <= rl__low_water(d->opts.lane_capacity)) {
        l->blocked = false;
        rl__space_notify(d);
    }
    return n;
}

bool rl__batch_ended(rl__lane *l, const int *status, int rc)
{
    rl_dispatcher_t *d = l->d;
    rl__lock(&l->mu);
    rl__job *j = l->cur_job;
    rl__jobq rest = l->batch;
    l->batch = (rl__jobq){0};
    rl__unlock(&l->mu);
    for (size_t i = 0;; i++) {
        int st = status ? status[i] : rc;
        int outcome = RL_DISPATCH_DONE;
        if (st == 0) {
            j->pub.attempts++;
            j->pub.status = 0;
        } else {
            outcome = rl__attempt_failed(l, j, st);
            if (outcome < 0)
                return rl__attempt_retry(l, j, &rest); /* the rest parked behind it */
            if (outcome == RL_DISPATCH_RETURNED) {
                rl__lock(&l->mu);
                l->batch = rest; /* handed back behind it (rl__job_finished) */
                rl__unlock(&l->mu);
            }
        }
        if (!rest.len || outcome == RL_DISPATCH_RETURNED) {
            rl__job_finished(l, j, outcome); /* the last: the lane lets go of the key */
            return true;
        }
        bool sampled;
        uint64_t latency = rl__job_publish(d, j, outcome, &sampled);
        rl__lock(&l->mu);
        rl__lane_count_end(l, sampled, latency, outcome);
        j = rl__jobq_pop(&rest);
        l->cur_job = j;
        if (outcome == RL_DISPATCH_DEAD) {
            /* The jobs after a dead letter run again at once, still the lane's unit. */
            l->batch = rest;
            l->retry_due = true;
            rl__lane_ready(l);
            rl__unlock(&l->mu);
            return true;
        }
        rl__unlock(&l->mu);
    }
}

bool rl__batch_serve(rl__lane *l, rl__job *j)
{
    rl_dispatcher_t *d = l->d;
    rl_dispatch_job *jobs[RL_DISPATCH_BATCH_MAX];
    int status[RL_DISPATCH_BATCH_MAX];
    size_t n = rl__batch_take(l, j, jobs, d->opts.batch_max > 1 ? d->opts.batch_max : 1);
    rl__unlock(&l->mu);
    memset(status, 0, n * sizeof *status);
    int rc = d->opts.batch_handler(d, jobs, n, status);
    bool over = rl__batch_ended(l, rc ? NULL : status, rc);
    rl__lock(&l->mu);
    return over;
}
