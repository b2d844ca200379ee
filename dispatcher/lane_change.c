/* Lane membership changes (add_lane, remove_lane) that keep every key's order.
 *
 * THE PROTOCOL
 *
 * Routing is a ring over lane names. A key's jobs live in exactly one place at a time: its
 * lane's queue, or the parked list of a fence (below). A change computes the new ring, then, in
 * one critical section under the route lock held for writing (submitters excluded; workers keep
 * running, except while their own lane's mutex is taken for a moment):
 *
 *  A. Retarget fences. Each lane L has at most one fence: "the key of L's in-flight job (hash h)
 *     now belongs to lane H (the holder); jobs of h wait in the fence's parked list until L has
 *     finished that job". If the new ring gives h back to L, the fence dissolves: its parked jobs
 *     go to the end of L's queue (L runs them after its in-flight job, so order holds). If it
 *     gives h to another lane, the fence with its parked list moves there whole.
 *  B. Arm fences. Each lane L with a job in flight (in its handler or waiting for a retry) and
 *     no fence, whose key h the new ring gives to another lane D, gets a fence for h held by D.
 *     Arming and the worker's "job finished" step both happen under L's mutex, so a fence is
 *     armed only while the job is still in flight and the worker always sees it.
 *  C. Move queued jobs. Every lane that can lose keys (all lanes on add, the removed lane on
 *     remove) is scanned front to back; each job whose key the new ring gives to another lane D
 *     is unlinked and appended, in scan order, to D's fence for that key if D holds one, else to
 *     the end of D's queue.
 *     B and C run for one lane under one hold of its mutex. Apart, the worker could pop the
 *     next job of a key between them: B would see the lane idle, and C would move the key's
 *     later jobs to a lane that starts them at once, beside the one just popped.
 *  D. Publish the new route. A removed lane is marked retiring: it gets no new jobs, finishes
 *     its in-flight job, releases its fence and stops; the loop thread joins it.
 *
 * When a worker's job ends, it publishes the completion, marks itself idle and, if its fence is
 * active, takes the route lock for reading and splices the parked list to the front of the
 * holder's queue (release). Submitters, under the same read lock and the holder's mutex, append
 * a job whose key has a fence at the holder to the parked list instead of the queue.
 *
 * INVARIANTS
 *
 *  I1 Single place: all not-yet-started jobs of a key are either in its owner's queue or, when a
 *     fence for the key exists, in that fence's parked list (which is held by the owner). A
 *     key's jobs are never split between two queues.
 *  I2 One fence per key, one per lane: a fence exists only for the key of its lane's in-flight
 *     job, and a lane starts no other job before releasing it, so a key never has two.
 *  I3 Order: moving, parking, splicing and dissolving keep relative order; a key's jobs that
 *     were queued before a change come before those submitted after it (submitters wait for the
 *     critical section, then route by the new ring to the same place the moved jobs went).
 *  I4 Exclusion: a job of key h starts only when no other job of h is in flight: the lane that
 *     owns h either is the lane running h (so it is busy with it) or holds h's jobs behind a
 *     fence until the lane running h finishes.
 *  I5 Nothing lost or duplicated: jobs are only ever moved between lists, under the locks that
 *     guard both lists; the critical section allocates nothing and cannot fail half-way.
 *  I6 Keys that do not move are not held: no fence is placed on them; their lane pauses only
 *     while its queue is scanned (on add, under its mutex) for the keys that leave.
 *
 * The critical section costs one ring lookup per queued job of the scanned lanes and allocates
 * nothing; everything it needs (the new ring, the lane array, the new lane and its thread) is
 * made before it, so a failure leaves the dispatcher as it was.
 */
#include "dispatch_internal.h"

#include <stdlib.h>
#include <string.h>

/* The lane of `hash` in a route; NULL if the ring is empty. */
static rl__lane *owner(const rl__route *r, uint64_t hash)
{
    uint32_t node;
    if (rl_ring_lookup_hash(r->ring, hash, &node) != 0)
        return NULL;
    return r->lanes[node];
}

