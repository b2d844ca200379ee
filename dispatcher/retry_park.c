/* SPDX-License-Identifier: BSD-2-Clause */
/* Retries that park the key, not the lane.
 *
 * A job whose attempt failed waits for its retry without holding its lane: its key is parked
 * at the key's owner lane (the holder) with the job first and the key's later jobs behind it,
 * and the lanes go on with their other keys. When the retry is due (the loop's timer), the
 * park is marked due and the holder starts it before anything queued: the job runs again, its
 * key's later jobs go to the front of the queue behind it. Until then the job counts as in
 * flight for wait_tag (it has started), and as not started for take_tag (its next attempt has
 * not). The invariants of lane_change.c hold with one more place a key's jobs can be:
 *
 *  I1 A key's not-yet-started jobs are all in one place: its owner's queue, a fence's parked
 *     list, or its park (held by its owner). Parking moves the key's queued jobs, or the parked
 *     jobs of the fence over the key, into the park, under the route lock (read) and the
 *     holder's mutex; submitters route a parked key's jobs to the park.
 *  I2 A parked key has no job in flight, so no fence: a park and a fence never share a key.
 *  I5 Parked jobs count in the holder's `parked`, for which its queue keeps room, so a due park
 *     goes to the queue without allocating; a lane change moves a park whole to the key's new
 *     owner (step A), counting it as incoming there first (step 0).
 *
 * A job that fails inside a batch (batch.c) parks the same way, with the batch's jobs after it
 * (of its key, not ended) first in `later`, before the key's queued or fenced jobs: they came
 * before those. The park makes room for them too; they count in the holder's `parked`.
 *
 * A park's timer entry names it until it fires (the delay is at most backoff_max_ms), so until
 * then only the timer frees it; take_tag and a STOP close unlink it when they hand its jobs
 * back. Once fired (timer_done), whoever unlinks it frees it: the start of its job, or those.
 */
#include "dispatch_internal.h"

#include <stdlib.h>

rl__park *rl__park_for(const rl__lane *holder, uint64_t hash)
{
    for (rl__park *p = holder->parks; p; p = p->next)
        if (p->hash == hash)
            return p;
    return NULL;
}

static size_t park_jobs(const rl__park *p)
{
    return (p->job ? 1 : 0) + p->later.len;
}

static void link_park(rl__lane *h, rl__park *p)
{
    rl__lane_hold(h);
    p->next = h->parks;
    h->parks = p;
    h->nparks++;
    p->holder = h;
    p->linked = true;
    h->parked += park_jobs(p);
    rl__lane_set_depth(h);
}

static void unlink_park(rl__lane *h, rl__park *p)
{
    for (rl__park **q = &h->parks; *q; q = &(*q)->next) {
        if (*q == p) {
            *q = p->next;
            break;
        }
    }
    p->next = NULL;
    p->linked = false;
    h->nparks--;
    h->parked -= park_jobs(p);
    rl__lane_set_depth(h);
}

/* The parked jobs, job first, to the front of the holder's queue (room is kept for them). */
static void unpark_into_queue(rl__lane *h, rl__park *p)
{
    rl__jobq q = {0};
    if (p->job)
        rl__jobq_push(&q, p->job);
    rl__jobq_append(&q, &p->later);
    p->job = NULL;
    rl__lq_prepend(&h->queue, &q);
    rl__lane_set_depth(h);
    rl__lane_ready(h);
}

int rl__park_for_retry(rl__lane *l, rl__job *j, rl__jobq *rest, uint64_t due_ns)
{
    size_t rest_len = rest ? rest->len : 0;
    rl_dispatcher_t *d = l->d;
    rl__park *p = calloc(1, sizeof *p);
    if (!p)
        return RL_ENOMEM;
    p->hash = j->pub.hash;
    p->job = j;
    pthread_rwlock_rdlock(&d->route_lock); /* fences and parks stay where they are */
    rl__lock(&l->mu);
    bool fenced = l->fence.active;
    rl__lane *h = fenced ? l->fence.holder : l;
    rl__unlock(&l->mu);
    rl__lock(&h->mu);
    /* Room in the holder's queue for every parked job, the retrying one included. */
    if (rl__lq_reserve(&h->queue, h->queue.len + h->parked + 1 + rest_len) != 0) {
        rl__unlock(&h->mu);
        pthread_rwlock_unlock(&d->route_lock);
        free(p);
        return RL_ENOMEM;
    }
    if (fenced) {
        /* The key moved while its job ran: its later jobs wait at the holder behind l's fence.
         * They go into the park, and the fence is gone (its job is not in flight any more). */
        rl__fence *f = &l->fence;
        for (rl__fence **q = &h->fences; *q; q = &(*q)->next_held) {
            if (*q == f) {
                *q = f->next_held;
                break;
            }
        }
        f->next_held = NULL;
        h->parked -= f->parked.len;
        if (rest)
            rl__jobq_append(&p->later, rest); /* the batch's jobs after j come first */
        rl__jobq_append(&p->later, &f->parked);
    } else {
        if (rest)
            rl__jobq_append(&p->later, rest);
        /* The key's jobs queued here, in order, join the park. */
        rl__lq *q = &h->queue;
        size_t kept = 0;
        for (size_t i = 0; i < q->len; i++) {
            rl__qent e = *rl__lq_at(q, i);
            if (e.hash == p->hash)
                rl__jobq_push(&p->later, e.job);
            else
                *rl__lq_at(q, kept++) = e;
        }
        q->len = kept;
    }
    link_park(h, p);
    rl__unlock(&h->mu);
    /* l's job in flight is over for now: it goes on with its other keys. */
    rl__lock(&l->mu);
    if (fenced) {
        l->fence.active = false;
        l->fence.holder = NULL;
    }
    l->retried++;
    l->busy = false;
    l->cur_job = NULL;
    l->cur_ticket = 0;
    l->gen++;
    rl__lane_ready(l);
    rl__unlock(&l->mu);
    pthread_rwlock_unlock(&d->route_lock);
    rl__timer_entry e = {.due_ns = due_ns, .kind = RL__TIMER_PARK, .park = p};
    if (rl__timer_add(d, e) != 0) {
        /* No memory for the timer: the retry is due now. */
        pthread_rwlock_rdlock(&d->route_lock);
        if (p->linked) {
            rl__lane *hh = p->holder;
            rl__lock(&hh->mu);
            unlink_park(hh, p);
            unpark_into_queue(hh, p);
            rl__unlock(&hh->mu);
        }
        pthread_rwlock_unlock(&d->route_lock);
        free(p);
    }
    return 0;
}

