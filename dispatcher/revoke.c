/* SPDX-License-Identifier: BSD-2-Clause */
/* Giving back the jobs of one tag (a Kafka partition being revoked, say) and waiting for the
 * ones already running. */
#include "dispatch_internal.h"

static void take_from_queue(rl__lq *q, int64_t tag, rl__jobq *out)
{
    size_t kept = 0;
    for (size_t i = 0; i < q->len; i++) {
        rl__qent e = *rl__lq_at(q, i);
        if (e.job->pub.tag == tag)
            rl__jobq_push(out, e.job);
        else
            *rl__lq_at(q, kept++) = e;
    }
    q->len = kept;
}

/* Under l->mu. True when the lane's job waiting for a retry was taken: the caller lets the
 * lane go on (rl__lane_release_taken) once it has dropped the locks. */
static bool take_from_lane(rl__lane *l, int64_t tag, rl__jobq *out)
{
    take_from_queue(&l->queue, tag, out);
    for (rl__fence *f = l->fences; f; f = f->next_held)
        l->parked -= rl__jobq_take_tag(&f->parked, tag, out);
    rl__parks_take_tag(l, tag, out);
    rl__lane_set_depth(l);
    /* A job waiting for a retry has not started its next attempt: it can go back too. */
    if (l->busy && l->cur_job && (l->in_backoff || l->retry_due) && l->cur_job->pub.tag == tag) {
        rl__jobq_push(out, l->cur_job);
        rl__jobq_append(out, &l->batch); /* the rest of its batch, given again behind it */
        l->cur_job = NULL;
        return true;
    }
    return false;
}

/* After a close in STOP mode: the jobs of `tag` that wait to be handed back when the close
 * finishes. */
static void take_returned(rl_dispatcher_t *d, int64_t tag, rl__jobq *out)
{
    rl__lock(&d->returned_mu);
    rl__jobq_take_tag(&d->returned, tag, out);
    rl__unlock(&d->returned_mu);
}

int rl_dispatch_take_tag(rl_dispatcher_t *d, int64_t tag, size_t *count)
{
    if (count)
        *count = 0;
    if (!d)
        return RL_EINVAL;
    if (!rl__on_loop_thread(d))
        return RL_ESTATE;
    /* Jobs that already finished end first, so that a key's jobs end in order (but for one
     * still in its handler now, which ends when it is done). Jobs that start after the take
     * end after the jobs handed back. */
    rl__deliver_completions(d);
    rl__jobq out = {0};
    /* One moment for all lanes: the route lock for writing (no submission, no fence release,
     * no lane change) and no job starts (executors see starts_paused under their lane's mutex
     * and wait). Scanned one lane after another while workers went on, a key's jobs could
     * start on a lane not yet scanned after its later jobs were taken elsewhere, or a later
     * job of a key under another tag start and finish, and their completions would end on
     * the wrong side of the jobs handed back. The lanes are then looked at one at a time: only
     * those on the held list (a lane off it holds nothing), which drops the ones left empty. */
    rl__lane *taken = NULL; /* lanes whose job was taken from its retry delay */
    bool wake_loop = false; /* a lane the take left idle, for a close or a retiring lane */
    pthread_rwlock_wrlock(&d->route_lock);
    rl__lock(&d->ready_mu);
    atomic_store(&d->starts_paused, true);
    rl__unlock(&d->ready_mu);
    rl__held_take(d);
    for (rl__lane *l = d->held_lanes; l; l = l->next_held_lane) {
        rl__lock(&l->mu);
        if (take_from_lane(l, tag, &out)) {
            l->next_taken = taken;
            taken = l;
        }
        wake_loop |= rl__lane_wants_loop(l);
        rl__unlock(&l->mu);
    }
    rl__held_prune(d, NULL);
    /* Closing, an idle lane off the list would have asked for the loop too. */
    wake_loop |= atomic_load(&d->closing) && d->route.n > 0;
    for (rl__lane *r = d->retiring; r; r = r->next_retiring) {
        rl__lock(&r->mu);
        if (take_from_lane(r, tag, &out)) {
            r->next_taken = taken;
            taken = r;
        }
        wake_loop |= rl__lane_wants_loop(r);
        rl__unlock(&r->mu);
    }
    /* Every job on the completion stack now started before this moment (or was in flight
     * when its lane was looked at), so it comes before the jobs taken in its key's order:
     * those end first. A job still in flight ends after them (the header's exception). */
    rl__collect_completions(d);
    rl__lock(&d->ready_mu);
    atomic_store(&d->starts_paused, false);
    rl__unlock(&d->ready_mu);
    uv_cond_broadcast(&d->ready_cv);
    pthread_rwlock_unlock(&d->route_lock);
    for (rl__lane *l = taken, *nx; l; l = nx) {
        nx = l->next_taken;
        rl__lane_release_taken(l); /* it goes on with its other jobs */
    }
    take_returned(d, tag, &out);
    if (count)
        *count = out.len;
    rl__hand_back(d, &out); /* after the completions collected above */
    rl__check_capacity(d);
    /* As every lane's executor does when it leaves a lane idle: the jobs handed back may have
     * been the last a close or a removed lane waited for, and nothing else would look (a job
     * parked for its retry has no worker to end it, and its timer finds it gone). */
    if (wake_loop)
        uv_async_send(&d->async);
    return 0;
}