static void unlink_fence(rl__lane *holder, rl__fence *f)
{
    for (rl__fence **p = &holder->fences; *p; p = &(*p)->next_held) {
        if (*p == f) {
            *p = f->next_held;
            break;
        }
    }
    f->next_held = NULL;
    holder->parked -= f->parked.len;
    rl__lane_set_depth(holder);
}

static void link_fence(rl__lane *holder, rl__fence *f)
{
    f->next_held = holder->fences;
    holder->fences = f;
    f->holder = holder;
    holder->parked += f->parked.len;
    rl__lane_set_depth(holder);
}

/* The fence of `hash` held by lane h, or NULL. Under the route lock and h's mutex. */
static rl__fence *fence_at(const rl__lane *h, uint64_t hash)
{
    for (rl__fence *f = h->fences; f; f = f->next_held)
        if (f->hash == hash)
            return f;
    return NULL;
}

rl__fence *rl__fence_for(const rl__lane *holder, uint64_t hash)
{
    return holder->fences ? fence_at(holder, hash) : NULL;
}

static void wake(rl__lane *l)
{
    if (l->sleeping)
        uv_cond_signal(&l->cv);
}

/* The worker of l finished the job its fence waits for. */
void rl__fence_release(rl__lane *l)
{
    rl_dispatcher_t *d = l->d;
    pthread_rwlock_rdlock(&d->route_lock);
    rl__fence *f = &l->fence;
    if (f->active) { /* a change may have dissolved it meanwhile */
        rl__lane *h = f->holder;
        uv_mutex_lock(&h->mu);
        unlink_fence(h, f);
        rl__jobq_prepend(&h->queue, &f->parked);
        rl__lane_set_depth(h);
        wake(h);
        uv_mutex_unlock(&h->mu);
        uv_mutex_lock(&l->mu);
        f->active = false;
        f->holder = NULL;
        uv_mutex_unlock(&l->mu);
    }
    pthread_rwlock_unlock(&d->route_lock);
}

/* Step A for one lane's fence. */
static void retarget_fence(rl__lane *l, const rl__route *next)
{
    rl__fence *f = &l->fence;
    if (!f->active)
        return;
    rl__lane *to = owner(next, f->hash), *from = f->holder;
    if (to == from)
        return;
    uv_mutex_lock(&from->mu);
    unlink_fence(from, f);
    uv_mutex_unlock(&from->mu);
    if (to == l) { /* the key came home: l runs its parked jobs after its in-flight one */
        uv_mutex_lock(&l->mu);
        rl__jobq_append(&l->queue, &f->parked);
        f->active = false;
        f->holder = NULL;
        rl__lane_set_depth(l);
        wake(l);
        uv_mutex_unlock(&l->mu);
    } else {
        uv_mutex_lock(&to->mu);
        link_fence(to, f);
        uv_mutex_unlock(&to->mu);
    }
}

/* Steps B and C for one lane, under one hold of its mutex: were they apart, the worker could
 * start a job after B found it idle, and C would then move that key's later jobs unfenced.
 * moved[i] collects the jobs for next->lanes[i] (their queues); parked[i] counts jobs put into
 * fences already held by that lane. `scan`: the lane can lose keys, so its queue is walked. */