void rl__park_due(rl_dispatcher_t *d, rl__park *p)
{
    pthread_rwlock_rdlock(&d->route_lock);
    if (p->linked) { /* not handed back meanwhile */
        rl__lane *h = p->holder;
        rl__lock(&h->mu);
        p->due = true;
        p->timer_done = true; /* freed when its job starts */
        rl__lane_ready(h);
        rl__unlock(&h->mu);
        pthread_rwlock_unlock(&d->route_lock);
        return;
    }
    pthread_rwlock_unlock(&d->route_lock);
    free(p);
}

bool rl__parks_due(const rl__lane *l)
{
    for (const rl__park *p = l->parks; p; p = p->next)
        if (p->due)
            return true;
    return false;
}

rl__job *rl__park_start_due(rl__lane *l)
{
    for (rl__park *p = l->parks; p; p = p->next) {
        if (!p->due)
            continue;
        unlink_park(l, p);
        rl__job *j = p->job;
        p->job = NULL;
        rl__lq_prepend(&l->queue, &p->later);
        free(p); /* its timer has fired: nothing names it any more */
        l->busy = true;
        l->cur_hash = j->pub.hash;
        l->cur_tag = j->pub.tag;
        l->cur_job = j;
        rl__lane_set_depth(l);
        return j;
    }
    return NULL;
}

void rl__parks_take_tag(rl__lane *l, int64_t tag, rl__jobq *out)
{
    for (rl__park *p = l->parks, *nx; p; p = nx) {
        nx = p->next;
        if (p->job && p->job->pub.tag == tag) {
            /* The retry goes back: its key's other jobs need not wait for it any more. */
            unlink_park(l, p);
            rl__jobq_push(out, p->job);
            p->job = NULL;
            rl__jobq_take_tag(&p->later, tag, out);
            unpark_into_queue(l, p);
            if (p->timer_done)
                free(p);
        } else {
            l->parked -= rl__jobq_take_tag(&p->later, tag, out);
        }
    }
    rl__lane_set_depth(l);
}

void rl__parks_return_all(rl__lane *l, rl__jobq *out)
{
    while (l->parks) {
        rl__park *p = l->parks;
        unlink_park(l, p);
        if (p->job)
            rl__jobq_push(out, p->job);
        p->job = NULL;
        rl__jobq_append(out, &p->later);
        if (p->timer_done)
            free(p);
    }
}

bool rl__parks_run_tag(const rl__lane *l, int64_t tag)
{
    for (const rl__park *p = l->parks; p; p = p->next)
        if (p->job && p->job->pub.tag == tag)
            return true;
    return false;
}

/* A lane's parks are read under its mutex: a worker starts a due one holding only that. */
void rl__parks_count(rl__lane *l, const rl__route *next, size_t *incoming)
{
    rl__lock(&l->mu);
    for (rl__park *p = l->parks; p; p = p->next) {
        uint32_t node = rl__route_node(next, p->hash);
        if (next->lanes[node] != l)
            incoming[node] += park_jobs(p);
    }
    rl__unlock(&l->mu);
}

void rl__parks_retarget(rl__lane *l, const rl__route *next)
{
    rl__park *moving = NULL;
    rl__lock(&l->mu);
    for (rl__park *p = l->parks, *nx; p; p = nx) {
        nx = p->next;
        if (next->lanes[rl__route_node(next, p->hash)] == l)
            continue;
        unlink_park(l, p);
        p->next = moving;
        moving = p;
    }
    rl__unlock(&l->mu);
    /* One lane's mutex at a time: a park in transit is on no list, so no one starts it. */
    for (rl__park *p = moving, *nx; p; p = nx) {
        nx = p->next;
        rl__lane *to = next->lanes[rl__route_node(next, p->hash)];
        rl__lock(&to->mu);
        link_park(to, p);
        if (p->due)
            rl__lane_ready(to);
        rl__unlock(&to->mu);
    }
}