static bool lane_runs_tag(rl__lane *l, int64_t tag)
{
    rl__lock(&l->mu);
    bool runs = (l->busy && l->cur_job && l->cur_tag == tag) || rl__parks_run_tag(l, tag);
    rl__unlock(&l->mu);
    return runs;
}

/* The route lock for writing: a job of `tag` that fails while a lane change's fence holds its
 * key's later jobs at another lane is parked at that lane before its own lane lets it go, each
 * under its own lane's mutex with the route lock held for reading (rl__park_for_retry). With
 * the lock for reading here too, a look could see the other lane before the park and its own
 * lane after, and miss the job: wait_tag then returned 0 with it waiting for its retry (the
 * order checker saw it after a lane change, about one run in a hundred under load). */
static bool tag_in_flight(rl_dispatcher_t *d, int64_t tag)
{
    bool runs = false;
    pthread_rwlock_wrlock(&d->route_lock);
    rl__held_take(d); /* a lane off the held list runs nothing */
    for (rl__lane **pp = &d->held_lanes, *l; !runs && (l = *pp); pp = &l->next_held_lane) {
        runs = lane_runs_tag(l, tag);
        if (runs && pp != &d->held_lanes) {
            /* To the front: wait_tag looks again at each completion, and the lane that runs
             * the tag now most likely still does then (a look that walked the list to it each
             * time slowed completions, which wait for this lock, by half at 65,536 lanes). */
            *pp = l->next_held_lane;
            l->next_held_lane = d->held_lanes;
            d->held_lanes = l;
        }
    }
    for (rl__lane *r = d->retiring; r && !runs; r = r->next_retiring)
        runs = lane_runs_tag(r, tag);
    pthread_rwlock_unlock(&d->route_lock);
    return runs;
}

/* Called from a handler (blocking, or asynchronous on the loop) whose job is still in flight
 * with `tag`? */
static bool own_job_has_tag(rl_dispatcher_t *d, int64_t tag)
{
    rl__lane *l = rl__worker_lane;
    if (!l || l->d != d)
        return false;
    rl__lock(&l->mu);
    bool own = l->busy && l->cur_job && l->cur_tag == tag;
    rl__unlock(&l->mu);
    return own;
}

int rl_dispatch_wait_tag(rl_dispatcher_t *d, int64_t tag, uint64_t timeout_ms)
{
    if (!d)
        return RL_EINVAL;
    if (own_job_has_tag(d, tag))
        return RL_ESTATE; /* a handler (blocking or async) waiting for its own job */
    rl__enter(d);
    uint64_t deadline = rl__deadline_after_ms(timeout_ms);
    int rc = 0;
    /* Registered before looking: a worker that finishes after the look sees a waiter. */
    atomic_fetch_add(&d->tag_waiters, 1);
    /* On the loop thread the dispatcher's own loop work cannot run while this waits, so it does
     * that work here: retries that fall due (their timers live on the loop) and, with an
     * asynchronous handler, starting the jobs that are ready. A timer request from another
     * thread wakes this wait. */
    bool on_loop = rl__on_loop_thread(d);
    rl__lock(&d->wait_mu);
    for (;;) {
        if (!tag_in_flight(d, tag))
            break;
        uint64_t until = deadline;
        if (on_loop) {
            /* Without wait_mu: what runs here may end jobs, which takes it. */
            rl__unlock(&d->wait_mu);
            rl__timers_run(d);
            if (d->async_mode)
                rl__run_async_ready(d); /* may add deadlines: the next due is read after */
            uint64_t next = rl__timers_next(d);
            rl__lock(&d->wait_mu);
            if (!tag_in_flight(d, tag))
                break;
            if (rl__timers_pending(d))
                continue; /* asked for meanwhile: its wake-up may have come before this wait */
            if (next < until)
                until = next;
        }
        if (uv_hrtime() >= deadline) {
            rc = RL_ETIMEDOUT;
            break;
        }
        rl__cond_wait_until(&d->wait_cv, &d->wait_mu, until);
    }
    rl__unlock(&d->wait_mu);
    atomic_fetch_sub(&d->tag_waiters, 1);
    if (rl__on_loop_thread(d)) {
        /* Finished jobs pushed their completion before going idle: end them now. */
        rl__deliver_completions(d);
        if (rc == 0 && atomic_load(&d->closing)) {
            /* A STOP close parks the jobs it hands back until it finishes; a job stopped in
             * its retry delay joins them when its worker wakes, which the wait above saw. */
            rl__jobq out = {0};
            take_returned(d, tag, &out);
            rl__hand_back(d, &out);
        }
        rl__check_capacity(d);
    }
    rl__leave(d);
    return rc;
}