static void fence_and_move(rl__lane *l, const rl__route *next, bool scan, rl__jobq *moved,
                           size_t *parked)
{
    uv_mutex_lock(&l->mu);
    rl__lane *armed_at = NULL;
    if (l->busy && !l->fence.active) {
        rl__lane *to = owner(next, l->cur_hash);
        if (to && to != l) {
            l->fence.active = true;
            l->fence.hash = l->cur_hash;
            l->fence.parked = (rl__jobq){0};
            armed_at = to;
        }
    }
    if (scan) {
        rl__job *keep_head = NULL, **keep_tail = &keep_head, *keep_last = NULL;
        size_t kept = 0;
        rl__job *j = l->queue.head;
        while (j) {
            rl__job *nx = j->next;
            uint32_t node;
            rl_ring_lookup_hash(next->ring, j->pub.hash, &node);
            rl__lane *to = next->lanes[node];
            if (to == l) {
                *keep_tail = j;
                keep_tail = &j->next;
                keep_last = j;
                kept++;
            } else if (to == armed_at && j->pub.hash == l->fence.hash) {
                rl__jobq_push(&l->fence.parked, j); /* counted when the fence is linked */
            } else {
                /* Fence lists of other lanes change only under the route lock, held here for
                 * writing, so they can be read without their lane's mutex. */
                rl__fence *f = rl__fence_for(to, j->pub.hash);
                if (f) {
                    rl__jobq_push(&f->parked, j);
                    parked[node]++;
                } else {
                    rl__jobq_push(&moved[node], j);
                }
            }
            j = nx;
        }
        *keep_tail = NULL;
        l->queue.head = keep_head;
        l->queue.tail = keep_last;
        l->queue.len = kept;
        rl__lane_set_depth(l);
    }
    uv_mutex_unlock(&l->mu);
    if (armed_at) {
        uv_mutex_lock(&armed_at->mu);
        link_fence(armed_at, &l->fence);
        uv_mutex_unlock(&armed_at->mu);
    }
}

/* Jobs a lane holds (queued, parked at it, in flight). Under its mutex. */
static bool lane_holds_jobs(const rl__lane *l)
{
    return l->queue.len || l->parked || l->busy || l->fence.active;
}

/* Applies a change under the route lock. `added` is the new lane (or NULL), `removed` the lane
 * that leaves (or NULL). Returns RL_EBUSY, changing nothing, when the last lane would go while
 * it still holds jobs. */
static int apply_change(rl_dispatcher_t *d, rl__route *next, rl__lane *removed, rl__jobq *moved,
                        size_t *parked)
{
    rl__route *cur = &d->route;
    uint64_t t0 = uv_hrtime();
    pthread_rwlock_wrlock(&d->route_lock);
    if (atomic_load(&d->closing)) {
        pthread_rwlock_unlock(&d->route_lock);
        return RL_ECLOSED;
    }
    if (next->n == 0) {
        /* The last lane goes: only when nothing is left anywhere for a ring to route. */
        bool busy = false;
        uv_mutex_lock(&removed->mu);
        busy = lane_holds_jobs(removed);
        uv_mutex_unlock(&removed->mu);
        for (rl__lane *r = d->retiring; r && !busy; r = r->next_retiring) {
            uv_mutex_lock(&r->mu);
            busy = r->fence.active;
            uv_mutex_unlock(&r->mu);
        }
        if (busy) {
            pthread_rwlock_unlock(&d->route_lock);
            return RL_EBUSY;
        }
    } else {
        /* A */
        for (size_t i = 0; i < cur->n; i++)
            retarget_fence(cur->lanes[i], next);
        for (rl__lane *r = d->retiring; r; r = r->next_retiring)
            retarget_fence(r, next);
        /* B and C */
        for (size_t i = 0; i < cur->n; i++) {
            rl__lane *l = cur->lanes[i];
            fence_and_move(l, next, !removed || l == removed, moved, parked);
        }
        for (size_t i = 0; i < next->n; i++) {
            if (!moved[i].len && !parked[i])
                continue;
            rl__lane *to = next->lanes[i];
            uv_mutex_lock(&to->mu);
            rl__jobq_append(&to->queue, &moved[i]);
            to->parked += parked[i];
            rl__lane_set_depth(to);
            wake(to);
            uv_mutex_unlock(&to->mu);
        }
    }
    /* D */
    rl__route old = *cur;
    *cur = *next;
    *next = old;
    if (removed) {
        uv_mutex_lock(&removed->mu);
        removed->retiring = true;
        uv_cond_signal(&removed->cv);
        uv_mutex_unlock(&removed->mu);
        removed->next_retiring = d->retiring;
        d->retiring = removed;
    }
    pthread_rwlock_unlock(&d->route_lock);

    uint64_t took = uv_hrtime() - t0;
    atomic_fetch_add(&d->changes, 1);
    atomic_store(&d->last_change_ns, took);
    if (took > atomic_load(&d->max_change_ns))
        atomic_store(&d->max_change_ns, took);
    return 0;
}

/* The lane array of `ring`, taking lanes by name from the current route, `added` for its own. */
static int lanes_for(rl_dispatcher_t *d, rl_ring_t *ring, rl__lane *added, rl__route *out)
{
    size_t n = rl_ring_member_count(ring);
    out->ring = ring;
    out->n = n;
    out->lanes = calloc(n ? n : 1, sizeof *out->lanes);
    if (!out->lanes)
        return RL_ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        const char *name = rl_ring_node_name(ring, i);
        uint32_t k;
        if (rl_ring_find(d->route.ring, name, &k) == 0)
            out->lanes[i] = d->route.lanes[k];
        else
            out->lanes[i] = added;
    }
    return 0;
}

/* Runs a change whose new ring is made; frees what is not kept. */
static int change(rl_dispatcher_t *d, rl_ring_t *ring, rl__lane *added, rl__lane *removed)
{
    rl__route next;
    int rc = lanes_for(d, ring, added, &next);
    size_t n = next.n ? next.n : 1;
    rl__jobq *moved = rc ? NULL : calloc(n, sizeof *moved);
    size_t *parked = rc ? NULL : calloc(n, sizeof *parked);
    if (!rc && (!moved || !parked))
        rc = RL_ENOMEM;
    if (!rc)
        rc = apply_change(d, &next, removed, moved, parked);
    if (!rc) {
        /* Keys may have moved from a full lane to one with room. */
        rl__space_notify(d);
        rl__check_capacity(d);
    }
    /* On success `next` holds the old route now; on failure still the new one. */
    rl_ring_free(next.ring);
    free(next.lanes);
    free(moved);
    free(parked);
    return rc;
}

static int check_call(rl_dispatcher_t *d, const char *name)
{
    if (!d || !name)
        return RL_EINVAL;
    if (!rl__on_loop_thread(d))
        return RL_ESTATE;
    if (atomic_load(&d->closing))
        return RL_ECLOSED;
    return 0;
}

int rl_dispatch_add_lane(rl_dispatcher_t *d, const char *name)
{
    int rc = check_call(d, name);
    if (rc)
        return rc;
    rl_member m = {.name = name, .weight = 1, .zone = NULL};
    uint32_t k;
    if (rl_ring_find(d->route.ring, name, &k) == 0)
        return RL_EDUPNAME;
    if (d->route.n >= RL_DISPATCH_LANES_MAX)
        return RL_ERANGE;
    rl_ring_t *ring;
    rc = rl_ring_add(d->route.ring, &m, &ring);
    if (rc)
        return rc;
    rl__lane *lane = NULL;
    rc = rl__lane_new(d, name, &lane);
    if (!rc) {
        rc = rl__lane_start(lane);
        if (rc)
            rl__lane_free(lane);
    }
    if (rc) {
        rl_ring_free(ring);
        return rc;
    }
    rc = change(d, ring, lane, NULL);
    if (rc) {
        /* Nothing routes to the new lane: stop its idle worker. */
        uv_mutex_lock(&lane->mu);
        lane->retiring = true;
        uv_cond_signal(&lane->cv);
        uv_mutex_unlock(&lane->mu);
        uv_thread_join(&lane->thread);
        rl__lane_free(lane);
    }
    return rc;
}

int rl_dispatch_remove_lane(rl_dispatcher_t *d, const char *name)
{
    int rc = check_call(d, name);
    if (rc)
        return rc;
    uint32_t k;
    if (rl_ring_find(d->route.ring, name, &k) != 0)
        return RL_ENOENT;
    rl__lane *removed = d->route.lanes[k];
    rl_ring_t *ring;
    rc = rl_ring_remove(d->route.ring, name, &ring);
    if (rc)
        return rc;
    return change(d, ring, NULL, removed);
}
